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

// Span returns the window of a histogram's buckets that hold the feature:
// the buckets whose counts exceed seed (noise that far out is rare among all
// the buckets of a round), grown through their neighbours whose counts
// exceed grow, one bucket added on each side; false when no count exceeds
// seed. A bucket above grow alone, away from the others, is taken for noise.
func (m Marginal) Span(seed, grow float64) (lo, hi float64, ok bool) {
	in := make([]bool, len(m.Counts))
	for j, c := range m.Counts {
		in[j] = c > seed
	}
	for changed := true; changed; {
		changed = false
		for j, c := range m.Counts {
			if !in[j] && c > grow && (j > 0 && in[j-1] || j+1 < len(in) && in[j+1]) {
				in[j], changed = true, true
			}
		}
	}
	first, last := -1, -1
	for j, ok := range in {
		if ok {
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
