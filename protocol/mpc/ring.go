package mpc

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Word is an element of the ring Z_2^128, the shares' ring: two's
// complement, so a fixed-point value v with f fractional bits is the word
// round(v 2^f) mod 2^128.
type Word struct{ Hi, Lo uint64 }

// Add returns a + b mod 2^128.
func (a Word) Add(b Word) Word {
	lo, c := bits.Add64(a.Lo, b.Lo, 0)
	hi, _ := bits.Add64(a.Hi, b.Hi, c)
	return Word{hi, lo}
}

// Sub returns a - b mod 2^128.
func (a Word) Sub(b Word) Word {
	lo, c := bits.Sub64(a.Lo, b.Lo, 0)
	hi, _ := bits.Sub64(a.Hi, b.Hi, c)
	return Word{hi, lo}
}

// Neg returns -a mod 2^128.
func (a Word) Neg() Word { return Word{}.Sub(a) }

// Mul returns a b mod 2^128.
func (a Word) Mul(b Word) Word {
	hi, lo := bits.Mul64(a.Lo, b.Lo)
	hi += a.Hi*b.Lo + a.Lo*b.Hi
	return Word{hi, lo}
}

// Shr is the logical right shift by s < 128 bits.
func (a Word) Shr(s uint) Word {
	switch {
	case s == 0:
		return a
	case s < 64:
		return Word{a.Hi >> s, a.Lo>>s | a.Hi<<(64-s)}
	default:
		return Word{0, a.Hi >> (s - 64)}
	}
}

// Shl is the left shift by s < 128 bits.
func (a Word) Shl(s uint) Word {
	switch {
	case s == 0:
		return a
	case s < 64:
		return Word{a.Hi<<s | a.Lo>>(64-s), a.Lo << s}
	default:
		return Word{a.Lo << (s - 64), 0}
	}
}

// And is the bitwise and.
func (a Word) And(b Word) Word { return Word{a.Hi & b.Hi, a.Lo & b.Lo} }

// Xor is the bitwise exclusive or.
func (a Word) Xor(b Word) Word { return Word{a.Hi ^ b.Hi, a.Lo ^ b.Lo} }

// Not is the bitwise complement.
func (a Word) Not() Word { return Word{^a.Hi, ^a.Lo} }

// Bit returns bit j of a (0 or 1).
func (a Word) Bit(j uint) uint64 { return a.Shr(j).Lo & 1 }

// Pow2 returns 2^s for s < 128.
func Pow2(s uint) Word { return Word{0, 1}.Shl(s) }

// FromInt64 embeds a signed integer.
func FromInt64(v int64) Word {
	if v < 0 {
		return Word{math.MaxUint64, uint64(v)}
	}
	return Word{0, uint64(v)}
}

// Signed reports the word as a float64, reading it as a signed
// (two's complement) integer, scaled by 2^-f. It is for outputs only:
// nothing in the privacy path reads a float.
func (a Word) Signed(f uint) float64 {
	neg := a.Hi>>63 == 1
	if neg {
		a = a.Neg()
	}
	v := math.Ldexp(float64(a.Hi), 64-int(f)) + math.Ldexp(float64(a.Lo), -int(f))
	if neg {
		return -v
	}
	return v
}

// Encode returns round(v 2^f) as a word; |v| 2^f must stay below 2^126.
// For public constants and test inputs.
func Encode(v float64, f uint) Word {
	x := math.Ldexp(v, int(f))
	neg := x < 0
	x = math.Abs(math.Round(x))
	hi := math.Floor(math.Ldexp(x, -64))
	lo := x - math.Ldexp(hi, 64)
	w := Word{uint64(hi), uint64(lo)}
	if neg {
		return w.Neg()
	}
	return w
}

// AppendBytes appends the word's 16 bytes, big endian.
func (a Word) AppendBytes(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, a.Hi)
	return binary.BigEndian.AppendUint64(b, a.Lo)
}

// WordFromBytes reads 16 bytes written by AppendBytes.
func WordFromBytes(b []byte) Word {
	return Word{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}
}
