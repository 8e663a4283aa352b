package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// Analyses a job can ask for.
const (
	PCA     = "pca"
	DCA     = "dca"
	LDA     = "lda"
	Scatter = "scatter" // the noisy release only
	// The profile job's rounds (see the profile package): per-feature
	// sums and sums of squares of rows clamped to declared bounds; per-
	// feature histograms of those values over public grids; a histogram of
	// the rows' norms over public bucket edges.
	MomentsJob   = "moments"
	MarginalsJob = "marginals"
	NormsJob     = "norms"
)

// Analyses lists every analysis a spec may name.
var Analyses = []string{PCA, DCA, LDA, Scatter, MomentsJob, MarginalsJob, NormsJob}

// MaxNormEdges bounds the buckets of a norms job; MaxBuckets the buckets
// per feature of a marginals job.
const (
	MaxNormEdges = 256
	MaxBuckets   = 1024
)

// Window is a marginals job's grid for one feature: [Lo, Hi] in the
// schema's units cut into Spec.Buckets buckets of equal width; the first
// and the last bucket also hold the values below Lo and above Hi.
type Window struct {
	Lo fixedpoint.Decimal `json:"lo"`
	Hi fixedpoint.Decimal `json:"hi"`
}

// Version is the spec format version. Version 2 commits to the owner list
// (num_owners, owners_root) instead of naming the owners; version 3 names
// each owner in that list by its key as well as its ID.
const Version = 3

// DefaultDelta is used when a spec leaves delta at 0.
const DefaultDelta = 1e-6

// MaxOwners bounds the owners of one job.
const MaxOwners = 100_000

// MaxScatterFeatures bounds d in a job that releases (or computes on) the
// d x d statistics: the statistics release, the profile and the components
// release. A power-method job takes up to schema.MaxFeatures.
const MaxScatterFeatures = 4096

// Spec is the canonical description of a job. Its SHA-256 (of Canonical) is
// the job ID; the user signs the ID.
type Spec struct {
	Version int `json:"version"`
	// Dataset is the schema ID the owners serve; SchemaHash its hash (hex).
	Dataset    string `json:"dataset"`
	SchemaHash string `json:"schema_hash"`
	// Analysis is pca, dca, lda or scatter; K the number of components
	// wanted (post-processing: it does not change the privacy cost).
	Analysis string `json:"analysis"`
	K        int    `json:"k"`
	// NormEdges are the public bucket edges of a norms job, increasing and
	// positive, in the schema's units: bucket i holds the rows whose norm is
	// at least edge i-1 and below edge i (rows are clipped first).
	NormEdges []fixedpoint.Decimal `json:"norm_edges,omitempty"`
	// Buckets and Windows are a marginals job's grids: each feature's
	// values (in the schema's units, every one in [-1, 1]: Check asks for a
	// schema in the box) counted in Buckets buckets over its window, the
	// same [-1, 1] for every feature when Windows is empty.
	Buckets int      `json:"buckets,omitempty"`
	Windows []Window `json:"windows,omitempty"`
	// ClampBox (a moments job) clamps every value into [-1, 1] of the
	// schema's units before the clip, whatever the declared bounds: the
	// schema's map is then a window inside them, and the moments are of the
	// values winsorized at its edges.
	ClampBox bool `json:"clamp_box,omitempty"`
	// Standardize (PCA) analyses the release's correlation matrix: the PCA
	// of the rows standardised by the release's own standard deviations,
	// independent of the schema's scales (post-processing: no privacy
	// cost; see analysis.StandardizedPCA).
	Standardize bool `json:"standardize,omitempty"`
	// Privacy: (Epsilon, Delta)-DP via zCDP with the noise plan and budget
	// split. NoNoise disables noise (tests and simulations only; daemons
	// refuse it unless explicitly allowed).
	Epsilon   float64  `json:"epsilon"`
	Delta     float64  `json:"delta"`
	NoNoise   bool     `json:"no_noise,omitempty"`
	NoisePlan string   `json:"noise_plan"`
	Tolerate  int      `json:"tolerate"`
	Split     dp.Split `json:"split"`
	// NumOwners owners are asked to take part: the planned owners of the
	// noise plan. The spec commits to them, each by its ID and key
	// fingerprint, sorted by ID, by OwnersRoot, the
	// hex Merkle root of the list (see OwnerTree), without naming them, so
	// that what an owner receives does not grow with the owners. MinOwners
	// is how many uploads the job needs; it is sealed when all owners
	// uploaded, or at the deadline if at least MinOwners did.
	NumOwners  int       `json:"num_owners"`
	OwnersRoot string    `json:"owners_root"`
	MinOwners  int       `json:"min_owners"`
	Deadline   time.Time `json:"deadline"`
	// MaxOwnerRows is the public per-owner row cap: an owner uses its first
	// MaxOwnerRows readable rows and drops the rest (counting them in its
	// own log), so that no owner ever declines because of its row count.
	// MaxRows = NumOwners * MaxOwnerRows is the bound on the total rows
	// that the overflow check assumes; both are stated so that every party
	// checks the same proof.
	MaxRows      int64 `json:"max_rows"`
	MaxOwnerRows int64 `json:"max_owner_rows"`
	// HE parameters and keys, by fingerprint.
	HEParams           string `json:"he_params"`
	HEParamsHash       string `json:"he_params_hash"`
	CommitteeN         int    `json:"committee_n"`
	CommitteeThreshold int    `json:"committee_threshold"`
	CommitteeKey       string `json:"committee_key"`
	// User is the user's identity (its certificate's URI SAN) and UserKey
	// the fingerprint of its HE public key, the only key the committee will
	// switch this job's result to.
	User    string `json:"user"`
	UserKey string `json:"user_key"`
	// Nonce makes two otherwise equal specs distinct jobs.
	Nonce string `json:"nonce"`
	// Release is what the user learns: the statistics (empty, the
	// default) or, with "components", only the top K components, their
	// eigenvalues and n, computed by the committee members in secret-shared
	// arithmetic (docs/PROTOCOL.md section 7.2); ResultKey is then the
	// user's X25519 public key (hex) that each member seals its share of
	// the output to.
	Release   string `json:"release,omitempty"`
	ResultKey string `json:"result_key,omitempty"`
	// Randomness is, for a components release, where the computation's
	// correlated randomness comes from: "members" (three committee
	// members compute in replicated secret sharing and make it
	// themselves: no party outside them deals anything) or "dealer" (t
	// members compute with Beaver triples the proxy deals, so the proxy
	// with one member learns the statistics). docs/PROTOCOL.md 7.2.
	Randomness string `json:"randomness,omitempty"`
	// Power makes the job a power-method job's parent spec
	// (docs/PROTOCOL.md section 13): T + 1 rounds, each admitted by a
	// RoundSpec the user signs, all charged once at this spec's cost.
	Power *PowerSpec `json:"power,omitempty"`
}

// Releases.
const (
	ReleaseStatistics = ""
	ReleaseComponents = "components"
)

// A components release's sources of randomness (Spec.Randomness).
const (
	RandomnessMembers = "members"
	RandomnessDealer  = "dealer"
)

// ReplicatedParties is how many members compute a components job whose
// randomness is the members' own (replicated secret sharing).
const ReplicatedParties = 3

// Dealt reports a components job whose randomness the proxy deals.
func (s *Spec) Dealt() bool { return s.Components() && s.Randomness == RandomnessDealer }

// Parties is how many members compute a components job: three with the
// members' own randomness, the threshold with a dealer.
func (s *Spec) Parties() int {
	if s.Dealt() {
		return s.CommitteeThreshold
	}
	return ReplicatedParties
}

// DefaultRandomness is a components job's randomness when its user names
// none: the members' own where the committee allows it (three members or
// more, a threshold of three or fewer), else the dealer.
func DefaultRandomness(n, t int) string {
	if n >= ReplicatedParties && t <= ReplicatedParties {
		return RandomnessMembers
	}
	return RandomnessDealer
}

// MaxExactK is the most components a job without DP noise may release of
// d features: d - 2 (none below 3 features). The top d - 1 eigenpairs of a
// covariance and its row count leave one unknown, the last eigenvalue, on
// a direction they determine; the top d are the covariance. Owners cap it
// lower (owner serve --exact-components-max-k, d/2 by default).
func MaxExactK(d int) int { return max(d-2, 0) }

// Components reports whether the job releases the components only.
func (s *Spec) Components() bool { return s.Release == ReleaseComponents }

// BindsC0 reports a job whose members check the sum's c0 too: an exact
// components job, whose sum must be exactly the named owners' uploads, so
// that a c0 shifted by a known matrix cannot make its top k components
// tell more than the owners consented to (docs/PROTOCOL.md 5.2). Other
// jobs' c0 carries the proxy's noise share (and a statistics job's its
// mask); a shift there is the user's own loss: an exact statistics release
// gives the sum anyway, and a DP release shifted by a matrix its user
// chose independently of the data is post-processing of the noised sum.
func (s *Spec) BindsC0() bool { return s.Components() && s.NoNoise }

// Canonical returns the bytes the job ID is the hash of: the JSON encoding
// with the struct's field order (encoding/json is deterministic for a struct
// of this shape; floats use the shortest representation).
func (s *Spec) Canonical() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("job spec: marshal: %v", err))
	}
	return b
}

// ID returns the job ID, the hex SHA-256 of the canonical spec.
func (s *Spec) ID() string {
	h := sha256.Sum256(s.Canonical())
	return hex.EncodeToString(h[:])
}

// Fingerprint returns the hex SHA-256 of a key's bytes.
func Fingerprint(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

var (
	hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)
	ident   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// ValidID reports whether s is usable as an owner or dataset ID.
func ValidID(s string) bool { return ident.MatchString(s) }

// ValidJobID reports whether s has the form of a job ID (the hex SHA-256 of
// a spec). Job IDs received from another party are checked with it before
// use.
func ValidJobID(s string) bool { return hexHash.MatchString(s) }

// SetOwners commits the spec to an owner list (CheckOwnerList): its number
// and Merkle root.
func (s *Spec) SetOwners(owners []Owner) error {
	t, err := NewOwnerTree(owners)
	if err != nil {
		return fmt.Errorf("job spec: %w", err)
	}
	s.NumOwners, s.OwnersRoot = len(owners), t.Root()
	return nil
}

// CheckOwners checks an owner list received for the job (by the proxy from
// the user, by a committee member or the user from the proxy): a valid list
// of NumOwners owners whose root is OwnersRoot.
func (s *Spec) CheckOwners(owners []Owner) error {
	if len(owners) != s.NumOwners {
		return fmt.Errorf("owners: %d owners, the spec commits to %d", len(owners), s.NumOwners)
	}
	t, err := NewOwnerTree(owners)
	if err != nil {
		return err
	}
	if t.Root() != s.OwnersRoot {
		return fmt.Errorf("owners: the list's root %s… is not the spec's owners_root %s…", t.Root()[:12], s.OwnersRoot[:12])
	}
	return nil
}

// CheckMember checks an owner's inclusion proof against the spec's owners
// root: what an owner checks to know that the job names it, with its key.
func (s *Spec) CheckMember(owner Owner, p OwnerProof) error {
	return VerifyOwnerProof(s.OwnersRoot, s.NumOwners, owner, p)
}

// CheckIncluded checks the owners said to be included in a job's sum (by the
// proxy, to a committee member or to the user) against the job's owner list,
// itself checked against the spec (CheckOwners): at least min_owners of
// them, each one of the job's owners, none twice.
func (s *Spec) CheckIncluded(owners []Owner, included []string) error {
	if err := s.CheckOwners(owners); err != nil {
		return err
	}
	if len(included) < s.MinOwners || len(included) > s.NumOwners {
		return fmt.Errorf("owners: %d included, the spec needs %d to %d", len(included), s.MinOwners, s.NumOwners)
	}
	seen := make(map[string]bool, len(included))
	for _, o := range included {
		if seen[o] {
			return fmt.Errorf("owners: %q is included twice", o)
		}
		if _, found := slices.BinarySearchFunc(owners, o, func(x Owner, id string) int { return strings.Compare(x.ID, id) }); !found {
			return fmt.Errorf("owners: %q is not one of the spec's owners", o)
		}
		seen[o] = true
	}
	return nil
}

// CheckNoiseParties checks what the proxy tells the user about a result: the
// job's owners and those included (CheckIncluded) and the committee members that switched it
// (exactly the spec's threshold of them, valid and distinct IDs). The
// privacy accounting of the release is computed from these names.
func (s *Spec) CheckNoiseParties(owners []Owner, included, csps []string) error {
	if err := s.CheckIncluded(owners, included); err != nil {
		return err
	}
	if len(csps) != s.CommitteeThreshold {
		return fmt.Errorf("csp members: %d switched the result, the spec's committee needs %d", len(csps), s.CommitteeThreshold)
	}
	if err := distinctNames(csps, ValidID); err != nil {
		return fmt.Errorf("csp members: %w", err)
	}
	return nil
}

// Validate checks the spec on its own (Check adds the checks against the
// schema and parameters). Errors name the field.
// ErrSpecVersion marks a spec of another format version (a job made by
// another release).
var ErrSpecVersion = errors.New("a spec of another release")

func (s *Spec) Validate() error {
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("job spec: %s: %s", field, fmt.Sprintf(format, args...))
	}
	if s.Version != Version {
		return fmt.Errorf("job spec: version: %d, want %d: %w", s.Version, Version, ErrSpecVersion)
	}
	if !ValidID(s.Dataset) {
		return bad("dataset", "%q is not a valid id", s.Dataset)
	}
	if !hexHash.MatchString(s.SchemaHash) {
		return bad("schema_hash", "want 64 lower-case hex digits")
	}
	if !slices.Contains(Analyses, s.Analysis) {
		return bad("analysis", "%q, want one of %s", s.Analysis, strings.Join(Analyses, ", "))
	}
	if (s.Analysis == NormsJob) != (len(s.NormEdges) > 0) {
		return bad("norm_edges", "a norms job, and only a norms job, has bucket edges")
	}
	if s.Standardize && s.Analysis != PCA {
		return bad("standardize", "only for pca, not %s", s.Analysis)
	}
	if (s.Analysis == MarginalsJob) != (s.Buckets != 0) || (len(s.Windows) > 0 && s.Analysis != MarginalsJob) {
		return bad("buckets", "a marginals job, and only a marginals job, has buckets and windows")
	}
	if s.Analysis == MarginalsJob && (s.Buckets < 2 || s.Buckets > MaxBuckets) {
		return bad("buckets", "%d, want 2 to %d", s.Buckets, MaxBuckets)
	}
	for i, w := range s.Windows {
		if w.Lo.Rat().Cmp(w.Hi.Rat()) >= 0 {
			return bad("windows", "window %d [%s, %s] is empty", i, w.Lo, w.Hi)
		}
	}
	if s.ClampBox && s.Analysis != MomentsJob {
		return bad("clamp_box", "only for a moments job, not %s", s.Analysis)
	}
	if len(s.NormEdges) > MaxNormEdges {
		return bad("norm_edges", "%d edges exceed %d", len(s.NormEdges), MaxNormEdges)
	}
	for i, e := range s.NormEdges {
		if e.Sign() <= 0 || (i > 0 && e.Rat().Cmp(s.NormEdges[i-1].Rat()) <= 0) {
			return bad("norm_edges", "edge %d (%s) must be positive and above the one before", i, e)
		}
	}
	if s.K < 0 {
		return bad("k", "%d must not be negative", s.K)
	}
	if s.NoNoise {
		if s.Epsilon != 0 {
			return bad("epsilon", "must be 0 with no_noise")
		}
	} else {
		if !(s.Epsilon > 0) || math.IsInf(s.Epsilon, 0) || s.Epsilon > 100 {
			return bad("epsilon", "%v must be in (0, 100]", s.Epsilon)
		}
		if !(s.Delta > 0 && s.Delta < 1) {
			return bad("delta", "%v must be in (0, 1)", s.Delta)
		}
		if err := s.Split.Validate(); err != nil {
			return bad("split", "%v", err)
		}
	}
	if s.NumOwners < 1 || s.NumOwners > MaxOwners {
		return bad("num_owners", "%d owners, want 1 to %d", s.NumOwners, MaxOwners)
	}
	if !hexHash.MatchString(s.OwnersRoot) {
		return bad("owners_root", "want 64 lower-case hex digits")
	}
	if s.MinOwners < 1 || s.MinOwners > s.NumOwners {
		return bad("min_owners", "%d must be between 1 and %d", s.MinOwners, s.NumOwners)
	}
	if s.Deadline.IsZero() {
		return bad("deadline", "missing")
	}
	if s.MaxOwnerRows < 1 {
		return bad("max_owner_rows", "%d must be positive", s.MaxOwnerRows)
	}
	if total, ok := TotalRows(s.NumOwners, s.MaxOwnerRows); !ok || s.MaxRows != total {
		return bad("max_rows", "%d must be the %d owners times max_owner_rows %d", s.MaxRows, s.NumOwners, s.MaxOwnerRows)
	}
	if s.HEParams == "" || !hexHash.MatchString(s.HEParamsHash) {
		return bad("he_params", "missing parameter set or fingerprint")
	}
	c := he.Committee{N: s.CommitteeN, Threshold: s.CommitteeThreshold}
	if err := c.Validate(); err != nil {
		return bad("committee", "%v", err)
	}
	if !hexHash.MatchString(s.CommitteeKey) {
		return bad("committee_key", "want a 64-hex-digit fingerprint")
	}
	if s.User == "" {
		return bad("user", "missing")
	}
	if !hexHash.MatchString(s.UserKey) {
		return bad("user_key", "want a 64-hex-digit fingerprint")
	}
	if s.Nonce == "" || len(s.Nonce) > 128 {
		return bad("nonce", "want 1 to 128 characters")
	}
	if !s.NoNoise {
		if err := s.Plan().Validate(); err != nil {
			return bad("noise_plan", "%v", err)
		}
	}
	switch s.Release {
	case ReleaseStatistics:
		if s.ResultKey != "" {
			return bad("result_key", "only for a components release")
		}
		if s.Randomness != "" {
			return bad("randomness", "only for a components release")
		}
	case ReleaseComponents:
		switch s.Randomness {
		case RandomnessMembers:
			if s.CommitteeN < ReplicatedParties || s.CommitteeThreshold > ReplicatedParties {
				return bad("randomness", "the members' own randomness needs three members computing, so a committee of at least 3 with a threshold of at most 3 (this one is %d-of-%d): use %q", s.CommitteeThreshold, s.CommitteeN, RandomnessDealer)
			}
		case RandomnessDealer:
		default:
			return bad("randomness", "%q, want %q (three members compute and make their randomness themselves) or %q (the proxy deals it: the proxy with one member learns the statistics)", s.Randomness, RandomnessMembers, RandomnessDealer)
		}
		if s.Analysis != PCA && s.Analysis != DCA && s.Analysis != LDA {
			return bad("release", "components of %s: pca, dca and lda only", s.Analysis)
		}
		if s.K < 1 {
			return bad("k", "a components release needs k >= 1")
		}
		if s.Standardize {
			return bad("standardize", "not with a components release")
		}
		if !hexHash.MatchString(s.ResultKey) {
			return bad("result_key", "want the 64-hex-digit X25519 public key")
		}
	default:
		return bad("release", "%q, want none (the statistics) or %q", s.Release, ReleaseComponents)
	}
	return nil
}

// Plan returns the noise plan: the planned owners are the spec's owners and
// the CSP noise parties are the Threshold members that take part in the
// switch.
func (s *Spec) Plan() dp.Plan {
	return dp.Plan{Kind: s.NoisePlan, Tolerate: s.Tolerate, Owners: s.NumOwners, CSPs: s.CommitteeThreshold}
}

// Committee returns the committee shape.
func (s *Spec) Committee() he.Committee {
	return he.Committee{N: s.CommitteeN, Threshold: s.CommitteeThreshold}
}

// UsesClasses reports whether the analysis needs per-class statistics.
func (s *Spec) UsesClasses() bool {
	return s.Analysis == DCA || s.Analysis == LDA || s.Analysis == Scatter
}

// Layout returns the packing layout for the schema.
func (s *Spec) Layout(sch *schema.Schema) (stats.Layout, error) {
	switch s.Analysis {
	case MomentsJob:
		return stats.NewLayoutOf(stats.Moments, sch.D(), 1)
	case NormsJob:
		return stats.NewLayoutOf(stats.Histogram, sch.D(), len(s.NormEdges)+1)
	case MarginalsJob:
		if len(s.Windows) != 0 && len(s.Windows) != sch.D() {
			return stats.Layout{}, fmt.Errorf("%d windows for %d features", len(s.Windows), sch.D())
		}
		return stats.NewLayoutOf(stats.Marginals, sch.D(), s.Buckets)
	}
	if sch.D() > MaxScatterFeatures {
		return stats.Layout{}, fmt.Errorf("schema %s has %d features; the d x d statistics take at most %d (d(d+1)/2 values each owner encrypts and proves): the power-method job (--method power) takes up to %d", sch.ID, sch.D(), MaxScatterFeatures, schema.MaxFeatures)
	}
	k := 1
	if s.UsesClasses() && len(sch.Classes) > 0 {
		k = len(sch.Classes)
	}
	return stats.NewLayout(sch.D(), k)
}

// Calibration returns the central noise of the job for the schema, and in
// its Cost what the job charges every owner's ledger.
func (s *Spec) Calibration(sch *schema.Schema) (dp.Calibration, error) {
	if s.NoNoise {
		return dp.NoNoise(sch.Bound(), sch.Bits), nil
	}
	l, err := s.Layout(sch)
	if err != nil {
		return dp.Calibration{}, err
	}
	sb, err := s.Plan().ShareBound(s.MinOwners)
	if err != nil {
		return dp.Calibration{}, err
	}
	return dp.CalibrateShares(s.Epsilon, s.Delta, s.Split, l, sch.Bound(), sch.Bits, sb)
}

// Check validates the spec against the schema the owners serve and the HE
// parameters, including the overflow bound of PROTOCOL.md section 4: every
// entry of the final sum, noise included, must stay inside the plaintext
// range. The proxy runs it at job creation; owners and CSP members run it
// before taking part.
func (s *Spec) Check(sch *schema.Schema, p he.Params) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if sch.ID != s.Dataset {
		return fmt.Errorf("job spec: dataset %q but the schema is %q", s.Dataset, sch.ID)
	}
	if sch.HashHex() != s.SchemaHash {
		return fmt.Errorf("job spec: schema_hash %s… differs from schema %s's hash %s…", s.SchemaHash[:12], sch.ID, sch.HashHex()[:12])
	}
	if s.UsesClasses() && len(sch.Classes) < 2 && s.Analysis != Scatter {
		return fmt.Errorf("job spec: analysis %s needs a schema with at least 2 classes; %s has %d", s.Analysis, sch.ID, len(sch.Classes))
	}
	if (s.Analysis == MomentsJob && !s.ClampBox) || s.Analysis == MarginalsJob {
		// The diagonal's sensitivity assumes every value in [-1, 1]: a row
		// outside would be refused, and the owner's outcome would depend on
		// its rows. The marginals count each value as clamped to its
		// declared bounds: no row may be clipped.
		if err := sch.InBox(); err != nil {
			return fmt.Errorf("job spec: a %s job %w", s.Analysis, err)
		}
	}
	if s.HEParams != p.ID() || s.HEParamsHash != p.Fingerprint() {
		return fmt.Errorf("job spec: he_params %s (%s…) is not this node's parameter set %s (%s…)", s.HEParams, s.HEParamsHash[:12], p.ID(), p.Fingerprint()[:12])
	}
	if s.Power != nil {
		return s.checkPower(sch, p)
	}
	if _, err := s.Layout(sch); err != nil {
		return fmt.Errorf("job spec: %w", err)
	}
	if s.Components() && s.K > sch.D() {
		return fmt.Errorf("job spec: k: %d components of %d features", s.K, sch.D())
	}
	if s.Components() && (s.Analysis == DCA || s.Analysis == LDA) && s.K > len(sch.Classes)-1 {
		return fmt.Errorf("job spec: k: %d %s components of %d classes: at most %d", s.K, s.Analysis, len(sch.Classes), len(sch.Classes)-1)
	}
	if s.Components() && s.NoNoise && s.K > MaxExactK(sch.D()) {
		return fmt.Errorf("job spec: k: %d exact components of %d features: the top d - 1 eigenpairs and n give the whole exact covariance but one eigenvalue "+
			"(on a direction they determine), so a components job without DP noise releases at most d - 2 = %d; ask for fewer, or add noise", s.K, sch.D(), MaxExactK(sch.D()))
	}
	if s.Components() {
		// The members' program must run: a DP DCA's whitening bounds hold
		// up to 512 features.
		if _, err := s.Program(sch, s.NumOwners); err != nil {
			return fmt.Errorf("job spec: %w", err)
		}
	}
	cal, err := s.Calibration(sch)
	if err != nil {
		return fmt.Errorf("job spec: %w", err)
	}
	return s.checkOverflow(sch, cal, p)
}

// TotalRows returns owners * perOwner, and false if it overflows int64.
func TotalRows(owners int, perOwner int64) (int64, bool) {
	if owners < 0 || perOwner < 0 {
		return 0, false
	}
	if owners > 0 && perOwner > math.MaxInt64/int64(owners) {
		return 0, false
	}
	return int64(owners) * perOwner, true
}

// checkOverflow verifies max_rows * (per-row bound) + 12 sigma_total <
// (T-3)/2 for each block, where sigma_total is the largest total noise any
// seal can produce (over every number of uploaded owners from min_owners
// up). max_rows bounds the total because every owner uses at most
// max_owner_rows rows and at most len(owners) owners are in the sum. A
// components job has the same range: the members' conversion from shares
// mod T is exact over all of it (mpc.FromModT).
func (s *Spec) checkOverflow(sch *schema.Schema, cal dp.Calibration, p he.Params) error {
	room, perRow := s.overflowRoom(sch, cal, p)
	bound := p.MaxAbs()
	for _, blk := range stats.Blocks {
		total := new(big.Int).Mul(big.NewInt(s.MaxRows), perRow[blk])
		if total.Cmp(room[blk]) > 0 {
			return fmt.Errorf("job spec: max_rows %d (%d owners x max_owner_rows %d) may overflow the plaintext range (T-3)/2 in block %s: max_rows x %s + 12 sigma exceeds %d; lower max_owner_rows (at most %d here), quant_bits or the noise",
				s.MaxRows, s.NumOwners, s.MaxOwnerRows, blk, perRow[blk], bound, s.largestOwnerRows(room, perRow))
		}
	}
	return nil
}

// overflowRoom returns, for each block, how much of the plaintext range is
// left for the rows' values once the largest total noise of any seal (12
// sigma) is set aside, and the per-row bound of each block.
func (s *Spec) overflowRoom(sch *schema.Schema, cal dp.Calibration, p he.Params) (room, perRow [3]*big.Int) {
	b := big.NewInt(sch.Bound())
	perRow = [3]*big.Int{new(big.Int).Mul(b, b), b, new(big.Int).Lsh(big.NewInt(1), sch.Bits)}
	maxWeight := new(big.Rat)
	if !cal.NoiseOff() {
		maxWeight = s.Plan().MaxTotalWeight(s.MinOwners)
	}
	bound := p.MaxAbs()
	for _, blk := range stats.Blocks {
		// Strictly below the bound: room = bound - 1 - tail.
		r := new(big.Int).SetInt64(bound - 1)
		if !cal.NoiseOff() {
			v := new(big.Rat).Mul(maxWeight, new(big.Rat).SetInt(cal.Variance[blk]))
			sd := new(big.Float).SetPrec(128).SetRat(v)
			sd.Sqrt(sd)
			sd.Mul(sd, big.NewFloat(12))
			tail, _ := sd.Int(nil)
			r.Sub(r, tail.Add(tail, big.NewInt(1)))
		}
		room[blk] = r
	}
	return room, perRow
}

// largestOwnerRows is the largest max_owner_rows that fits the room.
func (s *Spec) largestOwnerRows(room, perRow [3]*big.Int) int64 {
	best := int64(math.MaxInt64)
	for _, blk := range stats.Blocks {
		if room[blk].Sign() <= 0 {
			return 0
		}
		n := new(big.Int).Quo(room[blk], perRow[blk])
		n.Quo(n, big.NewInt(int64(s.NumOwners)))
		if n.IsInt64() && n.Int64() < best {
			best = n.Int64()
		}
	}
	return best
}

// LargestOwnerRows returns the largest per-owner row cap for which the spec
// (with its other fields as they are) passes the overflow check: a public
// function of the public parameters, which a user may take as the job's
// max_owner_rows. It is 0 when not even one row per owner fits.
func (s *Spec) LargestOwnerRows(sch *schema.Schema, p he.Params) (int64, error) {
	if s.NumOwners == 0 {
		return 0, fmt.Errorf("job spec: no owners")
	}
	cal, err := s.Calibration(sch)
	if err != nil {
		return 0, fmt.Errorf("job spec: %w", err)
	}
	room, perRow := s.overflowRoom(sch, cal, p)
	return s.largestOwnerRows(room, perRow), nil
}

// SetOwnerRows sets max_owner_rows and the total max_rows it implies.
func (s *Spec) SetOwnerRows(perOwner int64) error {
	total, ok := TotalRows(s.NumOwners, perOwner)
	if !ok {
		return fmt.Errorf("job spec: %d owners x max_owner_rows %d overflows", s.NumOwners, perOwner)
	}
	s.MaxOwnerRows, s.MaxRows = perOwner, total
	return nil
}

// ParseSpec decodes a spec strictly: unknown fields are errors and the bytes
// must be the canonical encoding (so that the job ID and the user's
// signature cover exactly what every party parsed). It then validates the
// spec.
func ParseSpec(b []byte) (*Spec, error) {
	if len(b) > MaxSpecBytes {
		return nil, fmt.Errorf("job spec: %d bytes exceed %d", len(b), MaxSpecBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("job spec: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("job spec: trailing data after the JSON object")
	}
	if !bytes.Equal(s.Canonical(), b) {
		return nil, fmt.Errorf("job spec: not in canonical form (re-encode it with the spec's Canonical method)")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// MaxSpecBytes bounds an encoded spec (its norm edges dominate; the owners
// are not named).
const MaxSpecBytes = 64 << 10
