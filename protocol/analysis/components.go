package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Analysis names, as in the job spec.
const (
	AnalysisPCA = "pca"
	AnalysisDCA = "dca"
	AnalysisLDA = "lda"
)

// Components is the result of one analysis. Once built it is only read; reading (Project,
// ProjectBatch, MarshalJSON) is safe for concurrent use, mutating it is not.
//
// JSON: {"analysis", "mean", "components" (W), "eigenvalues", "all_eigenvalues",
// "explained_variance_ratio" and "total_variance" (PCA only), "rho", "rho_prime", "unit_components" (DCA/LDA only)}; the
// matrices are row-major nested arrays of d rows and k columns, so components[i][j] is entry i of
// component j.
type Components struct {
	// Analysis is AnalysisPCA, AnalysisDCA or AnalysisLDA.
	Analysis string
	// Mean is the mean row v/n (length d); projections are centred on it.
	Mean []float64
	// W is d x k, one component per column. PCA: orthonormal eigenvectors of PSD(S_T). DCA/LDA:
	// generalised eigenvectors normalised so that W^T A W = I, A the right-hand matrix.
	W *mat.Dense
	// Eigenvalues are those of the k columns of W, descending. PCA: of PSD(S_T) (>= 0);
	// DCA/LDA: generalised eigenvalues.
	Eigenvalues []float64
	// AllEigenvalues are all d eigenvalues, descending (for scree plots).
	AllEigenvalues []float64
	// ExplainedVarianceRatio (PCA only, nil otherwise) is Eigenvalues[i] / TotalVariance, or all
	// zeros when that is 0; in a job's result each eigenvalue less what the noise adds to it
	// (Support).
	ExplainedVarianceRatio []float64
	// TotalVariance (PCA only) is the denominator of ExplainedVarianceRatio: the sum of
	// AllEigenvalues (of PSD(S_T)), or d for the PCA of a correlation matrix (StandardizedPCA),
	// whose trace is d whatever the noise did to its diagonal.
	TotalVariance float64
	// Rho and RhoPrime are the regularisers actually used (DCA/LDA; 0 for PCA).
	Rho, RhoPrime float64
	// Unit (DCA/LDA only, nil for PCA) holds the columns of W scaled to unit 2-norm.
	Unit *mat.Dense
}

// Dims returns d (features) and k (components).
func (c *Components) Dims() (d, k int) {
	if c.W == nil || c.W.IsEmpty() {
		return 0, 0
	}
	return c.W.Dims()
}

// Validate checks that the fields are mutually consistent.
func (c *Components) Validate() error {
	switch c.Analysis {
	case AnalysisPCA, AnalysisDCA, AnalysisLDA:
	default:
		return fmt.Errorf("components: analysis = %q, want %q, %q or %q", c.Analysis, AnalysisPCA, AnalysisDCA, AnalysisLDA)
	}
	d, k := c.Dims()
	if d < 1 || k < 1 {
		return errors.New("components: w is nil or empty")
	}
	if len(c.Mean) != d {
		return fmt.Errorf("components: mean has length %d, want d = %d", len(c.Mean), d)
	}
	if len(c.Eigenvalues) != k {
		return fmt.Errorf("components: eigenvalues has length %d, want k = %d", len(c.Eigenvalues), k)
	}
	if len(c.AllEigenvalues) != d {
		return fmt.Errorf("components: all_eigenvalues has length %d, want d = %d", len(c.AllEigenvalues), d)
	}
	if c.Analysis == AnalysisPCA {
		if len(c.ExplainedVarianceRatio) != k {
			return fmt.Errorf("components: explained_variance_ratio has length %d, want k = %d", len(c.ExplainedVarianceRatio), k)
		}
		if c.Unit != nil {
			return errors.New("components: unit_components is set for pca")
		}
		if !(c.TotalVariance >= 0) || math.IsInf(c.TotalVariance, 0) {
			return fmt.Errorf("components: total_variance %v is not a finite non-negative number", c.TotalVariance)
		}
	} else {
		if c.ExplainedVarianceRatio != nil || c.TotalVariance != 0 {
			return fmt.Errorf("components: explained_variance_ratio or total_variance is set for %s", c.Analysis)
		}
		if c.Unit == nil || c.Unit.IsEmpty() {
			return fmt.Errorf("components: unit_components is missing for %s", c.Analysis)
		}
		if r, cc := c.Unit.Dims(); r != d || cc != k {
			return fmt.Errorf("components: unit_components is %d x %d, want %d x %d", r, cc, d, k)
		}
	}
	return nil
}

// Project returns (z - Mean) W, the k coordinates of the row z (in data units, after the schema
// map and clipping). Like gonum's mat, it panics if len(z) != d: that is a programming error.
func (c *Components) Project(z []float64) []float64 {
	d, k := c.Dims()
	if len(z) != d {
		panic(fmt.Sprintf("analysis: project: z has length %d, want d = %d", len(z), d))
	}
	out := make([]float64, k)
	for i := 0; i < d; i++ {
		x := z[i] - c.Mean[i]
		if x == 0 {
			continue
		}
		for j := 0; j < k; j++ {
			out[j] += x * c.W.At(i, j)
		}
	}
	return out
}

// ProjectBatch returns (Z - 1 Mean^T) W for the n x d matrix Z of rows: an n x k matrix. It panics
// if Z does not have d columns.
func (c *Components) ProjectBatch(z *mat.Dense) *mat.Dense {
	d, _ := c.Dims()
	n, cols := z.Dims()
	if cols != d {
		panic(fmt.Sprintf("analysis: project batch: z has %d columns, want d = %d", cols, d))
	}
	centred := mat.NewDense(n, d, nil)
	centred.Apply(func(i, j int, v float64) float64 { return v - c.Mean[j] }, z)
	var out mat.Dense
	out.Mul(centred, c.W)
	return &out
}

// Fields are the JSON fields of Components other than "analysis", for
// documents that carry the analysis name themselves (a job's result).
type Fields struct {
	Mean                   []float64   `json:"mean"`
	W                      [][]float64 `json:"components"`
	Eigenvalues            []float64   `json:"eigenvalues"`
	AllEigenvalues         []float64   `json:"all_eigenvalues"`
	ExplainedVarianceRatio []float64   `json:"explained_variance_ratio,omitempty"`
	TotalVariance          float64     `json:"total_variance,omitempty"`
	Rho                    float64     `json:"rho"`
	RhoPrime               float64     `json:"rho_prime"`
	Unit                   [][]float64 `json:"unit_components,omitempty"`
}

type componentsJSON struct {
	Analysis string `json:"analysis"`
	Fields
}

// Fields returns c's JSON fields. It fails if c is inconsistent.
func (c *Components) Fields() (*Fields, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("marshal: %w", err)
	}
	return &Fields{
		Mean:                   c.Mean,
		W:                      denseToRows(c.W),
		Eigenvalues:            c.Eigenvalues,
		AllEigenvalues:         c.AllEigenvalues,
		ExplainedVarianceRatio: c.ExplainedVarianceRatio,
		TotalVariance:          c.TotalVariance,
		Rho:                    c.Rho,
		RhoPrime:               c.RhoPrime,
		Unit:                   denseToRows(c.Unit),
	}, nil
}

// FromFields rebuilds the components of an analysis from their JSON fields
// and validates them.
func FromFields(name string, f *Fields) (*Components, error) {
	w, err := rowsToDense("components", f.W)
	if err != nil {
		return nil, fmt.Errorf("unmarshal components: %w", err)
	}
	var unit *mat.Dense
	if f.Unit != nil {
		if unit, err = rowsToDense("unit_components", f.Unit); err != nil {
			return nil, fmt.Errorf("unmarshal components: %w", err)
		}
	}
	c := &Components{
		Analysis:               name,
		Mean:                   f.Mean,
		W:                      w,
		Eigenvalues:            f.Eigenvalues,
		AllEigenvalues:         f.AllEigenvalues,
		ExplainedVarianceRatio: f.ExplainedVarianceRatio,
		TotalVariance:          f.TotalVariance,
		Rho:                    f.Rho,
		RhoPrime:               f.RhoPrime,
		Unit:                   unit,
	}
	if c.Analysis == AnalysisPCA && c.TotalVariance == 0 {
		// A result written before the field: its ratio was out of the sum.
		for _, v := range c.AllEigenvalues {
			c.TotalVariance += math.Max(v, 0)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("unmarshal: %w", err)
	}
	return c, nil
}

// MarshalJSON encodes c (see the type's doc for the layout). It fails if c is inconsistent. It has
// a value receiver so that a Components embedded by value in a larger result also encodes.
func (c Components) MarshalJSON() ([]byte, error) {
	f, err := c.Fields()
	if err != nil {
		return nil, err
	}
	return json.Marshal(componentsJSON{Analysis: c.Analysis, Fields: *f})
}

// UnmarshalJSON decodes and validates c; on error c is left unchanged.
func (c *Components) UnmarshalJSON(b []byte) error {
	var j componentsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("unmarshal components: %w", err)
	}
	out, err := FromFields(j.Analysis, &j.Fields)
	if err != nil {
		return err
	}
	*c = *out
	return nil
}

func denseToRows(m *mat.Dense) [][]float64 {
	if m == nil || m.IsEmpty() {
		return nil
	}
	r, c := m.Dims()
	out := make([][]float64, r)
	for i := range out {
		out[i] = make([]float64, c)
		mat.Row(out[i], i, m)
	}
	return out
}

func rowsToDense(name string, rows [][]float64) (*mat.Dense, error) {
	if len(rows) == 0 || len(rows[0]) == 0 {
		return nil, fmt.Errorf("%s is empty", name)
	}
	r, c := len(rows), len(rows[0])
	data := make([]float64, 0, r*c)
	for i, row := range rows {
		if len(row) != c {
			return nil, fmt.Errorf("%s row %d has %d entries, want %d", name, i, len(row), c)
		}
		data = append(data, row...)
	}
	return mat.NewDense(r, c, data), nil
}
