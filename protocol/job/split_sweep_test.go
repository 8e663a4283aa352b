package job

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"os"
	"sort"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/stats"
)

// counterStream is a deterministic byte stream (SHA-256 in counter mode) for
// reproducible experiments; production noise comes from crypto/rand.
type counterStream struct {
	seed [32]byte
	ctr  uint64
	buf  []byte
}

func (c *counterStream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(c.buf) == 0 {
			var b [40]byte
			copy(b[:], c.seed[:])
			binary.LittleEndian.PutUint64(b[32:], c.ctr)
			c.ctr++
			h := sha256.Sum256(b[:])
			c.buf = h[:]
		}
		k := copy(p[n:], c.buf)
		c.buf = c.buf[k:]
		n += k
	}
	return n, nil
}

// capturedVariance is q/q0: the variance of the true scatter s captured by the
// top-k components w, relative to the best possible (its top-k eigenvalues).
func capturedVariance(s *mat.SymDense, w *mat.Dense) float64 {
	_, k := w.Dims()
	var eig mat.EigenSym
	eig.Factorize(s, false)
	vals := eig.Values(nil)
	sort.Sort(sort.Reverse(sort.Float64Slice(vals)))
	q0 := 0.0
	for _, v := range vals[:k] {
		q0 += v
	}
	var sw, wsw mat.Dense
	sw.Mul(s, w)
	wsw.Mul(w.T(), &sw)
	return mat.Trace(&wsw) / q0
}

// TestSplitSweep measures PCA utility (q/q0, k = 5) for budget splits between
// the R, v and n blocks at the central noise level, on every shared dataset.
// It chose dp.DefaultSplit; run with FEDPCA_SPLIT_SWEEP=1 (about a minute).
func TestSplitSweep(t *testing.T) {
	if os.Getenv("FEDPCA_SPLIT_SWEEP") == "" {
		t.Skip("set FEDPCA_SPLIT_SWEEP=1 to run the budget-split experiment")
	}
	type split struct {
		name string
		s    dp.Split
	}
	var splits []split
	for _, r := range []float64{0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995} {
		for _, vn := range []float64{0.5, 0.8, 0.95} { // share of the rest going to v
			rest := 1 - r
			splits = append(splits, split{fmt.Sprintf("R%.2f/v%.3f/n%.3f", r, rest*vn, rest*(1-vn)), dp.Split{R: r, V: rest * vn, N: rest * (1 - vn)}})
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
		ds := loadDataset(t, name, 16)
		spec := &Spec{Analysis: PCA, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}
		acc, _, err := ReadStatistics(spec, ds.schema, strings.NewReader(ds.csv()))
		if err != nil {
			t.Fatal(err)
		}
		l := acc.Layout()
		clean := acc.Pack()
		rel, _ := stats.Unpack(l, 16, clean)
		trueSc, err := Moments(rel).Scatters()
		if err != nil {
			t.Fatal(err)
		}
		k := min(5, l.D)
		delta := DefaultDelta
		for si, sp := range splits {
			for ei, eps := range epsilons {
				cal, err := dp.Calibrate(eps, delta, sp.s, l, ds.schema.Bound(), 16)
				if err != nil {
					t.Fatal(err)
				}
				sum := 0.0
				for seed := range seeds {
					rnd := &counterStream{seed: sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d/%d", name, si, ei, seed))}
					noise, err := cal.NoiseVector(l, big1(), rnd, 1)
					if err != nil {
						t.Fatal(err)
					}
					vec := append([]int64(nil), clean...)
					for i := range vec {
						vec[i] += noise[i]
					}
					nrel, _ := stats.Unpack(l, 16, vec)
					sc, err := Moments(nrel).Scatters()
					if err != nil {
						t.Fatal(err)
					}
					sv := cal.SigmaData(stats.BlockV)
					comp, err := sc.ShrinkCentring(float64(l.K) * sv * sv).PCA(k)
					if err != nil {
						t.Fatal(err)
					}
					sum += capturedVariance(trueSc.ST, comp.W)
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
	fmt.Printf("%-26s %s  mean\n", "split", strings.Repeat(" ", 0)+fmt.Sprint(epsilons))
	for i, sp := range splits {
		if avg(i) > avg(best) {
			best = i
		}
		fmt.Printf("%-26s", sp.name)
		for _, v := range score[i] {
			fmt.Printf(" %.4f", v)
		}
		fmt.Printf("  %.4f\n", avg(i))
	}
	fmt.Printf("best: %s\n", splits[best].name)
	for _, name := range names {
		fmt.Printf("%-15s", name)
		for i := range splits {
			if i%3 == 1 { // v share 0.8 of the rest
				v := perDataset[name][i*len(epsilons)+1] // epsilon 1
				fmt.Printf(" %.4f", v)
			}
		}
		fmt.Println()
	}
	if math.IsNaN(avg(best)) {
		t.Fatal("NaN utility")
	}
}

func big1() *big.Rat { return big.NewRat(1, 1) }
