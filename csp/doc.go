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
// draws a fresh secret and returns its public-key share and an X25519
// exchange key, both signed with the member's certificate key; for a
// thresholdized committee, DealShares seals the member's Shamir shares to
// every member's exchange key and signs each box, and ReceiveShares opens and
// aggregates only boxes signed by their dealer; Finalize checks that the
// committee key is the aggregate of every member's signed share (its own the
// one it made), signs the key statement (job.KeyStatement) that owners and
// users require from every member, and writes the secrets and the
// attestation to disk. A proxy that substitutes a key or a share gets no
// attestation. A finalized member accepts a
// new ceremony only while it has never switched a job. A round replayed with
// the same request gets the same answer (a second KeyGen or DealShares would
// otherwise draw a new secret or new shares and break the committee key); a
// different request for a round already done, or a round out of order, is
// FailedPrecondition.
package csp
