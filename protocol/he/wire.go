package he

import (
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
