package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// Result is the self-describing document the user publishes (PROTOCOL.md
// section 7): the components and everything needed to interpret them, the
// privacy accounting, and the noisy release itself, so that any other
// analysis of it costs no new budget.
//
// JSON: the header fields (job_id ... noisy_n), then the components' fields
// at the top level ("mean", "components" (d x k, row-major: components[i][j]
// is entry i of component j), "eigenvalues", "all_eigenvalues",
// "explained_variance_ratio" (PCA), "rho", "rho_prime", "unit_components"
// (DCA/LDA); none for a scatter-only release), then "privacy", "he_params"
// and "release". A components job's result has no components' fields and
// no "release", but "released": "components" and "output"
// (TopComponents), and "quality" with noise.
type Result struct {
	JobID      string
	Dataset    string
	SchemaHash string
	Analysis   string
	Features   []string
	Classes    []string
	// Owners are the owners whose uploads are in the release.
	Owners    []string
	NumOwners int
	// NoisyN is the (noisy) total number of rows.
	NoisyN float64
	// Standardized PCA components are those of the release's correlation
	// matrix (see Spec.Standardize).
	Standardized bool
	Components   *analysis.Components
	Privacy      Privacy
	// Quality says how much of the result the noise accounts for (nil
	// without noise).
	Quality  *Quality
	HEParams string
	Release  *ReleaseDoc
	// Released is ReleaseComponents for a components job, whose result
	// holds only Output (the top components and their eigenvalues), NoisyN,
	// the accounting and, with noise, Quality: no Components or Release.
	// Empty for a statistics job.
	Released string
	Output   *TopComponents
	// Power is a power-method job's computation (Released is
	// ReleasePower: its Output is what the user computed from the rounds).
	Power *PowerDoc
}

// resultJSON is Result's JSON layout (see Result).
type resultJSON struct {
	JobID        string   `json:"job_id"`
	Dataset      string   `json:"dataset"`
	SchemaHash   string   `json:"schema_hash"`
	Analysis     string   `json:"analysis"`
	Features     []string `json:"features"`
	Classes      []string `json:"classes,omitempty"`
	Owners       []string `json:"owners"`
	NumOwners    int      `json:"num_owners"`
	NoisyN       float64  `json:"noisy_n"`
	Standardized bool     `json:"standardized,omitempty"`
	*analysis.Fields
	Privacy  Privacy     `json:"privacy"`
	Quality  *Quality    `json:"quality,omitempty"`
	HEParams string      `json:"he_params"`
	Release  *ReleaseDoc `json:"release,omitempty"`
	// A components job's (Result.Released, Result.Output).
	Released string         `json:"released,omitempty"`
	Output   *TopComponents `json:"output,omitempty"`
	Power    *PowerDoc      `json:"power,omitempty"`
}

// MarshalJSON encodes the result (see Result for the layout).
func (r Result) MarshalJSON() ([]byte, error) {
	j := resultJSON{JobID: r.JobID, Dataset: r.Dataset, SchemaHash: r.SchemaHash, Analysis: r.Analysis, Features: r.Features,
		Classes: r.Classes, Owners: r.Owners, NumOwners: r.NumOwners, NoisyN: r.NoisyN, Standardized: r.Standardized, Privacy: r.Privacy, Quality: r.Quality, HEParams: r.HEParams, Release: r.Release,
		Released: r.Released, Output: r.Output, Power: r.Power}
	if r.Components != nil {
		f, err := r.Components.Fields()
		if err != nil {
			return nil, err
		}
		j.Fields = f
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes a result and validates its components.
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Result{JobID: j.JobID, Dataset: j.Dataset, SchemaHash: j.SchemaHash, Analysis: j.Analysis, Features: j.Features,
		Classes: j.Classes, Owners: j.Owners, NumOwners: j.NumOwners, NoisyN: j.NoisyN, Standardized: j.Standardized, Privacy: j.Privacy, Quality: j.Quality, HEParams: j.HEParams, Release: j.Release,
		Released: j.Released, Output: j.Output, Power: j.Power}
	if j.Fields != nil {
		c, err := analysis.FromFields(j.Analysis, j.Fields)
		if err != nil {
			return err
		}
		out.Components = c
	}
	*r = out
	return nil
}

// Privacy is the privacy accounting of a release.
type Privacy struct {
	// Computed, for a components release, says whose randomness the
	// committee's computation ran under and what that trusts
	// (ComponentsTrust).
	Computed string   `json:"computed,omitempty"`
	NoNoise  bool     `json:"no_noise"`
	Plan     string   `json:"noise_plan"`
	Tolerate int      `json:"tolerate"`
	Split    dp.Split `json:"split"`
	// Neighbours is the neighbouring relation of every guarantee here
	// (dp.Neighbours).
	Neighbours string `json:"neighbours,omitempty"`
	// Cost is what the job charged every owner's ledger: its guarantee
	// with the user colluding with the worst Tolerate noise parties,
	// whichever they are and whoever uploaded (dp.Calibration.Cost).
	// Epsilon is Cost.Epsilon(Delta), at most the job's epsilon, and Rho
	// Cost.Rho. Delta is the requested delta. Compose the costs of several
	// results (dp.Compose) for their total.
	Cost    *dp.Cost `json:"cost,omitempty"`
	Epsilon dp.Float `json:"epsilon"`
	Delta   float64  `json:"delta"`
	Rho     dp.Float `json:"rho"`
	// SensitivityFactor is how much larger mu^2 is under Neighbours than
	// for adding one row, at the job's split (dp.Calibration.Factor): the
	// noise variance the row cap costs.
	SensitivityFactor float64 `json:"sensitivity_factor,omitempty"`
	// Mu is the Gaussian-DP parameter of the release with everyone honest,
	// and EpsilonCorrection the part of that case's epsilon that the
	// discrete-noise correction adds (see dp.Correction).
	Mu                dp.Float `json:"mu"`
	EpsilonCorrection dp.Float `json:"epsilon_correction"`
	// Sigma is the central standard deviation per block in data units;
	// SigmaTotal the standard deviation of all the noise actually in the
	// release (everyone honest).
	Sigma      BlockValues    `json:"sigma_central"`
	SigmaTotal BlockValues    `json:"sigma_total"`
	Shares     []ShareDoc     `json:"shares"`
	Collusion  []dp.Collusion `json:"collusion"`
	// Log10Tau is the distributed discrete Gaussian correction term of each
	// block (log10), everyone honest.
	Log10Tau BlockValues `json:"log10_tau"`
}

// BlockValues holds one number per block.
type BlockValues struct {
	R dp.Float `json:"r"`
	V dp.Float `json:"v"`
	N dp.Float `json:"n"`
}

func blockValues(x [3]float64) BlockValues {
	return BlockValues{dp.Float(x[0]), dp.Float(x[1]), dp.Float(x[2])}
}

// ShareDoc is one noise share: who added it and its fraction of the central
// variance.
type ShareDoc struct {
	Party  string  `json:"party"`
	Weight string  `json:"weight"` // exact rational, e.g. "1/3"
	Value  float64 `json:"weight_value"`
}

// ReleaseDoc is the noisy release in integers: R (upper triangle,
// row-major, scale 2^(2 bits)), V (K class sums, scale 2^bits), N (K counts,
// scale 2^bits).
type ReleaseDoc struct {
	// Kind is empty for the full statistics, "moments", "marginals" or
	// "histogram" for the profile job's rounds.
	Kind string  `json:"kind,omitempty"`
	D    int     `json:"d"`
	K    int     `json:"k"`
	Bits uint    `json:"bits"`
	R    []int64 `json:"r"`
	V    []int64 `json:"v"`
	N    []int64 `json:"n"`
}

// Release converts the document back to a release, validating its shape.
func (d *ReleaseDoc) Release() (*stats.Release, error) {
	kind := stats.Full
	switch d.Kind {
	case "":
	case stats.Moments.String():
		kind = stats.Moments
	case stats.Histogram.String():
		kind = stats.Histogram
	case stats.Marginals.String():
		kind = stats.Marginals
	default:
		return nil, fmt.Errorf("release: unknown kind %q", d.Kind)
	}
	l, err := stats.NewLayoutOf(kind, d.D, d.K)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if len(d.R) != l.RLen() || len(d.V) != l.VLen() || len(d.N) != l.NLen() {
		return nil, fmt.Errorf("release: block lengths %d/%d/%d, want %d/%d/%d for %s d=%d k=%d", len(d.R), len(d.V), len(d.N), l.RLen(), l.VLen(), l.NLen(), l.Kind, d.D, d.K)
	}
	vec := append(append(append([]int64{}, d.R...), d.V...), d.N...)
	return stats.Unpack(l, d.Bits, vec)
}

func releaseDoc(r *stats.Release) *ReleaseDoc {
	doc := &ReleaseDoc{D: r.Layout.D, K: r.Layout.K, Bits: r.Bits, R: r.R, V: r.V, N: r.N}
	if r.Layout.Kind != stats.Full {
		doc.Kind = r.Layout.Kind.String()
	}
	return doc
}

// PrivacyReport computes the privacy accounting of a release that holds the
// uploads of the named owners and was switched by the named CSP members.
func PrivacyReport(s *Spec, sch *schema.Schema, owners, csps []string) (Privacy, error) {
	pr := Privacy{NoNoise: s.NoNoise, Plan: s.NoisePlan, Tolerate: s.Tolerate, Split: s.Split, Delta: s.Delta}
	cal, err := s.Calibration(sch)
	if err != nil {
		return pr, err
	}
	if cal.NoiseOff() {
		inf := dp.Float(math.Inf(1))
		pr.Epsilon, pr.Rho = inf, inf
		pr.Cost = &cal.Cost
		pr.Log10Tau = blockValues([3]float64{math.Inf(-1), math.Inf(-1), math.Inf(-1)})
		return pr, nil
	}
	plan := s.Plan()
	shares, err := plan.Shares(owners, csps)
	if err != nil {
		return pr, err
	}
	table := plan.CollusionTable(cal, shares)
	cost := cal.Cost
	pr.Neighbours, pr.Cost, pr.SensitivityFactor, pr.Collusion = dp.Neighbours, &cost, cal.Factor, table
	pr.Epsilon, pr.Rho = dp.Float(cost.Epsilon(s.Delta)), cost.Rho
	honest := cal.Account(shares)
	pr.Mu, pr.EpsilonCorrection = honest.Mu, honest.EpsilonCorrection
	pr.Log10Tau = BlockValues{honest.Log10Tau[0], honest.Log10Tau[1], honest.Log10Tau[2]}
	for _, sh := range shares {
		v, _ := sh.Weight.Float64()
		pr.Shares = append(pr.Shares, ShareDoc{Party: sh.Party, Weight: sh.Weight.RatString(), Value: v})
	}
	var sig [3]float64
	for _, b := range stats.Blocks {
		sig[b] = cal.SigmaData(b)
	}
	sigTot, err := s.sigmaTotal(cal, len(owners))
	if err != nil {
		return pr, err
	}
	pr.Sigma, pr.SigmaTotal = blockValues(sig), blockValues(sigTot)
	return pr, nil
}

// sigmaTotal is the standard deviation per block, in data units, of all
// the noise in a release of the sum of `uploaded` owners' uploads with
// every planned party honest (Privacy.SigmaTotal): the central one times
// the root of the plan's shares' total weight (dp.Plan.Shares's).
func (s *Spec) sigmaTotal(cal dp.Calibration, uploaded int) ([3]float64, error) {
	var out [3]float64
	p := s.Plan()
	total := new(big.Rat)
	for _, r := range []struct {
		role  dp.Role
		count int
	}{{dp.RoleOwner, uploaded}, {dp.RoleProxy, 1}, {dp.RoleCSP, p.CSPs}} {
		w, err := p.Weight(r.role, uploaded)
		if err != nil {
			return out, err
		}
		total.Add(total, new(big.Rat).Mul(w, big.NewRat(int64(r.count), 1)))
	}
	tw, _ := total.Float64()
	for _, b := range stats.Blocks {
		out[b] = cal.SigmaData(b) * math.Sqrt(tw)
	}
	return out, nil
}

// Moments converts a release to data units for the analysis package.
func Moments(r *stats.Release) analysis.Moments {
	rr, v, n := r.Float()
	return analysis.Moments{R: mat.NewSymDense(r.Layout.D, rr), V: v, N: n}
}

// Header is what a result says about its origin.
type Header struct {
	JobID, Dataset, SchemaHash, HEParams string
	Features, Classes                    []string
	// Standardize: PCA of the release's correlation (Spec.Standardize).
	Standardize bool
}

// HeaderOf returns the header of a job's results.
func HeaderOf(s *Spec, sch *schema.Schema, heParams string) Header {
	return Header{JobID: s.ID(), Dataset: s.Dataset, SchemaHash: s.SchemaHash, HEParams: heParams, Features: sch.FeatureNames(), Classes: sch.Classes, Standardize: s.Standardize}
}

// CentralHEParams is the he_params of a Central result: none were used.
const CentralHEParams = "none (central, non-private)"

// Central is the non-private result of a spec's analysis of the given rows
// read in one place, without encryption or noise: what a job with no noise
// on the same rows must equal. The rows are read as one owner reads them
// (ReadStatistics, with the spec's max_owner_rows); the report says how many
// were used, skipped and dropped.
func Central(s *Spec, sch *schema.Schema, csv io.Reader) (*Result, ReadReport, error) {
	acc, rep, err := ReadStatistics(s, sch, csv)
	if err != nil {
		return nil, rep, err
	}
	l, err := s.Layout(sch)
	if err != nil {
		return nil, rep, err
	}
	rel, err := stats.Unpack(l, sch.Bits, acc.Pack())
	if err != nil {
		return nil, rep, err
	}
	// A document like a job's (so that it validates and compares), named by
	// the spec's hash, with no HE parameters since nothing was encrypted.
	h := Header{JobID: s.ID(), Dataset: sch.ID, SchemaHash: sch.HashHex(), HEParams: CentralHEParams, Features: sch.FeatureNames(), Classes: sch.Classes, Standardize: s.Standardize}
	res, err := AnalyzeRelease(h, s.Analysis, s.K, rel, nil, Privacy{NoNoise: true})
	return res, rep, err
}

// Analyze runs the job's analysis on a release (post-processing, no privacy
// cost) and assembles the result document.
func Analyze(s *Spec, sch *schema.Schema, rel *stats.Release, owners []string, pr Privacy, heParams string) (*Result, error) {
	return AnalyzeRelease(HeaderOf(s, sch, heParams), s.Analysis, s.K, rel, owners, pr)
}

// Reanalyze runs another analysis (or another k) on the release a result
// carries: free, since it only post-processes the release.
func Reanalyze(res *Result, name string, k int) (*Result, error) {
	if res.Release == nil {
		if res.Released == ReleaseComponents {
			return nil, errors.New("reanalyze: a components result carries no release (the job released only its top components), so nothing can be derived from it")
		}
		return nil, errors.New("reanalyze: the result carries no release")
	}
	rel, err := res.Release.Release()
	if err != nil {
		return nil, err
	}
	h := Header{JobID: res.JobID, Dataset: res.Dataset, SchemaHash: res.SchemaHash, HEParams: res.HEParams, Features: res.Features, Classes: res.Classes,
		Standardize: res.Standardized && name == PCA}
	if len(h.Features) != rel.Layout.D {
		return nil, fmt.Errorf("reanalyze: %d feature names for d = %d", len(h.Features), rel.Layout.D)
	}
	return AnalyzeRelease(h, name, k, rel, res.Owners, res.Privacy)
}

// AnalyzeRelease runs an analysis on a release and assembles the result.
// The DCA/LDA regulariser adds the noise margin for the total noise on R in
// the release (pr.SigmaTotal.R).
func AnalyzeRelease(h Header, name string, k int, rel *stats.Release, owners []string, pr Privacy) (*Result, error) {
	if rel.Layout.Kind != stats.Full {
		// A profile round: the release is the result; the profile package
		// reads it.
		if want := map[string]stats.Kind{MomentsJob: stats.Moments, MarginalsJob: stats.Marginals, NormsJob: stats.Histogram}[name]; want != rel.Layout.Kind {
			return nil, fmt.Errorf("a %s release cannot give a %s result", rel.Layout.Kind, name)
		}
		// The noisy row count: of the first feature's buckets, for
		// marginals.
		var n int64
		for _, c := range rel.N[:rel.Layout.K] {
			n += c
		}
		return &Result{
			JobID: h.JobID, Dataset: h.Dataset, SchemaHash: h.SchemaHash, Analysis: name,
			Features: h.Features, Owners: owners, NumOwners: len(owners),
			NoisyN: math.Ldexp(float64(n), -int(rel.Bits)), Privacy: pr, HEParams: h.HEParams, Release: releaseDoc(rel),
		}, nil
	}
	m := Moments(rel)
	sc, err := m.Scatters()
	if err != nil {
		return nil, err
	}
	res := &Result{
		JobID: h.JobID, Dataset: h.Dataset, SchemaHash: h.SchemaHash, Analysis: name,
		Features: h.Features, Owners: owners, NumOwners: len(owners),
		NoisyN: sc.N, Privacy: pr, HEParams: h.HEParams, Release: releaseDoc(rel),
	}
	if rel.Layout.K > 1 {
		res.Classes = h.Classes
	}
	opts := analysis.Options{K: k, Regularizer: analysis.Regularizer{NoiseStd: float64(pr.SigmaTotal.R)}}
	var corr *analysis.Correlation
	switch name {
	case Scatter:
	case PCA:
		// The noise on v = sum_k v_k has variance K sigma_v^2 per coordinate.
		sv := float64(pr.SigmaTotal.V)
		shrunk := sc.ShrinkCentring(float64(rel.Layout.K) * sv * sv)
		if h.Standardize {
			res.Standardized = true
			// A variance below the noise's spectral norm (about 2 sigma_R
			// sqrt(d)) is not told apart from noise: it is taken at that
			// level, so that a feature the noise dominates is not blown up
			// to unit variance.
			res.Components, corr, err = shrunk.StandardizedPCA(k, float64(pr.SigmaTotal.R))
		} else if res.Components, err = shrunk.PCA(k); err == nil {
			// Each eigenvalue less what the noise on S_T adds to it.
			res.Components.Support(2 * float64(pr.SigmaTotal.R) * math.Sqrt(float64(rel.Layout.D)))
		}
	case DCA, LDA:
		if rel.Layout.K < 2 {
			return nil, fmt.Errorf("%s needs per-class statistics; the release has one class", name)
		}
		res.Components, _, err = analysis.SolveWithRetry(name, m, opts)
	default:
		return nil, fmt.Errorf("unknown analysis %q (want pca, dca, lda or scatter)", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if res.Quality, err = quality(res, sc, corr, rel.Layout.D, rel.Layout.K); err != nil {
		return nil, fmt.Errorf("%s: quality: %w", name, err)
	}
	return res, nil
}
