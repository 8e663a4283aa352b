package job

import (
	"fmt"
	"math"

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
	// EigenvalueStd (PCA) bounds the noise's first-order contribution to
	// each eigenvalue: u^T E u for a unit eigenvector u has standard
	// deviation between sigma_R and sqrt(2) sigma_R; this is the upper end.
	EigenvalueStd float64 `json:"eigenvalue_std,omitempty"`
	// Warnings say where the noise dominates.
	Warnings []string `json:"warnings,omitempty"`
}

// quality computes the Quality of a result from its privacy report (the
// noise levels actually in the release, everyone honest).
func quality(res *Result, d, classes int) *Quality {
	pr := res.Privacy
	if pr.NoNoise {
		return nil
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
		q.Warnings = append(q.Warnings, fmt.Sprintf("noisy_n %.4g is within 3 standard deviations (%.4g) of 0: the counts, the mean and the centring are dominated by noise", res.NoisyN, q.NoisyNStd))
	}
	c := res.Components
	if c == nil || c.Analysis != analysis.AnalysisPCA {
		return q
	}
	q.EigenvalueStd = math.Sqrt2 * sr
	all := c.AllEigenvalues
	for i := range c.Eigenvalues {
		gap := math.Inf(1)
		if i > 0 {
			gap = all[i-1] - all[i]
		}
		if i+1 < len(all) {
			gap = math.Min(gap, all[i]-all[i+1])
		}
		switch {
		case all[i] < q.NoiseSpectralNorm:
			q.Warnings = append(q.Warnings, fmt.Sprintf("component %d: its eigenvalue %.4g is below the noise's spectral norm %.4g; it may be noise", i+1, all[i], q.NoiseSpectralNorm))
		case gap < q.NoiseSpectralNorm:
			q.Warnings = append(q.Warnings, fmt.Sprintf("component %d: its eigengap %.4g is below the noise's spectral norm %.4g; its direction within the span of its neighbours is not determined by the data", i+1, gap, q.NoiseSpectralNorm))
		}
	}
	return q
}
