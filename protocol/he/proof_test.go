package he

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
)

// TestEncryptorWitness: the encryptor is lattigo's public-key encryption
// (lattigo's decryptor decrypts it, its metadata is lattigo's), and the
// witness it keeps is the randomness of c1: c1 = a u + e1 with u ternary and
// |e1| <= 19; the upload proof made from it verifies.
func TestEncryptorWitness(t *testing.T) {
	p := params(t)
	_, cpk := committee(t, p, Committee{N: 3, Threshold: 2})
	kp := GenerateKeyPair(p)
	for name, pk := range map[string]*rlwe.PublicKey{"committee key": cpk, "user key": kp.Public} {
		enc, err := NewEncryptor(p, pk)
		if err != nil {
			t.Fatal(err)
		}
		enc.Prepare()
		vals := randVec(rand.New(rand.NewPCG(3, 4)), 2*p.Slots()-5, 1<<50) // one prepared, one fresh
		cts, wits, err := enc.EncryptWitnessed(vals)
		if err != nil {
			t.Fatal(err)
		}
		rq := p.RingQ().AtLevel(p.Level())
		for i, ct := range cts {
			w := wits[i]
			zeros, big := 0, 0
			for j := range w.U {
				if w.U[j] == 0 {
					zeros++
				}
				if w.U[j] < -1 || w.U[j] > 1 || w.E[j] < -19 || w.E[j] > 19 {
					t.Fatalf("%s ciphertext %d: witness coefficient %d out of bounds (%d, %d)", name, i, j, w.U[j], w.E[j])
				}
				if w.E[j] < -9 || w.E[j] > 9 {
					big++
				}
			}
			// u has P(0) = 1/3; e1 is Gaussian with sigma 3.2 (|e| > 9 about 0.5%).
			if zeros < 2400 || zeros > 3100 || big > 120 {
				t.Errorf("%s ciphertext %d: %d zeros in u, %d |e1| > 9", name, i, zeros, big)
			}
			u, e := polyOf(p, w.U), polyOf(p, w.E)
			rq.NTT(u, u)
			rq.NTT(e, e)
			c1 := rq.NewPoly()
			rq.MulCoeffsMontgomery(u, pk.Value[1].Q, c1)
			rq.Add(c1, e, c1)
			if !rq.Equal(c1, ct.Value[1]) {
				t.Fatalf("%s ciphertext %d: c1 != a u + e1", name, i)
			}
		}
		if name == "user key" {
			got, err := NewDecryptor(p, kp.Secret).DecryptVector(cts, len(vals))
			if err != nil || !slices.Equal(got, vals) {
				t.Fatalf("%s: does not decrypt (%v)", name, err)
			}
			dec := bgv.NewDecryptor(p.Parameters, kp.Secret)
			pt := dec.DecryptNew(cts[1])
			back := make([]int64, p.Slots())
			if err := bgv.NewEncoder(p.Parameters).Decode(pt, back); err != nil || !slices.Equal(back[:p.Slots()-5], vals[p.Slots():]) {
				t.Fatalf("%s: lattigo's decryptor disagrees (%v)", name, err)
			}
			continue
		}
		key, err := p.ProofKey(pk)
		if err != nil {
			t.Fatal(err)
		}
		c1 := []ring.Poly{cts[0].Value[1]}
		proof, err := key.ProveGroup(c1, []byte("bind"), wits[:1], nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := key.VerifyGroup(c1, []byte("bind"), proof); err != nil {
			t.Fatalf("the proof of an encryption refused: %v", err)
		}
	}
}

// polyOf builds a polynomial (coefficient domain) from small signed integers.
func polyOf(p Params, v []int8) ring.Poly {
	rq := p.RingQ().AtLevel(p.Level())
	out := rq.NewPoly()
	for j, s := range rq.SubRings[:rq.Level()+1] {
		for i, x := range v {
			if x >= 0 {
				out.Coeffs[j][i] = uint64(x)
			} else {
				out.Coeffs[j][i] = s.Modulus - uint64(-x)
			}
		}
	}
	return out
}

// TestSwitchDoublesRelaxedC1 shows why members switch 2 c1: the proofs
// accept c1 = (X - 1)^-1 (a u + e) (protocol/zk's TestRelaxedRelation),
// and c1 s then holds kappa (e_pk u + e s) / 2 mod Q with kappa =
// 2 (X - 1)^-1 = -(1 + X + ... + X^(N-1)): when the sum of the
// coefficients of e_pk u + e s is odd, every coefficient is odd before the
// halving and sits near Q/2 after it, where no flooding below Q/4 hides it,
// and the user learns a bit of the committee secret. The switch of 2 c1
// leaves the user (who knows u and e, colluding with that owner) only
// kappa (e_pk u + e s) plus the flooding: the secret-dependent part is far
// below the 2^121 flooding. The test looks for an odd case (it needs the
// committee secret s or e_pk to have an odd coefficient sum, and then half
// the encryptions give one).
func TestSwitchDoublesRelaxedC1(t *testing.T) {
	p := params(t)
	rq := p.RingQ().AtLevel(p.Level())
	n := p.N()
	ones := make([]int8, n)
	for i := range ones {
		ones[i] = -1
	}
	kappa := polyOf(p, ones) // 2 (X - 1)^-1, in NTT Montgomery form
	rq.NTT(kappa, kappa)
	rq.MForm(kappa, kappa)
	half := new(big.Int).ModInverse(big.NewInt(2), rq.Modulus())
	user := GenerateKeyPair(p)
	for attempt := range 64 {
		if attempt%8 == 0 && attempt > 0 {
			t.Logf("no odd case in 8 encryptions: another committee")
		}
		members, cpk, err := LocalCeremony(p, Committee{N: 3, Threshold: 2}, []byte(fmt.Sprintf("fedpca relaxed c1 test seed %04d", attempt/8)))
		if err != nil {
			t.Fatal(err)
		}
		enc, _ := NewEncryptor(p, cpk)
		zero := enc.encryptZero() // c1 = a u + e
		ct := p.NewCiphertext()   // c1 = kappa / 2 (a u + e), c0 = 0
		rq.MulCoeffsMontgomery(zero.ct.Value[1], kappa, ct.Value[1])
		rq.MulScalarBigint(ct.Value[1], half, ct.Value[1])
		// The user knows pk0 and u: 2 c1 s = kappa (a u + e) s = kappa
		// (-pk0 u + e_pk u + e s), so kappa pk0 u added leaves kappa
		// (e_pk u + e s).
		u := polyOf(p, zero.wit.U)
		rq.NTT(u, u)
		known := rq.NewPoly()
		rq.MulCoeffsMontgomery(u, cpk.Value[0].Q, known)
		rq.MulCoeffsMontgomery(known, kappa, known)
		// Had the members switched c1 itself, the user would see c1 s +
		// floods: c1 s + kappa pk0 u / 2 = kappa (e_pk u + e s) / 2.
		undoubled := rq.NewPoly()
		rq.MulCoeffsMontgomery(ct.Value[1], committeeSecret(t, members).Value.Q, undoubled)
		halfKnown := rq.NewPoly()
		rq.MulScalarBigint(known, half, halfKnown)
		rq.Add(undoubled, halfKnown, undoubled)
		if maxCentredLog2(p, undoubled) < 64 {
			continue // even: c1 s is small here
		}
		// Odd: the user of an undoubled switch would see ~Q/2.
		active := []Point{1, 2}
		var shares []*mhe.PublicKeySwitchShare
		for _, pt := range active {
			s, err := members[pt-1].KeySwitchShare(ct, user.Public, active, nil)
			if err != nil {
				t.Fatal(err)
			}
			shares = append(shares, s)
		}
		out, err := CombineKeySwitch(p, ct, shares)
		if err != nil {
			t.Fatal(err)
		}
		v := rlwe.NewDecryptor(p.Parameters, user.Secret).DecryptNew(out).Value
		rq.Add(v, known, v)
		got := maxCentredLog2(p, v)
		t.Logf("odd case after %d encryptions: c1 s would show 2^%.1f (Q = 2^%d); the switch of 2 c1, the known part removed, shows 2^%.2f (flooding 2^%d)",
			attempt+1, maxCentredLog2(p, undoubled), rq.Modulus().BitLen(), got, SmudgingLog2)
		if got > SmudgingLog2+2 {
			t.Errorf("the switch of a relaxed c1 shows 2^%.1f: more than the flooding", got)
		}
		return
	}
	t.Fatal("no committee and encryption gave an odd case in 64 tries")
}

// maxCentredLog2 returns log2 of the largest centred coefficient of an NTT
// polynomial.
func maxCentredLog2(p Params, v ring.Poly) float64 {
	rq := p.RingQ().AtLevel(p.Level())
	c := rq.NewPoly()
	rq.INTT(v, c)
	coeffs := make([]*big.Int, p.N())
	for i := range coeffs {
		coeffs[i] = new(big.Int)
	}
	rq.PolyToBigintCentered(c, 1, coeffs)
	m := 0.0
	for _, x := range coeffs {
		f, _ := new(big.Float).SetInt(x).Float64()
		if l := math.Log2(math.Abs(f)); l > m {
			m = l
		}
	}
	return m
}

func TestPolyCodec(t *testing.T) {
	p := params(t)
	_, cpk := committee(t, p, Committee{N: 3, Threshold: 2})
	enc, _ := NewEncryptor(p, cpk)
	cts, _ := enc.EncryptVector([]int64{1, 2, 3})
	b := p.AppendPoly(nil, cts[0].Value[1])
	if len(b) != p.PolySize() || p.PolySize() != 8*8192*4 {
		t.Fatalf("%d bytes, PolySize %d", len(b), p.PolySize())
	}
	out := p.RingQ().AtLevel(p.Level()).NewPoly()
	if err := p.DecodePoly(b, out); err != nil || !out.Equal(&cts[0].Value[1]) {
		t.Fatalf("round trip: %v", err)
	}
	if err := p.DecodePoly(b[1:], out); !errors.Is(err, ErrMalformed) {
		t.Errorf("short: %v", err)
	}
	bad := slices.Clone(b)
	for i := range 8 {
		bad[i] = 0xff
	}
	if err := p.DecodePoly(bad, out); !errors.Is(err, ErrMalformed) {
		t.Errorf("unreduced: %v", err)
	}
}
