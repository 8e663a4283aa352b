package mpc

import (
	"math/rand/v2"
	"testing"
)

func TestLTZ(t *testing.T) {
	e := newEngine(t, 3)
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

func TestFromModT(t *testing.T) {
	const T = 1<<60 - 16383 // the BGV plaintext modulus of protocol/he
	e := newEngine(t, 3)
	vals := []int64{0, 1, -1, T / 2, -(T / 2), 1<<58 - 1, -(1<<58 - 1), 42, -42}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 300 {
		vals = append(vals, rng.Int64N(T)-T/2)
	}
	// Shares mod T as lattigo's encryption-to-shares gives them.
	plain := make([]uint64, len(vals))
	for i, v := range vals {
		if v < 0 {
			plain[i] = uint64(T + v)
		} else {
			plain[i] = uint64(v)
		}
	}
	x := e.ShareModT(plain, T)
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

// TestFromModTChunks: a conversion longer than a chunk, in chunks.
func TestFromModTChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("33,000 comparisons")
	}
	const T = 1<<60 - 16383
	e := newEngine(t, 2)
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
