package job

import (
	"bytes"
	"crypto"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// PowerSpec is the part of a parent spec that makes it a power-method job
// (docs/PROTOCOL.md section 13, package power): with the spec's K, the
// budget, the owners, the committee and the user, it fixes every public
// parameter of all the rounds. The parent's ID is what every owner's
// ledger charges, once, the composed cost of all the rounds.
type PowerSpec struct {
	// Oversample columns beyond K (p = K + Oversample); Rounds is T, the
	// power rounds after round 0.
	Oversample int `json:"oversample"`
	Rounds     int `json:"rounds"`
	// Seed (text) draws Q_1 (power.Start) unless Start names, by the hex
	// SHA-256 of its integers (power.QMatrix.Hash), a public matrix round
	// 1 uses instead (power.StartFrom, quantised).
	Seed  string `json:"seed"`
	Start string `json:"start,omitempty"`
	// QBits is h, the public matrices' fractional bits.
	QBits uint `json:"q_bits"`
	// RoundSeconds is each round's upload window: round t's deadline is
	// the spec's deadline (round 0's) plus t RoundSeconds (RoundDeadline),
	// so that every party reads every round's deadline from the signed
	// parent, and a round whose owners drop out closes on its own
	// schedule, not the whole job's.
	RoundSeconds int `json:"round_seconds"`
}

// MaxRoundSeconds bounds a power job's round window.
const MaxRoundSeconds = 7 * 24 * 3600

// RoundDeadline is round r's deadline: the spec's, plus r round windows
// for a power job's round r >= 1.
func (s *Spec) RoundDeadline(r int) time.Time {
	if s.Power == nil || r <= 0 {
		return s.Deadline
	}
	return s.Deadline.Add(time.Duration(r) * time.Duration(s.Power.RoundSeconds) * time.Second)
}

// PowerParams returns the power job's parameters under the schema.
func (s *Spec) PowerParams(sch *schema.Schema) (power.Params, error) {
	if s.Power == nil {
		return power.Params{}, fmt.Errorf("job spec: not a power-method job")
	}
	pr := power.Params{D: sch.D(), K: s.K, P: s.K + s.Power.Oversample, Rounds: s.Power.Rounds, Seed: []byte(s.Power.Seed),
		Bits: sch.Bits, Bound: sch.Bound(), QBits: s.Power.QBits, MaxRows: s.MaxRows}
	if err := pr.Validate(); err != nil {
		return power.Params{}, fmt.Errorf("job spec: %w", err)
	}
	return pr, nil
}

// PowerCalibration returns the noise of all the rounds and the job's
// composed cost (power.Calibrate with the plan's share bound).
func (s *Spec) PowerCalibration(sch *schema.Schema) (power.Calibration, error) {
	pr, err := s.PowerParams(sch)
	if err != nil {
		return power.Calibration{}, err
	}
	if s.NoNoise {
		return power.NoNoise(pr), nil
	}
	sb, err := s.Plan().ShareBound(s.MinOwners)
	if err != nil {
		return power.Calibration{}, err
	}
	cal, err := power.Calibrate(pr, s.Epsilon, s.Delta, s.Split, sb)
	if err != nil {
		return power.Calibration{}, fmt.Errorf("job spec: %w", err)
	}
	return cal, nil
}

// checkPower is Check for a parent spec: PCA of the statistics kind only
// (the rounds release no scatter: no standardize, no components release),
// parameters that fit, a calibration within the budget and every round's
// sum, noise included, inside the plaintext range.
func (s *Spec) checkPower(sch *schema.Schema, p he.Params) error {
	switch {
	case s.Analysis != PCA:
		return fmt.Errorf("job spec: power: analysis %s: the power method computes PCA only", s.Analysis)
	case s.Components() || s.Standardize:
		return fmt.Errorf("job spec: power: release %q, standardize %v: a power-method job releases its rounds only", s.Release, s.Standardize)
	case s.Power.Start != "" && !hexHash.MatchString(s.Power.Start):
		return fmt.Errorf("job spec: power: start: want 64 lower-case hex digits")
	case s.Power.RoundSeconds < 1 || s.Power.RoundSeconds > MaxRoundSeconds:
		return fmt.Errorf("job spec: power: round_seconds %d outside [1, %d]", s.Power.RoundSeconds, MaxRoundSeconds)
	}
	cal, err := s.PowerCalibration(sch)
	if err != nil {
		return err
	}
	w := new(big.Rat)
	if !cal.NoiseOff() {
		w = s.Plan().MaxTotalWeight(s.MinOwners)
	}
	if err := cal.CheckRange(big.NewInt(p.MaxAbs()), w); err != nil {
		return fmt.Errorf("job spec: max_rows %d: %w", s.MaxRows, err)
	}
	return nil
}

// RoundLen is the number of values a job sums in its round r: the packed
// statistics (Layout) of any job but a power job, whose round 0 sums [v |
// n] (d + 1 values) and whose round r >= 1 sums the d x p matrix Y_r.
func (s *Spec) RoundLen(sch *schema.Schema, r int) (int, error) {
	if s.Power == nil {
		if r != 0 {
			return 0, fmt.Errorf("job spec: round %d of a job that has one", r)
		}
		l, err := s.Layout(sch)
		return l.Len(), err
	}
	pr, err := s.PowerParams(sch)
	if err != nil {
		return 0, err
	}
	switch {
	case r < 0 || r > pr.Rounds:
		return 0, fmt.Errorf("job spec: round %d outside [0, %d]", r, pr.Rounds)
	case r == 0:
		return pr.Round0Len(), nil
	}
	return pr.Len(), nil
}

// noiseShare draws a share of weight w of round r's central noise: the
// statistics' noise vector (dp.Calibration.NoiseVector) for any job but a
// power job, whose rounds draw theirs from its composed calibration
// (power.Calibration.Noise). All zeros without noise.
func noiseShare(s *Spec, sch *schema.Schema, r int, w *big.Rat, rnd io.Reader) ([]int64, error) {
	if s.Power != nil {
		cal, err := s.PowerCalibration(sch)
		if err != nil {
			return nil, err
		}
		return cal.Noise(r, w, rnd)
	}
	if r != 0 {
		return nil, fmt.Errorf("job spec: round %d of a job that has one", r)
	}
	l, err := s.Layout(sch)
	if err != nil {
		return nil, err
	}
	cal, err := s.Calibration(sch)
	if err != nil {
		return nil, err
	}
	if cal.NoiseOff() || w.Sign() == 0 {
		return make([]int64, l.Len()), nil
	}
	return cal.NoiseVector(l, w, rnd, 0)
}

// RoundNoise is ServerNoise for round r of a job (0 for any job but a
// power job's later rounds).
func RoundNoise(s *Spec, sch *schema.Schema, role dp.Role, r, uploaded int, rnd io.Reader) ([]int64, error) {
	w := new(big.Rat)
	if !s.NoNoise {
		var err error
		if w, err = s.Plan().Weight(role, uploaded); err != nil {
			return nil, err
		}
	}
	return noiseShare(s, sch, r, w, rnd)
}

// EncryptValues adds the owner's noise share of round r (in the owners and
// all plans; drawn from rnd, crypto/rand when nil) to an owner's statistic
// of that round, packed (vals, changed in place), and encrypts it under the
// committee key, returning the witness of each ciphertext for its proof.
func EncryptValues(s *Spec, sch *schema.Schema, enc *he.Encryptor, r int, vals []int64, rnd io.Reader) ([]*rlwe.Ciphertext, []zk.Witness, error) {
	n, err := s.RoundLen(sch, r)
	if err != nil {
		return nil, nil, err
	}
	if len(vals) != n {
		return nil, nil, fmt.Errorf("round %d: %d values, the job's round sums %d", r, len(vals), n)
	}
	if !s.NoNoise {
		noise, err := noiseShare(s, sch, r, s.Plan().OwnerWeight(), rnd)
		if err != nil {
			return nil, nil, err
		}
		if err := addChecked(vals, noise); err != nil {
			return nil, nil, fmt.Errorf("owner noise: %w", err)
		}
	}
	return enc.EncryptWitnessed(vals)
}

// ParseRoundSpec decodes a round spec strictly, as ParseSpec does a spec:
// no unknown field, the canonical encoding, a parent ID and a matrix hash
// of 64 hex digits and a round >= 1.
func ParseRoundSpec(b []byte) (RoundSpec, error) {
	var r RoundSpec
	if len(b) > 1024 {
		return r, fmt.Errorf("round spec: %d bytes", len(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("round spec: %w", err)
	}
	if dec.More() || !bytes.Equal(r.Canonical(), b) {
		return r, fmt.Errorf("round spec: not in canonical form")
	}
	switch {
	case !hexHash.MatchString(r.Parent):
		return r, fmt.Errorf("round spec: parent: want 64 lower-case hex digits")
	case !hexHash.MatchString(r.QHash):
		return r, fmt.Errorf("round spec: q_hash: want 64 lower-case hex digits")
	case r.Round < 1 || r.Round > power.MaxRounds:
		return r, fmt.Errorf("round spec: round %d outside [1, %d]", r.Round, power.MaxRounds)
	}
	return r, nil
}

// RoundSpec admits round Round >= 1 of a power-method job: it names the
// parent spec's ID and the hex SHA-256 of the round's public matrix
// (power.QMatrix.Hash). The user signs its ID; the owners' proofs and
// upload statements are bound to its ID (the round's job ID in
// ProofBinding), which is power.RoundID of the same three. Round 0 is the
// parent job itself, known by the parent's ID.
type RoundSpec struct {
	Parent string `json:"parent"`
	Round  int    `json:"round"`
	QHash  string `json:"q_hash"`
}

// roundSignContext separates round signatures from every other signature.
const roundSignContext = "power-round-v1"

// NewRoundSpec returns the spec of round r >= 1 of parent under q.
func NewRoundSpec(parent *Spec, r int, q *power.QMatrix) RoundSpec {
	h := q.Hash()
	return RoundSpec{Parent: parent.ID(), Round: r, QHash: hex.EncodeToString(h[:])}
}

// ID is the round's job ID: power.RoundID(parent, round, q), computed from
// the hash the spec names.
func (r RoundSpec) ID() string {
	q, _ := hex.DecodeString(r.QHash)
	return power.RoundIDFromHash(r.Parent, r.Round, q)
}

// JobID is the job ID of the parent's job (round.Round 0: the parent
// itself, its round 0) or of its round round.Round >= 1 (round.ID()).
func JobID(parent *Spec, round RoundSpec) string {
	if round.Round == 0 {
		return parent.ID()
	}
	return round.ID()
}

// Canonical is the round spec's JSON encoding (field order fixed).
func (r RoundSpec) Canonical() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("round spec: marshal: %v", err))
	}
	return b
}

// Sign signs the round's ID with the user's certificate key.
func (r RoundSpec) Sign(signer crypto.Signer) ([]byte, error) {
	return seal.Sign(signer, roundSignContext, []byte(r.ID()))
}

// Check verifies that the round belongs to this parent, a power-method
// job, and is one of its rounds 1..T.
func (r RoundSpec) Check(parent *Spec) error {
	if parent.Power == nil {
		return fmt.Errorf("round %d: job %s… is not a power-method job", r.Round, parent.ID()[:12])
	}
	if r.Parent != parent.ID() {
		return fmt.Errorf("round %d: names parent %.12s…, not job %s…", r.Round, r.Parent, parent.ID()[:12])
	}
	if r.Round < 1 || r.Round > parent.Power.Rounds {
		return fmt.Errorf("round %d of job %s…: the job has rounds 1 to %d after round 0", r.Round, parent.ID()[:12], parent.Power.Rounds)
	}
	if !hexHash.MatchString(r.QHash) {
		return fmt.Errorf("round %d of job %s…: q_hash: want 64 lower-case hex digits", r.Round, parent.ID()[:12])
	}
	return nil
}

// Verify is Check and the user's signature of the round, with the key of
// the parent's user certificate: what a committee member checks before it
// switches a round (it needs not the matrix: the owners checked it, and
// signed their uploads for the round ID, which names its hash).
func (r RoundSpec) Verify(parent *Spec, sig []byte, pub crypto.PublicKey) error {
	if err := r.Check(parent); err != nil {
		return err
	}
	if err := seal.Verify(pub, roundSignContext, []byte(r.ID()), sig); err != nil {
		return fmt.Errorf("round %d of job %s…: user signature: %w", r.Round, parent.ID()[:12], err)
	}
	return nil
}

// CheckMatrix is what an owner checks of a round it verified (Verify)
// before it computes: that the round comes after the last round it took
// part in (after; 0 after round 0): a party may miss rounds, but never
// answers one twice or goes back, so that its rows are in at most one
// release of each round; that the matrix it is handed is the one the round
// names, round 1's the public start the parent names (if it names one);
// and that it passes power.CheckQ for the parent's parameters.
func (r RoundSpec) CheckMatrix(parent *Spec, sch *schema.Schema, after int, q *power.QMatrix) error {
	if err := r.Check(parent); err != nil {
		return err
	}
	if r.Round <= after {
		return fmt.Errorf("round %d of job %s…: not after round %d, which this party took part in", r.Round, parent.ID()[:12], after)
	}
	if r.Round == 1 && parent.Power.Start != "" && r.QHash != parent.Power.Start {
		return fmt.Errorf("round 1 of job %s…: its matrix is not the public start the job names (%.12s…)", parent.ID()[:12], parent.Power.Start)
	}
	if q == nil {
		return fmt.Errorf("round %d of job %s…: no public matrix", r.Round, parent.ID()[:12])
	}
	h := q.Hash()
	if hex.EncodeToString(h[:]) != r.QHash {
		return fmt.Errorf("round %d of job %s…: the public matrix's hash is not the one the round names", r.Round, parent.ID()[:12])
	}
	pr, err := parent.PowerParams(sch)
	if err != nil {
		return err
	}
	return power.CheckQ(q, pr.D, pr.P, pr.QBits)
}

// Admit is Verify and CheckMatrix: everything a party checks before it
// takes part in a round.
func (r RoundSpec) Admit(parent *Spec, sch *schema.Schema, sig []byte, pub crypto.PublicKey, after int, q *power.QMatrix) error {
	if err := r.Verify(parent, sig, pub); err != nil {
		return err
	}
	return r.CheckMatrix(parent, sch, after, q)
}

// ReleasePower is a power-method job's result's "released": like a
// components release's, the top k components and their covariance
// eigenvalues (TopComponents), computed by the user from the rounds'
// releases, with "power" saying how.
const ReleasePower = "power"

// PowerDoc is what a power-method job's result says of its computation
// (the result's "power"): the public parameters, how the components were
// taken from the last release ("svd" or "ritz": ritz when the job starts
// from a public matrix), the centring factor the user applied (round 0's
// pretest, power.Mean.Shrink) and, per round, its job ID, matrix hash and
// noise parties.
type PowerDoc struct {
	P      int          `json:"p"`
	Rounds int          `json:"rounds"`
	Seed   string       `json:"seed"`
	Start  string       `json:"start,omitempty"`
	QBits  uint         `json:"q_bits"`
	Finish string       `json:"finish"`
	Shrink float64      `json:"centring_shrink"`
	Each   []PowerRound `json:"each_round"`
}

// PowerRound is one round of a power-method job's result.
type PowerRound struct {
	Round  int      `json:"round"`
	JobID  string   `json:"job_id"`
	QHash  string   `json:"q_hash,omitempty"`
	Owners []string `json:"owners"`
	CSPs   []string `json:"csp_members"`
}

// PowerPrivacy is the privacy accounting of a whole power-method job: its
// composed cost (power.Calibration.Cost, all T + 1 rounds: what every
// owner's ledger charged once), the epsilon it certifies at the job's
// delta, mu and the replacement factor, and the central noise per entry in
// data units (r: a round's Y; v, n: round 0's).
func PowerPrivacy(s *Spec, sch *schema.Schema) (Privacy, error) {
	pr := Privacy{NoNoise: s.NoNoise, Plan: s.NoisePlan, Tolerate: s.Tolerate, Split: s.Split, Delta: s.Delta}
	cal, err := s.PowerCalibration(sch)
	if err != nil {
		return pr, err
	}
	cost := cal.Cost
	pr.Cost = &cost
	if cal.NoiseOff() {
		inf := dp.Float(math.Inf(1))
		pr.Epsilon, pr.Rho = inf, inf
		return pr, nil
	}
	pr.Neighbours, pr.SensitivityFactor, pr.Mu = dp.Neighbours, cal.Factor, dp.Float(cal.Mu)
	pr.Epsilon, pr.Rho = dp.Float(cost.Epsilon(s.Delta)), cost.Rho
	vn, _ := new(big.Rat).SetInt(cal.VarN).Float64()
	pr.Sigma = blockValues([3]float64{cal.SigmaY(), cal.SigmaV(), math.Sqrt(vn) / math.Ldexp(1, int(sch.Bits))})
	return pr, nil
}

// PowerResult assembles a power-method job's result document: the
// components (d x k) and their eigenvalue estimates (of the centred
// scatter, divided by the noisy n: the covariance's, as a components
// release's), n, the owners of the last round, the privacy accounting of
// the whole job and what each round was.
func PowerResult(s *Spec, sch *schema.Schema, comps power.Components, n float64, doc PowerDoc, pr Privacy, heParams string) (*Result, error) {
	if s.Power == nil {
		return nil, fmt.Errorf("power result: job %s… is not a power-method job", s.ID()[:12])
	}
	d, k := comps.W.Dims()
	if d != sch.D() || k != s.K || len(comps.Values) != k || len(doc.Each) != s.Power.Rounds+1 {
		return nil, fmt.Errorf("power result: %d x %d components, %d values and %d rounds for d = %d, k = %d and %d rounds", d, k, len(comps.Values), len(doc.Each), sch.D(), s.K, s.Power.Rounds+1)
	}
	top := &TopComponents{W: make([][]float64, d), Eigenvalues: make([]float64, k)}
	for i := range d {
		top.W[i] = mat.Row(nil, i, comps.W)
	}
	for j, v := range comps.Values {
		top.Eigenvalues[j] = v / math.Max(n, 1)
	}
	if err := top.Validate(d); err != nil {
		return nil, fmt.Errorf("power result: %w", err)
	}
	last := doc.Each[len(doc.Each)-1]
	h := HeaderOf(s, sch, heParams)
	return &Result{JobID: h.JobID, Dataset: h.Dataset, SchemaHash: h.SchemaHash, Analysis: s.Analysis, Features: h.Features,
		Owners: last.Owners, NumOwners: len(last.Owners), NoisyN: n, Privacy: pr, HEParams: heParams,
		Released: ReleasePower, Output: top, Power: &doc}, nil
}

// MatrixFrameWords is the most entries one frame of a round's public matrix
// carries on the wire (4 MiB of bytes).
const MatrixFrameWords = 1 << 19

// MatrixFrames cuts a public matrix's entries into frames of at most
// MatrixFrameWords, each entry 8 bytes little-endian.
func MatrixFrames(q *power.QMatrix) [][]byte {
	var out [][]byte
	for lo := 0; lo < len(q.Data); lo += MatrixFrameWords {
		words := q.Data[lo:min(lo+MatrixFrameWords, len(q.Data))]
		b := make([]byte, 0, 8*len(words))
		for _, x := range words {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		out = append(out, b)
	}
	return out
}

// ReadMatrix assembles the public matrix of a round of the parent's
// shape (d x p at 2^h) from its frames: next returns the next frame's
// bytes, and io.EOF after the last. It refuses a frame that is not whole
// entries, or larger than MatrixFrameWords, and entries short of or beyond
// d p; the caller checks the matrix (RoundSpec.CheckMatrix).
func ReadMatrix(parent *Spec, sch *schema.Schema, next func() ([]byte, error)) (*power.QMatrix, error) {
	pr, err := parent.PowerParams(sch)
	if err != nil {
		return nil, err
	}
	q := &power.QMatrix{D: pr.D, P: pr.P, H: pr.QBits, Data: make([]int64, 0, pr.Len())}
	for frame := 0; ; frame++ {
		b, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(b)%8 != 0 || len(b) > 8*MatrixFrameWords || len(b) == 0 {
			return nil, fmt.Errorf("public matrix: frame %d has %d bytes, want whole 8-byte entries, 1 to %d of them", frame, len(b), MatrixFrameWords)
		}
		if len(q.Data)+len(b)/8 > pr.Len() {
			return nil, fmt.Errorf("public matrix: more than the %d x %d = %d entries of the job's matrices", pr.D, pr.P, pr.Len())
		}
		for i := 0; i < len(b); i += 8 {
			q.Data = append(q.Data, int64(binary.LittleEndian.Uint64(b[i:])))
		}
	}
	if len(q.Data) != pr.Len() {
		return nil, fmt.Errorf("public matrix: %d entries, want %d x %d = %d", len(q.Data), pr.D, pr.P, pr.Len())
	}
	return q, nil
}
