package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/profile"
	"github.com/fedpca/fedpca/sim"
)

// profileSuite compares, at epsilon 1 and delta 1e-6 in total, the private
// two-job pipeline (declared bounds, profile, main PCA job) with today's
// default (the pooled private mean and std taken for free, C = 1), both
// measured against the standardised, unclipped rows: median q/q0 (k = 5)
// over reps jobs per cell, and the fraction of rows each clips.
func profileSuite(ctx context.Context, names []string, quantiles, shares []float64, reps int) {
	fmt.Println("| dataset | n | d | default (free mean/std, C = 1): q/q0, clipped | profile share | quantile | auto-schema q/q0 | clipped | variances at the noise level | public scales, private C: q/q0, clipped |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
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
		declared, err := sim.DeclareBounds(data, name, "label", sim.DefaultWiden)
		check(err)
		auto, err := sim.NewSimulator(ctx, sim.Simulation{Data: data, Name: name, Label: "label", Schema: declared, Owners: 3, Seed: 1})
		check(err)
		for _, share := range shares {
			for _, q := range quantiles {
				var aq, cl, noisy, kq, kc, qs []float64
				failed := 0
				for range reps {
					r, err := def.RunAuto(ctx, sim.AutoOptions{JobOptions: sim.JobOptions{Analysis: job.PCA, K: 5, Epsilon: 1}, Share: share, Quantile: q, KeepScales: true})
					check(err)
					kq, kc = append(kq, r.Utility.CapturedVarianceRatio), append(kc, r.Utility.ClippedFraction)
				}
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
					aq, qs = append(aq, r.Utility.CapturedVarianceRatio), append(qs, r.Profile.Quantile)
					cl, noisy = append(cl, r.Utility.ClippedFraction), append(noisy, float64(at))
				}
				if len(aq) == 0 {
					fmt.Printf("| %s | %d | %d | %.3f, %.2f | %s | %s | failed %d of %d | | | %.3f, %.2f |\n", name, rowsOf(data), declared.D(),
						median(dq), median(dc), shareText(share), quantileText(q, nil), failed, reps, median(kq), median(kc))
					continue
				}
				note := ""
				if failed > 0 {
					note = fmt.Sprintf(" (%d of %d failed)", failed, reps)
				}
				fmt.Printf("| %s | %d | %d | %.3f, %.2f | %s | %s | %.3f%s | %.2f | %.0f of %d | %.3f, %.2f |\n", name, rowsOf(data), declared.D(),
					median(dq), median(dc), shareText(share), quantileText(q, qs), median(aq), note, median(cl), median(noisy), declared.D(), median(kq), median(kc))
			}
		}
		auto.Close()
		def.Close()
	}
	fmt.Fprintln(os.Stderr, "medians over", reps, "jobs per cell")
}

// shareText names a share cell.
func shareText(share float64) string {
	if share == 0 {
		return fmt.Sprintf("default (%g; %g with public scales)", profile.DefaultShare, profile.DefaultNormsShare)
	}
	return fmt.Sprint(share)
}

// quantileText names a quantile cell: q, or "auto (the ones chosen)".
func quantileText(q float64, chosen []float64) string {
	if q != 0 {
		return fmt.Sprint(q)
	}
	seen := map[float64]bool{}
	var out []string
	for _, c := range chosen {
		if !seen[c] {
			seen[c] = true
			out = append(out, fmt.Sprint(c))
		}
	}
	return "auto (" + strings.Join(out, ", ") + ")"
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
