package user

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/job"
)

// TestDerive: every derived analysis of a saved DCA release writes its JSON
// (with its noise scale and estimate note) and CSV; a regression names an
// existing target; the means have one row per class; unknown analyses and
// targets are refused naming the choices.
func TestDerive(t *testing.T) {
	res := wineResult(t, job.DCA, 2)
	dir := t.TempDir()
	for _, kind := range Derivations {
		paths, err := Derive(dir, res, kind, DeriveOptions{Target: "alcohol", Ridge: -1})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		var doc map[string]any
		b, _ := os.ReadFile(paths[0])
		if err := json.Unmarshal(b, &doc); err != nil || doc["estimate"] == nil || doc["job_id"] != res.JobID {
			t.Errorf("%s: %s: %v", kind, b, err)
		}
		f, _ := os.Open(filepath.Join(dir, kind+".csv"))
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		want := map[string]int{DeriveCovariance: 14, DeriveCorrelation: 14, DeriveMeans: 4, DeriveRegression: 14}[kind]
		if len(recs) != want {
			t.Errorf("%s.csv: %d rows, want %d", kind, len(recs), want)
		}
	}
	if _, err := Derive(dir, res, "svd", DeriveOptions{}); err == nil || !strings.Contains(err.Error(), "covariance") {
		t.Errorf("unknown analysis: %v", err)
	}
	if _, err := Derive(dir, res, DeriveRegression, DeriveOptions{Target: "colour"}); err == nil || !strings.Contains(err.Error(), "alcohol") {
		t.Errorf("unknown target: %v", err)
	}
}
