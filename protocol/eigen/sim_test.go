package eigen

import (
	"testing"

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
	q, y := plainRun(c, cfg, start(d, Block(d, k)))
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
