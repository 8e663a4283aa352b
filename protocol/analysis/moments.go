package analysis

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Moments are the sufficient statistics of the union of all rows, in data units (the user has
// already decoded the fixed-point release):
//
//   - R = sum z z^T over all rows (d x d, symmetric, NOT centred);
//   - V[k] = sum of the rows of class k (length d), K vectors (K = 1 for plain PCA);
//   - N[k] = number of rows of class k. After DP noise a count may be non-integer, tiny or even
//     <= 0; [Moments.Scatters] clamps each count to at least 1.
//
// The classes are in the order of the schema's class list. Moments is a plain value: the methods
// never modify it, so it is safe for concurrent use as long as nobody mutates R, V or N.
type Moments struct {
	R *mat.SymDense
	V [][]float64
	N []float64
}

// MinClassCount is the value below which a (noisy) class count is clamped by [Moments.Scatters].
const MinClassCount = 1

// Dim returns d, the number of features (0 when R is nil or empty).
func (m Moments) Dim() int {
	if m.R == nil || m.R.IsEmpty() {
		return 0
	}
	return m.R.SymmetricDim()
}

// Classes returns K, the number of classes.
func (m Moments) Classes() int { return len(m.V) }

// Validate checks that the dimensions are consistent (d >= 1, K >= 1, len(N) = K, every V[k] of
// length d) and that every value is finite.
func (m Moments) Validate() error {
	if m.R == nil || m.R.IsEmpty() {
		return errors.New("moments: r is nil or empty (need d >= 1)")
	}
	d := m.R.SymmetricDim()
	if d < 1 {
		return fmt.Errorf("moments: r has dimension %d (need d >= 1)", d)
	}
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			if x := m.R.At(i, j); math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("moments: r[%d][%d] = %v is not finite", i, j, x)
			}
		}
	}
	if len(m.V) < 1 {
		return errors.New("moments: v has no classes (need K >= 1)")
	}
	if len(m.N) != len(m.V) {
		return fmt.Errorf("moments: n has %d counts but v has %d classes", len(m.N), len(m.V))
	}
	for k, vk := range m.V {
		if len(vk) != d {
			return fmt.Errorf("moments: v[%d] has length %d, want d = %d", k, len(vk), d)
		}
		for i, x := range vk {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("moments: v[%d][%d] = %v is not finite", k, i, x)
			}
		}
	}
	for k, x := range m.N {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("moments: n[%d] = %v is not finite", k, x)
		}
	}
	return nil
}

// Scatters are the scatter matrices (sums, not divided by n) derived from [Moments]:
//
//	S_T = R - v v^T / n                     total scatter, v = sum_k V[k], n = sum_k ClassN[k]
//	S_W = R - sum_k V[k] V[k]^T / ClassN[k] within-class scatter
//	S_B = S_T - S_W                         between-class scatter
//
// With DP noise none of them needs to be positive semidefinite. A Scatters value is not modified
// by any method here and is safe for concurrent use as long as nobody mutates it.
type Scatters struct {
	ST, SW, SB *mat.SymDense
	// Mean = v / n, the mean row.
	Mean []float64
	// N is the total count n = sum of ClassN.
	N float64
	// ClassN are the class counts after clamping to >= MinClassCount.
	ClassN []float64
	// ClassMeans are V[k] / ClassN[k], the class means.
	ClassMeans [][]float64
}

// Scatters computes the scatter matrices. Each class count is first clamped to at least
// [MinClassCount] (= 1): with DP noise a count can be tiny or negative, and dividing by it would
// blow up (or flip the sign of) the class term; a class that truly has no rows has V[k] ~ noise,
// so clamping its count to 1 keeps its contribution of the order of the noise. The between-class
// scatter is evaluated as sum_k V[k] V[k]^T / n_k - v v^T / n, which is algebraically identical to
// S_T - S_W but does not subtract R from itself (less cancellation).
func (m Moments) Scatters() (Scatters, error) {
	if err := m.Validate(); err != nil {
		return Scatters{}, fmt.Errorf("scatters: %w", err)
	}
	d := m.Dim()
	classN := make([]float64, len(m.N))
	v := make([]float64, d)
	n := 0.0
	for k, nk := range m.N {
		classN[k] = math.Max(nk, MinClassCount)
		n += classN[k]
		for i, x := range m.V[k] {
			v[i] += x
		}
	}
	mean := make([]float64, d)
	for i := range v {
		mean[i] = v[i] / n
	}
	vv := mat.NewVecDense(d, v)

	st := mat.NewSymDense(d, nil)
	st.SymRankOne(m.R, -1/n, vv)

	sw := mat.NewSymDense(d, nil)
	sw.CopySym(m.R)
	sb := mat.NewSymDense(d, nil)
	means := make([][]float64, len(m.V))
	for k, vk := range m.V {
		x := mat.NewVecDense(d, append([]float64(nil), vk...))
		sw.SymRankOne(sw, -1/classN[k], x)
		sb.SymRankOne(sb, 1/classN[k], x)
		means[k] = make([]float64, d)
		for i, vi := range vk {
			means[k][i] = vi / classN[k]
		}
	}
	sb.SymRankOne(sb, -1/n, vv)

	return Scatters{ST: st, SW: sw, SB: sb, Mean: mean, N: n, ClassN: classN, ClassMeans: means}, nil
}

// Dim returns d.
func (s Scatters) Dim() int {
	if s.ST == nil || s.ST.IsEmpty() {
		return 0
	}
	return s.ST.SymmetricDim()
}

// Classes returns K.
func (s Scatters) Classes() int { return len(s.ClassN) }

func (s Scatters) check() error {
	d := s.Dim()
	if d < 1 {
		return errors.New("scatters: s_t is nil or empty")
	}
	for _, a := range []struct {
		name string
		m    *mat.SymDense
	}{{"s_w", s.SW}, {"s_b", s.SB}} {
		if a.m == nil || a.m.IsEmpty() || a.m.SymmetricDim() != d {
			return fmt.Errorf("scatters: %s is missing or not %d x %d", a.name, d, d)
		}
	}
	if len(s.Mean) != d {
		return fmt.Errorf("scatters: mean has length %d, want d = %d", len(s.Mean), d)
	}
	if len(s.ClassN) < 1 {
		return errors.New("scatters: class_n is empty (need K >= 1)")
	}
	return nil
}

// ShrinkCentring returns the scatters with S_T centred on a shrunk mean:
// S_T = R - v_s v_s^T / n where v_s = c v is a pretest James-Stein estimate
// of the total sum v from its noisy value: c = 0 when ||v||^2 is within four
// standard deviations of what noise alone gives (d + 4 sqrt(2d)) noiseVar,
// the positive-part c = max(0, 1 - (d - 2) noiseVar / ||v||^2) otherwise,
// noiseVar being the variance of the noise on each coordinate of v (0, or
// d < 3, leaves S_T as it is). The pretest removes the residual noise the
// plain positive part keeps when the true mean is at the centers: on glass
// (214 rows) it takes PCA from 0.006 below Analyze Gauss (analytic, paired
// draws) to 0.0016 below (2 standard deviations: 0.0047; docs/BENCHMARKS.md). It is for PCA: when the
// schema's centers are close to the true mean, the true v is small and the
// noisy v v^T / n is mostly noise, a random rank-one error of size about
// d noiseVar / n that the plain estimate subtracts in full; the shrunk
// estimate has a lower mean squared error for every true v (James and Stein
// 1961), at the price of a bias. Mean, S_W and S_B are unchanged (the mean
// stays the unbiased v/n).
func (s Scatters) ShrinkCentring(noiseVar float64) Scatters {
	d := s.Dim()
	if d < 3 || !(noiseVar > 0) || s.N <= 0 {
		return s
	}
	norm2 := 0.0
	for _, m := range s.Mean {
		norm2 += (m * s.N) * (m * s.N)
	}
	c := ShrinkFactor(norm2, d, noiseVar)
	// S_T + n m m^T - n (c m)(c m)^T = S_T + n (1 - c^2) m m^T.
	st := mat.NewSymDense(d, nil)
	st.SymRankOne(s.ST, s.N*(1-c*c), mat.NewVecDense(d, append([]float64(nil), s.Mean...)))
	out := s
	out.ST = st
	return out
}

// ShrinkFactor is the pretest James-Stein factor c of ShrinkCentring for a
// noisy sum of squared norm norm2 in d dimensions with noise variance
// noiseVar per coordinate: 0 when norm2 is within four standard deviations
// of what noise alone gives ((d + 4 sqrt(2d)) noiseVar: ||noise||^2 has mean
// d noiseVar and std sqrt(2d) noiseVar), so that the mean is taken to be at
// the schema's centers; max(0, 1 - (d - 2) noiseVar / norm2) otherwise. It
// is 1 (centre in full) for d < 3 or no noise.
func ShrinkFactor(norm2 float64, d int, noiseVar float64) float64 {
	if d < 3 || !(noiseVar > 0) {
		return 1
	}
	if norm2 > (float64(d)+4*math.Sqrt(2*float64(d)))*noiseVar {
		return math.Max(0, 1-float64(d-2)*noiseVar/norm2)
	}
	return 0
}
