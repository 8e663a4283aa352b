package he

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
)

// ErrOutOfRange reports a plaintext value outside (-T/2, T/2).
var ErrOutOfRange = errors.New("value outside the plaintext range")

// Chunks returns how many ciphertexts a packed vector of n values needs.
func (p Params) Chunks(n int) int { return (n + p.Slots() - 1) / p.Slots() }

// chunk returns the i-th slice of Slots values of vals (the last one short).
func (p Params) chunk(vals []int64, i int) []int64 {
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
// An encryption is an encryption of zero plus the encoded plaintext
// (lattigo's Encrypt is EncryptZero then an addition), and nearly all of
// its cost is the encryption of zero, which does not depend on the
// plaintext: Prepare makes encryptions of zero ahead of time (an owner
// between jobs), and EncryptVector then only encodes and adds. Each
// prepared encryption of zero masks exactly one plaintext: it is taken out
// before it is used and never kept after, so a ciphertext made from one has
// the distribution of a fresh encryption.
type Encryptor struct {
	p     Params
	pk    *rlwe.PublicKey
	enc   *rlwe.Encryptor
	ecd   *bgv.Encoder
	pt    *rlwe.Plaintext
	zeros []*rlwe.Ciphertext // prepared encryptions of zero, each used once
}

// NewEncryptor returns an encryptor under pk (the committee key for owners,
// the user's key for CSP noise shares).
func NewEncryptor(p Params, pk *rlwe.PublicKey) (*Encryptor, error) {
	if pk == nil {
		return nil, errors.New("encryptor: no public key")
	}
	return &Encryptor{p: p, pk: pk, enc: bgv.NewEncryptor(p.Parameters, pk), ecd: bgv.NewEncoder(p.Parameters), pt: bgv.NewPlaintext(p.Parameters, p.Level())}, nil
}

// Encrypt encrypts at most Slots values (zero-padded) into ct.
func (e *Encryptor) Encrypt(vals []int64, ct *rlwe.Ciphertext) error {
	if err := e.encode(vals); err != nil {
		return err
	}
	if err := e.enc.Encrypt(e.pt, ct); err != nil {
		return fmt.Errorf("encrypt: %w", err)
	}
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
	n := e.p.Chunks(len(vals))
	out := make([]*rlwe.Ciphertext, n)
	for i := range out {
		var err error
		if out[i], err = e.encryptNew(e.p.chunk(vals, i)); err != nil {
			return nil, fmt.Errorf("chunk %d: %w", i, err)
		}
	}
	return out, nil
}

// encryptNew encrypts at most Slots values (zero-padded) into a new
// ciphertext, over a prepared encryption of zero if there is one.
func (e *Encryptor) encryptNew(vals []int64) (*rlwe.Ciphertext, error) {
	ct, err := e.takeZero()
	if err != nil {
		return nil, err
	}
	return ct, e.addPlain(vals, ct)
}

// takeZero returns a prepared encryption of zero, taken out of the
// encryptor (it masks one plaintext), or a fresh one when none is ready.
func (e *Encryptor) takeZero() (*rlwe.Ciphertext, error) {
	k := len(e.zeros)
	if k == 0 {
		ct := e.p.newCiphertext()
		if err := e.enc.EncryptZero(ct); err != nil {
			return nil, fmt.Errorf("encrypt: %w", err)
		}
		return ct, nil
	}
	ct := e.zeros[k-1]
	e.zeros[k-1], e.zeros = nil, e.zeros[:k-1]
	return ct, nil
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
func (e *Encryptor) Prepare() (int, error) {
	ct := e.p.newCiphertext()
	if err := e.enc.EncryptZero(ct); err != nil {
		return len(e.zeros), fmt.Errorf("prepare: %w", err)
	}
	e.zeros = append(e.zeros, ct)
	return len(e.zeros), nil
}

// Prepared returns how many encryptions of zero are ready.
func (e *Encryptor) Prepared() int { return len(e.zeros) }

// Take removes the prepared encryptions of zero from the encryptor and
// returns them, for a caller that keeps them apart from the encryptor (an
// owner holds its own and borrows an encryptor only to use them: an
// encryptor's buffers and samplers are about 1.4 MB, a ciphertext 393 KB).
func (e *Encryptor) Take() []*rlwe.Ciphertext {
	zs := e.zeros
	e.zeros = nil
	return zs
}

// Give hands back encryptions of zero that Take returned from an encryptor
// under the same public key; EncryptVector uses them before encrypting
// afresh. The caller must not keep them: each masks one plaintext.
func (e *Encryptor) Give(zs []*rlwe.Ciphertext) { e.zeros = append(e.zeros, zs...) }

// ShallowCopy returns an encryptor for another goroutine (with no prepared
// encryptions of zero).
func (e *Encryptor) ShallowCopy() *Encryptor {
	return &Encryptor{p: e.p, pk: e.pk, enc: e.enc.ShallowCopy(), ecd: e.ecd.ShallowCopy(), pt: bgv.NewPlaintext(e.p.Parameters, e.p.Level())}
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

// AddMask sets ct += mask and SubMask sets ct -= mask, for a mask of Slots
// residues mod T.
func (e *Plain) AddMask(ct *rlwe.Ciphertext, mask []uint64) error { return e.mask(ct, mask, false) }

// SubMask removes a mask added with AddMask (under any key: the mask is a
// plaintext).
func (e *Plain) SubMask(ct *rlwe.Ciphertext, mask []uint64) error { return e.mask(ct, mask, true) }

func (e *Plain) mask(ct *rlwe.Ciphertext, mask []uint64, sub bool) error {
	if len(mask) != e.p.Slots() {
		return fmt.Errorf("mask of %d values, want %d", len(mask), e.p.Slots())
	}
	t := e.p.T()
	for i, m := range mask {
		if m >= t {
			return fmt.Errorf("mask value %d at index %d is not reduced mod T", m, i)
		}
	}
	if err := e.ecd.Encode(mask, e.pt); err != nil {
		return fmt.Errorf("mask: %w", err)
	}
	rq := e.p.RingQ().AtLevel(e.p.Level())
	if sub {
		rq.Sub(ct.Value[0], e.pt.Value, ct.Value[0])
	} else {
		rq.Add(ct.Value[0], e.pt.Value, ct.Value[0])
	}
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
