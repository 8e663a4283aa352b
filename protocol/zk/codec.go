package zk

import (
	"errors"
	"fmt"
)

// version is the first byte of an encoded proof.
const version = 1

// The encoding of a proof: the version, the number of repetitions, the seed,
// then for each repetition the responses offset to be non-negative
// (z + Max in [0, 2 Max - 1]) and packed little-endian in LogBu + 1 and
// LogBe + 1 bits per coefficient.
const (
	headerSize = 2 + 32
	uBits      = LogBu + 1
	eBits      = LogBe + 1
)

// Size returns the length of an encoded proof at ring degree n (n a
// multiple of 8).
func Size(n int) int { return headerSize + Reps*n*(uBits+eBits)/8 }

// Marshal encodes a proof.
func (p *Proof) Marshal() []byte {
	n := len(p.Zu[0])
	out := make([]byte, headerSize, Size(n))
	out[0], out[1] = version, Reps
	copy(out[2:], p.Seed[:])
	for r := range Reps {
		out = pack(out, p.Zu[r], ZuMax, uBits)
		out = pack(out, p.Ze[r], ZeMax, eBits)
	}
	return out
}

// pack appends z + max, bits bits per value, little-endian.
func pack(out []byte, z []int32, max int32, bits uint) []byte {
	var acc uint64
	var nacc uint
	for _, v := range z {
		acc |= uint64(v+max) << nacc
		nacc += bits
		for nacc >= 8 {
			out = append(out, byte(acc))
			acc >>= 8
			nacc -= 8
		}
	}
	if nacc > 0 {
		out = append(out, byte(acc))
	}
	return out
}

// Unmarshal decodes a proof for ring degree n, checking its exact length,
// its header and that every response is in its interval.
func Unmarshal(b []byte, n int) (*Proof, error) {
	if n < 8 || n%8 != 0 {
		return nil, fmt.Errorf("zk: ring degree %d", n)
	}
	if len(b) != Size(n) {
		return nil, fmt.Errorf("zk: proof of %d bytes, want %d", len(b), Size(n))
	}
	if b[0] != version || b[1] != Reps {
		return nil, fmt.Errorf("zk: proof version %d with %d repetitions, want version %d with %d", b[0], b[1], version, Reps)
	}
	p := &Proof{}
	copy(p.Seed[:], b[2:headerSize])
	off := headerSize
	var err error
	for r := range Reps {
		if p.Zu[r], off, err = unpack(b, off, n, ZuMax, uBits); err != nil {
			return nil, fmt.Errorf("zk: repetition %d, u: %w", r, err)
		}
		if p.Ze[r], off, err = unpack(b, off, n, ZeMax, eBits); err != nil {
			return nil, fmt.Errorf("zk: repetition %d, e: %w", r, err)
		}
	}
	return p, nil
}

var errOutOfRange = errors.New("response out of range")

// unpack reads n values of bits bits from b at off (n bits a whole number of
// bytes), each minus max, and checks them in [-max, max - 1].
func unpack(b []byte, off, n int, max int32, bits uint) ([]int32, int, error) {
	z := make([]int32, n)
	var acc uint64
	var nacc uint
	mask := uint64(1)<<bits - 1
	for i := range z {
		for nacc < bits {
			acc |= uint64(b[off]) << nacc
			off++
			nacc += 8
		}
		v := int64(acc&mask) - int64(max)
		acc >>= bits
		nacc -= bits
		if v > int64(max)-1 {
			return nil, off, fmt.Errorf("%w at coefficient %d", errOutOfRange, i)
		}
		z[i] = int32(v)
	}
	return z, off, nil
}
