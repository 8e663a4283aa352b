package he

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"

	"github.com/tuneinsight/lattigo/v5/ring"
)

// flooder draws the smudging (noise flooding) polynomials of the public-key
// switch. Every coefficient is an independent integer drawn exactly uniformly
// from [-2^S, 2^S] by rejection sampling on 64-bit words of rnd (crypto/rand
// for members): no floating point, no math/rand. Not safe for concurrent
// use.
type flooder struct {
	rnd      io.Reader
	logBound uint    // S
	span     uint64  // 2^(S+1) + 1, the number of values
	limit    uint64  // k * span with k = floor(2^64 / span): a word r is accepted iff r < limit
	buf      []byte  // random words: one read of rnd per polynomial (rarely more)
	vals     []int64 // the last drawn coefficients, as integers
}

// newFlooder returns a flooder of n coefficients per polynomial, uniform over
// [-2^logBound, 2^logBound], 1 <= logBound <= 62, drawing from rnd.
func newFlooder(rnd io.Reader, logBound uint, n int) (*flooder, error) {
	if logBound < 1 || logBound > 62 {
		return nil, fmt.Errorf("flooding bound 2^%d: want 2^1 to 2^62", logBound)
	}
	if n < 1 {
		return nil, fmt.Errorf("flooding of %d coefficients", n)
	}
	span := uint64(1)<<(logBound+1) + 1
	k, _ := bits.Div64(1, 0, span) // floor(2^64 / span) >= 1
	// A word is accepted with probability k*span/2^64 > k/(k+1), so n
	// coefficients take fewer than n + n/k words on average; n/16 + 64 more
	// (many standard deviations) make a second read very rare.
	words := n + n/int(k) + n/16 + 64
	return &flooder{
		rnd:      rnd,
		logBound: logBound,
		span:     span,
		limit:    k * span, // < 2^64: span is odd and > 1
		buf:      make([]byte, 8*words),
		vals:     make([]int64, n),
	}, nil
}

// sample fills out with independent integers uniform over [-2^S, 2^S]: it
// reads a buffer of random 64-bit words at once, and for each coefficient
// takes the next word r with r < limit (rejecting the others) as
// r mod span - 2^S. Since limit is a multiple of span, every value has
// exactly limit/span accepted preimages.
func (f *flooder) sample(out []int64) error {
	if _, err := io.ReadFull(f.rnd, f.buf); err != nil {
		return fmt.Errorf("flooding: %w", err)
	}
	off := int64(1) << f.logBound
	pos := 0
	for i := range out {
		for {
			if pos == len(f.buf) {
				if _, err := io.ReadFull(f.rnd, f.buf); err != nil {
					return fmt.Errorf("flooding: %w", err)
				}
				pos = 0
			}
			r := binary.LittleEndian.Uint64(f.buf[pos:])
			pos += 8
			if r < f.limit {
				out[i] = int64(r%f.span) - off
				break
			}
		}
	}
	return nil
}

// readPoly draws a fresh flooding polynomial and writes it into p, in the
// coefficient domain, reduced modulo each prime of rq (up to rq's level). The
// drawn integers stay in f.vals until the next draw.
func (f *flooder) readPoly(rq *ring.Ring, p ring.Poly) error {
	if len(f.vals) != rq.N() {
		return fmt.Errorf("flooding: %d coefficients for a ring of degree %d", len(f.vals), rq.N())
	}
	if err := f.sample(f.vals); err != nil {
		return err
	}
	for j, s := range rq.SubRings[:rq.Level()+1] {
		c, q, u := p.Coeffs[j], s.Modulus, s.BRedConstant
		for i, x := range f.vals {
			c[i] = reduceSigned(x, q, u)
		}
	}
	return nil
}

// reduceSigned returns x mod q in [0, q): x mod q for x >= 0, and
// q - (|x| mod q) (or 0) for x < 0, with |x| <= 2^62 and u = q's Barrett
// constant (ring.BRedConstant(q), exact for every 64-bit input).
func reduceSigned(x int64, q uint64, u []uint64) uint64 {
	if x >= 0 {
		return ring.BRedAdd(uint64(x), q, u)
	}
	if r := ring.BRedAdd(uint64(-x), q, u); r != 0 {
		return q - r
	}
	return 0
}
