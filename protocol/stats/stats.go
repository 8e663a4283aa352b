package stats

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
)

// Kind says which statistics a layout holds.
type Kind uint8

// The kinds of layout (see the package comment).
const (
	Full Kind = iota
	Moments
	Histogram
	Marginals
)

func (k Kind) String() string {
	switch k {
	case Full:
		return "full"
	case Moments:
		return "moments"
	case Histogram:
		return "histogram"
	case Marginals:
		return "marginals"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Layout is the shape of the packed statistics: D features, K classes (or
// buckets, for a histogram; buckets per feature, for marginals).
type Layout struct {
	D, K int
	Kind Kind
}

// MaxLen bounds the packed length (about 2^27 values, 1 GiB of int64).
const MaxLen = 1 << 27

// NewLayout validates d >= 1 and k >= 1 for a full layout.
func NewLayout(d, k int) (Layout, error) { return NewLayoutOf(Full, d, k) }

// NewLayoutOf validates a layout of any kind: a moments layout has one
// class.
func NewLayoutOf(kind Kind, d, k int) (Layout, error) {
	l := Layout{D: d, K: k, Kind: kind}
	if err := l.Validate(); err != nil {
		return Layout{}, err
	}
	return l, nil
}

// Validate checks the dimensions.
func (l Layout) Validate() error {
	if l.Kind > Marginals {
		return fmt.Errorf("layout: unknown %s", l.Kind)
	}
	if l.D < 1 || l.K < 1 {
		return fmt.Errorf("layout d=%d k=%d: both must be at least 1", l.D, l.K)
	}
	if l.Kind == Moments && l.K != 1 {
		return fmt.Errorf("layout: a moments layout has one class, not %d", l.K)
	}
	if l.Kind == Marginals && l.K < 2 {
		return fmt.Errorf("layout: marginals need at least 2 buckets per feature, not %d", l.K)
	}
	if l.D > 1<<14 || l.K > 1<<14 || l.Len() > MaxLen {
		return fmt.Errorf("layout d=%d k=%d: %d values exceed %d", l.D, l.K, l.Len(), MaxLen)
	}
	return nil
}

// RLen is the length of the R block: d(d+1)/2, d for moments (the
// diagonal), 0 for a histogram and marginals.
func (l Layout) RLen() int {
	switch l.Kind {
	case Moments:
		return l.D
	case Histogram, Marginals:
		return 0
	}
	return l.D * (l.D + 1) / 2
}

// VLen is the length of the v block, K d (0 for a histogram and marginals).
func (l Layout) VLen() int {
	if l.Kind == Histogram || l.Kind == Marginals {
		return 0
	}
	return l.K * l.D
}

// NLen is the length of the n block: K counts, D K for marginals (feature
// i's bucket k at M(i, k)).
func (l Layout) NLen() int {
	if l.Kind == Marginals {
		return l.D * l.K
	}
	return l.K
}

// Len is the packed length.
func (l Layout) Len() int { return l.RLen() + l.VLen() + l.NLen() }

// R returns the index of R[i][j] for i <= j (of R[i][i] for moments).
func (l Layout) R(i, j int) int {
	if l.Kind == Moments {
		return i
	}
	if i > j {
		i, j = j, i
	}
	return i*l.D - i*(i-1)/2 + (j - i)
}

// V returns the index of v_k[i].
func (l Layout) V(k, i int) int { return l.RLen() + k*l.D + i }

// N returns the index of n_k.
func (l Layout) N(k int) int { return l.RLen() + l.VLen() + k }

// M returns the index of feature i's bucket k in a marginals layout.
func (l Layout) M(i, k int) int { return i*l.K + k }

// Block names a part of the packed vector.
type Block int

// The three blocks, each with its own sensitivity and noise level.
const (
	BlockR Block = iota
	BlockV
	BlockN
)

func (b Block) String() string {
	switch b {
	case BlockR:
		return "R"
	case BlockV:
		return "v"
	case BlockN:
		return "n"
	}
	return fmt.Sprintf("block(%d)", int(b))
}

// Blocks lists the blocks in packing order.
var Blocks = [3]Block{BlockR, BlockV, BlockN}

// Range returns the half-open index range [lo, hi) of a block.
func (l Layout) Range(b Block) (lo, hi int) {
	switch b {
	case BlockR:
		return 0, l.RLen()
	case BlockV:
		return l.RLen(), l.RLen() + l.VLen()
	default:
		return l.RLen() + l.VLen(), l.Len()
	}
}

// Dims returns the numbers of coordinates of the blocks, in packing order.
func (l Layout) Dims() [3]int { return [3]int{l.RLen(), l.VLen(), l.NLen()} }

// Sensitivity2 returns the squared L2 sensitivity of each block (R, v, n)
// to adding one row, in integer units, for rows clipped to the ball of
// radius b at scale 2^bits: B^4, B^2 and 2^(2g); for moments, whose rows are
// also in the box |q_i| <= 2^g, the diagonal's is min(B^4, 2^(2g) B^2)
// (sum q_i^4 <= max q_i^2 sum q_i^2); for marginals, where a row adds 2^g
// to one count of each of the D features, D 2^(2g); an empty block's is 0.
// (Squared, because the marginals' sqrt(D) 2^g is not an integer.)
func (l Layout) Sensitivity2(b int64, bits uint) [3]*big.Int {
	bb := new(big.Int).Mul(big.NewInt(b), big.NewInt(b))
	one := new(big.Int).Lsh(big.NewInt(1), 2*bits)
	r := new(big.Int).Mul(bb, bb)
	if l.Kind == Moments {
		if box := new(big.Int).Mul(one, bb); box.Cmp(r) < 0 {
			r = box
		}
	}
	n := one
	if l.Kind == Marginals {
		n = new(big.Int).Mul(one, big.NewInt(int64(l.D)))
	}
	out := [3]*big.Int{r, bb, n}
	for i, n := range l.Dims() {
		if n == 0 {
			out[i] = new(big.Int)
		}
	}
	return out
}

// Chunks returns how many vectors of the given number of slots the packed
// statistics need.
func (l Layout) Chunks(slots int) int { return (l.Len() + slots - 1) / slots }

// ErrTooManyRows reports an accumulator that could overflow with one more row.
var ErrTooManyRows = errors.New("too many rows for exact int64 accumulation")

// ErrNotClipped reports a row outside the clip ball.
var ErrNotClipped = errors.New("row is outside the clip ball")

// ErrOutsideBox reports a moments row with a value beyond 2^g in absolute
// value (a feature not clamped to its declared bounds).
var ErrOutsideBox = errors.New("row is outside the box |z_i| <= 1")

// ErrBucket reports a marginals row whose bucket index is out of range.
var ErrBucket = errors.New("bucket out of range")

// Accumulator sums clipped rows exactly. Not safe for concurrent use.
type Accumulator struct {
	l       Layout
	bits    uint
	b       int64
	b2      [2]uint64 // B^2 as (hi, lo)
	maxRows int64
	r       []int64
	v       []int64
	counts  []int64
	rows    int64
	// scratch of the float64 blocks of AddBatch
	fr, fq []float64
}

// NewAccumulator returns an empty accumulator for rows inside the ball of
// radius b (in integer units at scale 2^bits).
func NewAccumulator(l Layout, b int64, bitsG uint) (*Accumulator, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if b < 1 || b >= 1<<53 {
		return nil, fmt.Errorf("clip bound %d must be in [1, 2^53)", b)
	}
	if bitsG > 30 {
		return nil, fmt.Errorf("quantization bits %d exceed 30", bitsG)
	}
	hi, lo := bits.Mul64(uint64(b), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return nil, fmt.Errorf("clip bound %d: B^2 exceeds int64", b)
	}
	maxRows := math.MaxInt64 / max(int64(lo), int64(1)<<bitsG)
	return &Accumulator{
		l: l, bits: bitsG, b: b, b2: [2]uint64{hi, lo}, maxRows: maxRows,
		r: make([]int64, l.RLen()), v: make([]int64, l.VLen()), counts: make([]int64, l.NLen()),
	}, nil
}

// Layout returns the layout.
func (a *Accumulator) Layout() Layout { return a.l }

// Rows returns the number of rows added.
func (a *Accumulator) Rows() int64 { return a.rows }

// MaxRows returns how many rows the accumulator accepts.
func (a *Accumulator) MaxRows() int64 { return a.maxRows }

// Add adds one clipped row of class k (of bucket k for a histogram). For
// marginals, q holds each feature's bucket (the caller maps every value to
// its bucket, as it does a histogram's row) and k is 0. It refuses rows of
// the wrong length, unknown classes, rows outside the ball (or, for
// moments, the box; for marginals, buckets out of range) and rows beyond
// MaxRows, and leaves the statistics unchanged when it does.
func (a *Accumulator) Add(q []int64, k int) error {
	if a.rows >= a.maxRows {
		return fmt.Errorf("row %d: %w (at most %d)", a.rows+1, ErrTooManyRows, a.maxRows)
	}
	if err := a.check(q, k); err != nil {
		return err
	}
	if a.l.Kind == Full {
		a.addScatter(q)
	}
	a.addRest(q, k)
	return nil
}

// AddBatch adds len(classes) clipped rows given one after the other in
// rows (row t is rows[t d : (t+1) d], of class classes[t]). It checks
// every row as Add does and adds none when it refuses one. The result is
// the same integers as adding the rows one by one: for the full layout,
// the batch's q q^T is summed in float64 where that is exact (see
// floatChunk: no operation can round while B^2 times the rows of a block
// is at most 2^53) and in int64 otherwise, four rows per pass over a block
// of the triangle that stays in the cache, and added to R in int64
// (integer addition, in any order, without overflow: see the package
// documentation).
func (a *Accumulator) AddBatch(rows []int64, classes []int) error {
	d := a.l.D
	if len(rows) != len(classes)*d {
		return fmt.Errorf("batch has %d values for %d rows of %d", len(rows), len(classes), d)
	}
	if int64(len(classes)) > a.maxRows-a.rows {
		return fmt.Errorf("row %d: %w (at most %d)", a.maxRows+1, ErrTooManyRows, a.maxRows)
	}
	for t, k := range classes {
		if err := a.check(rows[t*d:(t+1)*d], k); err != nil {
			return fmt.Errorf("batch row %d: %w", t, err)
		}
	}
	if a.l.Kind == Full {
		a.addScatterBatch(rows, len(classes))
	}
	for t, k := range classes {
		a.addRest(rows[t*d:(t+1)*d], k)
	}
	return nil
}

// check refuses what Add refuses, except the row count.
func (a *Accumulator) check(q []int64, k int) error {
	d := a.l.D
	if len(q) != d {
		return fmt.Errorf("row has %d values, want %d", len(q), d)
	}
	if a.l.Kind == Marginals {
		if k != 0 {
			return fmt.Errorf("class %d: a marginals row has class 0", k)
		}
		for _, x := range q {
			if x < 0 || x >= int64(a.l.K) {
				return fmt.Errorf("bucket %d: %w [0, %d)", x, ErrBucket, a.l.K)
			}
		}
		return nil
	}
	if k < 0 || k >= a.l.K {
		return fmt.Errorf("class %d out of range [0, %d)", k, a.l.K)
	}
	var hi, lo uint64
	for _, x := range q {
		if x >= 1<<53 || x <= -(1<<53) {
			return fmt.Errorf("value %d: %w", x, ErrNotClipped)
		}
		u := uint64(x)
		if x < 0 {
			u = uint64(-x)
		}
		h, l := bits.Mul64(u, u)
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi += h + c
	}
	if hi > a.b2[0] || (hi == a.b2[0] && lo > a.b2[1]) {
		return ErrNotClipped
	}
	if a.l.Kind == Moments {
		box := int64(1) << a.bits
		for _, x := range q {
			if x > box || x < -box {
				return ErrOutsideBox
			}
		}
	}
	return nil
}

// addRest adds a checked row to everything but the full R: the moments
// diagonal, v and the count.
func (a *Accumulator) addRest(q []int64, k int) {
	a.rows++
	switch a.l.Kind {
	case Histogram:
		a.counts[k]++
		return
	case Marginals:
		for i, b := range q {
			a.counts[a.l.M(i, int(b))]++
		}
		return
	}
	if a.l.Kind == Moments {
		for i, x := range q {
			a.r[i] += x * x
		}
	}
	v := a.v[k*a.l.D : (k+1)*a.l.D]
	for i, x := range q {
		v[i] += x
	}
	a.counts[k]++
}

// addScatter adds q q^T to the upper triangle of R.
func (a *Accumulator) addScatter(q []int64) {
	a.addScatterRows(q, 0, a.l.D, 0)
}

// addScatterRows adds q q^T to rows [i0, i1) of the upper triangle of R,
// which start at offset off.
func (a *Accumulator) addScatterRows(q []int64, i0, i1, off int) {
	d := a.l.D
	for i := i0; i < i1; i++ {
		row := a.r[off : off+d-i]
		off += d - i
		qi := q[i]
		if qi == 0 {
			continue
		}
		tail := q[i:]
		tail = tail[:len(row)]
		for j, x := range tail {
			row[j] += qi * x
		}
	}
}

// blockEntries is how many entries of R (int64) a block holds: 16 KiB,
// half of a first-level data cache.
const blockEntries = 2048

// addScatterBatch adds the n rows' q q^T to R, in float64 blocks when
// that is exact (see floatChunk), in int64 otherwise.
func (a *Accumulator) addScatterBatch(rows []int64, n int) {
	d := a.l.D
	per := a.floatChunk()
	if per == 0 {
		forBlocks(d, func(i0, i1, off int) {
			t := 0
			for ; t+4 <= n; t += 4 {
				a.addScatter4(rows[t*d:(t+4)*d], i0, i1, off)
			}
			for ; t < n; t++ {
				a.addScatterRows(rows[t*d:(t+1)*d], i0, i1, off)
			}
		})
		return
	}
	if len(a.fr) != len(a.r) {
		a.fr = make([]float64, len(a.r))
	}
	for t0 := 0; t0 < n; t0 += per {
		t1 := min(n, t0+per)
		a.fq = a.fq[:0]
		for _, x := range rows[t0*d : t1*d] {
			a.fq = append(a.fq, float64(x))
		}
		clear(a.fr)
		m := t1 - t0
		forBlocks(d, func(i0, i1, off int) {
			t := 0
			for ; t+4 <= m; t += 4 {
				scatterFloat4(a.fr, a.fq[t*d:(t+4)*d], d, i0, i1, off)
			}
			for ; t < m; t++ {
				scatterFloat1(a.fr, a.fq[t*d:(t+1)*d], i0, i1, off)
			}
		})
		for k, x := range a.fr {
			a.r[k] += int64(x)
		}
	}
}

// floatChunk returns how many rows a float64 block of R may sum exactly,
// 0 when none may (then R is summed in int64).
//
// Exactness: every row is inside the ball, so |q_i| <= B and each product
// |q_i q_j| <= B^2. A float64 holds every integer of magnitude at most
// 2^53 exactly, and the sum or product of two such integers is rounded
// only if the exact result exceeds 2^53 in magnitude. In a block of m rows,
// every value the loop forms (a product, a partial sum of products, an
// entry of the block) is a sum of at most m products, so of magnitude at
// most m B^2; with m B^2 <= 2^53 no operation rounds, and each entry of
// the block is the exact integer sum, which converts to int64 exactly and
// is added to R (whose int64 bound is the package's).
func (a *Accumulator) floatChunk() int {
	b2 := a.b2[1] // B^2 < 2^63: NewAccumulator
	if a.b2[0] != 0 || b2 > 1<<53 {
		return 0
	}
	return int(min((1<<53)/b2, 256))
}

// forBlocks calls fn for runs [i0, i1) of consecutive rows of the
// triangle of R (starting at offset off) of about blockEntries entries: a
// block stays in the cache while the rows of a batch are added to it.
func forBlocks(d int, fn func(i0, i1, off int)) {
	for i0, off := 0, 0; i0 < d; {
		i1, size := i0, 0
		for i1 < d && (size == 0 || size+d-i1 <= blockEntries) {
			size += d - i1
			i1++
		}
		fn(i0, i1, off)
		i0, off = i1, off+size
	}
}

// scatterFloat1 is scatterFloat4 for one row.
func scatterFloat1(r, q []float64, i0, i1, off int) {
	d := len(q)
	for i := i0; i < i1; i++ {
		row := r[off : off+d-i]
		off += d - i
		a0 := q[i]
		t0 := q[i:]
		t0 = t0[:len(row)]
		for j := range row {
			row[j] += a0 * t0[j]
		}
	}
}

// scatterFloat4 adds four rows' q q^T (q holds them one after the other)
// to rows [i0, i1) of a float64 triangle r starting at offset off.
func scatterFloat4(r, q []float64, d, i0, i1, off int) {
	q0, q1, q2, q3 := q[:d], q[d:2*d], q[2*d:3*d], q[3*d:4*d]
	for i := i0; i < i1; i++ {
		row := r[off : off+d-i]
		off += d - i
		a0, a1, a2, a3 := q0[i], q1[i], q2[i], q3[i]
		t0, t1, t2, t3 := q0[i:], q1[i:], q2[i:], q3[i:]
		t0, t1, t2, t3 = t0[:len(row)], t1[:len(row)], t2[:len(row)], t3[:len(row)]
		for j := range row {
			row[j] += a0*t0[j] + a1*t1[j] + a2*t2[j] + a3*t3[j]
		}
	}
}

// addScatter4 is addScatterRows for four rows at once (q holds them one
// after the other): each entry of R is loaded and stored once for four
// products.
func (a *Accumulator) addScatter4(q []int64, i0, i1, off int) {
	d := a.l.D
	q0, q1, q2, q3 := q[:d], q[d:2*d], q[2*d:3*d], q[3*d:4*d]
	for i := i0; i < i1; i++ {
		row := a.r[off : off+d-i]
		off += d - i
		a0, a1, a2, a3 := q0[i], q1[i], q2[i], q3[i]
		t0, t1, t2, t3 := q0[i:], q1[i:], q2[i:], q3[i:]
		t0, t1, t2, t3 = t0[:len(row)], t1[:len(row)], t2[:len(row)], t3[:len(row)]
		for j := range row {
			row[j] += a0*t0[j] + a1*t1[j] + a2*t2[j] + a3*t3[j]
		}
	}
}

// Merge adds the statistics of b (same layout, bound and bits) to a, as if
// a had been given b's rows too. It refuses (and changes nothing) when the
// rows together exceed MaxRows; below that no sum can overflow, so the
// result is the same integers as one accumulator given every row, in any
// order.
func (a *Accumulator) Merge(b *Accumulator) error {
	if a.l != b.l || a.b != b.b || a.bits != b.bits {
		return fmt.Errorf("merge: accumulators differ (layout, bound or bits)")
	}
	if b.rows > a.maxRows-a.rows {
		return fmt.Errorf("merge of %d and %d rows: %w (at most %d)", a.rows, b.rows, ErrTooManyRows, a.maxRows)
	}
	for i, x := range b.r {
		a.r[i] += x
	}
	for i, x := range b.v {
		a.v[i] += x
	}
	for i, x := range b.counts {
		a.counts[i] += x
	}
	a.rows += b.rows
	return nil
}

// Pack returns the packed statistics [R | v | n] with n_k = 2^g count_k.
func (a *Accumulator) Pack() []int64 {
	out := make([]int64, 0, a.l.Len())
	out = append(out, a.r...)
	out = append(out, a.v...)
	for _, c := range a.counts {
		out = append(out, c<<a.bits) // c <= maxRows <= 2^63 / 2^g
	}
	return out
}

// Release is an unpacked statistics vector: the sum of the owners' packs,
// possibly with noise. R is the upper triangle (row-major), V holds the K
// class sums one after the other, N the K counts at scale 2^Bits.
type Release struct {
	Layout Layout
	Bits   uint
	R      []int64
	V      []int64
	N      []int64
}

// Unpack splits a packed vector (its length must be Layout.Len()).
func Unpack(l Layout, bitsG uint, vec []int64) (*Release, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if len(vec) != l.Len() {
		return nil, fmt.Errorf("packed vector has %d values, layout d=%d k=%d needs %d", len(vec), l.D, l.K, l.Len())
	}
	if bitsG > 30 {
		return nil, fmt.Errorf("quantization bits %d exceed 30", bitsG)
	}
	vec = append([]int64(nil), vec...)
	r0, r1 := l.Range(BlockR)
	v0, v1 := l.Range(BlockV)
	n0, n1 := l.Range(BlockN)
	return &Release{Layout: l, Bits: bitsG, R: vec[r0:r1:r1], V: vec[v0:v1:v1], N: vec[n0:n1:n1]}, nil
}

// Pack returns the packed vector.
func (r *Release) Pack() []int64 {
	out := make([]int64, 0, r.Layout.Len())
	out = append(out, r.R...)
	out = append(out, r.V...)
	return append(out, r.N...)
}

// Float returns the statistics in data units: the full symmetric d x d matrix
// R / 2^(2g) row-major (for moments, its diagonal; for a histogram and
// marginals, zero), the class sums v_k / 2^g and the counts n_k / 2^g (for
// marginals, the D K counts, at M(i, k)).
// This is where the user leaves integers; it happens after all noise has
// been added.
func (r *Release) Float() (rr []float64, v [][]float64, n []float64) {
	d := r.Layout.D
	s1 := math.Ldexp(1, -int(r.Bits))
	s2 := math.Ldexp(1, -2*int(r.Bits))
	rr = make([]float64, d*d)
	for i := range d {
		for j := i; j < d && len(r.R) > 0; j++ {
			if r.Layout.Kind == Moments && j != i {
				break
			}
			x := float64(r.R[r.Layout.R(i, j)]) * s2
			rr[i*d+j], rr[j*d+i] = x, x
		}
	}
	v = make([][]float64, r.Layout.K)
	for k := range v {
		v[k] = make([]float64, d)
		for i := 0; i < d && len(r.V) > 0; i++ {
			v[k][i] = float64(r.V[k*d+i]) * s1
		}
	}
	n = make([]float64, r.Layout.NLen())
	for k := range n {
		n[k] = float64(r.N[k]) * s1
	}
	return rr, v, n
}
