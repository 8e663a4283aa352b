package job

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/floats"

	"github.com/fedpca/fedpca/protocol/analysis"
)

// Quality says how much of a result the noise accounts for: each noise scale
// next to what it affects, in data units, and warnings where the noise
// dominates. It is computed by the user from public parameters (the noise
// levels of the release) and the noisy release itself: post-processing, no
// privacy cost.
type Quality struct {
	// NoisyNStd is the standard deviation of the noise on noisy_n (the sum
	// of K noisy class counts).
	NoisyNStd float64 `json:"noisy_n_std"`
	// MeanStd is the standard deviation of the noise on each entry of the
	// mean v/n, to first order sqrt(K) sigma_v / n.
	MeanStd float64 `json:"mean_std"`
	// EntryStd is the standard deviation of the noise on each entry of R,
	// hence of the scatter matrices (sigma_R).
	EntryStd float64 `json:"scatter_entry_std"`
	// NoiseSpectralNorm is the typical spectral norm of that noise matrix,
	// 2 sqrt(d) sigma_R (the edge of the semicircle law): eigenvalues and
	// eigengaps below it are not determined by the data.
	NoiseSpectralNorm float64 `json:"noise_spectral_norm"`
	// CorrelationNoiseNorm (standardised PCA) is the typical spectral norm
	// of the noise on the correlation matrix whose components these are
	// (analysis.Correlation.NoiseNorm): its eigenvalues and eigengaps are
	// compared with it, not with NoiseSpectralNorm.
	CorrelationNoiseNorm float64 `json:"correlation_noise_norm,omitempty"`
	// EigenvalueStd (PCA) bounds the noise's first-order contribution to
	// each eigenvalue: u^T E u for a unit eigenvector u has standard
	// deviation between sigma_R and sqrt(2) sigma_R; this is the upper end
	// (of the correlation matrix's, standardised: sqrt(2) sigma_R over the
	// smallest variance).
	EigenvalueStd float64 `json:"eigenvalue_std,omitempty"`
	// ComponentEigenvalueStd and DirectionNoise (DCA, LDA) are, for each
	// component, the standard deviation of its generalised eigenvalue and
	// the angle in degrees by which noise of this size typically turns it,
	// to first order (analysis.Scatters.DiscriminantNoise).
	ComponentEigenvalueStd []float64 `json:"component_eigenvalue_std,omitempty"`
	DirectionNoise         []float64 `json:"direction_noise_degrees,omitempty"`
	// CovarianceNoiseNorm (a components release) is the noise's spectral
	// norm in the units of its eigenvalues, those of the covariance:
	// NoiseSpectralNorm / n.
	CovarianceNoiseNorm float64 `json:"covariance_noise_norm,omitempty"`
	// Warnings say where the noise dominates; Notes what the release does
	// not let one tell.
	Warnings []string `json:"warnings,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// MaxDirectionNoise is the first-order angle (degrees) above which a
// discriminant component's direction is reported as not determined by the
// data (measured: first order follows the angle the noise makes up to about
// 30 degrees and falls below it beyond).
const MaxDirectionNoise = 30

// quality computes the Quality of a result from its privacy report (the
// noise levels actually in the release, everyone honest), the scatters it
// was solved from and, for a standardised PCA, the correlation matrix.
func quality(res *Result, sc analysis.Scatters, corr *analysis.Correlation, d, classes int) (*Quality, error) {
	pr := res.Privacy
	if pr.NoNoise {
		return nil, nil
	}
	sr, sv, sn := float64(pr.SigmaTotal.R), float64(pr.SigmaTotal.V), float64(pr.SigmaTotal.N)
	q := &Quality{
		NoisyNStd:         math.Sqrt(float64(classes)) * sn,
		EntryStd:          sr,
		NoiseSpectralNorm: 2 * math.Sqrt(float64(d)) * sr,
	}
	if res.NoisyN > 0 {
		q.MeanStd = math.Sqrt(float64(classes)) * sv / res.NoisyN
	}
	if res.NoisyN < 3*q.NoisyNStd {
		q.warn("noisy_n %.4g is within 3 standard deviations (%.4g) of 0: the counts, the mean and the centring are dominated by noise", res.NoisyN, q.NoisyNStd)
	}
	c := res.Components
	switch {
	case c == nil:
	case c.Analysis == analysis.AnalysisPCA:
		norm, what := q.NoiseSpectralNorm, "the noise's spectral norm"
		q.EigenvalueStd = math.Sqrt2 * sr
		if corr != nil {
			q.floored(res.Features, corr, d)
			q.CorrelationNoiseNorm = corr.NoiseNorm(sr)
			norm, what = q.CorrelationNoiseNorm, "the noise's spectral norm on the correlation matrix"
			small := math.Inf(1)
			for _, s := range corr.SD {
				small = math.Min(small, s)
			}
			q.EigenvalueStd = math.Sqrt2 * sr / (small * small)
		}
		q.gaps(c.AllEigenvalues, len(c.Eigenvalues), func(int) float64 { return norm }, what)
	default:
		cn, err := sc.DiscriminantNoise(c, sr, sv)
		if err != nil {
			return nil, err
		}
		q.ComponentEigenvalueStd, q.DirectionNoise = cn.EigenvalueStd, cn.Angle
		for i, v := range c.Eigenvalues {
			switch {
			case v < 2*cn.EigenvalueStd[i]:
				q.warn("component %d: its eigenvalue %.4g is within 2 standard deviations of the noise (± %.3g) of 0; it may be noise", i+1, v, cn.EigenvalueStd[i])
			case cn.Angle[i] > MaxDirectionNoise:
				q.warn("component %d: noise of this release's size turns its direction by about %.0f degrees (to first order, which falls short of large angles): its eigengaps are within the noise, so its direction is not determined by the data", i+1, cn.Angle[i])
			}
		}
	}
	return q, nil
}

// componentsQuality is the Quality of a components release with DP noise
// (nil without): the same noise figures as the statistics release's of the
// same job, from the public noise levels and the released n. PCA's
// eigenvalues and eigengaps are compared in the covariance's units; the
// release holds the top k eigenvalues only, so the gap below the k-th is
// not known: a note says so, rather than the absence of a warning implying
// that the last component is determined. DCA's and LDA's noise per
// component is not computable from the release (a note says why); a
// component without a direction is warned about.
func componentsQuality(res *Result, d, classes int) *Quality {
	pr := res.Privacy
	if pr.NoNoise || res.Output == nil {
		return nil
	}
	sr, sn := float64(pr.SigmaTotal.R), float64(pr.SigmaTotal.N)
	q := &Quality{NoisyNStd: math.Sqrt(float64(classes)) * sn, EntryStd: sr, NoiseSpectralNorm: 2 * math.Sqrt(float64(d)) * sr}
	if res.NoisyN < 3*q.NoisyNStd || res.NoisyN <= 0 {
		q.warn("noisy_n %.4g is within 3 standard deviations (%.4g) of 0: the covariance's scale is dominated by noise", res.NoisyN, q.NoisyNStd)
		return q
	}
	n := res.NoisyN
	q.CovarianceNoiseNorm = q.NoiseSpectralNorm / n
	eig := res.Output.Eigenvalues
	if res.Analysis != PCA {
		q.discriminant(res.Output)
		return q
	}
	q.EigenvalueStd = math.Sqrt2 * sr / n
	q.gaps(eig, len(eig), func(int) float64 { return q.CovarianceNoiseNorm }, "the noise's spectral norm on the covariance")
	if k := len(eig); k < d {
		q.Notes = append(q.Notes, fmt.Sprintf("component %d: the next eigenvalue is not released, so whether its gap to it is above the noise (%.3g) cannot be told from this release", k, q.CovarianceNoiseNorm))
	}
	return q
}

// discriminant is a DCA or LDA components release's part of the quality.
func (q *Quality) discriminant(t *TopComponents) {
	d, k := t.Dims()
	for j := range k {
		if norm := floats.Norm(t.Vector(j), 2); norm == 0 {
			q.warn("component %d has no direction (a zero vector, eigenvalue %.4g): its generalised eigenvalue is below the resolution of the members' block iteration, or no regulariser of the statistics release's sequence (the noise term doubled up to %d times) made the right-hand matrix positive definite", j+1, t.Eigenvalues[j], analysis.MaxRetryDoublings)
		}
	}
	q.Notes = append(q.Notes, fmt.Sprintf("the noise on each generalised eigenvalue and the angle by which it turns each direction (a statistics release's component_eigenvalue_std and direction_noise_degrees) are computed from the whole pencil: its %d generalised eigenpairs, the class means and rho (analysis.Scatters.DiscriminantNoise), none of which this release carries, so they cannot be told from it, and no component is warned about for its eigengap: the statistics release of the same job reports them", d))
}

// gaps warns for each of the first k eigenvalues that is below the noise
// norm(i), or whose gap to a neighbour is.
func (q *Quality) gaps(all []float64, k int, norm func(i int) float64, what string) {
	for i := range k {
		gap := math.Inf(1)
		if i > 0 {
			gap = all[i-1] - all[i]
		}
		if i+1 < len(all) {
			gap = math.Min(gap, all[i]-all[i+1])
		}
		switch n := norm(i); {
		case all[i] < n:
			q.warn("component %d: its eigenvalue %.4g is below %s %.4g; it may be noise", i+1, all[i], what, n)
		case gap < n:
			q.warn("component %d: its eigengap %.4g is below %s %.4g; its direction within the span of its neighbours is not determined by the data", i+1, gap, what, n)
		}
	}
}

// floored warns about the features whose variance the noise hides in a
// standardised PCA.
func (q *Quality) floored(features []string, corr *analysis.Correlation, d int) {
	if len(corr.Floored) == 0 {
		return
	}
	var names []string
	for _, i := range corr.Floored {
		if i < len(features) {
			names = append(names, features[i])
		}
	}
	q.warn("%d of %d features have a variance below the noise's spectral norm %.4g (%s): each is taken at that level, so its correlations are shrunk towards 0 and it counts for less than 1 of the correlation matrix's trace d = %d, which the explained variance ratio is out of: the variance the floor took is not counted as explained (the schema's scales are too wide for this noise: give public reference scales, or a larger epsilon)",
		len(corr.Floored), d, q.NoiseSpectralNorm, strings.Join(names, ", "), d)
}

func (q *Quality) warn(format string, args ...any) {
	q.Warnings = append(q.Warnings, fmt.Sprintf(format, args...))
}

// VarianceOf says what a PCA result's explained variance ratio is out of
// (its components' TotalVariance), for a reader.
func VarianceOf(res *Result) string {
	c := res.Components
	less := ""
	if !res.Privacy.NoNoise {
		less = "; each eigenvalue less what the noise adds to it"
	}
	if res.Standardized {
		return fmt.Sprintf("of d = %.0f, the trace of the correlation matrix%s", c.TotalVariance, less)
	}
	return fmt.Sprintf("of %.4g, the sum of the total scatter's eigenvalues%s", c.TotalVariance, less)
}

// VarianceShares are the shares of a PCA result's variance that each of its
// d components explains, as its explained variance ratio counts them (the
// first k are that ratio): out of TotalVariance, each eigenvalue less what
// the noise adds to it (analysis.Supported, with the noise's spectral norm
// on S_T, or on the correlation matrix for a standardised PCA, from the
// result's quality). Nil for another analysis.
func VarianceShares(res *Result) []float64 {
	c := res.Components
	if c == nil || c.ExplainedVarianceRatio == nil {
		return nil
	}
	e := 0.0
	if q := res.Quality; q != nil {
		e = q.NoiseSpectralNorm
		if res.Standardized {
			e = q.CorrelationNoiseNorm
		}
	}
	out := make([]float64, len(c.AllEigenvalues))
	for i, l := range c.AllEigenvalues {
		if c.TotalVariance > 0 {
			out[i] = analysis.Supported(math.Max(l, 0), e) / c.TotalVariance
		}
	}
	copy(out, c.ExplainedVarianceRatio)
	return out
}
