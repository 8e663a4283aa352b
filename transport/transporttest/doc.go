// Package transporttest helps tests of gRPC services: credentials issued in
// memory, and every RPC of a service called with empty messages, for
// authorization tests.
package transporttest
