package he

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/ring/ringqp"
)

// Codecs are the validating codecs of every object that crosses a process
// boundary (or is stored), for one parameter set.
type Codecs struct {
	// Ciphertext: degree 1, at the protocol level (owner uploads, sums,
	// key-switched results).
	Ciphertext Codec[*rlwe.Ciphertext]
	// PublicKey: the committee key and users' keys.
	PublicKey Codec[*rlwe.PublicKey]
	// PublicKeyShare: a member's share in collective key generation.
	PublicKeyShare Codec[*mhe.PublicKeyGenShare]
	// KeySwitchShare: a member's public-key-switch share (with its noise).
	KeySwitchShare Codec[*mhe.PublicKeySwitchShare]
	// ShamirShare: a threshold share dealt from one member to another.
	ShamirShare Codec[*mhe.ShamirSecretShare]
	// ConversionShare: a member's public share of an encryption-to-shares
	// conversion, and the proxy's aggregate of them.
	ConversionShare Codec[*mhe.KeySwitchShare]
	// SecretKey: a member's or user's secret key, for storage at rest.
	SecretKey Codec[*rlwe.SecretKey]
}

func qp(p ringqp.Poly) []ring.Poly { return []ring.Poly{p.Q, p.P} }

func (p Params) deriveCodecs() (*Codecs, error) {
	level := p.Level()
	qMods := p.Q()[:level+1]
	qpMods := func(i int) []uint64 { // polys alternate Q, P
		if i%2 == 0 {
			return p.Q()
		}
		return p.P()
	}
	onlyQ := func(int) []uint64 { return qMods }
	var (
		c   Codecs
		err error
	)
	if c.Ciphertext, err = newCodec("ciphertext",
		p.newCiphertext,
		func(ct *rlwe.Ciphertext) []ring.Poly { return ct.Value },
		onlyQ); err != nil {
		return nil, err
	}
	if c.PublicKey, err = newCodec("public key",
		func() *rlwe.PublicKey { return rlwe.NewPublicKey(p.Parameters) },
		func(pk *rlwe.PublicKey) []ring.Poly { return append(qp(pk.Value[0]), qp(pk.Value[1])...) },
		qpMods); err != nil {
		return nil, err
	}
	if c.PublicKeyShare, err = newCodec("public key share",
		func() *mhe.PublicKeyGenShare { return &mhe.PublicKeyGenShare{Value: p.RingQP().NewPoly()} },
		func(s *mhe.PublicKeyGenShare) []ring.Poly { return qp(s.Value) },
		qpMods); err != nil {
		return nil, err
	}
	if c.KeySwitchShare, err = newCodec("key-switch share",
		func() *mhe.PublicKeySwitchShare {
			return &mhe.PublicKeySwitchShare{Element: *rlwe.NewElement(p.Parameters, 1, level)}
		},
		func(s *mhe.PublicKeySwitchShare) []ring.Poly { return s.Value },
		onlyQ); err != nil {
		return nil, err
	}
	if c.ConversionShare, err = newCodec("conversion share",
		func() *mhe.KeySwitchShare { return &mhe.KeySwitchShare{Value: p.RingQ().AtLevel(level).NewPoly()} },
		func(s *mhe.KeySwitchShare) []ring.Poly { return []ring.Poly{s.Value} },
		onlyQ); err != nil {
		return nil, err
	}
	if c.ShamirShare, err = newCodec("shamir share",
		func() *mhe.ShamirSecretShare { return &mhe.ShamirSecretShare{Poly: p.RingQP().NewPoly()} },
		func(s *mhe.ShamirSecretShare) []ring.Poly { return qp(s.Poly) },
		qpMods); err != nil {
		return nil, err
	}
	if c.SecretKey, err = newCodec("secret key",
		func() *rlwe.SecretKey { return rlwe.NewSecretKey(p.Parameters) },
		func(sk *rlwe.SecretKey) []ring.Poly { return qp(sk.Value) },
		qpMods); err != nil {
		return nil, err
	}
	return &c, nil
}

// PolySize is the length of one polynomial at the protocol level in the
// canonical encoding of AppendPoly.
func (p Params) PolySize() int { return 8 * p.N() * (p.Level() + 1) }

// AppendPoly appends the canonical encoding of a polynomial at the protocol
// level (a ciphertext's c0 or c1, in the NTT domain as stored): its rows,
// one per prime, each N little-endian uint64 residues. It is what upload
// statements hash and what members receive of each upload's c1.
func (p Params) AppendPoly(dst []byte, poly ring.Poly) []byte {
	dst = slices.Grow(dst, p.PolySize()) // once, not by doubling
	for _, row := range poly.Coeffs[:p.Level()+1] {
		for _, c := range row {
			dst = binary.LittleEndian.AppendUint64(dst, c)
		}
	}
	return dst
}

// DecodePoly decodes AppendPoly's encoding into out (a polynomial at the
// protocol level), checking the length and that every residue is reduced.
func (p Params) DecodePoly(b []byte, out ring.Poly) error {
	if len(b) != p.PolySize() {
		return fmt.Errorf("%w polynomial: %d bytes, want %d", ErrMalformed, len(b), p.PolySize())
	}
	if out.Level() < p.Level() || out.N() != p.N() {
		return fmt.Errorf("polynomial: the target does not fit the parameters")
	}
	n := p.N()
	for j, q := range p.Q()[:p.Level()+1] {
		row := out.Coeffs[j]
		for i := range row {
			c := binary.LittleEndian.Uint64(b[8*(j*n+i):])
			if c >= q {
				return fmt.Errorf("%w polynomial: residue %d of prime %d is not reduced", ErrMalformed, i, j)
			}
			row[i] = c
		}
	}
	return nil
}

// ProofKey returns the key of the upload proofs (protocol/zk) under the
// committee key pk: the ring at the protocol level and pk's second
// component.
func (p Params) ProofKey(pk *rlwe.PublicKey) (*zk.Key, error) {
	return zk.NewKey(p.RingQ().AtLevel(p.Level()), pk.Value[1].Q)
}
