package power

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/analysis"
)

// What the user computes from the releases: post-processing, in floating
// point, of values that are public once released.

// Mean is round 0's release decoded: the noisy sum v and count n in data
// units, and the centring the user applies (Shrink, the pretest
// James-Stein factor of analysis.ShrinkFactor: 0 when v is within the noise,
// so the rows are taken to be centred at the schema's centers already).
type Mean struct {
	V      []float64
	N      float64
	Shrink float64
}

// DecodeMean decodes round 0's release [v | n] (integers, the noise added)
// with the calibration's noise on v for the pretest.
func DecodeMean(pr Params, c Calibration, vals []int64) (Mean, error) {
	if len(vals) != pr.Round0Len() {
		return Mean{}, fmt.Errorf("power: round 0's release has %d values, want %d", len(vals), pr.Round0Len())
	}
	s := math.Ldexp(1, -int(pr.Bits))
	m := Mean{V: make([]float64, pr.D), N: math.Max(float64(vals[pr.D])*s, 1)}
	norm2 := 0.0
	for i, x := range vals[:pr.D] {
		m.V[i] = float64(x) * s
		norm2 += m.V[i] * m.V[i]
	}
	sv := c.SigmaV()
	m.Shrink = analysis.ShrinkFactor(norm2, pr.D, sv*sv)
	return m, nil
}

// DecodeRound decodes a power round's release (d x p integers at scale
// 2^(2g+h), the noise added) under its public matrix q and centres it:
// Yc = Y - (c v)((c v)^T Qf) / n, Qf = Qq / 2^h, which is (S + noise) Qf for
// the scatter S = sum z z^T - n m m^T centred on the shrunk mean m = c v / n.
func DecodeRound(pr Params, q *QMatrix, vals []int64, m Mean) (*mat.Dense, error) {
	if len(vals) != pr.Len() {
		return nil, fmt.Errorf("power: a round's release has %d values, want %d", len(vals), pr.Len())
	}
	if q.D != pr.D || q.P != pr.P {
		return nil, fmt.Errorf("power: public matrix %d x %d for a %d x %d job", q.D, q.P, pr.D, pr.P)
	}
	s := math.Ldexp(1, -int(2*pr.Bits+pr.QBits))
	y := mat.NewDense(pr.D, pr.P, nil)
	for i, x := range vals {
		y.Set(i/pr.P, i%pr.P, float64(x)*s)
	}
	if m.Shrink > 0 && len(m.V) == pr.D {
		cv := mat.NewVecDense(pr.D, nil)
		cv.ScaleVec(m.Shrink, mat.NewVecDense(pr.D, append([]float64(nil), m.V...)))
		var w mat.VecDense // (c v)^T Qf
		w.MulVec(q.Float().T(), cv)
		y.RankOne(y, -1/m.N, cv, &w)
	}
	return y, nil
}

// Next returns the public matrix of the next round: orth(Yc) quantised
// (Quantize).
func Next(pr Params, yc *mat.Dense) (*QMatrix, error) {
	q, err := Orth(yc)
	if err != nil {
		return nil, err
	}
	out, _, err := Quantize(q, pr.QBits)
	return out, err
}

// Components are the job's result: the top k components (d x k, unit
// columns, each with its entry of largest magnitude positive) and their
// eigenvalue estimates.
type Components struct {
	W      *mat.Dense
	Values []float64
}

// Finish returns the components from the last round's centred release Yc
// under its public matrix Qf (QMatrix.Float): with Qf = Q_o R (Q_o = orth(Qf)), Yc R^-1 =
// S Q_o + G R^-1, whose top k left singular vectors are the components and
// whose singular values estimate the eigenvalues (exact when Q_o spans an
// invariant subspace of S and there is no noise).
func Finish(pr Params, qf, yc *mat.Dense) (Components, error) {
	qo, err := Orth(qf)
	if err != nil {
		return Components{}, err
	}
	var r mat.Dense
	r.Mul(qo.T(), qf)
	var rinv mat.Dense
	if err := rinv.Inverse(&r); err != nil {
		return Components{}, fmt.Errorf("power: the last public matrix is singular: %w", err)
	}
	var m mat.Dense
	m.Mul(yc, &rinv)
	var svd mat.SVD
	if !svd.Factorize(&m, mat.SVDThin) {
		return Components{}, errors.New("power: the last round's SVD did not converge")
	}
	var u mat.Dense
	svd.UTo(&u)
	sv := svd.Values(nil)
	w := mat.NewDense(pr.D, pr.K, nil)
	w.Copy(u.Slice(0, pr.D, 0, pr.K))
	signs(w)
	return Components{W: w, Values: sv[:pr.K]}, nil
}

// Bound is e of the noisy power method's first condition (Hardt and Price
// 2014, Theorem 1.1): 5 ||G_t|| <= e gap in every round, with ||G_t|| <=
// sigma (sqrt(d) + sqrt(p) + sqrt(2 log(T / beta))) in all T rounds with
// probability 1 - beta for Gaussian noise of standard deviation sigma per
// entry (data units). When the second condition holds too, ||(I - Q Q^T)
// U_k|| <= e after O(lambda_k / gap log(d / e)) rounds; e >= 1 promises
// nothing. gap is lambda_k - lambda_{k+1} (or lambda_k - lambda_{q+1},
// Balcan et al. 2016).
func Bound(sigma float64, d, p, rounds int, beta, gap float64) float64 {
	if !(gap > 0) {
		return math.Inf(1)
	}
	norm := sigma * (math.Sqrt(float64(d)) + math.Sqrt(float64(p)) + math.Sqrt(2*math.Log(float64(rounds)/beta)))
	return 5 * norm / gap
}

// FinishRitz returns the components from the last round by Rayleigh-Ritz
// in the span of its public matrix: with Qf = Q_o R, H = Q_o^T Yc R^-1 =
// Q_o^T S Q_o + Q_o^T G R^-1 (p x p), symmetrised; the components are
// Q_o times H's top k eigenvectors and its eigenvalues the estimates. The
// noise enters through its p x p projection only (spectral norm about 2
// sigma sqrt(p), against sigma (sqrt(d) + sqrt(p)) for Finish), but the
// components stay in span(Q_T): the choice when that span is known to hold
// the top k, as a reference panel's components do for population structure
// (a public fact, so the choice is too). Post-processing, like Finish.
func FinishRitz(pr Params, qf, yc *mat.Dense) (Components, error) {
	qo, err := Orth(qf)
	if err != nil {
		return Components{}, err
	}
	var r, rinv mat.Dense
	r.Mul(qo.T(), qf)
	if err := rinv.Inverse(&r); err != nil {
		return Components{}, fmt.Errorf("power: the last public matrix is singular: %w", err)
	}
	var m, h mat.Dense
	m.Mul(yc, &rinv)
	h.Mul(qo.T(), &m)
	sym := mat.NewSymDense(pr.P, nil)
	for i := range pr.P {
		for j := i; j < pr.P; j++ {
			sym.SetSym(i, j, (h.At(i, j)+h.At(j, i))/2)
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(sym, true) {
		return Components{}, errors.New("power: the Ritz matrix's eigendecomposition did not converge")
	}
	vals := eig.Values(nil)
	var ev, full mat.Dense
	eig.VectorsTo(&ev)
	full.Mul(qo, &ev)
	w := mat.NewDense(pr.D, pr.K, nil)
	out := Components{W: w}
	for j := range pr.K {
		col := pr.P - 1 - j // gonum: ascending
		w.SetCol(j, mat.Col(nil, col, &full))
		out.Values = append(out.Values, vals[col])
	}
	signs(w)
	return out, nil
}

// signs flips each column so that its entry of largest magnitude is
// positive (the reference's convention).
func signs(w *mat.Dense) {
	d, k := w.Dims()
	for j := range k {
		big, at := 0.0, 0
		for i := range d {
			if a := math.Abs(w.At(i, j)); a > big {
				big, at = a, i
			}
		}
		if w.At(at, j) < 0 {
			for i := range d {
				w.Set(i, j, -w.At(i, j))
			}
		}
	}
}
