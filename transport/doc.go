// Package transport is what every fedpca daemon and client shares below the
// protocol: node identities, mutual TLS 1.3, the authorization table of every
// RPC, the gRPC interceptors (recovery, logging, authorization) and the
// certificates of a deployment.
//
// Identity. A node is its key: KeyFingerprint, the SHA-256 of its
// certificate's public key, is what every trust decision compares. Its
// X.509 certificate names it for people, as a SPIFFE ID
// spiffe://<domain>/<role>/<id> (e.g. spiffe://hospital-a/owner/hospital-a),
// issued by its organisation's CA, whose trust domain is the ID's. A node's
// trust store (Trust, trust.json) lists the domains it accepts, each with its
// CAs, the roles accepted from it and its roster of nodes by key; Verify
// accepts a certificate only of a listed domain's own CAs (go-spiffe's
// X509-SVID verification), for an accepted role, and of the roster's key
// where the roster lists it. Org is an organisation's directory (fedpca certs
// init, issue, export, import); CA.WriteDeployment the one-machine layout of
// one CA (fedpca certs --out). Servers require and verify client
// certificates; clients verify the server's in the same way and its role
// (and ID when they know it). A plaintext mode exists only behind an
// explicit insecure flag for local tests: the caller's identity is then
// taken on trust from a request header, and the daemons say so loudly.
//
// Authorization. Authorization lists, for every RPC, the roles allowed to
// call it; anything else is PermissionDenied. Finer checks (an owner
// uploading only to jobs that name it, a user reading only its own jobs)
// belong to the handlers.
package transport
