package eigen

import (
	"errors"
	"fmt"
	"math"

	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/stats"
)

// DCAJob is a components DCA job's public parameters: the full layout with
// the schema's K >= 2 classes, g, the clip norm, the components wanted
// (at most K - 1) and the solver's counts; with DP noise, the noise's
// standard deviation on R and the regulariser's rule.
type DCAJob struct {
	Layout stats.Layout
	Bits   uint
	Clip   float64
	K      int
	Solver SharedConfig
	// NoiseStd is the standard deviation of all the noise on each entry
	// of R, in data units (the statistics release's Privacy.SigmaTotal.R);
	// 0 without noise. It sets the regulariser's noise term
	// analysis.NoiseMargin(NoiseStd, d).
	NoiseStd float64
	// Doublings is how many times the noise term may be doubled
	// (analysis.MaxRetryDoublings for the statistics release's rule).
	Doublings int
	// Within makes the regulariser the one of LDA: the first rho with
	// S_W + rho I positive definite rather than S_T + rho I (the
	// generalised eigenvectors are DCA's, the program the same).
	Within bool
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
	if j.NoiseStd < 0 || math.IsNaN(j.NoiseStd) || math.IsInf(j.NoiseStd, 0) {
		return fmt.Errorf("noise standard deviation %g: want a finite number >= 0", j.NoiseStd)
	}
	if j.NoiseStd == 0 {
		if j.Doublings != 0 || j.Within {
			return errors.New("a regulariser's doublings or LDA's rule without noise: the exact program has rho = TraceFactor trace / d")
		}
		return nil
	}
	if j.Doublings < 0 || j.Doublings > maxDoublings {
		return fmt.Errorf("%d doublings of the noise term: want 0 to %d", j.Doublings, maxDoublings)
	}
	_, err := newGuard(j.Layout.D, mpc.DefaultParams)
	return err
}

// margin is the regulariser's noise term in data units, 0 without noise.
func (j DCAJob) margin() float64 {
	if j.NoiseStd == 0 {
		return 0
	}
	return analysis.NoiseMargin(j.NoiseStd, j.Layout.D)
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
// reciprocal per class, on the shared normalisation). Without noise rho
// is TraceFactor trace / d and the eigenvalues lambda lie in [0, 1); with
// noise (NoiseStd > 0) rho is chosen on shares as the statistics release
// chooses it (regularise, below). It returns the party's share of the
// output column (job.OutputLen: K eigenvalues, the d x K unit components,
// n).
func (j DCAJob) Run(e *mpc.Engine, x mpc.ModT) (mpc.Shared, error) {
	if err := j.Validate(); err != nil {
		return mpc.Shared{}, err
	}
	d := j.Layout.D
	ints, err := e.FromModT(x)
	if err != nil {
		return mpc.Shared{}, err
	}
	st, err := normalise(e, ints, j.Layout, j.Bits, j.Clip, j.margin())
	if err != nil {
		return mpc.Shared{}, err
	}
	cov, mean, margin, err := st.covariance(e)
	if err != nil {
		return mpc.Shared{}, err
	}
	b, err := st.between(e, mean)
	if err != nil {
		return mpc.Shared{}, err
	}
	var z, m, scale mpc.Shared
	if j.NoiseStd > 0 {
		z, m, scale, err = j.regularise(e, cov, b, margin)
	} else {
		z, m, err = whitenExact(e, cov, b)
	}
	if err != nil {
		return mpc.Shared{}, err
	}
	cfg := j.Solver
	cfg.D, cfg.K = d, j.K
	q, y, err := SharedRunFixed(e, e.Fix(m), Start(d, Block(d, j.K)), cfg)
	if err != nil {
		return mpc.Shared{}, err
	}
	values, u, err := SharedRitz(e, q, y, j.K, cfg)
	if err != nil {
		return mpc.Shared{}, err
	}
	if j.NoiseStd > 0 {
		if values, err = j.eigenvalues(e, values, scale); err != nil {
			return mpc.Shared{}, err
		}
	}
	w, err := e.MatMul(0, mpc.Product{X: z, Y: u})
	if err != nil {
		return mpc.Shared{}, err
	}
	sq, err := e.MulElem(w[0], w[0])
	if err != nil {
		return mpc.Shared{}, err
	}
	// ||w||^2 reaches rho^-1 (about 1e6 where features are constant; with
	// noise, the whitening's bound 2^21): taken over 2^10 into the scalar
	// functions' range, the 2^5 put back into the factor.
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

// between returns B = S_B / (n c^2) from the class sums and the mean.
func (st *normalised) between(e *mpc.Engine, mean mpc.Shared) (mpc.Shared, error) {
	d, classes := st.d, st.k
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
	return e.MulConst(e.Symmetrise(e.Sub(sb[0], sb[1])), st.scale), nil
}

// whitenExact is the exact program's whitening: A = cov + rho I with rho =
// TraceFactor trace / d, Z = A^-1/2 and M = Z B Z.
func whitenExact(e *mpc.Engine, cov, b mpc.Shared) (z, m mpc.Shared, err error) {
	d := cov.R
	trace := e.Reshape(e.ColumnSums(e.Diagonal(cov)), 1, 1)
	a := e.AddDiagonal(cov, e.MulConst(trace, TraceFactor/float64(d)))
	if z, err = e.InvSqrt(a, 0, WhitenSteps); err != nil {
		return z, m, err
	}
	zb, err := e.MatMul(0, mpc.Product{X: z, Y: b})
	if err != nil {
		return z, m, err
	}
	out, err := e.MatMul(0, mpc.Product{X: zb[0], Y: z})
	if err != nil {
		return z, m, err
	}
	return z, e.Symmetrise(out[0]), nil
}
