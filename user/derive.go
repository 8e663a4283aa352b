package user

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/job"
)

// The analyses Derive computes from a saved release, at no privacy cost.
const (
	DeriveCovariance  = "covariance"
	DeriveCorrelation = "correlation"
	DeriveMeans       = "means"
	DeriveRegression  = "regression"
)

// Derivations lists them.
var Derivations = []string{DeriveCovariance, DeriveCorrelation, DeriveMeans, DeriveRegression}

// SchemaUnits says what a number in the schema's units is: every value
// a job sees, and every statistic of its release, is in them.
const SchemaUnits = "the schema's units: each feature as z = (x - center) / scale with the schema's center and scale, " +
	"clamped to its min/max, each row clipped to norm clip_norm; not the data's units (x = center + scale z undoes the map, not the clamp or the clip)"

// Units says, for each derived analysis, the units of its numbers
// (written into KIND.json as "units").
var Units = map[string]string{
	DeriveCovariance:  "entry (i, j) in units of scale_i scale_j: " + SchemaUnits,
	DeriveCorrelation: "dimensionless (a correlation is the same in the data's units, up to the clamp and the clip)",
	DeriveMeans:       "counts in rows; means and mean_std in " + SchemaUnits,
	DeriveRegression:  "the target's z per each feature's z (a coefficient in data units is it times scale_target / scale_feature): " + SchemaUnits,
}

// DeriveOptions are the choices of a derived analysis.
type DeriveOptions struct {
	// Target names the regressed feature (regression).
	Target string
	// Ridge is the regression's ridge; negative means the default, the
	// noise's spectral norm 2 sqrt(d) sigma_R (0 without noise), which keeps
	// S_xx + ridge I positive definite with high probability.
	Ridge float64
}

// Derive computes one derived analysis of a result's release (see
// analysis/derive.go for what each estimate is and which are unbiased) and
// writes it into dir as KIND.json and KIND.csv, each with its noise scale.
// It returns the paths written.
func Derive(dir string, res *job.Result, kind string, o DeriveOptions) ([]string, error) {
	rel, err := res.Release.Release()
	if err != nil {
		return nil, err
	}
	m := job.Moments(rel)
	pr := res.Privacy
	noise := analysis.Noise{}
	if !pr.NoNoise {
		noise = analysis.Noise{R: float64(pr.SigmaTotal.R), V: float64(pr.SigmaTotal.V), N: float64(pr.SigmaTotal.N)}
	}
	var doc any
	var table [][]string
	features := res.Features
	switch kind {
	case DeriveCovariance, DeriveCorrelation:
		cov, err := m.Covariance(noise)
		if err != nil {
			return nil, err
		}
		if kind == DeriveCovariance {
			doc = map[string]any{"job_id": res.JobID, "units": Units[kind], "features": features, "noisy_n": cov.N, "entry_std": cov.EntryStd,
				"estimate": "R - (v v^T - K sigma_v^2 I) / n, over n - 1: unbiased numerator, divided by the noisy n - 1", "covariance": rows(cov.C)}
			table = matrixTable(features, cov.C)
			break
		}
		corr, std, err := cov.Correlation()
		if err != nil {
			return nil, err
		}
		doc = map[string]any{"job_id": res.JobID, "units": Units[kind], "features": features, "entry_std": rows(std),
			"estimate":    "the covariance's entries over the square roots of its diagonal, clamped to [-1, 1]: biased (nonlinear); entry_std is first order",
			"correlation": rows(corr)}
		table = matrixTable(features, corr)
	case DeriveMeans:
		cs, err := m.ClassMeans(noise)
		if err != nil {
			return nil, err
		}
		classes := res.Classes
		if len(classes) == 0 {
			classes = []string{"all"}
		}
		doc = map[string]any{"job_id": res.JobID, "units": Units[kind], "features": features, "classes": classes, "counts": cs.Counts, "count_std": cs.CountStd,
			"means": cs.Means, "mean_std": cs.MeanStd, "estimate": "counts: unbiased; means v_k / n_k: unbiased to first order (ratios of noisy sums)"}
		table = append(table, append([]string{"class", "count", "count_std", "mean_std"}, features...))
		for k, c := range classes {
			row := []string{c, fmtF(cs.Counts[k]), fmtF(cs.CountStd), fmtF(cs.MeanStd[k])}
			for _, x := range cs.Means[k] {
				row = append(row, fmtF(x))
			}
			table = append(table, row)
		}
	case DeriveRegression:
		target := slices.Index(features, o.Target)
		if target < 0 {
			return nil, fmt.Errorf("regression: --target %q is not a feature (features: %v)", o.Target, features)
		}
		ridge := o.Ridge
		if ridge < 0 {
			ridge = 2 * math.Sqrt(float64(len(features))) * noise.R
		}
		reg, err := m.Ridge(target, ridge, noise)
		if err != nil {
			return nil, err
		}
		type coef struct {
			Feature string  `json:"feature"`
			Coef    float64 `json:"coefficient"`
			Std     float64 `json:"std"`
		}
		var cs []coef
		table = append(table, []string{"feature", "coefficient", "std"}, []string{"(intercept)", fmtF(reg.Intercept), ""})
		for i, f := range reg.Features {
			cs = append(cs, coef{features[f], reg.Coef[i], reg.CoefStd[i]})
			table = append(table, []string{features[f], fmtF(reg.Coef[i]), fmtF(reg.CoefStd[i])})
		}
		doc = map[string]any{"job_id": res.JobID, "units": Units[kind], "target": o.Target, "ridge": ridge, "intercept": reg.Intercept, "coefficients": cs,
			"estimate": "ridge regression on the covariance-corrected centred scatter (as scikit-learn's Ridge with fit_intercept): biased (ridge, matrix inverse); std is first order"}
	default:
		return nil, fmt.Errorf("unknown derived analysis %q (want one of %v)", kind, Derivations)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	jp, cp := filepath.Join(dir, kind+".json"), filepath.Join(dir, kind+".csv")
	if err := os.WriteFile(jp, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := writeCSV(cp, table); err != nil {
		return nil, err
	}
	return []string{jp, cp}, nil
}

func fmtF(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

func rows(m *mat.SymDense) [][]float64 {
	d := m.SymmetricDim()
	out := make([][]float64, d)
	for i := range d {
		out[i] = make([]float64, d)
		for j := range d {
			out[i][j] = m.At(i, j)
		}
	}
	return out
}

func matrixTable(features []string, m *mat.SymDense) [][]string {
	t := [][]string{append([]string{"feature"}, features...)}
	for i, f := range features {
		row := []string{f}
		for j := range features {
			row = append(row, fmtF(m.At(i, j)))
		}
		t = append(t, row)
	}
	return t
}

func writeCSV(path string, table [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(table); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
