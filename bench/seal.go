package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
)

// seal measures what the proxy's progress tick protects (suite seal): a
// job whose owners have all answered is sealed at the first tick after the
// last answer, and the seal is what the user sees of the owners' timing.
// Three owners of d = 10 over loopback TCP and mutual TLS, PCA jobs of
// either three owners of `small` rows or two of them and one of `large`
// rows, alternately, at each upload hold; the proxy's own record of each
// answer (its operator status) gives the last answer's moment t from the
// job's creation. Each seal rule is a function of t alone: at once
// (t itself), at the first tick of a grid of interval T at or after t (the
// proxy's rule), or at t plus a delay drawn uniformly in [0, T) (a tick
// drawn at random). For each rule it prints the median seal and the best
// accuracy a threshold on the seal reaches in telling the two kinds of
// jobs apart (0.5: a coin): what the user learns of whether one owner holds
// `large` rows. Then the time from submit to result of `reps` jobs of three
// small owners at each interval, the proxy sealing by its rule.
func seal(ctx context.Context, holds []time.Duration, intervals []time.Duration, small, large, reps int) {
	const d = 10
	var sch *schema.Schema
	var owners []sim.OwnerConfig
	for i, n := range []int{small, small, small, large} {
		data := sim.Synthetic(n, d, 2, uint64(i+1))
		if sch == nil {
			var err error
			sch, err = schema.Infer(bytes.NewReader(data), "seal", "label")
			check(err)
		}
		owners = append(owners, sim.OwnerConfig{ID: fmt.Sprintf("owner-%d", i), Schema: sch, CSV: data})
	}
	smallJob, largeJob := sim.IDs(owners[:3]), append(sim.IDs(owners[:2]), owners[3].ID)
	fmt.Printf("| upload hold | rule | seal, s from creation (median, min-max): %d / %d rows | threshold accuracy |\n|---|---|---|---|\n", small, large)
	for _, hold := range holds {
		for i := range owners {
			owners[i].UploadHold = hold
		}
		dir, err := os.MkdirTemp("", "fedpca-seal-")
		check(err)
		// A fine grid: each job is sealed soon after its last answer, whose
		// moment is what is measured (the rules are computed from it).
		cl, err := sim.Start(ctx, sim.Config{Dir: dir, CSPs: 2, Threshold: 2, Owners: owners, TCP: true, Users: []string{"alice"}, ProgressInterval: 20 * time.Millisecond})
		check(err)
		u, err := cl.User("alice")
		check(err)
		var last [2][]float64 // seconds: small jobs, large jobs
		for i := range 2 * reps {
			js := pcaJob(ctx, cl, u, sch, [][]string{smallJob, largeJob}[i%2], false)
			t := 0.0
			for _, o := range js.Owners {
				t = math.Max(t, o.At.Sub(js.Created).Seconds())
			}
			last[i%2] = append(last[i%2], t)
		}
		u.Close()
		cl.Stop()
		os.RemoveAll(dir)
		rng := rand.New(rand.NewPCG(uint64(hold), 43))
		row := func(rule string, f func(float64) float64) {
			var s [2][]float64
			for j := range 2 {
				for _, t := range last[j] {
					s[j] = append(s[j], f(t))
				}
			}
			fmt.Printf("| %v | %s | %.3f (%.3f-%.3f) / %.3f (%.3f-%.3f) | %.2f |\n", hold, rule, median(s[0]), slices.Min(s[0]), slices.Max(s[0]),
				median(s[1]), slices.Min(s[1]), slices.Max(s[1]), thresholdAccuracy(s[0], s[1]))
		}
		row("at the last answer", func(t float64) float64 { return t })
		for _, iv := range intervals {
			T := iv.Seconds()
			row(fmt.Sprintf("first tick of %v at or after it", iv), func(t float64) float64 { return math.Ceil(t/T) * T })
			row(fmt.Sprintf("a delay drawn in [0, %v)", iv), func(t float64) float64 { return t + T*rng.Float64() })
		}
	}
	// Submit to result, three small owners, owners' default hold.
	fmt.Printf("\n| progress interval | submit to result (median, min-max s), %d jobs of 3 owners x %d rows, d = %d, hold 1s |\n|---|---|\n", reps, small, d)
	for i := range owners {
		owners[i].UploadHold = time.Second
	}
	for _, iv := range intervals {
		dir, err := os.MkdirTemp("", "fedpca-seal-")
		check(err)
		cl, err := sim.Start(ctx, sim.Config{Dir: dir, CSPs: 2, Threshold: 2, Owners: owners[:3], TCP: true, Users: []string{"alice"}, ProgressInterval: iv})
		check(err)
		u, err := cl.User("alice")
		check(err)
		var took []float64
		for range reps {
			start := time.Now()
			pcaJob(ctx, cl, u, sch, smallJob, true)
			took = append(took, time.Since(start).Seconds())
		}
		u.Close()
		cl.Stop()
		os.RemoveAll(dir)
		fmt.Printf("| %v | %.2f (%.2f-%.2f) |\n", iv, median(took), slices.Min(took), slices.Max(took))
	}
}
