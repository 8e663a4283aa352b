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

// drawn returns the flooder's i-th drawn coefficient as a big integer.
func drawn(f *flooder, i int) *big.Int {
	x := new(big.Int).SetInt64(f.hi[i])
	x.Lsh(x, 64)
	return x.Add(x, new(big.Int).SetUint64(f.lo[i]))
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
	bound := new(big.Int).Lsh(big.NewInt(1), S)
	negBound := new(big.Int).Neg(bound)
	scale := math.Exp2(-S)
	polys := (1_000_000 + p.N() - 1) / p.N()
	n := 0
	var sum, sumSq float64
	low := make([]int, 256)
	high := make([]int, 16)
	for range polys {
		if err := f.sample(); err != nil {
			t.Fatal(err)
		}
		for i := range f.lo {
			x := drawn(f, i)
			if x.Cmp(negBound) < 0 || x.Cmp(bound) >= 0 {
				t.Fatalf("coefficient %s outside [-2^%d, 2^%d)", x, S, S)
			}
			n++
			xf, _ := new(big.Float).SetInt(x).Float64()
			y := xf * scale // in [-1, 1)
			sum += y
			sumSq += y * y
			low[f.lo[i]&255]++ // x mod 256 (two's complement)
			top := new(big.Int).Add(x, bound)
			high[top.Rsh(top, S-3).Int64()]++ // 16 equal slices of [-2^S, 2^S)
		}
	}
	mean, variance := sum/float64(n), sumSq/float64(n)-(sum/float64(n))*(sum/float64(n))
	// For y uniform on [-1, 1): mean 0 with standard error 1/sqrt(3n),
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
// for S = 1..4 all 2^(S+1) values of [-2^S, 2^S) occur, nothing else, with
// equal frequencies; around the word boundary (S = 62..65) every value is in
// range and both extremes occur.
func TestFloodingSmallBounds(t *testing.T) {
	for S := uint(1); S <= 4; S++ {
		f, err := newFlooder(rand.Reader, S, 1<<13)
		if err != nil {
			t.Fatal(err)
		}
		b := int64(1) << S
		counts := make([]int, 2*b)
		for range 20 {
			if err := f.sample(); err != nil {
				t.Fatal(err)
			}
			for i := range f.lo {
				x := drawn(f, i).Int64()
				if x < -b || x >= b {
					t.Fatalf("S=%d: %d out of range", S, x)
				}
				counts[x+b]++
			}
		}
		// 2b - 1 dof <= 31: a threshold of 100 is far in the tail.
		if chi := chiSquare(counts); chi > 100 {
			t.Errorf("S=%d: chi2 %.1f on %d dof, counts %v", S, chi, 2*b-1, counts)
		}
		for v, c := range counts {
			if c == 0 {
				t.Errorf("S=%d: value %d never drawn", S, int64(v)-b)
			}
		}
	}
	for S := uint(62); S <= 65; S++ {
		f, err := newFlooder(rand.Reader, S, 1<<13)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.sample(); err != nil {
			t.Fatal(err)
		}
		b := new(big.Int).Lsh(big.NewInt(1), S)
		neg := 0
		for i := range f.lo {
			x := drawn(f, i)
			if x.Cmp(new(big.Int).Neg(b)) < 0 || x.Cmp(b) >= 0 {
				t.Fatalf("S=%d: %s out of range", S, x)
			}
			if x.Sign() < 0 {
				neg++
			}
		}
		if neg < 3700 || neg > 4500 { // 4096 expected, sd 45
			t.Errorf("S=%d: %d of 8192 negative", S, neg)
		}
	}
	if _, err := newFlooder(rand.Reader, maxFloodLog2+1, 8); err == nil {
		t.Error("S = 127 accepted")
	}
	if _, err := newFlooder(rand.Reader, 0, 8); err == nil {
		t.Error("S = 0 accepted")
	}
}

// TestFloodingWords drives the sampler with chosen words: all zeros is
// -2^S, all ones 2^S - 1, the word 2^S is 0, and a failing reader.
func TestFloodingWords(t *testing.T) {
	for _, S := range []uint{10, 63, 64, SmudgingLog2} {
		f, err := newFlooder(nil, S, 4)
		if err != nil {
			t.Fatal(err)
		}
		var stream bytes.Buffer
		word := func(lo, hi uint64) {
			var b [16]byte
			for i := range 8 {
				b[i], b[8+i] = byte(lo>>(8*i)), byte(hi>>(8*i))
			}
			stream.Write(b[:])
		}
		half := new(big.Int).Lsh(big.NewInt(1), S) // 2^S as (lo, hi)
		word(0, 0)
		word(math.MaxUint64, math.MaxUint64)
		word(new(big.Int).And(half, new(big.Int).SetUint64(math.MaxUint64)).Uint64(), new(big.Int).Rsh(half, 64).Uint64())
		word(5, 0) // 5 - 2^S
		f.rnd = &stream
		if err := f.sample(); err != nil {
			t.Fatal(err)
		}
		want := []*big.Int{new(big.Int).Neg(half), new(big.Int).Sub(half, big.NewInt(1)), big.NewInt(0), new(big.Int).Sub(big.NewInt(5), half)}
		for i, w := range want {
			if got := drawn(f, i); got.Cmp(w) != 0 {
				t.Errorf("S=%d word %d: %s, want %s", S, i, got, w)
			}
		}
		f.rnd = io.LimitReader(rand.Reader, 7)
		if err := f.sample(); err == nil {
			t.Error("short read accepted")
		}
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
	if len(moduli) != 4 {
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
		for i := range f.lo {
			for j, q := range moduli {
				res[j] = poly.Coeffs[j][i]
				if res[j] >= q {
					t.Fatalf("coefficient %d prime %d: %d not reduced", i, j, res[j])
				}
			}
			if got, x := crt(res, moduli), drawn(f, i); got.Cmp(x) != 0 {
				t.Fatalf("coefficient %d: CRT %s, drawn %s", i, got, x)
			}
		}
	}
	// Edge values, including multiples of each prime, +-2^63, +-2^64 and
	// the extremes of the flooding.
	one := big.NewInt(1)
	pow := func(k uint) *big.Int { return new(big.Int).Lsh(one, k) }
	edges := []*big.Int{big.NewInt(0), one, big.NewInt(-1), pow(63), new(big.Int).Neg(pow(63)), pow(64), new(big.Int).Neg(pow(64)),
		new(big.Int).Sub(pow(64), one), new(big.Int).Add(pow(64), one), new(big.Int).Neg(new(big.Int).Add(pow(64), one)),
		pow(SmudgingLog2), new(big.Int).Neg(pow(SmudgingLog2)), new(big.Int).Sub(pow(SmudgingLog2), one), new(big.Int).Sub(pow(126), one), new(big.Int).Neg(pow(126))}
	for _, q := range moduli {
		bq := new(big.Int).SetUint64(q)
		for _, k := range []int64{1, -1, 3, -3} {
			m := new(big.Int).Mul(bq, big.NewInt(k))
			edges = append(edges, m, new(big.Int).Add(m, one), new(big.Int).Sub(m, one))
		}
		edges = append(edges, new(big.Int).Mul(bq, pow(60)))
	}
	mask := new(big.Int).SetUint64(math.MaxUint64)
	for _, x := range edges {
		// x as (hi, lo) in two's complement.
		tw := new(big.Int).Set(x)
		if x.Sign() < 0 {
			tw.Add(tw, pow(128))
		}
		lo := new(big.Int).And(tw, mask).Uint64()
		hi := int64(new(big.Int).Rsh(tw, 64).Uint64())
		for j, q := range moduli {
			res[j] = reduce128(hi, lo, q)
			want := new(big.Int).Mod(x, new(big.Int).SetUint64(q)).Uint64()
			if res[j] != want {
				t.Errorf("reduce128(%s, %d) = %d, want %d", x, q, res[j], want)
			}
		}
	}
	if err := f.readPoly(p.RingQ().AtLevel(0), poly); err != nil {
		t.Errorf("level 0: %v", err)
	}
}

// TestFloodingDistance: the flooding is sized from what the upload proofs
// prove, not from honest noise: at most 2^-40 of statistical distance for
// a job whose sums hold 10,000 uploaded ciphertexts under the largest
// committee, and the full committee's flooding leaves at least 8 bits of
// the noise budget.
func TestFloodingDistance(t *testing.T) {
	p := params(t)
	sd := FloodingDistanceLog2(p.N(), 10000, maxCommittee)
	sd3 := FloodingDistanceLog2(p.N(), 10000, 3)
	t.Logf("statistical distance per job at 10,000 uploaded ciphertexts: 2^%.2f (64 members), 2^%.2f (3 members); flooding 2^%d, budget 2^%.1f",
		sd, sd3, SmudgingLog2, p.NoiseBudgetLog2())
	if sd > -40 {
		t.Errorf("statistical distance 2^%.2f per job, want at most 2^-40", sd)
	}
	if margin := p.NoiseBudgetLog2() - (SmudgingLog2 + math.Log2(maxCommittee)); margin < 8 {
		t.Errorf("noise margin above a full committee's flooding %.1f bits, want 8", margin)
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
		if !members[pt-1].PrepareSwitch(1) {
			t.Fatal("PrepareSwitch made none")
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
	twice := cts[0].CopyNew() // members switch 2 ct
	rq := p.RingQ().AtLevel(p.Level())
	rq.MulScalar(twice.Value[0], SwitchFactor, twice.Value[0])
	rq.MulScalar(twice.Value[1], SwitchFactor, twice.Value[1])
	want := p.NewCiphertext()
	pks.KeySwitch(twice, sum, want)
	if !got.Equal(want) {
		t.Fatal("CombineKeySwitch differs from lattigo's KeySwitch of 2 ct with the aggregated shares")
	}
	dec, err := NewDecryptor(p, user.Secret).DecryptSwitched([]*rlwe.Ciphertext{got}, len(vals))
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
// 2^14 (twice the ciphertext's: members switch 2 ct).
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
			members[pt-1].PrepareSwitch(1)
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
		got, err := NewDecryptor(p, user.Secret).DecryptSwitched([]*rlwe.Ciphertext{out}, len(vals))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, vals) {
			t.Fatal("key-switched ciphertext decrypts wrongly")
		}
		twice := make([]int64, len(vals))
		for i, v := range vals {
			twice[i] = SwitchFactor * v
		}
		for _, e := range noiseCoeffs(p, out, user.Secret, twice) {
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
