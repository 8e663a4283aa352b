package he

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/he/heint"
	"github.com/tuneinsight/lattigo/v5/mhe"
	"github.com/tuneinsight/lattigo/v5/mhe/mheint"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
)

// Encryption to shares and back: the bridge between the committee's BGV
// ciphertexts and secret-shared computation among its members (issue 32),
// lattigo's mheint.EncToShareProtocol and mheint.ShareToEncProtocol, which
// implement the encryption-to-shares and shares-to-encryption protocols of
// Mouchet, Troncoso-Pastoriza, Bossuat and Hubaux, "Multiparty Homomorphic
// Encryption from Ring-Learning-with-Errors" (PoPETs 2021), run by the t
// active members with their additive keys for the active set (Mouchet,
// Bertrand and Hubaux, "An Efficient Threshold Access-Structure for
// RLWE-Based Multiparty Homomorphic Encryption", J. Cryptology 2023;
// mhe.Combiner), as the key switch is.
//
// # Encryption to shares
//
// Each active member i draws a mask M_i and sends the public share
// h_i = s_i 2 ct[1] - Delta M_i + F_i (EncToShare), where s_i is its additive
// key, Delta = T^-1 mod Q lattigo's BGV encoding factor and F_i its
// flooding. The proxy only sums the h_i (AggregateConversionShares) and
// relays the sum to the receiver, the lowest active point
// (ConversionReceiver), which decrypts 2 ct[0] + sum h_i, that is
// 2 m - sum M_i plus noise, and adds its own mask (GetShare). The receiver's
// share 2 m - sum_{j != receiver} M_j and the others' M_j sum to 2 m mod T.
// As for the key switch, members convert 2 ct, not ct, because the upload
// proofs bound only 2 c1 (section 5.1 of docs/PROTOCOL.md); the factor 2 is
// taken out locally (below).
//
// What the shares are of. lattigo's masks M_i, and so the shares, are
// polynomials in R_T = Z_T[X]/(X^N + 1), the plaintext polynomial's
// coefficients (times the ciphertext's scale), not its slots: GenShare
// reads M_i from a uniform sampler over lattigo's RingT and maps it into
// R_Q with Encoder.RingT2Q. The slots are the image of the coefficients by
// a fixed linear bijection of Z_T^N (times the inverse of the scale, the
// negacyclic NTT mod T and lattigo's slot permutation: Encoder.DecodeRingT).
// Every member applies that map, times the inverse of 2, to its own share
// (slotShares); because the map is linear mod T the slot shares sum to the
// slot values mod T, and because it is a bijection a uniform share of the
// coefficients is a uniform share of the slots. Members never hold
// coefficient shares outside these functions: SlotShare is what they
// compute on.
//
// How the masks hide. Each coefficient of M_i is exactly uniform mod T
// given the sampler's bytes: lattigo's UniformSampler draws 60-bit words
// (T's bit length) and rejects those >= T. The bytes come from a BLAKE2b XOF
// keyed with 64 bytes of crypto/rand (sampling.NewPRNG, one key per
// protocol object), so the shares are perfectly hiding against anyone
// for whom that XOF stream is uniform: computationally, not
// information-theoretically. Any t - 1 members (and the proxy) see only
// their own masks and h_j, in which the honest member's mask hides the
// values; the receiver learns the noise of what it decrypts exactly, which
// is why each h_i carries the key switch's flooding (below).
//
// Flooding. The receiver decrypts the sum of the h_i under the committee
// key and learns its noise exactly: the noise of 2 ct, which depends on
// the committee secret, plus the members' noise. Each h_i therefore carries
// the same flooding as a key-switch share (Member.addFlooding: uniform over
// [-2^S, 2^S) with S = SmudgingLog2, crypto/rand, no floating point), instead of lattigo's
// float Gaussian (which is kept at a fresh encryption's sigma). It is sized
// for a ct whose second component is the sum of proven uploads, so the
// caller must have verified ct[1] exactly as for a key switch (see csp): a
// crafted c1 (a constant K of 2^125, say) would put 2 K s into the noise
// the receiver learns, beyond what any flooding within the noise budget
// hides, and turn the protocol into a decryption oracle for the committee
// secret.
//
// # Shares to encryption
//
// Each active member sends h_i = -s_i a + Delta M_i + e_i with its slot
// share M_i re-encoded as a plaintext polynomial, a the common reference
// polynomial sampled from a public seed and e_i lattigo's fresh-encryption
// noise (ShareToEncShare); anyone (the proxy) sums them into the ciphertext
// (sum h_i, a) under the committee key (ShareToEnc). Each h_i is an RLWE
// sample under s_i with public a, which hides M_i; the result has a fresh
// encryption's noise (t of them) and is key-switched to the user as any
// ciphertext. The seed must be fresh for every converted ciphertext: under
// one a, h_i - h'_i = Delta (M_i - M'_i) + e_i - e'_i hands the difference
// of a member's two shares to anyone who sees both.

// SlotShare is a member's additive share, mod T, of the Slots values of one
// ciphertext: the active members' shares sum to the values mod T. It is
// secret: it travels only between members over authenticated, encrypted
// channels, and is never logged.
type SlotShare []uint64

// ConversionShare is a member's public share in encryption to shares or
// shares to encryption (mhe.KeySwitchShare: one polynomial mod Q in the NTT
// domain, BinarySize bytes on the wire), and the proxy's sum of them.
type ConversionShare = mhe.KeySwitchShare

// lattigoFlooding is the noise parameter given to lattigo's conversion
// protocols. With sigma 0, mhe.NewKeySwitchProtocol uses a fresh
// encryption's noise (sigma 3.2, bound 19.2); the flooding that hides
// secret-dependent noise is added by addFlooding.
var lattigoFlooding = ring.DiscreteGaussian{Sigma: 0, Bound: 0}

// converter is a member's lattigo protocol objects and buffers for the
// conversions. Not safe for concurrent use.
type converter struct {
	e2s  mheint.EncToShareProtocol
	s2e  mheint.ShareToEncProtocol
	ecd  *bgv.Encoder
	ct2  *rlwe.Ciphertext  // 2 ct
	coef mhe.AdditiveShare // a share of the plaintext polynomial, in R_T
}

func newConverter(p Params) (*converter, error) {
	hp := heint.Parameters{Parameters: p.Parameters}
	e2s, err := mheint.NewEncToShareProtocol(hp, lattigoFlooding)
	if err != nil {
		return nil, fmt.Errorf("encryption to shares: %w", err)
	}
	s2e, err := mheint.NewShareToEncProtocol(hp, lattigoFlooding)
	if err != nil {
		return nil, fmt.Errorf("shares to encryption: %w", err)
	}
	return &converter{e2s: e2s, s2e: s2e, ecd: bgv.NewEncoder(p.Parameters), ct2: p.newCiphertext(),
		coef: mheint.NewAdditiveShare(hp)}, nil
}

func (m *Member) converter() (*converter, error) {
	if m.conv == nil {
		c, err := newConverter(m.params)
		if err != nil {
			return nil, err
		}
		m.conv = c
	}
	return m.conv, nil
}

// checkConvertible checks that ct is a protocol ciphertext: degree 1, the
// protocol level, NTT domain, slot-packed.
func (p Params) checkConvertible(ct *rlwe.Ciphertext) error {
	if ct == nil || ct.Degree() != 1 || ct.Level() != p.Level() || !ct.IsNTT || !ct.IsBatched {
		return fmt.Errorf("ciphertext must be of degree 1, level %d, in the NTT domain and slot-packed", p.Level())
	}
	return nil
}

// double sets c.ct2 = SwitchFactor ct.
func (c *converter) double(p Params, ct *rlwe.Ciphertext) {
	rq := p.RingQ().AtLevel(p.Level())
	*c.ct2.MetaData = *ct.MetaData
	rq.MulScalar(ct.Value[0], SwitchFactor, c.ct2.Value[0])
	rq.MulScalar(ct.Value[1], SwitchFactor, c.ct2.Value[1])
}

// slotShares maps c.coef, a share of the plaintext polynomial of 2 ct (in
// R_T, scaled by ct's scale), to a share of ct's slot values: times the
// inverse of SwitchFactor scale mod T, then lattigo's decoding map
// (DecodeRingT: NTT mod T and the slot permutation). Both are linear mod T.
func (c *converter) slotShares(p Params, scale rlwe.Scale) SlotShare {
	t := p.T()
	k := ring.ModExp(mulMod(SwitchFactor, scale.Uint64()%t, t), t-2, t) // (2 scale)^-1 mod T, T prime
	rt := p.RingT()
	rt.MulScalar(c.coef.Value, k, c.coef.Value)
	out := make(SlotShare, p.Slots())
	if err := c.ecd.DecodeRingT(c.coef.Value, rlwe.NewScaleModT(1, t), []uint64(out)); err != nil {
		panic(err) // []uint64 of Slots values: cannot fail
	}
	return out
}

func mulMod(a, b, t uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	_, r := bits.Div64(hi%t, lo, t)
	return r
}

// ConversionReceiver returns the active member that completes an
// encryption to shares (GetShare): the lowest point of the active set, so
// that every member agrees whatever order the set is listed in.
func ConversionReceiver(active []Point) Point { return slices.Min(active) }

// EncToShare is the member's step of the encryption to shares of ct with the
// active set: it returns the member's secret share of ct's slot values and
// its public share h_i (see above), with the key switch's flooding. The
// receiver (ConversionReceiver) keeps its secret share for GetShare; every
// other member's secret share is final. Each call draws a fresh mask.
//
// The caller must have verified ct[1], as for a key switch: that it is the
// sum of proven uploads (see csp); a member never converts a ciphertext on
// another party's word.
func (m *Member) EncToShare(ct *rlwe.Ciphertext, active []Point) (SlotShare, *ConversionShare, error) {
	sk, err := m.additiveKey(active)
	if err != nil {
		return nil, nil, fmt.Errorf("encryption to shares: %w", err)
	}
	if err := m.params.checkConvertible(ct); err != nil {
		return nil, nil, fmt.Errorf("encryption to shares: %w", err)
	}
	c, err := m.converter()
	if err != nil {
		return nil, nil, err
	}
	c.double(m.params, ct)
	pub := c.e2s.AllocateShare(m.params.Level())
	c.e2s.GenShare(sk, c.ct2, &c.coef, &pub)
	if err := m.addFlooding(pub.Value); err != nil {
		return nil, nil, fmt.Errorf("encryption to shares: %w", err)
	}
	// lattigo's share leaves a few residues in [q, 2q) (lazy reduction);
	// the wire's codec takes only reduced ones.
	m.params.RingQ().AtLevel(pub.Value.Level()).Reduce(pub.Value, pub.Value)
	return c.slotShares(m.params, ct.Scale), &pub, nil
}

// AggregateConversionShares sums the active members' public shares (the
// proxy's step, in either direction). It does not modify them.
func AggregateConversionShares(p Params, shares []*ConversionShare) (*ConversionShare, error) {
	if len(shares) == 0 {
		return nil, errors.New("aggregate conversion shares: no shares")
	}
	for i, s := range shares {
		if s == nil || s.Value.Level() != p.Level() || s.Value.N() != p.N() {
			return nil, fmt.Errorf("aggregate conversion shares: share %d is not a polynomial of degree %d at level %d", i, p.N(), p.Level())
		}
	}
	rq := p.RingQ().AtLevel(p.Level())
	out := &ConversionShare{Value: *shares[0].Value.CopyNew()}
	for _, s := range shares[1:] {
		rq.Add(out.Value, s.Value, out.Value)
	}
	return out, nil
}

// GetShare completes the encryption to shares for the receiver
// (ConversionReceiver of active): it decrypts 2 ct[0] plus the aggregate of
// the active members' public shares, which is the slot values minus the
// other members' masks, and adds own, the secret share EncToShare returned
// to it for the same ct and active set. The result is the receiver's final
// share.
func (m *Member) GetShare(ct *rlwe.Ciphertext, active []Point, aggregate *ConversionShare, own SlotShare) (SlotShare, error) {
	if err := m.committee.CheckActive(active); err != nil {
		return nil, fmt.Errorf("get share: %w", err)
	}
	if r := ConversionReceiver(active); m.point != r {
		return nil, fmt.Errorf("get share: member %d is not the receiver of the active set %v (member %d is)", m.point, active, r)
	}
	if err := m.params.checkConvertible(ct); err != nil {
		return nil, fmt.Errorf("get share: %w", err)
	}
	if aggregate == nil || aggregate.Value.Level() != m.params.Level() || aggregate.Value.N() != m.params.N() {
		return nil, fmt.Errorf("get share: aggregate is not a polynomial of degree %d at level %d", m.params.N(), m.params.Level())
	}
	if err := m.params.checkSlotShare(own); err != nil {
		return nil, fmt.Errorf("get share: own share: %w", err)
	}
	c, err := m.converter()
	if err != nil {
		return nil, err
	}
	c.double(m.params, ct)
	c.e2s.GetShare(nil, *aggregate, c.ct2, &c.coef)
	out := c.slotShares(m.params, ct.Scale)
	t := m.params.T()
	for i, v := range own {
		if out[i] += v; out[i] >= t {
			out[i] -= t
		}
	}
	return out, nil
}

// checkSlotShare checks that s has Slots values reduced mod T.
func (p Params) checkSlotShare(s SlotShare) error {
	if len(s) != p.Slots() {
		return fmt.Errorf("%d values, want %d", len(s), p.Slots())
	}
	t := p.T()
	for i, v := range s {
		if v >= t {
			return fmt.Errorf("value at index %d is not reduced mod T", i)
		}
	}
	return nil
}

// ShareToEncShare is the member's step of the shares-to-encryption of the
// slot values whose share it holds, with the active set: h_i =
// -s_i a + Delta share + e_i, with a the common reference polynomial drawn
// from seed (at least 16 bytes, public, fresh for every converted
// ciphertext: see above).
func (m *Member) ShareToEncShare(seed []byte, active []Point, share SlotShare) (*ConversionShare, error) {
	sk, err := m.additiveKey(active)
	if err != nil {
		return nil, fmt.Errorf("shares to encryption: %w", err)
	}
	if err := m.params.checkSlotShare(share); err != nil {
		return nil, fmt.Errorf("shares to encryption: share: %w", err)
	}
	c, err := m.converter()
	if err != nil {
		return nil, err
	}
	crp, err := conversionCRP(m.params, c.s2e, seed)
	if err != nil {
		return nil, fmt.Errorf("shares to encryption: %w", err)
	}
	if err := c.ecd.EncodeRingT([]uint64(share), m.params.DefaultScale(), c.coef.Value); err != nil {
		return nil, fmt.Errorf("shares to encryption: %w", err)
	}
	out := c.s2e.AllocateShare(m.params.Level())
	if err := c.s2e.GenShare(sk, crp, c.coef, &out); err != nil {
		return nil, fmt.Errorf("shares to encryption: %w", err)
	}
	m.params.RingQ().AtLevel(out.Value.Level()).Reduce(out.Value, out.Value)
	return &out, nil
}

// conversionCRP draws the common reference polynomial of a shares to
// encryption from its public seed, as the key ceremony draws its own.
func conversionCRP(p Params, s2e mheint.ShareToEncProtocol, seed []byte) (mhe.KeySwitchCRP, error) {
	prng, err := crsPRNG(seed)
	if err != nil {
		return mhe.KeySwitchCRP{}, err
	}
	return s2e.SampleCRP(p.Level(), prng), nil
}

// ShareToEnc sums the active members' shares-to-encryption shares for seed
// into a ciphertext under the committee key that encrypts the sum of their
// slot shares (at the default scale, as an owner's encryption). The proxy
// runs it; it needs no secret.
func ShareToEnc(p Params, seed []byte, shares []*ConversionShare) (*rlwe.Ciphertext, error) {
	agg, err := AggregateConversionShares(p, shares)
	if err != nil {
		return nil, fmt.Errorf("shares to encryption: %w", err)
	}
	s2e, err := mheint.NewShareToEncProtocol(heint.Parameters{Parameters: p.Parameters}, lattigoFlooding)
	if err != nil {
		return nil, fmt.Errorf("shares to encryption: %w", err)
	}
	crp, err := conversionCRP(p, s2e, seed)
	if err != nil {
		return nil, fmt.Errorf("shares to encryption: %w", err)
	}
	out := p.newCiphertext()
	if err := s2e.GetEncryption(*agg, crp, out); err != nil {
		return nil, fmt.Errorf("shares to encryption: %w", err)
	}
	return out, nil
}

// OpenShares adds slot shares mod T and returns the values as signed
// integers in [-(T+1)/2, (T-3)/2], as DecryptVector does. Opening reveals
// the values: it is for results meant to be public, and for tests.
func OpenShares(p Params, shares ...SlotShare) ([]int64, error) {
	if len(shares) == 0 {
		return nil, errors.New("open shares: no shares")
	}
	t := p.T()
	sum := make([]uint64, p.Slots())
	for i, s := range shares {
		if err := p.checkSlotShare(s); err != nil {
			return nil, fmt.Errorf("open shares: share %d: %w", i, err)
		}
		for j, v := range s {
			if sum[j] += v; sum[j] >= t {
				sum[j] -= t
			}
		}
	}
	out := make([]int64, len(sum))
	for i, r := range sum {
		out[i] = p.centre(r)
	}
	return out, nil
}
