package eigen

import (
	"fmt"
	"math"

	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/stats"
)

// PCAJob is what the members' program of a components PCA job knows, all
// of it public: the statistics' layout (the full kind: R, then v and n per
// class), the quantisation bits g, the rows' clip norm c (in the schema's
// units), the number of components and the solver's counts.
type PCAJob struct {
	Layout stats.Layout
	Bits   uint
	Clip   float64
	K      int
	Solver SharedConfig
}

// statsBits bounds the aggregate's entries: |x| < T / 2 < 2^59, and n is a
// count times 2^g below 2^60.
const statsBits = 60

// Validate checks the job against what the program supports.
func (j PCAJob) Validate() error {
	if j.Layout.Kind != stats.Full {
		return fmt.Errorf("components of %s statistics: want the full kind", j.Layout.Kind)
	}
	if err := j.Layout.Validate(); err != nil {
		return err
	}
	if !(j.Clip > 0) || math.IsInf(j.Clip, 0) {
		return fmt.Errorf("clip norm %g: want a positive number", j.Clip)
	}
	if j.Bits > statsBits-2 {
		return fmt.Errorf("quantisation bits %d: want at most %d", j.Bits, statsBits-2)
	}
	if j.K < 1 || j.K > j.Layout.D {
		return fmt.Errorf("%d components of %d features", j.K, j.Layout.D)
	}
	return nil
}

// Covariance returns the shares of A = cov / c^2 (d x d, fixed point,
// eigenvalues in [0, 1]: the rows are clipped to norm c) from x, the
// shares of the aggregate's integer statistics in the layout's order
// (mpc FromModT of the encryption-to-shares output). With the classes
// summed, n' = max(n, 2^g) (a noisy count may be small or negative under
// DP; exact counts are at least one row), 2^i <= n' < 2^(i+1):
//
//	R~ = R / (2^g 2^(i+1)),  v~ = v / 2^(i+1),  n~ = n' / 2^(i+1) in [1/2, 1]
//	w = 1 / n~ (Newton on a fixed range)
//	cov = R~ w - (v~ w)(v~ w)^T = R / (2^(2g) rows) - mean mean^T
//
// The shift by 2^(i+1) is the shared integer 2^(59-i) of mpc MSBShift and
// public truncations, so no step sees n or its size (Catrina and Saxena's
// normalisation, FC 2010).
func (j PCAJob) Covariance(e *mpc.Engine, x mpc.Shared) (cov, n mpc.Shared, err error) {
	l := j.Layout
	if x.R != l.Len() || x.C != 1 {
		return cov, n, fmt.Errorf("statistics of %dx%d, want %dx1", x.R, x.C, l.Len())
	}
	d, rlen := l.D, l.RLen()
	f := e.P.F
	// Sum the classes (linear): v (d x 1) and n (1 x 1).
	v := e.Rows(x, l.V(0, 0), d)
	n = e.Rows(x, l.N(0), 1)
	for k := 1; k < l.K; k++ {
		v = e.Add(v, e.Rows(x, l.V(k, 0), d))
		n = e.Add(n, e.Rows(x, l.N(k), 1))
	}
	// n' = n + [n < 2^g] (2^g - n).
	floor := mpc.Pow2(j.Bits)
	below, err := e.LTZ(e.AddPublic(n, constCol(1, floor.Neg())), statsBits+1)
	if err != nil {
		return cov, n, err
	}
	gap := e.AddPublic(e.Scale(n, -1), constCol(1, floor))
	lift, err := e.Hadamard(mpc.Product{X: below, Y: gap})
	if err != nil {
		return cov, n, err
	}
	total := n
	n = e.Add(n, lift[0])
	shift, err := e.MSBShift(n, statsBits)
	if err != nil {
		return cov, n, err
	}
	// R's product with the shift is below 2^(60 + g) c^2; truncate R first
	// by what exceeds the engine's bound.
	r := e.Rows(x, 0, rlen)
	pre := int(statsBits+j.Bits) + int(math.Ceil(2*math.Log2(j.Clip))) + 1 - int(e.P.L-1)
	if pre > 0 {
		r = e.Trunc(uint(pre), r)[0]
	} else {
		pre = 0
	}
	all := e.Stack(r, v, n)
	prod, err := e.Hadamard(mpc.Product{X: all, Y: e.Replicate(shift, all.R).Column()})
	if err != nil {
		return cov, n, err
	}
	rt := e.Trunc(statsBits+j.Bits-f-uint(pre), e.Rows(prod[0], 0, rlen))[0]
	vn := e.Trunc(statsBits-f, e.Rows(prod[0], rlen, d+1))[0]
	w, err := e.RecipHalf(e.Rows(vn, d, 1))
	if err != nil {
		return cov, n, err
	}
	scaled, err := e.MulElem(e.Stack(rt, e.Rows(vn, 0, d)), e.Replicate(w, rlen+d).Column())
	if err != nil {
		return cov, n, err
	}
	mean := e.Rows(scaled, rlen, d)
	outer, err := e.MatMul(0, mpc.Product{X: mean, Y: e.Transpose(mean)})
	if err != nil {
		return cov, n, err
	}
	cov = e.Sub(e.Symmetric(e.Rows(scaled, 0, rlen), d, l.R), outer[0])
	return e.MulConst(cov, 1/(j.Clip*j.Clip)), total, nil
}

// Sweeps is the Jacobi sweeps of the final p x p eigenproblem.
const Sweeps = 8

// Run is a components job's program, the same for every party (its own
// shares), for the engine of all parties, and for the dealer's run on zero
// shares that makes party 0's corrections: its control flow does not
// depend on the data. x holds the party's shares mod T of the blinded,
// noised sum's slots (the layout's Len values); unmask, called by the
// dealer only, returns the negated blinding masks, which are dealt as
// shares and added, so that nobody sees the unmasked sum. Then: shares over
// Z_2^128 (FromModT), cov / c^2 (Covariance), the block iteration
// (SharedRun), the Rayleigh-Ritz matrix Q^T (C / c^2) Q and its top K
// eigenpairs (mpc SymEig), the components Q W and their Rayleigh quotients. It returns the party's share
// of the output column (job.OutputLen: eigenvalues of cov / c^2, the d x K
// components row-major, n).
func (j PCAJob) Run(e *mpc.Engine, x mpc.ModT, unmask func() []uint64) (mpc.Shared, error) {
	if err := j.Validate(); err != nil {
		return mpc.Shared{}, err
	}
	l := j.Layout
	masks := e.InputModT(l.Len(), x.T, unmask)
	x, err := e.AddModT(x, masks)
	if err != nil {
		return mpc.Shared{}, err
	}
	ints, err := e.FromModT(x)
	if err != nil {
		return mpc.Shared{}, err
	}
	a, n, err := j.Covariance(e, ints)
	if err != nil {
		return mpc.Shared{}, err
	}
	cfg := j.Solver
	cfg.D, cfg.K = l.D, j.K
	fx := e.Fix(a)
	q, y, err := SharedRunFixed(e, fx, Start(l.D, Block(l.D, j.K)), cfg)
	if err != nil {
		return mpc.Shared{}, err
	}
	t, err := e.MatMul(0, mpc.Product{X: e.Transpose(q), Y: y})
	if err != nil {
		return mpc.Shared{}, err
	}
	_, w, err := mpc.SymEig(e, e.Symmetrise(t[0]), j.K, Sweeps)
	if err != nil {
		return mpc.Shared{}, err
	}
	v, err := e.MatMul(0, mpc.Product{X: q, Y: w})
	if err != nil {
		return mpc.Shared{}, err
	}
	// The eigenvalues as Rayleigh quotients v^T (C / c^2) v of the final
	// vectors: second-order in their angle and free of the rounding the
	// Jacobi sweeps accumulate on the diagonal.
	av, err := e.MulFixed(fx, v[0])
	if err != nil {
		return mpc.Shared{}, err
	}
	prod, err := e.MulElem(v[0], av)
	if err != nil {
		return mpc.Shared{}, err
	}
	values := e.ColumnSums(prod)
	return e.Stack(values.Column(), v[0].Column(), n), nil
}

func constCol(n int, w mpc.Word) mpc.Mat {
	m := mpc.NewMat(n, 1)
	for i := range m.V {
		m.V[i] = w
	}
	return m
}
