package job

import (
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/schema"
)

// TestProfileRounds checks the exact statistics of the profile's rounds on
// rows whose values are worked out by hand: the moments (sums and sums of
// squares of the clamped rows in [-1, 1]) and the norms histogram.
func TestProfileRounds(t *testing.T) {
	// a in [0, 8] maps to (a-4)/4, b in [-2, 2] to b/2.
	sch, err := schema.Parse([]byte(`{"id":"p","features":[{"name":"a","center":4,"scale":4,"min":0,"max":8},{"name":"b","center":0,"scale":2,"min":-2,"max":2}],"clip_norm":2,"quant_bits":4}`))
	if err != nil {
		t.Fatal(err)
	}
	// z rows: (1, 0) [a=8], (-1, 1) [a=-3 clamped to 0, b=2], (0, 0.5),
	// (1, -1) [a=12 clamped, b=-5 clamped]: norms 1, 1.414, 0.5, 1.414.
	rows := "a,b\n8,0\n-3,2\n4,1\n12,-5\n"
	m := &Spec{Analysis: MomentsJob, MaxOwnerRows: 10}
	acc, rep, err := ReadStatistics(m, sch, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	// At 2^4: q rows (16,0), (-16,16), (0,8), (16,-16).
	want := []int64{3 * 256, 2*256 + 64, 16, 8, 4 << 4} // sums of q_a^2, q_b^2; sums of q_a, q_b; n
	if got := acc.Pack(); !slicesEqual(got, want) || rep.Clamped != 3 {
		t.Fatalf("moments %v, want %v; clamped %d, want 3", got, want, rep.Clamped)
	}
	// A moments job needs every value in the box.
	if err := sch.InBox(); err != nil {
		t.Fatal(err)
	}
	loose, _ := schema.Parse([]byte(`{"id":"p","features":[{"name":"a","center":4,"scale":2,"min":0,"max":8},{"name":"b","center":0,"scale":2,"min":-2,"max":2}]}`))
	if err := loose.InBox(); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("bounds mapped outside [-1, 1]: %v", err)
	}
	// A moments job that clamps into the box: under a schema that maps a
	// window [2, 6] of a and [-1, 1] of b onto [-1, 1], the values beyond
	// the window count at its edges.
	win, _ := schema.Parse([]byte(`{"id":"p","features":[{"name":"a","center":4,"scale":2,"min":0,"max":8},{"name":"b","center":0,"scale":1,"min":-2,"max":2}],"clip_norm":2,"quant_bits":4}`))
	cm := &Spec{Analysis: MomentsJob, MaxOwnerRows: 10, ClampBox: true}
	acc, rep, err = ReadStatistics(cm, win, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	// z rows (a-4)/2, b: (1, 0), (-1, 1), (0, 1), (1, -1), all in the box
	// after the clamp: a 8 -> 2 -> 1, -3 -> 0 -> -2 -> -1, 12 -> 8 -> 1; b
	// 2 -> 1, -5 -> -2 -> -1.
	if got, want := acc.Pack(), []int64{3 * 256, 3 * 256, 16, 16, 4 << 4}; !slicesEqual(got, want) || rep.Clamped != 5 {
		t.Fatalf("clamped moments %v, want %v; clamped %d, want 5 (each value once)", got, want, rep.Clamped)
	}
	// Norms over edges 0.5, 1.2: buckets [0, 0.5), [0.5, 1.2), [1.2, inf).
	n := &Spec{Analysis: NormsJob, MaxOwnerRows: 10, NormEdges: []fixedpoint.Decimal{fixedpoint.MustDecimal("0.5"), fixedpoint.MustDecimal("1.2")}}
	acc, _, err = ReadStatistics(n, sch, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := acc.Pack(), []int64{0, 2 << 4, 2 << 4}; !slicesEqual(got, want) {
		t.Fatalf("norms histogram %v, want %v", got, want)
	}
	// Marginals over [-1, 1] in 4 buckets, edges -0.5, 0, 0.5: a's values
	// 1, -1, 0, 1 fall in buckets 3, 0, 2, 3 (an edge belongs to the bucket
	// above it), b's 0, 1, 0.5, -1 in 2, 3, 3, 0.
	mg := &Spec{Analysis: MarginalsJob, MaxOwnerRows: 10, Buckets: 4}
	acc, _, err = ReadStatistics(mg, sch, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := acc.Pack(), []int64{1 << 4, 0, 1 << 4, 2 << 4, 1 << 4, 0, 1 << 4, 2 << 4}; !slicesEqual(got, want) {
		t.Fatalf("marginals %v, want %v", got, want)
	}
	// Windows: a in [0, 1] and b in [-0.25, 0.25], 2 buckets each (edges
	// 0.5 and 0); the end buckets take what lies beyond.
	mg.Buckets, mg.Windows = 2, []Window{{Lo: fixedpoint.MustDecimal("0"), Hi: fixedpoint.MustDecimal("1")}, {Lo: fixedpoint.MustDecimal("-0.25"), Hi: fixedpoint.MustDecimal("0.25")}}
	acc, _, err = ReadStatistics(mg, sch, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := acc.Pack(), []int64{2 << 4, 2 << 4, 1 << 4, 3 << 4}; !slicesEqual(got, want) {
		t.Fatalf("marginals with windows %v, want %v", got, want)
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
