package analysis

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// MaxRetryDoublings is how many times [SolveWithRetry] doubles the noise term of rho.
const MaxRetryDoublings = 10

// Options are the post-processing choices of DCA and LDA. The zero value is the default. It is a
// plain value, safe for concurrent use.
type Options struct {
	// K is the number of components wanted; 0 means the default. It is capped at min(K-1, d),
	// the number of discriminant directions, unless NonDiscriminant is set (then at d).
	// The number actually returned is len(Components.Eigenvalues).
	K int
	// NonDiscriminant allows K up to d: the directions after the first K-1 have generalised
	// eigenvalue ~0 (DCA: ~rho'/(lambda_T + rho)) and carry no class information.
	NonDiscriminant bool
	// Regularizer chooses rho (the ridge on the right-hand matrix).
	Regularizer Regularizer
	// RhoPrime is the ridge on S_B in DCA (default 0). LDA has none and rejects a non-zero value.
	RhoPrime float64
}

func (o Options) validate() error {
	if o.K < 0 {
		return fmt.Errorf("options: k = %d must be >= 0", o.K)
	}
	if !isFinite(o.RhoPrime) {
		return fmt.Errorf("options: rho_prime = %v is not finite", o.RhoPrime)
	}
	return o.Regularizer.Validate()
}

// PCA computes the top k principal components of the moments: the eigenpairs of PSD(S_T) with the
// largest eigenvalues. k = 0 means all d; k > d is capped at d; k < 0 is an error.
func PCA(m Moments, k int) (*Components, error) {
	s, err := m.Scatters()
	if err != nil {
		return nil, fmt.Errorf("pca: %w", err)
	}
	return s.PCA(k)
}

// DCA computes discriminant component analysis (Kung): the top generalised eigenvectors of
// (S_B + rho' I) w = lambda (S_T + rho I) w.
func DCA(m Moments, opts Options) (*Components, error) {
	s, err := m.Scatters()
	if err != nil {
		return nil, fmt.Errorf("dca: %w", err)
	}
	return s.DCA(opts)
}

// LDA computes ridge linear discriminant analysis: the top generalised eigenvectors of
// S_B w = lambda (S_W + rho I) w.
func LDA(m Moments, opts Options) (*Components, error) {
	s, err := m.Scatters()
	if err != nil {
		return nil, fmt.Errorf("lda: %w", err)
	}
	return s.LDA(opts)
}

// Solve runs the named analysis (AnalysisPCA, AnalysisDCA or AnalysisLDA); PCA uses only opts.K.
func Solve(analysis string, m Moments, opts Options) (*Components, error) {
	s, err := m.Scatters()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", analysis, err)
	}
	return s.Solve(analysis, opts)
}

// Solve runs the named analysis on the scatters.
func (s Scatters) Solve(analysis string, opts Options) (*Components, error) {
	switch analysis {
	case AnalysisPCA:
		if err := opts.validate(); err != nil {
			return nil, fmt.Errorf("pca: %w", err)
		}
		return s.PCA(opts.K)
	case AnalysisDCA:
		return s.DCA(opts)
	case AnalysisLDA:
		return s.LDA(opts)
	default:
		return nil, fmt.Errorf("solve: analysis = %q, want %q, %q or %q", analysis, AnalysisPCA, AnalysisDCA, AnalysisLDA)
	}
}

// SolveWithRetry runs the named analysis and, while DCA or LDA fails because the right-hand
// matrix is not positive definite (errors.Is(err, ErrNotPositiveDefinite)), retries with the
// noise term of rho doubled, up to MaxRetryDoublings times (rho = trace term + 2^i NoiseMargin).
// Without a noise term (explicit Rho, or NoiseStd = 0) the whole rho is doubled instead. It
// returns the components (whose Rho is the rho finally used) and the number of doublings that
// were needed. PCA never retries.
func SolveWithRetry(analysis string, m Moments, opts Options) (*Components, int, error) {
	s, err := m.Scatters()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", analysis, err)
	}
	if analysis != AnalysisDCA && analysis != AnalysisLDA {
		c, err := s.Solve(analysis, opts)
		return c, 0, err
	}
	mult := 1.0
	for i := 0; ; i++ {
		c, err := s.discriminant(analysis, opts, mult)
		if err == nil {
			return c, i, nil
		}
		if !errors.Is(err, ErrNotPositiveDefinite) {
			return nil, i, err
		}
		if i == MaxRetryDoublings {
			return nil, i, fmt.Errorf("after %d doublings of the noise term: %w", i, err)
		}
		if rho, rerr := opts.Regularizer.value(s.ST, mult); rerr == nil && rho == 0 {
			return nil, i, fmt.Errorf("rho = 0 cannot be doubled: %w", err)
		}
		mult *= 2
	}
}

// PCA computes the top k principal components from the scatters (see [PCA]). The eigenvectors of
// PSD(S_T) are those of S_T and its eigenvalues are max(lambda, 0), so the projection is applied to
// the eigenvalues of one decomposition of S_T rather than by forming PSD(S_T) and decomposing it
// again (same result, less rounding).
func (s Scatters) PCA(k int) (*Components, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("pca: %w", err)
	}
	d := s.Dim()
	if k < 0 {
		return nil, fmt.Errorf("pca: k = %d must be >= 0", k)
	}
	if k == 0 || k > d {
		k = d
	}
	vals, vecs, err := symEigen(s.ST)
	if err != nil {
		return nil, fmt.Errorf("pca: s_t: %w", err)
	}
	total := 0.0
	for i, l := range vals {
		vals[i] = math.Max(l, 0)
		total += vals[i]
	}
	w := mat.DenseCopyOf(vecs.Slice(0, d, 0, k))
	fixSigns(w)
	c := &Components{
		Analysis:       AnalysisPCA,
		Mean:           append([]float64(nil), s.Mean...),
		W:              w,
		Eigenvalues:    append([]float64(nil), vals[:k]...),
		AllEigenvalues: vals,
	}
	c.setRatio(total)
	return c, nil
}

// setRatio sets the explained variance ratio of a PCA's components out of
// total (its TotalVariance).
func (c *Components) setRatio(total float64) {
	c.TotalVariance = total
	c.ExplainedVarianceRatio = make([]float64, len(c.Eigenvalues))
	if total > 0 {
		for i, v := range c.Eigenvalues {
			c.ExplainedVarianceRatio[i] = v / total
		}
	}
}

// Correlation is the release's correlation matrix D^-1 S_T D^-1, with D^2
// the diagonal of S_T, each variance floored at the noise of an entry (so
// that a variance the noise took near or below zero still counts). A
// floored feature's diagonal entry is below 1 and its correlations are
// shrunk towards 0: the noise hides its spread.
type Correlation struct {
	C *mat.SymDense
	// SD are the standard deviations divided by (of the scatter, not
	// divided by n), each at least sqrt(floor).
	SD []float64
	// Floored are the features whose variance was below the floor, in
	// order.
	Floored []int
}

// Correlation returns the release's correlation matrix, each variance
// floored at floor (see [Correlation]).
func (s Scatters) Correlation(floor float64) (*Correlation, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("correlation: %w", err)
	}
	d := s.Dim()
	out := &Correlation{C: mat.NewSymDense(d, nil), SD: make([]float64, d)}
	for i := range d {
		v := s.ST.At(i, i)
		if !(v >= floor) {
			out.Floored = append(out.Floored, i)
		}
		out.SD[i] = math.Sqrt(math.Max(v, math.Max(floor, 1e-300)))
	}
	for i := range d {
		for j := i; j < d; j++ {
			out.C.SetSym(i, j, math.Max(-1, math.Min(1, s.ST.At(i, j)/(out.SD[i]*out.SD[j]))))
		}
	}
	return out, nil
}

// NoiseNorm returns the typical spectral norm of the noise D^-1 E D^-1 that
// a symmetric noise matrix E with independent entries of standard deviation
// sigma puts on the correlation matrix: 2 sigma max_i (1/D_i)
// sqrt(sum_j 1/D_j^2), the largest row of its entries' variances (for
// equal D, 2 sqrt(d) sigma / D^2, the semicircle's edge).
func (c *Correlation) NoiseNorm(sigma float64) float64 {
	sum, top := 0.0, 0.0
	for _, sd := range c.SD {
		sum += 1 / (sd * sd)
		top = math.Max(top, 1/sd)
	}
	return 2 * sigma * top * math.Sqrt(sum)
}

// StandardizedPCA is PCA of the rows standardised by the release's own
// standard deviations: the top-k eigenpairs of the correlation matrix,
// each variance floored at the noise's spectral norm 2 sigma sqrt(d) (sigma
// the standard deviation of the noise on each entry of S_T, 0 for none; see
// [Scatters.Correlation], which it returns too), with W mapped back to the
// schema's units (W = D_n^-1 U with D_n^2 = diag(S_T) / n): (z - mean) W
// are the projections of the standardised rows. It does not depend on the
// schema's scales, only on its clip norm and centers (clipping), and costs
// nothing: it post-processes the release. W's columns are
// D_n^-1-orthonormal, not orthonormal.
//
// The explained variance ratio claims no more than the release supports.
// It is out of d, the trace of a correlation matrix (TotalVariance): a
// floored feature's diagonal entry falls short of 1, and out of the
// matrix's own trace the ratio would count the variance the floor took as
// explained. And each eigenvalue is taken less what the noise adds to it:
// with noise of spectral norm e on the correlation (Correlation.NoiseNorm),
// an eigenvalue l above e is that of a direction of variance t, l = t +
// e^2/(4t), along which the noisy eigenvector captures t - e^2/(4t) = l -
// e^2/(2t) of the noise-free matrix (the spiked random matrix: Benaych-
// Georges and Nadakuditi 2011); an eigenvalue at or below e is not told
// apart from the noise and counts nothing. Measured on a clinical trial
// (docs/trial/pima), the ratios so taken stayed below the share the
// components captured of the rows' correlation in every run, where the
// eigenvalues over d claimed 0.04 to 0.16 more.
func (s Scatters) StandardizedPCA(k int, sigma float64) (*Components, *Correlation, error) {
	if err := s.check(); err != nil {
		return nil, nil, fmt.Errorf("pca: %w", err)
	}
	if !(s.N > 0) {
		return nil, nil, fmt.Errorf("pca: the noisy count %.4g is not positive", s.N)
	}
	d := s.Dim()
	corr, err := s.Correlation(2 * sigma * math.Sqrt(float64(d)))
	if err != nil {
		return nil, nil, err
	}
	t := s
	t.ST = corr.C
	c, err := t.PCA(k)
	if err != nil {
		return nil, nil, err
	}
	c.setRatio(float64(d))
	c.Support(corr.NoiseNorm(sigma))
	rn := math.Sqrt(s.N)
	rows, cols := c.W.Dims()
	for i := range rows {
		for j := range cols {
			c.W.Set(i, j, c.W.At(i, j)*rn/corr.SD[i])
		}
	}
	return c, corr, nil
}

// Support takes each eigenvalue of a PCA's explained variance ratio less
// what noise of spectral norm e adds to it (Supported), out of the same
// TotalVariance: the ratio then claims no more than the components capture
// of the noise-free matrix (see StandardizedPCA). e = 0 leaves it as it is.
func (c *Components) Support(e float64) {
	for i, l := range c.Eigenvalues {
		if c.TotalVariance > 0 {
			c.ExplainedVarianceRatio[i] = Supported(l, e) / c.TotalVariance
		}
	}
}

// Supported is the variance that a noisy symmetric matrix's eigenvector of
// eigenvalue l captures of the noise-free matrix, the noise of spectral
// norm e (see StandardizedPCA): l - e^2/(2t) with t = (l + sqrt(l^2 -
// e^2))/2 when l > e, 0 otherwise; l when e is 0.
func Supported(l, e float64) float64 {
	switch {
	case e == 0:
		return l
	case !(l > e):
		return 0
	}
	t := (l + math.Sqrt(l*l-e*e)) / 2
	return l - e*e/(2*t)
}

// DCA computes discriminant component analysis from the scatters (see [DCA]).
func (s Scatters) DCA(opts Options) (*Components, error) {
	return s.discriminant(AnalysisDCA, opts, 1)
}

// LDA computes ridge LDA from the scatters (see [LDA]).
func (s Scatters) LDA(opts Options) (*Components, error) {
	return s.discriminant(AnalysisLDA, opts, 1)
}

// discriminant sets up B and A for DCA or LDA and calls the shared generalised solver.
// noiseMult scales the noise term of the regulariser (SolveWithRetry).
func (s Scatters) discriminant(analysis string, opts Options, noiseMult float64) (*Components, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", analysis, err)
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", analysis, err)
	}
	d, classes := s.Dim(), s.Classes()
	k := min(classes-1, d)
	if opts.NonDiscriminant {
		k = d
	}
	if opts.K > 0 {
		k = min(k, opts.K)
	}
	if k < 1 {
		return nil, fmt.Errorf("%s: needs at least 2 classes for a discriminant direction, got K = %d (set NonDiscriminant to ask for non-discriminant directions)", analysis, classes)
	}
	rho, err := opts.Regularizer.value(s.ST, noiseMult)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", analysis, err)
	}

	vals, w, err := s.generalized(analysis, rho, opts.RhoPrime)
	if err != nil {
		return nil, err
	}
	wk := mat.DenseCopyOf(w.Slice(0, d, 0, k))
	unit := mat.DenseCopyOf(wk)
	for j := 0; j < k; j++ {
		col := unit.ColView(j)
		nrm := mat.Norm(col, 2)
		if nrm > 0 {
			for i := 0; i < d; i++ {
				unit.Set(i, j, unit.At(i, j)/nrm)
			}
		}
	}
	fixSigns(wk, unit)
	return &Components{
		Analysis:       analysis,
		Mean:           append([]float64(nil), s.Mean...),
		W:              wk,
		Eigenvalues:    append([]float64(nil), vals[:k]...),
		AllEigenvalues: vals,
		Rho:            rho,
		RhoPrime:       opts.RhoPrime,
		Unit:           unit,
	}, nil
}

// generalized solves the pencil of a discriminant analysis, (S_B + rho' I)
// w = lambda (S_T + rho I) w (DCA) or S_B w = lambda (S_W + rho I) w (LDA):
// all d eigenpairs, descending, W^T A W = I.
func (s Scatters) generalized(analysis string, rho, rhoPrime float64) ([]float64, *mat.Dense, error) {
	d := s.Dim()
	a := mat.NewSymDense(d, nil)
	b := mat.NewSymDense(d, nil)
	b.CopySym(s.SB)
	var aName string
	switch analysis {
	case AnalysisDCA:
		a.CopySym(s.ST)
		aName = "s_t + rho*I"
		addDiag(b, rhoPrime)
	case AnalysisLDA:
		if rhoPrime != 0 {
			return nil, nil, fmt.Errorf("lda: rho_prime = %v is only defined for dca", rhoPrime)
		}
		a.CopySym(s.SW)
		aName = "s_w + rho*I"
	default:
		return nil, nil, fmt.Errorf("analysis = %q is not discriminant", analysis)
	}
	addDiag(a, rho)
	vals, w, err := generalizedEigen(b, a)
	if err != nil {
		if errors.Is(err, ErrNotPositiveDefinite) {
			return nil, nil, fmt.Errorf("%s: cholesky of %s failed with rho = %g (d = %d): increase rho or use SolveWithRetry: %w", analysis, aName, rho, d, err)
		}
		return nil, nil, fmt.Errorf("%s: %w", analysis, err)
	}
	return vals, w, nil
}

func addDiag(a *mat.SymDense, x float64) {
	if x == 0 {
		return
	}
	for i := 0; i < a.SymmetricDim(); i++ {
		a.SetSym(i, i, a.At(i, i)+x)
	}
}
