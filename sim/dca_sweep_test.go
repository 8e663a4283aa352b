package sim

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// TestDCASweep measures DCA utility (nearest-centroid accuracy on the
// projections, 5-fold CV) for budget splits and regulariser multipliers at
// the central noise level. Run with FEDPCA_DCA_SWEEP=1.
func TestDCASweep(t *testing.T) {
	if os.Getenv("FEDPCA_DCA_SWEEP") == "" {
		t.Skip("set FEDPCA_DCA_SWEEP=1 to run the DCA budget-split experiment")
	}
	type split struct {
		name string
		s    dp.Split
	}
	var splits []split
	for _, r := range []float64{0.1, 0.2, 0.3, 0.4, 0.95} {
		for _, vn := range []float64{0.7, 0.8, 0.9} {
			rest := 1 - r
			splits = append(splits, split{fmt.Sprintf("%.2f/%.3f/%.3f", r, rest*vn, rest*(1-vn)), dp.Split{R: r, V: rest * vn, N: rest * (1 - vn)}})
		}
	}
	mults := []float64{1, 2}
	epsilons := []float64{0.5, 1, 2}
	const seeds = 8
	names := []string{"wdbc", "wine", "digits", "iris", "sonar", "glass", "satellite", "australian", "german_numeric", "letter"}
	score := map[string][]float64{} // split/mult -> per-epsilon mean accuracy gap
	for _, name := range names {
		data, _ := datasets.CSV(name)
		sch, err := schema.Infer(bytes.NewReader(data), name, "label")
		if err != nil {
			t.Fatal(err)
		}
		spec := &job.Spec{Analysis: job.DCA, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}
		acc, _, err := job.ReadStatistics(spec, sch, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		l := acc.Layout()
		clean := acc.Pack()
		rows, err := mapRows(sch, data)
		if err != nil {
			t.Fatal(err)
		}
		crel, _ := stats.Unpack(l, 16, clean)
		central, _, err := analysis.SolveWithRetry(job.DCA, job.Moments(crel), analysis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		base := rows.accuracy(rows.project(central.Mean, central.W), 1)
		delta := 1 / float64(acc.Rows())
		for _, sp := range splits {
			for _, m := range mults {
				key := fmt.Sprintf("%s x%.2f", sp.name, m)
				if score[key] == nil {
					score[key] = make([]float64, len(epsilons))
				}
				for ei, eps := range epsilons {
					cal, err := dp.Calibrate(eps, delta, sp.s, l, sch.Bound(), 16)
					if err != nil {
						t.Fatal(err)
					}
					sum := 0.0
					for seed := range seeds {
						seedBytes := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%v/%d", name, key, eps, seed))
						noise, err := cal.NoiseVector(l, big.NewRat(1, 1), &counter{seed: seedBytes}, 1)
						if err != nil {
							t.Fatal(err)
						}
						vec := append([]int64(nil), clean...)
						for i := range vec {
							vec[i] += noise[i]
						}
						rel, _ := stats.Unpack(l, 16, vec)
						c, _, err := analysis.SolveWithRetry(job.DCA, job.Moments(rel), analysis.Options{Regularizer: analysis.Regularizer{NoiseStd: m * cal.SigmaData(stats.BlockR)}})
						if err != nil {
							t.Fatal(err)
						}
						sum += rows.accuracy(rows.project(c.Mean, c.W), 1) - base
					}
					score[key][ei] += sum / seeds / float64(len(names))
				}
			}
		}
	}
	fmt.Printf("%-26s %v  mean accuracy change vs non-private DCA (10 datasets, %d seeds)\n", "split x noise-margin", epsilons, seeds)
	for _, sp := range splits {
		for _, m := range mults {
			key := fmt.Sprintf("%s x%.2f", sp.name, m)
			mean := 0.0
			var cells []string
			for _, v := range score[key] {
				cells = append(cells, fmt.Sprintf("%+.4f", v))
				mean += v / float64(len(epsilons))
			}
			fmt.Printf("%-26s %s  %+.4f\n", key, strings.Join(cells, " "), mean)
		}
	}
}

// counter is a SHA-256 counter-mode byte stream for reproducible
// experiments.
type counter struct {
	seed [32]byte
	ctr  uint64
	buf  []byte
}

func (c *counter) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(c.buf) == 0 {
			b := append(c.seed[:], byte(c.ctr), byte(c.ctr>>8), byte(c.ctr>>16), byte(c.ctr>>24), byte(c.ctr>>32))
			c.ctr++
			h := sha256.Sum256(b)
			c.buf = h[:]
		}
		k := copy(p[n:], c.buf)
		c.buf = c.buf[k:]
		n += k
	}
	return n, nil
}
