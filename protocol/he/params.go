package he

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
)

// The moduli of the default parameter set (see the package documentation).
const (
	// PlaintextModulus is T = 2^60 - 16383, prime, T = 1 mod 2^14.
	PlaintextModulus uint64 = 1152921504606830593
	// Q0 = 2^61 - 376831, an NTT-friendly prime above T.
	Q0 uint64 = 2305843009213317121
	// Q1 = 2^45 - 219135, NTT-friendly.
	Q1 uint64 = 35184371613697
	// Q2 = 2^40 - 147455 = 2^40 - 9 * 2^14 + 1, the largest prime below
	// 2^40 that is 1 mod 2^14 (= 2N): the first prime of lattigo's
	// ring.NewNTTFriendlyPrimesGenerator(40, 1<<14).NextDownstreamPrime,
	// checked prime by trial division and by openssl prime (TestParams checks
	// it again).
	Q2 uint64 = 1099511480321
	// Q3 = 36028797018652673, the largest prime below 2^55 that is 1 mod
	// 2^14 (lattigo's NextDownstreamPrime from 2^55; TestParams checks it).
	// Q2 and Q3 make room in Q for the flooding of the public-key switch,
	// which is sized from what the upload proofs prove (SmudgingLog2).
	Q3 uint64 = 36028797018652673
	// LogN is log2 of the ring degree.
	LogN = 13
	// MaxLogQ is the HE-standard bound on log2(QP) for 128-bit security at
	// logN = 13 (ternary secrets, error sigma 3.2).
	MaxLogQ = 218
	// DefaultParamsID names the default parameter set in job specs.
	DefaultParamsID = "bgv-logn13-t60-q61x45x40x55"
	// SmudgingLog2 is S: in the public-key switch each committee member
	// floods its share with noise whose coefficients are independent and
	// uniform over the integers [-2^S, 2^S) (see flooder). By the smudging
	// lemma this hides a noise e with statistical distance at most
	// |e| / 2^(S+1) per coefficient. What it must hide is sized from what
	// the upload proofs prove (FloodingDistance), not from honest noise:
	// at most 2^-40 for a job whose sum holds 10,000 uploaded ciphertexts
	// under the largest committee, while a full committee's flooding,
	// 64 * 2^S = 2^130, stays 10 bits inside the 2^140 noise budget. (It
	// was 121 while a proof covered one ciphertext; a proof of a group of
	// up to 8 proves bounds 8 times larger, zk.ProvenBounds.)
	SmudgingLog2 = 124
)

// maxCommittee is the largest committee Committee.Validate accepts.
const maxCommittee = 64

// minFloodingMargin is the noise budget, in bits, that NewDefaultParams
// requires to remain above the flooding of a full committee.
const minFloodingMargin = 8

// Params is a BGV parameter set with a name. It is immutable and safe for
// concurrent use.
type Params struct {
	bgv.Parameters
	id          string
	fingerprint string
	codecs      *Codecs
}

// NewDefaultParams builds the default parameter set.
func NewDefaultParams() (Params, error) {
	p, err := bgv.NewParametersFromLiteral(bgv.ParametersLiteral{
		LogN:             LogN,
		Q:                []uint64{Q0, Q1, Q2, Q3},
		PlaintextModulus: PlaintextModulus,
	})
	if err != nil {
		return Params{}, fmt.Errorf("default bgv parameters: %w", err)
	}
	if p.MaxSlots() != 1<<LogN {
		return Params{}, fmt.Errorf("default bgv parameters: %d slots, want %d", p.MaxSlots(), 1<<LogN)
	}
	if p.MaxLevel() != 3 || p.PCount() != 0 {
		return Params{}, fmt.Errorf("default bgv parameters: unexpected moduli chain")
	}
	if p.LogQP() > MaxLogQ {
		return Params{}, fmt.Errorf("default bgv parameters: log2 QP = %.2f exceeds %d, the 128-bit security bound at logN = %d", p.LogQP(), MaxLogQ, LogN)
	}
	budget := p.LogQ() - 1 - math.Log2(float64(p.PlaintextModulus()))
	if flood := float64(SmudgingLog2) + math.Log2(maxCommittee); budget-flood < minFloodingMargin {
		return Params{}, fmt.Errorf("default bgv parameters: noise budget 2^%.1f leaves less than %d bits above the flooding of %d members (2^%.1f)", budget, minFloodingMargin, maxCommittee, flood)
	}
	js, err := json.Marshal(p.ParametersLiteral())
	if err != nil {
		return Params{}, fmt.Errorf("default bgv parameters: %w", err)
	}
	sum := sha256.Sum256(js)
	params := Params{Parameters: p, id: DefaultParamsID, fingerprint: hex.EncodeToString(sum[:])}
	if params.codecs, err = params.deriveCodecs(); err != nil {
		return Params{}, fmt.Errorf("default bgv parameters: %w", err)
	}
	return params, nil
}

// Codecs returns the wire codecs of the parameter set.
func (p Params) Codecs() *Codecs { return p.codecs }

// ParamsByID returns the parameter set with the given name.
func ParamsByID(id string) (Params, error) {
	if id != DefaultParamsID {
		return Params{}, fmt.Errorf("unknown HE parameter set %q (known: %s)", id, DefaultParamsID)
	}
	return NewDefaultParams()
}

// ID returns the name of the parameter set.
func (p Params) ID() string { return p.id }

// Fingerprint returns the hex SHA-256 of the parameter literal's JSON.
func (p Params) Fingerprint() string { return p.fingerprint }

// Slots returns the number of values per ciphertext.
func (p Params) Slots() int { return p.MaxSlots() }

// T returns the plaintext modulus.
func (p Params) T() uint64 { return p.PlaintextModulus() }

// MaxAbs returns the largest |value| that decodes exactly: decoding centres
// residues into [-(T+1)/2, (T-3)/2], so |x| <= (T-3)/2 is safe.
func (p Params) MaxAbs() int64 { return int64((p.T() - 3) / 2) }

// LogQ returns log2 of the ciphertext modulus.
func (p Params) LogQ() float64 { return p.Parameters.LogQ() }

// NoiseBudgetLog2 returns log2(Q / (2T)): decryption is exact while the RLWE
// noise of a ciphertext stays below this many bits.
func (p Params) NoiseBudgetLog2() float64 {
	return p.LogQ() - 1 - math.Log2(float64(p.T()))
}

// Level is the level of every ciphertext of the protocol (no rescaling).
func (p Params) Level() int { return p.MaxLevel() }

// newCiphertext allocates a protocol ciphertext.
func (p Params) newCiphertext() *rlwe.Ciphertext {
	return bgv.NewCiphertext(p.Parameters, 1, p.Level())
}

// ParamsOr returns *p, or the default parameter set when p is nil (the
// daemons' Config.Params).
func ParamsOr(p *Params) (Params, error) {
	if p != nil {
		return *p, nil
	}
	return NewDefaultParams()
}
