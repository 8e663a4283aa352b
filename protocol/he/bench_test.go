package he

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
)

// packedLen is the packed statistics length for d features and k classes.
func packedLen(d, k int) int { return d*(d+1)/2 + k*d + k }

// BenchmarkOwnerShare: encode + encrypt an owner's packed statistics
// (K = 10 classes) under the committee key, and marshal them for upload.
func BenchmarkOwnerShare(b *testing.B) {
	p := params(b)
	kp := GenerateKeyPair(p)
	for _, d := range []int{8, 50, 100, 784} {
		n := packedLen(d, 10)
		b.Run(fmt.Sprintf("d=%d/cts=%d", d, p.Chunks(n)), func(b *testing.B) {
			vals := randVec(rand.New(rand.NewPCG(1, 2)), n, 1<<40)
			enc, _ := NewEncryptor(p, kp.Public)
			cts := p.NewCiphertexts(p.Chunks(n))
			buf := make([]byte, 0, p.Codecs().Ciphertext.Size())
			for b.Loop() {
				for i, ct := range cts {
					if err := enc.Encrypt(p.Chunk(vals, i), ct); err != nil {
						b.Fatal(err)
					}
					buf = p.Codecs().Ciphertext.Append(buf[:0], ct)
				}
			}
		})
	}
}

// BenchmarkEncryptPrepared: one ciphertext (d = 50) encrypted fresh, and
// over an encryption of zero prepared ahead (the prepared one's cost is
// outside the timer: an owner makes it between jobs).
func BenchmarkEncryptPrepared(b *testing.B) {
	p := params(b)
	kp := GenerateKeyPair(p)
	vals := randVec(rand.New(rand.NewPCG(1, 2)), packedLen(50, 1), 1<<40)
	for _, prepared := range []bool{false, true} {
		b.Run(fmt.Sprintf("prepared=%v", prepared), func(b *testing.B) {
			enc, _ := NewEncryptor(p, kp.Public)
			for b.Loop() {
				if prepared {
					b.StopTimer()
					enc.Prepare()
					b.StartTimer()
				}
				if _, err := enc.EncryptVector(vals); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAggregatePerCiphertext: what the proxy does per uploaded
// ciphertext: validate + decode into a preallocated ciphertext, add to the sum.
func BenchmarkAggregatePerCiphertext(b *testing.B) {
	p := params(b)
	kp := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, kp.Public)
	cts, _ := enc.EncryptVector([]int64{1, 2, 3})
	wire := p.Codecs().Ciphertext.Marshal(cts[0])
	sum, tmp := p.NewCiphertext(), p.NewCiphertext()
	b.SetBytes(int64(len(wire)))
	for b.Loop() {
		if err := p.Codecs().Ciphertext.UnmarshalInto(wire, tmp); err != nil {
			b.Fatal(err)
		}
		p.AddInto(sum, tmp)
	}
}

// BenchmarkKeySwitchShare: one member's share for one ciphertext, with its
// noise share folded in: over a fresh encryption of zero under the user's
// key (a user's first job) and over one prepared after the last switch.
func BenchmarkKeySwitchShare(b *testing.B) {
	p := params(b)
	for _, c := range []Committee{{N: 1, Threshold: 1}, {N: 3, Threshold: 2}} {
		for _, prepared := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d_t=%d/prepared=%v", c.N, c.Threshold, prepared), func(b *testing.B) {
				members, cpk := committee(b, p, c)
				user := GenerateKeyPair(p)
				enc, _ := NewEncryptor(p, cpk)
				cts, _ := enc.EncryptVector(randVec(rand.New(rand.NewPCG(1, 2)), p.Slots(), 1<<40))
				noise := randVec(rand.New(rand.NewPCG(3, 4)), p.Slots(), 1<<30)
				active := c.Points()[:c.Threshold]
				for b.Loop() {
					if prepared {
						b.StopTimer()
						members[0].PrepareSwitch(1)
						b.StartTimer()
					}
					if _, err := members[0].KeySwitchShare(cts[0], user.Public, active, noise); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkCombineAndDecrypt: the proxy combines t shares and unmasks; the
// user decrypts and decodes one ciphertext.
func BenchmarkCombineAndDecrypt(b *testing.B) {
	p := params(b)
	members, cpk := committee(b, p, Committee{N: 3, Threshold: 2})
	user := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, cpk)
	cts, _ := enc.EncryptVector([]int64{1, 2, 3})
	active := []Point{1, 2}
	var shares []*mhe.PublicKeySwitchShare
	for _, pt := range active {
		s, _ := members[pt-1].KeySwitchShare(cts[0], user.Public, active, nil)
		shares = append(shares, s)
	}
	mask, _ := p.NewMask(nil)
	plain := NewPlain(p)
	dec := NewDecryptor(p, user.Secret)
	b.Run("combine+unmask", func(b *testing.B) {
		for b.Loop() {
			out, err := CombineKeySwitch(p, cts[0], shares)
			if err != nil {
				b.Fatal(err)
			}
			if err := plain.Unmask(out, mask); err != nil {
				b.Fatal(err)
			}
		}
	})
	out, _ := CombineKeySwitch(p, cts[0], shares)
	b.Run("decrypt", func(b *testing.B) {
		for b.Loop() {
			if _, err := dec.DecryptSwitched([]*rlwe.Ciphertext{out}, p.Slots()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mask", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.NewMask(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFlooding: one member's flooding polynomial for a key-switch share
// (crypto/rand, 121-bit integers, reduction into the 4 primes, NTT), the
// part of BenchmarkKeySwitchShare that lattigo's Gaussian used to do.
func BenchmarkFlooding(b *testing.B) {
	p := params(b)
	rq := p.RingQ().AtLevel(p.Level())
	f, err := newFlooder(crand.Reader, SmudgingLog2, p.N())
	if err != nil {
		b.Fatal(err)
	}
	poly := rq.NewPoly()
	b.Run("sample", func(b *testing.B) {
		for b.Loop() {
			if err := f.sample(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sample+reduce+ntt", func(b *testing.B) {
		for b.Loop() {
			if err := f.readPoly(rq, poly); err != nil {
				b.Fatal(err)
			}
			rq.NTT(poly, poly)
		}
	})
}
