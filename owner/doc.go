// Package owner is a data owner's daemon: it serves one or more datasets
// (a source of rows and its schema: a CSV file or a PostgreSQL table or
// query, see package source), watches the proxy for jobs that name it
// (polling when the proxy serves it no watch; see watch.go), checks
// each against its policy and its privacy ledger, computes and encrypts its
// local statistics (with its DP noise share when the plan asks for one) and
// uploads them once, with retries.
//
// Nothing an owner sends about a job depends on its rows but its encrypted,
// noised statistics: a decline is one code of a closed public list
// (job.Decline), with the detail in the owner's own log and local status;
// rows that cannot be read are skipped and rows beyond the job's public
// per-owner cap are dropped (counted locally), so one row never changes
// whether the owner uploads. The owner uploads only under a committee key
// that every committee member attested, of the committee its own policy
// pins and at least its policy's size and threshold
// (transport.VerifyCommittee, job.CommitteePolicy): a proxy that
// substitutes its own key, or runs a committee of one, gets a decline,
// never an upload.
//
// Before computing a share the owner reserves the job's rho in the
// dataset's ledger (charged at the tolerated-collusion level, the job's
// calibrated rho) and declines the job (code budget) if the remaining budget
// is short; it commits when the upload is acknowledged, releases a
// reservation it never uploaded, and refunds a job that fails before any
// key switch. The encrypted upload is stored before it is sent, so a re-send
// after a crash is byte-for-byte the same upload (the proxy acknowledges it
// again) and never fresh noise.
package owner
