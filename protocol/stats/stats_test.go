package stats

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLayout(t *testing.T) {
	l, err := NewLayout(4, 3)
	if err != nil {
		t.Fatal(err)
	}
	if l.RLen() != 10 || l.VLen() != 12 || l.Len() != 25 {
		t.Fatalf("lengths %d %d %d", l.RLen(), l.VLen(), l.Len())
	}
	// Upper triangle row-major: (0,0)..(0,3),(1,1)..(1,3),(2,2),(2,3),(3,3).
	want := 0
	for i := 0; i < 4; i++ {
		for j := i; j < 4; j++ {
			if l.R(i, j) != want || l.R(j, i) != want {
				t.Fatalf("R(%d,%d) = %d, want %d", i, j, l.R(i, j), want)
			}
			want++
		}
	}
	if l.V(0, 0) != 10 || l.V(2, 3) != 21 || l.N(0) != 22 || l.N(2) != 24 {
		t.Fatal("v/n offsets")
	}
	for _, b := range Blocks {
		lo, hi := l.Range(b)
		if hi < lo {
			t.Fatal(b)
		}
	}
	if l.Chunks(8) != 4 || l.Chunks(25) != 1 || l.Chunks(24) != 2 {
		t.Fatal("chunks")
	}
	for _, bad := range [][2]int{{0, 1}, {1, 0}, {-1, 1}, {20000, 1}} {
		if _, err := NewLayout(bad[0], bad[1]); err == nil {
			t.Errorf("layout %v accepted", bad)
		}
	}
}

func TestAccumulatorExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const d, k, g = 9, 3, 16
	b := int64(1) << g
	l, _ := NewLayout(d, k)
	acc, err := NewAccumulator(l, b, g)
	if err != nil {
		t.Fatal(err)
	}
	// Independent reference in big integers.
	ref := make([]*big.Int, l.Len())
	for i := range ref {
		ref[i] = new(big.Int)
	}
	for row := 0; row < 3000; row++ {
		q := make([]int64, d)
		for i := range q {
			q[i] = rng.Int64N(2*b/3+1) - b/3 // |q_i| <= B/3 so ||q|| <= B
		}
		c := rng.IntN(k)
		if err := acc.Add(q, c); err != nil {
			t.Fatal(err)
		}
		var tmp big.Int
		for i := 0; i < d; i++ {
			for j := i; j < d; j++ {
				ref[l.R(i, j)].Add(ref[l.R(i, j)], tmp.Mul(big.NewInt(q[i]), big.NewInt(q[j])))
			}
			ref[l.V(c, i)].Add(ref[l.V(c, i)], big.NewInt(q[i]))
		}
		ref[l.N(c)].Add(ref[l.N(c)], big.NewInt(1<<g))
	}
	got := acc.Pack()
	for i := range got {
		if !ref[i].IsInt64() || ref[i].Int64() != got[i] {
			t.Fatalf("entry %d: %d, want %s", i, got[i], ref[i])
		}
	}
	rel, err := Unpack(l, g, got)
	if err != nil {
		t.Fatal(err)
	}
	back := rel.Pack()
	for i := range back {
		if back[i] != got[i] {
			t.Fatal("unpack/pack round trip")
		}
	}
	rr, v, n := rel.Float()
	if rr[1*d+2] != rr[2*d+1] || float64(got[l.R(1, 2)])/(1<<(2*g)) != rr[1*d+2] || v[2][3] != float64(got[l.V(2, 3)])/(1<<g) || n[1] != float64(got[l.N(1)])/(1<<g) {
		t.Fatal("Float does not scale correctly")
	}
}

func TestAccumulatorRefuses(t *testing.T) {
	l, _ := NewLayout(2, 2)
	acc, _ := NewAccumulator(l, 100, 4)
	before := acc.Pack()
	for _, tc := range []struct {
		q    []int64
		k    int
		want string
	}{
		{[]int64{1}, 0, "row has 1 values"},
		{[]int64{1, 1}, 2, "class 2 out of range"},
		{[]int64{1, -1}, -1, "class -1"},
		{[]int64{71, 71}, 0, "outside the clip ball"},
		{[]int64{1 << 60, 0}, 0, "outside the clip ball"},
	} {
		if err := acc.Add(tc.q, tc.k); err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("Add(%v, %d): %v, want %q", tc.q, tc.k, err, tc.want)
		}
	}
	if err := acc.Add([]int64{70, 71}, 1); err != nil { // 4900 + 5041 < 10000
		t.Fatal(err)
	}
	after := acc.Pack()
	for i := range before {
		if i != l.R(0, 0) && i != l.R(0, 1) && i != l.R(1, 1) && i != l.V(1, 0) && i != l.V(1, 1) && i != l.N(1) && after[i] != before[i] {
			t.Fatal("refused rows changed the statistics")
		}
	}
	// A bound so large that one row could fill int64: the second row is refused.
	big1, err := NewAccumulator(l, 1<<31, 0)
	if err != nil {
		t.Fatal(err)
	}
	if big1.MaxRows() != 1 {
		t.Fatalf("max rows %d", big1.MaxRows())
	}
	if err := big1.Add([]int64{1 << 31, 0}, 0); err != nil {
		t.Fatal(err)
	}
	if err := big1.Add([]int64{1, 0}, 0); !errors.Is(err, ErrTooManyRows) {
		t.Fatalf("second row: %v", err)
	}
	if _, err := NewAccumulator(l, 1<<32, 0); err == nil {
		t.Fatal("B^2 beyond int64 accepted")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func BenchmarkAccumulate(b *testing.B) {
	for _, d := range []int{8, 50, 100, 784} {
		b.Run("d="+big.NewInt(int64(d)).String(), func(b *testing.B) {
			l, _ := NewLayout(d, 10)
			acc, _ := NewAccumulator(l, 1<<16, 16)
			rng := rand.New(rand.NewPCG(1, 1))
			q := make([]int64, d)
			for i := range q {
				q[i] = rng.Int64N(2*(1<<16)/int64(d+1)) - (1<<16)/int64(d+1)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := acc.Add(q, 3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// randomBallRows returns n rows inside the ball of radius b, with classes.
func randomBallRows(rng *rand.Rand, n, d, k int, b int64) ([]int64, []int) {
	rows := make([]int64, n*d)
	classes := make([]int, n)
	lim := max(1, b/int64(d))
	for t := range n {
		for i := range d {
			rows[t*d+i] = rng.Int64N(2*lim+1) - lim
		}
		classes[t] = rng.IntN(k)
	}
	return rows, classes
}

func TestAddBatchAndMergeMatchAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, kind := range []Kind{Full, Moments, Histogram, Marginals} {
		for _, d := range []int{1, 7, 100, 300} {
			k := 3
			if kind == Moments {
				k = 1
			}
			l, err := NewLayoutOf(kind, d, k)
			if err != nil {
				t.Fatal(err)
			}
			const b, g = 1 << 16, 16
			rows, classes := randomBallRows(rng, 257, d, k, b)
			if kind == Marginals {
				// Each feature's bucket, class 0.
				for i := range rows {
					rows[i] = rng.Int64N(int64(k))
				}
				clear(classes)
			}
			one, _ := NewAccumulator(l, b, g)
			for i, c := range classes {
				if err := one.Add(rows[i*d:(i+1)*d], c); err != nil {
					t.Fatal(err)
				}
			}
			// The same rows in uneven batches over three accumulators, merged.
			parts := make([]*Accumulator, 3)
			for i := range parts {
				parts[i], _ = NewAccumulator(l, b, g)
			}
			for lo, p := 0, 0; lo < len(classes); p++ {
				hi := min(len(classes), lo+1+rng.IntN(60))
				if err := parts[p%3].AddBatch(rows[lo*d:hi*d], classes[lo:hi]); err != nil {
					t.Fatal(err)
				}
				lo = hi
			}
			for _, p := range parts[1:] {
				if err := parts[0].Merge(p); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(one.Pack(), parts[0].Pack()) || one.Rows() != parts[0].Rows() {
				t.Fatalf("%s d=%d: batched and merged statistics differ from Add", kind, d)
			}
		}
	}
}

func TestAddBatchRefusesWholeBatch(t *testing.T) {
	l, _ := NewLayout(2, 1)
	acc, _ := NewAccumulator(l, 10, 0)
	if err := acc.AddBatch([]int64{1, 1, 10, 10}, []int{0, 0}); !errors.Is(err, ErrNotClipped) {
		t.Fatalf("got %v", err)
	}
	if acc.Rows() != 0 || slices.ContainsFunc(acc.Pack(), func(x int64) bool { return x != 0 }) {
		t.Fatal("a refused batch changed the statistics")
	}
	other, _ := NewAccumulator(l, 11, 0)
	if err := acc.Merge(other); err == nil {
		t.Fatal("merged accumulators of different bounds")
	}
}

func BenchmarkAccumulateBatch(b *testing.B) {
	for _, d := range []int{100, 784} {
		l, _ := NewLayout(d, 1)
		rng := rand.New(rand.NewPCG(1, 1))
		const n = 256
		rows, classes := randomBallRows(rng, n, d, 1, 1<<16)
		b.Run(fmt.Sprintf("d=%d/rows", d), func(b *testing.B) {
			acc, _ := NewAccumulator(l, 1<<16, 16)
			for b.Loop() {
				for i, c := range classes {
					if err := acc.Add(rows[i*d:(i+1)*d], c); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
		b.Run(fmt.Sprintf("d=%d/batch", d), func(b *testing.B) {
			acc, _ := NewAccumulator(l, 1<<16, 16)
			for b.Loop() {
				if err := acc.AddBatch(rows, classes); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
	}
}

// At the edge of the float64 blocks: B^2 just below 2^53 (blocks of one
// row, every product near 2^53), B^2 = 2^52 (blocks of two rows reaching
// 2^53), and B^2 just above 2^53 (int64 only). Rows on the sphere make the
// products as large as they can be.
func TestAddBatchFloatEdge(t *testing.T) {
	for _, b := range []int64{1 << 26, 94906265, 94906266, 1 << 30} {
		for _, d := range []int{1, 2, 5} {
			l, _ := NewLayout(d, 1)
			one, _ := NewAccumulator(l, b, 0)
			batch, _ := NewAccumulator(l, b, 0)
			n := int(min(one.MaxRows(), 257))
			rows := make([]int64, n*d)
			for r := range n {
				rows[r*d+r%d] = b
				if r%3 == 0 {
					rows[r*d+r%d] = -b
				}
			}
			for r := range n {
				if err := one.Add(rows[r*d:(r+1)*d], 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := batch.AddBatch(rows, make([]int, n)); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(one.Pack(), batch.Pack()) {
				t.Fatalf("B=%d d=%d: AddBatch differs from Add", b, d)
			}
		}
	}
	if (&Accumulator{b2: [2]uint64{0, 94906265 * 94906265}}).floatChunk() != 1 || (&Accumulator{b2: [2]uint64{0, 94906266 * 94906266}}).floatChunk() != 0 {
		t.Error("floatChunk does not switch at B^2 = 2^53")
	}
}
