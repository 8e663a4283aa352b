package job

import (
	"crypto"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/seal"
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

// RoundSpec admits round Round >= 1 of a power-method job: it names the
// parent spec's ID and the hex SHA-256 of the round's public matrix
// (power.QMatrix.Hash). The user signs its ID; the owners' proofs and
// upload statements are bound to its ID (the round's job ID in
// ProofBinding), which is power.RoundID of the same three.
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

// RoundZeroID is the job ID of a power job's round 0 (its [v | n]
// statistic): power.RoundID of the parent, 0 and no matrix.
func RoundZeroID(parent *Spec) string { return power.RoundID(parent.ID(), 0, nil) }

// ID is the round's job ID: power.RoundID(parent, round, q), computed from
// the hash the spec names.
func (r RoundSpec) ID() string {
	q, _ := hex.DecodeString(r.QHash)
	return power.RoundIDFromHash(r.Parent, r.Round, q)
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

// Admit is what every party checks before it takes part in a round: the
// user's signature of the round (with the parent's user certificate key),
// that the round belongs to this parent (which the party accepted and, for
// an owner, charged once), that it is the next round (after = the last
// round the party took part in or saw sealed, 0 after round 0) and not
// past the parent's T, and that the matrix it is handed is the one the
// round names and passes power.CheckQ for the parent's parameters.
func (r RoundSpec) Admit(parent *Spec, sch *schema.Schema, sig []byte, pub crypto.PublicKey, after int, q *power.QMatrix) error {
	if parent.Power == nil {
		return fmt.Errorf("round %d: job %s… is not a power-method job", r.Round, parent.ID()[:12])
	}
	if r.Parent != parent.ID() {
		return fmt.Errorf("round %d: names parent %.12s…, not job %s…", r.Round, r.Parent, parent.ID()[:12])
	}
	if err := seal.Verify(pub, roundSignContext, []byte(r.ID()), sig); err != nil {
		return fmt.Errorf("round %d of job %s…: user signature: %w", r.Round, parent.ID()[:12], err)
	}
	if r.Round != after+1 || r.Round > parent.Power.Rounds {
		return fmt.Errorf("round %d of job %s…: expected round %d of %d", r.Round, parent.ID()[:12], after+1, parent.Power.Rounds)
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
