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
	for _, want := range []string{"total privacy of the 4 jobs: epsilon 1.0000 at delta 1e-06", "chosen schema: C = ", "utility against the standardised, unclipped rows",
		"each parameter with its standard error (quantiles)", "x.box"} {
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

// TestSimulateDeclaredSchema: simulate --auto-schema --schema FILE takes the
// owners' bounds from a schema of bounds only (no centers or scales), which
// owner check accepts as it is, and the profile reports every center and
// scale with its standard error.
func TestSimulateDeclaredSchema(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(`{"id":"wine","label":"label","classes":["class_0","class_1","class_2"],"features":[`)
	for i, f := range wineBounds {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"name":"` + f[0] + `","min":` + f[1] + `,"max":` + f[2] + `}`)
	}
	b.WriteString("]}")
	p := filepath.Join(dir, "wine.bounds.json")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, err := fedpca(t, dir, "owner", "check", "--dataset", p+"="+filepath.Join(wd, "..", "..", "datasets", "testdata", "wine.csv"))
	if err != nil || !strings.Contains(out, "rows used          178") {
		t.Fatalf("owner check with a schema of bounds only: %v\n%s", err, out)
	}
	out, err = fedpca(t, dir, "simulate", "--dataset", "wine", "--owners", "2", "--auto-schema", "--schema", p, "--epsilon", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"total privacy of the 4 jobs: epsilon 1.0000 at delta 1e-06", "each parameter with its standard error", "proline"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// wineBounds are clinical-style declared ranges of wine's features, wide
// of the data.
var wineBounds = [][3]string{{"alcohol", "0", "30"}, {"malic_acid", "0", "20"}, {"ash", "0", "10"}, {"alcalinity_of_ash", "0", "60"},
	{"magnesium", "0", "300"}, {"total_phenols", "0", "10"}, {"flavanoids", "0", "10"}, {"nonflavanoid_phenols", "0", "2"},
	{"proanthocyanins", "0", "10"}, {"color_intensity", "0", "30"}, {"hue", "0", "4"}, {"od280_od315_of_diluted_wines", "0", "10"}, {"proline", "0", "3000"}}
