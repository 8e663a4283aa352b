package he

import (
	"bytes"
	"crypto/rand"
	"io"
	"math"
	"math/big"
	mrand "math/rand/v2"
	"slices"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
)

// chiSquare returns the chi-square statistic of counts against the uniform
// distribution.
func chiSquare(counts []int) float64 {
	n := 0
	for _, c := range counts {
		n += c
	}
	exp := float64(n) / float64(len(counts))
	chi := 0.0
	for _, c := range counts {
		d := float64(c) - exp
		chi += d * d / exp
	}
	return chi
}

// TestFloodingSampler draws more than 10^6 flooding coefficients with the
// members' setting (crypto/rand, S = SmudgingLog2) and checks the range, the
// mean, the variance, the uniformity of the low 8 bits and of the top 4 bits.
func TestFloodingSampler(t *testing.T) {
	p := params(t)
	const S = SmudgingLog2
	f, err := newFlooder(rand.Reader, S, p.N())
	if err != nil {
		t.Fatal(err)
	}
	bound := int64(1) << S
	scale := math.Exp2(-S)
	polys := (1_000_000 + p.N() - 1) / p.N()
	n := 0
	var sum, sumSq float64
	low := make([]int, 256)
	high := make([]int, 16)
	for range polys {
		if err := f.sample(f.vals); err != nil {
			t.Fatal(err)
		}
		for _, x := range f.vals {
			if x < -bound || x > bound {
				t.Fatalf("coefficient %d outside [-2^%d, 2^%d]", x, S, S)
			}
			n++
			y := float64(x) * scale // in [-1, 1]
			sum += y
			sumSq += y * y
			low[uint64(x)&255]++ // x mod 256 (two's complement)
			if x < bound {
				high[(x+bound)>>(S-3)]++ // 16 equal slices of [-2^S, 2^S)
			}
		}
	}
	mean, variance := sum/float64(n), sumSq/float64(n)-(sum/float64(n))*(sum/float64(n))
	// For y uniform on [-1, 1]: mean 0 with standard error 1/sqrt(3n),
	// variance 1/3 with standard error sqrt((1/5 - 1/9)/n); allow 6 of them.
	seMean, seVar := 1/math.Sqrt(3*float64(n)), math.Sqrt((1.0/5-1.0/9)/float64(n))
	chiLow, chiHigh := chiSquare(low), chiSquare(high)
	t.Logf("%d draws: mean %.2e (se %.1e) x 2^%d, variance %.6f (want 1/3, se %.1e) x 2^%d, chi2 low 8 bits %.1f (255 dof), top 4 bits %.1f (15 dof)",
		n, mean, seMean, S, variance, seVar, 2*S, chiLow, chiHigh)
	if math.Abs(mean) > 6*seMean {
		t.Errorf("mean %.3e x 2^%d, want 0 within %.1e", mean, S, 6*seMean)
	}
	if math.Abs(variance-1.0/3) > 6*seVar {
		t.Errorf("variance %.6f x 2^%d, want 1/3 within %.1e", variance, 2*S, 6*seVar)
	}
	// Chi-square with 255 dof: mean 255, sd 22.6; 400 is 6.4 sd above.
	if chiLow > 400 {
		t.Errorf("low 8 bits not uniform: chi2 %.1f on 255 dof", chiLow)
	}
	// 15 dof: mean 15, sd 5.5; 60 is 8 sd above.
	if chiHigh > 60 {
		t.Errorf("top 4 bits not uniform: chi2 %.1f on 15 dof", chiHigh)
	}
}

// TestFloodingSmallBounds checks exactness where every value can be counted:
// for S = 1..4 all 2^(S+1)+1 values of [-2^S, 2^S] occur, nothing else, with
// equal frequencies.
func TestFloodingSmallBounds(t *testing.T) {
	for S := uint(1); S <= 4; S++ {
		f, err := newFlooder(rand.Reader, S, 1<<13)
		if err != nil {
			t.Fatal(err)
		}
		b := int64(1) << S
		counts := make([]int, 2*b+1)
		for range 20 {
			if err := f.sample(f.vals); err != nil {
				t.Fatal(err)
			}
			for _, x := range f.vals {
				if x < -b || x > b {
					t.Fatalf("S=%d: %d out of range", S, x)
				}
				counts[x+b]++
			}
		}
		// 2b dof <= 32: a threshold of 100 is far in the tail.
		if chi := chiSquare(counts); chi > 100 {
			t.Errorf("S=%d: chi2 %.1f on %d dof, counts %v", S, chi, 2*b, counts)
		}
		for v, c := range counts {
			if c == 0 {
				t.Errorf("S=%d: value %d never drawn", S, int64(v)-b)
			}
		}
	}
	if _, err := newFlooder(rand.Reader, 63, 8); err == nil {
		t.Error("S = 63 accepted")
	}
	if _, err := newFlooder(rand.Reader, 0, 8); err == nil {
		t.Error("S = 0 accepted")
	}
}

// TestFloodingRejection drives the sampler with chosen words: the smallest
// rejected word, the largest accepted one, the extremes of the range, and a
// failing reader.
func TestFloodingRejection(t *testing.T) {
	const S, n = SmudgingLog2, 4
	f, err := newFlooder(nil, S, n)
	if err != nil {
		t.Fatal(err)
	}
	if f.span != 1<<(S+1)+1 || f.limit%f.span != 0 || f.limit < 1<<63 || math.MaxUint64-f.limit >= f.span {
		t.Fatalf("span %d limit %d", f.span, f.limit)
	}
	word := func(v uint64) []byte {
		var b [8]byte
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		return b[:]
	}
	var stream bytes.Buffer
	stream.Write(word(f.limit))             // rejected
	stream.Write(word(math.MaxUint64))      // rejected
	stream.Write(word(f.limit - 1))         // accepted: span - 1 - 2^S = 2^S
	stream.Write(word(0))                   // -2^S
	stream.Write(word(f.span + 1<<S))       // 0
	stream.Write(word(f.span*2 + 1<<S - 5)) // -5
	for stream.Len() < len(f.buf) {
		stream.Write(word(math.MaxUint64))
	}
	f.rnd = &stream
	out := make([]int64, n)
	if err := f.sample(out); err != nil {
		t.Fatal(err)
	}
	if want := []int64{1 << S, -1 << S, 0, -5}; !slices.Equal(out, want) {
		t.Fatalf("got %v, want %v", out, want)
	}
	f.rnd = io.LimitReader(rand.Reader, 7)
	if err := f.sample(out); err == nil {
		t.Error("short read accepted")
	}
}

// TestFloodingRefill checks a second read with a short buffer: 4 words per
// read, the first 3 rejected.
func TestFloodingRefill(t *testing.T) {
	f, err := newFlooder(nil, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	f.buf = make([]byte, 32)
	var stream bytes.Buffer
	for _, w := range []uint64{math.MaxUint64, math.MaxUint64, math.MaxUint64, 7, 2049 + 1025, 0, 0, 0} {
		for i := range 8 {
			stream.WriteByte(byte(w >> (8 * i)))
		}
	}
	f.rnd = &stream
	out := make([]int64, 2)
	if err := f.sample(out); err != nil {
		t.Fatal(err)
	}
	if want := []int64{7 - 1024, 1}; !slices.Equal(out, want) {
		t.Fatalf("got %v, want %v", out, want)
	}
}

// crt returns the centred integer in (-Q/2, Q/2] with the given residues,
// computed with math/big independently of lattigo.
func crt(res []uint64, moduli []uint64) *big.Int {
	Q := big.NewInt(1)
	for _, q := range moduli {
		Q.Mul(Q, new(big.Int).SetUint64(q))
	}
	x := new(big.Int)
	for j, q := range moduli {
		qj := new(big.Int).SetUint64(q)
		Mj := new(big.Int).Quo(Q, qj)
		inv := new(big.Int).ModInverse(new(big.Int).Mod(Mj, qj), qj)
		term := new(big.Int).Mul(new(big.Int).SetUint64(res[j]), inv)
		term.Mod(term, qj).Mul(term, Mj)
		x.Add(x, term)
	}
	x.Mod(x, Q)
	if x.Cmp(new(big.Int).Rsh(Q, 1)) > 0 {
		x.Sub(x, Q)
	}
	return x
}

// TestFloodingRNS checks that the flooding polynomial holds, in every RNS
// prime, a reduced residue of the drawn integer: the CRT of the residues is
// the integer itself. Also the reduction of edge values.
func TestFloodingRNS(t *testing.T) {
	p := params(t)
	rq := p.RingQ().AtLevel(p.Level())
	moduli := rq.ModuliChain()[:rq.Level()+1]
	if len(moduli) != 3 {
		t.Fatalf("%d primes", len(moduli))
	}
	f, err := newFlooder(rand.Reader, SmudgingLog2, p.N())
	if err != nil {
		t.Fatal(err)
	}
	poly := rq.NewPoly()
	res := make([]uint64, len(moduli))
	for range 3 {
		if err := f.readPoly(rq, poly); err != nil {
			t.Fatal(err)
		}
		for i, x := range f.vals {
			for j, q := range moduli {
				res[j] = poly.Coeffs[j][i]
				if res[j] >= q {
					t.Fatalf("coefficient %d prime %d: %d not reduced", i, j, res[j])
				}
			}
			if got := crt(res, moduli); got.Cmp(big.NewInt(x)) != 0 {
				t.Fatalf("coefficient %d: CRT %s, drawn %d", i, got, x)
			}
		}
	}
	// Edge values, including multiples of each prime and +-2^62.
	edges := []int64{0, 1, -1, 1 << 62, -1 << 62, 1<<62 - 1, -1<<62 + 1, 1 << SmudgingLog2, -1 << SmudgingLog2}
	for _, q := range moduli {
		edges = append(edges, int64(q), -int64(q), int64(q)-1, -int64(q)+1, int64(q)+1, -int64(q)-1)
		if q < 1<<61 {
			edges = append(edges, 3*int64(q), -3*int64(q))
		}
	}
	for _, x := range edges {
		for j, q := range moduli {
			res[j] = reduceSigned(x, q, rq.SubRings[j].BRedConstant)
			want := new(big.Int).Mod(big.NewInt(x), new(big.Int).SetUint64(q)).Uint64()
			if res[j] != want {
				t.Errorf("reduceSigned(%d, %d) = %d, want %d", x, q, res[j], want)
			}
		}
		if got := crt(res, moduli); got.Cmp(big.NewInt(x)) != 0 {
			t.Errorf("edge %d: CRT %s", x, got)
		}
	}
	if err := f.readPoly(p.RingQ().AtLevel(0), poly); err != nil {
		t.Errorf("level 0: %v", err)
	}
}

// TestCombineIsLattigos: CombineKeySwitch gives, bit for bit, lattigo's
// PublicKeySwitchProtocol.KeySwitch of the shares' sum, and leaves ct as it
// was; shares made over prepared encryptions of zero decrypt right.
func TestCombineIsLattigos(t *testing.T) {
	p := params(t)
	members, cpk := committee(t, p, Committee{N: 3, Threshold: 2})
	user := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, cpk)
	vals := randVec(mrand.New(mrand.NewPCG(5, 6)), p.Slots(), 1<<40)
	cts, _ := enc.EncryptVector(vals)
	before := cts[0].CopyNew()
	active := []Point{2, 3}
	var shares []*mhe.PublicKeySwitchShare
	for _, pt := range active {
		if _, err := members[pt-1].KeySwitchShare(cts[0], user.Public, active, nil); err != nil { // a first switch for this user
			t.Fatal(err)
		}
		if made, err := members[pt-1].PrepareSwitch(1); err != nil || !made {
			t.Fatalf("PrepareSwitch: %v, %v", made, err)
		}
		s, err := members[pt-1].KeySwitchShare(cts[0], user.Public, active, nil)
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, s)
	}
	got, err := CombineKeySwitch(p, cts[0], shares)
	if err != nil {
		t.Fatal(err)
	}
	if !cts[0].Equal(before) {
		t.Fatal("CombineKeySwitch changed its input")
	}
	pks, err := mhe.NewPublicKeySwitchProtocol(p.Parameters, ring.DiscreteGaussian{Sigma: 3.2, Bound: 19})
	if err != nil {
		t.Fatal(err)
	}
	sum := pks.AllocateShare(p.Level())
	for _, s := range shares {
		pks.AggregateShares(sum, *s, &sum)
	}
	want := p.NewCiphertext()
	pks.KeySwitch(cts[0], sum, want)
	if !got.Equal(want) {
		t.Fatal("CombineKeySwitch differs from lattigo's KeySwitch of the aggregated shares")
	}
	dec, err := NewDecryptor(p, user.Secret).DecryptVector([]*rlwe.Ciphertext{got}, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dec, vals) {
		t.Fatal("shares over prepared encryptions of zero decrypt wrongly")
	}
}

// noiseCoeffs returns the RLWE noise of ct under sk, given the values it
// should decrypt to, as centred integers.
func noiseCoeffs(p Params, ct *rlwe.Ciphertext, sk *rlwe.SecretKey, want []int64) []*big.Int {
	pt := bgv.NewPlaintext(p.Parameters, p.Level())
	if err := bgv.NewEncoder(p.Parameters).Encode(want, pt); err != nil {
		panic(err)
	}
	diff := ct.CopyNew()
	rq := p.RingQ().AtLevel(p.Level())
	rq.Sub(diff.Value[0], pt.Value, diff.Value[0])
	dec := rlwe.NewDecryptor(p.Parameters, sk).DecryptNew(diff)
	if dec.IsNTT {
		rq.INTT(dec.Value, dec.Value)
	}
	out := make([]*big.Int, p.N())
	for i := range out {
		out[i] = new(big.Int)
	}
	rq.PolyToBigintCentered(dec.Value, 1, out)
	return out
}

// TestKeySwitchFlooding checks the flooding end to end: the noise the user
// sees after a key switch by 2 members is the sum of two uniform floods,
// about 2^(S+1) at most and with variance 2 (2^S)^2 / 3, and its low 8 bits
// are uniform. A switch without any flooding would leave a noise of about
// 2^13.
func TestKeySwitchFlooding(t *testing.T) {
	p := params(t)
	members, cpk := committee(t, p, Committee{N: 3, Threshold: 2})
	user := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, cpk)
	rng := mrand.New(mrand.NewPCG(7, 7))
	active := []Point{1, 3}
	switches := 8
	if testing.Short() {
		switches = 2
	}
	low := make([]int, 256)
	maxLog2 := 0.0
	var sumSq float64
	n := 0
	scale := math.Exp2(-SmudgingLog2)
	for range switches {
		vals := randVec(rng, p.Slots(), 1<<40)
		cts, err := enc.EncryptVector(vals)
		if err != nil {
			t.Fatal(err)
		}
		var shares []*mhe.PublicKeySwitchShare
		for _, pt := range active {
			// After the first switch, over an encryption of zero prepared
			// after the last one.
			if _, err := members[pt-1].PrepareSwitch(1); err != nil {
				t.Fatal(err)
			}
			s, err := members[pt-1].KeySwitchShare(cts[0], user.Public, active, nil)
			if err != nil {
				t.Fatal(err)
			}
			shares = append(shares, s)
		}
		out, err := CombineKeySwitch(p, cts[0], shares)
		if err != nil {
			t.Fatal(err)
		}
		got, err := NewDecryptor(p, user.Secret).DecryptVector([]*rlwe.Ciphertext{out}, len(vals))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, vals) {
			t.Fatal("key-switched ciphertext decrypts wrongly")
		}
		for _, e := range noiseCoeffs(p, out, user.Secret, vals) {
			low[new(big.Int).And(e, big.NewInt(255)).Int64()]++ // e mod 256
			f, _ := new(big.Float).SetInt(e).Float64()
			sumSq += (f * scale) * (f * scale)
			if a := math.Log2(math.Abs(f)); a > maxLog2 {
				maxLog2 = a
			}
			n++
		}
	}
	variance := sumSq / float64(n) // in units of 2^(2S); want 2/3
	chi := chiSquare(low)
	t.Logf("%d switches by 2 members: user-visible noise max 2^%.2f, variance %.4f x 2^%d (want 2/3), chi2 of its low 8 bits %.1f (255 dof)",
		switches, maxLog2, variance, 2*SmudgingLog2, chi)
	if maxLog2 < SmudgingLog2 || maxLog2 > SmudgingLog2+1 {
		t.Errorf("noise 2^%.2f: want between 2^%d and 2^%d", maxLog2, SmudgingLog2, SmudgingLog2+1)
	}
	// Standard error of the variance of a sum of two uniforms: about
	// 0.79/sqrt(n) (Var Z^2 = 2/5 + 6/9 - 4/9 for Z = U1 + U2); allow 8.
	if math.Abs(variance-2.0/3) > 8*0.79/math.Sqrt(float64(n)) {
		t.Errorf("noise variance %.4f x 2^%d, want 2/3", variance, 2*SmudgingLog2)
	}
	if switches >= 8 && chi > 400 {
		t.Errorf("low 8 bits of the user-visible noise not uniform: chi2 %.1f on 255 dof", chi)
	}
}
