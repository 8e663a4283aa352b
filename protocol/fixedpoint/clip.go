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
	u := uint64(x)
	if x < 0 {
		u = uint64(-x)
	}
	hi, lo := bits.Mul64(u, u)
	return uint128{hi, lo}
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
	tmp   big.Int
	n2    big.Int
}

// entry is one coordinate of a row being clipped: |q_i| f / 2^64 =
// floor + frac / 2^64.
type entry struct {
	i     int
	floor uint64
	frac  uint64
	neg   bool
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
func (c *Clipper) Clip(q []int64) (bool, error) {
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
	n2.big(&c.n2)
	c.tmp.Lsh(&c.b2big, 128)
	c.tmp.Quo(&c.tmp, &c.n2)
	c.tmp.Sqrt(&c.tmp)
	f := c.tmp.Uint64()

	// Round to nearest, remembering each entry's floor and fractional part.
	c.ent = c.ent[:0]
	for i, x := range q {
		u := uint64(x)
		if x < 0 {
			u = uint64(-x)
		}
		hi, lo := bits.Mul64(u, f)
		c.ent = append(c.ent, entry{i: i, floor: hi, frac: lo, neg: x < 0})
		if lo >= 1<<63 {
			hi++
		}
		q[i] = int64(hi) // magnitudes until the signs go back at the end
	}
	slices.SortFunc(c.ent, func(a, b entry) int { // by fractional part, ascending
		switch {
		case a.frac < b.frac:
			return -1
		case a.frac > b.frac:
			return 1
		}
		return a.i - b.i
	})
	n := norm2(q)
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
	for _, e := range c.ent {
		if e.neg {
			q[e.i] = -q[e.i]
		}
	}
	if norm2(q).cmp(c.b2) > 0 {
		// Unreachable: floor rounding is inside the ball.
		return true, fmt.Errorf("clip: norm above bound after rounding")
	}
	return true, nil
}
