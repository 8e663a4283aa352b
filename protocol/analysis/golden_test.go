package analysis

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/datasets"
)

type refPCA struct {
	Trace       float64     `json:"trace"`
	Eigenvalues []float64   `json:"eigenvalues"`
	TopK        int         `json:"top_k"`
	TopKShare   float64     `json:"top_k_share"`
	TopKVectors [][]float64 `json:"top_k_eigenvectors"` // rows: one eigenvector (length d) per row
}

type refDCA struct {
	Rho            float64     `json:"rho"`
	RhoPrime       float64     `json:"rho_prime"`
	GenEigenvalues []float64   `json:"gen_eigenvalues"`
	RidgeLDA       []float64   `json:"ridge_lda_eigenvalues"`
	UnitVectors    [][]float64 `json:"unit_eigenvectors"` // rows: one unit-norm vector per row
}

type refDataset struct {
	N           int            `json:"n"`
	D           int            `json:"d"`
	K           int            `json:"K"`
	ClassCounts map[string]int `json:"class_counts"`
	CSV         string         `json:"csv"`
	Constant    int            `json:"constant_features"`
	PCA         map[string]refPCA
	DCA         map[string]refDCA `json:"dca_full"`
}

func loadReference(t testing.TB) map[string]refDataset {
	t.Helper()
	// The bundled copy of ../shared/datasets/reference.json (golden numbers
	// computed by numpy/scipy, see its meta.definitions).
	b := datasets.ReferenceJSON()
	var ref struct {
		Datasets map[string]refDataset `json:"datasets"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	return ref.Datasets
}

// readDataset reads a CSV with a header and the label in the last column.
func readDataset(t testing.TB, name string) (x [][]float64, labels []string) {
	t.Helper()
	f, err := datasets.Open(strings.TrimSuffix(name, ".csv"))
	if err != nil {
		t.Fatal(err)
	}
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if header[len(header)-1] != "label" {
		t.Fatalf("%s: last column is %q, want label", name, header[len(header)-1])
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		row := make([]float64, len(rec)-1)
		for i := range row {
			if row[i], err = strconv.ParseFloat(rec[i], 64); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		x = append(x, row)
		labels = append(labels, rec[len(rec)-1])
	}
	return x, labels
}

// preprocess reproduces the reference: standardise with the population mean/std (ddof = 0; a
// feature with std <= 1e-12 (|mean| + 1) is divided by 1), then, if clip, scale every row with
// L2 norm > 1 to norm 1. It returns the rows and the number of constant features.
func preprocess(x [][]float64, clip bool) ([][]float64, int) {
	n, d := len(x), len(x[0])
	z := make([][]float64, n)
	for i := range z {
		z[i] = append([]float64(nil), x[i]...)
	}
	constant := 0
	for j := 0; j < d; j++ {
		mean := 0.0
		for i := 0; i < n; i++ {
			mean += x[i][j]
		}
		mean /= float64(n)
		ss := 0.0
		for i := 0; i < n; i++ {
			ss += (x[i][j] - mean) * (x[i][j] - mean)
		}
		std := math.Sqrt(ss / float64(n))
		if std <= 1e-12*(math.Abs(mean)+1) {
			std = 1
			constant++
		}
		for i := 0; i < n; i++ {
			z[i][j] = (x[i][j] - mean) / std
		}
	}
	if clip {
		for _, row := range z {
			nrm := 0.0
			for _, v := range row {
				nrm += v * v
			}
			nrm = math.Sqrt(nrm)
			if nrm > 1 {
				for j := range row {
					row[j] /= nrm
				}
			}
		}
	}
	return z, constant
}

// momentsOf builds R, V[k], N[k] with the classes sorted by label.
func momentsOf(z [][]float64, labels []string) (Moments, []string) {
	d := len(z[0])
	index := map[string]int{}
	for _, l := range labels {
		index[l] = 0
	}
	classes := make([]string, 0, len(index))
	for l := range index {
		classes = append(classes, l)
	}
	sort.Strings(classes)
	for i, l := range classes {
		index[l] = i
	}
	data := make([]float64, 0, len(z)*d)
	for _, row := range z {
		data = append(data, row...)
	}
	zm := mat.NewDense(len(z), d, data)
	r := mat.NewSymDense(d, nil)
	r.SymOuterK(1, zm.T())
	v := make([][]float64, len(classes))
	for k := range v {
		v[k] = make([]float64, d)
	}
	n := make([]float64, len(classes))
	for i, row := range z {
		k := index[labels[i]]
		n[k]++
		for j, x := range row {
			v[k][j] += x
		}
	}
	return Moments{R: r, V: v, N: n}, classes
}

// eigenError compares eigenvalues: relative tolerance tol for those >= tol*largest, absolute
// tolerance tol*largest below. It returns the largest relative error among the former.
func eigenError(t *testing.T, what string, got, want []float64, tol float64) float64 {
	t.Helper()
	if len(got) < len(want) {
		t.Fatalf("%s: got %d eigenvalues, want at least %d", what, len(got), len(want))
	}
	largest := math.Abs(want[0])
	maxRel := 0.0
	for i, w := range want {
		diff := math.Abs(got[i] - w)
		if math.Abs(w) >= tol*largest {
			rel := diff / math.Abs(w)
			maxRel = math.Max(maxRel, rel)
			if rel > tol {
				t.Errorf("%s: eigenvalue %d = %.17g, want %.17g (relative error %.3g > %g)", what, i, got[i], w, rel, tol)
			}
		} else if diff > tol*largest {
			t.Errorf("%s: eigenvalue %d = %.17g, want %.17g (absolute error %.3g > %.3g)", what, i, got[i], w, diff, tol*largest)
		}
	}
	return maxRel
}

// vectorError compares the columns of got (d x k) with the rows of want (k x d), entry by entry,
// signs included, and returns the largest absolute difference.
func vectorError(t *testing.T, what string, got *mat.Dense, want [][]float64, tol float64) float64 {
	t.Helper()
	d, k := got.Dims()
	if k < len(want) {
		t.Fatalf("%s: got %d vectors, want at least %d", what, k, len(want))
	}
	worst := 0.0
	for j, row := range want {
		if len(row) != d {
			t.Fatalf("%s: reference vector %d has length %d, want %d", what, j, len(row), d)
		}
		for i, w := range row {
			diff := math.Abs(got.At(i, j) - w)
			worst = math.Max(worst, diff)
			if diff > tol {
				t.Errorf("%s: vector %d entry %d = %.10f, want %.8f", what, j, i, got.At(i, j), w)
			}
		}
	}
	return worst
}

func TestGoldenReference(t *testing.T) {
	ref := loadReference(t)
	names := make([]string, 0, len(ref))
	for name := range ref {
		names = append(names, name)
	}
	sort.Strings(names)
	const (
		eigTol = 1e-9
		vecTol = 1e-7 // the reference prints 8 decimals (rounding <= 5e-9)
	)
	for _, name := range names {
		ds := ref[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			x, labels := readDataset(t, ds.CSV)
			if len(x) != ds.N || len(x[0]) != ds.D {
				t.Fatalf("%s is %d x %d, reference says %d x %d", ds.CSV, len(x), len(x[0]), ds.N, ds.D)
			}
			for _, variant := range []string{"clipped", "unclipped"} {
				z, constant := preprocess(x, variant == "clipped")
				if constant != ds.Constant {
					t.Errorf("%s: %d constant features, reference says %d", variant, constant, ds.Constant)
				}
				m, classes := momentsOf(z, labels)
				if len(classes) != ds.K {
					t.Fatalf("%d classes, reference says %d", len(classes), ds.K)
				}
				for k, c := range classes {
					if int(m.N[k]) != ds.ClassCounts[c] {
						t.Errorf("class %q has %v rows, reference says %d", c, m.N[k], ds.ClassCounts[c])
					}
				}

				// PCA: every eigenvalue, the top-k vectors and the top-k share.
				rp, ok := ds.PCA[variant]
				if !ok {
					t.Fatalf("reference has no pca.%s", variant)
				}
				pca, err := PCA(m, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(pca.AllEigenvalues) != len(rp.Eigenvalues) {
					t.Fatalf("pca: %d eigenvalues, reference has %d", len(pca.AllEigenvalues), len(rp.Eigenvalues))
				}
				relPCA := eigenError(t, variant+" pca", pca.AllEigenvalues, rp.Eigenvalues, eigTol)
				vecPCA := vectorError(t, variant+" pca", pca.W, rp.TopKVectors, vecTol)
				share := 0.0
				for _, r := range pca.ExplainedVarianceRatio[:rp.TopK] {
					share += r
				}
				if math.Abs(share-rp.TopKShare) > 1e-9 {
					t.Errorf("%s pca: top-%d share %.12f, reference %.12f", variant, rp.TopK, share, rp.TopKShare)
				}
				st, _ := m.Scatters()
				if tr := mat.Trace(st.ST); math.Abs(tr-rp.Trace) > 1e-9*rp.Trace {
					t.Errorf("%s: trace(S_T) = %.15g, reference %.15g", variant, tr, rp.Trace)
				}

				// DCA with the default rho (no noise) and the reference's own rho.
				rd, ok := ds.DCA[variant]
				if !ok {
					t.Fatalf("reference has no dca_full.%s", variant)
				}
				dca, err := DCA(m, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(dca.Rho-rd.Rho) > 1e-12*rd.Rho {
					t.Errorf("%s dca: default rho = %.17g, reference %.17g", variant, dca.Rho, rd.Rho)
				}
				if len(dca.Eigenvalues) != len(rd.GenEigenvalues) {
					t.Errorf("%s dca: %d components, reference has %d", variant, len(dca.Eigenvalues), len(rd.GenEigenvalues))
				}
				rho := rd.Rho
				dca, err = DCA(m, Options{Regularizer: Regularizer{Rho: &rho}, RhoPrime: rd.RhoPrime})
				if err != nil {
					t.Fatal(err)
				}
				relDCA := eigenError(t, variant+" dca", dca.Eigenvalues, rd.GenEigenvalues, eigTol)
				vecDCA := vectorError(t, variant+" dca unit", dca.Unit, rd.UnitVectors, vecTol)

				lda, err := LDA(m, Options{Regularizer: Regularizer{Rho: &rho}})
				if err != nil {
					t.Fatal(err)
				}
				relLDA := eigenError(t, variant+" lda", lda.Eigenvalues, rd.RidgeLDA, eigTol)
				t.Logf("%-9s max relative eigenvalue error: pca %.2e  dca %.2e  lda %.2e; max vector entry error: pca %.1e  dca %.1e",
					variant, relPCA, relDCA, relLDA, vecPCA, vecDCA)
			}
		})
	}
}

// TestStandardizedRatioOutOfD (issue 43): the PCA of the release's
// correlation matrix explains its variance out of d, the trace of a
// correlation matrix. On the raw rows (no floor) that is the reference's
// share of the standardised scatter's trace; with some variances under the
// noise floor, the floored features are named and the share explained
// never exceeds the reference's (dividing by the floored matrix's own
// trace, as before, claimed more: 84% where 46% was captured).
func TestStandardizedRatioOutOfD(t *testing.T) {
	ref := loadReference(t)
	for _, name := range []string{"wine", "wdbc", "glass"} {
		rp := ref[name].PCA["unclipped"]
		x, labels := readDataset(t, name)
		m, _ := momentsOf(x, labels)
		s, err := m.Scatters()
		if err != nil {
			t.Fatal(err)
		}
		c, corr, err := s.StandardizedPCA(rp.TopK, 0)
		if err != nil {
			t.Fatal(err)
		}
		d := m.Dim()
		share := 0.0
		for _, r := range c.ExplainedVarianceRatio {
			share += r
		}
		if c.TotalVariance != float64(d) || len(corr.Floored) != 0 || math.Abs(share-rp.TopKShare) > 1e-9 {
			t.Fatalf("%s: total %v (d = %d), floored %v, top-%d share %.12f, reference %.12f", name, c.TotalVariance, d, corr.Floored, rp.TopK, share, rp.TopKShare)
		}
		// Shrink three features far below a floor: they are floored, and
		// the share explained is at most the reference's.
		for i := range x {
			for _, j := range []int{0, 2, 4} {
				x[i][j] *= 1e-6
			}
		}
		m, _ = momentsOf(x, labels)
		s, _ = m.Scatters()
		floor, others := 0.0, math.Inf(1)
		for j := 0; j < d; j++ {
			if j == 0 || j == 2 || j == 4 {
				floor = math.Max(floor, 10*s.ST.At(j, j))
			} else {
				others = math.Min(others, s.ST.At(j, j))
			}
		}
		if floor >= others {
			t.Fatalf("%s: the floor %g reaches an unscaled variance %g", name, floor, others)
		}
		c, corr, err = s.StandardizedPCA(rp.TopK, floor/(2*math.Sqrt(float64(d))))
		if err != nil {
			t.Fatal(err)
		}
		trace, floored, eig := 0.0, 0.0, 0.0
		for i := range d {
			trace += corr.C.At(i, i)
		}
		for i, r := range c.ExplainedVarianceRatio {
			floored += r
			eig += c.Eigenvalues[i]
		}
		if fmt.Sprint(corr.Floored) != "[0 2 4]" || floored > rp.TopKShare+1e-9 || trace > float64(d)-2.7+1e-9 {
			t.Errorf("%s: floored %v, top-%d share %.4f (reference %.4f), trace %.4f", name, corr.Floored, rp.TopK, floored, rp.TopKShare, trace)
		}
		if old := eig / trace; old <= rp.TopKShare {
			t.Errorf("%s: test too weak: a share out of the floored trace, %.4f, would not overstate %.4f", name, old, rp.TopKShare)
		}
	}
}
