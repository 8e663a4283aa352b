// Package csp is a crypto service provider (CSP) committee member: it takes
// part in the committee's key ceremony, keeps its secret key share at rest in
// a file readable by its user only, and computes key-switch shares that
// re-encrypt a job's blinded sum to the job's user, with its DP noise share
// folded in. Only the proxy may call it.
//
// A member switches a job only if the user signed its spec (certificate from
// the deployment's CA, role user, the spec's user ID), only to the key whose
// fingerprint the spec names, only for this committee's key, and at most once
// per job: the shares it computed are stored with an audit record, and a
// retry of the same request gets the same shares back (new shares would mean
// fresh noise, and two releases to average). Any other request for a switched
// job is refused.
//
// Key ceremony (coordinated by the proxy, which relays every message): KeyGen
// draws a fresh secret and returns a commitment to its public-key share
// (job.KeyShareCommitment, with a secret nonce) and an X25519 exchange key,
// both signed with the member's certificate key; RevealKeyShare, given a
// commitment for every member, each signed by the member at that point for
// this ceremony (its own the one it made), keeps them and only then reveals
// the share and its nonce, against one set of commitments per ceremony, so no
// member (even one colluding with the proxy) picks its share after seeing
// another's; for a thresholdized committee, DealShares seals the member's
// Shamir shares to every member's exchange key and signs each box, and
// ReceiveShares opens and aggregates only boxes signed by their dealer;
// Finalize checks that the committee key is the aggregate of one share per
// member, each opening the commitment it holds for that point, signs the key
// statement (job.KeyStatement) that owners and users require from every
// member, binds its switch log to the new key and writes the secrets and the
// attestation to disk. A proxy that substitutes a key or a share gets no
// attestation. A finalized member accepts a new ceremony only while it has
// never switched a job. A round replayed with the same request gets the same
// answer (a second KeyGen or DealShares would otherwise draw a new secret or
// new shares and break the committee key); a different request for a round
// already done, or a round out of order, is FailedPrecondition.
//
// The switch log (csp.db) is bound to the member's key (switchlog.go): a
// member refuses to start on a log that is not its key's, since without it
// it would switch an old job again with fresh noise.
package csp
