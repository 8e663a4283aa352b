package dp

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/fedpca/fedpca/protocol/stats"
)

// analyticGaussian is testdata/analytic_gaussian.json: values of Google's
// dp_accounting (the analytic Gaussian mechanism of Balle and Wang), with the
// file's source line saying exactly how they were made.
type analyticGaussian struct {
	Source string `json:"source"`
	Sigma  []struct {
		Epsilon, Delta, Sigma float64
	} `json:"sigma_for_epsilon_delta"`
	Epsilon []struct {
		Sigma, Delta, Epsilon float64
	} `json:"epsilon_for_sigma_delta"`
}

func loadAnalytic(t *testing.T) analyticGaussian {
	t.Helper()
	b, err := os.ReadFile("testdata/analytic_gaussian.json")
	if err != nil {
		t.Fatal(err)
	}
	var a analyticGaussian
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Sigma) < 30 || len(a.Epsilon) < 20 || a.Source == "" {
		t.Fatalf("testdata/analytic_gaussian.json holds %d + %d values", len(a.Sigma), len(a.Epsilon))
	}
	return a
}

// TestGaussMuPublished: the calibration of the exact Gaussian profile
// matches dp_accounting's get_sigma_gaussian to 1e-6 relative, on the safe
// side (sigma = 1/mu never below the published value by more than float
// noise).
func TestGaussMuPublished(t *testing.T) {
	for _, c := range loadAnalytic(t).Sigma {
		sigma := 1 / GaussMu(c.Epsilon, c.Delta)
		if rel := (sigma - c.Sigma) / c.Sigma; rel < -1e-9 || rel > 1e-6 {
			t.Errorf("epsilon %g delta %g: sigma %.12g, dp_accounting %.12g (relative %+.2e)", c.Epsilon, c.Delta, sigma, c.Sigma, rel)
		}
	}
}

// TestGaussEpsilonPublished: reported epsilon is never below dp_accounting's
// get_epsilon_gaussian (beyond float noise) and within 1e-6 relative of it.
func TestGaussEpsilonPublished(t *testing.T) {
	for _, c := range loadAnalytic(t).Epsilon {
		eps := GaussEpsilon(1/c.Sigma, c.Delta)
		if c.Epsilon == 0 {
			if eps != 0 {
				t.Errorf("sigma %g delta %g: epsilon %g, dp_accounting 0", c.Sigma, c.Delta, eps)
			}
			continue
		}
		if rel := (eps - c.Epsilon) / c.Epsilon; rel < -1e-9 || rel > 1e-6 {
			t.Errorf("sigma %g delta %g: epsilon %.12g, dp_accounting %.12g (relative %+.2e)", c.Sigma, c.Delta, eps, c.Epsilon, rel)
		}
	}
}

// TestExactBeatsConversion: at every (epsilon, delta) of the grid the exact
// profile allows at least the noise-to-signal ratio the zCDP conversion does
// (mu >= sqrt(2 rho)): the conversion is an upper bound on delta, never
// tighter than the exact profile.
func TestExactBeatsConversion(t *testing.T) {
	for _, c := range loadAnalytic(t).Sigma {
		rho, err := RhoFor(c.Epsilon, c.Delta)
		if err != nil {
			t.Fatal(err)
		}
		if mu := GaussMu(c.Epsilon, c.Delta); mu < math.Sqrt(2*rho)*(1-1e-9) {
			t.Errorf("epsilon %g delta %g: exact mu %g below the conversion's %g", c.Epsilon, c.Delta, mu, math.Sqrt(2*rho))
		}
	}
}

// TestLogPhi: the log normal CDF against scipy.special.log_ndtr (Debian
// bookworm python3-scipy 1.10.1), on both sides of the switch to the
// asymptotic series at -30.
func TestLogPhi(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{
		{0, -0.6931471805599453},
		{-1, -1.841021645009264},
		{-10, -53.23128515051248},
		{-29.9, -451.3229124585287},
		{-30.1, -457.32956441638237},
		{-40, -804.6084420137539},
		{-100, -5005.524208694205},
		{3, -0.001350809964748193},
	} {
		if got := logPhi(c.x); math.Abs(got-c.want) > 1e-12*math.Max(1, math.Abs(c.want)) {
			t.Errorf("logPhi(%g) = %.16g, want %.16g", c.x, got, c.want)
		}
	}
}

// TestDiscreteCorrection: at the protocol's integer scales the correction is
// tiny but positive and finite; it shrinks as the variance grows, grows with
// the number of coordinates, and is infinite for a block without noise.
func TestDiscreteCorrection(t *testing.T) {
	small := DiscreteCorrection([]BlockNoise{{Shares: []float64{1e6}, Dim: 100}}, 1e-6)
	large := DiscreteCorrection([]BlockNoise{{Shares: []float64{1e12}, Dim: 100}}, 1e-6)
	wide := DiscreteCorrection([]BlockNoise{{Shares: []float64{1e6}, Dim: 10000}}, 1e-6)
	if !(small.Eta > 0 && small.Eta < 1e-3) || !(large.Eta < small.Eta) || !(wide.Eta > small.Eta) {
		t.Errorf("eta: small %g, large %g, wide %g", small.Eta, large.Eta, wide.Eta)
	}
	if small.LogTail > math.Log(1e-6)-tailMargin+1e-9 {
		t.Errorf("tail e^%g above delta e^-40", small.LogTail)
	}
	split := DiscreteCorrection([]BlockNoise{{Shares: []float64{5e5, 5e5}, Dim: 100}}, 1e-6)
	if !(split.Log10Tau > math.Inf(-1)) || split.Eta < small.Eta {
		t.Errorf("two shares: tau 10^%g, eta %g (one share %g)", split.Log10Tau, split.Eta, small.Eta)
	}
	if c := DiscreteCorrection([]BlockNoise{{Shares: []float64{0}, Dim: 3}}, 1e-6); !math.IsInf(c.Eta, 1) {
		t.Errorf("no noise: eta %g", c.Eta)
	}
}

// TestProfileMeetsTarget: noise calibrated by Calibrate for (epsilon, delta)
// costs at most epsilon at delta, correction included, and at least the
// exact continuous value (the correction never lowers it), and not much
// less (no more noise than needed); the R block's sigma at epsilon 1, delta
// 1e-6, split 0.95/0.04/0.01 is the exact Gaussian calibration
// (dp_accounting: 1/mu = 4.2246789) times the row cap's factor: with one
// class the worst neighbours replace a row within its class, mu^2 = 2 f_R
// + 2 f_v + f_v^2 / (2 f_R) times the add-one mu^2 (Geometry.Mu2).
func TestProfileMeetsTarget(t *testing.T) {
	const g = 16
	for _, eps := range []float64{0.1, 0.5, 1, 2, 5} {
		for _, delta := range []float64{1e-5, 1e-6, 1e-9} {
			for _, l := range []stats.Layout{{D: 50, K: 1}, {D: 784, K: 10}} {
				c, err := Calibrate(eps, delta, DefaultSplit, l, 1<<g, g)
				if err != nil {
					t.Fatal(err)
				}
				got := c.Cost.Epsilon(delta)
				if got > eps || got < GaussEpsilon(c.Mu, delta) {
					t.Errorf("eps %g delta %g dims %v: costs %.12g (continuous %.12g, correction %.3g)", eps, delta, l.Dims(), got, GaussEpsilon(c.Mu, delta), 2*c.Cost.Eta)
				}
				if eps-got > 1e-6*eps+2*float64(c.Cost.Eta)+1e-9 {
					t.Errorf("eps %g delta %g dims %v: costs %.12g, more noise than needed", eps, delta, l.Dims(), got)
				}
			}
		}
	}
	sp := Split{R: 0.95, V: 0.04, N: 0.01}
	c, err := Calibrate(1, 1e-6, sp, stats.Layout{D: 50, K: 1}, 1<<g, g)
	if err != nil {
		t.Fatal(err)
	}
	factor := 2*sp.R + 2*sp.V + sp.V*sp.V/(2*sp.R)
	if s, want := c.SigmaData(0), 4.2246789*math.Sqrt(factor/sp.R); math.Abs(s/want-1) > 0.01 {
		t.Errorf("sigma_R %g, exact calibration with the cap's factor %g: %g", s, factor, want)
	}
}
