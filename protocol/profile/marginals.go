package profile

import (
	"fmt"

	"github.com/fedpca/fedpca/protocol/stats"
)

// Marginal is one feature's noisy histogram from a marginals round, in the
// bounds schema's units (every value in [-1, 1]): Counts over K buckets of
// equal width on [Lo, Hi], the first and the last also holding what lies
// beyond.
type Marginal struct {
	Lo, Hi float64
	Counts []float64
}

// Width returns the width of a bucket.
func (m Marginal) Width() float64 { return (m.Hi - m.Lo) / float64(len(m.Counts)) }

// ReadMarginals splits a marginals release into its features' histograms
// over the windows ([-1, 1] each when windows is nil) and returns them with
// the noisy row count: the mean of the features' totals (each an unbiased
// estimate of n with the noise of K counts).
func ReadMarginals(rel *stats.Release, windows [][2]float64) ([]Marginal, float64, error) {
	l := rel.Layout
	if l.Kind != stats.Marginals {
		return nil, 0, fmt.Errorf("profile: a %s release is not a marginals release", l.Kind)
	}
	if windows != nil && len(windows) != l.D {
		return nil, 0, fmt.Errorf("profile: %d windows for %d features", len(windows), l.D)
	}
	_, _, n := rel.Float()
	out := make([]Marginal, l.D)
	total := 0.0
	for i := range out {
		out[i] = Marginal{Lo: -1, Hi: 1, Counts: n[l.M(i, 0):l.M(i, l.K)]}
		if windows != nil {
			out[i].Lo, out[i].Hi = windows[i][0], windows[i][1]
		}
		for _, c := range out[i].Counts {
			total += c
		}
	}
	return out, total / float64(l.D), nil
}

// Span returns the window of a histogram's buckets whose counts exceed
// threshold (the noise's multiple), one bucket added on each side, and
// false when none does.
func (m Marginal) Span(threshold float64) (lo, hi float64, ok bool) {
	first, last := -1, -1
	for j, c := range m.Counts {
		if c > threshold {
			if first < 0 {
				first = j
			}
			last = j
		}
	}
	if first < 0 {
		return m.Lo, m.Hi, false
	}
	w, pad := m.Width(), 1
	return m.Lo + w*float64(first-pad), m.Lo + w*float64(last+1+pad), true
}
