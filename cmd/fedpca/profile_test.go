package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimulateAutoSchema runs simulate --auto-schema as a user would: the
// profile and the main job, the total privacy within the budget asked for,
// and the JSON report with the chosen schema and the utility against the
// standardised, unclipped rows.
func TestSimulateAutoSchema(t *testing.T) {
	dir := t.TempDir()
	out, err := fedpca(t, dir, "simulate", "--dataset", "letter", "--owners", "2", "--auto-schema", "--epsilon", "1", "--json", "report.json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"total privacy of the 3 jobs: epsilon 1.0000 at delta 1e-06", "chosen schema: C = ", "utility against the standardised, unclipped rows"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Schema struct {
			ClipNorm string `json:"clip_norm"`
		} `json:"schema"`
		Total struct {
			Epsilon float64 `json:"epsilon"`
		} `json:"total_privacy"`
		Utility struct {
			Ratio float64 `json:"captured_variance_ratio"`
		} `json:"utility"`
		Main struct {
			Result struct {
				Standardized bool `json:"standardized"`
			} `json:"result"`
		} `json:"main"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	// letter has 20,000 rows: the profile is precise and the result close
	// to the non-private one (docs/BENCHMARKS.md: 0.998 at the median).
	if rep.Total.Epsilon > 1 || rep.Schema.ClipNorm == "" || !rep.Main.Result.Standardized || rep.Utility.Ratio < 0.95 {
		t.Fatalf("report: %+v", rep)
	}
}

// TestSimulateKeepScales: with public scales the profile is the norms round
// alone, and the two jobs compose to the budget asked for.
func TestSimulateKeepScales(t *testing.T) {
	out, err := fedpca(t, t.TempDir(), "simulate", "--dataset", "wine", "--owners", "2", "--auto-schema", "--keep-scales", "--epsilon", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"profile: the norms round alone", "total privacy of the 2 jobs: epsilon 1.0000 at delta 1e-06", "(quantile 0.05 of the noisy norm histogram)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
