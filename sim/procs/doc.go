// Package procs runs simulated nodes as processes of the fedpca binary and
// measures them: Launcher starts the proxy or a farm of owners (many owners
// in one process, past per-process file descriptor limits) from one typed
// NodeConfig each (`fedpca simulate node --config FILE`, RunNode on the
// child's side), and reads their figures from their Prometheus /metrics
// and /proc, never from their logs or a hand-built command line. RunLoad
// (`go run ./bench -suite load`, `make load`) releases many owners' uploads
// at once against a proxy process.
//
// It is apart from package sim so that the cluster harness stays one
// process: sim defines the Launcher interface and the node specs, procs
// implements them; sim never imports procs.
package procs
