package he

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// flooder draws the smudging (noise flooding) polynomials of the public-key
// switch. Every coefficient is an independent integer drawn exactly
// uniformly from [-2^S, 2^S), as S + 1 random bits of rnd (crypto/rand for
// members) minus 2^S: no rejection, no floating point, no math/rand. S may
// exceed 62: a coefficient is a 128-bit two's-complement integer (hi, lo).
// Not safe for concurrent use.
type flooder struct {
	rnd      io.Reader
	logBound uint     // S
	buf      []byte   // random words: one read of rnd per polynomial
	hi       []int64  // the last drawn coefficients: hi 2^64 + lo
	lo       []uint64 //
}

// maxFloodLog2 is the largest S a flooder takes (S + 1 bits in a 128-bit
// signed integer).
const maxFloodLog2 = 126

// newFlooder returns a flooder of n coefficients per polynomial, uniform over
// [-2^logBound, 2^logBound), 1 <= logBound <= 126, drawing from rnd.
func newFlooder(rnd io.Reader, logBound uint, n int) (*flooder, error) {
	if logBound < 1 || logBound > maxFloodLog2 {
		return nil, fmt.Errorf("flooding bound 2^%d: want 2^1 to 2^%d", logBound, maxFloodLog2)
	}
	if n < 1 {
		return nil, fmt.Errorf("flooding of %d coefficients", n)
	}
	return &flooder{rnd: rnd, logBound: logBound, buf: make([]byte, 16*n), hi: make([]int64, n), lo: make([]uint64, n)}, nil
}

// sample fills f.hi, f.lo with n independent integers uniform over
// [-2^S, 2^S): for each, 16 bytes of rnd read as two little-endian words
// (lo, hi), truncated to S + 1 bits, minus 2^S.
func (f *flooder) sample() error {
	if _, err := io.ReadFull(f.rnd, f.buf); err != nil {
		return fmt.Errorf("flooding: %w", err)
	}
	nbits := f.logBound + 1
	loMask, hiMask := uint64(math.MaxUint64), uint64(0)
	if nbits < 64 {
		loMask = 1<<nbits - 1
	} else {
		hiMask = 1<<(nbits-64) - 1
	}
	// The offset 2^S as (offHi, offLo).
	var offHi, offLo uint64
	if f.logBound < 64 {
		offLo = 1 << f.logBound
	} else {
		offHi = 1 << (f.logBound - 64)
	}
	for i := range f.lo {
		lo := binary.LittleEndian.Uint64(f.buf[16*i:]) & loMask
		hi := binary.LittleEndian.Uint64(f.buf[16*i+8:]) & hiMask
		var borrow uint64
		f.lo[i], borrow = bits.Sub64(lo, offLo, 0)
		h, _ := bits.Sub64(hi, offHi, borrow)
		f.hi[i] = int64(h)
	}
	return nil
}

// readPoly draws a fresh flooding polynomial and writes it into p, in the
// coefficient domain, reduced modulo each prime of rq (up to rq's level). The
// drawn integers stay in f.hi, f.lo until the next draw.
func (f *flooder) readPoly(rq *ring.Ring, p ring.Poly) error {
	if len(f.lo) != rq.N() {
		return fmt.Errorf("flooding: %d coefficients for a ring of degree %d", len(f.lo), rq.N())
	}
	if err := f.sample(); err != nil {
		return err
	}
	for j, s := range rq.SubRings[:rq.Level()+1] {
		c, q := p.Coeffs[j], s.Modulus
		for i := range c {
			c[i] = reduce128(f.hi[i], f.lo[i], q)
		}
	}
	return nil
}

// reduce128 returns x mod q in [0, q) for the signed 128-bit integer
// x = hi 2^64 + lo (two's complement) and an odd modulus q < 2^63.
func reduce128(hi int64, lo uint64, q uint64) uint64 {
	neg := hi < 0
	uh, ul := uint64(hi), lo
	if neg { // |x| = -x in two's complement
		var borrow uint64
		ul, borrow = bits.Sub64(0, lo, 0)
		uh, _ = bits.Sub64(0, uint64(hi), borrow)
	}
	_, r := bits.Div64(uh%q, ul, q)
	if neg && r != 0 {
		return q - r
	}
	return r
}

// FloodingDistanceLog2 returns log2 of the bound on the statistical distance,
// over one job, between what a user (colluding with the proxy and any
// owners) sees after a key switch and what it would see for any other
// committee secret, when the job's sums hold `uploads` ciphertexts in all
// (owners times ciphertexts per upload) and the committee has `members`
// members, at ring degree n.
//
// Every upload's proof guarantees only 2 c1 = a u* + e* with the bounds of
// zk.ProvenBounds, and members switch 2 c1, so the secret-dependent part of
// each coefficient of the switched result is a sum over uploads of
// (e_pk u* + e* s)_k, each at most |e_pk|_2 |u*|_2 + |e*|_2 |s|_2 (Cauchy-
// Schwarz on the negacyclic product) with |e_pk|_2 <= members 19 sqrt(n)
// and |s|_2 <= members sqrt(n) (honest members: Gaussian noise truncated
// at 19, ternary secrets). One honest member's flooding, uniform over
// 2^(S+1) values, hides each coefficient with statistical distance at most
// that sum over 2^(S+1) (the smudging lemma), and a job has n coefficients
// per switched ciphertext.
func FloodingDistanceLog2(n, uploads, members int) float64 {
	b := zk.ProvenBounds(n)
	rn := math.Sqrt(float64(n))
	perUpload := float64(members) * (19*rn*b.U2 + rn*b.E2)
	return math.Log2(float64(n)*float64(uploads)*perUpload) - float64(SmudgingLog2+1)
}
