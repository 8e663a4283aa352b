package dp

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/fedpca/fedpca/protocol/stats"
)

// change returns sum_b ||a_b - b_b||^2 / s_b of two packed releases.
func change(l stats.Layout, a, b []int64, s [3]float64) float64 {
	out := 0.0
	for _, blk := range stats.Blocks {
		lo, hi := l.Range(blk)
		for i := lo; i < hi; i++ {
			d := float64(a[i] - b[i])
			out += d * d / s[blk]
		}
	}
	return out
}

// packOf accumulates rows (d values each) of the given classes.
func packOf(t *testing.T, l stats.Layout, bound int64, bits uint, rows [][]int64, classes []int) []int64 {
	t.Helper()
	acc, err := stats.NewAccumulator(l, bound, bits)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range rows {
		if err := acc.Add(q, classes[i]); err != nil {
			t.Fatal(err)
		}
	}
	return acc.Pack()
}

// inBall scales a real direction to an integer row with ||q|| <= bound
// (and |q_i| <= box when box > 0).
func inBall(x []float64, bound, box int64) []int64 {
	n := 0.0
	for _, v := range x {
		n += v * v
	}
	n = math.Sqrt(n)
	q := make([]int64, len(x))
	for i, v := range x {
		if n > 0 {
			q[i] = int64(math.Trunc(v / n * float64(bound)))
		}
		if box > 0 {
			q[i] = max(-box, min(box, q[i]))
		}
	}
	return q
}

// buckets maps a row's values to buckets of a marginals layout, for rows
// found as for the other layouts.
func buckets(q []int64, k int) []int64 {
	out := make([]int64, len(q))
	for i, x := range q {
		out[i] = (x%int64(k) + int64(k)) % int64(k)
	}
	return out
}

// TestMu2BoundsNeighbours: for every kind of layout, the largest change of a
// release between neighbours (a row added; a kept row replaced by another,
// of the same class or another, as the row cap makes) measured on real
// accumulators, in the metric of random noise variances, never exceeds
// Geometry.Mu2, and the worst rows (orthogonal rows at the bound; rows
// symmetric about a diagonal, whose R change lies on the diagonal; opposite
// rows; box corners) come within a few percent of it: the bound is what
// calibration needs, no more.
func TestMu2BoundsNeighbours(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 29))
	const bits = 6
	h := int64(1) << bits
	for _, tc := range []struct {
		kind  stats.Kind
		d, k  int
		bound int64
	}{
		{stats.Full, 3, 1, 3 * h / 2},
		{stats.Full, 4, 3, h},
		{stats.Moments, 3, 1, int64(math.Floor(math.Sqrt(3) * float64(h)))},
		{stats.Moments, 4, 1, h}, // C = 1 < sqrt(d): the ball binds too
		{stats.Histogram, 3, 5, h},
		{stats.Marginals, 3, 5, h},
	} {
		l, err := stats.NewLayoutOf(tc.kind, tc.d, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		g := Geometry{Layout: l, Bound: tc.bound, Bits: bits}
		box := int64(0)
		if tc.kind == stats.Moments {
			box = h
		}
		for trial := range 40 {
			var s [3]float64
			for b := range s {
				s[b] = math.Exp(rng.Float64()*8 - 4) // variances over 3 orders of magnitude either way
			}
			if trial == 0 {
				s = [3]float64{1, 1, 1}
			}
			bound := g.Mu2(s)
			base := [][]int64{inBall([]float64{1, 2, 3, 4}[:tc.d], tc.bound/2, box)}
			baseClass := []int{0}
			worst := 0.0
			if tc.kind == stats.Marginals {
				// A marginals row is each feature's bucket.
				base = [][]int64{{1, 2, 3}}
			}
			consider := func(q []int64, kq int, r []int64, kr int) {
				if tc.kind == stats.Marginals {
					q, r, kq, kr = buckets(q, tc.k), buckets(r, tc.k), 0, 0
				}
				// add q; replace q by r
				with := packOf(t, l, tc.bound, bits, append(base[:1:1], q), append(baseClass[:1:1], kq))
				without := packOf(t, l, tc.bound, bits, base, baseClass)
				repl := packOf(t, l, tc.bound, bits, append(base[:1:1], r), append(baseClass[:1:1], kr))
				for _, v := range []float64{change(l, with, without, s), change(l, with, repl, s)} {
					if v > bound {
						t.Fatalf("%s d=%d k=%d, variances %v: a neighbour changes the release by %g > Mu2 %g (q %v class %d, r %v class %d)", tc.kind, tc.d, tc.k, s, v, bound, q, kq, r, kr)
					}
					worst = max(worst, v)
				}
			}
			random := func() []int64 {
				x := make([]float64, tc.d)
				for i := range x {
					x[i] = rng.NormFloat64()
				}
				return inBall(x, tc.bound, box)
			}
			for range 200 {
				consider(random(), rng.IntN(tc.k), random(), rng.IntN(tc.k))
			}
			// Adversarial pairs.
			e := func(i int, v float64) []float64 { x := make([]float64, tc.d); x[i] = v; return x }
			consider(inBall(e(0, 1), tc.bound, box), 0, inBall(e(1, 1), tc.bound, box), tc.k-1)
			consider(inBall(e(0, 1), tc.bound, box), 0, inBall(e(1, 1), tc.bound, box), 0)
			consider(inBall(e(0, 1), tc.bound, box), 0, inBall(e(0, -1), tc.bound, box), 0)
			for beta := -math.Pi / 4; beta <= math.Pi/4; beta += math.Pi / 64 {
				x, y := make([]float64, tc.d), make([]float64, tc.d)
				x[0], x[1], y[0], y[1] = math.Cos(beta), math.Sin(beta), math.Sin(beta), math.Cos(beta)
				consider(inBall(x, tc.bound, box), 0, inBall(y, tc.bound, box), 0)
			}
			if tc.kind == stats.Moments {
				// Per coordinate x, y = x - t for t in [0, 2x], x = h or the
				// largest corner inside the ball.
				x := h
				for int64(tc.d)*x*x > tc.bound*tc.bound {
					x--
				}
				for step := int64(0); step <= 2*x; step += max(x/16, 1) {
					q, r := make([]int64, tc.d), make([]int64, tc.d)
					for i := range q {
						q[i], r[i] = x, x-step
					}
					consider(q, 0, r, 0)
				}
			}
			if tc.kind != stats.Moments || tc.bound*tc.bound >= int64(tc.d)*h*h {
				if worst < 0.9*bound {
					t.Errorf("%s d=%d k=%d, variances %v: the worst neighbours found change the release by %g, Mu2 %g: the bound is loose", tc.kind, tc.d, tc.k, s, worst, bound)
				}
			}
		}
	}
}

// TestCapFactors: the factors the row cap costs at the default splits
// (PROTOCOL.md section 6), from the closed forms of Geometry.Mu2.
func TestCapFactors(t *testing.T) {
	const g = 16
	for _, tc := range []struct {
		name  string
		l     stats.Layout
		split Split
		want  float64
	}{
		{"pca", stats.Layout{D: 30, K: 1}, DefaultSplit, 2*0.65 + 2*0.02 + 0.02*0.02/(2*0.65)},
		{"pca, the earlier default", stats.Layout{D: 30, K: 1}, Split{R: 0.98, V: 0.015, N: 0.005}, 2*0.98 + 2*0.015 + 0.015*0.015/(2*0.98)},
		{"dca", stats.Layout{D: 30, K: 3}, DiscriminantSplit, 2},
		{"dca, the earlier default", stats.Layout{D: 30, K: 3}, Split{R: 0.3, V: 0.6, N: 0.1}, 2.4},
		{"norms", stats.Layout{D: 30, K: 21, Kind: stats.Histogram}, DefaultSplitFor("norms"), 2},
	} {
		c, err := Calibrate(1, 1e-6, tc.split, tc.l, 1<<g, g)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(c.Factor/tc.want-1) > 1e-9 {
			t.Errorf("%s: factor %v, want %v", tc.name, c.Factor, tc.want)
		}
	}
}

// TestCostAccount: composition adds, the epsilon of a cost is the exact
// profile plus the correction, an exact budget fits, Room is the rho left.
func TestCostAccount(t *testing.T) {
	mu := GaussMu(1, 1e-6)
	exact := Cost{Rho: Float(mu * mu / 2)}
	if e := exact.Epsilon(1e-6); e > 1 || e < 1-1e-9 {
		t.Errorf("epsilon of GaussMu(1, 1e-6): %v", e)
	}
	if r := (Cost{}).Room(1, 1e-6); math.Abs(r/(mu*mu/2)-1) > 1e-9 {
		t.Errorf("room of an empty ledger %v, want %v", r, mu*mu/2)
	}
	half := Cost{Rho: exact.Rho / 2, Eta: 1e-4, Tail: Float(1e-6 * math.Exp(-40))}
	both := Compose(half, half)
	if both.Rho != exact.Rho || both.Eta != 2e-4 || both.Tail != 2*half.Tail {
		t.Errorf("compose %+v", both)
	}
	if e := both.Epsilon(1e-6); e <= 1+4e-4-1e-9 {
		t.Errorf("two halves with corrections: epsilon %v, want above 1 + 4 eta", e)
	}
	if both.Within(1, 1e-6) {
		t.Error("over budget but within")
	}
	if r := both.Room(1, 1e-6); r >= 0 || half.Room(1, 1e-6) <= 0 {
		t.Errorf("room: both %v, one half %v", r, half.Room(1, 1e-6))
	}
	for _, g := range []uint{4, 8, 16} {
		for _, l := range []stats.Layout{{D: 30, K: 1}, {D: 30, K: 5}} {
			split := DefaultSplit
			if l.K > 1 {
				split = DiscriminantSplit
			}
			sb := ShareBound{Max: 23, MinWeight: big.NewRat(1, 20)}
			c, err := CalibrateShares(0.5, 1e-6, split, l, 1<<g, g, sb)
			if err != nil {
				t.Fatal(err)
			}
			if !c.Cost.Within(0.5, 1e-6) {
				t.Errorf("g=%d k=%d: the calibration costs %v > 0.5: an exact budget would refuse it", g, l.K, c.Cost.Epsilon(1e-6))
			}
			// The cost charged covers every set of shares the bound
			// allows: 20 equal shares and the three smallest allowed.
			var shares []Share
			for range 20 {
				shares = append(shares, Share{Weight: big.NewRat(1, 20)})
			}
			shares = append(shares, Share{Weight: big.NewRat(1, 20)}, Share{Weight: big.NewRat(1, 20)}, Share{Weight: big.NewRat(1, 20)})
			if a := c.Account(shares); a.Epsilon > Float(c.Cost.Epsilon(1e-6)) {
				t.Errorf("g=%d k=%d: shares cost %v, more than charged %v", g, l.K, a.Epsilon, c.Cost.Epsilon(1e-6))
			}
		}
	}
}

// TestRoomMemo: Room's remembered answers are what it computes, for costs
// within, at and over a budget and for each budget, and the memo stays
// within its bound.
func TestRoomMemo(t *testing.T) {
	costs := []Cost{{}, {Rho: 0.01}, {Rho: 0.05, Eta: 1e-6, Tail: 1e-12}, {Rho: 3}, {Rho: Float(math.Inf(1))}}
	for _, c := range costs {
		for _, b := range [][2]float64{{1, 1e-6}, {0.3, 1e-8}, {8, 1e-5}} {
			want := c.room(b[0], b[1])
			for i := range 2 { // computed, then remembered
				if got := c.Room(b[0], b[1]); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
					t.Errorf("cost %+v, budget %v, call %d: Room %v, computed %v", c, b, i+1, got, want)
				}
			}
		}
	}
	m := roomCache{limit: 3}
	for i := range 10 {
		m.put(roomKey{rho: uint64(i)}, float64(i))
		if len(m.m) > 3 {
			t.Fatalf("memo of limit 3 holds %d entries", len(m.m))
		}
	}
	if v, ok := m.get(roomKey{rho: 9}); !ok || v != 9 {
		t.Fatalf("the last entry put: %v %v", v, ok)
	}
}
