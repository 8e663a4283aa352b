// Command bench measures fedpca end to end with the simulator and prints the
// Markdown tables of docs/BENCHMARKS.md. It runs the real role packages; the
// proxy runs as a separate process (so that its peak memory is its own) and
// owners run in farm processes.
//
//	go run ./bench -suite owners   [-owners 10,100,1000,10000] [-reps 3]
//	go run ./bench -suite dims     [-dims 8,50,100,784] [-owners 10] [-reps 3]
//	go run ./bench -suite utility  [-reps 5] [-datasets wdbc,wine,...]
//	go run ./bench -suite load     [-owners 1000]
//	go run ./bench -suite sources  [-rows 10000,100000,1000000] [-dims 10]
//	go run ./bench -suite profile  [-reps 5] [-datasets ...] [-quantiles 0,0.5] [-shares 0]
//	go run ./bench -suite pipeline [-rows 200000] [-dims 100] [-reps 5] [-python python3,/usr/bin/python3]
//	go run ./bench -suite timing   [-holds 0s,250ms,1s] [-reps 20]
//	go run ./bench -suite split-sweep [-split R/V/N,...] [-add-one]
//	go run ./bench -suite dca-sweep   [-split R/V/N,...] [-add-one]
//
// Raw reports go to -json (one JSON document per run, one per line).
package main
