package eigen

import (
	"crypto/rand"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/mpc"
)

// TestSharedSymEigWine runs route (ii) end to end on shares for wine
// (k = 5, block 13): SharedRun, the Ritz matrix H = Q^T (C / B) Q as a
// shared product, mpc.SymEig for its top k, and the components Q U as a
// shared product. Only the components and eigenvalues are revealed (to
// measure them): the bar against the exact decomposition, and
// SymEig's eigenvalues against gonum on the (test-revealed) H.
func TestSharedSymEigWine(t *testing.T) {
	sharedSymEig(t, "wine", 5)
}

// TestSharedSymEigDatasets runs it on SHARED_SYMEIG=name:k,... (for
// example sonar:15, block 25).
func TestSharedSymEigDatasets(t *testing.T) {
	v := os.Getenv("SHARED_SYMEIG")
	if v == "" {
		t.Skip("SHARED_SYMEIG=name:k,... runs route (ii) with the shared Ritz step")
	}
	for _, nk := range splitComma(v) {
		name, ks, _ := strings.Cut(nk, ":")
		k, err := strconv.Atoi(ks)
		if err != nil {
			t.Fatalf("%q: want name:k", nk)
		}
		sharedSymEig(t, name, k)
	}
}

func sharedSymEig(t *testing.T, name string, k int) {
	orthoSteps := 2
	if v := os.Getenv("SHARED_ORTHO"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		orthoSteps = n
	}
	c, _ := covariance(t, name, 0)
	d := len(c)
	dealer, err := mpc.NewDealer(3, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e, err := mpc.NewEngine(3, mpc.DefaultParams, dealer)
	if err != nil {
		t.Fatal(err)
	}
	q, y, err := SharedRun(e, e.Share(mpc.EncodeMat(c, e.P.F)), start(d, Block(d, k)), DefaultShared)
	if err != nil {
		t.Fatal(err)
	}
	iter := e.Cost
	// Q is orthonormal only to about 1e-5 on the strong directions: Z =
	// (Q^T Q)^-1/2 by a few Newton-Schulz steps (quadratic from near I)
	// makes Q Z orthonormal there, and H = Z Q^T (C / B) Q Z.
	z, err := e.InvSqrt(e.Gram(q), DefaultShared.Ridge, orthoSteps)
	if err != nil {
		t.Fatal(err)
	}
	qz, err := e.MatMul(0, mpc.Product{X: q, Y: z}, mpc.Product{X: y, Y: z})
	if err != nil {
		t.Fatal(err)
	}
	q = qz[0]
	h, err := e.MatMul(0, mpc.Product{X: e.Transpose(q), Y: qz[1]})
	if err != nil {
		t.Fatal(err)
	}
	vals, u, err := mpc.SymEig(e, h[0], k, mpc.DefaultSweeps)
	if err != nil {
		t.Fatal(err)
	}
	x, err := e.MatMul(0, mpc.Product{X: q, Y: u})
	if err != nil {
		t.Fatal(err)
	}
	cost := mpc.Cost{Rounds: e.Cost.Rounds - iter.Rounds, BytesPerParty: e.Cost.BytesPerParty - iter.BytesPerParty}
	gv := e.Reveal(vals).Decode(e.P.F)
	gx := e.Reveal(x[0]).Decode(e.P.F)
	values := make([]float64, k)
	vectors := make([][]float64, k)
	for i := range k {
		values[i] = gv[i][0]
		vectors[i] = make([]float64, d)
		norm := 0.0
		for r := range d {
			vectors[i][r] = gx[r][i]
			norm += gx[r][i] * gx[r][i]
		}
		for r := range d {
			vectors[i][r] /= math.Sqrt(norm)
		}
	}
	ev, evec := exact(t, c)
	relErr, subspace, vector := accuracy(values, vectors, ev, evec)
	// SymEig against gonum on the same H (revealed here only to check).
	hv, _ := exact(t, e.Reveal(h[0]).Decode(e.P.F))
	symErr := 0.0
	for i := range k {
		symErr = math.Max(symErr, math.Abs(values[i]-hv[i])/hv[i])
	}
	t.Logf("%s d=%d k=%d: rel err %.1e, angle %.1e, vector %.1e; SymEig against gonum on H %.1e; Ritz step and SymEig %d rounds, %.1f MB per party (iteration %d rounds, %.1f MB)",
		name, d, k, relErr, subspace, vector, symErr, cost.Rounds, float64(cost.BytesPerParty)/1e6, iter.Rounds, float64(iter.BytesPerParty)/1e6)
	if relErr > 1e-4 || subspace > 1e-3 {
		t.Errorf("%s: eigenvalues %.1e (bar 1e-4), angle %.1e rad (bar 1e-3)", name, relErr, subspace)
	}
	if symErr > 1e-6 {
		t.Errorf("SymEig's eigenvalues of H off gonum's by %.1e (bar 1e-6)", symErr)
	}
}
