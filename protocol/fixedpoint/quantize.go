package fixedpoint

import (
	"errors"
	"fmt"
	"math/big"
	"math/bits"
)

// MaxBits is the largest number of fractional bits a schema may ask for.
const MaxBits = 30

// MaxAbs is the bound on |q| for one quantized value: |q| < 2^53.
const MaxAbs = int64(1) << 53

// ErrRange reports a value whose quantization is outside (-2^53, 2^53).
var ErrRange = errors.New("value out of the quantization range")

// pow10Cache is how many powers of ten a Quantizer precomputes.
const pow10Cache = 24

// Quantizer computes q = round(2^g (x - center) / scale) for one feature.
// It is immutable and safe for concurrent use; callers pass their own Scratch.
type Quantizer struct {
	bits uint
	// With center = cn/cd and scale = sn/sd (sn, cd > 0):
	//   2^g (m 10^e - cn/cd) / (sn/sd) = (m a - b 10^-e) / (d 10^-e)   (e < 0)
	// where a = 2^g cd sd, b = 2^g cn sd and d = cd sn.
	a, b, d *big.Int
	bPow    [pow10Cache]*big.Int // b * 10^p
	dPow    [pow10Cache]*big.Int // d * 10^p
	// fast[k] holds the fast path's constants for plain decimals with k
	// fraction digits (see quantizeFast).
	fast [maxFastFrac + 1]fastTerm
}

// maxFastFrac is the most fraction digits (and significant digits) a cell
// may have for the fast path: 10^19 < 2^64.
const maxFastFrac = 19

// fastTerm holds, for cells X / 10^k with k fraction digits, the integers of
//
//	2^g (X/10^k - C/10^kc) / (S/10^ks) = (X mulX - c) f / den
//
// with K = max(k, kc), mulX = 10^(K-k), c = C 10^(K-kc), and f / den =
// 2^g 10^(ks-K) / S reduced to lowest terms. ok is false when one of them
// does not fit its word; such cells take the exact path.
type fastTerm struct {
	ok     bool
	mulX   uint64
	c      int64
	f, den uint64
	// den << shift has its top bit set; inv is its reciprocal
	// floor((2^128 - 1) / (den << shift)) - 2^64, for div.
	shift uint
	inv   uint64
}

// newFastTerm returns the term with its reciprocal.
func newFastTerm(mulX uint64, c int64, f, den uint64) fastTerm {
	s := uint(bits.LeadingZeros64(den))
	dn := den << s
	inv, _ := bits.Div64(^dn, ^uint64(0), dn)
	return fastTerm{ok: true, mulX: mulX, c: c, f: f, den: den, shift: s, inv: inv}
}

// div returns the quotient and remainder of (hi 2^64 + lo) / den for
// hi < den, as bits.Div64 does, with two multiplications by the
// precomputed reciprocal instead of a hardware division (Möller and
// Granlund, "Improved division by invariant integers", IEEE Trans.
// Computers 60(2), 2011, algorithm 4; exact for every input).
func (t *fastTerm) div(hi, lo uint64) (quo, rem uint64) {
	d := t.den << t.shift
	if t.shift != 0 {
		hi = hi<<t.shift | lo>>(64-t.shift)
		lo <<= t.shift
	}
	q1, q0 := bits.Mul64(t.inv, hi)
	var c uint64
	q0, c = bits.Add64(q0, lo, 0)
	q1, _ = bits.Add64(q1, hi, c)
	q1++
	r := lo - q1*d
	// if r > q0 { q1--; r += d }, unpredictable, with a mask
	_, gt := bits.Sub64(q0, r, 0)
	m := -gt
	q1 += m
	r += m & d
	if r >= d { // rare
		q1++
		r -= d
	}
	return q1, r >> t.shift
}

// Scratch holds the big-integer temporaries of Quantize so that the hot path
// does not allocate. Not safe for concurrent use: one per goroutine.
type Scratch struct {
	m, num, den, quo, rem, tmp big.Int
}

// NewQuantizer returns the quantizer of the map x -> 2^bits (x - center)/scale.
// scale must be positive and bits at most MaxBits.
func NewQuantizer(center, scale Decimal, bits uint) (*Quantizer, error) {
	if scale.Sign() <= 0 {
		return nil, fmt.Errorf("scale %s must be positive", scale)
	}
	if bits > MaxBits {
		return nil, fmt.Errorf("quantization bits %d exceed %d", bits, MaxBits)
	}
	c, s := center.Rat(), scale.Rat()
	two := new(big.Int).Lsh(big.NewInt(1), bits)
	q := &Quantizer{bits: bits}
	q.a = new(big.Int).Mul(c.Denom(), s.Denom())
	q.a.Mul(q.a, two)
	q.b = new(big.Int).Mul(c.Num(), s.Denom())
	q.b.Mul(q.b, two)
	q.d = new(big.Int).Mul(c.Denom(), s.Num())
	for p := range pow10Cache {
		t := pow10(p)
		q.bPow[p] = new(big.Int).Mul(q.b, t)
		q.dPow[p] = new(big.Int).Mul(q.d, t)
	}
	q.initFast(center, scale)
	return q, nil
}

// initFast precomputes the fast path's constants; a constant that does not
// fit its word leaves its entry off (every cell with that many fraction
// digits takes the exact path).
func (q *Quantizer) initFast(center, scale Decimal) {
	split := func(d Decimal) (m *big.Int, k int) { // d = m / 10^k, k >= 0
		m = new(big.Int)
		if d.Sign() == 0 {
			return m, 0
		}
		m.Set(d.mant)
		if d.neg {
			m.Neg(m)
		}
		if d.exp >= 0 {
			return m.Mul(m, pow10(d.exp)), 0
		}
		return m, -d.exp
	}
	cm, kc := split(center)
	sm, ks := split(scale)
	for k := range q.fast {
		kk := max(k, kc)
		mulX := pow10(kk - k)
		c := new(big.Int).Mul(cm, pow10(kk-kc))
		f := new(big.Int).Lsh(big.NewInt(1), q.bits)
		den := new(big.Int).Set(sm)
		if e := ks - kk; e >= 0 {
			f.Mul(f, pow10(e))
		} else {
			den.Mul(den, pow10(-e))
		}
		g := new(big.Int).GCD(nil, nil, f, den)
		f.Quo(f, g)
		den.Quo(den, g)
		if !mulX.IsUint64() || !c.IsInt64() || !f.IsUint64() || !den.IsUint64() {
			continue
		}
		q.fast[k] = newFastTerm(mulX.Uint64(), c.Int64(), f.Uint64(), den.Uint64())
	}
}

// parsePlain reads a plain decimal: an optional sign, digits with at most
// one '.', at least one digit, at most maxFastFrac significant digits and
// fraction digits, nothing else (no blanks, no exponent). The value is
// (-1)^neg x / 10^k. ok is false for anything else, which the exact parser
// then reads or rejects.
func parsePlain(s string) (neg bool, x uint64, k int, ok bool) {
	if len(s) == 0 {
		return false, 0, 0, false
	}
	neg = s[0] == '-'
	i := int(b2u(neg) | b2u(s[0] == '+')) // a sign, without a branch
	start := i
	for i < len(s) && s[i] == '0' { // leading zeros are not significant
		i++
	}
	sig := i
	for ; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			break
		}
		x = x*10 + uint64(c)
	}
	ints := i - sig // significant integer digits
	digits := i - start
	if i < len(s) {
		if s[i] != '.' {
			return false, 0, 0, false
		}
		i++
		frac := i
		if ints == 0 {
			for i < len(s) && s[i] == '0' {
				i++
			}
		}
		fsig := i
		for ; i < len(s); i++ {
			c := s[i] - '0'
			if c > 9 {
				return false, 0, 0, false
			}
			x = x*10 + uint64(c)
		}
		k = i - frac
		digits += k
		ints += i - fsig
	}
	// ints now counts the significant digits, all accumulated in x: at most
	// 19 of them cannot overflow 64 bits.
	if digits == 0 || ints > maxFastFrac || k > maxFastFrac {
		return false, 0, 0, false
	}
	return neg, x, k, true
}

// quantizeFast computes Quantize for plain decimals in 64- and 128-bit
// integers. It returns ok = false, and the caller takes the exact path,
// when the text is not a plain decimal (parsePlain) or a number does not
// fit its word: the fast path never guesses. When ok, the result is the
// exact path's: both compute round-half-away-from-zero of the same
// rational (X mulX - c) f / den = 2^g (x - center) / scale, the fast path
// as a 128-bit quotient and remainder (fastTerm.div, exact).
func (q *Quantizer) quantizeFast(s string) (int64, bool) {
	neg, x, k, ok := parsePlain(s)
	if !ok {
		return 0, false
	}
	t := &q.fast[k]
	if !t.ok {
		return 0, false
	}
	// N = (-1)^neg x mulX - c in 128-bit two's complement, without a branch
	// on the signs (they are random, and mispredicted branches would cost
	// more than the arithmetic): |x mulX| < 2^126 (checked) and |c| <= 2^63,
	// so |N| < 2^127 fits.
	ahi, alo := bits.Mul64(x, t.mulX)
	if ahi >= 1<<62 {
		return 0, false
	}
	sm := -b2u(neg) // all ones for a negative cell
	alo, b := bits.Sub64(alo^sm, sm, 0)
	ahi, _ = bits.Sub64(ahi^sm, sm, b) // (-1)^neg x mulX
	nlo, b := bits.Sub64(alo, uint64(t.c), 0)
	nhi, _ := bits.Sub64(ahi, uint64(t.c>>63), b) // minus c, sign-extended
	nm := uint64(int64(nhi) >> 63)                // all ones when N < 0
	nlo, b = bits.Sub64(nlo^nm, nm, 0)
	nhi, _ = bits.Sub64(nhi^nm, nm, b) // |N|
	n := uint128{nhi, nlo}
	// num = |N| f < 2^192; the quotient fits a word only if the top word
	// is zero and the middle one is below den.
	h1, lo := bits.Mul64(n.lo, t.f)
	h2, m := bits.Mul64(n.hi, t.f)
	hi, carry := bits.Add64(h1, m, 0)
	if h2 != 0 || carry != 0 || hi >= t.den {
		return 0, false // quotient >= 2^64: out of range, the exact path says so
	}
	quo, rem := t.div(hi, lo)
	if quo >= uint64(MaxAbs) {
		return 0, false
	}
	// Round half away from zero: up when 2 rem >= den (quo < 2^53 cannot
	// wrap), then the sign of N.
	_, below := bits.Sub64(rem, t.den-rem, 0)
	quo += 1 - below
	if quo >= uint64(MaxAbs) {
		return 0, false
	}
	return (int64(quo) ^ int64(nm)) - int64(nm), true
}

// b2u is 1 for true and 0 for false (the compiler makes it a flag move).
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Bits returns g.
func (q *Quantizer) Bits() uint { return q.bits }

// Quantize parses the decimal text x and returns round(2^g (x - center)/scale),
// rounding halves away from zero. It fails on text that is not a decimal and
// on results with |q| >= 2^53 (ErrRange).
//
// Plain decimals with at most 19 significant digits take a fast path in
// 64- and 128-bit integers; everything else (exponents, blanks, long
// mantissas, constants too wide for a word, errors) takes QuantizeExact.
// Both give the same integer (see quantizeFast).
func (q *Quantizer) Quantize(x string, sc *Scratch) (int64, error) {
	if v, ok := q.quantizeFast(x); ok {
		return v, nil
	}
	return q.QuantizeExact(x, sc)
}

// QuantizeExact is Quantize in big-integer arithmetic for every input: the
// reference that the fast path is tested against, and its fallback.
func (q *Quantizer) QuantizeExact(x string, sc *Scratch) (int64, error) {
	p, err := parseParts(x)
	if err != nil {
		return 0, err
	}
	if err := p.checkExponent(x); err != nil {
		return 0, err
	}
	m := &sc.m
	if p.big != nil {
		m.Set(p.big)
	} else {
		m.SetUint64(p.small)
	}
	if p.neg {
		m.Neg(m)
	}
	num, den := &sc.num, &sc.den
	num.Mul(m, q.a)
	if p.exp >= 0 {
		if p.exp > 0 {
			num.Mul(num, q.pow(&sc.tmp, p.exp))
		}
		num.Sub(num, q.b)
		den.Set(q.d)
	} else {
		k := -p.exp
		if k < pow10Cache {
			num.Sub(num, q.bPow[k])
			den.Set(q.dPow[k])
		} else {
			t := q.pow(&sc.tmp, k)
			den.Mul(q.b, t)
			num.Sub(num, den)
			den.Mul(q.d, t)
		}
	}
	v, ok := roundQuo(num, den, sc)
	if !ok {
		return 0, fmt.Errorf("%q maps to |z| >= 2^%d: %w", x, 53-int(q.bits), ErrRange)
	}
	return v, nil
}

func (q *Quantizer) pow(dst *big.Int, n int) *big.Int {
	return dst.Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// roundQuo returns round-half-away(num/den) for den > 0 if it is inside
// (-MaxAbs, MaxAbs). num is overwritten.
func roundQuo(num, den *big.Int, sc *Scratch) (int64, bool) {
	neg := num.Sign() < 0
	num.Abs(num)
	sc.quo.QuoRem(num, den, &sc.rem)
	sc.rem.Lsh(&sc.rem, 1)
	if sc.rem.Cmp(den) >= 0 {
		sc.quo.Add(&sc.quo, big.NewInt(1))
	}
	if !sc.quo.IsInt64() {
		return 0, false
	}
	v := sc.quo.Int64()
	if v >= MaxAbs {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// Bound returns B = floor(2^bits * c) for a clip norm c > 0, the radius of the
// integer ball that clipped rows lie in. It fails if B is not in [1, 2^53).
func Bound(c Decimal, bits uint) (int64, error) {
	if c.Sign() <= 0 {
		return 0, fmt.Errorf("clip norm %s must be positive", c)
	}
	if bits > MaxBits {
		return 0, fmt.Errorf("quantization bits %d exceed %d", bits, MaxBits)
	}
	r := c.Rat()
	num := new(big.Int).Lsh(r.Num(), bits)
	num.Quo(num, r.Denom())
	if !num.IsInt64() || num.Int64() >= MaxAbs || num.Sign() == 0 {
		return 0, fmt.Errorf("clip bound floor(2^%d * %s) must be in [1, 2^53)", bits, c)
	}
	return num.Int64(), nil
}

// checkExponent bounds the exponent of a cell, bounding the work of
// quantizing it.
func (p decimalParts) checkExponent(x string) error {
	if p.exp > maxExponent || p.exp < -maxExponent-maxDigits {
		return fmt.Errorf("%q: exponent out of range: %w", x, ErrSyntax)
	}
	return nil
}
