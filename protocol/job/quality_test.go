package job

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/stats"
)

// exactRelease is the noise-free release of a one-owner job of the analysis
// over a bundled dataset, with the noise levels the job would calibrate.
func exactRelease(t *testing.T, name, an string) (analysis.Moments, *stats.Release, [3]float64) {
	t.Helper()
	ds := loadDataset(t, name, 16)
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
