package mpc

import (
	"math/rand/v2"
	"testing"
)

func TestLTZ(t *testing.T) {
	forEngines(t, 3, checkLTZ)
}

func checkLTZ(t *testing.T, e *Engine) {
	const m = 60
	vals := []int64{0, 1, -1, 2, -2, 1<<59 - 1, -(1<<59 - 1), 123456789, -987654321}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		vals = append(vals, rng.Int64N(1<<60)-1<<59)
	}
	x := NewMat(len(vals), 1)
	for i, v := range vals {
		x.V[i] = FromInt64(v)
	}
	// Every value at once (the replicated backend compares them bit-
	// sliced), then a few (a value's bits in a word).
	compare := func(n int) {
		t.Helper()
		lt, err := e.LTZ(e.Share(Mat{R: n, C: 1, V: x.V[:n]}), m)
		if err != nil {
			t.Fatal(err)
		}
		got := e.Reveal(lt)
		for i, v := range vals[:n] {
			want := uint64(0)
			if v < 0 {
				want = 1
			}
			if got.V[i] != (Word{0, want}) {
				t.Fatalf("LTZ(%d) of %d values = %v, want %d", v, n, got.V[i], want)
			}
		}
	}
	compare(len(vals))
	// With the dealer: the open, 6 prefix rounds, the sum's products and
	// the reveal. The replicated backend makes its pools first (random
	// bits in two rounds, edaBits in 127, and three batches of verified
	// triples in five each: for the bits' products, the edaBits' ANDs and
	// the comparison's), then the open, the 7 levels of the sliced
	// comparison's tree over the 127 low bits, the result's conversion
	// from Z_2 and the reveal.
	want := 1 + 6 + 1 + 1
	if replicatedBackend(e) {
		want = 2 + 127 + 3*5 + 1 + 7 + 1 + 1
	}
	if e.Cost.Rounds != want {
		t.Errorf("LTZ and a reveal took %d rounds, want %d", e.Cost.Rounds, want)
	}
	compare(slicedFrom - 1)
}

// TestFromModT converts values near 0 and at the ends of the range
// [-(T-1)/2, (T-1)/2] (T odd), and random ones, from random shares; with the
// replicated backend also from shares at the ends of [0, T)
// (TestFromModTBoundaries has its comparison's turning points).
func TestFromModT(t *testing.T) {
	forEngines(t, 3, checkFromModT)
}

// convertRange is FromModT's bound on |x| for the (odd) plaintext modulus T.
const convertRange = (testT - 1) / 2

const testT = 1<<60 - 16383 // the BGV plaintext modulus of protocol/he

func checkFromModT(t *testing.T, e *Engine) {
	const T, h = testT, testT / 2
	vals := []int64{0, 1, -1, 2, -2, h, h - 1, -h, -h + 1, 1<<57 - 1, -(1<<57 - 1), 42, -42}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 300 {
		vals = append(vals, rng.Int64N(2*h+1)-h)
	}
	// Shares mod T as lattigo's encryption-to-shares gives them.
	plain := make([]uint64, len(vals))
	for i, v := range vals {
		plain[i] = uint64((v + T) % T)
	}
	x := e.ShareModT(plain, T)
	if replicatedBackend(e) {
		for _, c := range [][3]uint64{{0, 0, 0}, {T - 1, 0, 0}, {T - 1, T - 1, 0}, {T - 1, T - 1, T - 1}, {0, T - 1, T - 1}, {0, 0, T - 1}} {
			for i := range 3 {
				x.S[i] = append(x.S[i], c[i])
			}
			vals = append(vals, centred((c[0]+c[1]%T+c[2]%T)%T, T))
		}
	}
	got, err := e.FromModT(x)
	if err != nil {
		t.Fatal(err)
	}
	out := e.Reveal(got)
	for i, v := range vals {
		if out.V[i] != FromInt64(v) {
			t.Fatalf("value %d: %v, want %d", i, out.V[i].Signed(0), v)
		}
	}
}

// centred returns the representative of v mod t in [-t/2, t/2).
func centred(v, t uint64) int64 {
	if v >= t-t/2 {
		return int64(v) - int64(t)
	}
	return int64(v)
}

// TestFromModTBoundaries: the replicated conversion's comparison turns
// on q in s = a + b = x + H + q T, where party 0's a = s_0 - rho + H and
// party 1's b = s_1 + s_2 + rho (mod T) are below T; rho is the engine's
// first draw from component 0's stream, which the test draws too, to
// craft shares of x at the ends of the range and near 0 with q = 0 and
// q = 1 each, a and b as far apart as they go: where s - T is nearest
// zero, which the truncation must not turn to the other sign.
func TestFromModTBoundaries(t *testing.T) {
	const T, r = testT, convertRange
	const h = T / 2
	keys, err := NewReplicatedKeys(rand.NewChaCha8([32]byte{8}))
	if err != nil {
		t.Fatal(err)
	}
	e := newReplicated(t, 8)
	stream := NewStream(keys[0].Prev)
	x := ModT{T: T, S: make([][]uint64, 3)}
	var vals []int64
	var sums []uint64
	k := 0
	// The ends of FromModT's range, and of [-H, T - H), which the
	// replicated conversion's comparison also gets right.
	for _, v := range []int64{r, -r, r - 1, -r + 1, 0, 1, -1, T - 1 - h, -h, T - 2 - h, -h + 1} {
		for q := range uint64(2) {
			sum := uint64(v+h) + q*T // x + H + q T, in [0, 2T)
			for _, a := range []uint64{min(sum, T-1), sum - min(sum, T-1), sum / 2} {
				b := sum - a
				if b >= T {
					continue
				}
				rho := uniformMod(stream, T)
				// a = s_0 - rho + H, b = s_1 + s_2 + rho (mod T), s_2 = k.
				s0 := (a + rho + T - h) % T
				s2 := uint64(k) % T
				s1 := (b + 2*T - rho - s2) % T
				x.S[0], x.S[1], x.S[2] = append(x.S[0], s0), append(x.S[1], s1), append(x.S[2], s2)
				vals, sums = append(vals, v), append(sums, sum)
				k++
			}
		}
	}
	got, err := e.FromModT(x)
	if err != nil {
		t.Fatal(err)
	}
	out := e.Reveal(got)
	for i, v := range vals {
		if out.V[i] != FromInt64(v) {
			t.Errorf("x = %d, a + b = %d: %v", v, sums[i], out.V[i].Signed(0))
		}
	}
	if len(vals) < 28 {
		t.Errorf("%d crafted values, want at least 28", len(vals))
	}
}

// TestFromModTChunks: a conversion longer than a chunk, in chunks.
func TestFromModTChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("33,000 comparisons")
	}
	forEngines(t, 2, checkFromModTChunks)
}

func checkFromModTChunks(t *testing.T, e *Engine) {
	const T, r = testT, convertRange
	rng := rand.New(rand.NewPCG(11, 12))
	vals := make([]int64, 2*ConvertChunk+5)
	plain := make([]uint64, len(vals))
	for i := range vals {
		vals[i] = rng.Int64N(2*r+1) - r
		plain[i] = uint64((vals[i] + T) % T)
	}
	got, err := e.FromModT(e.ShareModT(plain, T))
	if err != nil {
		t.Fatal(err)
	}
	out := e.Reveal(got)
	for i, v := range vals {
		if out.V[i] != FromInt64(v) {
			t.Fatalf("value %d: %v, want %d", i, out.V[i].Signed(0), v)
		}
	}
}

// BenchmarkFromModT converts one chunk (ConvertChunk values) with the
// replicated backend, every party in one engine: the members' CPU for
// 1/19 of a d = 784 sum. It reports the bytes each party sends.
func BenchmarkFromModT(b *testing.B) {
	const T, r = testT, convertRange
	rng := rand.New(rand.NewPCG(13, 14))
	plain := make([]uint64, ConvertChunk)
	for i := range plain {
		plain[i] = uint64((rng.Int64N(2*r+1) - r + T) % T)
	}
	e := newReplicated(b, 9)
	x := e.ShareModT(plain, T)
	sent := e.Cost.BytesPerParty
	b.ResetTimer()
	for range b.N {
		if _, err := e.FromModT(x); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.Cost.BytesPerParty-sent)/float64(b.N), "B/party")
}
