package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/user"
)

// timing measures when owners' uploads reach the proxy (suite timing): a
// deployment over loopback TCP and mutual TLS with three owners of d = 30
// and 1,000, 10,000 and 100,000 rows, `reps` PCA jobs for each upload hold,
// and the moments the proxy recorded (its operator status), from each job's
// creation. For each pair of owners it prints the medians and the best
// accuracy a threshold on the moment reaches in telling the two apart
// (0.5: no better than a coin): what the proxy, or whoever it tells,
// learns of the row counts from the timing alone. The best of many
// thresholds over few jobs is above 0.5 by chance alone: the last column is
// that level, one owner's odd jobs against its even ones.
func timing(ctx context.Context, holds []time.Duration, reps int) {
	rows := []int{1000, 10000, 100000}
	var owners []sim.OwnerConfig
	var sch *schema.Schema
	for i, n := range rows {
		data := sim.Synthetic(n, 30, 2, uint64(i+1))
		if sch == nil {
			var err error
			sch, err = schema.Infer(bytes.NewReader(data), "timing", "label")
			check(err)
		}
		owners = append(owners, sim.OwnerConfig{ID: fmt.Sprintf("rows-%d", n), Schema: sch, CSV: data})
	}
	fmt.Printf("| upload hold | jobs | upload at (median, ms from the job's creation) 1k / 10k / 100k rows | share computed (median ms) 1k / 10k / 100k | threshold accuracy 1k vs 10k | 1k vs 100k | 10k vs 100k | null: one owner's odd jobs vs its even ones (1k / 10k / 100k) |\n|---|---|---|---|---|---|---|---|\n")
	for _, hold := range holds {
		dir, err := os.MkdirTemp("", "fedpca-timing-")
		check(err)
		for i := range owners {
			owners[i].UploadHold = hold
		}
		cl, err := sim.Start(ctx, sim.Config{Dir: dir, CSPs: 2, Threshold: 2, Owners: owners, TCP: true, Users: []string{"alice"}, ProgressInterval: time.Second})
		check(err)
		u, err := cl.User("alice")
		check(err)
		at := make([][]float64, len(owners))
		share := make([][]float64, len(owners))
		for range reps {
			before, err := cl.OwnerShares()
			check(err)
			js := pcaJob(ctx, cl, u, sch, sim.IDs(owners), false)
			after, err := cl.OwnerShares()
			check(err)
			for _, o := range js.Owners {
				i := slices.IndexFunc(owners, func(oc sim.OwnerConfig) bool { return oc.ID == o.ID })
				at[i] = append(at[i], float64(o.At.Sub(js.Created).Microseconds())/1000)
				share[i] = append(share[i], (after[o.ID].Sum-before[o.ID].Sum)*1000)
			}
		}
		u.Close()
		cl.Stop()
		os.RemoveAll(dir)
		halves := func(x []float64) float64 {
			var odd, even []float64
			for i, v := range x {
				if i%2 == 0 {
					even = append(even, v)
				} else {
					odd = append(odd, v)
				}
			}
			return thresholdAccuracy(odd, even)
		}
		fmt.Printf("| %v | %d | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.2f | %.2f | %.2f | %.2f / %.2f / %.2f |\n", hold, reps, median(at[0]), median(at[1]), median(at[2]),
			median(share[0]), median(share[1]), median(share[2]), thresholdAccuracy(at[0], at[1]), thresholdAccuracy(at[0], at[2]), thresholdAccuracy(at[1], at[2]),
			halves(at[0]), halves(at[1]), halves(at[2]))
	}
}

// pcaJob runs a PCA job of the owners through the cluster as user u and
// returns the proxy's record of it (its operator status: each owner's
// answer and when), once the user has its result when fetch is set, once
// the job ended otherwise.
func pcaJob(ctx context.Context, cl *sim.Cluster, u *user.Client, sch *schema.Schema, owners []string, fetch bool) proxy.JobStatus {
	spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 3, Epsilon: 1, Owners: owners, Deadline: time.Now().Add(5 * time.Minute)})
	check(err)
	_, err = u.Submit(ctx, spec, sch)
	check(err)
	_, err = u.Wait(ctx, spec.ID(), nil)
	check(err)
	if fetch {
		_, err = u.Fetch(ctx, spec, sch)
		check(err)
	}
	st := cl.Proxy().Status(spec.ID())
	k := slices.IndexFunc(st.Jobs, func(j proxy.JobStatus) bool { return j.ID == spec.ID() })
	if k < 0 {
		check(fmt.Errorf("job %s not in the status", spec.ID()))
	}
	return st.Jobs[k]
}

// thresholdAccuracy is the best accuracy of telling samples a from samples
// b by one threshold on the value (either way round), with equal priors.
func thresholdAccuracy(a, b []float64) float64 {
	cuts := append(append([]float64{math.Inf(-1)}, a...), b...)
	best := 0.5
	for _, c := range cuts {
		la, lb := 0.0, 0.0 // fractions at or below c
		for _, x := range a {
			if x <= c {
				la++
			}
		}
		for _, x := range b {
			if x <= c {
				lb++
			}
		}
		acc := 0.5*la/float64(len(a)) + 0.5*(1-lb/float64(len(b)))
		best = max(best, acc, 1-acc)
	}
	return best
}
