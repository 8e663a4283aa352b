// Package faultnet is an in-memory network with seeded fault injection, for
// the simulator and its chaos suite: every connection a simulated node opens
// or accepts passes through a Network, which drops, delays and duplicates
// messages (gRPC client interceptors), partitions pairs of nodes and crashes
// nodes. A Bridge carries a process's TCP connections through it.
//
// It exists apart from package sim because it knows nothing of fedpca: it
// sees nodes by name and gRPC calls by method, and imports no fedpca package
// (scripts/check-imports.sh holds it to that), so it can be reasoned about
// and tested as a network, not as a deployment.
package faultnet
