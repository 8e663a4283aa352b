package sim

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/job"
)

// TestAutoSchema runs the profile's two rounds and the main job end to end
// on wdbc with declared bounds only: the owners take part under the schemas
// the user chose (same reading, other map), the three jobs compose to the
// total budget asked for, and the report measures the result against the
// standardised, unclipped rows.
func TestAutoSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four jobs")
	}
	ctx := context.Background()
	data, err := datasets.CSV("wdbc")
	if err != nil {
		t.Fatal(err)
	}
	declared, err := DeclareBounds(data, "wdbc", "label", DefaultWiden)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSimulator(ctx, Simulation{Data: data, Name: "wdbc", Label: "label", Schema: declared, Owners: 3, Dir: t.TempDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.RunAuto(ctx, AutoOptions{JobOptions: JobOptions{Analysis: job.PCA, K: 5, Epsilon: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if e := float64(rep.Total.Epsilon); e > 1 || e < 0.95 {
		t.Errorf("total epsilon %v, want at most 1 and close to it", e)
	}
	t.Logf("profile: noisy n %.1f, C %s, clipped %.3f, q/q0 %.4f, total epsilon %.4f (rho %.4f)",
		rep.Profile.N, rep.Schema.ClipNorm, rep.Utility.ClippedFraction, rep.Utility.CapturedVarianceRatio, float64(rep.Total.Epsilon), float64(rep.Total.Rho))
	if rep.Main.Result.Components == nil || rep.Utility.K != 5 || !(rep.Utility.CapturedVarianceRatio > 0) {
		t.Fatalf("main job: %+v", rep.Utility)
	}
	if rep.Schema.SameReading(declared) != nil || rep.Schema.HashHex() == declared.HashHex() {
		t.Fatal("the chosen schema must read the rows as the declared one and differ in its map")
	}
}

// centralMean returns the mean q/q0 and the lowest of runs central
// emulations of the fully private pipeline (k = 5, total epsilon 1) on a
// bundled dataset whose owners declare each observed range widened by widen
// of it on each side.
func centralMean(t *testing.T, name string, widen float64, runs int) (mean, lowest float64) {
	t.Helper()
	data, err := datasets.CSV(name)
	if err != nil {
		t.Fatal(err)
	}
	declared, err := DeclareBounds(data, name, "label", widen)
	if err != nil {
		t.Fatal(err)
	}
	o := AutoOptions{JobOptions: JobOptions{Analysis: job.PCA, K: 5, Epsilon: 1}}
	lowest = 1
	for r := range runs {
		rep, err := CentralAuto(data, declared, o, fmt.Sprintf("%s/%g/%d", name, widen, r))
		if err != nil {
			t.Fatal(err)
		}
		if e := float64(rep.Total.Epsilon); e > 1 || e < 0.999 {
			t.Errorf("%s run %d: total epsilon %v", name, r, e)
		}
		q := rep.Utility.CapturedVarianceRatio
		mean += q / float64(runs)
		lowest = math.Min(lowest, q)
	}
	return mean, lowest
}

// TestProfileWideBoundsManyRows: with many rows per unit of noise (shuttle,
// 58,000 rows, heavy tails), bounds ten times the observed range cost the
// fully private pipeline at most 0.02 of q/q0 against the observed range
// widened by a quarter (mean of 10 runs), and no run falls below 0.97. A
// window seeded by a noise bucket far from the data (when every bucket above
// twice the noise was a seed) made one run in ten fall to 0.88-0.95 (0.953
// in these 10).
func TestProfileWideBoundsManyRows(t *testing.T) {
	if testing.Short() {
		t.Skip("20 central runs on 58,000 rows")
	}
	near, _ := centralMean(t, "shuttle", DefaultWiden, 10)
	wide, lowest := centralMean(t, "shuttle", 4.5, 10)
	t.Logf("shuttle: observed range widened by 1/4 %.4f, ten times it %.4f (lowest run %.4f)", near, wide, lowest)
	if wide < near-0.02 || lowest < 0.97 {
		t.Errorf("bounds ten times the range: mean %.4f (lowest %.4f), want within 0.02 of %.4f and every run at least 0.97", wide, lowest, near)
	}
}

// TestProfileWideBoundsFewRows: with few rows per unit of noise and bounds
// ten times the observed range every spread is at the noise level and every
// scale an upper estimate. Sonar (208 rows, d = 60): the norms round's edges
// reach down to sqrt(d)/32, so C follows the rows' small norms in those
// units (with the lowest edge at sqrt(d)/8, q/q0 was 0.19, the level of
// components drawn at random). Wdbc (569 rows, d = 30): the means are
// shrunk as one vector towards the bounds' middles (James-Stein), not each
// alone, so that a noisy mean far out no longer drags the clipping's center
// away (each alone: 0.25). Mean of 5 runs each.
func TestProfileWideBoundsFewRows(t *testing.T) {
	for _, c := range []struct {
		name string
		want float64
	}{{"sonar", 0.3}, {"wdbc", 0.35}} {
		wide, _ := centralMean(t, c.name, 4.5, 5)
		t.Logf("%s, ten times the observed range: %.4f", c.name, wide)
		if wide < c.want {
			t.Errorf("%s: q/q0 %.4f, want at least %v", c.name, wide, c.want)
		}
	}
}
