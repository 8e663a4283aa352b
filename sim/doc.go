// Package sim runs a whole fedpca deployment in one process: the real role
// packages (csp, proxy, owner, user) over in-memory gRPC (bufconn) or
// loopback TCP, with real mutual TLS from a freshly made CA. Tests, `fedpca
// simulate` and `fedpca demo` use it, so what they measure is what the
// daemons do.
//
// Every connection goes through a faultnet.Network, a seeded fault injector
// (drop, delay and duplicate messages, partition nodes, crash them); package
// sim/chaos (`fedpca simulate chaos`, `make chaos`) runs many jobs under
// random faults from a seed and checks the system's invariants after every
// one. Package sim/procs runs the proxy or farms of owners as processes
// (Config.Processes). The cluster measures its nodes from their Prometheus
// metrics, never from their logs.
package sim
