// Package proxy is the fedpca proxy: it coordinates the CSP committee's key
// ceremony and publishes the committee key with every member's attestation
// of it (owners and users accept no other), registers jobs signed by users,
// receives owners' encrypted statistics and folds them into each job's
// running sum, seals a job at the first progress tick after all its owners
// answered (or at its deadline with at least min_owners), adds its DP
// noise share and a uniform mask,
// asks the committee to re-encrypt the blinded sum to the user's key,
// removes the mask and hands the result to the user.
//
// State lives in an embedded transactional store (bbolt). An upload is
// acknowledged only after one transaction has written the new running sum
// together with the owner's inclusion record, so a crash at any point loses
// no acknowledged upload, and memory and disk per job stay O(size of one
// upload) whatever the number of owners (the number of uploads buffered at
// once is bounded). Every job step (sealing, blinding, each member's shares,
// unblinding) is one transaction, and a restarted proxy resumes every job
// from its last committed step. The masks are kept until the job ends.
//
// Every ciphertext is folded in at most once: the same transaction records
// its SHA-256 (32 bytes per ciphertext, kept for good), and an upload holding
// a ciphertext seen before, in this job or another, is refused (an old
// upload replayed to a later job). Encryption is randomised, so honest
// uploads never repeat; an owner re-sending its own upload to the same job
// is acknowledged again before its ciphertexts are read.
//
// The proxy never sees a plaintext statistic: it holds ciphertexts under the
// committee key, its own noise share and the masks.
//
// Users and owners learn a running job's progress only at its ticks (counts,
// never who uploaded nor when: progress.go), since an upload's moment grows
// with its owner's rows. For operators only (a loopback address, or HTTPS
// with an operator certificate: transport.ServeOperator),
// Config.StatusListener serves a status page of the jobs (each owner's
// answer and its time), the committee's health and the owners' reported
// budgets, in HTML and JSON (status.go), and Config.MetricsListener the
// Prometheus metrics and the profiler.
package proxy
