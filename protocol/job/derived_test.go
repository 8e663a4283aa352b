package job

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// TestDerivedGolden: the analyses derived from a noise-free release of wine
// (read as an owner reads it, through testdata/derived/wine.schema.json,
// 24 fractional bits, no row clipped) equal numpy's covariance and
// correlation, the class means and counts, and scikit-learn's Ridge, from
// testdata/derived/wine.golden.json (made by gen.py there).
func TestDerivedGolden(t *testing.T) {
	sb, err := os.ReadFile("testdata/derived/wine.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Parse(sb)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := os.ReadFile("testdata/derived/wine.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		N           int
		Covariance  [][]float64
		Correlation [][]float64
		Classes     []string
		ClassCounts []int       `json:"class_counts"`
		ClassMeans  [][]float64 `json:"class_means"`
		Ridge       struct {
			Target    int
			Alpha     float64
			Coef      []float64
			Intercept float64
		}
	}
	if err := json.Unmarshal(gb, &g); err != nil {
		t.Fatal(err)
	}
	data, err := datasets.CSV("wine")
	if err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Analysis: Scatter, MaxRows: 1000, MaxOwnerRows: 1000}
	acc, rep, err := ReadStatistics(spec, sch, bytes.NewReader(data))
	if err != nil || rep.Rows != int64(g.N) || rep.Clipped != 0 || rep.Skipped != 0 {
		t.Fatalf("read %+v, %v", rep, err)
	}
	rel, err := stats.Unpack(acc.Layout(), sch.Bits, acc.Pack())
	if err != nil {
		t.Fatal(err)
	}
	m := Moments(rel)
	// 24 fractional bits: the rows are exact to 3e-8, the statistics to
	// about 1e-7 relative.
	const tol = 1e-6
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
			t.Errorf("%s: %.10g, golden %.10g", what, got, want)
		}
	}
	cov, err := m.Covariance(analysis.Noise{})
	if err != nil {
		t.Fatal(err)
	}
	corr, _, err := cov.Correlation()
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.Covariance {
		for j := range g.Covariance[i] {
			near("covariance", cov.C.At(i, j), g.Covariance[i][j])
			near("correlation", corr.At(i, j), g.Correlation[i][j])
		}
	}
	cs, err := m.ClassMeans(analysis.Noise{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range g.Classes {
		near("count", cs.Counts[k], float64(g.ClassCounts[k]))
		for i, x := range g.ClassMeans[k] {
			near("class mean", cs.Means[k][i], x)
		}
	}
	reg, err := m.Ridge(g.Ridge.Target, g.Ridge.Alpha, analysis.Noise{})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range g.Ridge.Coef {
		near("ridge coefficient", reg.Coef[i], c)
	}
	near("ridge intercept", reg.Intercept, g.Ridge.Intercept)
}
