package job

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/stats"
)

// exactRelease is the noise-free release of a one-owner job of the analysis
// over a bundled dataset, with the noise levels the job would calibrate.
func exactRelease(t *testing.T, name, an string, clip ...string) (analysis.Moments, *stats.Release, [3]float64) {
	t.Helper()
	ds := loadDataset(t, name, 16)
	if len(clip) > 0 {
		ds.schema.ClipNorm = fixedpoint.MustDecimal(clip[0])
	}
	s := capSpec(t, ds.schema, an, 1<<20)
	acc, _, err := ReadStatistics(s, ds.schema, strings.NewReader(ds.csv()))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Layout(ds.schema)
	rel, err := stats.Unpack(l, ds.schema.Bits, acc.Pack())
	if err != nil {
		t.Fatal(err)
	}
	cal, err := s.Calibration(ds.schema)
	if err != nil {
		t.Fatal(err)
	}
	return Moments(rel), rel, [3]float64{cal.SigmaData(stats.BlockR), cal.SigmaData(stats.BlockV), cal.SigmaData(stats.BlockN)}
}

// noisy adds Gaussian noise of the release's levels to exact moments.
func noisy(m0 analysis.Moments, sigma [3]float64, rng *rand.Rand) analysis.Moments {
	d := m0.Dim()
	m := analysis.Moments{R: mat.NewSymDense(d, nil), N: make([]float64, len(m0.N))}
	for i := range d {
		for j := i; j < d; j++ {
			m.R.SetSym(i, j, m0.R.At(i, j)+sigma[0]*rng.NormFloat64())
		}
	}
	for c := range m0.V {
		v := make([]float64, d)
		for i := range v {
			v[i] = m0.V[c][i] + sigma[1]*rng.NormFloat64()
		}
		m.V = append(m.V, v)
		m.N[c] = m0.N[c] + sigma[2]*rng.NormFloat64()
	}
	return m
}

// TestDiscriminantNoiseMeasured (issue 43): the first-order angle by which
// the noise turns each DCA and LDA component, which result.json's quality
// reports and warns on, against the angle measured between the components
// of noisy releases and those of the exact release (the same regulariser),
// 30 draws at epsilon 1: where the measured median is below 30 degrees the
// estimate is within 5 degrees of it, and every component whose measured
// median is above 60 degrees is
// estimated above MaxDirectionNoise, so that it is warned about (the pilot
// of issue 43 found its second LDA direction 78-88 degrees from
// scikit-learn's without a word).
func TestDiscriminantNoiseMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("solves 960 eigenproblems")
	}
	warned, quiet := 0, 0
	for _, name := range []string{"iris", "glass", "satellite", "letter"} {
		for _, an := range []string{DCA, LDA} {
			m0, _, sigma := exactRelease(t, name, an)
			opts := analysis.Options{Regularizer: analysis.Regularizer{NoiseStd: sigma[0]}}
			c0, _, err := analysis.SolveWithRetry(an, m0, opts)
			if err != nil {
				t.Fatal(err)
			}
			_, k := c0.Dims()
			rng := rand.New(rand.NewPCG(43, 1))
			measured, estimated := make([][]float64, k), make([][]float64, k)
			for range 30 {
				m := noisy(m0, sigma, rng)
				c, _, err := analysis.SolveWithRetry(an, m, opts)
				if err != nil {
					t.Fatal(err)
				}
				sc, _ := m.Scatters()
				cn, err := sc.DiscriminantNoise(c, sigma[0], sigma[1])
				if err != nil {
					t.Fatal(err)
				}
				for i := range k {
					cos := math.Abs(mat.Dot(c0.Unit.ColView(i), c.Unit.ColView(i)))
					measured[i] = append(measured[i], math.Acos(math.Min(1, cos))*180/math.Pi)
					estimated[i] = append(estimated[i], cn.Angle[i])
				}
			}
			for i := range k {
				got, est := median(measured[i]), median(estimated[i])
				t.Logf("%s %s component %d: measured %.1f degrees, first order %.1f", name, an, i+1, got, est)
				switch {
				case got < 30 && math.Abs(est-got) > 5:
					t.Errorf("%s %s component %d: measured %.1f degrees, estimated %.1f", name, an, i+1, got, est)
				case got > 60 && est <= MaxDirectionNoise:
					t.Errorf("%s %s component %d: measured %.1f degrees (noise), estimated %.1f: not warned", name, an, i+1, got, est)
				case got > 60:
					warned++
				case got < 30:
					quiet++
				}
			}
		}
	}
	if warned == 0 || quiet == 0 {
		t.Fatalf("test too weak: %d components of noise, %d determined", warned, quiet)
	}
}

func median(x []float64) float64 {
	y := slices.Sorted(slices.Values(x))
	return y[len(y)/2]
}

// TestStandardizedQuality (issue 43): a standardised PCA of a release whose
// noise floors some variances explains its variance out of d, names the
// floored features, and compares its eigenvalues with the noise on the
// correlation matrix, not on the scatter (whose spectral norm, in other
// units, flagged every component or none).
func TestStandardizedQuality(t *testing.T) {
	ds := loadDataset(t, "wine", 16)
	_, rel, _ := exactRelease(t, "wine", PCA)
	// A noise level whose floor, 2 sigma sqrt(d), is between the smallest
	// and the largest variance of the release.
	sc, _ := Moments(rel).Scatters()
	d := rel.Layout.D
	var vars []float64
	for i := range d {
		vars = append(vars, sc.ST.At(i, i))
	}
	mid := slices.Sorted(slices.Values(vars))[d/2]
	sigma := mid / (2 * math.Sqrt(float64(d)))
	h := Header{JobID: "x", Dataset: "wine", Features: ds.schema.FeatureNames(), Standardize: true}
	res, err := AnalyzeRelease(h, PCA, 3, rel, nil, Privacy{SigmaTotal: BlockValues{R: dp.Float(sigma), V: 1, N: 1}})
	if err != nil {
		t.Fatal(err)
	}
	c, q := res.Components, res.Quality
	if c.TotalVariance != float64(d) || !(q.CorrelationNoiseNorm > 0) {
		t.Fatalf("total variance %v (d = %d), correlation noise %v", c.TotalVariance, d, q.CorrelationNoiseNorm)
	}
	var floored []string
	for i, v := range vars {
		if v < mid {
			floored = append(floored, ds.schema.Features[i].Name)
		}
	}
	want := fmt.Sprintf("%d of %d features have a variance below the noise's spectral norm", len(floored), d)
	if len(q.Warnings) == 0 || !strings.HasPrefix(q.Warnings[0], want) || !strings.Contains(q.Warnings[0], strings.Join(floored, ", ")) {
		t.Errorf("warnings %q, want first %q naming %v", q.Warnings, want, floored)
	}
	for _, w := range q.Warnings[1:] {
		if !strings.Contains(w, "on the correlation matrix") {
			t.Errorf("a component compared with another noise: %q", w)
		}
	}
	for i, v := range c.Eigenvalues {
		if want := analysis.Supported(v, q.CorrelationNoiseNorm) / float64(d); math.Abs(c.ExplainedVarianceRatio[i]-want) > 1e-15 || want >= v/float64(d) {
			t.Errorf("ratio %d is %v, its eigenvalue %v less the noise's part out of d is %v", i+1, c.ExplainedVarianceRatio[i], v, want)
		}
	}
}

// TestStandardizedRatioSupported (issue 43): a PCA's explained variance
// ratio claims no more than its components capture. Noisy releases of the
// bundled datasets with many rows (the noise of a PCA job at epsilon 1/3
// and 1/10), 40 draws each: the share of the noise-free matrix that the
// directions the user projects on capture is measured (of the correlation's
// trace d for the standardised PCA, of the scatter's trace for the plain
// one), and the ratio's sum (each eigenvalue less what the noise adds,
// analysis.Supported) claims no more than it on average (its mean excess is
// within two standard errors of 0, or below); the eigenvalues themselves
// claimed more on average in at least three of the six cells (shuttle's
// and letter's; the test is not vacuous).
func TestStandardizedRatioSupported(t *testing.T) {
	if testing.Short() {
		t.Skip("solves 480 eigenproblems")
	}
	excess := func(x []float64) (mean, se float64) {
		mean, sd := stat.MeanStdDev(x, nil)
		return mean, sd / math.Sqrt(float64(len(x)))
	}
	overclaimed := 0
	for _, name := range []string{"satellite", "letter", "shuttle"} {
		m0, _, sigma := exactRelease(t, name, PCA)
		s0, _ := m0.Scatters()
		clean, err := s0.Correlation(0)
		if err != nil {
			t.Fatal(err)
		}
		d, k := m0.Dim(), 3
		for _, scale := range []float64{3, 10} {
			rng := rand.New(rand.NewPCG(43, uint64(scale*10)))
			var std, plain, raw []float64
			for range 40 {
				sr, sv := sigma[0]*scale, sigma[1]*scale
				m := noisy(m0, [3]float64{sr, sv, sigma[2] * scale}, rng)
				s, _ := m.Scatters()
				s = s.ShrinkCentring(sv * sv) // as AnalyzeRelease centres
				c, _, err := s.StandardizedPCA(k, sr)
				if err != nil {
					t.Fatal(err)
				}
				// What the user projects on, (z - mean) W, is the rows'
				// standardised coordinates (by the clean deviations) times
				// W sd: those directions' share of the clean correlation.
				w := mat.NewDense(d, k, nil)
				for i := range d {
					for j := range k {
						w.Set(i, j, c.W.At(i, j)*clean.SD[i])
					}
				}
				var qr mat.QR
				qr.Factorize(w)
				var q mat.Dense
				qr.QTo(&q)
				captured := share(clean.C, q.Slice(0, d, 0, k)) / float64(d)
				claimed, eig := 0.0, 0.0
				for i, r := range c.ExplainedVarianceRatio {
					claimed += r
					eig += c.Eigenvalues[i] / float64(d)
				}
				std, raw = append(std, claimed-captured), append(raw, eig-captured)
				// The plain PCA of the same release, as AnalyzeRelease
				// takes its ratio.
				p, err := s.PCA(k)
				if err != nil {
					t.Fatal(err)
				}
				p.Support(2 * sr * math.Sqrt(float64(d)))
				pc := 0.0
				for _, r := range p.ExplainedVarianceRatio {
					pc += r
				}
				plain = append(plain, pc-share(s0.ST, p.W)/mat.Trace(s0.ST))
			}
			ms, ses := excess(std)
			mp, sep := excess(plain)
			mr, ser := excess(raw)
			t.Logf("%s, noise x%.2g: mean excess of the claim over the share captured: %.4f ± %.4f (standardised), %.4f ± %.4f (plain); the eigenvalues over d %.4f ± %.4f", name, scale, ms, ses, mp, sep, mr, ser)
			if ms > 2*ses || mp > 2*sep {
				t.Errorf("%s, noise x%.2g: the ratio claims more than the components capture: %.4f ± %.4f (standardised), %.4f ± %.4f (plain)", name, scale, ms, ses, mp, sep)
			}
			if mr > 2*ser {
				overclaimed++
			}
		}
	}
	if overclaimed < 3 {
		t.Errorf("test too weak: the eigenvalues over d claimed more than the components captured in %d of 6 cells", overclaimed)
	}
}

// share is the trace of w^T a w: the variance of a along w's columns.
func share(a mat.Symmetric, w mat.Matrix) float64 {
	var aw, waw mat.Dense
	aw.Mul(a, w)
	waw.Mul(w.T(), &aw)
	return mat.Trace(&waw)
}

// TestDiscriminantComponentsQuality: a DP DCA components release's quality
// has the noise of its K classes' counts and of R, a note saying why no
// component's noise can be told, and a warning for a component without a
// direction (none for a unit one); without noise, none at all.
func TestDiscriminantComponentsQuality(t *testing.T) {
	res := &Result{Analysis: DCA, NoisyN: 500, Released: ReleaseComponents,
		Privacy: Privacy{SigmaTotal: BlockValues{R: 2, V: 3, N: 4}},
		Output:  &TopComponents{W: [][]float64{{1, 0}, {0, 0}, {0, 0}}, Eigenvalues: []float64{0.7, 0}}}
	q := componentsQuality(res, 3, 3)
	if q == nil || q.NoisyNStd != 4*math.Sqrt(3) || q.EntryStd != 2 || q.NoiseSpectralNorm != 4*math.Sqrt(3) {
		t.Fatalf("quality %+v", q)
	}
	if len(q.Warnings) != 1 || !strings.HasPrefix(q.Warnings[0], "component 2 has no direction") {
		t.Errorf("warnings %q, want one for component 2", q.Warnings)
	}
	if len(q.Notes) != 1 || !strings.Contains(q.Notes[0], "cannot be told from it") {
		t.Errorf("notes %q, want why the components' noise is not computable", q.Notes)
	}
	res.Privacy.NoNoise = true
	if q := componentsQuality(res, 3, 3); q != nil {
		t.Errorf("exact release: quality %+v", q)
	}
}
