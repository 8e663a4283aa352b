package profile

import (
	"fmt"
	"math"
	"strconv"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// Defaults, chosen by the measurements in docs/BENCHMARKS.md (profile
// section).
const (
	// DefaultShare is the profile's share of the total mu^2 (rho);
	// DefaultNormsShare its share when the norms round is alone (public
	// scales): a histogram's counts have sensitivity 1, so little budget
	// places C well enough.
	DefaultShare      = 0.1
	DefaultNormsShare = 0.02
	// CoarseBuckets is the marginals round's buckets per feature. A
	// feature's window grows from the buckets whose counts exceed
	// SeedSignificance times their noise through their neighbours above
	// Significant times it, plus one bucket each side (Marginal.Span):
	// SeedAlpha bounds the chance that noise alone seeds a window anywhere
	// in the round (measured: with every bucket above twice the noise a
	// seed, one of the 288 empty buckets of shuttle's round did in most
	// runs, and a window reaching it made one run in ten lose 0.03-0.1 of
	// q/q0 under bounds ten times the range).
	CoarseBuckets = 32
	Significant   = 2.0
	SeedAlpha     = 0.05
	// LocateThreshold is the rows per unit of the main job's noise, n mu /
	// sqrt(d), from which the windows are used.
	LocateThreshold = 300
	// BootstrapReps is how many times the estimates are recomputed with
	// fresh noise for their standard errors.
	BootstrapReps = 200
	// SmallQuantile, MiddleQuantile and LargeQuantile are the quantiles of
	// the row norms C is set at by default (AutoQuantile): with few rows
	// for the budget, more, and many; the thresholds separate them.
	SmallQuantile   = 0.05
	MiddleQuantile  = 0.5
	LargeQuantile   = 0.9
	SmallThreshold  = 100
	MiddleThreshold = 1000
)

// SeedSignificance returns the multiple of the noise above which a bucket
// of a marginals round over d features of k buckets each seeds a window:
// the Bonferroni bound, so that noise alone reaches it in any of the d k
// buckets with probability at most SeedAlpha (3.58 for d = 9, 3.88 for d =
// 30, 4.61 for d = 784 at 32 buckets).
func SeedSignificance(d, k int) float64 {
	return math.Sqrt2 * math.Erfcinv(2*SeedAlpha/float64(d*k))
}

// The methods that estimate centers and scales.
const (
	// Quantiles (the default): a marginals round (per-feature noisy
	// histograms over a coarse grid on the declared bounds) locates each
	// feature; a moments round inside the window found measures its mean
	// and standard deviation.
	Quantiles = "quantiles"
	// Moments: one moments round, noisy sums and sums of squares of the
	// values in the declared bounds; the mean and the standard deviation.
	// Its noise grows with the bounds' width squared (kept for comparison).
	Moments = "moments"
)

// The rounds' shares of the profile's mu^2, by method (the norms round
// last).
var RoundShares = map[string][]float64{
	Quantiles: {0.3, 0.5, 0.2},
	Moments:   {0.5, 0.5},
}

// The budget splits of the rounds (dp.DefaultSplitFor).
var (
	MomentsSplit   = dp.DefaultSplitFor("moments")
	MarginalsSplit = dp.DefaultSplitFor("marginals")
	NormsSplit     = dp.DefaultSplitFor("norms")
)

// Budget is a total (epsilon, delta) divided over the profile's rounds and
// the main job, each as the epsilon of a job at the same delta.
type Budget struct {
	Delta  float64       `json:"delta"`
	Rounds []RoundBudget `json:"rounds"`
	// Main and Mu are the main job's epsilon and Gaussian-DP mu.
	Main float64 `json:"main_epsilon"`
	Mu   float64 `json:"main_mu"`
	// Spent is the rounds' cost, as their results account it (set once
	// they ran); Main is then MainEpsilon's, and Total the epsilon at Delta
	// of the rounds and a main job of epsilon Main together, discrete
	// corrections included (dp.Compose): at most the total budget.
	Spent *dp.Cost `json:"spent,omitempty"`
	Total float64  `json:"total_epsilon,omitempty"`
}

// RoundBudget is one round's part: its epsilon at the budget's delta and
// its mu.
type RoundBudget struct {
	Epsilon float64 `json:"epsilon"`
	Mu      float64 `json:"mu"`
}

// Split divides (epsilon, delta) by exact Gaussian-DP composition: the
// profile gets share of mu^2, each round its fraction of that (fractions
// summing to 1), the main job the rest.
func Split(epsilon, delta, share float64, fractions []float64) (Budget, error) {
	if !(share > 0 && share < 1) {
		return Budget{}, fmt.Errorf("profile: share %v must be in (0, 1)", share)
	}
	sum := 0.0
	for _, f := range fractions {
		if !(f > 0) {
			return Budget{}, fmt.Errorf("profile: round share %v must be positive", f)
		}
		sum += f
	}
	if len(fractions) == 0 || math.Abs(sum-1) > 1e-9 {
		return Budget{}, fmt.Errorf("profile: the rounds' shares %v must sum to 1", fractions)
	}
	mu := dp.GaussMu(epsilon, delta)
	if !(mu > 0) || math.IsInf(mu, 0) {
		return Budget{}, fmt.Errorf("profile: no Gaussian mechanism meets (%v, %v)", epsilon, delta)
	}
	b := Budget{Delta: delta, Mu: mu * math.Sqrt(1-share)}
	for _, f := range fractions {
		m := mu * math.Sqrt(share*f)
		b.Rounds = append(b.Rounds, RoundBudget{Epsilon: dp.GaussEpsilon(m, delta), Mu: m})
	}
	b.Main = dp.GaussEpsilon(b.Mu, delta)
	return b, nil
}

// Total returns the cost of jobs composed (from their results' accounting,
// job.Privacy.Cost) and its epsilon at delta: the one account the owners'
// ledgers keep (dp.Compose).
func Total(delta float64, costs ...dp.Cost) (dp.Cost, float64) {
	c := dp.Compose(costs...)
	return c, c.Epsilon(delta)
}

// MainEpsilon returns the largest epsilon (to a relative 1e-9, rounded
// down) of a main job that, with the rounds already spent, stays within the
// total (epsilon, delta): costOf gives the main job's cost at an epsilon
// (its calibration's, dp.Calibration.Cost, discrete correction included).
// It fails when no main job fits.
func MainEpsilon(epsilon, delta float64, spent dp.Cost, costOf func(eps float64) (dp.Cost, error)) (float64, error) {
	fits := func(e float64) (bool, error) {
		c, err := costOf(e)
		if err != nil {
			return false, err
		}
		return dp.Compose(spent, c).Within(epsilon, delta), nil
	}
	lo, hi := 0.0, epsilon
	if ok, err := fits(hi); err != nil || ok {
		return hi, err
	}
	for hi-lo > 1e-9*epsilon {
		m := lo + (hi-lo)/2
		ok, err := fits(m)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = m
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, fmt.Errorf("profile: the rounds spent epsilon %.6g of %g at delta %g: nothing is left for the main job", spent.Epsilon(delta), epsilon, delta)
	}
	return lo, nil
}

// decimal returns x to the given significant digits as an exact decimal.
func decimal(x float64, digits int) (fixedpoint.Decimal, error) {
	return fixedpoint.ParseDecimal(strconv.FormatFloat(x, 'g', digits, 64))
}

// BoundsSchema returns the moments round's schema: each feature mapped from
// its declared [min, max] onto [-1, 1] and C = sqrt(d) rounded up, so that
// no row is clipped. Every feature must declare both bounds.
func BoundsSchema(declared *schema.Schema) (*schema.Schema, error) {
	s := *declared
	s.Features = append([]schema.Feature(nil), declared.Features...)
	for i, f := range s.Features {
		lo, hi := f.Bounds() // a one-hot category's are [0, 1]
		if lo == nil || hi == nil || lo.Rat().Cmp(hi.Rat()) >= 0 {
			return nil, fmt.Errorf("profile: feature %q needs declared bounds min < max (the schema's \"min\" and \"max\")", f.Name)
		}
		c, sc, err := schema.BoundsMap(*lo, *hi)
		if err != nil {
			return nil, fmt.Errorf("profile: feature %q: %w", f.Name, err)
		}
		s.Features[i].Center, s.Features[i].Scale = c, sc
	}
	var err error
	if s.ClipNorm, err = fixedpoint.FromFloat(math.Ceil(math.Sqrt(float64(s.D()))*1000) / 1000); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := s.InBox(); err != nil {
		return nil, fmt.Errorf("profile: the bounds schema %w", err)
	}
	return &s, nil
}

// Estimate is what the moments round says about each feature, in data
// units, with the noise of the estimates (as a fraction of the declared
// half-range, for the mean; of its square, for the variance).
type Estimate struct {
	N         float64   `json:"noisy_n"`
	Mean      []float64 `json:"mean"`
	Std       []float64 `json:"std"`
	MeanNoise float64   `json:"mean_noise"`
	VarNoise  float64   `json:"variance_noise"`
	// AtNoise marks the features whose noisy variance was below the noise
	// level: their std is the noise level's, an upper estimate.
	AtNoise []bool `json:"std_at_noise_level"`
}

// FromMoments reads a moments release made under bounds (BoundsSchema),
// whose v and R blocks have noise of standard deviation sigmaV and sigmaR
// (data units of the release). The estimates degrade gracefully with the
// noise: the vector of means m (in units of each feature's half-range,
// where every mean has the same noise se = sigmaV/n) is shrunk towards the
// middles of the ranges by the positive-part James-Stein factor 1 - (d-2)
// se^2/|m|^2 (each mean by 1 - se^2/m_i^2 when d < 3), and a variance below
// the noise level sigmaR/n is taken at that level, so that
// with too little data for the budget the schema falls back towards the
// declared bounds instead of trusting noise. A noisy row count below 2 is
// taken at 2, every spread then at the noise level.
func FromMoments(bounds *schema.Schema, rel *stats.Release, sigmaR, sigmaV float64) (*Estimate, error) {
	if rel.Layout.Kind != stats.Moments || rel.Layout.D != bounds.D() {
		return nil, fmt.Errorf("profile: a %s release of d=%d is not the moments of schema %s (d=%d)", rel.Layout.Kind, rel.Layout.D, bounds.ID, bounds.D())
	}
	rr, v, n := rel.Float()
	d := bounds.D()
	e := &Estimate{N: n[0], Mean: make([]float64, d), Std: make([]float64, d), AtNoise: make([]bool, d)}
	few := !(e.N >= 2)
	if few {
		e.N = 2
	}
	e.MeanNoise, e.VarNoise = sigmaV/e.N, sigmaR/e.N
	means := make([]float64, d)
	norm2 := 0.0
	for j := range means {
		means[j] = math.Max(-1, math.Min(1, v[0][j]/e.N))
		norm2 += means[j] * means[j]
	}
	se2 := e.MeanNoise * e.MeanNoise
	for j, f := range bounds.Features {
		c, _ := f.Center.Rat().Float64()
		s, _ := f.Scale.Rat().Float64()
		m := means[j]
		switch {
		case d >= 3:
			m *= math.Max(0, 1-float64(d-2)*se2/norm2)
		case m != 0:
			m *= math.Max(0, 1-se2/(m*m))
		}
		variance := rr[j*d+j]/e.N - m*m
		if variance < e.VarNoise || few {
			variance, e.AtNoise[j] = e.VarNoise, true
		}
		sd := math.Min(math.Sqrt(variance), 1)
		e.Mean[j], e.Std[j] = c+s*m, s*sd
	}
	return e, nil
}

// Edges returns the public bucket edges of the norms round for d features:
// sqrt(d) 2^(i/4) for i = -20..8, geometric from sqrt(d)/32 to 4 sqrt(d),
// 4 significant digits. Standardised rows have norms around sqrt(d); rows
// under scales that are upper estimates (a spread at the noise level, with
// bounds much wider than the data) have norms far below it, and C must be
// able to go there (measured: with the lowest edge at sqrt(d)/8, C stayed
// above every such row and the main job's noise was several times what
// the rows needed: wine under bounds ten times its range 0.53, sonar 0.20,
// against 0.60 and 0.41 with the edges down to sqrt(d)/32).
func Edges(d int) []fixedpoint.Decimal {
	var out []fixedpoint.Decimal
	for i := -20; i <= 8; i++ {
		e, err := decimal(math.Sqrt(float64(d))*math.Exp2(float64(i)/4), 4)
		if err != nil {
			panic(err)
		}
		out = append(out, e)
	}
	return out
}

// AutoQuantile returns the default quantile of the row norms C is set at,
// from the noisy row count n, the main job's Gaussian-DP mu and d. Clipping
// trades bias for noise: R's noise scales with C^2, and a row contributes
// min(norm^2, C^2) to the signal, so the signal-to-noise ratio is largest
// when every row is clipped (C below every norm: each row counts C^2, the
// PCA of the rows scaled to one norm) and falls as C rises; the bias of
// clipping falls as C rises. Which wins depends on r = n mu / sqrt(d), the
// rows per unit of the noise's spectral scale: below SmallThreshold the
// noise dominates and C goes low (SmallQuantile: nearly every row
// clipped), above MiddleThreshold the bias does (LargeQuantile), in
// between the median. Measured on the bundled datasets in
// docs/BENCHMARKS.md (profile section).
func AutoQuantile(n, mu float64, d int) float64 {
	switch r := n * mu / math.Sqrt(float64(d)); {
	case r < SmallThreshold:
		return SmallQuantile
	case r < MiddleThreshold:
		return MiddleQuantile
	}
	return LargeQuantile
}

// NoisyCount returns the total of a histogram release's noisy counts: an
// unbiased estimate of the row count (the noise of the buckets adds up, it
// is not clipped).
func NoisyCount(rel *stats.Release) float64 {
	_, _, n := rel.Float()
	total := 0.0
	for _, c := range n {
		total += c
	}
	return total
}

// ClipAt returns C at quantile q of the row norms from a norms release: the
// upper edge of the first bucket where the cumulative noisy count (negative
// counts taken as 0) reaches q of the total; the last edge when the
// quantile is beyond it.
func ClipAt(edges []fixedpoint.Decimal, rel *stats.Release, q float64) (fixedpoint.Decimal, error) {
	if rel.Layout.Kind != stats.Histogram || rel.Layout.K != len(edges)+1 {
		return fixedpoint.Decimal{}, fmt.Errorf("profile: a %s release of %d buckets is not a histogram over %d edges", rel.Layout.Kind, rel.Layout.K, len(edges))
	}
	if !(q > 0 && q <= 1) {
		return fixedpoint.Decimal{}, fmt.Errorf("profile: quantile %v must be in (0, 1]", q)
	}
	_, _, n := rel.Float()
	total := 0.0
	for _, c := range n {
		total += math.Max(c, 0)
	}
	cum := 0.0
	for i, c := range n[:len(edges)] {
		cum += math.Max(c, 0)
		if total > 0 && cum >= q*total {
			return edges[i], nil
		}
	}
	return edges[len(edges)-1], nil
}
