package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/sim"
)

// The two budget-split experiments that chose dp.DefaultSplit and
// dp.DefaultSplitFor(DCA): central noise only, on every shared dataset,
// reproducible noise (a SHA-256 counter stream; production noise comes from
// crypto/rand). They print tables and assert nothing.

// addOne makes the sweeps calibrate for adding one row alone (-add-one).
var addOne bool

// sweepSplit is a budget split the sweeps measure.
type sweepSplit struct {
	name string
	s    dp.Split
}

// sweepSplits parses -split for the sweeps: nil for their own grids.
func sweepSplits(list string) []sweepSplit {
	if list == "" {
		return nil
	}
	var out []sweepSplit
	for _, s := range strings.Split(list, ",") {
		sp, err := dp.ParseSplit(s)
		check(err)
		out = append(out, sweepSplit{s, sp})
	}
	return out
}

// sweepCalibrate is dp.Calibrate, or with -add-one its noise for adding one
// row alone: the variances over the row cap's factor.
func sweepCalibrate(eps, delta float64, split dp.Split, l stats.Layout, bound int64, bits uint) dp.Calibration {
	cal, err := dp.Calibrate(eps, delta, split, l, bound, bits)
	check(err)
	if addOne {
		f := new(big.Rat).SetFloat64(cal.Factor)
		for b, v := range cal.Variance {
			q := new(big.Rat).Quo(new(big.Rat).SetInt(v), f)
			cal.Variance[b] = new(big.Int).Quo(q.Num(), q.Denom())
			cal.Variance[b].Add(cal.Variance[b], big.NewInt(1))
		}
	}
	return cal
}

// splitSweep measures PCA utility (q/q0, k = 5) for budget splits between
// the R, v and n blocks at the central noise level (suite split-sweep,
// about a minute per 20 splits).
func splitSweep(splits []sweepSplit) {
	type split = sweepSplit
	if splits == nil {
		for _, r := range []float64{0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995} {
			for _, vn := range []float64{0.5, 0.8, 0.95} { // share of the rest going to v
				rest := 1 - r
				splits = append(splits, split{fmt.Sprintf("R%.2f/v%.3f/n%.3f", r, rest*vn, rest*(1-vn)), dp.Split{R: r, V: rest * vn, N: rest * (1 - vn)}})
			}
		}
	}
	names := []string{"wdbc", "wine", "digits", "iris", "sonar", "glass", "satellite", "australian", "german_numeric", "letter"}
	const seeds = 30
	epsilons := []float64{0.5, 1, 2}
	// mean q/q0 per split, per epsilon, averaged over datasets and seeds.
	score := make([][]float64, len(splits))
	perDataset := map[string][]float64{}
	for i := range score {
		score[i] = make([]float64, len(epsilons))
	}
	for _, name := range names {
		ds := loadSchema(name, 16)
		spec := &job.Spec{Analysis: job.PCA, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}
		acc, _, err := job.ReadStatistics(spec, ds.schema, bytes.NewReader(ds.csv))
		if err != nil {
			check(err)
		}
		l := acc.Layout()
		clean := acc.Pack()
		rel, _ := stats.Unpack(l, 16, clean)
		trueSc, err := job.Moments(rel).Scatters()
		if err != nil {
			check(err)
		}
		k := min(5, l.D)
		delta := job.DefaultDelta
		for si, sp := range splits {
			for ei, eps := range epsilons {
				cal := sweepCalibrate(eps, delta, sp.s, l, ds.schema.Bound(), 16)
				sum := 0.0
				for seed := range seeds {
					rnd := sim.NoiseStream(fmt.Sprintf("%s/%d/%d/%d", name, si, ei, seed))
					noise, err := cal.NoiseVector(l, big.NewRat(1, 1), rnd, 1)
					if err != nil {
						check(err)
					}
					vec := append([]int64(nil), clean...)
					for i := range vec {
						vec[i] += noise[i]
					}
					nrel, _ := stats.Unpack(l, 16, vec)
					sc, err := job.Moments(nrel).Scatters()
					if err != nil {
						check(err)
					}
					sv := cal.SigmaData(stats.BlockV)
					comp, err := sc.ShrinkCentring(float64(l.K) * sv * sv).PCA(k)
					if err != nil {
						check(err)
					}
					q, ok := sim.CapturedVariance(trueSc.ST, comp.W)
					if !ok {
						check(fmt.Errorf("eigendecomposition of the true scatter failed"))
					}
					sum += q
				}
				q := sum / seeds
				score[si][ei] += q / float64(len(names))
				perDataset[name] = append(perDataset[name], q)
			}
		}
	}
	best := 0
	avg := func(i int) float64 {
		s := 0.0
		for _, v := range score[i] {
			s += v
		}
		return s / float64(len(epsilons))
	}
	fmt.Printf("%-26s %s  mean   (add-one calibration: %v)\n", "split", fmt.Sprint(epsilons), addOne)
	for i, sp := range splits {
		if avg(i) > avg(best) {
			best = i
		}
		fmt.Printf("%-26s", sp.name)
		for _, v := range score[i] {
			fmt.Printf(" %.4f", v)
		}
		cal := sweepCalibrate(1, 1e-6, sp.s, stats.Layout{D: 30, K: 1}, 1<<16, 16)
		fmt.Printf("  %.4f  (cap factor %.3f, sigma R/v/n at eps 1, C = 1: %.3f/%.2f/%.2f)\n", avg(i), cal.Factor,
			cal.SigmaData(stats.BlockR), cal.SigmaData(stats.BlockV), cal.SigmaData(stats.BlockN))
	}
	fmt.Printf("best: %s\n", splits[best].name)
	for _, name := range names {
		fmt.Printf("%-15s", name)
		for i := range splits {
			v := perDataset[name][i*len(epsilons)+1] // epsilon 1
			fmt.Printf(" %.4f", v)
		}
		fmt.Println()
	}
	if math.IsNaN(avg(best)) {
		check(errors.New("NaN utility"))
	}
}

// dcaSweep measures DCA utility (nearest-centroid accuracy on the
// projections, 5-fold CV) for budget splits and regulariser multipliers at
// the central noise level (suite dca-sweep).
func dcaSweep(splits []sweepSplit) {
	type split = sweepSplit
	mults := []float64{1, 2}
	if splits == nil {
		for _, r := range []float64{0.1, 0.2, 0.3, 0.4, 0.95} {
			for _, vn := range []float64{0.7, 0.8, 0.9} {
				rest := 1 - r
				splits = append(splits, split{fmt.Sprintf("%.2f/%.3f/%.3f", r, rest*vn, rest*(1-vn)), dp.Split{R: r, V: rest * vn, N: rest * (1 - vn)}})
			}
		}
	} else {
		mults = []float64{1}
	}
	epsilons := []float64{0.5, 1, 2}
	const seeds = 8
	names := []string{"wdbc", "wine", "digits", "iris", "sonar", "glass", "satellite", "australian", "german_numeric", "letter"}
	score := map[string][]float64{} // split/mult -> per-epsilon mean accuracy gap
	for _, name := range names {
		data, err := datasets.CSV(name)
		check(err)
		sch, err := schema.Infer(bytes.NewReader(data), name, "label")
		if err != nil {
			check(err)
		}
		spec := &job.Spec{Analysis: job.DCA, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}
		acc, _, err := job.ReadStatistics(spec, sch, bytes.NewReader(data))
		if err != nil {
			check(err)
		}
		l := acc.Layout()
		clean := acc.Pack()
		rows, err := sim.MapRows(sch, data)
		if err != nil {
			check(err)
		}
		crel, _ := stats.Unpack(l, 16, clean)
		central, _, err := analysis.SolveWithRetry(job.DCA, job.Moments(crel), analysis.Options{})
		if err != nil {
			check(err)
		}
		base := rows.Accuracy(central.Mean, central.W, 1)
		delta := 1 / float64(acc.Rows())
		for _, sp := range splits {
			for _, m := range mults {
				key := fmt.Sprintf("%s x%.2f", sp.name, m)
				if score[key] == nil {
					score[key] = make([]float64, len(epsilons))
				}
				for ei, eps := range epsilons {
					cal := sweepCalibrate(eps, delta, sp.s, l, sch.Bound(), 16)
					sum := 0.0
					for seed := range seeds {
						noise, err := cal.NoiseVector(l, big.NewRat(1, 1), sim.NoiseStream(fmt.Sprintf("%s/%s/%v/%d", name, key, eps, seed)), 1)
						if err != nil {
							check(err)
						}
						vec := append([]int64(nil), clean...)
						for i := range vec {
							vec[i] += noise[i]
						}
						rel, _ := stats.Unpack(l, 16, vec)
						c, _, err := analysis.SolveWithRetry(job.DCA, job.Moments(rel), analysis.Options{Regularizer: analysis.Regularizer{NoiseStd: m * cal.SigmaData(stats.BlockR)}})
						if err != nil {
							check(err)
						}
						sum += rows.Accuracy(c.Mean, c.W, 1) - base
					}
					score[key][ei] += sum / seeds / float64(len(names))
				}
			}
		}
	}
	fmt.Printf("%-26s %v  mean accuracy change vs non-private DCA (10 datasets, %d seeds; add-one calibration: %v)\n", "split x noise-margin", epsilons, seeds, addOne)
	for _, sp := range splits {
		for _, m := range mults {
			key := fmt.Sprintf("%s x%.2f", sp.name, m)
			mean := 0.0
			var cells []string
			for _, v := range score[key] {
				cells = append(cells, fmt.Sprintf("%+.4f", v))
				mean += v / float64(len(epsilons))
			}
			cal := sweepCalibrate(1, 1e-6, sp.s, stats.Layout{D: 30, K: 3}, 1<<16, 16)
			fmt.Printf("%-26s %s  %+.4f  (cap factor %.3f)\n", key, strings.Join(cells, " "), mean, cal.Factor)
		}
	}
}

// sweepDataset is a bundled dataset and its inferred schema.
type sweepDataset struct {
	csv    []byte
	schema *schema.Schema
}

func loadSchema(name string, bits uint) sweepDataset {
	raw, err := datasets.CSV(name)
	check(err)
	sch, err := schema.Infer(bytes.NewReader(raw), name, "label")
	check(err)
	sch.Bits = bits
	return sweepDataset{csv: raw, schema: sch}
}
