package datasets

import (
	"bytes"
	"math"
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

// TestReferenceRows: the rows reproduce reference.json's preprocessing: the
// trace of their centred scatter is the sum of the reference's eigenvalues.
func TestReferenceRows(t *testing.T) {
	for _, name := range []string{"iris", "wine", "digits", "glass"} {
		rows, err := ReferenceRows(name)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := LoadReference(name)
		if err != nil {
			t.Fatal(err)
		}
		d, n := len(rows[0]), float64(len(rows))
		trace := 0.0
		for j := range d {
			mean, ss := 0.0, 0.0
			for _, x := range rows {
				mean += x[j] / n
			}
			for _, x := range rows {
				ss += (x[j] - mean) * (x[j] - mean)
			}
			trace += ss
		}
		want := 0.0
		for _, v := range ref.PCAEigenvalues {
			want += v
		}
		if len(rows) != ref.N || d != ref.D || math.Abs(trace-want) > 1e-9*want {
			t.Errorf("%s: %d x %d rows, trace %.12g; reference %d x %d, %.12g", name, len(rows), d, trace, ref.N, ref.D, want)
		}
	}
}
