package he

import (
	mrand "math/rand/v2"
	"slices"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// TestRerandomiseShortC1: owners who make up every upload of a sum can give
// it the short c1 = 1 (c0 = 0), which the proofs accept (the witness u = 0,
// e = 1). Under a threshold committee (2 of 3) a member's additive key is
// uniform mod Q, and its share of that sum, decrypted by a user colluding
// with the proxy, is twice the key plus the flooding: every bit of the key
// above the flooding (2^122 against Q = 2^201) shows. Re-randomised, the
// member multiplies c1 + a u instead, and what it sends is no longer the key
// plus the flooding. The re-randomised ciphertext decrypts as the original
// does, the same seed gives the same ciphertext, another seed another.
func TestRerandomiseShortC1(t *testing.T) {
	p := params(t)
	rq := p.RingQ().AtLevel(p.Level())
	members, cpk := committee(t, p, Committee{N: 3, Threshold: 2})
	user := GenerateKeyPair(p)
	active := []Point{1, 2}
	key, err := members[0].additiveKey(active)
	if err != nil {
		t.Fatal(err)
	}
	keyBits := maxCentredLog2(p, key.Value.Q)
	one := make([]int8, p.N())
	one[0] = 1
	crafted := p.NewCiphertext()
	crafted.Value[1] = polyOf(p, one)
	rq.NTT(crafted.Value[1], crafted.Value[1])

	// shown is what the member's share of ct, decrypted with the user's key,
	// holds beyond twice the crafted c1 times its additive key.
	shown := func(ct *rlwe.Ciphertext) float64 {
		t.Helper()
		s, err := members[0].KeySwitchShare(ct, user.Public, active, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := *s.Value[0].CopyNew()
		rq.MulCoeffsMontgomeryThenAdd(s.Value[1], user.Secret.Value.Q, v)
		twice := rq.NewPoly()
		rq.MulCoeffsMontgomery(crafted.Value[1], key.Value.Q, twice)
		rq.Sub(v, twice, v)
		rq.Sub(v, twice, v)
		return maxCentredLog2(p, v)
	}
	plain := shown(crafted)
	seed := make([]byte, 32)
	re, err := Rerandomise(p, cpk, seed, crafted)
	if err != nil {
		t.Fatal(err)
	}
	after := shown(re)
	t.Logf("additive key 2^%.1f; the share of c1 = 1 less twice the key: 2^%.1f (flooding 2^%d); re-randomised: 2^%.1f",
		keyBits, plain, SmudgingLog2, after)
	if keyBits < 190 {
		t.Fatalf("the additive key of a threshold member is 2^%.1f, not uniform mod Q: the test shows nothing", keyBits)
	}
	if plain > SmudgingLog2+2 {
		t.Fatalf("without re-randomisation the share is 2^%.1f away from twice the key: the short c1 did not reach it, the control fails", plain)
	}
	if after < 190 {
		t.Errorf("re-randomised, the share is within 2^%.1f of twice the key times the crafted c1: the crafted c1 still reaches it", after)
	}

	// The re-randomised encryption decrypts to the same plaintext.
	enc, _ := NewEncryptor(p, cpk)
	vals := randVec(mrand.New(mrand.NewPCG(7, 8)), p.Slots(), 1<<40)
	cts, _ := enc.EncryptVector(vals)
	re2, err := Rerandomise(p, cpk, seed, cts[0])
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewDecryptor(p, committeeSecret(t, members)).DecryptVector([]*rlwe.Ciphertext{re2}, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, vals) {
		t.Error("the re-randomised ciphertext does not decrypt to the plaintext")
	}
	again, _ := Rerandomise(p, cpk, seed, cts[0])
	other, _ := Rerandomise(p, cpk, append([]byte{1}, seed...), cts[0])
	if !polysEqual(again.Value, re2.Value) {
		t.Error("the same seed gave another ciphertext")
	}
	if polysEqual(other.Value, re2.Value) {
		t.Error("another seed gave the same ciphertext")
	}
	for _, bad := range []struct {
		pk   *rlwe.PublicKey
		seed []byte
		ct   *rlwe.Ciphertext
	}{{nil, seed, cts[0]}, {cpk, seed[:16], cts[0]}, {cpk, seed, nil}} {
		if _, err := Rerandomise(p, bad.pk, bad.seed, bad.ct); err == nil {
			t.Error("re-randomised with a missing key, a short seed or no ciphertext")
		}
	}
}

func polysEqual(a, b []ring.Poly) bool {
	for i := range a {
		if !a[i].Equal(&b[i]) {
			return false
		}
	}
	return true
}

func BenchmarkRerandomise(b *testing.B) {
	p := params(b)
	_, cpk := committee(b, p, Committee{N: 3, Threshold: 2})
	enc, _ := NewEncryptor(p, cpk)
	cts, _ := enc.EncryptVector(make([]int64, p.Slots()))
	seed := make([]byte, 32)
	for b.Loop() {
		if _, err := Rerandomise(p, cpk, seed, cts[0]); err != nil {
			b.Fatal(err)
		}
	}
}
