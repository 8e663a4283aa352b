package mpc

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
)

// Dealer is the source of correlated randomness (Beaver 1991): matrix
// multiplication triples (A, B, A B) and truncation pairs (r, r >> f),
// dealt as additive shares to the n parties. A dealer sees no input and
// no opened value; it must not collude with any party, since it knows
// every mask (the trust the book places in its proxy against its CSP, and
// SF-PCA in its auxiliary party CP0). Triples from the committee's
// threshold key (SPDZ: Damgard, Pastro, Smart and Zakarias 2012) would
// remove that assumption at a higher cost.
type Dealer struct {
	n     int
	rng   *rand.ChaCha8
	fixed map[int]Mat // the plain masks of operands opened once
	next  int
}

// NewDealer seeds a dealer for n parties from src (crypto/rand outside
// tests).
func NewDealer(n int, src io.Reader) (*Dealer, error) {
	var seed [32]byte
	if _, err := io.ReadFull(src, seed[:]); err != nil {
		return nil, fmt.Errorf("dealer seed: %w", err)
	}
	return &Dealer{n: n, rng: rand.NewChaCha8(seed), fixed: map[int]Mat{}}, nil
}

func (d *Dealer) word() Word {
	var b [16]byte
	_, _ = d.rng.Read(b[:])
	return Word{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
}

func (d *Dealer) random(r, c int) Mat {
	m := NewMat(r, c)
	for i := range m.V {
		m.V[i] = d.word()
	}
	return m
}

// bounded returns an r x c matrix of uniform integers in [0, 2^bits).
func (d *Dealer) bounded(r, c int, nbits uint) Mat {
	m := NewMat(r, c)
	for i := range m.V {
		w := d.word()
		if nbits < 128 {
			w = w.Shl(128 - nbits).Shr(128 - nbits)
		}
		m.V[i] = w
	}
	return m
}

// split deals m as n additive shares.
func (d *Dealer) split(m Mat) Shared {
	s := Shared{R: m.R, C: m.C, S: make([]Mat, d.n)}
	last := m
	for i := 1; i < d.n; i++ {
		s.S[i] = d.random(m.R, m.C)
		last = sub(last, s.S[i])
	}
	s.S[0] = last
	return s
}

// triple deals (A, B, A B) for an r x k by k x c product.
func (d *Dealer) triple(r, k, c int) (a, b, ab Shared) {
	A, B := d.random(r, k), d.random(k, c)
	return d.split(A), d.split(B), d.split(mul(A, B))
}

// gramPair deals (A, A^T A) for the Gram matrix of an r x c operand.
func (d *Dealer) gramPair(r, c int) (a, ata Shared) {
	A := d.random(r, c)
	return d.split(A), d.split(mul(A.Transpose(), A))
}

// fix deals the mask of an operand that is opened once and used in many
// products; the dealer keeps it for fixedTriple.
func (d *Dealer) fix(r, c int) (id int, a Shared) {
	A := d.random(r, c)
	d.next++
	d.fixed[d.next] = A
	return d.next, d.split(A)
}

// fixedTriple deals (B, A B) for the fixed mask id and a fresh k x c B.
func (d *Dealer) fixedTriple(id, c int) (b, ab Shared) {
	A := d.fixed[id]
	B := d.random(A.C, c)
	return d.split(B), d.split(mul(A, B))
}

// truncPair deals r uniform in [0, 2^nbits) and r >> f, entrywise.
func (d *Dealer) truncPair(rows, cols int, nbits, f uint) (r, hi Shared) {
	R := d.bounded(rows, cols, nbits)
	H := NewMat(rows, cols)
	for i, w := range R.V {
		H.V[i] = w.Shr(f)
	}
	return d.split(R), d.split(H)
}
