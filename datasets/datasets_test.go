package datasets

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCopiesMatchShared checks the bundled copies against ../shared/datasets
// (when present), so that they cannot drift from the workplace's originals.
func TestCopiesMatchShared(t *testing.T) {
	shared := filepath.Join("..", "..", "shared", "datasets")
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("no %s to compare with: %v", shared, err)
	}
	for _, n := range Names() {
		want, err := os.ReadFile(filepath.Join(shared, n+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := CSV(n)
		if !bytes.Equal(got, want) {
			t.Errorf("%s.csv differs from the shared copy", n)
		}
	}
	want, _ := os.ReadFile(filepath.Join(shared, "reference.json"))
	if !bytes.Equal(ReferenceJSON(), want) {
		t.Error("reference.json differs from the shared copy")
	}
}

func TestReference(t *testing.T) {
	if len(Names()) != 11 {
		t.Fatalf("bundled %v", Names())
	}
	for _, n := range Names() {
		r, err := LoadReference(n)
		if err != nil {
			t.Fatal(err)
		}
		gauss := 5
		if n == "shuttle" {
			gauss = 0 // shuttle_reference.json: eigenvalues only
		}
		if len(r.PCAEigenvalues) != r.D || r.N == 0 || len(r.DCAEigenvalues) != min(r.K-1, r.D) || len(r.AnalyzeGauss) != gauss {
			t.Errorf("%s: d=%d eigenvalues=%d n=%d K=%d dca=%d analyze-gauss=%d", n, r.D, len(r.PCAEigenvalues), r.N, r.K, len(r.DCAEigenvalues), len(r.AnalyzeGauss))
		}
	}
}
