package eigen

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/mpc"
)

// SharedConfig are route (ii)'s public counts: the block iteration on a
// covariance held as additive shares among the members (protocol/mpc),
// each normalisation by Steps coupled Newton-Schulz steps for the inverse
// square root of the block's p x p Gram matrix, with a public ridge; the
// Rayleigh-Ritz step on shares (SharedRitz) re-orthonormalises the block
// by Ortho Newton-Schulz steps and runs Sweeps Jacobi sweeps.
type SharedConfig struct {
	D, K       int
	Iterations int
	Steps      int
	Ridge      float64
	Ortho      int
	Sweeps     int
}

// DefaultShared is 16 iterations of 20 steps (the weakest direction
// normalised in full has a singular value of about 1.5^-20 = 3e-4 of the
// bound; weaker ones are only lifted), ridge 2^-26 (every Gram eigenvalue
// above the fixed point's 2^-32 rounding). Measured on every bundled
// dataset (docs/design-components.md): within issue 32's accuracy bar.
// The Ritz step: 2 orthonormalising steps (1 is enough on wine, 0 leaves
// 5e-6 of eigenvalue error), mpc.DefaultSweeps Jacobi sweeps.
var DefaultShared = SharedConfig{Iterations: 16, Steps: 20, Ridge: 0x1p-26, Ortho: 2, Sweeps: mpc.DefaultSweeps}

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

// SharedRitz is the Rayleigh-Ritz step on shares, for SharedRun's q and
// y = (C / B) q: Q is orthonormal only to about 1e-5 on its strong
// directions, so Z = (Q^T Q)^-1/2 by cfg.Ortho coupled Newton-Schulz
// steps (quadratic from near the identity; mpc InvSqrt) makes Q Z
// orthonormal there; H = (Q Z)^T (C / B) (Q Z) is decomposed by
// mpc.SymEig (cfg.Sweeps sweeps) and the components are Q Z U. It returns
// the shares of the top k eigenvalues of C / B (a k x 1 column,
// descending) and of the d x k components; the members see only masked
// openings. The caller reveals them to the user alone.
func SharedRitz(e *mpc.Engine, q, y mpc.Shared, k int, cfg SharedConfig) (values, vectors mpc.Shared, err error) {
	if q.R != y.R || q.C != y.C {
		return values, vectors, fmt.Errorf("block %dx%d and its product %dx%d", q.R, q.C, y.R, y.C)
	}
	z, err := e.InvSqrt(e.Gram(q), cfg.Ridge, cfg.Ortho)
	if err != nil {
		return values, vectors, err
	}
	qz, err := e.MatMul(0, mpc.Product{X: q, Y: z}, mpc.Product{X: y, Y: z})
	if err != nil {
		return values, vectors, err
	}
	h, err := e.MatMul(0, mpc.Product{X: e.Transpose(qz[0]), Y: qz[1]})
	if err != nil {
		return values, vectors, err
	}
	values, u, err := mpc.SymEig(e, h[0], k, cfg.Sweeps)
	if err != nil {
		return values, vectors, fmt.Errorf("the Ritz matrix: %w", err)
	}
	x, err := e.MatMul(0, mpc.Product{X: qz[0], Y: u})
	if err != nil {
		return values, vectors, err
	}
	return values, x[0], nil
}

// Start is the public random start: a Gaussian d x p block (Box-Muller on
// the words of a stream keyed by a public constant), orthonormalised in the
// clear. Every party computes the same block.
func Start(d, p int) [][]float64 {
	s := mpc.NewStream(mpc.Seed{'f', 'e', 'd', 'p', 'c', 'a', ' ', 's', 't', 'a', 'r', 't'})
	uniform := func() float64 { return (float64(s.Uint64()>>11) + 0.5) / (1 << 53) } // in (0, 1)
	a := mat.NewDense(d, p, nil)
	for r := range d {
		for c := range p {
			a.Set(r, c, math.Sqrt(-2*math.Log(uniform()))*math.Cos(2*math.Pi*uniform()))
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
