package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/profile"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
)

// profileSuite is the honest comparison of docs/BENCHMARKS.md ("Profile
// job"): for every bundled dataset and the synthetic clinical cohort, at a
// total epsilon 1 and delta 1e-6, the fully private pipeline (profile, then
// the standardised main PCA) with the owners declaring (a) the observed
// range widened by a quarter on each side and (b) ranges ten times the
// observed range (widened by 4.5 of it on each side, and by 0.5 below and
// 8.5 above: the same width off-centre; the cohort also under its
// hospitals' clinical ranges), against the free peek (the pooled
// mean and std for free, C chosen privately: the ceiling) and against
// diffprivlib's central PCA given the same bounds (dpLibPCA, epsilon 1).
// Every figure is q/q0 of the top k (5; 3 for the cohort) against the
// standardised, unclipped rows, the mean of reps runs. The jobs are
// emulated centrally (sim.CentralAuto: the protocol's releases with every
// party honest, noise from a fixed stream); protocol runs of the same
// pipeline are in the same section.
func profileSuite(_ context.Context, names []string, reps int) {
	fmt.Println("| dataset | n | d | n mu/sqrt(d) | free peek | bounds | private (this) | private (earlier: moments) | diffprivlib PCA (raw / range-scaled) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	mu := dp.GaussMu(1, job.DefaultDelta) * math.Sqrt(1-profile.DefaultShare)
	for _, name := range append(names, "cohort") {
		data, label, k := []byte(nil), "label", 5
		if name == "cohort" {
			data, label, k = sim.ClinicalCohort(6600, 1), "", 3
		} else {
			var err error
			data, err = datasets.CSV(name)
			check(err)
		}
		peekSchema, err := schema.Infer(bytes.NewReader(data), name, label)
		check(err)
		x, err := sim.RawRows(data, peekSchema)
		check(err)
		n, d := x.Dims()
		o := sim.AutoOptions{JobOptions: sim.JobOptions{Analysis: job.PCA, K: k, Epsilon: 1}}
		peek := meanOf(reps, func(r int) float64 {
			po := o
			po.KeepScales = true
			rep, err := sim.CentralAuto(data, peekSchema, po, fmt.Sprintf("%s/peek/%d", name, r))
			check(err)
			return rep.Utility.CapturedVarianceRatio
		})
		type bounds struct {
			name string
			sch  *schema.Schema
		}
		var bs []bounds
		for _, w := range []struct {
			name         string
			below, above float64
		}{{"(a) observed range widened by 1/4", sim.DefaultWiden, sim.DefaultWiden}, {"(b) 10x the observed range", 4.5, 4.5},
			{"(b') 10x, off-centre (0.5 of the range below, 8.5 above)", 0.5, 8.5}} {
			s, err := sim.DeclareBoundsSides(data, name, label, w.below, w.above)
			check(err)
			bs = append(bs, bounds{w.name, s})
		}
		if name == "cohort" {
			s, err := sim.CohortSchema(name)
			check(err)
			bs = append(bs, bounds{"(c) clinical ranges", s})
		}
		for _, b := range bs {
			auto := map[string]float64{}
			for _, method := range []string{profile.Quantiles, profile.Moments} {
				auto[method] = meanOf(reps, func(r int) float64 {
					ao := o
					ao.Method = method
					rep, err := sim.CentralAuto(data, b.sch, ao, fmt.Sprintf("%s/%s/%s/%d", name, b.name, method, r))
					if err != nil {
						fmt.Fprintf(os.Stderr, "%s %s %s: %v\n", name, b.name, method, err)
						return math.NaN()
					}
					return rep.Utility.CapturedVarianceRatio
				})
			}
			raw, scaled := dpLib(x, b.sch, k, reps, name+b.name)
			fmt.Printf("| %s | %d | %d | %.0f | %.3f | %s | %.3f | %.3f | %.3f / %.3f |\n", name, n, d, float64(n)*mu/math.Sqrt(float64(d)), peek, b.name,
				auto[profile.Quantiles], auto[profile.Moments], raw, scaled)
		}
	}
	fmt.Fprintln(os.Stderr, "means over", reps, "runs per cell")
}

// dpLib returns the mean q/q0 of diffprivlib's PCA at epsilon 1 given the
// schema's bounds: on the raw values (bounds as declared, data_norm the
// norm of the bounds' widths, the largest a centred row can have), and on
// the values scaled by the bounds onto [0, 1] (a MinMaxScaler with the
// declared bounds, then bounds [0, 1] and data_norm sqrt(d)).
func dpLib(x *mat.Dense, sch *schema.Schema, k, reps int, seed string) (raw, scaled float64) {
	n, d := x.Dims()
	lo, hi := make([]float64, d), make([]float64, d)
	for j, f := range sch.Features {
		lo[j], _ = f.Min.Rat().Float64()
		hi[j], _ = f.Max.Rat().Float64()
	}
	cov, std := sim.Standardized(x)
	norm := 0.0
	for j := range d {
		norm += (hi[j] - lo[j]) * (hi[j] - lo[j])
	}
	xs := mat.NewDense(n, d, nil)
	zero, one := make([]float64, d), make([]float64, d)
	for j := range d {
		one[j] = 1
		for i := range n {
			xs.Set(i, j, (x.At(i, j)-lo[j])/(hi[j]-lo[j]))
		}
	}
	h := sha(seed)
	rng := rand.New(rand.NewPCG(h, 0x64706c6962))
	raw = meanOf(reps, func(int) float64 {
		return capturedStd(cov, std, dpLibPCA(x, lo, hi, math.Sqrt(norm), 1, k, rng), nil)
	})
	scaled = meanOf(reps, func(int) float64 {
		w := dpLibPCA(xs, zero, one, math.Sqrt(float64(d)), 1, k, rng)
		return capturedStd(cov, std, w, func(j int) float64 { return hi[j] - lo[j] })
	})
	return raw, scaled
}

// capturedStd returns q/q0 on the standardised covariance of components w
// in units where feature j is x_j / unit(j) (unit nil: raw units).
func capturedStd(cov *mat.SymDense, std []float64, w *mat.Dense, unit func(int) float64) float64 {
	d, k := w.Dims()
	ws := mat.NewDense(d, k, nil)
	for j := range d {
		u := 1.0
		if unit != nil {
			u = unit(j)
		}
		for c := range k {
			ws.Set(j, c, w.At(j, c)*std[j]/u)
		}
	}
	var qr mat.QR
	qr.Factorize(ws)
	var q mat.Dense
	qr.QTo(&q)
	r, ok := sim.CapturedVariance(cov, q.Slice(0, d, 0, k))
	if !ok {
		check(fmt.Errorf("eigendecomposition failed"))
	}
	return r
}

func meanOf(reps int, f func(r int) float64) float64 {
	s := 0.0
	for r := range reps {
		s += f(r)
	}
	return s / float64(reps)
}

func sha(s string) uint64 {
	h := uint64(1469598103934665603)
	for _, c := range []byte(s) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}
