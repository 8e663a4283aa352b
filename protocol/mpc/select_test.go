package mpc

import "testing"

// TestFirstTrue: the one-hot of the first set bit for every pattern of up to
// 11 bits (all zeros when none is set), and Choose takes that operand (zero
// for none); ceil(log2 n) rounds, and one for the choice.
func TestFirstTrue(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 11} {
		for pattern := range 1 << n {
			e := newEngine(t, 3)
			b := NewMat(n, 1)
			for j := range n {
				b.V[j] = Word{0, uint64(pattern>>j) & 1}
			}
			oh, err := e.FirstTrue(e.Share(b))
			if err != nil {
				t.Fatal(err)
			}
			xs := make([]Shared, n)
			for j := range xs {
				m := NewMat(2, 2)
				for i := range m.V {
					m.V[i] = Encode(float64(10*j+i+1), e.P.F)
				}
				xs[j] = e.Share(m)
			}
			ch, err := e.Choose(oh, xs...)
			if err != nil {
				t.Fatal(err)
			}
			got, chosen := e.Reveal(oh), e.Reveal(ch)
			first := -1
			for j := range n {
				if pattern>>j&1 == 1 {
					first = j
					break
				}
			}
			for j := range n {
				want := uint64(0)
				if j == first {
					want = 1
				}
				if got.V[j] != (Word{0, want}) {
					t.Fatalf("n %d pattern %b: one-hot %d is %v, want %d", n, pattern, j, got.V[j], want)
				}
			}
			for i, w := range chosen.V {
				want := 0.0
				if first >= 0 {
					want = float64(10*first + i + 1)
				}
				if w.Signed(e.P.F) != want {
					t.Fatalf("n %d pattern %b: chosen %v, want operand %d", n, pattern, chosen.Decode(e.P.F), first)
				}
			}
			if pattern == 0 && n == 11 {
				t.Logf("first of 11 bits and the choice: %d rounds with the two reveals", e.Cost.Rounds)
			}
		}
	}
}

// TestScaleBy: a shared scalar times a shared matrix is the exact product
// in the ring (entries up to 2^100, a scalar up to 2^20 and negative),
// Gate's zero bit zeroes its operand, its one bit keeps it, and
// SquaredNorms sums the squares exactly, on both backends (the replicated
// one checks them as matrix products).
func TestScaleBy(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *Engine) {
		x := NewMat(3, 4)
		for i := range x.V {
			x.V[i] = Word{uint64(i) << 30, uint64(7*i + 1)}.Neg()
		}
		s := NewMat(1, 1)
		s.V[0] = FromInt64(-(1<<20 - 3))
		got, err := e.ScaleBy(e.Share(s), e.Share(x))
		if err != nil {
			t.Fatal(err)
		}
		gated, err := e.Gate(e.Share(Mat{R: 2, C: 1, V: []Word{{}, one}}), e.Share(x), e.Share(x))
		if err != nil {
			t.Fatal(err)
		}
		prod, zero, kept := e.Reveal(got), e.Reveal(gated[0]), e.Reveal(gated[1])
		if prod.R != 3 || prod.C != 4 {
			t.Fatalf("s x is %dx%d, want 3x4", prod.R, prod.C)
		}
		for i, w := range x.V {
			if prod.V[i] != w.Mul(s.V[0]) || zero.V[i] != (Word{}) || kept.V[i] != w {
				t.Fatalf("entry %d: s x %v (want %v), gated by 0 %v, by 1 %v (want %v)", i, prod.V[i], w.Mul(s.V[0]), zero.V[i], kept.V[i], w)
			}
		}
		if _, err := e.ScaleBy(e.Share(x), e.Share(x)); err == nil {
			t.Error("a 3x4 scalar accepted")
		}
		// SquaredNorms: of x, of 2x and of x^T (another shape, the same size).
		norms, err := e.SquaredNorms(e.Share(x), e.Scale(e.Share(x), 2), e.Transpose(e.Share(x)))
		if err != nil {
			t.Fatal(err)
		}
		var want Word
		for _, w := range x.V {
			want = want.Add(w.Mul(w))
		}
		sums := e.Reveal(norms)
		if sums.R != 3 || sums.V[0] != want || sums.V[1] != want.Mul(FromInt64(4)) || sums.V[2] != want {
			t.Errorf("squared norms %v, want %v, 4 times it, %v", sums.V, want, want)
		}
		if _, err := e.SquaredNorms(e.Share(x), e.Share(s)); err == nil {
			t.Error("squared norms of operands of different sizes accepted")
		}
	})
}
