// Package chaos is fedpca's chaos suite: Run deploys episodes of simulated
// clusters (package sim) from a seed, runs jobs on each under random faults
// (dropped, delayed and duplicated messages through package faultnet,
// partitions, crashes and restarts of every role, a proxy process killed,
// the proxy's disk filled) and checks the system's invariants after every
// job: a job ends, an upload once acknowledged is counted, a release is the
// exact sum of its owners' statistics (plus noise), the budget never goes
// negative, every key switch is audited, and so on (Invariant). `fedpca
// simulate chaos` and `make chaos` run it.
//
// It is a package of its own because it is a client of the cluster harness,
// not part of it: it imports package sim, which never imports it
// (scripts/check-imports.sh holds both to that). A violation is reproduced
// from the run's seed and the episode's index (Config.Episodes).
package chaos
