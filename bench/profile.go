package main

import (
	"context"
	"fmt"
	"os"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/sim"
)

// profileSuite compares, at epsilon 1 and delta 1e-6 in total, the private
// two-job pipeline (declared bounds, profile, main PCA job) with today's
// default (the pooled private mean and std taken for free, C = 1), both
// measured against the standardised, unclipped rows: median q/q0 (k = 5)
// over reps jobs per cell, and the fraction of rows each clips.
func profileSuite(ctx context.Context, names []string, quantiles, shares []float64, reps int) {
	fmt.Println("| dataset | n | d | default (free mean/std, C = 1): q/q0, clipped | profile share | quantile | auto-schema q/q0 | clipped | variances at the noise level |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, name := range names {
		data, err := datasets.CSV(name)
		check(err)
		def, err := sim.NewSimulator(ctx, sim.Simulation{Data: data, Name: name, Label: "label", Owners: 3, Seed: 1})
		check(err)
		var dq, dc []float64
		for range reps {
			r, err := def.Run(ctx, sim.JobOptions{Analysis: job.PCA, K: 5, Epsilon: 1})
			check(err)
			u, err := def.StandardUtility(r.Result, def.Schema())
			check(err)
			dq, dc = append(dq, u.CapturedVarianceRatio), append(dc, u.ClippedFraction)
		}
		def.Close()
		declared, err := sim.DeclareBounds(data, name, "label", sim.DefaultWiden)
		check(err)
		auto, err := sim.NewSimulator(ctx, sim.Simulation{Data: data, Name: name, Label: "label", Schema: declared, Owners: 3, Seed: 1})
		check(err)
		for _, share := range shares {
			for _, q := range quantiles {
				var aq, cl, noisy []float64
				failed := 0
				for range reps {
					r, err := auto.RunAuto(ctx, sim.AutoOptions{JobOptions: sim.JobOptions{Analysis: job.PCA, K: 5, Epsilon: 1}, Share: share, Quantile: q})
					if err != nil {
						// The profile refuses a noisy count too small to divide by.
						fmt.Fprintf(os.Stderr, "%s share %g quantile %g: %v\n", name, share, q, err)
						failed++
						continue
					}
					at := 0
					for _, b := range r.Profile.Estimate.AtNoise {
						if b {
							at++
						}
					}
					aq = append(aq, r.Utility.CapturedVarianceRatio)
					cl, noisy = append(cl, r.Utility.ClippedFraction), append(noisy, float64(at))
				}
				if len(aq) == 0 {
					fmt.Printf("| %s | %d | %d | %.3f, %.2f | %g | %g | failed %d of %d | | |\n", name, rowsOf(data), declared.D(),
						median(dq), median(dc), share, q, failed, reps)
					continue
				}
				note := ""
				if failed > 0 {
					note = fmt.Sprintf(" (%d of %d failed)", failed, reps)
				}
				fmt.Printf("| %s | %d | %d | %.3f, %.2f | %g | %g | %.3f%s | %.2f | %.0f of %d |\n", name, rowsOf(data), declared.D(),
					median(dq), median(dc), share, q, median(aq), note, median(cl), median(noisy), declared.D())
			}
		}
		auto.Close()
	}
	fmt.Fprintln(os.Stderr, "medians over", reps, "jobs per cell")
}

func rowsOf(data []byte) int {
	n := 0
	for _, b := range data {
		if b == '\n' {
			n++
		}
	}
	return n - 1
}
