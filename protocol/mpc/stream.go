package mpc

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
)

// Stream is a deterministic stream of pseudorandom words keyed by a seed:
// AES-256 in counter mode from a zero IV (a pseudorandom generator under
// AES's PRF assumption), so the dealer and a party holding the seed draw
// the same words.
type Stream struct {
	ctr cipher.Stream
	buf [4096]byte
	pos int
}

// NewStream keys a stream.
func NewStream(seed Seed) *Stream {
	b, err := aes.NewCipher(seed[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	return &Stream{ctr: cipher.NewCTR(b, make([]byte, aes.BlockSize)), pos: 4096}
}

// Uint64 returns the next 64 bits.
func (s *Stream) Uint64() uint64 {
	if s.pos+8 > len(s.buf) {
		clear(s.buf[:])
		s.ctr.XORKeyStream(s.buf[:], s.buf[:])
		s.pos = 0
	}
	v := binary.LittleEndian.Uint64(s.buf[s.pos:])
	s.pos += 8
	return v
}
