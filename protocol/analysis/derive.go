package analysis

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// More from the same release, at no privacy cost: the covariance and
// correlation matrices, the per-class means and counts, and a ridge linear
// regression of one feature on the others, each with the scale of the noise
// it carries. Noise levels are per entry, in data units: NoiseR on each entry
// of R, NoiseV on each entry of each class sum v_k, NoiseN on each class
// count n_k (0 for a release without noise).
//
// Which are unbiased:
//   - the class sums, counts and R are unbiased (zero-mean noise);
//   - the covariance uses S_T = R - (v v^T - K NoiseV^2 I) / n: the correction
//     removes the expected contribution of the noise on v to v v^T, so the
//     numerator is unbiased; dividing by the noisy n - 1 is not (a ratio of
//     noisy quantities: the bias is of order NoiseN^2 K / n^2);
//   - the per-class means v_k / n_k are ratios too: unbiased only to first
//     order;
//   - the correlation (entries of the covariance over the square roots of
//     its diagonal) and the ridge coefficients (a matrix inverse) are
//     nonlinear in the noise and biased; their noise scales are first-order
//     (delta-method) approximations.

// Noise is the per-entry noise of a release, in data units.
type Noise struct {
	R, V, N float64
}

// Covariance is the covariance matrix of the rows (divided by n - 1, as
// numpy.cov) with the first-order standard deviation of the noise on each
// entry, NoiseR / (n - 1).
type Covariance struct {
	C        *mat.SymDense
	N        float64 // the (noisy) total count
	EntryStd float64
}

// Covariance computes the covariance matrix (see the bias note above).
func (m Moments) Covariance(noise Noise) (*Covariance, error) {
	s, err := m.Scatters()
	if err != nil {
		return nil, fmt.Errorf("covariance: %w", err)
	}
	if s.N <= 1 {
		return nil, fmt.Errorf("covariance: the noisy count %.4g is not above 1", s.N)
	}
	d := s.Dim()
	st := mat.NewSymDense(d, nil)
	st.CopySym(s.ST)
	// S_T = R - v v^T / n; add back K NoiseV^2 / n on the diagonal.
	corr := float64(m.Classes()) * noise.V * noise.V / s.N
	for i := range d {
		st.SetSym(i, i, st.At(i, i)+corr)
	}
	st.ScaleSym(1/(s.N-1), st)
	return &Covariance{C: st, N: s.N, EntryStd: noise.R / (s.N - 1)}, nil
}

// Correlation returns the correlation matrix of a covariance matrix, each
// entry clamped to [-1, 1], with the first-order standard deviation of the
// noise on each entry i, j (NoiseR / (n - 1) / sqrt(C_ii C_jj)). A feature
// whose (noisy) variance is not positive has no correlation: an error names it.
func (c *Covariance) Correlation() (*mat.SymDense, *mat.SymDense, error) {
	d := c.C.SymmetricDim()
	sd := make([]float64, d)
	for i := range d {
		v := c.C.At(i, i)
		if !(v > 0) {
			return nil, nil, fmt.Errorf("correlation: feature %d has variance %.4g after the noise; it has no correlation", i, v)
		}
		sd[i] = math.Sqrt(v)
	}
	r := mat.NewSymDense(d, nil)
	std := mat.NewSymDense(d, nil)
	for i := range d {
		for j := i; j < d; j++ {
			x := math.Max(-1, math.Min(1, c.C.At(i, j)/(sd[i]*sd[j])))
			if i == j {
				x = 1
			}
			r.SetSym(i, j, x)
			if i != j {
				std.SetSym(i, j, c.EntryStd/(sd[i]*sd[j]))
			}
		}
	}
	return r, std, nil
}

// ClassStats are the per-class means and counts, with their noise.
type ClassStats struct {
	// Means[k] is v_k / n_k (counts clamped to at least MinClassCount);
	// MeanStd[k] its first-order noise, NoiseV / n_k per entry.
	Means   [][]float64
	MeanStd []float64
	// Counts are the noisy counts n_k (not clamped), CountStd their noise.
	Counts   []float64
	CountStd float64
}

// ClassMeans computes the per-class means and counts.
func (m Moments) ClassMeans(noise Noise) (*ClassStats, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("class means: %w", err)
	}
	cs := &ClassStats{CountStd: noise.N}
	for k, vk := range m.V {
		n := math.Max(m.N[k], MinClassCount)
		mean := make([]float64, len(vk))
		for i, x := range vk {
			mean[i] = x / n
		}
		cs.Means = append(cs.Means, mean)
		cs.MeanStd = append(cs.MeanStd, noise.V/n)
		cs.Counts = append(cs.Counts, m.N[k])
	}
	return cs, nil
}

// Regression is a ridge linear regression of one feature on the others:
// target = Intercept + sum_j Coef[j] x_j over the other features (in their
// order), fitted on the centred scatter with ridge Lambda (as
// sklearn.linear_model.Ridge(alpha=Lambda, fit_intercept=True)).
type Regression struct {
	Target    int
	Features  []int // the regressors' indices
	Coef      []float64
	Intercept float64
	Lambda    float64
	// CoefStd is the first-order standard deviation of the noise on each
	// coefficient: NoiseR sqrt(1 + ||beta||^2) times the norm of the
	// coefficient's row of (S_xx + Lambda I)^-1.
	CoefStd []float64
}

// ErrRegression reports a regression that cannot be fitted.
var ErrRegression = errors.New("regression")

// Ridge regresses feature target on the others with ridge lambda (>= 0) on
// the covariance-corrected centred scatter (see Covariance).
func (m Moments) Ridge(target int, lambda float64, noise Noise) (*Regression, error) {
	d := m.Dim()
	if target < 0 || target >= d {
		return nil, fmt.Errorf("%w: target feature %d is not one of the %d features", ErrRegression, target, d)
	}
	if d < 2 {
		return nil, fmt.Errorf("%w: one feature, nothing to regress on", ErrRegression)
	}
	if math.IsNaN(lambda) || lambda < 0 || math.IsInf(lambda, 0) {
		return nil, fmt.Errorf("%w: ridge %v must be finite and >= 0", ErrRegression, lambda)
	}
	cov, err := m.Covariance(noise)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRegression, err)
	}
	s, _ := m.Scatters()
	// Back to the (corrected) scatter: multiply by n - 1.
	st := mat.NewSymDense(d, nil)
	st.ScaleSym(cov.N-1, cov.C)
	var idx []int
	for j := range d {
		if j != target {
			idx = append(idx, j)
		}
	}
	p := len(idx)
	a := mat.NewSymDense(p, nil)
	b := mat.NewVecDense(p, nil)
	for i, fi := range idx {
		for j := i; j < p; j++ {
			a.SetSym(i, j, st.At(fi, idx[j]))
		}
		a.SetSym(i, i, a.At(i, i)+lambda)
		b.SetVec(i, st.At(fi, target))
	}
	var chol mat.Cholesky
	if !chol.Factorize(a) {
		return nil, fmt.Errorf("%w: S_xx + %g I is not positive definite after the noise; raise the ridge", ErrRegression, lambda)
	}
	beta := mat.NewVecDense(p, nil)
	if err := chol.SolveVecTo(beta, b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRegression, err)
	}
	var inv mat.SymDense
	if err := chol.InverseTo(&inv); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRegression, err)
	}
	r := &Regression{Target: target, Features: idx, Lambda: lambda, Coef: make([]float64, p), CoefStd: make([]float64, p)}
	r.Intercept = s.Mean[target]
	norm2 := 0.0
	for i, fi := range idx {
		r.Coef[i] = beta.AtVec(i)
		r.Intercept -= r.Coef[i] * s.Mean[fi]
		norm2 += r.Coef[i] * r.Coef[i]
	}
	for i := range p {
		row := 0.0
		for j := range p {
			row += inv.At(i, j) * inv.At(i, j)
		}
		r.CoefStd[i] = noise.R * math.Sqrt((1+norm2)*row)
	}
	return r, nil
}
