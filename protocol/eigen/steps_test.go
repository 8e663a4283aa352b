package eigen

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestSteps checks each homomorphic step against the same step in the
// clear, decrypting with the summed secret (a test assertion only): the
// product C Q / B, one polar step, and a refresh.
func TestSteps(t *testing.T) {
	c, _ := covariance(t, "wine", 0)
	d, k := len(c), 5
	cfg := Config{D: d, K: k, Iterations: 1, NS: []NSStep{Steep}, Bound: 1, Baby: 4}
	com, s := newSolver(t, c, cfg)
	sk := com.idealSecret()
	p := Block(d, k)
	q0 := Start(d, p)
	ct, err := s.encrypt(s.l.Pack(q0))
	if err != nil {
		t.Fatal(err)
	}
	Q := toDense(q0)
	C := toDense(c)
	var want mat.Dense
	want.Mul(C, Q)
	y, err := s.product(ct)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode(y, sk)
	if err != nil {
		t.Fatal(err)
	}
	if e := maxDiff(toDense(got), &want); e > 1e-6 {
		t.Fatalf("product: max error %.2e", e)
	}
	var g, h, x mat.Dense
	g.Mul(want.T(), &want)
	h.Scale(-Steep.B, &g)
	for i := range p {
		h.Set(i, i, h.At(i, i)+Steep.A)
	}
	x.Mul(&want, &h)
	z, err := s.polar(y, Steep)
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.Decode(z, sk)
	if err != nil {
		t.Fatal(err)
	}
	if e := maxDiff(toDense(got), &x); e > 1e-6 {
		t.Fatalf("polar step: max error %.2e", e)
	}
	if err := com.Refresh(z); err != nil {
		t.Fatal(err)
	}
	if z.Level() != com.Params.MaxLevel() {
		t.Fatalf("refreshed to level %d, want %d", z.Level(), com.Params.MaxLevel())
	}
	got, err = s.Decode(z, sk)
	if err != nil {
		t.Fatal(err)
	}
	if e := maxDiff(toDense(got), &x); e > 1e-6 {
		t.Fatalf("refresh: max error %.2e", e)
	}
}

func toDense(m [][]float64) *mat.Dense {
	out := mat.NewDense(len(m), len(m[0]), nil)
	for r := range m {
		out.SetRow(r, m[r])
	}
	return out
}

func maxDiff(a, b *mat.Dense) float64 {
	r, c := a.Dims()
	e := 0.0
	for i := range r {
		for j := range c {
			e = math.Max(e, math.Abs(a.At(i, j)-b.At(i, j)))
		}
	}
	return e
}
