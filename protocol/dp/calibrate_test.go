package dp

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

type goldenFile struct {
	DeltaFor []struct {
		Rho             *float64 `json:"rho"`
		NoiseMultiplier *float64 `json:"gaussian_noise_multiplier"`
		Eps             float64  `json:"eps"`
		Delta           float64  `json:"delta"`
		RelTol          float64  `json:"rel_tol"`
		Source          string   `json:"source"`
	} `json:"delta_for"`
	EpsilonFor []struct {
		Rho             *float64 `json:"rho"`
		NoiseMultiplier *float64 `json:"gaussian_noise_multiplier"`
		Delta           float64  `json:"delta"`
		Epsilon         float64  `json:"epsilon"`
		AbsTol          float64  `json:"abs_tol"`
		Source          string   `json:"source"`
	} `json:"epsilon_for"`
	Rounded []struct {
		Name             string  `json:"name"`
		RhoPublished     float64 `json:"rho_published"`
		RhoRounding      float64 `json:"rho_rounding"`
		Delta            float64 `json:"delta"`
		EpsilonPublished float64 `json:"epsilon_published"`
		EpsilonRounding  float64 `json:"epsilon_rounding"`
		Exact            *struct {
			GlobalScale string `json:"global_scale"`
		} `json:"exact_rho_interpretation"`
	} `json:"epsilon_for_rounded_rho"`
}

func loadGolden(t *testing.T) goldenFile {
	t.Helper()
	b, err := os.ReadFile("testdata/zcdp_conversions.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.DeltaFor) == 0 || len(g.EpsilonFor) == 0 || len(g.Rounded) == 0 {
		t.Fatal("golden file has empty sections")
	}
	return g
}

// rhoOf returns rho from an explicit value or from a Gaussian noise
// multiplier z (rho = 1/(2 z^2) for sensitivity 1).
func rhoOf(t *testing.T, rho, z *float64) float64 {
	t.Helper()
	switch {
	case rho != nil:
		return *rho
	case z != nil:
		return 1 / (2 * *z * *z)
	}
	t.Fatal("golden entry has neither rho nor gaussian_noise_multiplier")
	return 0
}

func TestConversionGolden(t *testing.T) {
	t.Parallel()
	g := loadGolden(t)
	for _, c := range g.DeltaFor {
		rho := rhoOf(t, c.Rho, c.NoiseMultiplier)
		got := DeltaFor(rho, c.Eps)
		if rel := math.Abs(got-c.Delta) / c.Delta; !(rel <= c.RelTol) {
			t.Errorf("DeltaFor(%g, %g) = %.17g, want %.17g (relative error %.2g > %g)\nsource: %s",
				rho, c.Eps, got, c.Delta, rel, c.RelTol, c.Source)
		}
	}
	for _, c := range g.EpsilonFor {
		rho := rhoOf(t, c.Rho, c.NoiseMultiplier)
		got := EpsilonFor(rho, c.Delta)
		if d := math.Abs(got - c.Epsilon); !(d <= c.AbsTol) {
			t.Errorf("EpsilonFor(%g, %g) = %.17g, want %.17g (error %.2g > %g)\nsource: %s",
				rho, c.Delta, got, c.Epsilon, d, c.AbsTol, c.Source)
		}
	}
	for _, c := range g.Rounded {
		// rho was published rounded: the published epsilon must lie between
		// the conversions of the ends of rho's rounding interval, widened by
		// the rounding of epsilon itself.
		lo := EpsilonFor(c.RhoPublished-c.RhoRounding, c.Delta) - c.EpsilonRounding
		hi := EpsilonFor(c.RhoPublished+c.RhoRounding, c.Delta) + c.EpsilonRounding
		if c.EpsilonPublished < lo || c.EpsilonPublished > hi {
			t.Errorf("%s: published epsilon %g is outside [%g, %g], the conversion of rho = %g +- %g at delta = %g",
				c.Name, c.EpsilonPublished, lo, hi, c.RhoPublished, c.RhoRounding, c.Delta)
		}
		if c.Exact != nil {
			num, den := parseRatio(t, c.Exact.GlobalScale)
			rho := (den / num) * (den / num)
			got := EpsilonFor(rho, c.Delta)
			if math.Abs(got-c.EpsilonPublished) > c.EpsilonRounding {
				t.Errorf("%s: EpsilonFor(1/global_scale^2 = %.6g, %g) = %.4f, published %.2f",
					c.Name, rho, c.Delta, got, c.EpsilonPublished)
			}
		}
	}
}

// parseRatio parses "a/b".
func parseRatio(t *testing.T, s string) (num, den float64) {
	t.Helper()
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		t.Fatalf("%q is not a ratio", s)
	}
	var err1, err2 error
	num, err1 = strconv.ParseFloat(a, 64)
	den, err2 = strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%q is not a ratio: %v %v", s, err1, err2)
	}
	return num, den
}

var (
	testRhos   = []float64{1e-12, 1e-6, 1e-3, 0.01, 0.03125, 0.1, 0.5, 1, 2.63, 10, 100, 1e4}
	testDeltas = []float64{1e-300, 1e-100, 1e-30, 1e-12, 1e-10, 1e-6, 1e-3, 0.1, 0.5, 0.9}
	testEpss   = []float64{1e-6, 1e-3, 0.01, 0.1, 0.5, 1, 2, 5, 10, 50, 1000}
)

// TestBunSteinkeUpperBound: the tight conversion is never worse than the
// standard one of Bun and Steinke 2016 (Proposition 1.3).
func TestBunSteinkeUpperBound(t *testing.T) {
	t.Parallel()
	for _, rho := range testRhos {
		for _, delta := range testDeltas {
			eps := EpsilonFor(rho, delta)
			bound := rho + 2*math.Sqrt(rho*math.Log(1/delta))
			if !(eps <= bound*(1+1e-12)) {
				t.Errorf("EpsilonFor(%g, %g) = %g > Bun-Steinke %g", rho, delta, eps, bound)
			}
		}
		for _, eps := range testEpss {
			if eps < rho {
				continue
			}
			d := DeltaFor(rho, eps)
			bound := math.Exp(-(eps - rho) * (eps - rho) / (4 * rho))
			if !(d <= bound*(1+1e-9)) {
				t.Errorf("DeltaFor(%g, %g) = %g > standard bound %g", rho, eps, d, bound)
			}
		}
	}
}

// TestConversionsAreSound: what EpsilonFor and RhoFor return is certified by
// DeltaFor, at every grid point including the extremes.
func TestConversionsAreSound(t *testing.T) {
	t.Parallel()
	for _, rho := range testRhos {
		for _, delta := range testDeltas {
			eps := EpsilonFor(rho, delta)
			if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < 0 {
				t.Errorf("EpsilonFor(%g, %g) = %g", rho, delta, eps)
				continue
			}
			if d := DeltaFor(rho, eps); !(d <= delta) {
				t.Errorf("DeltaFor(%g, EpsilonFor = %.17g) = %.17g > delta = %g", rho, eps, d, delta)
			}
		}
	}
	for _, eps := range testEpss {
		for _, delta := range testDeltas {
			rho, err := RhoFor(eps, delta)
			if err != nil {
				t.Errorf("RhoFor(%g, %g): %v", eps, delta, err)
				continue
			}
			if math.IsNaN(rho) || rho <= 0 || math.IsInf(rho, 0) {
				t.Errorf("RhoFor(%g, %g) = %g", eps, delta, rho)
				continue
			}
			if d := DeltaFor(rho, eps); !(d <= delta) {
				t.Errorf("RhoFor(%g, %g) = %.17g is not conservative: DeltaFor = %.17g", eps, delta, rho, d)
			}
			// And it is the largest such rho, to 1e-9 relative.
			if d := DeltaFor(rho*(1+1e-9), eps); d <= delta && d > 0 {
				t.Errorf("RhoFor(%g, %g) = %.17g is not maximal: DeltaFor(rho (1+1e-9)) = %g <= delta", eps, delta, rho, d)
			}
		}
	}
}

func TestRoundTrips(t *testing.T) {
	t.Parallel()
	for _, rho := range testRhos {
		for _, delta := range testDeltas {
			eps := EpsilonFor(rho, delta)
			if eps == 0 {
				continue // delta >= DeltaFor(rho, 0): rho is not recoverable
			}
			back, err := RhoFor(eps, delta)
			if err != nil {
				t.Errorf("RhoFor(EpsilonFor(%g, %g) = %g): %v", rho, delta, eps, err)
				continue
			}
			if rel := math.Abs(back-rho) / rho; rel > 1e-9 {
				t.Errorf("RhoFor(EpsilonFor(%g, %g)) = %.17g (relative error %.2g)", rho, delta, back, rel)
			}
			d := DeltaFor(rho, eps)
			if rel := math.Abs(d-delta) / delta; rel > 1e-6 {
				t.Errorf("DeltaFor(%g, EpsilonFor(%g, %g)) = %g (relative error %.2g)", rho, rho, delta, d, rel)
			}
		}
	}
}

func TestMonotonicity(t *testing.T) {
	t.Parallel()
	for _, eps := range testEpss {
		prev := 0.0
		for _, rho := range testRhos {
			d := DeltaFor(rho, eps)
			if d < prev {
				t.Errorf("DeltaFor not increasing in rho at eps = %g: %g then %g (rho %g)", eps, prev, d, rho)
			}
			prev = d
		}
	}
	for _, rho := range testRhos {
		prev := 2.0
		for _, eps := range testEpss {
			d := DeltaFor(rho, eps)
			if d > prev {
				t.Errorf("DeltaFor not decreasing in eps at rho = %g: %g then %g (eps %g)", rho, prev, d, eps)
			}
			prev = d
		}
		prevEps := math.Inf(1)
		for _, delta := range testDeltas {
			e := EpsilonFor(rho, delta)
			if e > prevEps {
				t.Errorf("EpsilonFor not decreasing in delta at rho = %g: %g then %g (delta %g)", rho, prevEps, e, delta)
			}
			prevEps = e
		}
	}
	for _, delta := range testDeltas {
		prev := 0.0
		for _, eps := range testEpss {
			r, err := RhoFor(eps, delta)
			if err != nil {
				t.Fatal(err)
			}
			if r < prev {
				t.Errorf("RhoFor not increasing in eps at delta = %g: %g then %g (eps %g)", delta, prev, r, eps)
			}
			prev = r
		}
	}
}

func TestConversionEdgeCases(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	nan := math.NaN()
	eq := func(name string, got, want float64) {
		t.Helper()
		if !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	eq("DeltaFor(0, 1)", DeltaFor(0, 1), 0)
	eq("DeltaFor(0, 0)", DeltaFor(0, 0), 0)
	eq("DeltaFor(Inf, 1)", DeltaFor(inf, 1), 1)
	eq("DeltaFor(1, Inf)", DeltaFor(1, inf), 0)
	eq("DeltaFor(-1, 1)", DeltaFor(-1, 1), nan)
	eq("DeltaFor(1, -1)", DeltaFor(1, -1), nan)
	eq("DeltaFor(NaN, 1)", DeltaFor(nan, 1), nan)
	eq("EpsilonFor(0, 1e-6)", EpsilonFor(0, 1e-6), 0)
	eq("EpsilonFor(Inf, 1e-6)", EpsilonFor(inf, 1e-6), inf)
	eq("EpsilonFor(1, 1)", EpsilonFor(1, 1), 0)
	eq("EpsilonFor(1, 0)", EpsilonFor(1, 0), inf)
	eq("EpsilonFor(1, NaN)", EpsilonFor(1, nan), nan)
	eq("EpsilonFor(-1, 0.1)", EpsilonFor(-1, 0.1), nan)
	// Extreme but valid inputs stay finite and within [0, 1].
	for _, c := range [][2]float64{{1e-300, 1}, {1e-300, 0}, {1e-30, 1e3}, {1e10, 1}, {1e300, 1e-300}, {1e-320, 1e-320}, {0.5, 1e300}} {
		d := DeltaFor(c[0], c[1])
		if math.IsNaN(d) || d < 0 || d > 1 {
			t.Errorf("DeltaFor(%g, %g) = %g", c[0], c[1], d)
		}
	}
	if d := DeltaFor(1e10, 1); d < 0.99 {
		t.Errorf("DeltaFor(1e10, 1) = %g, want close to 1", d)
	}
	if d := DeltaFor(1e-30, 1); d != 0 {
		t.Errorf("DeltaFor(1e-30, 1) = %g, want underflow to 0", d)
	}

	for _, c := range []struct {
		eps, delta float64
		arg        string
	}{
		{0, 1e-6, "epsilon"},
		{-1, 1e-6, "epsilon"},
		{nan, 1e-6, "epsilon"},
		{inf, 1e-6, "epsilon"},
		{1, 0, "delta"},
		{1, -1e-6, "delta"},
		{1, 1, "delta"},
		{1, 2, "delta"},
		{1, nan, "delta"},
	} {
		_, err := RhoFor(c.eps, c.delta)
		if err == nil {
			t.Errorf("RhoFor(%g, %g): no error", c.eps, c.delta)
			continue
		}
		if !strings.Contains(err.Error(), c.arg) {
			t.Errorf("RhoFor(%g, %g): error %q does not name %s", c.eps, c.delta, err, c.arg)
		}
	}
	// delta close to 1 certifies large rho; still sound.
	rho, err := RhoFor(0.01, 0.999999)
	if err != nil || !(DeltaFor(rho, 0.01) <= 0.999999) {
		t.Errorf("RhoFor(0.01, 0.999999) = %g, %v (DeltaFor %g)", rho, err, DeltaFor(rho, 0.01))
	}
}
