package fixedpoint

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Limits on decimal text. They bound the work a hostile cell can cause.
const (
	maxDigits   = 120  // significant digits in a mantissa
	maxExponent = 1000 // |decimal exponent| after normalisation
)

// ErrSyntax reports text that is not a decimal number.
var ErrSyntax = errors.New("not a decimal number")

// Decimal is an exact decimal number: (-1)^neg * mant * 10^exp, with mant
// free of trailing zeros (mant = 0 has exp = 0 and neg = false).
// The zero value is 0. A Decimal is immutable and safe for concurrent use.
type Decimal struct {
	neg  bool
	mant *big.Int
	exp  int
}

// decimalParts is the parser's output: the mantissa fits a uint64 when big
// is nil.
type decimalParts struct {
	neg   bool
	small uint64
	big   *big.Int
	exp   int
}

// parseParts parses optional sign, digits, optional fraction and optional
// exponent ("-12.50e-3"). Surrounding ASCII blanks are ignored. It does not
// allocate unless the mantissa has more than 19 significant digits.
func parseParts(s string) (decimalParts, error) {
	var p decimalParts
	s = strings.Trim(s, " \t")
	if s == "" {
		return p, fmt.Errorf("empty value: %w", ErrSyntax)
	}
	i := 0
	switch s[0] {
	case '+':
		i++
	case '-':
		p.neg = true
		i++
	}
	var (
		digits, sig, fracDigits, zeros int
		seenDot, overflow              bool
		sigStart                       = -1
	)
	push := func(c byte) {
		if !overflow {
			if p.small > (1<<64-1-9)/10 {
				overflow = true
			} else {
				p.small = p.small*10 + uint64(c-'0')
			}
		}
	}
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
			if seenDot {
				fracDigits++
			}
			if c == '0' {
				// Leading zeros are dropped; other zeros wait until a
				// non-zero digit shows they are not trailing.
				if sig > 0 {
					zeros++
				}
				continue
			}
			if sigStart < 0 {
				sigStart = i
			}
			sig += zeros + 1
			if sig > maxDigits {
				return p, fmt.Errorf("%q has more than %d significant digits: %w", s, maxDigits, ErrSyntax)
			}
			for ; zeros > 0; zeros-- {
				push('0')
			}
			push(c)
			continue
		case c == '.' && !seenDot:
			seenDot = true
			continue
		}
		break
	}
	if digits == 0 {
		return p, fmt.Errorf("%q: %w", s, ErrSyntax)
	}
	exp := zeros - fracDigits
	if i < len(s) {
		if s[i] != 'e' && s[i] != 'E' {
			return p, fmt.Errorf("%q: unexpected %q: %w", s, s[i], ErrSyntax)
		}
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		if i == len(s) {
			return p, fmt.Errorf("%q: missing exponent digits: %w", s, ErrSyntax)
		}
		e := 0
		for ; i < len(s); i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return p, fmt.Errorf("%q: unexpected %q in exponent: %w", s, c, ErrSyntax)
			}
			e = e*10 + int(c-'0')
			if e > 10*maxExponent {
				return p, fmt.Errorf("%q: exponent out of range: %w", s, ErrSyntax)
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if sig == 0 {
		return decimalParts{}, nil
	}
	if overflow {
		var b strings.Builder
		for _, c := range []byte(s[sigStart:]) {
			if c >= '0' && c <= '9' {
				b.WriteByte(c)
				if b.Len() == sig {
					break
				}
			}
		}
		p.big, _ = new(big.Int).SetString(b.String(), 10)
		p.small = 0
	}
	p.exp = exp
	return p, nil
}

// normalise removes trailing zeros from the mantissa and checks the exponent.
func (p decimalParts) decimal() (Decimal, error) {
	m := p.big
	if m == nil {
		m = new(big.Int).SetUint64(p.small)
	}
	if m.Sign() == 0 {
		return Decimal{}, nil
	}
	exp := p.exp
	ten := big.NewInt(10)
	var q, r big.Int
	for {
		q.QuoRem(m, ten, &r)
		if r.Sign() != 0 {
			break
		}
		m = new(big.Int).Set(&q)
		exp++
	}
	if exp > maxExponent || exp < -maxExponent {
		return Decimal{}, fmt.Errorf("exponent %d out of range [-%d, %d]: %w", exp, maxExponent, maxExponent, ErrSyntax)
	}
	return Decimal{neg: p.neg, mant: m, exp: exp}, nil
}

// ParseDecimal parses decimal text such as "-12.5", "3", "1.25e-3" exactly.
func ParseDecimal(s string) (Decimal, error) {
	p, err := parseParts(s)
	if err != nil {
		return Decimal{}, err
	}
	return p.decimal()
}

// ParseFloat parses decimal text with exactly the syntax and limits of
// Quantizer.Quantize and returns the nearest float64. Code that computes
// public parameters from cells in floating point (schema inference) uses it
// so that it accepts exactly the cells the row map accepts.
func ParseFloat(s string) (float64, error) {
	p, err := parseParts(s)
	if err != nil {
		return 0, err
	}
	if err := p.checkExponent(s); err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(strings.Trim(s, " \t"), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is out of the float64 range: %w", s, ErrSyntax)
	}
	return f, nil
}

// MustDecimal is ParseDecimal for constants in code and tests; it panics on
// bad input.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

// Sign returns -1, 0 or 1.
func (d Decimal) Sign() int {
	if d.mant == nil || d.mant.Sign() == 0 {
		return 0
	}
	if d.neg {
		return -1
	}
	return 1
}

// Rat returns the exact value as a new big.Rat.
func (d Decimal) Rat() *big.Rat {
	r := new(big.Rat)
	if d.Sign() == 0 {
		return r
	}
	p := pow10(abs(d.exp))
	if d.exp >= 0 {
		r.SetInt(new(big.Int).Mul(d.mant, p))
	} else {
		r.SetFrac(d.mant, p)
	}
	if d.neg {
		r.Neg(r)
	}
	return r
}

// String returns the canonical text: no exponent, no trailing zeros in the
// fraction, no leading '+', "0" for zero. Two decimals are equal exactly when
// their canonical texts are.
func (d Decimal) String() string {
	if d.Sign() == 0 {
		return "0"
	}
	digits := d.mant.String()
	var s string
	switch {
	case d.exp >= 0:
		s = digits + strings.Repeat("0", d.exp)
	case -d.exp < len(digits):
		k := len(digits) + d.exp
		s = digits[:k] + "." + digits[k:]
	default:
		s = "0." + strings.Repeat("0", -d.exp-len(digits)) + digits
	}
	if d.neg {
		return "-" + s
	}
	return s
}

// MarshalText implements encoding.TextMarshaler with the canonical text.
func (d Decimal) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Decimal) UnmarshalText(b []byte) error {
	v, err := ParseDecimal(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// pow10 returns a new 10^n.
func pow10(n int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// MarshalJSON writes the canonical text as a JSON string.
func (d Decimal) MarshalJSON() ([]byte, error) {
	return []byte(`"` + d.String() + `"`), nil
}

// UnmarshalJSON accepts a JSON number or a JSON string holding a decimal, and
// keeps its exact value (no float64 round trip).
func (d *Decimal) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := ParseDecimal(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// FromFloat returns the exact decimal value of the shortest text that
// round-trips to f (strconv's 'g' -1 format). It is for public parameters
// computed in floating point (such as a schema's centers), never for data.
func FromFloat(f float64) (Decimal, error) {
	return ParseDecimal(strconv.FormatFloat(f, 'g', -1, 64))
}
