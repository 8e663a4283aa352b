package job

import (
	"errors"
	"fmt"
	"math"

	"github.com/fedpca/fedpca/protocol/schema"
)

// TopComponents is what a components release (Spec.Release =
// ReleaseComponents) gives the user, in a result document's "output": the
// top k unit eigenvectors of the covariance S_T / n of all the rows and
// their eigenvalues, and nothing derived from the statistics (no mean, no
// other eigenvalue, no explained-variance ratio: the total variance is not
// released). With the result's noisy_n (exact without noise), that is all
// the user learns.
//
// JSON: "components" is d x k, row-major (components[i][j] is entry i of
// component j, as a statistics result's), "covariance_eigenvalues" the k
// eigenvalues, descending: for PCA those of S_T / n in the schema's units
// squared (a statistics result's "eigenvalues" are those of S_T, n times
// larger); for DCA and LDA the generalised eigenvalues, as a statistics
// result's (the field keeps its name).
type TopComponents struct {
	W           [][]float64 `json:"components"`
	Eigenvalues []float64   `json:"covariance_eigenvalues"`
}

// EigenvaluesName names a components release's eigenvalues for analysis.
func EigenvaluesName(analysis string) string {
	if analysis == PCA {
		return "covariance eigenvalues"
	}
	return "generalised eigenvalues"
}

// Dims returns d (features) and k (components).
func (t *TopComponents) Dims() (d, k int) {
	if len(t.W) == 0 {
		return 0, 0
	}
	return len(t.W), len(t.W[0])
}

// Vector returns component j (length d).
func (t *TopComponents) Vector(j int) []float64 {
	v := make([]float64, len(t.W))
	for i, row := range t.W {
		v[i] = row[j]
	}
	return v
}

// Validate checks the shape: d x k components, k eigenvalues, all finite.
func (t *TopComponents) Validate(d int) error {
	rd, k := t.Dims()
	if rd != d || k < 1 {
		return fmt.Errorf("components are %d x %d, want %d rows (features) of at least one component", rd, k, d)
	}
	for i, row := range t.W {
		if len(row) != k {
			return fmt.Errorf("components row %d has %d entries, want %d", i, len(row), k)
		}
		for _, x := range row {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("components row %d: %v", i, x)
			}
		}
	}
	if len(t.Eigenvalues) != k {
		return fmt.Errorf("%d covariance eigenvalues for %d components", len(t.Eigenvalues), k)
	}
	for _, x := range t.Eigenvalues {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("covariance eigenvalue %v", x)
		}
	}
	return nil
}

// ComponentsResult assembles the result document of a components job from
// its decoded output (DecodeOutput): the components, their eigenvalues, n
// and the privacy accounting; no release, no mean, no quality figures
// (those are derived from the statistics, which the user never sees).
func ComponentsResult(s *Spec, sch *schema.Schema, out *Output, owners []string, pr Privacy, heParams string) (*Result, error) {
	if !s.Components() {
		return nil, errors.New("components result: the job releases the statistics")
	}
	d, k := sch.D(), s.K
	if len(out.Values) != k || len(out.Vectors) != k {
		return nil, fmt.Errorf("components result: %d eigenvalues and %d vectors, want k = %d", len(out.Values), len(out.Vectors), k)
	}
	top := &TopComponents{W: make([][]float64, d), Eigenvalues: append([]float64(nil), out.Values...)}
	for i := range d {
		top.W[i] = make([]float64, k)
	}
	for j, v := range out.Vectors {
		if len(v) != d {
			return nil, fmt.Errorf("components result: vector %d has %d entries, want d = %d", j+1, len(v), d)
		}
		for i, x := range v {
			top.W[i][j] = x
		}
	}
	if err := top.Validate(d); err != nil {
		return nil, fmt.Errorf("components result: %w", err)
	}
	h := HeaderOf(s, sch, heParams)
	pr.Computed = ComponentsTrust(s)
	res := &Result{JobID: h.JobID, Dataset: h.Dataset, SchemaHash: h.SchemaHash, Analysis: s.Analysis, Features: h.Features,
		Owners: owners, NumOwners: len(owners), NoisyN: out.N, Privacy: pr, HEParams: heParams,
		Released: ReleaseComponents, Output: top}
	l, err := s.Layout(sch)
	if err != nil {
		return nil, err
	}
	res.Quality = componentsQuality(res, d, l.K)
	return res, nil
}

// ComponentsTrust says whose randomness a components job's computation runs
// under and who could learn the statistics by colluding (docs/PROTOCOL.md
// 7.2).
func ComponentsTrust(s *Spec) string {
	if s.Dealt() {
		return fmt.Sprintf("by %d members with randomness the proxy dealt: the proxy with any one of them could learn the statistics, and wrong randomness is not detected", s.CommitteeThreshold)
	}
	trust := fmt.Sprintf("by %d members with their own randomness (replicated sharing): the proxy with any one of them that follows the protocol learns nothing of the statistics; openings and products are checked, so a member that deviates in the computation is stopped before any output; a member's conversion share is its own input, which no check sees (it can shift the statistics it converts)", ReplicatedParties)
	if s.NoNoise {
		trust += ", so a member colluding with the user could shift the exact statistics and show more than the top k"
	}
	return trust
}

// Top returns a result's components (d x k, one per column) and their
// eigenvalues on the statistics release's scale, whichever release it is:
// a PCA components release's covariance eigenvalues are multiplied by n
// (its own, noisy under DP; scale: another count to use instead, e.g. the
// rows' exact one, or 0), DCA's and LDA's generalised eigenvalues are as
// they are. Both are nil for a result without components.
func (r *Result) Top(scale float64) (w [][]float64, eig []float64) {
	if t := r.Output; t != nil {
		if scale == 0 {
			scale = r.NoisyN
		}
		if r.Analysis != PCA {
			scale = 1
		}
		for _, v := range t.Eigenvalues {
			eig = append(eig, v*scale)
		}
		return t.W, eig
	}
	if c := r.Components; c != nil {
		d, k := c.Dims()
		w = make([][]float64, d)
		for i := range d {
			w[i] = make([]float64, k)
			for j := range k {
				w[i][j] = c.W.At(i, j)
			}
		}
		return w, c.Eigenvalues
	}
	return nil, nil
}
