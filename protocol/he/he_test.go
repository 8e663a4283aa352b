package he

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
)

var (
	paramsOnce sync.Once
	testParams Params
)

func params(t testing.TB) Params {
	t.Helper()
	paramsOnce.Do(func() {
		var err error
		if testParams, err = NewDefaultParams(); err != nil {
			panic(err)
		}
	})
	return testParams
}

func TestParams(t *testing.T) {
	p := params(t)
	// The moduli, checked independently of lattigo.
	T := new(big.Int).SetUint64(PlaintextModulus)
	q0 := new(big.Int).SetUint64(Q0)
	q1 := new(big.Int).SetUint64(Q1)
	q2 := new(big.Int).SetUint64(Q2)
	q3 := new(big.Int).SetUint64(Q3)
	for name, m := range map[string]*big.Int{"T": T, "q0": q0, "q1": q1, "q2": q2, "q3": q3} {
		if !m.ProbablyPrime(40) {
			t.Errorf("%s = %s is not prime", name, m)
		}
		if new(big.Int).Mod(m, big.NewInt(1<<14)).Int64() != 1 {
			t.Errorf("%s = %s is not 1 mod 2^14", name, m)
		}
	}
	if T.BitLen() != 60 || q0.BitLen() != 61 || q1.BitLen() != 45 || q2.BitLen() != 40 || q3.BitLen() != 55 || q0.Cmp(T) <= 0 {
		t.Errorf("bit lengths %d %d %d %d %d", T.BitLen(), q0.BitLen(), q1.BitLen(), q2.BitLen(), q3.BitLen())
	}
	// Q3 is the largest prime below 2^55 that is 1 mod 2^14.
	for c := new(big.Int).Add(q3, big.NewInt(1<<14)); c.BitLen() <= 55; c.Add(c, big.NewInt(1<<14)) {
		if c.ProbablyPrime(20) {
			t.Errorf("%s is a larger prime than Q3 below 2^55, 1 mod 2^14", c)
		}
	}
	if len(map[uint64]bool{PlaintextModulus: true, Q0: true, Q1: true, Q2: true, Q3: true}) != 5 {
		t.Error("moduli not distinct")
	}
	if p.Slots() != 8192 || p.LogN() != 13 || p.LogQ() > MaxLogQ || p.LogQP() > 218 || p.PCount() != 0 || p.MaxLevel() != 3 {
		t.Errorf("slots %d logN %d logQ %.1f P %d levels %d", p.Slots(), p.LogN(), p.LogQ(), p.PCount(), p.MaxLevel())
	}
	if b := p.NoiseBudgetLog2(); b < 139 || b > 141 {
		t.Errorf("noise budget %.2f bits", b)
	}
	if _, err := ParamsByID("nope"); err == nil {
		t.Error("unknown parameter set accepted")
	}
	if len(p.Fingerprint()) != 64 {
		t.Error("fingerprint")
	}
}

func randVec(rng *rand.Rand, n int, lim int64) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = rng.Int64N(2*lim+1) - lim
	}
	return v
}

// committee runs the key ceremony in memory, parties in a slice.
func committee(t testing.TB, p Params, c Committee) ([]*Member, *rlwe.PublicKey) {
	t.Helper()
	members, pk, err := LocalCeremony(p, c, []byte("fedpca test ceremony seed 0001"))
	if err != nil {
		t.Fatal(err)
	}
	return members, pk
}

// TestProtocolRoundTrip: owners encrypt, the proxy sums, adds its noise and a
// mask, the active members key-switch with their noise, the proxy unmasks and
// the user decrypts the exact sum plus all the noise.
func TestProtocolRoundTrip(t *testing.T) {
	p := params(t)
	for _, tc := range []struct {
		c      Committee
		active []Point
	}{
		{Committee{N: 1, Threshold: 1}, []Point{1}},
		{Committee{N: 3, Threshold: 2}, []Point{1, 3}}, // member 2 absent
		{Committee{N: 3, Threshold: 3}, []Point{1, 2, 3}},
	} {
		t.Run(fmt.Sprintf("n%d_t%d", tc.c.N, tc.c.Threshold), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(tc.c.N*10+tc.c.Threshold)))
			members, cpk := committee(t, p, tc.c)
			user := GenerateKeyPair(p)
			const n = 8192 + 1000 // two ciphertexts
			const owners = 5
			want := make([]int64, n)
			sum := p.NewCiphertexts(p.Chunks(n))
			for o := 0; o < owners; o++ {
				v := randVec(rng, n, 1<<56)
				for i := range v {
					want[i] += v[i]
				}
				enc, err := NewEncryptor(p, cpk)
				if err != nil {
					t.Fatal(err)
				}
				cts, err := enc.EncryptVector(v)
				if err != nil {
					t.Fatal(err)
				}
				for i, ct := range cts {
					b := p.Codecs().Ciphertext.Marshal(ct)
					back, err := p.Codecs().Ciphertext.Unmarshal(b)
					if err != nil {
						t.Fatal(err)
					}
					p.AddInto(sum[i], back)
				}
			}
			plain := NewPlain(p)
			proxyNoise := randVec(rng, n, 1<<40)
			masks := make([][]uint64, len(sum))
			for i := range sum {
				if err := plain.AddInt64(sum[i], p.Chunk(proxyNoise, i)); err != nil {
					t.Fatal(err)
				}
				var err error
				if masks[i], err = p.NewMask(nil); err != nil {
					t.Fatal(err)
				}
				if err := plain.AddMask(sum[i], masks[i]); err != nil {
					t.Fatal(err)
				}
			}
			for i := range want {
				want[i] += proxyNoise[i]
			}
			switched := make([]*rlwe.Ciphertext, len(sum))
			for i := range sum {
				var shares []*mhe.PublicKeySwitchShare
				for _, pt := range tc.active {
					noise := randVec(rng, len(p.Chunk(want, i)), 1<<40)
					for j, x := range noise {
						want[i*p.Slots()+j] += x
					}
					if i == 1 {
						// The second ciphertext's noise share over an
						// encryption of zero prepared after the first.
						if !members[pt-1].PrepareSwitch(1) {
							t.Fatal("PrepareSwitch made none")
						}
					}
					s, err := members[pt-1].KeySwitchShare(sum[i], user.Public, tc.active, noise)
					if err != nil {
						t.Fatal(err)
					}
					if n := members[pt-1].userEnc.Prepared(); n != 0 {
						t.Fatalf("%d prepared encryptions of zero left after a share: each masks one share", n)
					}
					if members[pt-1].PrepareSwitch(0) {
						t.Fatal("PrepareSwitch made one with 0 wanted")
					}
					back, err := p.Codecs().KeySwitchShare.Unmarshal(p.Codecs().KeySwitchShare.Marshal(s))
					if err != nil {
						t.Fatal(err)
					}
					shares = append(shares, back)
				}
				var err error
				if switched[i], err = CombineKeySwitch(p, sum[i], shares); err != nil {
					t.Fatal(err)
				}
				if err := plain.Unmask(switched[i], masks[i]); err != nil {
					t.Fatal(err)
				}
			}
			got, err := NewDecryptor(p, user.Secret).DecryptSwitched(switched, n)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("slot %d: %d, want %d", i, got[i], want[i])
				}
			}
			// Without unmasking, the user sees uniform garbage, not the sum.
			masked, _ := NewDecryptor(p, user.Secret).DecryptSwitched([]*rlwe.Ciphertext{combineNoMask(t, p, sum[0], members, tc.active, user.Public)}, 100)
			same := 0
			for i := range masked {
				if masked[i] == want[i] {
					same++
				}
			}
			if same > 5 {
				t.Errorf("masked values equal the sum in %d of 100 slots", same)
			}
		})
	}
}

func combineNoMask(t *testing.T, p Params, ct *rlwe.Ciphertext, members []*Member, active []Point, pk *rlwe.PublicKey) *rlwe.Ciphertext {
	var shares []*mhe.PublicKeySwitchShare
	for _, pt := range active {
		s, err := members[pt-1].KeySwitchShare(ct, pk, active, nil)
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, s)
	}
	out, err := CombineKeySwitch(p, ct, shares)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestKeySwitchRefuses(t *testing.T) {
	p := params(t)
	members, cpk := committee(t, p, Committee{N: 3, Threshold: 2})
	user := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, cpk)
	cts, _ := enc.EncryptVector([]int64{1, 2, 3})
	for _, tc := range []struct {
		active []Point
		want   string
	}{
		{[]Point{1}, "exactly 2 members"},
		{[]Point{1, 2, 3}, "exactly 2 members"},
		{[]Point{1, 1}, "listed twice"},
		{[]Point{1, 4}, "not in the committee"},
		{[]Point{2, 3}, "not in the active set"},
	} {
		if _, err := members[0].KeySwitchShare(cts[0], user.Public, tc.active, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("active %v: %v, want %q", tc.active, err, tc.want)
		}
	}
	fresh, _ := NewMember(p, Committee{N: 3, Threshold: 2}, 1)
	if _, err := fresh.KeySwitchShare(cts[0], user.Public, []Point{1, 2}, nil); err == nil || !strings.Contains(err.Error(), "key ceremony") {
		t.Errorf("member without threshold share: %v", err)
	}
}

func TestMemberRestore(t *testing.T) {
	p := params(t)
	c := Committee{N: 3, Threshold: 2}
	members, cpk := committee(t, p, c)
	user := GenerateKeyPair(p)
	restored := make([]*Member, len(members))
	for i, m := range members {
		var err error
		if restored[i], err = RestoreMember(p, m.SecretState()); err != nil {
			t.Fatal(err)
		}
	}
	enc, _ := NewEncryptor(p, cpk)
	cts, _ := enc.EncryptVector([]int64{7, -8, 9})
	ks := combineNoMask(t, p, cts[0], restored, []Point{2, 3}, user.Public)
	got, _ := NewDecryptor(p, user.Secret).DecryptSwitched([]*rlwe.Ciphertext{ks}, 3)
	if got[0] != 7 || got[1] != -8 || got[2] != 9 {
		t.Fatalf("restored committee decrypts %v", got)
	}
	bad := members[0].SecretState()
	bad.SecretKey = bad.SecretKey[:100]
	if _, err := RestoreMember(p, bad); err == nil {
		t.Error("truncated secret key restored")
	}
}

func TestEncryptRange(t *testing.T) {
	p := params(t)
	kp := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, kp.Public)
	lim := p.MaxAbs()
	cts, err := enc.EncryptVector([]int64{lim, -lim, 0})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := NewDecryptor(p, kp.Secret).DecryptVector(cts, 3)
	if got[0] != lim || got[1] != -lim {
		t.Fatalf("extremes decrypt to %v", got)
	}
	if _, err := enc.EncryptVector([]int64{lim + 1}); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("out of range: %v", err)
	}
	if _, err := NewDecryptor(p, kp.Secret).DecryptVector(cts, 9000); err == nil {
		t.Error("wrong ciphertext count accepted")
	}
}

// TestCodecs: every codec produces lattigo's own bytes, round-trips, and
// rejects hostile input with an error that names the problem, leaving the
// target unchanged.
func TestCodecs(t *testing.T) {
	p := params(t)
	c := p.Codecs()
	kp := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, kp.Public)
	cts, _ := enc.EncryptVector([]int64{1, 2, 3})
	members, _ := committee(t, p, Committee{N: 2, Threshold: 1})
	pkShare, _ := members[0].PublicKeyShare([]byte("0123456789abcdef0123"))
	ks, _ := members[0].KeySwitchShare(cts[0], kp.Public, []Point{1}, []int64{5})
	dealt, _ := members[0].DealShamir()

	check := func(name string, lattigo []byte, ours []byte, decode func([]byte) error) {
		t.Helper()
		if !bytes.Equal(lattigo, ours) {
			t.Errorf("%s: encoding differs from lattigo's MarshalBinary", name)
		}
		if err := decode(ours); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	mb := func(b []byte, err error) []byte {
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	check("ciphertext", mb(cts[0].MarshalBinary()), c.Ciphertext.Marshal(cts[0]), func(b []byte) error { _, err := c.Ciphertext.Unmarshal(b); return err })
	check("public key", mb(kp.Public.MarshalBinary()), c.PublicKey.Marshal(kp.Public), func(b []byte) error { _, err := c.PublicKey.Unmarshal(b); return err })
	check("pk share", mb(pkShare.MarshalBinary()), c.PublicKeyShare.Marshal(pkShare), func(b []byte) error { _, err := c.PublicKeyShare.Unmarshal(b); return err })
	check("ks share", mb(ks.MarshalBinary()), c.KeySwitchShare.Marshal(ks), func(b []byte) error { _, err := c.KeySwitchShare.Unmarshal(b); return err })
	check("shamir", mb(dealt[2].MarshalBinary()), c.ShamirShare.Marshal(dealt[2]), func(b []byte) error { _, err := c.ShamirShare.Unmarshal(b); return err })
	check("secret key", mb(kp.Secret.MarshalBinary()), c.SecretKey.Marshal(kp.Secret), func(b []byte) error { _, err := c.SecretKey.Unmarshal(b); return err })

	// Decoded values equal the originals.
	back, _ := c.Ciphertext.Unmarshal(c.Ciphertext.Marshal(cts[0]))
	if !back.Equal(cts[0]) {
		t.Error("ciphertext round trip differs")
	}
	// 2 polynomials x 4 primes x 8192 coefficients x 8 bytes = 524,288 + headers.
	if c.Ciphertext.Size() < 524288 || c.Ciphertext.Size() > 525000 {
		t.Errorf("ciphertext size %d, expected about 524 KB", c.Ciphertext.Size())
	}

	good := c.Ciphertext.Marshal(cts[0])
	target := p.NewCiphertext()
	before := c.Ciphertext.Marshal(target)
	level0 := rlwe.NewCiphertext(p.Parameters, 1, 0)
	degree2 := rlwe.NewCiphertext(p.Parameters, 2, p.Level())
	hostile := map[string][]byte{
		"empty":            nil,
		"truncated":        good[:len(good)-1],
		"extended":         append(append([]byte{}, good...), 0),
		"header byte":      flip(good, 3),
		"level 0":          mb(level0.MarshalBinary()),
		"degree 2":         mb(degree2.MarshalBinary()),
		"coefficient >= q": setCoeff(t, c, good, Q0),
		"public key bytes": c.PublicKey.Marshal(kp.Public),
	}
	for name, b := range hostile {
		err := c.Ciphertext.UnmarshalInto(b, target)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "ciphertext") {
			t.Errorf("%s: %v", name, err)
		}
		if !bytes.Equal(c.Ciphertext.Marshal(target), before) {
			t.Errorf("%s: target changed by a failed decode", name)
		}
	}
	if err := c.Ciphertext.UnmarshalInto(setCoeff(t, c, good, Q0), target); err == nil || !strings.Contains(err.Error(), "not reduced modulo") {
		t.Errorf("unreduced coefficient: %v", err)
	}
}

func flip(b []byte, i int) []byte {
	out := append([]byte{}, b...)
	out[i] ^= 0x40
	return out
}

// setCoeff overwrites the first coefficient (the first run's first word).
func setCoeff(t *testing.T, c *Codecs, b []byte, v uint64) []byte {
	out := append([]byte{}, b...)
	off := c.Ciphertext.l.runs[0].off
	for i := 0; i < 8; i++ {
		out[off+i] = byte(v >> (8 * i))
	}
	return out
}

// TestPrepared: a vector encrypted over prepared encryptions of zero
// decrypts to its values, is encoded like a fresh encryption (the same
// metadata, accepted by the codec), and each prepared encryption of zero is
// used once, the rest of the vector being encrypted fresh, also when taken
// out of the encryptor that made them and given to another.
func TestPrepared(t *testing.T) {
	p := params(t)
	kp := GenerateKeyPair(p)
	enc, err := NewEncryptor(p, kp.Public)
	if err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ {
		if n := enc.Prepare(); n != want {
			t.Fatalf("Prepare: %d ready; want %d", n, want)
		}
	}
	// Kept apart from the encryptor that made them and given to another
	// under the same key, as an owner does.
	zs := enc.Take()
	if len(zs) != 2 || enc.Prepared() != 0 {
		t.Fatalf("Take: %d taken, %d left", len(zs), enc.Prepared())
	}
	if enc, err = NewEncryptor(p, kp.Public); err != nil {
		t.Fatal(err)
	}
	enc.Give(zs)
	rng := rand.New(rand.NewPCG(5, 6))
	v := randVec(rng, 3*p.Slots()-7, 1<<56) // three ciphertexts: two prepared, one fresh
	cts, err := enc.EncryptVector(v)
	if err != nil {
		t.Fatal(err)
	}
	if enc.Prepared() != 0 {
		t.Fatalf("%d prepared encryptions of zero left after using them", enc.Prepared())
	}
	if !cts[0].MetaData.Equal(cts[2].MetaData) {
		t.Fatalf("prepared metadata %+v, fresh %+v", *cts[0].MetaData, *cts[2].MetaData)
	}
	for i, ct := range cts {
		back, err := p.Codecs().Ciphertext.Unmarshal(p.Codecs().Ciphertext.Marshal(ct))
		if err != nil {
			t.Fatalf("ciphertext %d: %v", i, err)
		}
		cts[i] = back
	}
	got, err := NewDecryptor(p, kp.Secret).DecryptVector(cts, len(v))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, v) {
		t.Fatal("prepared encryption does not decrypt to its values")
	}
	// The same encryptor again, nothing prepared: fresh encryptions.
	again, err := enc.EncryptVector(v[:10])
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Value[1].Equal(&cts[0].Value[1]) || again[0].Value[1].Equal(&cts[1].Value[1]) {
		t.Fatal("an encryption of zero was used twice")
	}
}

// committeeSecret reconstructs the committee secret key (sum of the members' keys) to
// measure the noise before the key switch; only a test can do this.
func committeeSecret(t *testing.T, members []*Member) *rlwe.SecretKey {
	p := members[0].params
	sk := rlwe.NewSecretKey(p.Parameters)
	for _, m := range members {
		p.RingQP().Add(sk.Value, m.sk.Value, sk.Value)
	}
	return sk
}
