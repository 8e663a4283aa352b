package job

import (
	"crypto/rand"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/stats"
)

// capture is q/q0: the variance the k columns of w capture of the
// covariance c, over that of its top k eigenvectors.
func capture(c *mat.SymDense, w [][]float64) float64 {
	d := c.SymmetricDim()
	var es mat.EigenSym
	es.Factorize(c, false)
	ev := es.Values(nil)
	top := 0.0
	for i := range w {
		top += ev[d-1-i]
	}
	q := 0.0
	for _, v := range w {
		x := mat.NewVecDense(d, v)
		var cx mat.VecDense
		cx.MulVec(c, x)
		q += mat.Dot(x, &cx) / mat.Dot(x, x)
	}
	return q / top
}

// TestComponentsDPMatchesStatistics: on each dataset, one noisy sum (epsilon
// 1, the central plan), analysed both ways: the statistics release's PCA
// as the user computes it, and the members' program on shares of the same
// noisy statistics. Their captured variance of the exact covariance must
// agree within the noise: within twice the spread of the statistics
// release's own q/q0 over the draws, plus 0.01. COMPONENTS_DP=all runs
// every dataset with 4 draws; by default wine and wdbc with 2.
func TestComponentsDPMatchesStatistics(t *testing.T) {
	if testing.Short() {
		t.Skip("the members' program per draw")
	}
	names, draws := []string{"wine", "wdbc"}, 2
	if os.Getenv("COMPONENTS_DP") == "all" {
		names, draws = datasets.Names(), 4
	}
	p := heParams(t)
	c := he.Committee{N: 3, Threshold: 2}
	_, cpk := ceremony(t, p, c)
	user := he.GenerateKeyPair(p)
	for _, name := range names {
		ds := loadDataset(t, name, 16)
		d := ds.schema.D()
		spec := newSpec(ds.schema, p, PCA, 1, c, cpk, user, false)
		spec.NoisePlan, spec.K = dp.PlanCentral, min(5, d)
		acc, _, err := ReadStatistics(spec, ds.schema, strings.NewReader(ds.csv()))
		if err != nil {
			t.Fatal(err)
		}
		l := acc.Layout()
		exact := acc.Pack()
		rel, err := stats.Unpack(l, ds.schema.Bits, exact)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := Moments(rel).Scatters()
		if err != nil {
			t.Fatal(err)
		}
		cov := sc.ST
		var qs, qc []float64
		for range draws {
			noise, err := ServerNoise(spec, ds.schema, dp.RoleProxy, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			noisy := make([]int64, len(exact))
			for i := range noisy {
				noisy[i] = exact[i] + noise[i]
			}
			nrel, err := stats.Unpack(l, ds.schema.Bits, noisy)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Analyze(spec, ds.schema, nrel, []string{"owner-1"}, Privacy{}, p.ID())
			if err != nil {
				t.Fatal(err)
			}
			var ws [][]float64
			for j := range spec.K {
				ws = append(ws, mat.Col(nil, j, res.Components.W))
			}
			qs = append(qs, capture(cov, ws))

			dealer, err := mpc.NewDealer(2, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			e, err := mpc.NewEngine(2, mpc.DefaultParams, dealer)
			if err != nil {
				t.Fatal(err)
			}
			modT := make([]uint64, len(noisy))
			for i, v := range noisy {
				modT[i] = uint64((int64(p.T()) + v%int64(p.T())) % int64(p.T()))
			}
			cs := *spec
			cs.Release = ReleaseComponents
			pj, err := cs.Program(ds.schema, 1)
			if err != nil {
				t.Fatal(err)
			}
			out, err := pj.Run(e, e.ShareModT(modT, p.T()))
			if err != nil {
				t.Fatal(err)
			}
			dec, err := DecodeOutput(e.Reveal(out).V, d, spec.K, e.P.F, ds.schema.Bits, ds.schema.Bound())
			if err != nil {
				t.Fatal(err)
			}
			qc = append(qc, capture(cov, dec.Vectors))
		}
		ms, ss := meanStd(qs)
		mc, sc2 := meanStd(qc)
		fmt.Printf("| %s | %d | %d | %.3f ± %.3f | %.3f ± %.3f |\n", name, d, spec.K, ms, ss, mc, sc2)
		if diff := math.Abs(ms - mc); diff > 2*ss+0.01 {
			t.Errorf("%s: q/q0 %.3f (statistics) against %.3f (components), spread %.3f", name, ms, mc, ss)
		}
	}
}

func meanStd(x []float64) (float64, float64) {
	m := 0.0
	for _, v := range x {
		m += v
	}
	m /= float64(len(x))
	s := 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	if len(x) > 1 {
		s /= float64(len(x) - 1)
	}
	return m, math.Sqrt(s)
}
