package eigen

import (
	"fmt"
	"math"

	"github.com/fedpca/fedpca/protocol/mpc"
)

// The DP program's regulariser. The statistics release's user solves DCA
// with rho = TraceFactor max(trace S_T, 0) / d + 2^j NoiseMargin(sigma_R,
// d) for the first j = 0, 1, ... at which S_T + rho I (LDA: S_W + rho I)
// is positive definite (analysis.SolveWithRetry). On shares the members
// cannot test and retry, so every candidate j = 0..Doublings is whitened
// side by side, in the same rounds, by the coupled Newton-Schulz
// iteration; the residue ||Z A Z - I|| of each is compared in shares with
// a threshold, the first passing candidate is chosen by a one-hot of the
// comparisons (mpc FirstTrue) and a weighted sum (mpc Choose), and no
// step's control flow depends on the data. A candidate that is not
// positive definite makes the iteration diverge; every step compares the
// iterates' norms with public bounds and zeroes those of a candidate past
// them (guard), so that no value of any candidate leaves the fixed
// point's range.

// maxDoublings bounds DCAJob.Doublings: 2^16 times the noise term is far
// past any release the statistics release solves (it stops at
// analysis.MaxRetryDoublings).
const maxDoublings = 16

// residueBits is the residue's threshold: a candidate passes when
// ||Z A Z - I||_F^2 < 2^-residueBits, every eigenvalue of Z A Z within 1/4
// of 1 (its Newton-Schulz iteration converged; quadratically, so a
// converged one is at the fixed point's rounding).
const residueBits = 4

// guard holds the public bounds of the whitening of candidates
// X = A / (4 (1 + rho)), which may be indefinite. The iteration carries
// Z~ = Z 2^-e, Y and, checked, D~ = 2^-c (Z Y - I) (Y = X Z in exact
// arithmetic, so Z Y = Z X Z: the residue). Before each step it compares
// in shares
//
//	okZY: ||Z~||_F^2 + ||Y||_F^2 < 2^by    okD: ||D~||_F^2 < 2^bd
//
// and zeroes Z~ and Y where okZY fails and T = (3 I - Z Y) / 2 where okD
// fails (mpc Gate), so a state after a step is one step from a state
// within the bounds, or zero. From such a state every value is bounded by
// norms alone, whatever the spectrum: with P = 2^c 2^(bd/2) >= ||Z Y - I||_F,
// ||T||_2 <= t = 1 + P / 2, the step multiplies ||Z~||_F and ||Y||_F by at
// most t and Z Y = T (Z Y) T is at most t^2 (sqrt(d) + P) in Frobenius
// norm; newGuard picks e and c so that every product, every sum of squares
// and every compared value stays below 2^(L - 2F - 1) before its
// truncation or comparison (fits). A positive definite candidate with
// eigenvalues x in (0, 1] passes every check while ||Z||_F^2 stays below
// (2^by - d) 2^2e, at least 3/4 2^(by + 2e) (about 2^20): then ||Y||_F^2 <= sum x <= d (y = x z <= sqrt x) and
// ||Z Y - I||_F^2 = sum (p - 1)^2 < d (p in (0, 1] after the first step).
type guard struct {
	e, c, by, bd uint
}

// newGuard returns the bounds for d features and the fixed point p, or an
// error when the range argument does not hold at this d (above 512 with
// mpc.DefaultParams).
func newGuard(d int, p mpc.Params) (guard, error) {
	top := float64(p.L - 2*p.F - 1) // values below 2^top
	by := uint(math.Ceil(math.Log2(4 * float64(d))))
	if float64(by) >= top {
		return guard{}, fmt.Errorf("DP DCA components of %d features: the whitening's bounds do not fit the fixed point", d)
	}
	g := guard{by: by, e: uint(top-float64(by)) / 2}
	bd := math.Ceil(math.Log2(2 * float64(d)))
	P := math.Sqrt(math.Exp2(bd))
	t2 := (1 + P/2) * (1 + P/2)
	next := t2*(math.Sqrt(float64(d))+P) + math.Sqrt(float64(d)) // ||Z Y - I||_F after a step
	g.c = uint(max(0, math.Ceil((math.Log2(next*next)-top+1)/2)))
	if float64(2*g.c) > bd || g.c > g.e {
		return guard{}, fmt.Errorf("DP DCA components of %d features: the residue's bound does not fit the fixed point", d)
	}
	g.bd = uint(bd) - 2*g.c
	fits := t2*math.Exp2(float64(by)) < math.Exp2(top) && // okZY's sum a step on
		next < math.Exp2(top) && // Z Y
		next*next*math.Exp2(-2*float64(g.c)) < math.Exp2(top) && // okD's
		(2+P)*math.Sqrt(t2*math.Exp2(float64(by))) < math.Exp2(top) // Y 2T and 2T Z~
	if !fits {
		return guard{}, fmt.Errorf("DP DCA components of %d features: the whitening's bounds do not fit the fixed point", d)
	}
	return g, nil
}

// whiten runs the guarded coupled Newton-Schulz iteration (mpc InvSqrt's,
// Higham 2008 eq. 6.35) on every candidate xs[j], side by side: each
// step's products of all candidates in one MatMul, their checks in one
// Hadamard round and one comparison. It returns each candidate's Z~ =
// X^-1/2 2^-e (zero where a step's check failed) and the column of bits pass[j]:
// the last state within the bounds and its residue ||Z X Z - I||_F^2
// below 2^-residueBits. Fifteen rounds a step.
func (g guard) whiten(e *mpc.Engine, xs []mpc.Shared, steps int) (zs []mpc.Shared, pass mpc.Shared, err error) {
	n, d := len(xs), xs[0].R
	f := e.P.F
	zs, y := make([]mpc.Shared, n), append([]mpc.Shared(nil), xs...)
	for j := range zs {
		zs[j] = e.Const(mpc.Identity(d, mpc.Pow2(f-g.e)))
	}
	three := mpc.Identity(d, mpc.FromInt64(3).Shl(f))
	for step := 0; ; step++ {
		zy, okZY, okD, err := g.check(e, zs, y, step == steps)
		if err != nil {
			return nil, pass, err
		}
		if step == steps {
			p, err := e.Hadamard(mpc.Product{X: okZY, Y: okD})
			if err != nil {
				return nil, pass, err
			}
			return zs, p[0], nil
		}
		ops := make([]mpc.Shared, 0, 3*n)
		for _, p := range zy {
			ops = append(ops, e.AddPublic(e.Scale(p, -1), three)) // 2T
		}
		ops = append(append(ops, zs...), y...)
		gated, err := e.Gate(e.Stack(okD, okZY, okZY), ops...)
		if err != nil {
			return nil, pass, err
		}
		ps := make([]mpc.Product, 0, 2*n)
		for j := range n {
			t := gated[j]
			ps = append(ps, mpc.Product{X: gated[2*n+j], Y: t}, mpc.Product{X: t, Y: gated[n+j]})
		}
		out, err := e.MatMul(1, ps...)
		if err != nil {
			return nil, pass, err
		}
		for j := range n {
			y[j], zs[j] = out[2*j], out[2*j+1]
		}
	}
}

// check computes every candidate's Z Y (Z~ Y 2^e) and compares the norms
// of its state: okZY and okD (the residue's threshold instead of the bound
// when final), columns of n bits.
func (g guard) check(e *mpc.Engine, zs, y []mpc.Shared, final bool) (zy []mpc.Shared, okZY, okD mpc.Shared, err error) {
	n, d := len(zs), zs[0].R
	f := e.P.F
	ps := make([]mpc.Product, n)
	for j := range n {
		ps[j] = mpc.Product{X: zs[j], Y: y[j]}
	}
	prods, err := e.MatMul(0, ps...)
	if err != nil {
		return nil, okZY, okD, err
	}
	zy = make([]mpc.Shared, n)
	sq := make([]mpc.Shared, 0, 3*n)
	for j, p := range prods {
		zy[j] = e.Scale(p, 1<<g.e)
		dev := e.AddPublic(e.Scale(p, 1<<(g.e-g.c)), mpc.Identity(d, mpc.Pow2(f-g.c).Neg()))
		sq = append(sq, zs[j], y[j], dev)
	}
	norms, err := e.SquaredNorms(sq...)
	if err != nil {
		return nil, okZY, okD, err
	}
	// The sums of squares carry 2F fractional bits; compared as they are:
	// below 2^21 (newGuard), so below 2^(2F + 21) = 2^(L - 1) as words,
	// LTZ's largest bound (m + Lambda + 3 <= 128).
	norm := func(i int) mpc.Shared { return e.Rows(norms, i, 1) }
	bd := mpc.Pow2(2*f + g.bd)
	if final {
		bd = mpc.Pow2(2*f - residueBits - 2*g.c)
	}
	qs := make([]mpc.Shared, 2*n)
	for j := range n {
		qs[j] = e.AddPublic(e.Add(norm(3*j), norm(3*j+1)), mpc.ConstCol(1, mpc.Pow2(2*f+g.by).Neg()))
		qs[n+j] = e.AddPublic(norm(3*j+2), mpc.ConstCol(1, bd.Neg()))
	}
	lt, err := e.LTZ(e.Stack(qs...), e.P.L-1)
	if err != nil {
		return nil, okZY, okD, err
	}
	return zy, e.Rows(lt, 0, n), e.Rows(lt, n, n), nil
}

// regularise is the DP program's choice of rho and its whitening: with
// the trace term tau = TraceFactor max(trace cov, 0) / d and the margin
// m (the noise term over n c^2), the candidates A_j = C + (tau + 2^j m) I,
// C = cov (DCA) or cov - B (LDA's S_W over n c^2), are scaled by
// 1 / (4 (1 + rho_j)) into X_j, whose eigenvalues are in (0, 1] when A_j
// is positive definite and its noise is below 3 (1 + rho_j) in norm (a
// larger one only fails the check: the next candidate is taken). The
// first passing candidate's Z = X^-1/2 (zero if none passes: the output
// is then zero) whitens B: M = Z (B / tr B) Z = A^-1/2 B A^-1/2 /
// (s tr B), s = 1 / (4 (1 + rho)), of norm at most ||Z||_F^2 < 2^21; it
// is returned over its trace, so that the block iteration sees
// eigenvalues in [0, 1] whatever the noise (a generalised eigenvalue of a
// noisy pencil may exceed 1), with scale = tr M s tr B, which turns the
// iteration's eigenvalues back into the pencil's.
func (j DCAJob) regularise(e *mpc.Engine, cov, b, margin mpc.Shared) (z, m, scale mpc.Shared, err error) {
	d, n, f := j.Layout.D, j.Doublings+1, e.P.F
	g, err := newGuard(d, e.P)
	if err != nil {
		return z, m, scale, err
	}
	one := mpc.ConstCol(1, mpc.Pow2(f))
	c := cov
	if j.Within {
		c = e.Sub(cov, b)
	}
	// tau, the trace term of S_T (|trace| < 2^(L - 2F)).
	trace := e.ColumnSums(e.Diagonal(cov))
	neg, err := e.LTZ(trace, e.P.L-f)
	if err != nil {
		return z, m, scale, err
	}
	pos, err := e.Hadamard(mpc.Product{X: e.AddPublic(e.Scale(neg, -1), mpc.ConstCol(1, mpc.FromInt64(1))), Y: trace})
	if err != nil {
		return z, m, scale, err
	}
	tau := e.MulConst(pos[0], TraceFactor/float64(d))
	rhos := make([]mpc.Shared, n)
	lifted := make([]mpc.Shared, n+1)
	for i := range n {
		rhos[i] = e.Add(tau, e.Scale(margin, 1<<i))
		lifted[i] = e.AddPublic(rhos[i], one)
	}
	trB := e.ColumnSums(e.Diagonal(b))
	lifted[n] = trB
	r, err := e.Reciprocal(e.Stack(lifted...))
	if err != nil {
		return z, m, scale, err
	}
	// X_i = A_i r_i / 4, h_i = tr B r_i / 4 = s_i tr B, B / tr B.
	rep := func(x mpc.Shared, rows, cols int) mpc.Shared {
		return e.Reshape(e.Replicate(x, rows*cols), rows, cols)
	}
	ps := make([]mpc.Product, 0, 2*n+1)
	shifts := make([]uint, 0, 2*n+1)
	for i := range n {
		ri := e.Rows(r, i, 1)
		ps = append(ps, mpc.Product{X: e.AddDiagonal(c, rhos[i]), Y: rep(ri, d, d)}, mpc.Product{X: trB, Y: ri})
		shifts = append(shifts, f+2, f+2)
	}
	ps = append(ps, mpc.Product{X: b, Y: rep(e.Rows(r, n, 1), d, d)})
	shifts = append(shifts, f)
	raw, err := e.Hadamard(ps...)
	if err != nil {
		return z, m, scale, err
	}
	scaled := e.TruncEach(shifts, raw...)
	xs, hs := make([]mpc.Shared, n), make([]mpc.Shared, n)
	for i := range n {
		xs[i], hs[i] = scaled[2*i], scaled[2*i+1]
	}
	bhat := scaled[2*n]
	zs, pass, err := g.whiten(e, xs, WhitenSteps)
	if err != nil {
		return z, m, scale, err
	}
	first, err := e.FirstTrue(pass)
	if err != nil {
		return z, m, scale, err
	}
	cand := make([]mpc.Shared, n)
	for i := range n {
		cand[i] = e.Stack(zs[i].Column(), hs[i])
	}
	chosen, err := e.Choose(first, cand...)
	if err != nil {
		return z, m, scale, err
	}
	z = e.Symmetrise(e.Scale(e.Reshape(e.Rows(chosen, 0, d*d), d, d), 1<<g.e))
	h := e.Rows(chosen, d*d, 1)
	zb, err := e.MatMul(0, mpc.Product{X: z, Y: bhat})
	if err != nil {
		return z, m, scale, err
	}
	zbz, err := e.MatMul(0, mpc.Product{X: zb[0], Y: z})
	if err != nil {
		return z, m, scale, err
	}
	mhat := e.Symmetrise(zbz[0])
	// Over its trace (below d 2^21: over 2^a into the reciprocal's range).
	a := uint(math.Ceil(math.Log2(float64(d)))) + 1
	trM := e.Trunc(a, e.ColumnSums(e.Diagonal(mhat)))[0]
	rM, err := e.Reciprocal(trM)
	if err != nil {
		return z, m, scale, err
	}
	prods, err := e.Hadamard(mpc.Product{X: mhat, Y: rep(rM, d, d)}, mpc.Product{X: trM, Y: h})
	if err != nil {
		return z, m, scale, err
	}
	out := e.TruncEach([]uint{f + a, f - a}, prods...)
	return z, out[0], out[1], nil
}

// eigenvalues turns the block iteration's eigenvalues of M / tr M into
// the pencil's, times scale; for LDA (Within) the pencil's are mu, of
// S_B w = mu (S_W + rho I) w, and the output is DCA's lambda = mu / (1 +
// mu) = 1 - 1 / (1 + mu), which the user's decoding maps back.
func (j DCAJob) eigenvalues(e *mpc.Engine, values, scale mpc.Shared) (mpc.Shared, error) {
	k := values.R
	v, err := e.MulElem(values, e.Reshape(e.Replicate(scale, k), k, 1))
	if err != nil || !j.Within {
		return v, err
	}
	one := mpc.ConstCol(k, mpc.Pow2(e.P.F))
	r, err := e.Reciprocal(e.AddPublic(v, one))
	if err != nil {
		return v, err
	}
	return e.AddPublic(e.Scale(r, -1), one), nil
}
