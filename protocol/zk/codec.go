package zk

import (
	"errors"
	"fmt"
)

// The encoding of a proof: a header, the seed, then for each repetition
// the responses offset to be non-negative (z + Max in [0, 2 Max - 1]) and
// packed little-endian in LogBu + 1 and LogBe + 1 bits per coefficient (the
// group's). The header of a proof of one ciphertext is its version, 1, and
// its repetitions; a group's is version 2, its repetitions and its size.
const (
	version      = 1
	groupVersion = 2
)

// headerSize returns the length of the header and seed of a proof of g
// ciphertexts.
func headerSize(g int) int {
	if g > 1 {
		return 3 + 32
	}
	return 2 + 32
}

// Size returns the length of an encoded proof of g ciphertexts (1 <= g <=
// MaxGroup) at ring degree n (n a multiple of 8).
func Size(n, g int) int {
	sh, err := ShapeOf(g)
	if err != nil {
		return 0
	}
	return headerSize(g) + sh.Reps*n*int(sh.LogBu+1+sh.LogBe+1)/8
}

// Marshal encodes a proof.
func (p *Proof) Marshal() []byte {
	n := len(p.Zu[0])
	sh, _ := ShapeOf(p.G)
	out := make([]byte, 0, Size(n, p.G))
	if p.G > 1 {
		out = append(out, groupVersion, byte(sh.Reps), byte(p.G))
	} else {
		out = append(out, version, byte(sh.Reps))
	}
	out = append(out, p.Seed[:]...)
	for r := range sh.Reps {
		out = pack(out, p.Zu[r], sh.ZuMax, sh.LogBu+1)
		out = pack(out, p.Ze[r], sh.ZeMax, sh.LogBe+1)
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

// Unmarshal decodes a proof of g ciphertexts for ring degree n, checking its
// exact length, its header and that every response is in its interval.
func Unmarshal(b []byte, n, g int) (*Proof, error) {
	if n < 8 || n%8 != 0 {
		return nil, fmt.Errorf("zk: ring degree %d", n)
	}
	sh, err := ShapeOf(g)
	if err != nil {
		return nil, err
	}
	if len(b) != Size(n, g) {
		return nil, fmt.Errorf("zk: proof of %d bytes, want %d for a group of %d", len(b), Size(n, g), g)
	}
	want := []byte{version, byte(sh.Reps)}
	if g > 1 {
		want = []byte{groupVersion, byte(sh.Reps), byte(g)}
	}
	if h := b[:len(want)]; string(h) != string(want) {
		return nil, fmt.Errorf("zk: proof header %v, want %v (version, repetitions and, for a group, its size)", h, want)
	}
	p := &Proof{G: g, Zu: make([][]int32, sh.Reps), Ze: make([][]int32, sh.Reps)}
	off := headerSize(g)
	copy(p.Seed[:], b[off-32:off])
	for r := range sh.Reps {
		if p.Zu[r], off, err = unpack(b, off, n, sh.ZuMax, sh.LogBu+1); err != nil {
			return nil, fmt.Errorf("zk: repetition %d, u: %w", r, err)
		}
		if p.Ze[r], off, err = unpack(b, off, n, sh.ZeMax, sh.LogBe+1); err != nil {
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
