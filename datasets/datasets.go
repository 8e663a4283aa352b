package datasets

import (
	"bytes"
	"embed"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

//go:embed testdata/*.csv testdata/reference.json testdata/shuttle_reference.json testdata/README.md
var files embed.FS

// Names lists the bundled datasets, sorted.
func Names() []string {
	entries, _ := files.ReadDir("testdata")
	var out []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".csv"); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// CSV returns a dataset's CSV bytes.
func CSV(name string) ([]byte, error) {
	b, err := files.ReadFile("testdata/" + name + ".csv")
	if err != nil {
		return nil, fmt.Errorf("dataset %q is not bundled (have %s)", name, strings.Join(Names(), ", "))
	}
	return b, nil
}

// Open returns a reader over a dataset's CSV.
func Open(name string) (io.Reader, error) {
	b, err := CSV(name)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// Provenance returns the README of the bundled data (sources and licenses).
func Provenance() string {
	b, _ := files.ReadFile("testdata/README.md")
	return string(b)
}

// ReferenceJSON returns the raw reference.json.
func ReferenceJSON() []byte {
	b, _ := files.ReadFile("testdata/reference.json")
	return b
}

// Reference is the part of reference.json that fedpca compares with. All
// eigen-quantities are for the clipped preprocessing (standardise with the
// pooled population mean/std, clip rows to L2 norm 1).
type Reference struct {
	N, D, K int
	// PCAEigenvalues are all d eigenvalues of the centred scatter, descending.
	PCAEigenvalues []float64
	// PCATopK are the top eigenvectors, one per row (k x d).
	PCATopK [][]float64
	// DCARho is the regulariser 1e-3 trace(S_T)/d; DCAEigenvalues the
	// generalised eigenvalues of the DCA problem with it.
	DCARho         float64
	DCAEigenvalues []float64
	// AnalyzeGauss holds the Analyze Gauss DP-PCA baseline per epsilon: the
	// captured variance ratio q/q0 (mean and std over 10 seeds), at delta.
	AnalyzeGaussDelta float64
	AnalyzeGauss      map[string]MeanStd
	// PCAF1 etc. are cross-validated classifier scores on the projections.
	PCAF1 map[string]MeanStd // by number of components, "1".."10"
	DCAF1 MeanStd
}

// MeanStd is a mean and a standard deviation.
type MeanStd struct {
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
}

type rawRef struct {
	Datasets map[string]struct {
		N   int `json:"n"`
		D   int `json:"d"`
		K   int `json:"K"`
		PCA struct {
			Clipped struct {
				Eigenvalues []float64   `json:"eigenvalues"`
				TopK        [][]float64 `json:"top_k_eigenvectors"`
			} `json:"clipped"`
		} `json:"pca"`
		DCA struct {
			Clipped struct {
				Rho            float64   `json:"rho"`
				GenEigenvalues []float64 `json:"gen_eigenvalues"`
			} `json:"clipped"`
		} `json:"dca_full"`
		CV struct {
			PCAF1 struct {
				Clipped map[string]MeanStd `json:"clipped"`
			} `json:"pca_f1"`
			DCAF1 struct {
				Clipped MeanStd `json:"clipped"`
			} `json:"dca_f1"`
		} `json:"cv"`
		DPPCA struct {
			Delta float64 `json:"delta"`
			ByEps map[string]struct {
				QRatio MeanStd `json:"q_ratio"`
			} `json:"by_eps"`
		} `json:"dp_pca"`
	} `json:"datasets"`
}

// referenceFiles are the reference documents, searched in order.
var referenceFiles = []string{"reference.json", "shuttle_reference.json"}

// LoadReference parses the bundled reference results for one dataset.
// AnalyzeGauss, PCAF1 and DCAF1 are empty for shuttle.
func LoadReference(name string) (*Reference, error) {
	var raw rawRef
	for _, f := range referenceFiles {
		b, err := files.ReadFile("testdata/" + f)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if _, ok := raw.Datasets[name]; ok {
			break
		}
	}
	d, ok := raw.Datasets[name]
	if !ok {
		return nil, fmt.Errorf("no reference results for %q", name)
	}
	r := &Reference{
		N: d.N, D: d.D, K: d.K,
		PCAEigenvalues: d.PCA.Clipped.Eigenvalues, PCATopK: d.PCA.Clipped.TopK,
		DCARho: d.DCA.Clipped.Rho, DCAEigenvalues: d.DCA.Clipped.GenEigenvalues,
		AnalyzeGaussDelta: d.DPPCA.Delta, AnalyzeGauss: map[string]MeanStd{},
		PCAF1: d.CV.PCAF1.Clipped, DCAF1: d.CV.DCAF1.Clipped,
	}
	for eps, v := range d.DPPCA.ByEps {
		r.AnalyzeGauss[eps] = v.QRatio
	}
	return r, nil
}

// About returns a one-line provenance of a bundled dataset, from the
// bundled README's table: original source, where the copy comes from, and
// its license.
func About(name string) string {
	for _, line := range strings.Split(Provenance(), "\n") {
		if !strings.HasPrefix(line, "| "+name+".csv |") {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) < 10 {
			break
		}
		cell := func(i int) string { return strings.TrimSpace(f[i]) }
		return fmt.Sprintf("%s; %s rows, %s features, %s classes; copy from %s; license: %s", cell(7), cell(2), cell(3), cell(4), cell(6), cell(8))
	}
	return name
}

// ReferenceRows returns a dataset's feature rows (the label column left
// out) with reference.json's preprocessing (meta.definitions): standardise
// with the population mean and std (a feature whose std <= 1e-12 (|mean| +
// 1) is divided by 1), then scale every row of norm above 1 to norm 1. It is
// the input the reference's numbers were computed from, in float64, for
// tests that compare with them.
func ReferenceRows(name string) ([][]float64, error) {
	b, err := CSV(name)
	if err != nil {
		return nil, err
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", name, err)
	}
	if len(recs) < 2 {
		return nil, fmt.Errorf("dataset %s: no rows", name)
	}
	var cols []int
	for j, h := range recs[0] {
		if h != "label" {
			cols = append(cols, j)
		}
	}
	rows := make([][]float64, 0, len(recs)-1)
	for i, rec := range recs[1:] {
		x := make([]float64, len(cols))
		for k, j := range cols {
			if x[k], err = strconv.ParseFloat(rec[j], 64); err != nil {
				return nil, fmt.Errorf("dataset %s: row %d, column %s: %w", name, i+1, recs[0][j], err)
			}
		}
		rows = append(rows, x)
	}
	n := float64(len(rows))
	for j := range cols {
		mean, ss := 0.0, 0.0
		for _, x := range rows {
			mean += x[j]
		}
		mean /= n
		for _, x := range rows {
			ss += (x[j] - mean) * (x[j] - mean)
		}
		sd := math.Sqrt(ss / n)
		if sd <= 1e-12*(math.Abs(mean)+1) {
			sd = 1
		}
		for _, x := range rows {
			x[j] = (x[j] - mean) / sd
		}
	}
	for _, x := range rows {
		norm := 0.0
		for _, v := range x {
			norm += v * v
		}
		if norm = math.Sqrt(norm); norm > 1 {
			for j := range x {
				x[j] /= norm
			}
		}
	}
	return rows, nil
}
