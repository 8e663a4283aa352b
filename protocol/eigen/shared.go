package eigen

import (
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/mpc"
)

// SharedConfig are route (ii)'s public counts: the block iteration on a
// covariance held as additive shares among the members (protocol/mpc),
// each normalisation by Steps coupled Newton-Schulz steps for the inverse
// square root of the block's p x p Gram matrix, with a public ridge.
type SharedConfig struct {
	D, K       int
	Iterations int
	Steps      int
	Ridge      float64
}

// DefaultShared is 16 iterations of 20 steps (the weakest direction
// normalised in full has a singular value of about 1.5^-20 = 3e-4 of the
// bound; weaker ones are only lifted), ridge 2^-26 (every Gram eigenvalue
// above the fixed point's 2^-32 rounding). Measured on every bundled
// dataset (docs/design-components.md): within issue 32's accuracy bar.
var DefaultShared = SharedConfig{Iterations: 16, Steps: 20, Ridge: 0x1p-26}

// SharedRun runs the iteration on c, the shares of C / B (B >= lambda_1 is
// public, so the Gram matrices have eigenvalues in [0, 1]): c is opened
// once masked (mpc Fix), then per iteration Y = (C / B) Q, G = Y^T Y,
// Z = G^-1/2, Q = Y Z; it returns the shares of the last Q and of
// Y = (C / B) Q for the Rayleigh-Ritz step. q0 is the public start.
// The members see only masked openings; nobody sees C, Y, G or Q.
func SharedRun(e *mpc.Engine, c mpc.Shared, q0 [][]float64, cfg SharedConfig) (q, y mpc.Shared, err error) {
	if c.R != c.C || c.R != len(q0) {
		return q, y, fmt.Errorf("covariance %dx%d and start of %d rows", c.R, c.C, len(q0))
	}
	return SharedRunFixed(e, e.Fix(c), q0, cfg)
}

// SharedRunFixed is SharedRun on a covariance already opened masked (mpc
// Fix), which the caller uses again.
func SharedRunFixed(e *mpc.Engine, fx *mpc.Fixed, q0 [][]float64, cfg SharedConfig) (q, y mpc.Shared, err error) {
	q = e.Const(mpc.EncodeMat(q0, e.P.F))
	for range cfg.Iterations {
		if y, err = e.MulFixed(fx, q); err != nil {
			return q, y, err
		}
		z, err := e.InvSqrt(e.Gram(y), cfg.Ridge, cfg.Steps)
		if err != nil {
			return q, y, err
		}
		out, err := e.MatMul(0, mpc.Product{X: y, Y: z})
		if err != nil {
			return q, y, err
		}
		q = out[0]
	}
	y, err = e.MulFixed(fx, q)
	return q, y, err
}

// Start is the public random start: a Gaussian d x p block from a public
// seed, orthonormalised in the clear.
func Start(d, p int) [][]float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	a := mat.NewDense(d, p, nil)
	for r := range d {
		for c := range p {
			a.Set(r, c, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(a)
	var q mat.Dense
	qr.QTo(&q)
	out := make([][]float64, d)
	for r := range d {
		out[r] = make([]float64, p)
		for c := range p {
			out[r][c] = q.At(r, c)
		}
	}
	return out
}
