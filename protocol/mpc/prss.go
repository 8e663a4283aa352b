package mpc

import (
	"fmt"
	"io"
)

// ReplicatedKeys are one party's two keys for pseudorandom secret sharing
// among three parties 0, 1, 2 (Cramer, Damgard and Ishai, TCC 2005, as
// Araki et al. use it, CCS 2016): key K_j keys the stream of component j,
// which parties j - 1 and j (mod 3) hold and draw alike. Party i holds
// components i and i + 1, so:
//
//	Prev = K_i,     shared with party i - 1 (mod 3): party i-1's Next
//	Next = K_(i+1), shared with party i + 1 (mod 3): party i+1's Prev
//
// Each key must be known to exactly its two parties and be uniform (for
// example derived from their authenticated channel, with a label naming
// the job and the pair); a party that learnt a third key would see the
// components it does not hold.
type ReplicatedKeys struct {
	Prev, Next Seed
}

// NewReplicatedKeys draws K_0, K_1, K_2 from rnd (crypto/rand outside
// tests) and returns each party's pair: for a simulator that runs the
// three parties in one process, or a test.
func NewReplicatedKeys(rnd io.Reader) ([3]ReplicatedKeys, error) {
	var k [3]Seed
	for j := range k {
		if _, err := io.ReadFull(rnd, k[j][:]); err != nil {
			return [3]ReplicatedKeys{}, fmt.Errorf("replicated key %d: %w", j, err)
		}
	}
	var out [3]ReplicatedKeys
	for i := range out {
		out[i] = ReplicatedKeys{Prev: k[i], Next: k[(i+1)%3]}
	}
	return out, nil
}

// prss holds the streams of the components' keys held here (nil where
// not held). Both holders of a component make the same draws from its
// stream in the same order: every draw is a function of the program's
// public shapes.
type prss [3]*Stream

// random draws an r x c matrix of uniform words from component j's stream.
func (p prss) random(j, r, c int) Mat { return randomMat(p[j], r, c) }

// bounded draws an r x c matrix of uniform integers below 2^nbits.
func (p prss) bounded(j, r, c int, nbits uint) Mat { return boundedMat(p[j], r, c, nbits) }

// bits draws n uniform bits (as words 0 and 1) from component j's stream,
// 64 to a draw.
func (p prss) bits(j, n int) Mat {
	m := NewMat(n, 1)
	var w uint64
	for i := range n {
		if i%64 == 0 {
			w = p[j].Uint64()
		}
		m.V[i] = Word{0, w & 1}
		w >>= 1
	}
	return m
}

// zero returns party i's term of a fresh sharing of zero, for every party
// i run here: alpha_i = F_(i+1) - F_i, where F_j is the next r x c draw
// from component j's stream (party i holds both keys; the three terms
// sum to zero, and the term party i sends is masked by F_(i+1), which
// its receiver, party i - 1, does not hold); over Z_2 (xor set) F_(i+1)
// xor F_i.
func (p prss) zero(e *Engine, r, c int, xor bool) []Mat {
	var f [3]Mat
	for j := range f {
		if p[j] != nil {
			f[j] = p.random(j, r, c)
		}
	}
	combine := ringOf(xor).sub
	out := make([]Mat, 3)
	for i := range out {
		if e.runs(i) {
			out[i] = combine(f[(i+1)%3], f[i])
		}
	}
	return out
}

// single returns, for the draws of every component held here, the
// sharings B_j whose component j is draw(j) and whose others are zero,
// and the sharing whose component j is draw(j): both holders of
// component j call draw(j) once, in step.
func (e *Engine) single(draw func(j int) Mat) (parts [3]Shared, all Shared) {
	all = e.drawn(draw)
	for j := range parts {
		parts[j] = Shared{R: all.R, C: all.C, S: make([]Mat, 3)}
		for i := range 3 {
			switch {
			case !e.holds(i):
			case i == j:
				parts[j].S[i] = all.S[j]
			default:
				parts[j].S[i] = NewMat(all.R, all.C)
			}
		}
	}
	return parts, all
}

// drawn returns the sharing whose component j is draw(j), for the
// components held here (both holders of component j call draw(j) once,
// in step): a random sharing when the draws are uniform.
func (e *Engine) drawn(draw func(j int) Mat) Shared {
	all := Shared{S: make([]Mat, 3)}
	for j := range 3 {
		if e.holds(j) {
			all.S[j] = draw(j)
			all.R, all.C = all.S[j].R, all.S[j].C
		}
	}
	return all
}

func boundedMat(r *Stream, rows, cols int, nbits uint) Mat {
	m := NewMat(rows, cols)
	for i := range m.V {
		w := word(r)
		if nbits < 128 {
			w = w.Shl(128 - nbits).Shr(128 - nbits)
		}
		m.V[i] = w
	}
	return m
}
