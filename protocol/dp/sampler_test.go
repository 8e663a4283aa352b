package dp

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strings"
	"testing"
)

// testStream is a deterministic stand-in for crypto/rand in tests: block i
// is SHA-256("fedpca dp test" || label || uint64be(i)). Tests are then
// reproducible, while the bytes remain indistinguishable from uniform for
// any statistic we compute.
type testStream struct {
	label string
	ctr   uint64
	block []byte
}

func newTestStream(label string) *testStream { return &testStream{label: label} }

func (r *testStream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.block) == 0 {
			h := sha256.New()
			h.Write([]byte("fedpca dp test"))
			h.Write([]byte(r.label))
			var c [8]byte
			binary.BigEndian.PutUint64(c[:], r.ctr)
			h.Write(c[:])
			r.ctr++
			r.block = h.Sum(nil)
		}
		k := copy(p[n:], r.block)
		r.block = r.block[k:]
		n += k
	}
	return n, nil
}

// refDist holds the reference moments and tail probabilities of N_Z(0, s2).
type refDist struct {
	name      string
	sigma     float64
	variance  float64 // E[X^2]
	mu4       float64 // E[X^4]
	p2, p3    float64 // P(|X| > 2 sigma), P(|X| > 3 sigma)
	pmf       map[int64]float64
	pmfBounds int64 // pmf holds every x with |x| <= pmfBounds
}

// exactRef computes the reference by summing the pmf exp(-x^2/(2 s2))/Z over
// |x| <= 40 sigma + 10 in float64 (the mass beyond is below 1e-340).
func exactRef(name string, s2 float64) refDist {
	sigma := math.Sqrt(s2)
	bound := int64(math.Ceil(40*sigma)) + 10
	w := make(map[int64]float64, 2*bound+1)
	z := 0.0
	for x := -bound; x <= bound; x++ {
		v := math.Exp(-float64(x) * float64(x) / (2 * s2))
		w[x] = v
		z += v
	}
	r := refDist{name: name, sigma: sigma, pmf: w, pmfBounds: bound}
	for x, v := range w {
		p := v / z
		w[x] = p
		f := float64(x)
		r.variance += p * f * f
		r.mu4 += p * f * f * f * f
		if math.Abs(f) > 2*sigma {
			r.p2 += p
		}
		if math.Abs(f) > 3*sigma {
			r.p3 += p
		}
	}
	return r
}

// continuousRef uses the continuous Gaussian for large sigma: the variance of
// N_Z(0, s2) differs from s2 by a term of order s2^2 exp(-2 pi^2 s2) and the
// tails differ by O(1/sigma), both negligible at sigma = 2^40.
func continuousRef(name string, sigma float64) refDist {
	return refDist{
		name:     name,
		sigma:    sigma,
		variance: sigma * sigma,
		mu4:      3 * sigma * sigma * sigma * sigma,
		p2:       math.Erfc(2 / math.Sqrt2),
		p3:       math.Erfc(3 / math.Sqrt2),
	}
}

// checkMoments compares samples with ref and returns the failed checks. Every
// tolerance is 5 standard errors of the statistic under ref:
//
//   - mean: SE = sqrt(Var/n);
//   - second moment m2 = sum x^2 / n (the mean is known to be 0): its
//     variance is exactly (mu4 - Var^2)/n, which is about 2 sigma^4/n;
//   - tail frequencies with probability p: SE = sqrt(p(1-p)/n).
//
// A sampler whose variance is off by 1% or more fails the m2 check at n = 10^6
// (5 SE is 0.7% of sigma^2 there).
func checkMoments(samples []int64, ref refDist) []string {
	n := float64(len(samples))
	var sum, sum2 float64
	var over2, over3 int
	for _, x := range samples {
		f := float64(x) / ref.sigma // normalised, to keep sums well scaled
		sum += f
		sum2 += f * f
		if math.Abs(f) > 2 {
			over2++
		}
		if math.Abs(f) > 3 {
			over3++
		}
	}
	s2 := ref.sigma * ref.sigma
	v := ref.variance / s2
	mu4 := ref.mu4 / (s2 * s2)
	var fails []string
	check := func(what string, got, want, se float64) {
		if d := math.Abs(got - want); d > 5*se {
			fails = append(fails, fmt.Sprintf("%s: %s = %.6g, want %.6g +- %.3g (5 SE); off by %.1f SE",
				ref.name, what, got, want, 5*se, d/se))
		}
	}
	check("mean/sigma", sum/n, 0, math.Sqrt(v/n))
	check("E[X^2]/sigma^2", sum2/n, v, math.Sqrt((mu4-v*v)/n))
	check("P(|X| > 2 sigma)", float64(over2)/n, ref.p2, math.Sqrt(ref.p2*(1-ref.p2)/n))
	check("P(|X| > 3 sigma)", float64(over3)/n, ref.p3, math.Sqrt(ref.p3*(1-ref.p3)/n))
	return fails
}

// chiSquare returns the chi-square statistic of samples against ref.pmf and
// its degrees of freedom. The bins are x = -K+1 .. K-1 individually and the
// two tails (-inf, -K] and [K, inf), where K is the largest value with an
// expected tail count of at least 5; the inner bins then have expected
// counts above 5 as well (checked).
func chiSquare(t *testing.T, samples []int64, ref refDist) (stat float64, df int) {
	t.Helper()
	n := float64(len(samples))
	tail := func(k int64) float64 { // P(X >= k), k >= 1
		p := 0.0
		for x := k; x <= ref.pmfBounds; x++ {
			p += ref.pmf[x]
		}
		return p
	}
	k := int64(1)
	for n*tail(k+1) >= 5 {
		k++
	}
	expected := map[int64]float64{-k: n * tail(k), k: n * tail(k)}
	for x := -k + 1; x < k; x++ {
		expected[x] = n * ref.pmf[x]
		if expected[x] < 5 {
			t.Fatalf("%s: bin %d has expected count %g < 5", ref.name, x, expected[x])
		}
	}
	observed := make(map[int64]float64, len(expected))
	for _, x := range samples {
		observed[max(-k, min(k, x))]++
	}
	for x, e := range expected {
		d := observed[x] - e
		stat += d * d / e
	}
	return stat, len(expected) - 1
}

// chiSquareCritical returns the upper 1e-4 quantile of the chi-square
// distribution with df degrees of freedom by the Wilson-Hilferty
// approximation: df (1 - 2/(9 df) + z sqrt(2/(9 df)))^3 with z the upper 1e-4
// quantile of N(0,1). For df = 4 it gives 24.2 (exact 23.5), for df = 30 it
// gives 66.6 (exact 66.6).
func chiSquareCritical(df int) float64 {
	const z = 3.719016485455709
	d := float64(df)
	c := 1 - 2/(9*d) + z*math.Sqrt(2/(9*d))
	return d * c * c * c
}

func ratInt(x *big.Int) *big.Rat { return new(big.Rat).SetInt(x) }

func pow2(e uint) *big.Int { return new(big.Int).Lsh(big.NewInt(1), e) }

type samplerCase struct {
	name   string
	sigma2 *big.Rat
	ref    refDist
	chi2   bool
}

func samplerCases() []samplerCase {
	return []samplerCase{
		{"sigma=0.5", big.NewRat(1, 4), exactRef("sigma=0.5", 0.25), true},
		{"sigma=3", big.NewRat(9, 1), exactRef("sigma=3", 9), true},
		{"sigma=1e3", big.NewRat(1_000_000, 1), exactRef("sigma=1e3", 1e6), false},
		{"sigma=2^40", ratInt(pow2(80)), continuousRef("sigma=2^40", math.Ldexp(1, 40)), false},
		{"sigma=2^50", ratInt(pow2(100)), continuousRef("sigma=2^50", math.Ldexp(1, 50)), false},
	}
}

// TestSamplerDistribution draws 10^6 values for each sigma and checks mean,
// variance, tail frequencies and, for small sigma, a chi-square fit against
// the exact pmf.
func TestSamplerDistribution(t *testing.T) {
	const n = 1_000_000
	for _, c := range samplerCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := NewSampler(c.sigma2, newTestStream(c.name))
			if err != nil {
				t.Fatal(err)
			}
			x := make([]int64, n)
			if err := s.Fill(x); err != nil {
				t.Fatal(err)
			}
			for _, f := range checkMoments(x, c.ref) {
				t.Error(f)
			}
			if c.chi2 {
				stat, df := chiSquare(t, x, c.ref)
				crit := chiSquareCritical(df)
				t.Logf("%s: chi-square %.2f with %d df (critical value at p = 1e-4: %.2f)", c.name, stat, df, crit)
				if stat > crit {
					t.Errorf("%s: chi-square %.2f > %.2f (df %d): samples do not fit the exact pmf", c.name, stat, crit, df)
				}
			}
		})
	}
}

// TestSamplerRationalVariance covers variances that are not integers, on the
// uint64 path (7/3) and the math/big path (2^81/3), with 2*10^5 draws each.
func TestSamplerRationalVariance(t *testing.T) {
	t.Parallel()
	const n = 200_000
	x := make([]int64, n)
	s, err := NewSampler(big.NewRat(7, 3), newTestStream("7/3"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.small {
		t.Fatal("7/3 should use the uint64 path")
	}
	if err := s.Fill(x); err != nil {
		t.Fatal(err)
	}
	ref := exactRef("sigma^2=7/3", 7.0/3)
	for _, f := range checkMoments(x, ref) {
		t.Error(f)
	}
	if stat, df := chiSquare(t, x, ref); stat > chiSquareCritical(df) {
		t.Errorf("sigma^2 = 7/3: chi-square %.2f > %.2f (df %d)", stat, chiSquareCritical(df), df)
	}
	s, err = NewSampler(new(big.Rat).SetFrac(pow2(81), big.NewInt(3)), newTestStream("2^81/3"))
	if err != nil {
		t.Fatal(err)
	}
	if s.small {
		t.Fatal("2^81/3 should use the math/big path")
	}
	if err := s.Fill(x); err != nil {
		t.Fatal(err)
	}
	for _, f := range checkMoments(x, continuousRef("sigma^2=2^81/3", math.Sqrt(math.Ldexp(1, 81)/3))) {
		t.Error(f)
	}
}

// TestSamplerStatisticsRejectWrongVariance shows that the checks above can
// fail: samplers whose sigma is 1.1 times the reference's are rejected.
func TestSamplerStatisticsRejectWrongVariance(t *testing.T) {
	t.Parallel()
	const n = 200_000
	// sigma = 3.3 against the reference for sigma = 3.
	s, err := NewSampler(big.NewRat(1089, 100), newTestStream("wrong 3.3"))
	if err != nil {
		t.Fatal(err)
	}
	x := make([]int64, n)
	if err := s.Fill(x); err != nil {
		t.Fatal(err)
	}
	ref := exactRef("sigma=3 (sampler 3.3)", 9)
	fails := checkMoments(x, ref)
	if !containsAny(fails, "E[X^2]") {
		t.Errorf("variance check passed a sampler with sigma 1.1x too large: %v", fails)
	}
	stat, df := chiSquare(t, x, ref)
	if crit := chiSquareCritical(df); stat <= crit {
		t.Errorf("chi-square %.1f <= %.1f passed a sampler with sigma 1.1x too large", stat, crit)
	}
	// sigma = 1.1 * 2^40 against the reference for 2^40.
	big1 := new(big.Rat).Mul(ratInt(pow2(80)), big.NewRat(121, 100))
	s, err = NewSampler(big1, newTestStream("wrong 2^40"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fill(x); err != nil {
		t.Fatal(err)
	}
	fails = checkMoments(x, continuousRef("sigma=2^40 (sampler 1.1x)", math.Ldexp(1, 40)))
	if !containsAny(fails, "E[X^2]") {
		t.Errorf("variance check passed a sampler with sigma 1.1x too large: %v", fails)
	}
	// And the same statistics accept the right sampler at this n.
	s, err = NewSampler(big.NewRat(9, 1), newTestStream("right 3"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fill(x); err != nil {
		t.Fatal(err)
	}
	if fails := checkMoments(x, exactRef("sigma=3", 9)); len(fails) > 0 {
		t.Errorf("checks rejected a correct sampler: %v", fails)
	}
}

func containsAny(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestBernoulliExp checks the exact Bernoulli(exp(-gamma)) building blocks
// against exp(-gamma), on both the uint64 and the math/big paths, with 5 SE
// tolerance on 2*10^5 trials each.
func TestBernoulliExp(t *testing.T) {
	t.Parallel()
	s, err := NewSampler(big.NewRat(1, 1), newTestStream("bernoulli"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200_000
	freq := func(f func() bool) float64 {
		c := 0
		for range n {
			if f() {
				c++
			}
		}
		return float64(c) / n
	}
	check := func(name string, got, p float64) {
		t.Helper()
		if se := math.Sqrt(p * (1 - p) / n); math.Abs(got-p) > 5*se {
			t.Errorf("%s: frequency %.5f, want %.5f +- %.5f", name, got, p, 5*se)
		}
	}
	check("exp(-1)", freq(s.bernExpMinus1), math.Exp(-1))
	for _, g := range [][2]uint64{{1, 3}, {2, 3}, {7, 10}, {999, 1000}, {1, 1 << 40}} {
		num, den := g[0], g[1]
		q0, _ := divide128(num, den)
		check(fmt.Sprintf("exp(-%d/%d) uint64", num, den),
			freq(func() bool { return s.bernExpFrac(q0, num, den, nil, nil) }),
			math.Exp(-float64(num)/float64(den)))
		nb, db := new(big.Int).SetUint64(num), new(big.Int).SetUint64(den)
		check(fmt.Sprintf("exp(-%d/%d) big", num, den),
			freq(func() bool { return s.bernExpFrac(q0, 0, 0, nb, db) }),
			math.Exp(-float64(num)/float64(den)))
	}
	check("bigBernoulli(1/3)", freq(func() bool { return s.bigBernoulli(big.NewInt(1), big.NewInt(3)) }), 1.0/3)
}

func divide128(num, den uint64) (q, r uint64) {
	x := new(big.Int).Lsh(new(big.Int).SetUint64(num), 64)
	qq, rr := new(big.Int).QuoRem(x, new(big.Int).SetUint64(den), new(big.Int))
	return qq.Uint64(), rr.Uint64()
}

// wordReader returns the given 64-bit words (little endian), then fails.
type wordReader struct{ words []uint64 }

var errWordsExhausted = errors.New("test words exhausted")

func (w *wordReader) Read(p []byte) (int, error) {
	n := 0
	for len(p)-n >= 8 && len(w.words) > 0 {
		binary.LittleEndian.PutUint64(p[n:], w.words[0])
		w.words = w.words[1:]
		n += 8
	}
	if n == 0 {
		return 0, errWordsExhausted
	}
	return n, nil
}

// samplerWithWords returns a Sampler whose next random words are exactly
// words (its buffer is filled directly so that buffering does not matter).
func samplerWithWords(t *testing.T, words ...uint64) *Sampler {
	t.Helper()
	s, err := NewSampler(big.NewRat(1, 1), &wordReader{})
	if err != nil {
		t.Fatal(err)
	}
	s.buf = make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(s.buf[8*i:], w)
	}
	s.pos = 0
	return s
}

// TestBernoulliTie forces the rare path where a uniform word equals the first
// 64 bits of gamma/K, so the following bits of the exact expansion decide.
func TestBernoulliTie(t *testing.T) {
	t.Parallel()
	// gamma = 1/3: q0 = floor(2^64/3) = 0x5555...5; 2^64 mod 3 = 1.
	q0, _ := divide128(1, 3)
	// K = 1 ties; the next 64 bits of 1/3 are again 0x5555...5, and the
	// word 0 < that, so A_1 = 1; K = 2: MaxUint64 > q0/2, so A_2 = 0 and K
	// = 2 is even: false.
	s := samplerWithWords(t, q0, 0, math.MaxUint64)
	if s.bernExpFrac(q0, 1, 3, nil, nil) {
		t.Error("tie resolved to A_1 = 1 then A_2 = 0 must give false")
	}
	// K = 1 ties and the next word is above the expansion: A_1 = 0, K = 1
	// is odd: true.
	s = samplerWithWords(t, q0, math.MaxUint64)
	if !s.bernExpFrac(q0, 1, 3, nil, nil) {
		t.Error("tie resolved to A_1 = 0 must give true")
	}
	// The same through the math/big representation.
	s = samplerWithWords(t, q0, 0, math.MaxUint64)
	if s.bernExpFrac(q0, 0, 0, big.NewInt(1), big.NewInt(3)) {
		t.Error("big path: tie resolved to A_1 = 1 then A_2 = 0 must give false")
	}
	// gamma = 1/2: q0 = 2^63 and the expansion ends there, so a tie means
	// A_1 = 0 without reading further.
	s = samplerWithWords(t, 1<<63)
	if !s.bernExpFrac(1<<63, 1, 2, nil, nil) {
		t.Error("tie on an exact expansion must give A_1 = 0 (true)")
	}
}

func TestUniform(t *testing.T) {
	t.Parallel()
	s, err := NewSampler(big.NewRat(1, 1), newTestStream("uniform"))
	if err != nil {
		t.Fatal(err)
	}
	const n, k = 140_000, 7
	var count [k]float64
	for range n {
		count[s.uniform(k)]++
	}
	stat := 0.0
	for _, c := range count {
		d := c - n/k
		stat += d * d / (n / k)
	}
	if crit := chiSquareCritical(k - 1); stat > crit {
		t.Errorf("uniform(7): chi-square %.2f > %.2f", stat, crit)
	}
	if got := s.uniform(1); got != 0 {
		t.Errorf("uniform(1) = %d", got)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

var errBoom = errors.New("boom")

func TestSamplerZeroVariance(t *testing.T) {
	t.Parallel()
	// A failing reader proves that no randomness is read.
	s, err := NewSampler(new(big.Rat), failingReader{errBoom})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Sample(); v != 0 || err != nil {
		t.Errorf("Sample() = %d, %v; want 0, nil", v, err)
	}
	x := []int64{5, -7, math.MaxInt64}
	if err := s.Fill(x); err != nil || x[0] != 0 || x[1] != 0 || x[2] != 0 {
		t.Errorf("Fill: %v, %v; want zeros", x, err)
	}
	y := []int64{5, -7, math.MaxInt64}
	if err := s.AddTo(y); err != nil || y[0] != 5 || y[1] != -7 || y[2] != math.MaxInt64 {
		t.Errorf("AddTo: %v, %v; want unchanged", y, err)
	}
}

func TestNewSamplerErrors(t *testing.T) {
	t.Parallel()
	if _, err := NewSampler(nil, nil); err == nil || !strings.Contains(err.Error(), "sigma2 is nil") {
		t.Errorf("nil sigma2: err = %v", err)
	}
	if _, err := NewSampler(big.NewRat(-1, 3), nil); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative sigma2: err = %v", err)
	}
	if _, err := NewSampler(ratInt(pow2(2*MaxSigmaBits)), nil); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("sigma = 2^%d: err = %v", MaxSigmaBits, err)
	}
	// Just below the limit is accepted.
	below := new(big.Int).Sub(pow2(MaxSigmaBits), big.NewInt(1))
	below.Mul(below, below)
	if _, err := NewSampler(ratInt(below), nil); err != nil {
		t.Errorf("sigma = 2^%d - 1: %v", MaxSigmaBits, err)
	}
}

func TestSamplerNilReaderUsesCryptoRand(t *testing.T) {
	t.Parallel()
	s, err := NewSampler(big.NewRat(9, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.src != rand.Reader {
		t.Errorf("nil reader: source is %T, want crypto/rand.Reader", s.src)
	}
	x := make([]int64, 10_000)
	if err := s.Fill(x); err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for _, v := range x {
		if v != 0 {
			nonzero++
		}
	}
	// P(X = 0) is about 0.133 for sigma = 3.
	if nonzero < 8000 {
		t.Errorf("only %d of 10000 draws are nonzero", nonzero)
	}
}

func TestSamplerSigma2IsCopied(t *testing.T) {
	t.Parallel()
	in := big.NewRat(9, 4)
	s, err := NewSampler(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	in.SetInt64(100)
	out := s.Sigma2()
	if out.Cmp(big.NewRat(9, 4)) != 0 {
		t.Errorf("Sigma2() = %s after modifying the argument, want 9/4", out.RatString())
	}
	out.SetInt64(7)
	if s.Sigma2().Cmp(big.NewRat(9, 4)) != 0 {
		t.Errorf("modifying Sigma2()'s result changed the sampler")
	}
}

func TestSamplerReaderErrors(t *testing.T) {
	t.Parallel()
	for _, sigma2 := range []*big.Rat{big.NewRat(9, 1), ratInt(pow2(80))} {
		s, err := NewSampler(sigma2, failingReader{errBoom})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sample(); !errors.Is(err, errBoom) {
			t.Errorf("Sample: err = %v, want wrapping %v", err, errBoom)
		}
		if err := s.Fill(make([]int64, 3)); !errors.Is(err, errBoom) {
			t.Errorf("Fill: err = %v, want wrapping %v", err, errBoom)
		}
		if err := s.AddTo(make([]int64, 3)); !errors.Is(err, errBoom) {
			t.Errorf("AddTo: err = %v, want wrapping %v", err, errBoom)
		}
		// A reader that ends early: the sampler reads whole blocks, so a
		// short source yields io.ErrUnexpectedEOF (or io.EOF).
		s, err = NewSampler(sigma2, strings.NewReader("only a few bytes"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sample(); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			t.Errorf("short reader: err = %v", err)
		}
	}
}

func TestAddTo(t *testing.T) {
	t.Parallel()
	sigma2 := big.NewRat(1_000_000, 1)
	base := []int64{0, 1, -1, 1 << 40, -(1 << 40), 12345}
	got := append([]int64(nil), base...)
	s, err := NewSampler(sigma2, newTestStream("addto"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddTo(got); err != nil {
		t.Fatal(err)
	}
	noise := make([]int64, len(base))
	s, err = NewSampler(sigma2, newTestStream("addto"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fill(noise); err != nil {
		t.Fatal(err)
	}
	for i := range base {
		if got[i] != base[i]+noise[i] {
			t.Errorf("AddTo[%d] = %d, want %d + %d", i, got[i], base[i], noise[i])
		}
	}
}

func TestAddToOverflow(t *testing.T) {
	t.Parallel()
	s, err := NewSampler(big.NewRat(1<<20, 1), newTestStream("overflow"))
	if err != nil {
		t.Fatal(err)
	}
	// Any nonzero draw overflows one of the two extremes; 64 of each make a
	// run of draws that all avoid overflow astronomically unlikely.
	x := make([]int64, 128)
	for i := range x {
		if i%2 == 0 {
			x[i] = math.MaxInt64
		} else {
			x[i] = math.MinInt64
		}
	}
	err = s.AddTo(x)
	if !errors.Is(err, ErrOverflow) {
		t.Fatalf("AddTo at the int64 extremes: err = %v, want ErrOverflow", err)
	}
	for i, v := range x {
		if v != math.MaxInt64 && v != math.MinInt64 && (v > 0) == (i%2 == 0) {
			// Updated elements moved towards zero, which is fine;
			// a wrapped value would have flipped sign.
			continue
		}
		if (i%2 == 0 && v < 0) || (i%2 == 1 && v > 0) {
			t.Errorf("x[%d] = %d wrapped around", i, v)
		}
	}
}

// TestSampleOverflow: with sigma just below 2^61 a draw exceeds the int64
// range (|X| > 4 sigma) with probability about 6e-5; Sample reports it.
func TestSampleOverflow(t *testing.T) {
	t.Parallel()
	s2 := new(big.Int).Sub(pow2(MaxSigmaBits), big.NewInt(1))
	s2.Mul(s2, s2)
	s, err := NewSampler(ratInt(s2), newTestStream("sample overflow"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1_000_000 {
		_, err := s.Sample()
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrOverflow) {
			t.Fatalf("draw %d: %v", i, err)
		}
		return
	}
	t.Error("no int64 overflow in 10^6 draws with sigma ~ 2^61")
}

func TestParallelFill(t *testing.T) {
	t.Parallel()
	sigma2 := ratInt(pow2(80))
	const n = 300_000
	a := make([]int64, n)
	b := make([]int64, n)
	if err := ParallelFill(a, sigma2, newTestStream("parallel"), 4); err != nil {
		t.Fatal(err)
	}
	if err := ParallelFill(b, sigma2, newTestStream("parallel"), 4); err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("ParallelFill is not reproducible for a given reader: index %d: %d != %d", i, a[i], b[i])
		}
	}
	for _, f := range checkMoments(a, continuousRef("parallel sigma=2^40", math.Ldexp(1, 40))) {
		t.Error(f)
	}
	// The workers' parts are independent: compare the parts' variances.
	q := n / 4
	for w := range 4 {
		for _, f := range checkMoments(a[w*q:(w+1)*q], continuousRef(fmt.Sprintf("worker %d", w), math.Ldexp(1, 40))) {
			t.Error(f)
		}
	}
	// crypto/rand path (nil reader), more workers than values, no values.
	c := make([]int64, 3)
	if err := ParallelFill(c, big.NewRat(9, 1), nil, 16); err != nil {
		t.Fatal(err)
	}
	if err := ParallelFill(nil, big.NewRat(9, 1), nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := ParallelFill(nil, big.NewRat(-9, 1), nil, 0); err == nil {
		t.Error("ParallelFill with negative sigma2 and no values: no error")
	}
	// Reader errors surface.
	if err := ParallelFill(make([]int64, 10), big.NewRat(9, 1), failingReader{errBoom}, 2); !errors.Is(err, errBoom) {
		t.Errorf("failing reader: err = %v", err)
	}
}
