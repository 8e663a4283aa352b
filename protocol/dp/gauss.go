package dp

import (
	"math"
	"slices"
)

// Exact privacy profile of the Gaussian mechanism.
//
// A release q(x) + N(0, diag(s_1 .. s_D)) of a query with sensitivity vector
// (Delta_1 .. Delta_D) is mu-Gaussian DP (Dong, Roth and Su 2019) with
// mu^2 = sum_j Delta_j^2 / s_j: the whole release, blocks R, v and n
// together, is one Gaussian mechanism of effective sensitivity mu. Its exact
// (epsilon, delta) trade-off is (Balle and Wang, "Improving the Gaussian
// Mechanism for Differential Privacy", ICML 2018, arXiv:1805.06530, Theorem 8
// and Eq. 6):
//
//	delta(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2),
//
// tighter than any conversion from zCDP (rho = mu^2/2), which is what the
// calibration used before: at epsilon 1, delta 1e-6 the whole release gets
// noise 1/mu = 4.2247 in units of its sensitivity instead of 4.5313.
// Gaussian DP composes exactly (mu^2 adds), so the ledgers keep
// rho = mu^2 / 2 (with the discrete corrections: Cost) and compose by
// addition.
//
// Numerics: Phi is evaluated in log space (logPhi), accurate far into the
// tails, and the difference as exp(log Phi(a)) (1 - exp(epsilon +
// log Phi(b) - log Phi(a))) without cancellation. Every comparison with a
// target delta inflates the computed delta by safetyFactor, so float rounding
// can only overstate delta: GaussEpsilon never understates epsilon and
// GaussMu never overstates mu. tests check them against Google's
// dp_accounting (testdata/analytic_gaussian.json).
//
// The protocol's noise is not a continuous Gaussian: each coordinate gets a
// sum of independent discrete Gaussians. Correction bounds the difference
// (see there), and Cost.Epsilon applies it.

// safetyFactor inflates computed deltas before comparing them with a target.
const safetyFactor = 1 + 1e-9

// logPhi returns log Phi(x), the log of the standard normal CDF.
func logPhi(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return math.NaN()
	case x > -30:
		return math.Log(0.5 * math.Erfc(-x/math.Sqrt2))
	}
	// Phi(x) = phi(x)/|x| (1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8 - ...): the
	// asymptotic series, alternating, so the truncation error is below the
	// first omitted term (945/x^10 < 2e-12 at x = -30).
	x2 := x * x
	s := 1 - 1/x2 + 3/(x2*x2) - 15/(x2*x2*x2) + 105/(x2*x2*x2*x2)
	return -x2/2 - math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log(s)
}

// GaussDelta returns delta(epsilon) of a mu-GDP mechanism (see above): 0 for
// mu == 0, 1 for mu == +Inf, NaN for negative or NaN arguments.
func GaussDelta(mu, eps float64) float64 {
	switch {
	case math.IsNaN(mu) || math.IsNaN(eps) || mu < 0 || eps < 0:
		return math.NaN()
	case mu == 0 || math.IsInf(eps, 1):
		return 0
	case math.IsInf(mu, 1):
		return 1
	}
	la := logPhi(-eps/mu + mu/2)
	lb := eps + logPhi(-eps/mu-mu/2)
	if lb >= la {
		return 0 // only by rounding: the exact difference is >= 0
	}
	return math.Exp(la) * -math.Expm1(lb-la)
}

// GaussEpsilon returns the smallest epsilon at which a mu-GDP mechanism is
// (epsilon, delta)-DP, rounded up: 0 if mu == 0 or delta >= 1, +Inf if
// mu == +Inf or delta == 0, NaN for negative or NaN arguments.
func GaussEpsilon(mu, delta float64) float64 {
	switch {
	case math.IsNaN(mu) || math.IsNaN(delta) || mu < 0 || delta < 0:
		return math.NaN()
	case mu == 0 || delta >= 1:
		return 0
	case math.IsInf(mu, 1) || delta == 0:
		return math.Inf(1)
	}
	ok := func(eps float64) bool { return GaussDelta(mu, eps)*safetyFactor <= delta }
	if ok(0) {
		return 0
	}
	_, hi := search(1, ok)
	return hi
}

// GaussMu returns the largest mu (rounded down) for which a mu-GDP mechanism
// is (eps, delta)-DP: the calibration target. It is 0 when eps or delta is not
// positive, and NaN for NaN arguments; delta >= 1 or eps == +Inf give +Inf.
func GaussMu(eps, delta float64) float64 {
	switch {
	case math.IsNaN(eps) || math.IsNaN(delta):
		return math.NaN()
	case eps <= 0 || delta <= 0:
		return 0
	case delta >= 1 || math.IsInf(eps, 1):
		return math.Inf(1)
	}
	tooMuch := func(mu float64) bool { return GaussDelta(mu, eps)*safetyFactor > delta }
	lo, _ := search(1, tooMuch)
	return lo
}

// BlockNoise is the noise of one block of a release: the variances of the
// independent discrete Gaussian shares each of its Dim coordinates gets (in
// the query's integer units).
type BlockNoise struct {
	Shares []float64
	Dim    int
}

// totals returns the total variance of each block's coordinates.
func totals(blocks []BlockNoise) [3]float64 {
	var s [3]float64
	for b, bn := range blocks[:min(len(blocks), 3)] {
		for _, v := range bn.Shares {
			s[b] += v
		}
	}
	return s
}

// Correction bounds the gap between the protocol's mechanism M (each
// coordinate j of the query plus a sum of independent discrete Gaussian
// shares of total variance parameter S_j) and the mechanism M' that adds a
// continuous Gaussian N(0, S_j) and rounds to the integers, which is
// post-processing of the continuous Gaussian mechanism and so has its exact
// profile. On the region where every coordinate of the noise is within
// M sigma_j (sigma_j = sqrt(S_j)) of 0, the pmfs of M and M' at the same
// point differ by a factor at most e^Eta, and outside it each has mass at
// most e^LogTail. Then, for every event E and neighbours x, x',
//
//	P[M(x) in E] <= e^Eta P[M'(x) in E] + t
//	             <= e^Eta (e^eps P[M'(x') in E] + delta') + t
//	             <= e^(eps + 2 Eta) P[M(x') in E] + e^Eta delta' + (e^(eps+Eta) + 1) t,
//
// so M is (eps + 2 Eta, e^Eta delta' + (e^(eps+Eta) + 1) t)-DP when M' is
// (eps, delta')-DP.
//
// Per coordinate, with S the total variance parameter of the block:
//
//   - the sum of the shares against the discrete Gaussian N_Z(0, S): within a
//     factor 1 +- tau of it pointwise, tau the Kairouz-Liu-Steinke term of the
//     shares (see DDG), contributing -log(1 - tau);
//   - N_Z(0, S) against the continuous density phi: by Poisson summation its
//     normaliser is sqrt(2 pi S) (1 + theta), theta = 2 sum_{k>=1}
//     exp(-2 pi^2 S k^2), contributing log(1 + theta) <= theta;
//   - rounding: the rounded Gaussian's mass at z is the average of
//     phi(z + t) over t in [-1/2, 1/2], which is phi(z) times a factor in
//     [exp(-1/(8S)), sinh(a)/a] with a = |z|/(2S), and sinh(a)/a <=
//     exp(a^2/6); on the region a <= M/(2 sqrt(S)), contributing
//     max(1/(8S), M^2/(24 S)).
//
// Eta is the sum over every coordinate. The tails use that discrete
// Gaussians and their sums are subgaussian with their variance parameters
// (Canonne, Kamath and Steinke 2020), as is the continuous Gaussian:
// P[|noise_j| > M sigma_j] <= 2 exp(-M^2/2) for M, and the rounded Gaussian's
// mass beyond M sigma_j is at most 2 exp(-(M - 1/(2 sigma_j))^2 / 2); with a
// union bound over the coordinates LogTail = log(2 D) - (M - 1/(2
// sigma_min))^2/2. M is chosen so that the tail is below delta e^-40.
//
// At the protocol's integer scales (S >= 2^20) Eta is of order 1e-10 and the
// tails below e^-40 delta: negligible, but computed and reported.
type Correction struct {
	Eta     float64
	LogTail float64
	// Log10Tau is log10 of the largest KLS term of the blocks.
	Log10Tau float64
}

// tailMargin is how far below delta (in nats) the tail mass is put.
const tailMargin = 40

// DiscreteCorrection computes the Correction of a release with the given
// blocks, choosing the region for the target delta. A block without noise
// (no share, or all shares 0) makes the correction infinite.
func DiscreteCorrection(blocks []BlockNoise, delta float64) Correction {
	inf := Correction{Eta: math.Inf(1), LogTail: math.Inf(1), Log10Tau: math.Inf(1)}
	if !(delta > 0) {
		return inf
	}
	dims, minS := 0, math.Inf(1)
	for _, b := range blocks {
		if b.Dim < 0 {
			return inf
		}
		dims += b.Dim
		s := 0.0
		for _, v := range b.Shares {
			if math.IsNaN(v) || v < 0 || math.IsInf(v, 1) {
				return inf
			}
			s += v
		}
		if b.Dim > 0 && s == 0 {
			return inf
		}
		if b.Dim > 0 {
			minS = math.Min(minS, s)
		}
	}
	if dims == 0 {
		return Correction{Log10Tau: math.Inf(-1), LogTail: math.Inf(-1)}
	}
	logD2 := math.Log(2 * float64(dims))
	m := 1/(2*math.Sqrt(minS)) + math.Sqrt(2*(logD2+math.Log(1/delta)+tailMargin))
	c := Correction{Log10Tau: math.Inf(-1)}
	c.LogTail = logD2 - (m-1/(2*math.Sqrt(minS)))*(m-1/(2*math.Sqrt(minS)))/2
	for _, b := range blocks {
		if b.Dim == 0 {
			continue
		}
		shares := slices.DeleteFunc(slices.Clone(b.Shares), func(v float64) bool { return v == 0 })
		s := 0.0
		for _, v := range shares {
			s += v
		}
		slices.Sort(shares)
		lt, ok := logTau(shares)
		if !ok {
			return inf
		}
		slices.Reverse(shares)
		if ltd, okd := logTau(shares); okd && ltd < lt {
			lt = ltd
		}
		c.Log10Tau = math.Max(c.Log10Tau, lt/math.Ln10)
		tau := math.Exp(lt)
		if tau >= 1 {
			return inf
		}
		theta := 2 * math.Exp(-2*math.Pi*math.Pi*s) / -math.Expm1(-2*math.Pi*math.Pi*s)
		perCoord := -math.Log1p(-tau) + theta + math.Max(1/(8*s), m*m/(24*s))
		c.Eta += float64(b.Dim) * perCoord
	}
	return c
}

// ReleaseCost returns the cost of a release of the given shape whose blocks
// (R, v, n, in that order) get the given noise, with its correction (see
// Correction) for the target delta: Rho = Geometry.Mu2 / 2 of the blocks'
// total variances, Eta and Tail from DiscreteCorrection.
func ReleaseCost(g Geometry, blocks []BlockNoise, delta float64) (Cost, Correction) {
	c := DiscreteCorrection(blocks, delta)
	mu2 := g.Mu2(totals(blocks))
	return Cost{Rho: Float(mu2 / 2), Eta: Float(c.Eta), Tail: Float(math.Exp(c.LogTail))}, c
}
