package dp

import (
	"math"
	"slices"
	"testing"
)

// paperTau is tau of KLS Theorem 1 for n equal shares of variance s2,
// computed directly from the paper's formula.
func paperTau(n int, s2 float64) float64 {
	tau := 0.0
	for k := 1; k < n; k++ {
		tau += math.Exp(-2 * math.Pi * math.Pi * s2 * float64(k) / float64(k+1))
	}
	return 10 * tau
}

// paperRho is the zCDP rho for n equal shares: the minimum of the two
// branches of the KLS Renyi bound (Prop. 14 / Eq. 17, as in the authors'
// accounting_utils.py), each divided by alpha and maximised over alpha > 1.
func paperRho(n int, s2, delta2 float64, d int) float64 {
	tau := paperTau(n, s2)
	ns2 := float64(n) * s2
	rho1 := delta2*delta2/(2*ns2) + tau*float64(d)
	e := delta2/math.Sqrt(ns2) + tau*math.Sqrt(float64(d))
	return math.Min(rho1, e*e/2)
}

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Abs(want)
}

func TestDDGEqualVariancesMatchPaper(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n      int
		s2     float64
		delta2 float64
		d      int
	}{
		{2, 1, 1, 1},
		{3, 1, 1, 10},
		{10, 1, 2, 100},
		{10, 2, 1, 1000},
		{100, 1.5, 1, 50},
		{5, 4, 3, 7},
		{1000, 1, 10, 1},
	} {
		vars := make([]float64, c.n)
		for i := range vars {
			vars[i] = c.s2
		}
		rho, l10 := DDG(vars, c.delta2, c.d)
		wantTau := paperTau(c.n, c.s2)
		if e := relErr(math.Pow(10, l10), wantTau); e > 1e-12 {
			t.Errorf("n=%d s2=%g: tau = 10^%g = %g, paper %g", c.n, c.s2, l10, math.Pow(10, l10), wantTau)
		}
		want := paperRho(c.n, c.s2, c.delta2, c.d)
		if e := relErr(rho, want); e > 1e-12 {
			t.Errorf("n=%d s2=%g delta2=%g d=%d: rho = %.17g, paper %.17g", c.n, c.s2, c.delta2, c.d, rho, want)
		}
		// The form sometimes quoted for Theorem 1, with tau d/2 under the
		// square root, is never larger than ours (ours is conservative).
		ns2 := float64(c.n) * c.s2
		e1 := math.Sqrt(c.delta2*c.delta2/ns2 + wantTau*float64(c.d)/2)
		e2 := c.delta2/math.Sqrt(ns2) + wantTau*math.Sqrt(float64(c.d))
		quoted := math.Pow(math.Min(e1, e2), 2) / 2
		if rho < quoted*(1-1e-12) {
			t.Errorf("n=%d s2=%g: rho %g below the quoted Theorem 1 form %g", c.n, c.s2, rho, quoted)
		}
		// The correction is visible at these small variances.
		if g := GaussRho(ns2, c.delta2); !(rho > g) {
			t.Errorf("n=%d s2=%g: rho %g not above the Gaussian rho %g", c.n, c.s2, rho, g)
		}
	}
}

func TestDDGHeterogeneous(t *testing.T) {
	t.Parallel()
	// Two shares: tau = 10 exp(-2 pi^2 ab/(a+b)) in either order.
	a, b := 1.0, 3.0
	_, l10 := DDG([]float64{a, b}, 1, 1)
	want := 10 * math.Exp(-2*math.Pi*math.Pi*a*b/(a+b))
	if e := relErr(math.Pow(10, l10), want); e > 1e-12 {
		t.Errorf("two shares: tau = %g, want %g", math.Pow(10, l10), want)
	}

	// Three shares, computed by hand in both orders; DDG keeps the smaller.
	s := []float64{5, 1, 2}
	h := func(S, x float64) float64 { return S * x / (S + x) }
	term := func(hk float64) float64 { return 10 * math.Exp(-2*math.Pi*math.Pi*hk) }
	desc := term(h(5, 2)) + term(h(7, 1))
	asc := term(h(1, 2)) + term(h(3, 5))
	wantTau := math.Min(desc, asc)
	delta2, d := 2.0, 30
	rho, l10 := DDG(s, delta2, d)
	if e := relErr(math.Pow(10, l10), wantTau); e > 1e-12 {
		t.Errorf("three shares: tau = %g, want min(%g, %g)", math.Pow(10, l10), desc, asc)
	}
	total := 8.0
	e := delta2/math.Sqrt(total) + wantTau*math.Sqrt(float64(d))
	wantRho := math.Min(delta2*delta2/(2*total)+wantTau*float64(d), e*e/2)
	if e := relErr(rho, wantRho); e > 1e-12 {
		t.Errorf("three shares: rho = %.17g, want %.17g", rho, wantRho)
	}

	// The result does not depend on the order of the input, and zero
	// shares are ignored.
	rho1, l1 := DDG([]float64{0.75, 1, 1.5, 2, 3, 8}, 1, 10)
	base := []float64{3, 0.75, 8, 0, 1, 2, 0, 1.5}
	for rot := range base {
		for _, rev := range []bool{false, true} {
			v := append(append([]float64(nil), base[rot:]...), base[:rot]...)
			if rev {
				slices.Reverse(v)
			}
			rho2, l2 := DDG(v, 1, 10)
			if rho2 != rho1 || l2 != l1 {
				t.Errorf("order or zero shares changed the result: %v: (%g, %g) vs (%g, %g)", v, rho2, l2, rho1, l1)
			}
		}
	}

	// Heterogeneous shares with the same total: dominated by the smallest.
	rhoEq, _ := DDG([]float64{2, 2, 2}, 1, 100)
	rhoSkew, _ := DDG([]float64{1, 1, 4}, 1, 100)
	if !(rhoSkew > rhoEq) {
		t.Errorf("skewed shares rho %g should exceed equal shares rho %g (same total)", rhoSkew, rhoEq)
	}
}

// TestDDGLargeVariances: at the protocol's integer scales tau underflows any
// float and rho is the Gaussian rho of the total variance, while log10(tau)
// is still reported as a finite, hugely negative number.
func TestDDGLargeVariances(t *testing.T) {
	t.Parallel()
	for _, exp := range []int{20, 30, 40, 60, 80} {
		v := math.Ldexp(1, exp)
		for _, shares := range [][]float64{
			{v, v},
			{v, v, v, v, v},
			{v, 2 * v, 0.5 * v, 3 * v},
		} {
			total := 0.0
			for _, s := range shares {
				total += s
			}
			for _, delta2 := range []float64{1, 1 << 16, math.Ldexp(1, 40)} {
				rho, l10 := DDG(shares, delta2, 1000)
				if e := relErr(rho, GaussRho(total, delta2)); e > 1e-12 {
					t.Errorf("2^%d %v delta2=%g: rho %g, Gaussian %g", exp, shares, delta2, rho, GaussRho(total, delta2))
				}
				if math.IsInf(l10, 0) || math.IsNaN(l10) || l10 > -1e6 {
					t.Errorf("2^%d %v: log10 tau = %g, want finite and below -1e6", exp, shares, l10)
				}
			}
		}
	}
	// The log-sum-exp reports values far below float64's range exactly:
	// three shares of 100: tau = 10 (e^{-2pi^2 50} + e^{-2pi^2 200/3}).
	_, l10 := DDG([]float64{100, 100, 100}, 1, 1)
	p2 := 2 * math.Pi * math.Pi
	want := (math.Log(10) - p2*50 + math.Log1p(math.Exp(-p2*(200.0/3-50)))) / math.Ln10
	if e := relErr(l10, want); e > 1e-14 {
		t.Errorf("log10 tau = %.17g, want %.17g", l10, want)
	}
	if math.Pow(10, l10) != 0 {
		t.Errorf("test premise: 10^%g should underflow", l10)
	}
}

func TestDDGEdgeCases(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	// A single share is exactly a discrete Gaussian: no correction.
	rho, l10 := DDG([]float64{4}, 2, 10)
	if rho != GaussRho(4, 2) || !math.IsInf(l10, -1) {
		t.Errorf("single share: (%g, %g), want (%g, -Inf)", rho, l10, GaussRho(4, 2))
	}
	// No noise.
	if rho, _ := DDG(nil, 1, 1); rho != inf {
		t.Errorf("no shares: rho %g, want +Inf", rho)
	}
	if rho, _ := DDG([]float64{0, 0}, 1, 1); rho != inf {
		t.Errorf("zero shares: rho %g, want +Inf", rho)
	}
	// Zero sensitivity.
	if rho, _ := DDG([]float64{1, 1}, 0, 5); rho != 0 {
		t.Errorf("delta2 = 0: rho %g, want 0", rho)
	}
	// The guard: parallel sums below 1/2 in every order give no claim.
	if rho, _ := DDG([]float64{0.5, 0.5}, 1, 1); rho != inf {
		t.Errorf("shares 0.5, 0.5 (h = 0.25): rho %g, want +Inf", rho)
	}
	if rho, _ := DDG([]float64{1, 1}, 1, 1); math.IsInf(rho, 0) {
		t.Errorf("shares 1, 1 (h = 0.5): rho %g, want finite", rho)
	}
	// Invalid input.
	for _, c := range []struct {
		v      []float64
		delta2 float64
		d      int
	}{
		{[]float64{1, -1}, 1, 1},
		{[]float64{1, math.NaN()}, 1, 1},
		{[]float64{1, inf}, 1, 1},
		{[]float64{1, 1}, -1, 1},
		{[]float64{1, 1}, math.NaN(), 1},
		{[]float64{1, 1}, 1, -1},
	} {
		if rho, l10 := DDG(c.v, c.delta2, c.d); !math.IsNaN(rho) || !math.IsNaN(l10) {
			t.Errorf("DDG(%v, %g, %d) = (%g, %g), want NaN", c.v, c.delta2, c.d, rho, l10)
		}
	}
}

func TestGaussRho(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ v, d, want float64 }{
		{1, 1, 0.5},
		{8, 2, 0.25},
		{math.Ldexp(1, 80), math.Ldexp(1, 40), 0.5},
		{0, 1, math.Inf(1)},
		{0, 0, 0},
		{5, 0, 0},
	} {
		if got := GaussRho(c.v, c.d); got != c.want {
			t.Errorf("GaussRho(%g, %g) = %g, want %g", c.v, c.d, got, c.want)
		}
	}
	for _, c := range [][2]float64{{-1, 1}, {1, -1}, {math.NaN(), 1}, {1, math.NaN()}} {
		if got := GaussRho(c[0], c[1]); !math.IsNaN(got) {
			t.Errorf("GaussRho(%g, %g) = %g, want NaN", c[0], c[1], got)
		}
	}
}
