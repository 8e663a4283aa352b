package mpc

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// Dealer is the source of correlated randomness (Beaver 1991): matrix
// multiplication triples (A, B, A B), truncation pairs (r, r >> f) and
// masks with shared bits, dealt as additive shares to the n parties. A
// dealer sees no input and no opened value; it must not collude with any
// party, since it knows every mask (the trust the book places in its proxy
// against its CSP, and SF-PCA in its auxiliary party CP0). Triples from the
// committee's threshold key (SPDZ: Damgard, Pastro, Smart and Zakarias
// 2012) would remove that assumption at a higher cost.
//
// Dealing is compressed with seeds (as in MP-SPDZ's and CrypTen's dealers):
// party i >= 1 draws each of its shares from its own AES-CTR stream (Stream), keyed
// by a seed the dealer sends it once, and only party 0 receives its shares
// explicitly, as value - sum of the others ("corrections"). The same Dealer
// type serves three places: the dealer itself (every share; with a sink it
// also emits party 0's corrections), and each party (its own share only:
// from its stream, or from the corrections for party 0). Every party and
// the dealer must make the same calls in the same order: the programs run
// here have a control flow independent of the data.
type Dealer struct {
	n      int
	me     int // -1: the dealer (every share)
	master *Stream
	party  []*Stream // by party; nil where not held
	seeds  []Seed
	sink   func(Mat) // dealer: receives party 0's shares
	next0  func() (Mat, error)
	err    error
	fixed  map[int]Mat
	nfix   int
}

// Seed is a party's stream key.
type Seed [32]byte

// NewDealer returns the dealer for n parties, its randomness from src
// (crypto/rand outside tests).
func NewDealer(n int, src io.Reader) (*Dealer, error) {
	if n < 2 {
		return nil, errors.New("dealer for fewer than 2 parties")
	}
	d := &Dealer{n: n, me: -1, party: make([]*Stream, n), seeds: make([]Seed, n), fixed: map[int]Mat{}}
	var master Seed
	if _, err := io.ReadFull(src, master[:]); err != nil {
		return nil, fmt.Errorf("dealer seed: %w", err)
	}
	d.master = NewStream(master)
	for i := 1; i < n; i++ {
		if _, err := io.ReadFull(src, d.seeds[i][:]); err != nil {
			return nil, fmt.Errorf("party seed: %w", err)
		}
		d.party[i] = NewStream(d.seeds[i])
	}
	return d, nil
}

// Seed returns party i's (i >= 1) stream key, which the dealer sends it
// before the first share is due.
func (d *Dealer) Seed(i int) Seed { return d.seeds[i] }

// SetSink makes the dealer hand every share of party 0 to f, in order.
func (d *Dealer) SetSink(f func(Mat)) { d.sink = f }

// NewPartySource returns party me's view of the dealer: for me >= 1 its
// stream keyed by seed, for party 0 the corrections read by next.
func NewPartySource(n, me int, seed Seed, next func() (Mat, error)) (*Dealer, error) {
	if me < 0 || me >= n {
		return nil, fmt.Errorf("party %d of %d", me, n)
	}
	d := &Dealer{n: n, me: me, party: make([]*Stream, n)}
	if me == 0 {
		if next == nil {
			return nil, errors.New("party 0 needs the dealer's corrections")
		}
		d.next0 = next
	} else {
		d.party[me] = NewStream(seed)
	}
	return d, nil
}

// Err returns the first failure to receive party 0's corrections.
func (d *Dealer) Err() error { return d.err }

func word(r *Stream) Word { return Word{r.Uint64(), r.Uint64()} }

func randomMat(r *Stream, rows, cols int) Mat {
	m := NewMat(rows, cols)
	for i := range m.V {
		m.V[i] = word(r)
	}
	return m
}

func (d *Dealer) random(r, c int) Mat { return randomMat(d.master, r, c) }

// bounded returns an r x c matrix of uniform integers in [0, 2^nbits).
func (d *Dealer) bounded(r, c int, nbits uint) Mat { return boundedMat(d.master, r, c, nbits) }

// split deals the r x c value as n additive shares; value is called only
// by the dealer. A party gets its own share only.
func (d *Dealer) split(r, c int, value func() Mat) Shared {
	s := Shared{R: r, C: c, S: make([]Mat, d.n)}
	switch {
	case d.me < 0:
		last := value()
		for i := 1; i < d.n; i++ {
			s.S[i] = randomMat(d.party[i], r, c)
			last = sub(last, s.S[i])
		}
		s.S[0] = last
		if d.sink != nil {
			d.sink(last)
		}
	case d.me > 0:
		s.S[d.me] = randomMat(d.party[d.me], r, c)
	default:
		m, err := d.next0()
		if err == nil && (m.R != r || m.C != c) {
			err = fmt.Errorf("dealer sent a %dx%d share where %dx%d was due", m.R, m.C, r, c)
		}
		if err != nil {
			if d.err == nil {
				d.err = err
			}
			m = NewMat(r, c)
		}
		s.S[0] = m
	}
	return s
}

// triple deals (A, B, A B) for an r x k by k x c product.
func (d *Dealer) triple(r, k, c int) (a, b, ab Shared) {
	var A, B Mat
	a = d.split(r, k, func() Mat { A = d.random(r, k); return A })
	b = d.split(k, c, func() Mat { B = d.random(k, c); return B })
	ab = d.split(r, c, func() Mat { return mul(A, B) })
	return a, b, ab
}

// gramPair deals (A, A^T A) for the Gram matrix of an r x c operand.
func (d *Dealer) gramPair(r, c int) (a, ata Shared) {
	var A Mat
	a = d.split(r, c, func() Mat { A = d.random(r, c); return A })
	ata = d.split(c, c, func() Mat { return mul(A.Transpose(), A) })
	return a, ata
}

// fix deals the mask of an operand that is opened once and used in many
// products; the dealer keeps it for fixedTriple.
func (d *Dealer) fix(r, c int) (id int, a Shared) {
	d.nfix++
	id = d.nfix
	a = d.split(r, c, func() Mat {
		A := d.random(r, c)
		d.fixed[id] = A
		return A
	})
	return id, a
}

// fixedTriple deals (B, A B) for the fixed r x k mask id and a fresh k x c B.
func (d *Dealer) fixedTriple(id, r, k, c int) (b, ab Shared) {
	var B Mat
	b = d.split(k, c, func() Mat { B = d.random(k, c); return B })
	ab = d.split(r, c, func() Mat { return mul(d.fixed[id], B) })
	return b, ab
}

// truncPair deals r uniform in [0, 2^nbits) and r >> f, entrywise.
func (d *Dealer) truncPair(rows, cols int, nbits, f uint) (r, hi Shared) {
	var R Mat
	r = d.split(rows, cols, func() Mat { R = d.bounded(rows, cols, nbits); return R })
	hi = d.split(rows, cols, func() Mat {
		H := NewMat(rows, cols)
		for i, w := range R.V {
			H.V[i] = w.Shr(f)
		}
		return H
	})
	return r, hi
}

// hadamardTriple deals entrywise (a, b, a b) for r x c operands.
func (d *Dealer) hadamardTriple(r, c int) (a, b, ab Shared) {
	var A, B Mat
	a = d.split(r, c, func() Mat { A = d.random(r, c); return A })
	b = d.split(r, c, func() Mat { B = d.random(r, c); return B })
	ab = d.split(r, c, func() Mat {
		AB := NewMat(r, c)
		for i := range AB.V {
			AB.V[i] = A.V[i].Mul(B.V[i])
		}
		return AB
	})
	return a, b, ab
}

// bitMask deals, for count values, a mask r = hi 2^(m+1) + lo with lo
// uniform in [0, 2^(m+1)) and hi in [0, 2^lambda): shares of r, of
// floor(r / 2^m), and of each of the m low bits of r (bit j in column j of
// a count x m matrix).
func (d *Dealer) bitMask(count int, m, lambda uint) (r, top, low Shared) {
	var R Mat
	r = d.split(count, 1, func() Mat { R = d.bounded(count, 1, m+1+lambda); return R })
	top = d.split(count, 1, func() Mat {
		T := NewMat(count, 1)
		for i, v := range R.V {
			T.V[i] = v.Shr(m)
		}
		return T
	})
	low = d.split(count, int(m), func() Mat {
		B := NewMat(count, int(m))
		for i, v := range R.V {
			for j := range m {
				B.Set(i, int(j), Word{0, v.Bit(j)})
			}
		}
		return B
	})
	return r, top, low
}

// modTMask deals, for count values, r uniform in [0, t) (t < 2^nbits) as
// shares mod t, as shares over Z_2^128, and its nbits bits (column j: bit j).
func (d *Dealer) modTMask(count int, t uint64, nbits uint) (modT ModT, r, low Shared) {
	var vals []uint64
	modT = d.splitModT(count, t, func() []uint64 {
		vals = make([]uint64, count)
		for i := range vals {
			vals[i] = uniformMod(d.master, t)
		}
		return vals
	})
	r = d.split(count, 1, func() Mat {
		R := NewMat(count, 1)
		for i, v := range vals {
			R.V[i] = Word{0, v}
		}
		return R
	})
	low = d.split(count, int(nbits), func() Mat {
		B := NewMat(count, int(nbits))
		for i, v := range vals {
			for j := range nbits {
				B.Set(i, int(j), Word{0, v >> j & 1})
			}
		}
		return B
	})
	return modT, r, low
}

// splitModT deals count values as n additive shares mod t (party 0's share
// travels as a count x 1 matrix of words).
func (d *Dealer) splitModT(count int, t uint64, value func() []uint64) ModT {
	s := ModT{T: t, S: make([][]uint64, d.n)}
	draw := func(r *Stream) []uint64 {
		v := make([]uint64, count)
		for j := range v {
			v[j] = uniformMod(r, t)
		}
		return v
	}
	switch {
	case d.me < 0:
		last := append([]uint64(nil), value()...)
		for i := 1; i < d.n; i++ {
			s.S[i] = draw(d.party[i])
			for j, v := range s.S[i] {
				last[j] = subMod(last[j], v, t)
			}
		}
		s.S[0] = last
		if d.sink != nil {
			m := NewMat(count, 1)
			for j, v := range last {
				m.V[j] = Word{0, v}
			}
			d.sink(m)
		}
	case d.me > 0:
		s.S[d.me] = draw(d.party[d.me])
	default:
		m, err := d.next0()
		if err == nil && (m.R != count || m.C != 1) {
			err = fmt.Errorf("dealer sent a %dx%d share where %dx1 was due", m.R, m.C, count)
		}
		v := make([]uint64, count)
		for j := range v {
			if err == nil && (m.V[j].Hi != 0 || m.V[j].Lo >= t) {
				err = fmt.Errorf("dealer sent a share mod %d out of range", t)
			}
			if err == nil {
				v[j] = m.V[j].Lo
			}
		}
		if err != nil && d.err == nil {
			d.err = err
		}
		s.S[0] = v
	}
	return s
}

// uniformMod returns a uniform integer in [0, t) by rejection.
func uniformMod(r *Stream, t uint64) uint64 {
	shift := uint(bits.LeadingZeros64(t - 1))
	for {
		if v := r.Uint64() >> shift; v < t {
			return v
		}
	}
}
