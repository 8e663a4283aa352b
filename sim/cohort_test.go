package sim

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// TestCohortModel: the generator is deterministic and its declared ranges
// are at least five standard deviations on either side of their middle.
func TestCohortModel(t *testing.T) {
	data := ClinicalCohort(6600, 1)
	if !bytes.Equal(data, ClinicalCohort(6600, 1)) || bytes.Equal(data, ClinicalCohort(6600, 2)) {
		t.Fatal("the cohort is not deterministic in its seed")
	}
	declared, err := CohortSchema("cohort")
	if err != nil {
		t.Fatal(err)
	}
	x, err := rawRows(data, declared)
	if err != nil {
		t.Fatal(err)
	}
	n, d := x.Dims()
	for j, f := range Cohort {
		mean, m2 := 0.0, 0.0
		for i := range n {
			mean += x.At(i, j)
		}
		mean /= float64(n)
		for i := range n {
			m2 += (x.At(i, j) - mean) * (x.At(i, j) - mean)
		}
		sd := math.Sqrt(m2 / float64(n))
		if half := (f.Max - f.Min) / 2; half < 5*sd {
			t.Errorf("%s: declared [%g, %g] is %.1f sd on each side of its middle, want at least 5", f.Name, f.Min, f.Max, half/sd)
		}
		t.Logf("%-14s mean %7.2f sd %6.2f declared [%g, %g]: %.1f sd each side", f.Name, mean, sd, f.Min, f.Max, (f.Max-f.Min)/2/sd)
	}
	if d != 9 || n != 6600 {
		t.Fatalf("%d x %d", n, d)
	}
}

// TestCohortProfileCentral: on the 6,600-row cohort under its clinical
// ranges, the fully private pipeline (profile, then the standardised main
// PCA, total epsilon 1) captures at least 0.95 of the true standardised
// top-3 variance (mean of 5 runs) and comes within 0.03 of the free peek
// (the pooled mean and std for free, C chosen privately): the rounds and
// the main job emulated centrally (CentralAuto: the same releases'
// distribution, exact noise from a fixed stream).
func TestCohortProfileCentral(t *testing.T) {
	data := ClinicalCohort(6600, 1)
	declared, err := CohortSchema("cohort")
	if err != nil {
		t.Fatal(err)
	}
	peekSchema, err := schema.Infer(bytes.NewReader(data), "cohort", "")
	if err != nil {
		t.Fatal(err)
	}
	o := AutoOptions{JobOptions: JobOptions{Analysis: job.PCA, K: 3, Epsilon: 1}}
	var auto, peek float64
	const runs = 5
	for r := range runs {
		a, err := CentralAuto(data, declared, o, fmt.Sprintf("cohort-test/%d", r))
		if err != nil {
			t.Fatal(err)
		}
		po := o
		po.KeepScales = true
		p, err := CentralAuto(data, peekSchema, po, fmt.Sprintf("cohort-test/%d/peek", r))
		if err != nil {
			t.Fatal(err)
		}
		if e := float64(a.Total.Epsilon); e > 1 || e < 0.999 {
			t.Errorf("run %d: total epsilon %v", r, e)
		}
		auto += a.Utility.CapturedVarianceRatio / runs
		peek += p.Utility.CapturedVarianceRatio / runs
	}
	t.Logf("fully private %.4f, free peek %.4f", auto, peek)
	if auto < 0.95 || auto < peek-0.03 {
		t.Errorf("fully private q/q0 %.4f: want at least 0.95 and within 0.03 of the free peek %.4f", auto, peek)
	}
}

// TestCohortProfile runs the whole pipeline through the protocol on a
// smaller cohort (2,000 rows, 3 hospitals serving a schema of clinical
// ranges only): four jobs (locate, moments, norms, main PCA) compose to
// the total epsilon 1, every center and scale comes with its standard
// error, and the main job captures most of the standardised top-3
// variance.
func TestCohortProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four jobs")
	}
	ctx := context.Background()
	data := ClinicalCohort(2000, 3)
	declared, err := CohortSchema("cohort")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSimulator(ctx, Simulation{Data: data, Name: "cohort", Schema: declared, Owners: 3, Dir: t.TempDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.RunAuto(ctx, AutoOptions{JobOptions: JobOptions{Analysis: job.PCA, K: 3, Epsilon: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if e := float64(rep.Total.Epsilon); e > 1 || e < 0.999 || rep.Jobs() != 4 {
		t.Errorf("%d jobs, total epsilon %v", rep.Jobs(), e)
	}
	for _, f := range rep.Profile.Features {
		if !(f.Scale > 0 && f.ScaleSE > 0 && f.CenterSE > 0) {
			t.Errorf("feature %s: %+v", f.Name, f)
		}
	}
	t.Logf("q/q0 %.4f, C %s, noisy n %.0f", rep.Utility.CapturedVarianceRatio, rep.Schema.ClipNorm, rep.Profile.N)
	if q := rep.Utility.CapturedVarianceRatio; q < 0.9 {
		t.Errorf("q/q0 %.4f at 2,000 rows, want at least 0.9", q)
	}
}
