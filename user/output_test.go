package user

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sbinet/npyio"
	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

func wineResult(t *testing.T, analysis string, k int) *job.Result {
	t.Helper()
	data, err := datasets.CSV("wine")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Infer(bytes.NewReader(data), "wine", "label")
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := job.Central(&job.Spec{Analysis: analysis, K: k, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}, sch, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestWriteOutputs(t *testing.T) {
	res := wineResult(t, job.PCA, 3)
	dir := t.TempDir()
	paths, err := WriteOutputs(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	want := []string{ResultFile, ComponentsFile, ComponentsNPYFile, MeanNPYFile, EigenvaluesNPYFile, ReleaseFile}
	if !slices.Equal(names, want) {
		t.Fatalf("wrote %v, want %v", names, want)
	}

	// components.npy: a 13 x 3 float64 array in C order, equal to W.
	raw, err := os.ReadFile(filepath.Join(dir, ComponentsNPYFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte("\x93NUMPY")) {
		t.Fatalf("components.npy starts %q", raw[:8])
	}
	header := string(raw[:bytes.IndexByte(raw, '\n')])
	for _, w := range []string{"'descr': '<f8'", "'fortran_order': False", "'shape': (13, 3)"} {
		if !strings.Contains(header, w) {
			t.Errorf("components.npy header %q lacks %s", header, w)
		}
	}
	var w mat.Dense
	if err := npyio.Read(bytes.NewReader(raw), &w); err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(&w, res.Components.W) {
		t.Errorf("components.npy holds\n%v\nwant\n%v", mat.Formatted(&w), mat.Formatted(res.Components.W))
	}
	for name, want := range map[string][]float64{MeanNPYFile: res.Components.Mean, EigenvaluesNPYFile: res.Components.Eigenvalues} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var got []float64
		err = npyio.Read(f, &got)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	// components.csv: the same numbers, one row per feature.
	f, err := os.Open(filepath.Join(dir, ComponentsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 14 || strings.Join(recs[0], ",") != "feature,mean,component_1,component_2,component_3" {
		t.Fatalf("components.csv: %d records, header %v", len(recs), recs[0])
	}
	if v, _ := strconv.ParseFloat(recs[5][3], 64); recs[5][0] != res.Features[4] || v != w.At(4, 1) {
		t.Errorf("components.csv row 5 = %v, want %s ... %v", recs[5], res.Features[4], w.At(4, 1))
	}

	back, err := LoadResult(filepath.Join(dir, ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(back.Components.W, res.Components.W) {
		t.Error("result.json does not round-trip the components")
	}
}

func TestWriteOutputsScatter(t *testing.T) {
	res := wineResult(t, job.Scatter, 0)
	dir := t.TempDir()
	paths, err := WriteOutputs(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 {
		t.Errorf("a result without components wrote %v, want result.json and release.json", paths)
	}
}
