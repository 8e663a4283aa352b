package fixedpoint

import (
	"fmt"
	"math/big"
	"math/bits"
	"slices"
)

// uint128 is an unsigned 128-bit integer.
type uint128 struct{ hi, lo uint64 }

func (a uint128) add(b uint128) uint128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return uint128{hi, lo}
}

func (a uint128) sub(b uint128) uint128 {
	lo, c := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, c)
	return uint128{hi, lo}
}

func (a uint128) cmp(b uint128) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

func (a uint128) big(dst *big.Int) *big.Int {
	dst.SetUint64(a.hi)
	dst.Lsh(dst, 64)
	return dst.Or(dst, new(big.Int).SetUint64(a.lo))
}

func square(x int64) uint128 {
	u := absU(x)
	hi, lo := bits.Mul64(u, u)
	return uint128{hi, lo}
}

// absU returns |x| without a branch.
func absU(x int64) uint64 {
	m := x >> 63
	return uint64((x ^ m) - m)
}

// Norm2 returns ||q||^2 as a 128-bit value. Every |q_i| must be below 2^53 and
// len(q) below 2^20, so the sum cannot overflow.
func norm2(q []int64) uint128 {
	var s uint128
	for _, x := range q {
		s = s.add(square(x))
	}
	return s
}

// MaxDim is the widest row Clip accepts.
const MaxDim = 1 << 20

// Clipper scales rows into the ball ||q||_2 <= B. Not safe for concurrent use
// (it keeps scratch space); make one per goroutine.
type Clipper struct {
	b     int64
	b2    uint128
	b2big big.Int
	ent   []entry
	heap  []entry
	tmp   big.Int
	n2    big.Int
}

// entry is one coordinate of a row being clipped: |q_i| f / 2^64 =
// floor + frac / 2^64.
type entry struct {
	i     int
	floor uint64
	frac  uint64
	sign  int64 // -1 for a negative entry, 0 otherwise
}

// NewClipper returns a clipper to radius b >= 1.
func NewClipper(b int64) (*Clipper, error) {
	if b < 1 || b >= MaxAbs {
		return nil, fmt.Errorf("clip bound %d must be in [1, 2^53)", b)
	}
	c := &Clipper{b: b, b2: square(b)}
	c.b2.big(&c.b2big)
	return c, nil
}

// Bound returns B.
func (c *Clipper) Bound() int64 { return c.b }

// Clip scales q in place so that ||q||_2 <= B and reports whether it had to.
// Entries must satisfy |q_i| < 2^53 and len(q) <= MaxDim (as produced by a
// Quantizer); Clip returns an error otherwise and leaves q unchanged.
//
// The scaled entries are round(|q_i| f / 2^64) with f = floor(2^64 B/||q||),
// corrected by the undo and fill passes described in the package
// documentation; each ends within 1 of q_i B/||q||.
//
// Clip gives exactly the integers of ClipExact, faster: f in 128-bit
// integers when ||q||^2 < 2^64 (big integers otherwise), and the passes
// over a heap of the round-ups and the few entries the fill can still move
// instead of a sort of the whole row.
func (c *Clipper) Clip(q []int64) (bool, error) {
	return c.clip(q, true)
}

// ClipExact is Clip with f in big integers and the passes over the whole
// row sorted by fractional part, as the package documentation states them:
// the reference that Clip is tested against.
func (c *Clipper) ClipExact(q []int64) (bool, error) {
	return c.clip(q, false)
}

func (c *Clipper) clip(q []int64, fast bool) (bool, error) {
	if len(q) > MaxDim {
		return false, fmt.Errorf("row of %d values exceeds %d", len(q), MaxDim)
	}
	for i, x := range q {
		if x >= MaxAbs || x <= -MaxAbs {
			return false, fmt.Errorf("value %d at index %d: %w", x, i, ErrRange)
		}
	}
	n2 := norm2(q)
	if n2.cmp(c.b2) <= 0 {
		return false, nil
	}
	// f = floor(2^64 B / ||q||) = isqrt(floor(2^128 B^2 / ||q||^2)) < 2^64.
	f, ok := uint64(0), false
	if fast {
		f, ok = c.scaleFast(n2)
	}
	if !ok {
		n2.big(&c.n2)
		c.tmp.Lsh(&c.b2big, 128)
		c.tmp.Quo(&c.tmp, &c.n2)
		c.tmp.Sqrt(&c.tmp)
		f = c.tmp.Uint64()
	}

	// Round to nearest, remembering each entry's floor and fractional part.
	if cap(c.ent) < len(q) {
		c.ent = make([]entry, len(q))
	}
	c.ent = c.ent[:len(q)]
	var n uint128 // of the rounded row
	// Signs are random: no branches on them or on the rounding (mispredicted
	// branches would cost more than the arithmetic).
	for i, x := range q {
		hi, lo := bits.Mul64(absU(x), f)
		c.ent[i] = entry{i: i, floor: hi, frac: lo, sign: x >> 63}
		hi += lo >> 63   // round half up
		q[i] = int64(hi) // magnitudes until the signs go back at the end
		n = n.add(square(int64(hi)))
	}
	if fast && n.hi == 0 && c.b2.hi == 0 {
		n.lo = c.passesFast(q, n.lo, c.b2.lo)
	} else {
		n = c.passesSorted(q, n)
	}
	for _, e := range c.ent {
		q[e.i] = (q[e.i] ^ e.sign) - e.sign
	}
	if n.cmp(c.b2) > 0 || (!fast && norm2(q).cmp(c.b2) > 0) {
		// Unreachable: floor rounding is inside the ball.
		return true, fmt.Errorf("clip: norm above bound after rounding")
	}
	return true, nil
}

// less orders entries by fractional part, then index.
func (a entry) less(b entry) bool {
	return a.frac < b.frac || (a.frac == b.frac && a.i < b.i)
}

// passesSorted runs the undo and fill passes over the row sorted by
// fractional part and returns the new squared norm.
func (c *Clipper) passesSorted(q []int64, n uint128) uint128 {
	slices.SortFunc(c.ent, func(a, b entry) int { // by fractional part, ascending
		switch {
		case a.less(b):
			return -1
		case b.less(a):
			return 1
		}
		return 0
	})
	// Undo the least deserved round-ups while the row is outside the ball:
	// |x|^2 - (|x|-1)^2 = 2|x| - 1.
	for _, e := range c.ent {
		if n.cmp(c.b2) <= 0 {
			break
		}
		if x := q[e.i]; uint64(x) > e.floor {
			n = n.sub(uint128{lo: uint64(2*x - 1)})
			q[e.i]--
		}
	}
	// Fill: entries now rounded down move up, most deserving first, while
	// they fit. Without this, clipped rows end systematically inside the
	// sphere (by about 1/(B sqrt d) in squared norm), which biases R.
	for k := len(c.ent) - 1; k >= 0; k-- {
		e := c.ent[k]
		if e.frac == 0 {
			break // the remaining entries are exact
		}
		if x := q[e.i]; uint64(x) == e.floor {
			cost := uint128{lo: uint64(2*x + 1)}
			if cost.cmp(c.b2.sub(n)) <= 0 {
				q[e.i]++
				n = n.add(cost)
			}
		}
	}
	return n
}

// passesFast runs the same passes as passesSorted, with the same result,
// without sorting the row, in 64-bit integers (the caller checks that B^2
// and ||q||^2 fit a word):
//
//   - undo touches only round-ups (entries above their floor), in ascending
//     order, until the row is inside the ball;
//   - fill moves an entry only if its cost 2|x|+1 is at most the slack
//     B^2 - ||q||^2, and the slack only shrinks as the pass goes on, so an
//     entry whose cost exceeds the slack never moves afterwards: the pass
//     is "take the largest entry whose cost fits, until none fits", and the
//     entries that no longer fit are dropped after each move.
//
// Moving an entry between floor and floor+1 costs 2 floor + 1 either way.
// Both passes take the next entry by a linear scan (a few moves per row
// are the rule) and switch to a heap after linearRounds moves.
func (c *Clipper) passesFast(q []int64, n, b2 uint64) uint64 {
	set := c.heap[:0]
	if cap(set) < len(c.ent) {
		set = make([]entry, 0, len(c.ent))
	}
	if n > b2 {
		// The round-ups, without a branch: the entries with frac >= 2^63.
		set = set[:len(c.ent)]
		k := 0
		for _, e := range c.ent {
			set[k] = e
			k += int(e.frac >> 63)
		}
		set = set[:k]
		for round := 0; len(set) > 0 && n > b2; round++ {
			var e entry
			if round < linearRounds {
				e, set = takeBest(set, false)
			} else {
				if round == linearRounds {
					heapify(set, false)
				}
				e = set[0]
				set = pop(set, false)
			}
			n -= 2*e.floor + 1
			q[e.i]--
		}
	}
	slack := b2 - n
	// The entries at their floor with frac != 0 and a cost that fits,
	// without a branch.
	set = set[:len(c.ent)]
	k := 0
	for _, e := range c.ent {
		set[k] = e
		up := uint64(q[e.i]) - e.floor               // 0 or 1
		nonzero := (e.frac | -e.frac) >> 63          // frac != 0
		_, over := bits.Sub64(slack, 2*e.floor+1, 0) // cost > slack
		k += int((1 - up) & nonzero & (1 - over))
	}
	set = set[:k]
	for round := 0; len(set) > 0; round++ {
		var e entry
		if round < linearRounds {
			// One scan drops the entries that no longer fit and finds the
			// largest of the others.
			k, best := 0, -1
			for _, f := range set {
				if 2*f.floor+1 > slack {
					continue
				}
				set[k] = f
				if best < 0 || set[best].less(f) {
					best = k
				}
				k++
			}
			set = set[:k]
			if best < 0 {
				break
			}
			e = set[best]
			set[best] = set[k-1]
			set = set[:k-1]
		} else {
			if round == linearRounds {
				heapify(set, true)
			}
			e = set[0]
			set = pop(set, true)
		}
		cost := 2*e.floor + 1
		if cost > slack {
			continue // only after the switch to the heap: a heap is not filtered
		}
		q[e.i]++
		n += cost
		slack -= cost
	}
	c.heap = set
	return n
}

// linearRounds is how many moves a pass makes by linear scans before it
// orders its entries as a heap.
const linearRounds = 8

// takeBest removes and returns the smallest entry of set (the largest with
// largest).
func takeBest(set []entry, largest bool) (entry, []entry) {
	b := 0
	for k := 1; k < len(set); k++ {
		if set[k].less(set[b]) != largest {
			b = k
		}
	}
	e := set[b]
	set[b] = set[len(set)-1]
	return e, set[:len(set)-1]
}

// heapify orders h as a min-heap (or a max-heap) by entry.less.
func heapify(h []entry, maxHeap bool) {
	for k := len(h)/2 - 1; k >= 0; k-- {
		siftDown(h, k, maxHeap)
	}
}

// pop removes the top of the heap.
func pop(h []entry, maxHeap bool) []entry {
	h[0] = h[len(h)-1]
	h = h[:len(h)-1]
	siftDown(h, 0, maxHeap)
	return h
}

// siftDown restores the heap order below position k. (Two loops, so that
// the comparisons inline.)
func siftDown(h []entry, k int, maxHeap bool) {
	if maxHeap {
		for {
			m := k
			if l := 2*k + 1; l < len(h) && h[m].less(h[l]) {
				m = l
			}
			if r := 2*k + 2; r < len(h) && h[m].less(h[r]) {
				m = r
			}
			if m == k {
				return
			}
			h[k], h[m] = h[m], h[k]
			k = m
		}
	}
	for {
		m := k
		if l := 2*k + 1; l < len(h) && h[l].less(h[m]) {
			m = l
		}
		if r := 2*k + 2; r < len(h) && h[r].less(h[m]) {
			m = r
		}
		if m == k {
			return
		}
		h[k], h[m] = h[m], h[k]
		k = m
	}
}

// scaleFast computes f = floor(sqrt(floor(2^128 B^2 / n2))) in 64- and
// 128-bit integers when n2 < 2^64 (ok is false otherwise). Since B^2 < n2,
// u = floor(2^128 B^2 / n2) < 2^128 comes from a four-word long division by
// one word (bits.Div64), and its integer square root from Newton's
// iteration started above the root, which decreases to floor(sqrt(u))
// exactly (each step's quotient u / x <= sqrt(u) < 2^64 fits a word).
func (c *Clipper) scaleFast(n2 uint128) (uint64, bool) {
	if n2.hi != 0 {
		return 0, false
	}
	d := n2.lo
	// Numerator words, most significant first: b2.hi, b2.lo, 0, 0; the top
	// two quotient words are zero because B^2 < n2 (b2.hi == 0 < d and
	// b2.lo < d when n2 fits a word).
	if c.b2.hi != 0 {
		return 0, false
	}
	r := c.b2.lo
	uhi, r := bits.Div64(r, 0, d)
	ulo, _ := bits.Div64(r, 0, d)
	if uhi == 0 && ulo == 0 {
		return 0, true
	}
	// Start at 2^ceil(bitlen/2) >= sqrt(u); it must fit a word.
	l := 128 - bits.LeadingZeros64(uhi)
	if uhi == 0 {
		l = 64 - bits.LeadingZeros64(ulo)
	}
	s := uint((l + 1) / 2)
	if s >= 64 {
		return 0, false
	}
	x := uint64(1) << s
	for {
		// y = (x + u/x) / 2, with u/x < 2^64 because x >= sqrt(u).
		qq, _ := bits.Div64(uhi, ulo, x)
		y := (x >> 1) + (qq >> 1) + (x & qq & 1)
		if y >= x {
			return x, true
		}
		x = y
	}
}
