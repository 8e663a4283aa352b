package eigen

import (
	"fmt"
	"math"

	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/stats"
)

// DCAJob is a components DCA job's public parameters: the full layout with
// the schema's K >= 2 classes, g, the clip norm, the components wanted
// (at most K - 1) and the solver's counts.
type DCAJob struct {
	Layout stats.Layout
	Bits   uint
	Clip   float64
	K      int
	Solver SharedConfig
}

// TraceFactor is rho's factor: rho = TraceFactor trace(S_T) / d, as in
// protocol/analysis's default regulariser and reference.json.
const TraceFactor = 1e-3

// WhitenSteps are the Newton-Schulz steps of (S_T + rho I)^-1/2: its
// eigenvalues (over n c^2) lie in [rho, 1 + rho] with rho at least
// 1e-3 trace / d, so the weakest direction (about 1e-5 at d = 64) needs
// log_1.5(1e-5^-1/2) + 6 = 20 steps; 32 leave room.
const WhitenSteps = 32

// Validate checks the job against what the program supports.
func (j DCAJob) Validate() error {
	if j.Layout.Kind != stats.Full || j.Layout.K < 2 {
		return fmt.Errorf("DCA components need the full statistics of at least 2 classes, got %s with %d", j.Layout.Kind, j.Layout.K)
	}
	if err := j.Layout.Validate(); err != nil {
		return err
	}
	if !(j.Clip > 0) || math.IsInf(j.Clip, 0) {
		return fmt.Errorf("clip norm %g: want a positive number", j.Clip)
	}
	if j.K < 1 || j.K > j.Layout.K-1 || j.K > j.Layout.D {
		return fmt.Errorf("%d DCA components of %d classes and %d features: at most %d", j.K, j.Layout.K, j.Layout.D, min(j.Layout.K-1, j.Layout.D))
	}
	return nil
}

// Run is a components DCA job's program (the same contract as PCAJob.Run):
// Kung's discriminant components, the top K generalised eigenvectors of
// S_B w = lambda (S_T + rho I) w (Kung, Kernel Methods and Machine
// Learning, 2014, ch. 9), computed as
//
//	A = S_T / (n c^2) + rho I,  B = S_B / (n c^2)
//	Z = A^-1/2 (coupled Newton-Schulz, WhitenSteps)
//	M = Z B Z, its top K eigenpairs (block iteration, Rayleigh-Ritz)
//	w = Z u, normalised to unit length
//
// with S_B / n = sum_k (v_k / n)(v_k / n_k)^T - mean mean^T (one
// reciprocal per class, on the shared normalisation). The eigenvalues
// lambda lie in [0, 1). It returns the party's share of the output column
// (job.OutputLen: K eigenvalues, the d x K unit components, n).
func (j DCAJob) Run(e *mpc.Engine, x mpc.ModT) (mpc.Shared, error) {
	if err := j.Validate(); err != nil {
		return mpc.Shared{}, err
	}
	l := j.Layout
	d, classes := l.D, l.K
	ints, err := e.FromModT(x)
	if err != nil {
		return mpc.Shared{}, err
	}
	st, err := normalise(e, ints, l, j.Bits, j.Clip)
	if err != nil {
		return mpc.Shared{}, err
	}
	cov, mean, err := st.covariance(e)
	if err != nil {
		return mpc.Shared{}, err
	}
	// Class means v_k / n_k and the between-class scatter.
	r, err := e.Reciprocal(st.nt)
	if err != nil {
		return mpc.Shared{}, err
	}
	scaled, err := e.MulElem(e.Stack(st.vt.Column(), st.vt.Column()), e.Stack(
		e.Replicate(st.w, d*classes).Column(),
		e.Transpose(e.Replicate(r, d)).Column()))
	if err != nil {
		return mpc.Shared{}, err
	}
	p := e.Reshape(e.Rows(scaled, 0, d*classes), d, classes)             // v_k / n, column k
	means := e.Reshape(e.Rows(scaled, d*classes, d*classes), d, classes) // v_k / n_k
	sb, err := e.MatMul(0, mpc.Product{X: p, Y: e.Transpose(means)}, mpc.Product{X: mean, Y: e.Transpose(mean)})
	if err != nil {
		return mpc.Shared{}, err
	}
	b := e.MulConst(e.Symmetrise(e.Sub(sb[0], sb[1])), st.scale)
	// A = cov + rho I, rho = TraceFactor trace / d.
	trace := e.Reshape(e.ColumnSums(e.Diagonal(cov)), 1, 1)
	rho := e.MulConst(trace, TraceFactor/float64(d))
	a := e.AddDiagonal(cov, rho)
	z, err := e.InvSqrt(a, 0, WhitenSteps)
	if err != nil {
		return mpc.Shared{}, err
	}
	zb, err := e.MatMul(0, mpc.Product{X: z, Y: b})
	if err != nil {
		return mpc.Shared{}, err
	}
	m, err := e.MatMul(0, mpc.Product{X: zb[0], Y: z})
	if err != nil {
		return mpc.Shared{}, err
	}
	cfg := j.Solver
	cfg.D, cfg.K = d, j.K
	fx := e.Fix(e.Symmetrise(m[0]))
	q, y, err := SharedRunFixed(e, fx, Start(d, Block(d, j.K)), cfg)
	if err != nil {
		return mpc.Shared{}, err
	}
	values, u, err := SharedRitz(e, q, y, j.K, cfg)
	if err != nil {
		return mpc.Shared{}, err
	}
	w, err := e.MatMul(0, mpc.Product{X: z, Y: u})
	if err != nil {
		return mpc.Shared{}, err
	}
	sq, err := e.MulElem(w[0], w[0])
	if err != nil {
		return mpc.Shared{}, err
	}
	// ||w||^2 reaches rho^-1 (about 1e6 where features are constant):
	// taken over 2^10 into the scalar functions' range, the 2^5 put back
	// into the factor.
	inv, err := e.InvSqrtScalar(e.MulConst(e.ColumnSums(sq), 0x1p-10))
	if err != nil {
		return mpc.Shared{}, err
	}
	unit, err := e.MulElem(w[0], e.Transpose(e.Replicate(e.MulConst(inv, 0x1p-5), d)))
	if err != nil {
		return mpc.Shared{}, err
	}
	return e.Stack(values.Column(), unit.Column(), st.total), nil
}
