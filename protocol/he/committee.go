package he

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/utils/sampling"
)

// Point is a committee member's public Shamir point: its 1-based index.
type Point = mhe.ShamirPublicPoint

// The multiparty objects of the protocol, named here so that the roles need
// not import lattigo's mhe package.
type (
	// PublicKeyShare is a member's share of the collective public key.
	PublicKeyShare = mhe.PublicKeyGenShare
	// ShamirShare is a threshold share dealt from one member to another.
	ShamirShare = mhe.ShamirSecretShare
	// KeySwitchShare is a member's share of a public-key switch.
	KeySwitchShare = mhe.PublicKeySwitchShare
)

// Committee describes the CSP committee: N members with points 1..N, of
// which any Threshold can key-switch.
type Committee struct {
	N, Threshold int
}

// Validate checks 1 <= Threshold <= N.
func (c Committee) Validate() error {
	if c.N < 1 || c.N > maxCommittee {
		return fmt.Errorf("committee of %d members: must be between 1 and %d", c.N, maxCommittee)
	}
	if c.Threshold < 1 || c.Threshold > c.N {
		return fmt.Errorf("committee threshold %d: must be between 1 and %d", c.Threshold, c.N)
	}
	return nil
}

// Thresholdized reports whether members use Shamir shares (t < n).
func (c Committee) Thresholdized() bool { return c.Threshold < c.N }

// Points returns the points 1..N.
func (c Committee) Points() []Point {
	ps := make([]Point, c.N)
	for i := range ps {
		ps[i] = Point(i + 1)
	}
	return ps
}

// CheckActive validates a set of members taking part in a key switch: exactly
// Threshold distinct points of the committee, and all of them when the
// committee is not thresholdized.
func (c Committee) CheckActive(active []Point) error {
	if len(active) != c.Threshold {
		return fmt.Errorf("key switch needs exactly %d members, got %d", c.Threshold, len(active))
	}
	seen := map[Point]bool{}
	for _, a := range active {
		if a < 1 || int(a) > c.N {
			return fmt.Errorf("member %d is not in the committee of %d", a, c.N)
		}
		if seen[a] {
			return fmt.Errorf("member %d listed twice", a)
		}
		seen[a] = true
	}
	return nil
}

// crsPRNG returns the common reference string of a key ceremony: a keyed
// BLAKE2b XOF over a public seed, so every member derives the same CRP.
func crsPRNG(seed []byte) (*sampling.KeyedPRNG, error) {
	if len(seed) < 16 {
		return nil, fmt.Errorf("ceremony seed of %d bytes: want at least 16", len(seed))
	}
	return sampling.NewKeyedPRNG(seed)
}

// Member is one CSP node's key material and protocol state. Its secret key
// (and threshold share) never leave it except through SecretState for
// storage at rest. Not safe for concurrent use.
type Member struct {
	params    Params
	committee Committee
	point     Point
	sk        *rlwe.SecretKey
	tsk       *mhe.ShamirSecretShare // aggregated threshold share; nil until SetThresholdShares (or when t == n)
	combiner  *mhe.Combiner
	flood     *flooder // the flooding of key-switch shares
	floodPoly ring.Poly
	addSK     *rlwe.SecretKey
	userEnc   *Encryptor // under the user key of the last switch, with its prepared encryptions of zero
	conv      *converter // encryption-to-shares and back (sharing.go); nil until first used
}

// NewMember generates a fresh secret key share for the member at point.
func NewMember(p Params, c Committee, point Point) (*Member, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if point < 1 || int(point) > c.N {
		return nil, fmt.Errorf("member point %d is not in the committee of %d", point, c.N)
	}
	sk := rlwe.NewKeyGenerator(p.Parameters).GenSecretKeyNew()
	return &Member{params: p, committee: c, point: point, sk: sk}, nil
}

// Point returns the member's point.
func (m *Member) Point() Point { return m.point }

// Committee returns the committee the member belongs to.
func (m *Member) Committee() Committee { return m.committee }

// PublicKeyShare returns the member's share of the collective public key for
// the ceremony seed.
func (m *Member) PublicKeyShare(seed []byte) (*mhe.PublicKeyGenShare, error) {
	prng, err := crsPRNG(seed)
	if err != nil {
		return nil, err
	}
	ckg := mhe.NewPublicKeyGenProtocol(m.params.Parameters)
	crp := ckg.SampleCRP(prng)
	share := ckg.AllocateShare()
	ckg.GenShare(m.sk, crp, &share)
	return &share, nil
}

// AggregatePublicKey combines the members' public key shares (one from each
// of the N members) into the committee's public key.
func AggregatePublicKey(p Params, seed []byte, shares []*mhe.PublicKeyGenShare) (*rlwe.PublicKey, error) {
	if len(shares) == 0 {
		return nil, errors.New("aggregate public key: no shares")
	}
	prng, err := crsPRNG(seed)
	if err != nil {
		return nil, err
	}
	ckg := mhe.NewPublicKeyGenProtocol(p.Parameters)
	crp := ckg.SampleCRP(prng)
	agg := ckg.AllocateShare()
	agg.Value.Copy(shares[0].Value)
	for _, s := range shares[1:] {
		ckg.AggregateShares(agg, *s, &agg)
	}
	pk := rlwe.NewPublicKey(p.Parameters)
	ckg.GenPublicKey(agg, crp, pk)
	return pk, nil
}

// DealShamir returns the threshold shares of the member's secret for every
// member of a thresholdized committee, indexed by point. The share for
// another member is secret and must travel encrypted to it.
func (m *Member) DealShamir() (map[Point]*mhe.ShamirSecretShare, error) {
	if !m.committee.Thresholdized() {
		return nil, errors.New("deal shamir shares: the committee is not thresholdized (t = n)")
	}
	thr := mhe.NewThresholdizer(m.params.Parameters)
	poly, err := thr.GenShamirPolynomial(m.committee.Threshold, m.sk)
	if err != nil {
		return nil, fmt.Errorf("deal shamir shares: %w", err)
	}
	out := make(map[Point]*mhe.ShamirSecretShare, m.committee.N)
	for _, pt := range m.committee.Points() {
		s := thr.AllocateThresholdSecretShare()
		thr.GenShamirSecretShare(pt, poly, &s)
		out[pt] = &s
	}
	return out, nil
}

// SetThresholdShares aggregates the shares dealt to this member by every
// member (its own included), which makes it ready to key-switch with any
// Threshold members.
func (m *Member) SetThresholdShares(dealt []*mhe.ShamirSecretShare) error {
	if !m.committee.Thresholdized() {
		return errors.New("set threshold shares: the committee is not thresholdized (t = n)")
	}
	if len(dealt) != m.committee.N {
		return fmt.Errorf("set threshold shares: got %d shares, want one from each of the %d members", len(dealt), m.committee.N)
	}
	thr := mhe.NewThresholdizer(m.params.Parameters)
	agg := thr.AllocateThresholdSecretShare()
	for _, s := range dealt {
		if err := thr.AggregateShares(agg, *s, &agg); err != nil {
			return fmt.Errorf("set threshold shares: %w", err)
		}
	}
	m.tsk = &agg
	m.combiner = nil
	return nil
}

// Ready reports whether the member can take part in key switches.
func (m *Member) Ready() bool { return !m.committee.Thresholdized() || m.tsk != nil }

// additiveKey returns the member's additive share of the committee secret
// for the active set.
func (m *Member) additiveKey(active []Point) (*rlwe.SecretKey, error) {
	if err := m.committee.CheckActive(active); err != nil {
		return nil, err
	}
	if !slices.Contains(active, m.point) {
		return nil, fmt.Errorf("member %d is not in the active set %v", m.point, active)
	}
	if !m.committee.Thresholdized() {
		return m.sk, nil
	}
	if m.tsk == nil {
		return nil, errors.New("member has no threshold share yet: finish the key ceremony first")
	}
	if m.combiner == nil {
		cmb := mhe.NewCombiner(*m.params.GetRLWEParameters(), m.point, m.committee.Points(), m.committee.Threshold)
		m.combiner = &cmb
	}
	if m.addSK == nil {
		m.addSK = rlwe.NewSecretKey(m.params.Parameters)
	}
	if err := m.combiner.GenAdditiveShare(active, m.point, *m.tsk, m.addSK); err != nil {
		return nil, fmt.Errorf("combine threshold share: %w", err)
	}
	return m.addSK, nil
}

// KeySwitchShare computes the member's share of the public-key switch of
// 2 ct to the user's key, with the active set of members taking part:
// lattigo's share (mhe.PublicKeySwitchProtocol.GenShare) of 2 ct, an
// encryption of zero under the user's key plus 2 ct[1] times the member's
// additive secret, made over an encryption of zero prepared after the
// user's last switch when there is one (PrepareSwitch). It switches twice
// the ciphertext because an upload's proof guarantees a short preimage of
// 2 c1 only (protocol/zk): c1 s itself could hold halves mod Q, whose
// parity no flooding hides. The switched result therefore encrypts twice
// the plaintext (SwitchFactor; CombineKeySwitch doubles ct[0] alike and
// Decryptor.DecryptSwitched halves). The share is flooded with fresh noise
// uniform over [-2^SmudgingLog2, 2^SmudgingLog2) per coefficient (see
// addFlooding), which hides the noise of 2 ct, and so anything about the
// committee secret, from the user. If noise is not nil (at most Slots
// values, the member's DP noise share for this ciphertext), twice it is
// encoded and added under the same encryption of zero, as an encryption of
// it would be: the switched ciphertext then decrypts to twice the sum of
// the plaintext and the noise, and nobody but the member knows the noise.
//
// The caller must have verified ct[1]: that it is the sum of proven
// uploads (see csp); a member never switches a ciphertext on another
// party's word.
func (m *Member) KeySwitchShare(ct *rlwe.Ciphertext, userPK *rlwe.PublicKey, active []Point, noise []int64) (*mhe.PublicKeySwitchShare, error) {
	sk, err := m.additiveKey(active)
	if err != nil {
		return nil, err
	}
	if ct.Degree() != 1 || ct.Level() != m.params.Level() || !ct.IsNTT {
		return nil, fmt.Errorf("key switch: ciphertext of degree %d level %d, want degree 1 level %d in the NTT domain", ct.Degree(), ct.Level(), m.params.Level())
	}
	if m.userEnc == nil || !m.userEnc.pk.Equal(userPK) {
		if m.userEnc, err = NewEncryptor(m.params, userPK); err != nil {
			return nil, err
		}
	}
	// An encryption of zero under the user's key masks the share (and the
	// noise share in it): taken out of the prepared ones, used once.
	zero := m.userEnc.takeZero().ct
	if noise != nil {
		twice := make([]int64, len(noise))
		for i, x := range noise {
			twice[i] = SwitchFactor * x
		}
		if err := m.userEnc.addPlain(twice, zero); err != nil {
			return nil, fmt.Errorf("key switch: noise share: %w", err)
		}
	}
	rq := m.params.RingQ().AtLevel(m.params.Level())
	// The share's polynomials are the encryption of zero's, its metadata
	// lattigo's (AllocateShare), so that it encodes to lattigo's bytes.
	share := &mhe.PublicKeySwitchShare{Element: rlwe.Element[ring.Poly]{Value: zero.Value,
		MetaData: &rlwe.MetaData{CiphertextMetaData: rlwe.CiphertextMetaData{IsNTT: true}}}}
	for range SwitchFactor { // + 2 ct[1] sk
		rq.MulCoeffsMontgomeryThenAdd(ct.Value[1], sk.Value.Q, share.Value[0])
	}
	if err := m.addFlooding(share.Value[0]); err != nil {
		return nil, fmt.Errorf("key switch: %w", err)
	}
	return share, nil
}

// PrepareSwitch makes one encryption of zero under the user key of the last
// key switch, for a share of that user's next job (the share then costs a
// product and an addition instead of a public-key encryption), unless n are
// ready already or no switch has been made; it reports whether it made one.
func (m *Member) PrepareSwitch(n int) bool {
	if m.userEnc == nil || m.userEnc.Prepared() >= n {
		return false
	}
	m.userEnc.Prepare()
	return true
}

// addFlooding adds a fresh flooding polynomial (m.flood, drawn from
// crypto/rand) to p, the first component of a key-switch or
// encryption-to-shares share, in the NTT domain, where lattigo's GenShare
// adds its own flooding noise for a ciphertext in the NTT domain (always
// with BGV).
func (m *Member) addFlooding(p ring.Poly) error {
	if m.flood == nil {
		flood, err := newFlooder(rand.Reader, SmudgingLog2, m.params.N())
		if err != nil {
			return err
		}
		m.flood, m.floodPoly = flood, m.params.RingQ().NewPoly()
	}
	rq := m.params.RingQ().AtLevel(p.Level())
	if err := m.flood.readPoly(rq, m.floodPoly); err != nil {
		return err
	}
	rq.NTT(m.floodPoly, m.floodPoly)
	rq.Add(p, m.floodPoly, p)
	return nil
}

// SwitchFactor is what a key switch multiplies the plaintext by: members
// switch 2 ct (see Member.KeySwitchShare), so the switched result encrypts
// twice the blinded sum plus the members' noise shares.
const SwitchFactor = 2

// CombineKeySwitch aggregates the active members' shares and switches 2 ct
// to the user's key, as lattigo's PublicKeySwitchProtocol.KeySwitch does
// with their sum for the ciphertext 2 ct: (2 ct[0] + sum of the shares'
// first components, sum of their second components). It does not modify
// ct.
func CombineKeySwitch(p Params, ct *rlwe.Ciphertext, shares []*mhe.PublicKeySwitchShare) (*rlwe.Ciphertext, error) {
	if len(shares) == 0 {
		return nil, errors.New("combine key switch: no shares")
	}
	if ct.Degree() != 1 || ct.Level() != p.Level() {
		return nil, fmt.Errorf("combine key switch: ciphertext of degree %d level %d, want degree 1 level %d", ct.Degree(), ct.Level(), p.Level())
	}
	for i, s := range shares {
		if s.Degree() != 1 || s.Level() != p.Level() {
			return nil, fmt.Errorf("combine key switch: share %d of degree %d level %d, want degree 1 level %d", i, s.Degree(), s.Level(), p.Level())
		}
	}
	rq := p.RingQ().AtLevel(p.Level())
	out := p.newCiphertext()
	*out.MetaData = *ct.MetaData
	rq.MulScalar(ct.Value[0], SwitchFactor, out.Value[0])
	for _, s := range shares {
		rq.Add(out.Value[0], s.Value[0], out.Value[0])
		rq.Add(out.Value[1], s.Value[1], out.Value[1])
	}
	return out, nil
}

// SecretState is a member's secret material encoded for storage at rest
// (a file readable by the member's user only). It must never be logged or
// sent.
type SecretState struct {
	Point          Point
	N, Threshold   int
	SecretKey      []byte
	ThresholdShare []byte // nil when the committee is not thresholdized or the ceremony is unfinished
}

// SecretState encodes the member's secrets.
func (m *Member) SecretState() SecretState {
	st := SecretState{Point: m.point, N: m.committee.N, Threshold: m.committee.Threshold, SecretKey: m.params.Codecs().SecretKey.Marshal(m.sk)}
	if m.tsk != nil {
		st.ThresholdShare = m.params.Codecs().ShamirShare.Marshal(m.tsk)
	}
	return st
}

// RestoreMember rebuilds a member from its stored secrets.
func RestoreMember(p Params, st SecretState) (*Member, error) {
	c := Committee{N: st.N, Threshold: st.Threshold}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("restore member: %w", err)
	}
	if st.Point < 1 || int(st.Point) > c.N {
		return nil, fmt.Errorf("restore member: point %d not in the committee of %d", st.Point, c.N)
	}
	sk, err := p.Codecs().SecretKey.Unmarshal(st.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("restore member: %w", err)
	}
	m := &Member{params: p, committee: c, point: st.Point, sk: sk}
	if st.ThresholdShare != nil {
		if !c.Thresholdized() {
			return nil, errors.New("restore member: threshold share stored for a committee with t = n")
		}
		if m.tsk, err = p.Codecs().ShamirShare.Unmarshal(st.ThresholdShare); err != nil {
			return nil, fmt.Errorf("restore member: %w", err)
		}
	}
	return m, nil
}

// LocalCeremony runs the committee's whole key ceremony in one process, the
// members in a slice: key generation from the public seed and, for t < n,
// the dealing and aggregation of Shamir shares, every share passing through
// its wire codec as it would between processes. It is for tests and
// single-process tools; the daemons run the same steps over the network.
func LocalCeremony(p Params, c Committee, seed []byte) ([]*Member, *rlwe.PublicKey, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	codecs := p.Codecs()
	members := make([]*Member, c.N)
	shares := make([]*mhe.PublicKeyGenShare, c.N)
	for i := range members {
		m, err := NewMember(p, c, Point(i+1))
		if err != nil {
			return nil, nil, err
		}
		members[i] = m
		s, err := m.PublicKeyShare(seed)
		if err != nil {
			return nil, nil, err
		}
		if shares[i], err = codecs.PublicKeyShare.Unmarshal(codecs.PublicKeyShare.Marshal(s)); err != nil {
			return nil, nil, err
		}
	}
	pk, err := AggregatePublicKey(p, seed, shares)
	if err != nil {
		return nil, nil, err
	}
	if !c.Thresholdized() {
		return members, pk, nil
	}
	dealt := make([]map[Point]*mhe.ShamirSecretShare, c.N)
	for i, m := range members {
		if dealt[i], err = m.DealShamir(); err != nil {
			return nil, nil, err
		}
	}
	for _, m := range members {
		mine := make([]*mhe.ShamirSecretShare, c.N)
		for i := range members {
			if mine[i], err = codecs.ShamirShare.Unmarshal(codecs.ShamirShare.Marshal(dealt[i][m.Point()])); err != nil {
				return nil, nil, err
			}
		}
		if err := m.SetThresholdShares(mine); err != nil {
			return nil, nil, err
		}
	}
	return members, pk, nil
}
