package he

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
	"github.com/tuneinsight/lattigo/v5/utils/sampling"
)

// ErrOutOfRange reports a plaintext value outside (-T/2, T/2).
var ErrOutOfRange = errors.New("value outside the plaintext range")

// Chunks returns how many ciphertexts a packed vector of n values needs.
func (p Params) Chunks(n int) int { return (n + p.Slots() - 1) / p.Slots() }

// Chunk returns the i-th slice of Slots values of vals (the last one
// short): what the i-th ciphertext of a packed vector holds.
func (p Params) Chunk(vals []int64, i int) []int64 {
	lo := i * p.Slots()
	return vals[lo:min(lo+p.Slots(), len(vals))]
}

func (p Params) checkRange(vals []int64) error {
	lim := p.MaxAbs()
	for i, v := range vals {
		if v > lim || v < -lim {
			return fmt.Errorf("value %d at index %d: %w (|x| <= %d)", v, i, ErrOutOfRange, lim)
		}
	}
	return nil
}

// Encryptor encrypts packed int64 vectors under one public key. Not safe
// for concurrent use.
//
// It is lattigo's public-key encryption written out so that the randomness
// of each ciphertext's second component is kept: c0 = pk0 u + e0 + Delta m,
// c1 = pk1 u + e1 with u ternary and e0, e1 from lattigo's Gaussian sampler
// (sigma 3.2, truncated at 19.2), drawn by lattigo's samplers from a PRNG
// keyed by crypto/rand, exactly as lattigo's Encrypt does
// (TestEncryptorIsLattigos). The witness (u, e1) is what an owner proves
// c1 with (protocol/zk); it decrypts the ciphertext, so it never leaves
// the owner and is dropped once the proof is made.
//
// An encryption is an encryption of zero plus the encoded plaintext, and
// nearly all of its cost is the encryption of zero, which does not depend on
// the plaintext: Prepare makes encryptions of zero ahead of time (an owner
// between jobs), and EncryptVector then only encodes and adds. Each
// prepared encryption of zero masks exactly one plaintext: it is taken out
// before it is used and never kept after, so a ciphertext made from one has
// the distribution of a fresh encryption.
type Encryptor struct {
	p      Params
	pk     *rlwe.PublicKey
	ecd    *bgv.Encoder
	pt     *rlwe.Plaintext
	ts, gs ring.Sampler // ternary (u) and Gaussian (e0, e1), over a PRNG keyed by crypto/rand
	buf    ring.Poly
	zeros  []Zero // prepared encryptions of zero, each used once
}

// Zero is an encryption of zero with the witness of its second component.
// It masks one plaintext: use it once.
type Zero struct {
	ct  *rlwe.Ciphertext
	wit zk.Witness
}

// NewEncryptor returns an encryptor under pk (the committee key for owners,
// the user's key for CSP noise shares).
func NewEncryptor(p Params, pk *rlwe.PublicKey) (*Encryptor, error) {
	if pk == nil {
		return nil, errors.New("encryptor: no public key")
	}
	e := &Encryptor{p: p, pk: pk, ecd: bgv.NewEncoder(p.Parameters), pt: bgv.NewPlaintext(p.Parameters, p.Level())}
	if err := e.newSamplers(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Encryptor) newSamplers() error {
	prng, err := sampling.NewPRNG()
	if err != nil {
		return fmt.Errorf("encryptor: %w", err)
	}
	rq := e.p.RingQ().AtLevel(e.p.Level())
	if e.ts, err = ring.NewSampler(prng, rq, e.p.Xs(), false); err != nil {
		return fmt.Errorf("encryptor: %w", err)
	}
	if e.gs, err = ring.NewSampler(prng, rq, e.p.Xe(), false); err != nil {
		return fmt.Errorf("encryptor: %w", err)
	}
	e.buf = rq.NewPoly()
	return nil
}

// encryptZero makes a fresh encryption of zero and its witness.
func (e *Encryptor) encryptZero() Zero {
	p := e.p
	rq := p.RingQ().AtLevel(p.Level())
	ct := p.newCiphertext()
	wit := zk.Witness{}
	u := e.buf
	e.ts.AtLevel(p.Level()).Read(u)
	wit.U = small(u, rq)
	rq.NTT(u, u)
	rq.MulCoeffsMontgomery(u, e.pk.Value[0].Q, ct.Value[0])
	rq.MulCoeffsMontgomery(u, e.pk.Value[1].Q, ct.Value[1])
	for i := range 2 {
		e.gs.AtLevel(p.Level()).Read(u)
		if i == 1 {
			wit.E = small(u, rq)
		}
		rq.NTT(u, u)
		rq.Add(ct.Value[i], u, ct.Value[i])
	}
	return Zero{ct: ct, wit: wit}
}

// small reads a polynomial with coefficients in [-127, 127] (the same in
// every prime; the first prime's residues are read) as signed bytes.
func small(p ring.Poly, rq *ring.Ring) []int8 {
	q := rq.SubRings[0].Modulus
	out := make([]int8, len(p.Coeffs[0]))
	for i, c := range p.Coeffs[0] {
		if c > q/2 {
			out[i] = -int8(q - c)
		} else {
			out[i] = int8(c)
		}
	}
	return out
}

// Encrypt encrypts at most Slots values (zero-padded) into ct.
func (e *Encryptor) Encrypt(vals []int64, ct *rlwe.Ciphertext) error {
	z := e.encryptZero()
	if err := e.addPlain(vals, z.ct); err != nil {
		return err
	}
	ct.Copy(z.ct)
	return nil
}

// encode checks at most Slots values and encodes them (zero-padded) into
// the encryptor's plaintext.
func (e *Encryptor) encode(vals []int64) error {
	if len(vals) > e.p.Slots() {
		return fmt.Errorf("encrypt: %d values exceed %d slots", len(vals), e.p.Slots())
	}
	if err := e.p.checkRange(vals); err != nil {
		return fmt.Errorf("encrypt: %w", err)
	}
	if err := e.ecd.Encode(vals, e.pt); err != nil {
		return fmt.Errorf("encrypt: encode: %w", err)
	}
	return nil
}

// EncryptVector encrypts a packed vector into Chunks(len(vals)) ciphertexts,
// using the prepared encryptions of zero first (see Prepare).
func (e *Encryptor) EncryptVector(vals []int64) ([]*rlwe.Ciphertext, error) {
	cts, _, err := e.EncryptWitnessed(vals)
	return cts, err
}

// EncryptWitnessed is EncryptVector that also returns the witness of each
// ciphertext's second component, for its proof (protocol/zk).
func (e *Encryptor) EncryptWitnessed(vals []int64) ([]*rlwe.Ciphertext, []zk.Witness, error) {
	n := e.p.Chunks(len(vals))
	out := make([]*rlwe.Ciphertext, n)
	wits := make([]zk.Witness, n)
	for i := range out {
		z := e.takeZero()
		if err := e.addPlain(e.p.Chunk(vals, i), z.ct); err != nil {
			return nil, nil, fmt.Errorf("chunk %d: %w", i, err)
		}
		out[i], wits[i] = z.ct, z.wit
	}
	return out, wits, nil
}

// takeZero returns a prepared encryption of zero, taken out of the
// encryptor (it masks one plaintext), or a fresh one when none is ready.
func (e *Encryptor) takeZero() Zero {
	k := len(e.zeros)
	if k == 0 {
		return e.encryptZero()
	}
	z := e.zeros[k-1]
	e.zeros[k-1], e.zeros = Zero{}, e.zeros[:k-1]
	return z
}

// addPlain sets ct, an encryption of zero, to an encryption of vals (at
// most Slots values, zero-padded), as lattigo's Encrypt adds the plaintext
// to its encryption of zero.
func (e *Encryptor) addPlain(vals []int64, ct *rlwe.Ciphertext) error {
	if err := e.encode(vals); err != nil {
		return err
	}
	if ct.IsNTT != e.pt.IsNTT {
		return errors.New("encrypt: the plaintext and the ciphertext are in different domains")
	}
	*ct.MetaData = *e.pt.MetaData // as lattigo's Encrypt: the ciphertext takes the plaintext's scale and layout
	e.p.RingQ().AtLevel(e.p.Level()).Add(ct.Value[0], e.pt.Value, ct.Value[0])
	return nil
}

// Prepare makes one more encryption of zero for a later EncryptVector and
// returns how many are ready. They live in memory only.
func (e *Encryptor) Prepare() int {
	e.zeros = append(e.zeros, e.encryptZero())
	return len(e.zeros)
}

// Prepared returns how many encryptions of zero are ready.
func (e *Encryptor) Prepared() int { return len(e.zeros) }

// Take removes the prepared encryptions of zero from the encryptor and
// returns them, for a caller that keeps them apart from the encryptor (an
// owner holds its own and borrows an encryptor only to use them: an
// encryptor's buffers and samplers are about 1.4 MB, a ciphertext 524 KB).
func (e *Encryptor) Take() []Zero {
	zs := e.zeros
	e.zeros = nil
	return zs
}

// Give hands back encryptions of zero that Take returned from an encryptor
// under the same public key; EncryptVector uses them before encrypting
// afresh. The caller must not keep them: each masks one plaintext.
func (e *Encryptor) Give(zs []Zero) { e.zeros = append(e.zeros, zs...) }

// ShallowCopy returns an encryptor for another goroutine (with no prepared
// encryptions of zero).
func (e *Encryptor) ShallowCopy() *Encryptor {
	c := &Encryptor{p: e.p, pk: e.pk, ecd: e.ecd.ShallowCopy(), pt: bgv.NewPlaintext(e.p.Parameters, e.p.Level())}
	if err := c.newSamplers(); err != nil {
		panic(err) // crypto/rand failed: nothing can be encrypted safely
	}
	return c
}

// NewCiphertext allocates a protocol ciphertext.
func (p Params) NewCiphertext() *rlwe.Ciphertext { return p.newCiphertext() }

// NewCiphertexts allocates n zero ciphertexts (the empty sum).
func (p Params) NewCiphertexts(n int) []*rlwe.Ciphertext {
	out := make([]*rlwe.Ciphertext, n)
	for i := range out {
		out[i] = p.newCiphertext()
	}
	return out
}

// AddInto sets sum += ct for ciphertexts of the protocol level. Safe for
// concurrent use on distinct sums.
func (p Params) AddInto(sum, ct *rlwe.Ciphertext) {
	rq := p.RingQ().AtLevel(p.Level())
	rq.Add(sum.Value[0], ct.Value[0], sum.Value[0])
	rq.Add(sum.Value[1], ct.Value[1], sum.Value[1])
}

// Plain adds and subtracts plaintext vectors to ciphertexts (DP noise
// shares, blinding masks). Not safe for concurrent use.
type Plain struct {
	p   Params
	ecd *bgv.Encoder
	pt  *rlwe.Plaintext
}

// NewPlain returns a plaintext evaluator.
func NewPlain(p Params) *Plain {
	return &Plain{p: p, ecd: bgv.NewEncoder(p.Parameters), pt: bgv.NewPlaintext(p.Parameters, p.Level())}
}

// AddInt64 sets ct += vals (at most Slots signed values in range).
func (e *Plain) AddInt64(ct *rlwe.Ciphertext, vals []int64) error {
	if len(vals) > e.p.Slots() {
		return fmt.Errorf("add plaintext: %d values exceed %d slots", len(vals), e.p.Slots())
	}
	if err := e.p.checkRange(vals); err != nil {
		return fmt.Errorf("add plaintext: %w", err)
	}
	if err := e.ecd.Encode(vals, e.pt); err != nil {
		return fmt.Errorf("add plaintext: %w", err)
	}
	e.p.RingQ().AtLevel(e.p.Level()).Add(ct.Value[0], e.pt.Value, ct.Value[0])
	return nil
}

// AddMask sets ct += mask, for a mask of Slots residues mod T.
func (e *Plain) AddMask(ct *rlwe.Ciphertext, mask []uint64) error { return e.mask(ct, mask, 1) }

// Unmask removes, from the key switch of a ciphertext, the mask added to it
// with AddMask before the switch (under any key: the mask is a plaintext);
// the switch doubled it (SwitchFactor).
func (e *Plain) Unmask(switched *rlwe.Ciphertext, mask []uint64) error {
	return e.mask(switched, mask, -SwitchFactor)
}

// mask sets ct += factor mask (mod T).
func (e *Plain) mask(ct *rlwe.Ciphertext, mask []uint64, factor int) error {
	if len(mask) != e.p.Slots() {
		return fmt.Errorf("mask of %d values, want %d", len(mask), e.p.Slots())
	}
	t := e.p.T()
	for i, m := range mask {
		if m >= t {
			return fmt.Errorf("mask value %d at index %d is not reduced mod T", m, i)
		}
	}
	scaled := mask
	if factor != 1 {
		scaled = make([]uint64, len(mask))
		k := uint64(factor)
		if factor < 0 {
			k = t - uint64(-factor)
		}
		for i, m := range mask {
			hi, lo := bits.Mul64(m, k)
			_, scaled[i] = bits.Div64(hi, lo, t)
		}
	}
	if err := e.ecd.Encode(scaled, e.pt); err != nil {
		return fmt.Errorf("mask: %w", err)
	}
	e.p.RingQ().AtLevel(e.p.Level()).Add(ct.Value[0], e.pt.Value, ct.Value[0])
	return nil
}

// NewMask draws Slots values uniform mod T from rnd (crypto/rand when nil),
// by rejection sampling on 60-bit words.
func (p Params) NewMask(rnd io.Reader) ([]uint64, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	br := bufio.NewReaderSize(rnd, 8*1024)
	t := p.T()
	shift := 64 - bits.Len64(t)
	out := make([]uint64, p.Slots())
	var buf [8]byte
	for i := range out {
		for {
			if _, err := io.ReadFull(br, buf[:]); err != nil {
				return nil, fmt.Errorf("mask: %w", err)
			}
			if v := binary.LittleEndian.Uint64(buf[:]) >> shift; v < t {
				out[i] = v
				break
			}
		}
	}
	return out, nil
}

// KeyPair is a user's HE key pair.
type KeyPair struct {
	Secret *rlwe.SecretKey
	Public *rlwe.PublicKey
}

// GenerateKeyPair makes a user key pair (lattigo's key generator draws from
// a PRNG keyed by crypto/rand).
func GenerateKeyPair(p Params) KeyPair {
	sk, pk := rlwe.NewKeyGenerator(p.Parameters).GenKeyPairNew()
	return KeyPair{Secret: sk, Public: pk}
}

// Decryptor decrypts and decodes signed values. Not safe for concurrent use.
type Decryptor struct {
	p   Params
	dec *rlwe.Decryptor
	ecd *bgv.Encoder
	pt  *rlwe.Plaintext
	buf []int64
}

// NewDecryptor returns a decryptor with the secret key sk.
func NewDecryptor(p Params, sk *rlwe.SecretKey) *Decryptor {
	return &Decryptor{p: p, dec: bgv.NewDecryptor(p.Parameters, sk), ecd: bgv.NewEncoder(p.Parameters), pt: bgv.NewPlaintext(p.Parameters, p.Level()), buf: make([]int64, p.Slots())}
}

// DecryptSwitched decrypts key-switched ciphertexts, which encrypt twice a
// packed vector of n values (SwitchFactor), and returns the vector: each
// decrypted value times the inverse of 2 mod T, as a signed integer in
// [-(T+1)/2, (T-3)/2].
func (d *Decryptor) DecryptSwitched(cts []*rlwe.Ciphertext, n int) ([]int64, error) {
	vals, err := d.DecryptVector(cts, n)
	if err != nil {
		return nil, err
	}
	t := d.p.T()
	half := (t + 1) / SwitchFactor // the inverse of 2 mod T (T odd)
	for i, v := range vals {
		r := uint64(v)
		if v < 0 {
			r = t - uint64(-v)
		}
		hi, lo := bits.Mul64(r, half)
		_, r = bits.Div64(hi, lo, t)
		vals[i] = d.p.centre(r)
	}
	return vals, nil
}

// centre maps a residue mod T to the signed representative DecryptVector
// returns, in [-(T+1)/2, (T-3)/2].
func (p Params) centre(r uint64) int64 {
	if r > uint64(p.MaxAbs()) {
		return -int64(p.T() - r)
	}
	return int64(r)
}

// DecryptVector decrypts ciphertexts holding a packed vector of n values and
// returns them as signed integers in [-(T+1)/2, (T-3)/2].
func (d *Decryptor) DecryptVector(cts []*rlwe.Ciphertext, n int) ([]int64, error) {
	if want := d.p.Chunks(n); len(cts) != want {
		return nil, fmt.Errorf("decrypt: %d ciphertexts for %d values, want %d", len(cts), n, want)
	}
	out := make([]int64, 0, n)
	for i, ct := range cts {
		d.dec.Decrypt(ct, d.pt)
		if err := d.ecd.Decode(d.pt, d.buf); err != nil {
			return nil, fmt.Errorf("decrypt chunk %d: %w", i, err)
		}
		out = append(out, d.buf[:min(d.p.Slots(), n-len(out))]...)
	}
	return out, nil
}
