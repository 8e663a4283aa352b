package fixedpoint

import (
	"errors"
	"fmt"
	"math/big"
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
	return q, nil
}

// Bits returns g.
func (q *Quantizer) Bits() uint { return q.bits }

// Quantize parses the decimal text x and returns round(2^g (x - center)/scale),
// rounding halves away from zero. It fails on text that is not a decimal and
// on results with |q| >= 2^53 (ErrRange).
func (q *Quantizer) Quantize(x string, sc *Scratch) (int64, error) {
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
