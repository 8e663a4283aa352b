package dp

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/bits"
	"runtime"
	"sync"
)

// ErrOverflow reports a value that does not fit in an int64: a draw whose
// magnitude exceeds the int64 range, or a sum in AddTo that would wrap.
var ErrOverflow = errors.New("dp: value does not fit in int64")

// MaxSigmaBits bounds the standard deviation a Sampler accepts: floor(sigma)
// must be below 2^MaxSigmaBits, that is sigma^2 < 2^(2*MaxSigmaBits). Larger
// values would make int64 overflow of the draws a common event.
const MaxSigmaBits = 61

// bufSize is the number of random bytes a Sampler reads from its source at a
// time. The buffered bytes are ordinary output of the source (for the
// default, crypto/rand), consumed in order and never reused.
const bufSize = 4096

// Sampler draws exact discrete Gaussian noise N_Z(0, sigma^2): the value x in
// Z is returned with probability exp(-x^2/(2 sigma^2)) / sum_y exp(-y^2/(2
// sigma^2)). Sampling follows Canonne, Kamath and Steinke, "The Discrete
// Gaussian for Differential Privacy" (NeurIPS 2020, arXiv:2004.00010),
// Algorithms 1-3, in integer arithmetic only: every Bernoulli trial compares
// uniform random integers with exact rationals, so the output distribution is
// exactly N_Z(0, sigma^2) given uniform random bytes (no floating point is
// involved).
//
// A Sampler is not safe for concurrent use; make one per goroutine.
type Sampler struct {
	sigma2 *big.Rat // private copy
	zero   bool     // sigma^2 == 0: every draw is 0

	// Discrete Laplace scale t = floor(sigma) + 1 (Algorithm 3).
	t uint64

	// With sigma^2 = p/q in lowest terms, the rejection step accepts a
	// Laplace candidate Y with probability exp(-gamma), where
	//   gamma = (|Y| - sigma^2/t)^2 / (2 sigma^2) = (|Y| q t - p)^2 / den,
	//   den   = 2 p q t^2.
	p, qt, den *big.Int
	// The same constants as uint64 when all three fit (then the common
	// case runs without math/big).
	small         bool
	pU, qtU, denU uint64

	src  io.Reader
	buf  []byte
	pos  int
	pool uint64 // spare random bits for signs
	nBit uint

	// Scratch values for the math/big path, reused across draws.
	y, a, n, fl, r, x, q big.Int
}

// NewSampler returns a Sampler for N_Z(0, sigma2). sigma2 is the exact
// variance parameter; 0 means no noise (every draw is 0 and no randomness is
// read). It is copied, so the caller may modify it afterwards. rnd is the
// source of uniform random bytes; nil selects crypto/rand.Reader. Any reader
// whose bytes are not uniform and secret voids the privacy guarantee.
//
// NewSampler fails if sigma2 is nil or negative, or if sigma >=
// 2^MaxSigmaBits.
func NewSampler(sigma2 *big.Rat, rnd io.Reader) (*Sampler, error) {
	if sigma2 == nil {
		return nil, errors.New("dp: new sampler: sigma2 is nil")
	}
	if sigma2.Sign() < 0 {
		return nil, fmt.Errorf("dp: new sampler: sigma2 = %s is negative", sigma2.RatString())
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	s := &Sampler{sigma2: new(big.Rat).Set(sigma2), src: rnd}
	if sigma2.Sign() == 0 {
		s.zero = true
		return s, nil
	}
	p := new(big.Int).Set(sigma2.Num())
	q := new(big.Int).Set(sigma2.Denom())
	// floor(sqrt(x)) == floor(sqrt(floor(x))) for real x >= 0.
	floorSigma := new(big.Int).Quo(p, q)
	floorSigma.Sqrt(floorSigma)
	if floorSigma.BitLen() > MaxSigmaBits {
		return nil, fmt.Errorf("dp: new sampler: sigma2 = %s is too large: sigma must be below 2^%d",
			sigma2.FloatString(0), MaxSigmaBits)
	}
	s.t = floorSigma.Uint64() + 1
	tBig := new(big.Int).SetUint64(s.t)
	s.p = p
	s.qt = new(big.Int).Mul(q, tBig)
	s.den = new(big.Int).Mul(p, s.qt)
	s.den.Mul(s.den, tBig)
	s.den.Lsh(s.den, 1)
	if p.IsUint64() && s.qt.IsUint64() && s.den.IsUint64() {
		s.small = true
		s.pU, s.qtU, s.denU = p.Uint64(), s.qt.Uint64(), s.den.Uint64()
	}
	s.buf = make([]byte, bufSize)
	s.pos = bufSize
	return s, nil
}

// Sigma2 returns a copy of the variance parameter.
func (s *Sampler) Sigma2() *big.Rat { return new(big.Rat).Set(s.sigma2) }

// Sample returns one draw. It fails only if the random source fails or the
// draw does not fit in an int64 (ErrOverflow).
func (s *Sampler) Sample() (x int64, err error) {
	if s.zero {
		return 0, nil
	}
	defer s.recoverRead(&err)
	return s.sample()
}

// Fill sets dst[i] to independent draws. On error the contents of dst are
// unspecified.
func (s *Sampler) Fill(dst []int64) (err error) {
	if s.zero {
		clear(dst)
		return nil
	}
	defer s.recoverRead(&err)
	for i := range dst {
		v, err := s.sample()
		if err != nil {
			return fmt.Errorf("dp: fill index %d: %w", i, err)
		}
		dst[i] = v
	}
	return nil
}

// AddTo adds an independent draw to every dst[i]. A sum that would overflow
// int64 is an error (wrapping ErrOverflow), never wrapped around; on error
// the elements before the failing index have been updated and the rest are
// unchanged.
func (s *Sampler) AddTo(dst []int64) (err error) {
	if s.zero {
		return nil
	}
	defer s.recoverRead(&err)
	for i, d := range dst {
		v, err := s.sample()
		if err != nil {
			return fmt.Errorf("dp: add noise at index %d: %w", i, err)
		}
		sum := d + v
		// Overflow iff both operands have the same sign and the sum's
		// sign differs.
		if (d >= 0) == (v >= 0) && (sum >= 0) != (d >= 0) {
			return fmt.Errorf("dp: add noise at index %d: %d + %d: %w", i, d, v, ErrOverflow)
		}
		dst[i] = sum
	}
	return nil
}

// readFailure carries a random-source error from deep inside the sampling
// loops to the exported method, which turns it back into an error.
type readFailure struct{ err error }

func (s *Sampler) recoverRead(errp *error) {
	if r := recover(); r != nil {
		f, ok := r.(readFailure)
		if !ok {
			panic(r)
		}
		*errp = fmt.Errorf("dp: read randomness: %w", f.err)
	}
}

// sample runs Algorithm 3 of CKS: draw Y from the discrete Laplace with scale
// t, accept it with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)).
func (s *Sampler) sample() (int64, error) {
	for {
		neg, hi, lo := s.laplace()
		if !s.accept(hi, lo) {
			continue
		}
		switch {
		case hi == 0 && lo <= math.MaxInt64:
			if neg {
				return -int64(lo), nil
			}
			return int64(lo), nil
		case hi == 0 && neg && lo == 1<<63:
			return math.MinInt64, nil
		default:
			return 0, ErrOverflow
		}
	}
}

// laplace draws from the discrete Laplace distribution with scale t
// (P[Y = y] proportional to exp(-|y|/t)), CKS Algorithm 2 with s = 1. It
// returns the sign and the magnitude as a 128-bit value hi:lo.
func (s *Sampler) laplace() (neg bool, hi, lo uint64) {
	t := s.t
	for {
		var u uint64
		if t > 1 {
			u = s.uniform(t)
			// D ~ Bernoulli(exp(-u/t)); u/t is in [0, 1).
			if u != 0 {
				q0, _ := bits.Div64(u, 0, t)
				if !s.bernExpFrac(q0, u, t, nil, nil) {
					continue
				}
			}
		}
		var v uint64
		for s.bernExpMinus1() {
			v++
		}
		// X = u + t*v.
		mh, ml := bits.Mul64(t, v)
		var c uint64
		lo, c = bits.Add64(ml, u, 0)
		hi = mh + c
		b := s.bit()
		if b == 1 && hi == 0 && lo == 0 {
			continue
		}
		return b == 1, hi, lo
	}
}

// accept returns Bernoulli(exp(-gamma)) for gamma = (|Y| q t - p)^2 / den,
// where |Y| = hi:lo. gamma is split into floor(gamma) trials of
// Bernoulli(exp(-1)) and one Bernoulli(exp(-frac(gamma))) (CKS Algorithm 1).
func (s *Sampler) accept(hi, lo uint64) bool {
	if s.small && hi == 0 {
		// a = |Y| q t - p, computed as a magnitude (it is squared).
		mh, ml := bits.Mul64(lo, s.qtU)
		var a uint64
		fits := true
		if mh == 0 && ml < s.pU {
			a = s.pU - ml
		} else {
			l, borrow := bits.Sub64(ml, s.pU, 0)
			if mh-borrow != 0 {
				fits = false
			}
			a = l
		}
		if fits {
			nh, nl := bits.Mul64(a, a)
			if nh < s.denU {
				whole, r := bits.Div64(nh, nl, s.denU)
				for ; whole > 0; whole-- {
					if !s.bernExpMinus1() {
						return false
					}
				}
				if r == 0 {
					return true
				}
				q0, _ := bits.Div64(r, 0, s.denU)
				return s.bernExpFrac(q0, r, s.denU, nil, nil)
			}
		}
	}
	return s.acceptBig(hi, lo)
}

func (s *Sampler) acceptBig(hi, lo uint64) bool {
	y := &s.y
	y.SetUint64(hi)
	y.Lsh(y, 64)
	s.x.SetUint64(lo)
	y.Or(y, &s.x)
	a := &s.a
	a.Mul(y, s.qt)
	a.Sub(a, s.p)
	s.n.Mul(a, a)
	s.fl.QuoRem(&s.n, s.den, &s.r)
	// floor(gamma) trials of Bernoulli(exp(-1)). Each succeeds with
	// probability 1/e, so the loop almost always ends within a few trials;
	// it is nevertheless exact for any floor(gamma).
	for !s.fl.IsUint64() {
		for c := uint64(math.MaxUint64); c > 0; c-- {
			if !s.bernExpMinus1() {
				return false
			}
		}
		s.x.SetUint64(math.MaxUint64)
		s.fl.Sub(&s.fl, &s.x)
	}
	for c := s.fl.Uint64(); c > 0; c-- {
		if !s.bernExpMinus1() {
			return false
		}
	}
	if s.r.Sign() == 0 {
		return true
	}
	// q0 = floor(frac(gamma) * 2^64) < 2^64 because r < den.
	s.x.Lsh(&s.r, 64)
	s.q.QuoRem(&s.x, s.den, &s.y)
	return s.bernExpFrac(s.q.Uint64(), 0, 0, &s.r, s.den)
}

// bernExpFrac returns Bernoulli(exp(-g)) for g = num/den in [0, 1), given
// q0 = floor(g * 2^64), by CKS Algorithm 1: with K = 1, 2, ... draw
// A_K ~ Bernoulli(g/K) until A_K = 0, and return whether the final K is odd.
//
// Each Bernoulli(g/K) compares a uniform 64-bit integer X with
// z = g*2^64/K: X < floor(z) means true, X > floor(z) false, and only on a tie
// (probability 2^-64) are the following bits of z consulted, exactly, by
// tieBernoulli. floor(z) = floor(q0/K) because K is a positive integer.
//
// num/den is given as uint64s (numB == nil) or as big.Ints; it is only read
// on a tie.
func (s *Sampler) bernExpFrac(q0, num, den uint64, numB, denB *big.Int) bool {
	k := uint64(1)
	for {
		qk := q0 / k
		x := s.rand64()
		var hit bool
		switch {
		case x < qk:
			hit = true
		case x > qk:
			hit = false
		default:
			hit = s.tieBernoulli(num, den, numB, denB, k)
		}
		if !hit {
			return k&1 == 1
		}
		k++
	}
}

// tieBernoulli returns Bernoulli(frac(num * 2^64 / (den * k))), the bits of
// the Bernoulli(num/(den k)) comparison below the first 64.
func (s *Sampler) tieBernoulli(num, den uint64, numB, denB *big.Int, k uint64) bool {
	if numB == nil {
		numB = new(big.Int).SetUint64(num)
		denB = new(big.Int).SetUint64(den)
	}
	dk := new(big.Int).Mul(denB, new(big.Int).SetUint64(k))
	rem := new(big.Int).Lsh(numB, 64)
	rem.Mod(rem, dk)
	return s.bigBernoulli(rem, dk)
}

// bigBernoulli returns Bernoulli(num/den) for 0 <= num < den, reading the
// binary expansion of num/den 64 bits at a time against uniform 64-bit
// integers. It modifies num.
func (s *Sampler) bigBernoulli(num, den *big.Int) bool {
	q := new(big.Int)
	x := new(big.Int)
	for num.Sign() != 0 {
		x.Lsh(num, 64)
		q.QuoRem(x, den, num)
		d := q.Uint64()
		r := s.rand64()
		if r != d {
			return r < d
		}
	}
	return false
}

// bernExpMinus1 returns Bernoulli(exp(-1)): CKS Algorithm 1 with gamma = 1,
// where A_1 = Bernoulli(1) is always 1 and A_K = Bernoulli(1/K).
func (s *Sampler) bernExpMinus1() bool {
	k := uint64(2)
	for s.uniform(k) == 0 {
		k++
	}
	return k&1 == 1
}

// uniform returns a uniform integer in [0, n), n > 0, by Lemire's multiply
// and reject method (exact).
func (s *Sampler) uniform(n uint64) uint64 {
	hi, lo := bits.Mul64(s.rand64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(s.rand64(), n)
		}
	}
	return hi
}

// bit returns one uniform random bit.
func (s *Sampler) bit() uint64 {
	if s.nBit == 0 {
		s.pool = s.rand64()
		s.nBit = 64
	}
	b := s.pool & 1
	s.pool >>= 1
	s.nBit--
	return b
}

// rand64 returns 8 uniform random bytes as a uint64. A read error panics
// with readFailure, recovered by the exported methods.
func (s *Sampler) rand64() uint64 {
	if s.pos > len(s.buf)-8 {
		if _, err := io.ReadFull(s.src, s.buf); err != nil {
			s.pos = len(s.buf)
			panic(readFailure{err})
		}
		s.pos = 0
	}
	v := binary.LittleEndian.Uint64(s.buf[s.pos:])
	s.pos += 8
	return v
}

// ParallelFill fills dst with independent N_Z(0, sigma2) draws using up to
// workers goroutines (workers <= 0 means runtime.GOMAXPROCS(0)), each with
// its own Sampler working on a contiguous part of dst.
//
// If rnd is nil or crypto/rand.Reader, every worker reads crypto/rand
// directly. Otherwise ParallelFill first reads one 32-byte seed per worker
// from rnd, in worker order, and each worker expands its seed with SHA-256 in
// counter mode (block i = SHA-256(seed || uint64le(i))). The output is then a
// deterministic function of the bytes of rnd, len(dst) and the number of
// workers actually used (min(workers, len(dst))); it differs from what a
// single Sampler reading rnd would produce. The derived streams are as
// unpredictable as the seeds, so rnd must itself be a secret, uniform source
// for the privacy guarantee to hold.
func ParallelFill(dst []int64, sigma2 *big.Rat, rnd io.Reader, workers int) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if workers > len(dst) {
		workers = len(dst)
	}
	if workers == 0 {
		_, err := NewSampler(sigma2, rand.Reader)
		return err
	}
	shared := rnd == nil || rnd == rand.Reader
	samplers := make([]*Sampler, workers)
	for i := range samplers {
		src := rand.Reader
		if !shared {
			h := &hashStream{off: sha256.Size}
			if _, err := io.ReadFull(rnd, h.seed[:]); err != nil {
				return fmt.Errorf("dp: parallel fill: read seed for worker %d: %w", i, err)
			}
			src = h
		}
		s, err := NewSampler(sigma2, src)
		if err != nil {
			return fmt.Errorf("dp: parallel fill: %w", err)
		}
		samplers[i] = s
	}
	chunk := (len(dst) + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i, s := range samplers {
		lo := i * chunk
		hi := min(lo+chunk, len(dst))
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Fill(dst[lo:hi]); err != nil {
				errs[i] = fmt.Errorf("dp: parallel fill: worker %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// hashStream is an io.Reader producing SHA-256(seed || uint64le(counter)) for
// counter = 0, 1, 2, ...: a deterministic expansion of a 32-byte seed. It is
// not safe for concurrent use.
type hashStream struct {
	seed  [32]byte
	ctr   uint64
	block [sha256.Size]byte
	off   int
}

func (h *hashStream) Read(p []byte) (int, error) {
	var in [40]byte
	n := 0
	for n < len(p) {
		if h.off == len(h.block) {
			copy(in[:32], h.seed[:])
			binary.LittleEndian.PutUint64(in[32:], h.ctr)
			h.ctr++
			h.block = sha256.Sum256(in[:])
			h.off = 0
		}
		c := copy(p[n:], h.block[h.off:])
		h.off += c
		n += c
	}
	return n, nil
}
