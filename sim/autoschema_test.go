package sim

import (
	"context"
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
