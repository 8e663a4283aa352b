// Package transport is what every fedpca daemon and client shares below the
// protocol: node identities, mutual TLS 1.3, the authorization table of every
// RPC, the gRPC interceptors (recovery, logging, authorization) and the
// certificates of a deployment.
//
// Identity. Every node has an X.509 certificate from the deployment's CA
// whose URI SAN names its role and ID, spiffe://fedpca/<role>/<id>, e.g.
// spiffe://fedpca/owner/hospital-a. Servers require and verify client
// certificates; clients verify the server's chain and its role (and ID when
// they know it). A plaintext mode exists only behind an explicit insecure
// flag for local tests: the caller's identity is then taken on trust from a
// request header, and the daemons say so loudly.
//
// Authorization. Authorization lists, for every RPC, the roles allowed to
// call it; anything else is PermissionDenied. Finer checks (an owner
// uploading only to jobs that name it, a user reading only its own jobs)
// belong to the handlers.
package transport
