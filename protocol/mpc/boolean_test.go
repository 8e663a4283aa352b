package mpc

import (
	"math/rand/v2"
	"testing"
)

// TestEdaBits: an edaBit's two sharings are of the same word, over
// Z_2^128 and bit by bit over Z_2, for the engine of all parties and for
// three parties over PeerNets (the adder's carries reach bit 127: sums of
// three uniform words carry out of most positions).
func TestEdaBits(t *testing.T) {
	const n = 300
	check := func(t *testing.T, arith, bin Mat) {
		ones := 0
		for k := range n {
			if arith.V[k] != bin.V[k] {
				t.Fatalf("edaBit %d: %x over Z_2^128, %x bit by bit", k, arith.V[k], bin.V[k])
			}
			ones += int(arith.V[k].Hi >> 63)
		}
		if ones < n/4 || ones > 3*n/4 {
			t.Errorf("the top bit is set in %d of %d edaBits", ones, n)
		}
	}
	t.Run("one engine", func(t *testing.T) {
		e := newReplicated(t, 3)
		rp := e.be.(*replicated)
		arith, bin := rp.makeEdaBits(e, n)
		check(t, e.Reveal(arith), rp.openXor(e, bin))
		if want := 5 + 127 + 2; rp.batches != 1 || e.Cost.Rounds != want {
			t.Errorf("%d rounds and %d batches of triples, want one batch (5 rounds), 127 of ANDs and the two openings", e.Cost.Rounds, rp.batches)
		}
	})
	t.Run("parties", func(t *testing.T) {
		keys, err := NewReplicatedKeys(rand.NewChaCha8([32]byte{5}))
		if err != nil {
			t.Fatal(err)
		}
		in := newReplicated(t, 6)
		got, errs, _ := runPeers(keys, in.Share(NewMat(1, 1)), in.ShareModT([]uint64{0}, testT), func(e *Engine, _ Shared, _ ModT) []Mat {
			rp := e.be.(*replicated)
			arith, bin := rp.makeEdaBits(e, n)
			return []Mat{e.Reveal(arith), rp.openXor(e, bin)}
		}, nil, nil)
		for i := range 3 {
			if errs[i] != nil {
				t.Fatalf("party %d: %v", i, errs[i])
			}
			check(t, got[i][0], got[i][1])
		}
	})
}

// TestTranspose128 holds the bit transpose to its definition, and
// sliced and unsliced to inverses of each other for a column that does
// not fill its last group.
func TestTranspose128(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var m, tr [128]Word
	for i := range m {
		m[i] = Word{rng.Uint64(), rng.Uint64()}
	}
	tr = m
	transpose128(&tr)
	for i := range 128 {
		for j := range 128 {
			if m[i].Bit(uint(j)) != tr[j].Bit(uint(i)) {
				t.Fatalf("bit %d of row %d is %d, transposed %d", j, i, m[i].Bit(uint(j)), tr[j].Bit(uint(i)))
			}
		}
	}
	e := newReplicated(t, 9)
	x := Shared{R: 300, C: 1, S: make([]Mat, 3)}
	for i := range x.S {
		x.S[i] = NewMat(300, 1)
		for k := range x.S[i].V {
			x.S[i].V[k] = Word{rng.Uint64(), rng.Uint64()}
		}
	}
	s := e.sliced(x)
	if s.R != 128 || s.C != 3 || s.S[0].V[127*3+2].Bit(43) != x.S[0].V[2*128+43].Bit(127) {
		t.Fatalf("sliced 300 values: %dx%d, want 128x3 with bit 127 of value 299 in row 127, column 2, bit 43", s.R, s.C)
	}
	back := e.unsliced(s, 300)
	for i := range 3 {
		for k, w := range back.S[i].V {
			if w != x.S[i].V[k] {
				t.Fatalf("component %d, value %d: %x sliced and back, want %x", i, k, w, x.S[i].V[k])
			}
		}
	}
}

// TestLTZWide: the replicated backend's comparison is exact for any word
// (its mask is uniform over Z_2^128), so values far beyond LTZ's bound
// still compare right: what makes its openings hide a value an error
// has pushed out of range.
func TestLTZWide(t *testing.T) {
	e := newReplicated(t, 8)
	rng := rand.New(rand.NewPCG(3, 4))
	vals := []Word{{}, one, one.Neg(), Pow2(127), Pow2(127).Sub(one), Pow2(126), Pow2(126).Neg()}
	for range 200 {
		vals = append(vals, Word{rng.Uint64(), rng.Uint64()})
	}
	x := NewMat(len(vals), 1)
	copy(x.V, vals)
	lt, err := e.LTZ(e.Share(x), 60)
	if err != nil {
		t.Fatal(err)
	}
	got := e.Reveal(lt)
	for k, v := range vals {
		if want := (Word{0, v.Hi >> 63}); got.V[k] != want {
			t.Fatalf("LTZ(%x) = %v, want %v", v, got.V[k], want)
		}
	}
}
