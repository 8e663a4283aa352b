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
	lt, err := e.LTZ(e.Share(x), m)
	if err != nil {
		t.Fatal(err)
	}
	got := e.Reveal(lt)
	for i, v := range vals {
		want := uint64(0)
		if v < 0 {
			want = 1
		}
		if got.V[i] != (Word{0, want}) {
			t.Fatalf("LTZ(%d) = %v, want %d", v, got.V[i], want)
		}
	}
	if e.Cost.Rounds != 1+6+1+1+1 { // open, 6 prefix rounds, the sum, the share, the reveal
		t.Logf("rounds %d", e.Cost.Rounds)
	}
}

// TestFromModT converts values near 0, -T/2, T/2 and T (that is, -1),
// and random ones, from random shares; with the replicated backend also
// from shares at the ends of [0, T) (TestFromModTBoundaries has its
// comparison's turning points).
func TestFromModT(t *testing.T) {
	forEngines(t, 3, checkFromModT)
}

func checkFromModT(t *testing.T, e *Engine) {
	const T = 1<<60 - 16383 // the BGV plaintext modulus of protocol/he
	vals := []int64{0, 1, -1, 2, -2, T / 2, T/2 - 1, -(T / 2), -(T / 2) + 1, 1<<58 - 1, -(1<<58 - 1), 42, -42}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 300 {
		vals = append(vals, rng.Int64N(T)-T/2)
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
// where party 0's a = s_0 - rho + H and party 1's b = s_1 + s_2 + rho
// (mod T) sum to T; rho is the engine's first draw from component 0's
// stream, which the test draws too, to craft shares whose a + b is 0, 1,
// T - 2, T - 1, T, T + 1 and 2T - 2.
func TestFromModTBoundaries(t *testing.T) {
	const T = 1<<60 - 16383
	const h = T / 2
	keys, err := NewReplicatedKeys(rand.NewChaCha8([32]byte{8}))
	if err != nil {
		t.Fatal(err)
	}
	e := newReplicated(t, 8)
	sums := []uint64{0, 1, T - 2, T - 1, T, T + 1, 2*T - 2}
	stream := NewStream(keys[0].Prev)
	x := ModT{T: T, S: make([][]uint64, 3)}
	var vals []int64
	for k, sum := range sums {
		rho := uniformMod(stream, T)
		a := sum / 2
		b := sum - a // both below T
		// a = s_0 - rho + H, b = s_1 + s_2 + rho (mod T), s_2 = k.
		s0 := (a + rho + T - h) % T
		s2 := uint64(k)
		s1 := (b + 2*T - rho - s2) % T
		x.S[0], x.S[1], x.S[2] = append(x.S[0], s0), append(x.S[1], s1), append(x.S[2], s2)
		vals = append(vals, centred((s0+s1+s2)%T, T))
	}
	got, err := e.FromModT(x)
	if err != nil {
		t.Fatal(err)
	}
	out := e.Reveal(got)
	for i, v := range vals {
		if out.V[i] != FromInt64(v) {
			t.Errorf("a + b = %d: %v, want %d", sums[i], out.V[i].Signed(0), v)
		}
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
	const T = 1<<60 - 16383
	rng := rand.New(rand.NewPCG(11, 12))
	vals := make([]int64, 2*ConvertChunk+5)
	plain := make([]uint64, len(vals))
	for i := range vals {
		vals[i] = rng.Int64N(T) - T/2
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
