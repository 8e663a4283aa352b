package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/sim"
)

func main() {
	ctx := context.Background()
	s, err := sim.NewSimulator(ctx, sim.Simulation{Data: sim.Synthetic(10000, 50, 5, 1), Name: "synthetic-d50", Label: "label",
		Owners: 1000, How: "iid", Seed: 1, CSPs: 3, Threshold: 2, TCP: true})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	f, _ := os.Create("/tmp/sim-cpu.pb.gz")
	pprof.StartCPUProfile(f)
	start := time.Now()
	last := int32(-1)
	rep, err := s.Run(ctx, sim.JobOptions{Analysis: job.PCA, K: 5, Epsilon: 1, Plan: dp.PlanServers, Progress: func(st *fedpcav1.JobStatus) {
		if u := st.GetOwnersUploaded(); u/100 != last/100 {
			last = u
			fmt.Printf("%6.2fs uploaded %d\n", time.Since(start).Seconds(), u)
		}
	}})
	pprof.StopCPUProfile()
	if err != nil {
		panic(err)
	}
	fmt.Printf("total %.2fs window %.2fs aggregate %.2fs\n", rep.Timings.Total, rep.Timings.UploadWindow, rep.Timings.Aggregate)
}
