package eigen

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/fedpca/fedpca/datasets"

	"gonum.org/v1/gonum/mat"
)

// plainRun is the same iteration in float64: the reference the encrypted
// run is compared with step by step.
func plainRun(c [][]float64, cfg Config, q0 [][]float64) (q, y *mat.Dense) {
	C := toDense(c)
	C.Scale(1/cfg.Bound, C)
	q = toDense(q0)
	_, p := q.Dims()
	for range cfg.Iterations {
		var yy mat.Dense
		yy.Mul(C, q)
		q = &yy
		for _, st := range cfg.NS {
			var g, h, x mat.Dense
			g.Mul(q.T(), q)
			h.Scale(-st.B, &g)
			for i := range p {
				h.Set(i, i, h.At(i, i)+st.A)
			}
			x.Mul(q, &h)
			q = &x
		}
	}
	y = new(mat.Dense)
	y.Mul(C, q)
	return q, y
}

func fromDense(m *mat.Dense) [][]float64 {
	r, _ := m.Dims()
	out := make([][]float64, r)
	for i := range r {
		out[i] = mat.Row(nil, i, m)
	}
	return out
}

// TestPlainIteration: the iteration in the clear meets the bar on wine, so
// that a failure of the encrypted run is the encryption's.
func TestPlainIteration(t *testing.T) {
	c, _ := covariance(t, "wine", 0)
	cfg := defaultConfig()
	d, k := len(c), 5
	q, y := plainRun(c, cfg, Start(d, Block(d, k)))
	vals, vecs, err := Ritz(fromDense(q), fromDense(y), k, cfg.Bound, RitzTol)
	if err != nil {
		t.Fatal(err)
	}
	ev, evec := exact(t, c)
	rel, sub, vec := accuracy(vals, vecs, ev, evec)
	t.Logf("plain wine: %.2e %.2e %.2e", rel, sub, vec)
	if rel > 1e-4 || sub > 1e-3 {
		t.Fatalf("plain iteration misses the bar: %.2e, %.2e", rel, sub)
	}
}

// TestPlainDatasets prints the float64 iteration's accuracy on every
// dataset for a few fixed counts: the floor the encrypted run is compared
// with (docs/design-components.md). EIGEN_PLAIN=1 to run.
func TestPlainDatasets(t *testing.T) {
	if os.Getenv("EIGEN_PLAIN") == "" {
		t.Skip("EIGEN_PLAIN=1 prints the table")
	}
	for _, name := range datasets.Names() {
		c, _ := covariance(t, name, 0)
		d := len(c)
		ks := []int{min(5, d)}
		if d >= 30 {
			ks = append(ks, 15)
		}
		ev, evec := exact(t, c)
		for _, k := range ks {
			row := fmt.Sprintf("| %s | %d | %d |", name, d, k)
			for _, its := range []int{12, 24} {
				for _, steps := range []int{3, 4, 5, 6} {
					cfg := Config{Iterations: its, NS: slices.Repeat([]NSStep{Steep}, steps), Bound: 1}
					q, y := plainRun(c, cfg, Start(d, Block(d, k)))
					vals, vecs, err := Ritz(fromDense(q), fromDense(y), k, 1, RitzTol)
					if err != nil {
						row += " - |"
						continue
					}
					rel, sub, _ := accuracy(vals, vecs, ev, evec)
					row += fmt.Sprintf(" %.1e / %.1e |", rel, sub)
				}
			}
			fmt.Println(row)
		}
	}
}
