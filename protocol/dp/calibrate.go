package dp

import (
	"fmt"
	"math"
)

// Conversion from zero-concentrated differential privacy (rho-zCDP) to
// approximate (epsilon, delta)-DP with the bound of Canonne, Kamath and
// Steinke, "The Discrete Gaussian for Differential Privacy" (arXiv:2004.00010,
// Proposition 12 / Corollary 13; also Asoodeh et al. 2020): rho-zCDP implies
// (epsilon, delta)-DP for
//
//	delta = inf_{a > 1} exp((a-1)(a*rho - epsilon)) / (a-1) * (1 - 1/a)^a.
//
// This is the expression computed by Steinke's reference code (cdp_delta in
// cdp2adp.py of github.com/IBM/discrete-gaussian-differential-privacy, commit
// cb190d2a990a78eff6e21159203bc888e095f01b):
// exp((a-1)(a*rho-eps) + a*log1p(-1/a)) / (a-1); the two agree. Every a > 1
// gives a valid upper bound on delta, so an imprecise search for a only ever
// overstates delta.
//
// Numerics. We write a = 1 + b and minimise, over b > 0,
//
//	f(b) = b((1+b) rho - eps) + (1+b) log(b/(1+b)) - log(b) = log of the bound,
//
// which avoids the cancellation in a - 1 near a = 1 and keeps every term
// finite for tiny rho or huge eps. f is convex in b with f'(b) = (1+2b) rho -
// eps + log(b/(1+b)), which is -Inf at b = 0+ and positive at b =
// (eps+1)/(2 rho) + 1 (Steinke's upper limit a = (eps+1)/(2 rho) + 2), so the
// minimiser is the root of f', found by bisection on log b. Steinke's code
// clamps a >= 1.01 "for numerical stability"; working in b needs no clamp,
// and the unclamped infimum is never larger.
//
// Floats are fine here: these functions calibrate and report public
// parameters; they do not draw noise.

// DeltaFor returns the smallest delta the conversion above gives for rho-zCDP
// at epsilon = eps: 0 if rho == 0 or eps == +Inf, 1 if rho == +Inf, and at
// most 1 otherwise. It returns NaN for a negative or NaN argument.
func DeltaFor(rho, eps float64) float64 {
	switch {
	case math.IsNaN(rho) || math.IsNaN(eps) || rho < 0 || eps < 0:
		return math.NaN()
	case rho == 0:
		return 0
	case math.IsInf(rho, 1):
		return 1
	case math.IsInf(eps, 1):
		return 0
	}
	return math.Min(math.Exp(logDeltaFor(rho, eps)), 1)
}

// logDeltaFor returns min over b > 0 of f(b) (see above) for finite rho > 0
// and finite eps >= 0.
func logDeltaFor(rho, eps float64) float64 {
	const bMin, bMax = 1e-300, 1e300
	tLo := math.Log(bMin)
	bHi := (eps+1)/(2*rho) + 1
	if !(bHi <= bMax) { // also catches +Inf
		bHi = bMax
	}
	tHi := math.Log(bHi)
	if deriv(rho, eps, bMin) >= 0 {
		// The minimiser is below 1e-300; b = 1e-300 still gives a valid
		// bound (and f there is ~0, delta ~1).
		return logBound(rho, eps, bMin)
	}
	if deriv(rho, eps, bHi) < 0 {
		// Only possible when bHi was clamped: the minimiser is beyond
		// 1e300; evaluate there (again a valid bound).
		return logBound(rho, eps, bHi)
	}
	for range 2000 {
		tm := tLo + (tHi-tLo)/2
		if tm <= tLo || tm >= tHi {
			break
		}
		if deriv(rho, eps, math.Exp(tm)) < 0 {
			tLo = tm
		} else {
			tHi = tm
		}
	}
	// Both ends bracket the minimiser and both give valid bounds.
	return minNotNaN(logBound(rho, eps, math.Exp(tLo)), logBound(rho, eps, math.Exp(tHi)))
}

// logRatio returns log(b/(1+b)) for b > 0 without cancellation.
func logRatio(b float64) float64 {
	if b < 1 {
		return math.Log(b) - math.Log1p(b)
	}
	return -math.Log1p(1 / b)
}

// logBound returns f(b), the log of the delta bound at a = 1 + b.
func logBound(rho, eps, b float64) float64 {
	return b*((1+b)*rho-eps) + (1+b)*logRatio(b) - math.Log(b)
}

// deriv returns f'(b).
func deriv(rho, eps, b float64) float64 {
	return (1+2*b)*rho - eps + logRatio(b)
}

func minNotNaN(x, y float64) float64 {
	switch {
	case math.IsNaN(x):
		return y
	case math.IsNaN(y):
		return x
	}
	return math.Min(x, y)
}

// EpsilonFor returns the smallest epsilon with DeltaFor(rho, epsilon) <=
// delta, found by bisection (as Steinke's cdp_eps) and rounded up: the
// returned value always satisfies DeltaFor(rho, epsilon) <= delta. It returns
// 0 if rho == 0 or delta >= 1, +Inf if rho == +Inf or delta == 0, and NaN for
// a negative or NaN argument.
func EpsilonFor(rho, delta float64) float64 {
	switch {
	case math.IsNaN(rho) || math.IsNaN(delta) || rho < 0 || delta < 0:
		return math.NaN()
	case rho == 0 || delta >= 1:
		return 0
	case math.IsInf(rho, 1) || delta == 0:
		return math.Inf(1)
	}
	ok := func(eps float64) bool { return DeltaFor(rho, eps) <= delta }
	if ok(0) {
		return 0
	}
	// Bun-Steinke 2016 (Proposition 1.3): rho-zCDP implies
	// (rho + 2 sqrt(rho log(1/delta)), delta)-DP, and the bound above is
	// never worse; doubling guards against rounding.
	_, hi := search(rho+2*math.Sqrt(rho*math.Log(1/delta)), ok)
	return hi
}

// RhoFor returns the largest rho (up to bisection precision) with
// DeltaFor(rho, eps) <= delta, i.e. the zCDP budget that the conversion
// above certifies as (eps, delta)-DP. The result is conservative: it is
// checked to satisfy DeltaFor(rho, eps) <= delta and is moved down if float
// rounding would violate that. It fails for eps <= 0, infinite or NaN eps, and
// delta outside (0, 1) or NaN; the error names the argument.
func RhoFor(eps, delta float64) (float64, error) {
	switch {
	case math.IsNaN(eps):
		return 0, fmt.Errorf("dp: rho for (epsilon, delta): epsilon is NaN")
	case eps <= 0:
		return 0, fmt.Errorf("dp: rho for (epsilon, delta): epsilon = %v must be positive", eps)
	case math.IsInf(eps, 1):
		return 0, fmt.Errorf("dp: rho for (epsilon, delta): epsilon must be finite")
	case math.IsNaN(delta):
		return 0, fmt.Errorf("dp: rho for (epsilon, delta): delta is NaN")
	case delta <= 0 || delta >= 1:
		return 0, fmt.Errorf("dp: rho for (epsilon, delta): delta = %v must be in (0, 1)", delta)
	}
	ok := func(rho float64) bool { return DeltaFor(rho, eps) <= delta }
	// Steinke's cdp_rho starts from rho = eps + 1; for delta close to 1 the
	// certified rho can be larger, so grow the bracket.
	hi := eps + 1
	for ok(hi) {
		if hi > math.MaxFloat64/4 {
			return hi, nil
		}
		hi *= 2
	}
	lo, _ := bisect(0, hi, func(rho float64) bool { return !ok(rho) })
	for lo > 0 && !ok(lo) {
		lo = math.Nextafter(lo, 0)
	}
	return lo, nil
}

// search locates where above switches from false to true on (0, +Inf):
// it doubles hi until above(hi) holds (returning +Inf twice if it never
// does), then bisects [0, hi].
func search(hi float64, above func(float64) bool) (float64, float64) {
	for !above(hi) {
		hi *= 2
		if math.IsInf(hi, 1) {
			return hi, hi
		}
	}
	return bisect(0, hi, above)
}

// bisect narrows [lo, hi], where above(lo) is false and above(hi) is true,
// around the point where above switches, to float precision.
func bisect(lo, hi float64, above func(float64) bool) (float64, float64) {
	for range 5000 {
		m := midpoint(lo, hi)
		if m <= lo || m >= hi {
			break
		}
		if above(m) {
			hi = m
		} else {
			lo = m
		}
	}
	return lo, hi
}

// midpoint returns a point strictly between lo and hi when one exists (else
// lo or hi): geometric while the bracket spans more than a factor of 4, so
// that tiny boundaries are located to full relative precision, arithmetic
// after that.
func midpoint(lo, hi float64) float64 {
	switch {
	case lo == 0:
		return hi / 16
	case hi/lo > 4:
		return math.Sqrt(lo) * math.Sqrt(hi)
	}
	return lo + (hi-lo)/2
}
