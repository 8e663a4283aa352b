package zk

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"math"
	"math/big"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/utils/sampling"
)

// testSetup is a committee-like key at N = 2^13 over the moduli of the
// protocol's parameters (protocol/he imports this package, so the test
// builds its ring from lattigo directly).
type testSetup struct {
	params rlwe.Parameters
	rq     *ring.Ring
	sk     *rlwe.SecretKey
	pk     *rlwe.PublicKey
	key    *Key
}

func newSetup(t testing.TB) *testSetup {
	t.Helper()
	params, err := rlwe.NewParametersFromLiteral(rlwe.ParametersLiteral{
		LogN:    13,
		Q:       []uint64{2305843009213317121, 35184371613697, 1099511480321, 36028797018652673},
		NTTFlag: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	sk, pk := rlwe.NewKeyGenerator(params).GenKeyPairNew()
	rq := params.RingQ().AtLevel(params.MaxLevel())
	key, err := NewKey(rq, pk.Value[1].Q)
	if err != nil {
		t.Fatal(err)
	}
	return &testSetup{params: params, rq: rq, sk: sk, pk: pk, key: key}
}

// encrypt makes c1 = a u + e1 (NTT domain) as a public-key encryption
// does, with u ternary and e1 from lattigo's Gaussian sampler, and returns
// the witness.
func (s *testSetup) encrypt(t testing.TB) (ring.Poly, Witness) {
	t.Helper()
	prng, err := sampling.NewPRNG()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := ring.NewSampler(prng, s.rq, ring.Ternary{P: 2.0 / 3}, false)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := ring.NewSampler(prng, s.rq, s.params.Xe(), false)
	if err != nil {
		t.Fatal(err)
	}
	u, e := s.rq.NewPoly(), s.rq.NewPoly()
	ts.Read(u)
	gs.Read(e)
	w := Witness{U: s.signed(u), E: s.signed(e)}
	c1 := s.rq.NewPoly()
	s.rq.NTT(u, u)
	s.rq.NTT(e, e)
	s.rq.MulCoeffsMontgomery(u, s.pk.Value[1].Q, c1)
	s.rq.Add(c1, e, c1)
	return c1, w
}

// signed reads a small polynomial's coefficients as signed integers.
func (s *testSetup) signed(p ring.Poly) []int8 {
	q := s.rq.SubRings[0].Modulus
	out := make([]int8, s.rq.N())
	for i, c := range p.Coeffs[0] {
		if c > q/2 {
			out[i] = -int8(q - c)
		} else {
			out[i] = int8(c)
		}
	}
	return out
}

// Prove and Verify are a proof of one ciphertext, for the tests.
func (k *Key) Prove(c1 ring.Poly, binding []byte, w Witness, rnd io.Reader) (*Proof, error) {
	return k.ProveGroup([]ring.Poly{c1}, binding, []Witness{w}, rnd)
}

func (k *Key) Verify(c1 ring.Poly, binding []byte, p *Proof) error {
	return k.VerifyGroup([]ring.Poly{c1}, binding, p)
}

func TestHonestProof(t *testing.T) {
	s := newSetup(t)
	c1, w := s.encrypt(t)
	bind := []byte("job 1 owner a ct 0")
	p, err := s.key.Prove(c1, bind, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.key.Verify(c1, bind, p); err != nil {
		t.Fatalf("honest proof refused: %v", err)
	}
	b := p.Marshal()
	if len(b) != Size(s.rq.N(), 1) {
		t.Fatalf("encoded proof of %d bytes, Size says %d", len(b), Size(s.rq.N(), 1))
	}
	q, err := Unmarshal(b, s.rq.N(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.key.Verify(c1, bind, q); err != nil {
		t.Fatalf("decoded proof refused: %v", err)
	}
	if string(q.Marshal()) != string(b) {
		t.Fatal("the encoding does not round-trip")
	}
	t.Logf("proof: %d bytes", len(b))
}

// TestTamperedProofs: a proof verifies only for its own c1 and binding, and
// any change to a response or the seed is refused.
func TestTamperedProofs(t *testing.T) {
	s := newSetup(t)
	c1, w := s.encrypt(t)
	bind := []byte("job 1 owner a ct 0")
	p, err := s.key.Prove(c1, bind, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := s.encrypt(t)
	cases := map[string]func() error{
		"another binding (owner)": func() error { return s.key.Verify(c1, []byte("job 1 owner b ct 0"), p) },
		"another c1":              func() error { return s.key.Verify(other, bind, p) },
		"a response changed": func() error {
			q := *p
			q.Zu[3] = append([]int32(nil), p.Zu[3]...)
			q.Zu[3][100] ^= 1
			return s.key.Verify(c1, bind, &q)
		},
		"the seed changed": func() error {
			q := *p
			q.Seed[0] ^= 1
			return s.key.Verify(c1, bind, &q)
		},
		"a response out of bounds": func() error {
			q := *p
			q.Ze[0] = append([]int32(nil), p.Ze[0]...)
			one, _ := ShapeOf(1)
			q.Ze[0][7] = one.ZeMax
			return s.key.Verify(c1, bind, &q)
		},
	}
	for name, verify := range cases {
		if err := verify(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	// Another key (another committee) refuses it too.
	s2 := newSetup(t)
	if err := s2.key.Verify(c1, bind, p); !errors.Is(err, ErrInvalid) {
		t.Errorf("another committee key: got %v, want ErrInvalid", err)
	}
}

// TestCraftedC1Refused: the audit's attack ciphertext, c1 = K T^-1 with
// K = 2^124, has no short preimage; a prover that answers with the witness
// of an honest encryption (the best it has) is refused, and so is one that
// answers with the zero witness.
func TestCraftedC1Refused(t *testing.T) {
	s := newSetup(t)
	T := new(ringBig).SetUint64(1152921504606830593)
	Q := s.rq.Modulus()
	k := new(ringBig).Lsh(new(ringBig).SetInt64(1), 124)
	tinv := new(ringBig).ModInverse(T, Q)
	kt := new(ringBig).Mul(k, tinv)
	kt.Mod(kt, Q)
	crafted := s.rq.NewPoly()
	coeffs := make([]*ringBig, s.rq.N())
	for i := range coeffs {
		coeffs[i] = new(ringBig)
	}
	coeffs[0].Set(kt)
	s.rq.SetCoefficientsBigint(coeffs, crafted)
	s.rq.NTT(crafted, crafted)
	_, honest := s.encrypt(t)
	zero := Witness{U: make([]int8, s.rq.N()), E: make([]int8, s.rq.N())}
	for name, w := range map[string]Witness{"honest witness": honest, "zero witness": zero} {
		p, err := s.key.Prove(crafted, []byte("b"), w, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err) // the prover does not check the relation
		}
		if err := s.key.Verify(crafted, []byte("b"), p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: crafted c1 accepted (%v)", name, err)
		}
	}
}

// TestRelaxedRelation shows why members switch 2 c1 only: c1 =
// (X - 1)^-1 (a u + e) has no short preimage, but 2 c1 has one, and a
// prover that knows (u, e) answers every monomial challenge (X^k c1 = c1 +
// (1 + X + ... + X^(k-1)) (a u + e)): the proof is accepted.
func TestRelaxedRelation(t *testing.T) {
	s := newSetup(t)
	base, w := s.encrypt(t) // a u + e
	// c1 = (X - 1)^-1 base, with (X - 1)^-1 = -(1 + X + ... + X^(N-1)) / 2.
	n := s.rq.N()
	inv := make([]*ringBig, n)
	Q := s.rq.Modulus()
	half := new(ringBig).ModInverse(new(ringBig).SetInt64(2), Q)
	minusHalf := new(ringBig).Sub(Q, half)
	for i := range inv {
		inv[i] = new(ringBig).Set(minusHalf)
	}
	invP := s.rq.NewPoly()
	s.rq.SetCoefficientsBigint(inv, invP)
	s.rq.NTT(invP, invP)
	s.rq.MForm(invP, invP)
	c1 := s.rq.NewPoly()
	s.rq.MulCoeffsMontgomery(base, invP, c1)
	// Check: (X - 1) c1 = base.
	check := s.rq.NewPoly()
	s.rq.INTT(c1, check)
	xc := s.rq.NewPoly()
	s.rq.MultByMonomial(check, 1, xc)
	s.rq.Sub(xc, check, xc)
	s.rq.NTT(xc, xc)
	if !s.rq.Equal(xc, base) {
		t.Fatal("(X - 1) c1 != a u + e")
	}
	p := relaxedProof(s, c1, []byte("b"), w)
	if err := s.key.Verify(c1, []byte("b"), p); err != nil {
		t.Fatalf("the relaxed prover was refused (%v): the soundness argument would be stronger than BKLP14's", err)
	}
}

// relaxedProof answers every challenge for c1 = (X - 1)^-1 (a u + e): it
// commits to w = -c1 (masks zero) and responds z = (1 + ... + X^(k-1)) (u, e).
func relaxedProof(s *testSetup, c1 ring.Poly, bind []byte, wit Witness) *Proof {
	n := s.rq.N()
	prefix, err := s.key.prefix([]ring.Poly{c1}, bind)
	if err != nil {
		panic(err)
	}
	w := s.rq.NewPoly()
	s.rq.Neg(c1, w)
	h := sha256.New()
	s.key.writePoly(h, w, nil)
	digests := make([][32]byte, Reps)
	for r := range digests {
		copy(digests[r][:], h.Sum(nil))
	}
	p := &Proof{Seed: seed(prefix, digests), G: 1, Zu: make([][]int32, Reps), Ze: make([][]int32, Reps)}
	cs := s.key.challenges(p.Seed, Reps)
	geo := func(v []int8, k int) []int32 { // (1 + X + ... + X^(k-1)) v, negacyclic
		out := make([]int64, n)
		for l := range k {
			for i := range n {
				j, neg := monomialTerm(i, l, n)
				if neg {
					out[i] -= int64(v[j])
				} else {
					out[i] += int64(v[j])
				}
			}
		}
		z := make([]int32, n)
		for i, x := range out {
			z[i] = int32(x)
		}
		return z
	}
	for r := range Reps {
		p.Zu[r], p.Ze[r] = geo(wit.U, cs[r]), geo(wit.E, cs[r])
	}
	return p
}

func TestWitnessOutOfBounds(t *testing.T) {
	s := newSetup(t)
	c1, w := s.encrypt(t)
	w.E[5] = BetaE + 1
	if _, err := s.key.Prove(c1, nil, w, nil); err == nil {
		t.Fatal("a witness outside the bounds was proven")
	}
}

func TestProvenBounds(t *testing.T) {
	b := ProvenBounds(1 << 13)
	for name, c := range map[string]struct{ got, log2 float64 }{
		"u inf": {b.UInf, 35}, "e inf": {b.EInf, 39}, "u 2": {b.U2, 40.86}, "e 2": {b.E2, 44.86},
	} {
		if l := math.Log2(c.got); l > c.log2 || l < c.log2-0.1 {
			t.Errorf("%s: log2 %.3f, documented %.2f", name, l, c.log2)
		}
	}
	for g, want := range map[int]int{1: 450594, 8: 589859} {
		if got := Size(1<<13, g); got != want {
			t.Errorf("proof of %d ciphertexts: %d bytes, documented %d", g, got, want)
		}
	}
}

// TestGroupParams: each group size's repetitions give 2^-128 or less at
// N = 2^13 (knowledge error g/2N per repetition) and are the fewest that
// do; its masks leave room for g times the witness, with an honest
// response accepted at least 0.4 of the time (0.7 for one ciphertext, whose
// masks take a bit more than they need); no group's masks exceed the
// largest group's, at which ProvenBounds are taken.
func TestGroupParams(t *testing.T) {
	accept := func(sh Shape) float64 { // log of the acceptance of an attempt
		n := float64(1 << 13 * sh.Reps)
		return n * (math.Log1p(-float64(sh.G*BetaU)/float64(int(1)<<sh.LogBu)) + math.Log1p(-float64(sh.G*BetaE)/float64(int(1)<<sh.LogBe)))
	}
	for g := 1; g <= MaxGroup; g++ {
		sh, err := ShapeOf(g)
		if err != nil {
			t.Fatal(err)
		}
		bitsPer := 14 - math.Log2(float64(g))
		if float64(sh.Reps)*bitsPer < 128 || float64(sh.Reps-1)*bitsPer >= 128 {
			t.Errorf("group of %d: %d repetitions of %.2f bits, want the fewest reaching 128", g, sh.Reps, bitsPer)
		}
		if sh.ZuMax < 1<<(sh.LogBu-1) || int(sh.ZuMax) != 1<<sh.LogBu-g*BetaU || int(sh.ZeMax) != 1<<sh.LogBe-g*BetaE {
			t.Errorf("group of %d: response bounds %d, %d", g, sh.ZuMax, sh.ZeMax)
		}
		if a := math.Exp(accept(sh)); a < 0.4 || g == 1 && a < 0.7 {
			t.Errorf("group of %d: acceptance %.3f per attempt", g, a)
		}
		if sh.LogBu > LogBu+maxShift || sh.LogBe > LogBe+maxShift {
			t.Errorf("group of %d: masks of 2^%d and 2^%d, beyond the largest group's", g, sh.LogBu, sh.LogBe)
		}
		if sh.LogBe+1 > 8*maskBytes {
			t.Errorf("group of %d: masks of %d bits from %d bytes", g, sh.LogBe+1, maskBytes)
		}
	}
	for _, g := range []int{0, MaxGroup + 1} {
		if _, err := ShapeOf(g); err == nil {
			t.Errorf("a group of %d accepted", g)
		}
	}
}

// TestGroupProof: one proof of g ciphertexts verifies for those c1s, in that
// order, and for nothing else: not another c1 in any one place, not the
// c1s reordered or a subset, not another binding, not a changed response;
// a witness that does not fit one of the c1s is refused as one
// ciphertext's is; its encoding round-trips at its group's size only.
func TestGroupProof(t *testing.T) {
	s := newSetup(t)
	const g = 5
	c1s, ws := s.group(t, g)
	bind := []byte("job 1 owner a cts 0-4")
	p, err := s.key.ProveGroup(c1s, bind, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.key.VerifyGroup(c1s, bind, p); err != nil {
		t.Fatalf("honest group proof refused: %v", err)
	}
	b := p.Marshal()
	if len(b) != Size(s.rq.N(), g) {
		t.Fatalf("encoded group proof of %d bytes, Size says %d", len(b), Size(s.rq.N(), g))
	}
	q, err := Unmarshal(b, s.rq.N(), g)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.key.VerifyGroup(c1s, bind, q); err != nil || string(q.Marshal()) != string(b) {
		t.Fatalf("decoded group proof: %v, round trip %v", err, string(q.Marshal()) == string(b))
	}
	for _, other := range []int{1, g - 1, g + 1} {
		if _, err := Unmarshal(b, s.rq.N(), other); err == nil {
			t.Errorf("a proof of %d ciphertexts decoded as one of %d", g, other)
		}
	}
	t.Logf("proof of %d ciphertexts: %d bytes (%d per ciphertext)", g, len(b), len(b)/g)
	other, wo := s.encrypt(t)
	swapped := func(j int) []ring.Poly {
		out := append([]ring.Poly(nil), c1s...)
		out[j] = other
		return out
	}
	reordered := append([]ring.Poly(nil), c1s...)
	reordered[0], reordered[1] = reordered[1], reordered[0]
	cases := map[string]func() error{
		"another c1 first": func() error { return s.key.VerifyGroup(swapped(0), bind, p) },
		"another c1 last":  func() error { return s.key.VerifyGroup(swapped(g-1), bind, p) },
		"reordered":        func() error { return s.key.VerifyGroup(reordered, bind, p) },
		"a subset":         func() error { return s.key.VerifyGroup(c1s[:g-1], bind, p) },
		"another binding":  func() error { return s.key.VerifyGroup(c1s, []byte("job 1 owner b cts 0-4"), p) },
		"a response changed": func() error {
			q := *p
			q.Ze = append([][]int32(nil), p.Ze...)
			q.Ze[2] = append([]int32(nil), p.Ze[2]...)
			q.Ze[2][9] ^= 1
			return s.key.VerifyGroup(c1s, bind, &q)
		},
		"one ciphertext's witness wrong": func() error {
			bad := append([]Witness(nil), ws...)
			bad[3] = wo
			q, err := s.key.ProveGroup(c1s, bind, bad, nil)
			if err != nil {
				return err
			}
			return s.key.VerifyGroup(c1s, bind, q)
		},
	}
	for name, verify := range cases {
		if err := verify(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

func TestUnmarshalRefuses(t *testing.T) {
	s := newSetup(t)
	c1, w := s.encrypt(t)
	p, err := s.key.Prove(c1, nil, w, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b := p.Marshal()
	n := s.rq.N()
	if _, err := Unmarshal(b[:len(b)-1], n, 1); err == nil {
		t.Error("a short proof was decoded")
	}
	bad := append([]byte(nil), b...)
	bad[0] = 2
	if _, err := Unmarshal(bad, n, 1); err == nil {
		t.Error("a proof of another version was decoded")
	}
	// The largest packed value of a u response is 2^20 - 1 > 2 ZuMax - 1.
	bad = append([]byte(nil), b...)
	h := headerSize(1)
	bad[h], bad[h+1], bad[h+2] = 0xff, 0xff, bad[h+2]|0x0f
	if _, err := Unmarshal(bad, n, 1); !errors.Is(err, errOutOfRange) {
		t.Errorf("an out-of-range response was decoded: %v", err)
	}
}

func BenchmarkProve(b *testing.B) {
	s := newSetup(b)
	c1, w := s.encrypt(b)
	b.ResetTimer()
	for range b.N {
		if _, err := s.key.Prove(c1, []byte("bench"), w, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProveGroup and BenchmarkVerifyGroup: one proof of MaxGroup
// ciphertexts (divide by MaxGroup for a ciphertext's share).
func BenchmarkProveGroup(b *testing.B) {
	s := newSetup(b)
	c1s, ws := s.group(b, MaxGroup)
	b.ResetTimer()
	for range b.N {
		if _, err := s.key.ProveGroup(c1s, []byte("bench"), ws, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyGroup(b *testing.B) {
	s := newSetup(b)
	c1s, ws := s.group(b, MaxGroup)
	p, err := s.key.ProveGroup(c1s, []byte("bench"), ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := s.key.VerifyGroup(c1s, []byte("bench"), p); err != nil {
			b.Fatal(err)
		}
	}
}

// group encrypts g ciphertexts.
func (s *testSetup) group(t testing.TB, g int) ([]ring.Poly, []Witness) {
	c1s, ws := make([]ring.Poly, g), make([]Witness, g)
	for j := range c1s {
		c1s[j], ws[j] = s.encrypt(t)
	}
	return c1s, ws
}

func BenchmarkVerify(b *testing.B) {
	s := newSetup(b)
	c1, w := s.encrypt(b)
	p, err := s.key.Prove(c1, []byte("bench"), w, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := s.key.Verify(c1, []byte("bench"), p); err != nil {
			b.Fatal(err)
		}
	}
}

// ringBig is big.Int, for the tests that build crafted polynomials.
type ringBig = big.Int

// TestCancellingUploadRefused: the attack a proof of the sum alone would let
// through (docs/design-sum-proof.md). Owner k, colluding with the proxy,
// uploads c1_k = c1' - c1_i, honest owner i's c1 negated plus an encryption
// of its own, and answers with i's transcript negated plus its own. Under
// one common challenge (a global proof's) that transcript satisfies the
// verification equation, checked here on the ring, so a proof of the sum
// would accept a sum from which i is gone while it is named. Per-owner
// proofs, each with its own challenge from its own statement, refuse it:
// k's own witness, i's transcript negated under either seed, and the same
// with the responses' bounds not checked (the challenge alone refuses it).
func TestCancellingUploadRefused(t *testing.T) {
	s := newSetup(t)
	c1i, wi := s.encrypt(t)
	c1p, wp := s.encrypt(t)
	c1k := s.rq.NewPoly()
	s.rq.Sub(c1p, c1i, c1k)

	// A global proof's round: both answer one challenge c.
	c := 12345 % (2 * s.rq.N())
	commitI, zuI, zeI := s.answer(t, wi, c)
	commitP, zuP, zeP := s.answer(t, wp, c)
	commitK := s.rq.NewPoly()
	s.rq.Sub(commitP, commitI, commitK)
	if got := s.recommit(c1k, sub(zuP, zuI), sub(zeP, zeI), c); !s.rq.Equal(got, commitK) {
		t.Fatal("the negated transcript does not satisfy the verification equation under a common challenge: the attack's algebra is wrong")
	}

	bindI, bindK := []byte("job 1 owner i ct 0"), []byte("job 1 owner k ct 0")
	pi, err := s.key.Prove(c1i, bindI, wi, nil)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := s.key.Prove(c1p, bindK, wp, nil)
	if err != nil {
		t.Fatal(err)
	}
	own, err := s.key.Prove(c1k, bindK, wp, nil)
	if err != nil {
		t.Fatal(err) // the prover does not check the relation
	}
	if got, err := s.key.recomputedSeed([]ring.Poly{c1p}, bindK, pp); err != nil || got != pp.Seed {
		t.Fatalf("recomputedSeed does not give an honest proof's seed (%v)", err)
	}
	negated := func(seed [32]byte) *Proof {
		f := &Proof{Seed: seed, G: 1, Zu: make([][]int32, Reps), Ze: make([][]int32, Reps)}
		for r := range Reps {
			f.Zu[r], f.Ze[r] = sub(pp.Zu[r], pi.Zu[r]), sub(pp.Ze[r], pi.Ze[r])
		}
		return f
	}
	for name, p := range map[string]*Proof{"k's own witness": own, "negated, k's seed": negated(pp.Seed), "negated, i's seed": negated(pi.Seed)} {
		if err := s.key.Verify(c1k, bindK, p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: the cancelling upload's proof accepted (%v)", name, err)
		}
		if got, err := s.key.recomputedSeed([]ring.Poly{c1k}, bindK, p); err != nil || got == p.Seed {
			t.Errorf("%s: the challenges match with the bounds unchecked (%v)", name, err)
		}
	}
}

// answer makes one repetition of a proof under the challenge X^c with fresh
// masks: the commitment w = a y_u + y_e (NTT domain) and accepted responses.
func (s *testSetup) answer(t *testing.T, w Witness, c int) (ring.Poly, []int32, []int32) {
	t.Helper()
	n := s.rq.N()
	yu, ye, zu, ze := make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	b := make([]byte, n*maskBytes)
	one, _ := ShapeOf(1)
	for range maxAttempts {
		for _, m := range []struct {
			y    []int32
			logB uint
		}{{yu, one.LogBu}, {ye, one.LogBe}} {
			if _, err := rand.Read(b); err != nil {
				t.Fatal(err)
			}
			uniform(b, m.y, m.logB)
		}
		if respond(zu, yu, [][]int8{w.U}, []int{c}, one.ZuMax) && respond(ze, ye, [][]int8{w.E}, []int{c}, one.ZeMax) {
			vu, ve := s.rq.NewPoly(), s.rq.NewPoly()
			s.key.setSigned(vu, yu)
			s.key.setSigned(ve, ye)
			return s.linear(vu, ve), zu, ze
		}
	}
	t.Fatal("no accepted answer")
	return ring.Poly{}, nil, nil
}

// recommit is the verifier's commitment a z_u + z_e - X^c c1 (NTT domain).
func (s *testSetup) recommit(c1 ring.Poly, zu, ze []int32, c int) ring.Poly {
	vu, ve, c1c := s.rq.NewPoly(), s.rq.NewPoly(), s.rq.NewPoly()
	s.key.setSigned(vu, zu)
	s.key.setSigned(ve, ze)
	s.rq.INTT(c1, c1c)
	s.key.subMonomial(ve, c1c, c)
	return s.linear(vu, ve)
}

// linear returns a vu + ve in the NTT domain for vu, ve in the coefficient
// domain (overwritten).
func (s *testSetup) linear(vu, ve ring.Poly) ring.Poly {
	s.rq.NTT(vu, vu)
	s.rq.NTT(ve, ve)
	w := *ve.CopyNew()
	s.rq.MulCoeffsMontgomeryThenAdd(vu, s.key.a, w)
	return w
}

// monomialTerm says where coefficient i of X^c w comes from in Z[X]/(X^n +
// 1), c in [0, 2n): (X^c w)_i = w_j, negated when neg (X^n = -1).
func monomialTerm(i, c, n int) (j int, neg bool) {
	if c >= n {
		c, neg = c-n, true
	}
	if j = i - c; j < 0 {
		return j + n, !neg
	}
	return j, neg
}

func sub(a, b []int32) []int32 {
	out := make([]int32, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}
