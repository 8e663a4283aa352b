package mpc

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// program is a data-independent computation on a shared input: a
// product, a truncation, a comparison, the conversion from shares mod T;
// it reveals its outputs.
func program(e *Engine, x Shared, xt ModT) []Mat {
	sq, _ := e.MatMul(0, Product{x, e.Transpose(x)})
	col := e.cols(x, 0, 1)
	lt, _ := e.LTZ(col, 40)
	conv, _ := e.FromModT(xt)
	z, _ := e.InvSqrt(e.Gram(x), 0x1p-26, 3)
	return []Mat{e.Reveal(sq[0]), e.Reveal(lt), e.Reveal(conv), e.Reveal(z)}
}

// TestPartiesOverNet runs the program as n separate party engines over
// LocalNets with a seed-compressed dealer (party 0 fed the dealer's
// corrections, which the dealer produces by running the same program on
// zero shares), and checks that it gives what the engine of all parties
// gives.
func TestPartiesOverNet(t *testing.T) {
	const n, T = 3, testT
	rng := rand.New(rand.NewPCG(11, 12))
	x := EncodeMat(randomFloats(rng, 4, 3, 0.5), DefaultParams.F)
	plain := []uint64{5, T - 7, 1 << 40}

	// Reference: every party in one engine.
	ref := newEngine(t, n)
	want := program(ref, ref.Share(x), ref.ShareModT(plain, T))

	// Inputs: shares from an unrelated dealer.
	in := newEngine(t, n)
	xs := in.Share(x)
	xts := in.ShareModT(plain, T)
	got := overNet(t, n, xs, xts, program)
	for i := range n {
		for k := range want {
			for j := range want[k].V {
				g, w := got[i][k].V[j], want[k].V[j]
				exact := k == 1 || k == 2 // the comparison and the conversion
				if exact && g != w || !exact && math.Abs(g.Signed(DefaultParams.F)-w.Signed(DefaultParams.F)) > 0x1p-26 {
					t.Fatalf("party %d output %d entry %d: %v, want %v", i, k, j, g, w)
				}
			}
		}
	}
}

// overNet runs prog on the shares xs and xts as n party engines over
// LocalNets, with the dealer running prog on zero shares first to make
// party 0's corrections, and returns every party's outputs.
func overNet(t *testing.T, n int, xs Shared, xts ModT, prog func(*Engine, Shared, ModT) []Mat) [][]Mat {
	t.Helper()
	// The dealer: the same program on zero shares, party 0's shares to a channel.
	dealer, err := NewDealer(n, rand.NewChaCha8([32]byte{99}))
	if err != nil {
		t.Fatal(err)
	}
	corrections := make(chan Mat, 1<<16)
	dealer.SetSink(func(m Mat) { corrections <- m })
	dry, err := NewDealerEngine(n, DefaultParams, dealer)
	if err != nil {
		t.Fatal(err)
	}
	// Zero shares made here, not dealt: the dealer's streams must follow the
	// program's calls alone.
	zero := Shared{R: xs.R, C: xs.C, S: make([]Mat, n)}
	zeroT := ModT{T: xts.T, S: make([][]uint64, n)}
	for i := range n {
		zero.S[i] = NewMat(xs.R, xs.C)
		zeroT.S[i] = make([]uint64, len(xts.S[0]))
	}
	prog(dry, zero, zeroT)
	close(corrections)

	nets := LocalNets(n)
	got := make([][]Mat, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := func() (Mat, error) { return <-corrections, nil }
			src, err := NewPartySource(n, i, dealer.Seed(max(i, 1)), next)
			if err != nil {
				errs[i] = err
				return
			}
			e, err := NewPartyEngine(n, i, DefaultParams, src, nets[i])
			if err != nil {
				errs[i] = err
				return
			}
			mine := Shared{R: xs.R, C: xs.C, S: make([]Mat, n)}
			mine.S[i] = xs.S[i]
			mt := ModT{T: xts.T, S: make([][]uint64, n)}
			mt.S[i] = xts.S[i]
			got[i] = prog(e, mine, mt)
			errs[i] = e.Err()
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("party %d: %v", i, errs[i])
		}
	}
	return got
}
