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
	st, err := normalise(e, x, j.Layout, j.Bits, j.Clip, 0)
	if err != nil {
		return cov, n, err
	}
	cov, _, _, err = st.covariance(e)
	return cov, st.total, err
}

// normalised are the statistics over n's power of two (see Covariance).
type normalised struct {
	d, k   int
	upper  func(i, j int) int // R's index
	rt     mpc.Shared         // R~: R / (2^g 2^(i+1)), the upper triangle
	vt     mpc.Shared         // v~_k: v_k / 2^(i+1), d x K
	nt     mpc.Shared         // n~_k: n_k' / 2^(i+1), K x 1
	margin mpc.Shared         // the margin on R's diagonal, as R~ (1 x 1)
	w      mpc.Shared         // 1 / n~, 1 x 1
	total  mpc.Shared         // the counts' raw sum (the output's n)
	scale  float64            // 1 / c^2
}

// normalise clamps each class count to at least one row (2^g: a noisy
// count may be small or negative), finds the most significant bit of
// their sum n, and brings R, the v_k and the n_k over it. margin is a
// public amount in R's data units (the DP regulariser's noise term, 0
// without one), brought over n as an entry of R's diagonal would be: the
// same round, no opening (a public multiple of the shared shift).
func normalise(e *mpc.Engine, x mpc.Shared, l stats.Layout, bits uint, clip, margin float64) (*normalised, error) {
	if x.R != l.Len() || x.C != 1 {
		return nil, fmt.Errorf("statistics of %dx%d, want %dx1", x.R, x.C, l.Len())
	}
	d, rlen, k := l.D, l.RLen(), l.K
	f := e.P.F
	vs := e.Rows(x, l.V(0, 0), d*k) // class k's sum is rows k d to (k+1) d
	ns := e.Rows(x, l.N(0), k)
	// n_k' = n_k + [n_k < 2^g] (2^g - n_k).
	floor := mpc.Pow2(bits)
	below, err := e.LTZ(e.AddPublic(ns, mpc.ConstCol(k, floor.Neg())), statsBits+1)
	if err != nil {
		return nil, err
	}
	gap := e.AddPublic(e.Scale(ns, -1), mpc.ConstCol(k, floor))
	lift, err := e.Hadamard(mpc.Product{X: below, Y: gap})
	if err != nil {
		return nil, err
	}
	total := e.ColumnSums(ns)
	ns = e.Add(ns, lift[0])
	n := e.ColumnSums(ns)
	shift, err := e.MSBShift(n, statsBits)
	if err != nil {
		return nil, err
	}
	// R's product with the shift is below 2^(60 + g) c^2; truncate R first
	// by what exceeds the engine's bound.
	r := e.Rows(x, 0, rlen)
	pre := int(statsBits+bits) + int(math.Ceil(2*math.Log2(clip))) + 1 - int(e.P.L-1)
	if pre > 0 {
		r = e.Trunc(uint(pre), r)[0]
	} else {
		pre = 0
	}
	// The margin in R's integer units, 2^(2g) margin, over 2^pm so that
	// its product with the shift (below 2^(59 - g): n is at least 2^g) stays
	// below 2^85 and the multiplier within an int64.
	mint, pm := marginUnits(margin, bits)
	m := e.Scale(shift, mint)
	all := e.Stack(r, vs, ns, n)
	prod, err := e.ScaleBy(shift, all)
	if err != nil {
		return nil, err
	}
	tr := e.TruncEach([]uint{statsBits + bits - f - uint(pre), statsBits - f, statsBits + bits - f - pm},
		e.Rows(prod, 0, rlen), e.Rows(prod, rlen, d*k+k+1), m)
	rest := tr[1]
	w, err := e.RecipHalf(e.Rows(rest, d*k+k, 1))
	if err != nil {
		return nil, err
	}
	vt := e.Rows(rest, 0, d*k)
	// d x K, column k class k.
	vt = e.Transpose(e.Reshape(vt, k, d))
	return &normalised{d: d, k: k, upper: l.R, rt: tr[0], vt: vt, nt: e.Rows(rest, d*k, k), margin: tr[2], w: w, total: total, scale: 1 / (clip * clip)}, nil
}

// marginUnits returns the public multiplier round(2^(2g) margin / 2^pm)
// of normalise's shift and pm: the multiplier below 2^62 and its product
// with a shift below 2^(59 - g) below 2^85.
func marginUnits(margin float64, bits uint) (int64, uint) {
	if !(margin > 0) {
		return 0, 0
	}
	exp := math.Ilogb(margin) + 1 + 2*int(bits) // 2^(2g) margin < 2^exp
	pm := max(0, exp-62, exp+statsBits-1-int(bits)-85)
	return int64(math.Round(math.Ldexp(margin, 2*int(bits)-pm))), uint(pm)
}

// covariance returns S_T / (n c^2), the mean v / n and the margin over
// n c^2 (the regulariser's noise term in the covariance's units).
func (st *normalised) covariance(e *mpc.Engine) (cov, mean, margin mpc.Shared, err error) {
	rlen := st.rt.R
	v := e.ColumnSums(e.Transpose(st.vt)) // the classes summed, d x 1
	scaled, err := e.MulElem(e.Stack(st.rt, v, st.margin), e.Replicate(st.w, rlen+st.d+1).Column())
	if err != nil {
		return cov, mean, margin, err
	}
	mean = e.Rows(scaled, rlen, st.d)
	outer, err := e.MatMul(0, mpc.Product{X: mean, Y: e.Transpose(mean)})
	if err != nil {
		return cov, mean, margin, err
	}
	cov = e.Sub(e.Symmetric(e.Rows(scaled, 0, rlen), st.d, st.upper), outer[0])
	both := e.MulConst(e.Stack(cov.Column(), e.Rows(scaled, rlen+st.d, 1)), st.scale)
	return e.Reshape(e.Rows(both, 0, st.d*st.d), st.d, st.d), mean, e.Rows(both, st.d*st.d, 1), nil
}

// Run is a components job's program, the same for every party (its own
// shares), for the engine of all parties, and for the dealer's run on zero
// shares that makes party 0's corrections: its control flow does not
// depend on the data. x holds the party's shares mod T of the noised
// sum's slots (the layout's Len values; a components job's sum is not
// blinded: the conversion's own masks hide it). Then: shares over
// Z_2^128 (FromModT), cov / c^2 (Covariance), the block iteration
// (SharedRun), the Rayleigh-Ritz step on shares (SharedRitz: Q
// re-orthonormalised by two Newton-Schulz steps, the Ritz matrix's top K
// eigenpairs by mpc SymEig, the components). It returns the party's share
// of the output column (job.OutputLen: eigenvalues of cov / c^2, the d x K
// components row-major, n).
func (j PCAJob) Run(e *mpc.Engine, x mpc.ModT) (mpc.Shared, error) {
	if err := j.Validate(); err != nil {
		return mpc.Shared{}, err
	}
	l := j.Layout
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
	values, v, err := SharedRitz(e, q, y, j.K, cfg)
	if err != nil {
		return mpc.Shared{}, err
	}
	return e.Stack(values.Column(), v.Column(), n), nil
}
