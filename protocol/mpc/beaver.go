package mpc

import (
	"errors"
	"fmt"
	"math/bits"
)

// beaver is the dealer's backend: n >= 2 parties hold additive shares,
// multiply with the dealer's triples (Beaver 1991), truncate and compare
// with its masks, and open over a Net by sending their shares to every
// other party. The dealer must not collude with any party (Dealer).
type beaver struct {
	dealer *Dealer
	net    Net
}

// NewEngine returns an engine running all n >= 2 parties with dealer d.
func NewEngine(n int, p Params, d *Dealer) (*Engine, error) {
	if n < 2 {
		return nil, errors.New("secret sharing needs at least 2 parties")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if d == nil || d.n != n || d.me >= 0 {
		return nil, errors.New("the engine needs the dealer of its n parties")
	}
	return &Engine{N: n, Me: -1, P: p, be: &beaver{dealer: d}, held: heldBy(n, -1, 1)}, nil
}

// NewPartyEngine returns party me's engine: its dealer view src
// (NewPartySource) and its Net.
func NewPartyEngine(n, me int, p Params, src *Dealer, net Net) (*Engine, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if src == nil || src.n != n || src.me != me || net == nil {
		return nil, fmt.Errorf("party %d's engine needs its dealer view and a net", me)
	}
	return &Engine{N: n, Me: me, P: p, be: &beaver{dealer: src, net: net}, held: heldBy(n, me, 1)}, nil
}

// NewDealerEngine returns the engine the dealer runs a program on to make
// party 0's corrections: the whole dealer as its source (every share is
// dealt, party 0's go to the sink), party 0's arithmetic only, and openings
// that return zeros (the dealer sees no opened value, and the program's
// control flow does not depend on one).
func NewDealerEngine(n int, p Params, d *Dealer) (*Engine, error) {
	e, err := NewEngine(n, p, d)
	if err != nil {
		return nil, err
	}
	e.Me, e.held = 0, heldBy(n, 0, 1)
	e.be.(*beaver).net = zeroNet{}
	return e, nil
}

// heldBy returns which of n components party me holds when each party
// holds per consecutive ones from its own (all for me < 0).
func heldBy(n, me, per int) []bool {
	h := make([]bool, n)
	for i := range h {
		h[i] = me < 0
	}
	for k := 0; me >= 0 && k < per; k++ {
		h[(me+k)%n] = true
	}
	return h
}

// zeroNet opens every value as zero.
type zeroNet struct{}

func (zeroNet) Exchange(mine []Word) ([]Word, error) { return make([]Word, len(mine)), nil }

func (b *beaver) err() error { return b.dealer.Err() }

// open: each party sends its shares to the n - 1 others and all sum them.
func (b *beaver) open(e *Engine, xs []Shared) []Mat {
	out := make([]Mat, len(xs))
	words := words(xs)
	e.Cost.Rounds++
	e.Cost.BytesPerParty += int64(words) * 16 * int64(e.N-1)
	if e.Me < 0 {
		for k, x := range xs {
			v := x.S[0]
			for i := 1; i < e.N; i++ {
				v = add(v, x.S[i])
			}
			out[k] = v
		}
		return out
	}
	mine := make([]Word, 0, words)
	for _, x := range xs {
		mine = append(mine, x.S[e.Me].V...)
	}
	var sum []Word
	if e.Err() == nil {
		var err error
		if sum, err = b.net.Exchange(mine); err == nil && len(sum) != words {
			err = fmt.Errorf("round %d: %d words opened, %d sent", e.Cost.Rounds, len(sum), words)
		}
		if err != nil {
			e.fail(err)
		}
	}
	if e.err != nil {
		sum = make([]Word, words)
	}
	for k, x := range xs {
		out[k] = Mat{R: x.R, C: x.C, V: sum[:x.R*x.C]}
		sum = sum[x.R*x.C:]
	}
	return out
}

// products: open E = X - A and F = Y - B for a dealt triple (A, B, A B);
// then X Y = A B + E B + A F + E F (party 0 adds E F).
func (b *beaver) products(e *Engine, k kind, ps []Product) []Shared {
	var opens []Shared
	type tr struct{ a, b, ab Shared }
	trs := make([]tr, len(ps))
	for n, p := range ps {
		var t tr
		if k == entrywise {
			t.a, t.b, t.ab = b.dealer.hadamardTriple(p.X.R, p.X.C)
		} else {
			t.a, t.b, t.ab = b.dealer.triple(p.X.R, p.X.C, p.Y.C)
		}
		trs[n] = t
		opens = append(opens, e.Sub(p.X, t.a), e.Sub(p.Y, t.b))
	}
	opened := e.open(opens...)
	raw := make([]Shared, len(ps))
	for n := range ps {
		E, F := opened[2*n], opened[2*n+1]
		t := trs[n]
		raw[n] = e.each(t.ab, func(i int, ab Mat) Mat {
			z := add(ab, add(k.apply(E, t.b.S[i]), k.apply(t.a.S[i], F)))
			if i == 0 {
				z = add(z, k.apply(E, F))
			}
			return z
		})
	}
	return raw
}

// gram opens x - A once for both factors of a dealt pair (A, A^T A).
func (b *beaver) gram(e *Engine, x Shared) Shared {
	a, ata := b.dealer.gramPair(x.R, x.C)
	E := e.open(e.Sub(x, a))[0]
	Et := E.Transpose()
	return e.each(ata, func(i int, z Mat) Mat {
		at := a.S[i].Transpose()
		z = add(z, add(mul(Et, a.S[i]), mul(at, E)))
		if i == 0 {
			z = add(z, mul(Et, E))
		}
		return z
	})
}

// fix opens x - A for a dealt mask A the dealer keeps for fixedTriple.
func (b *beaver) fix(e *Engine, x Shared) *Fixed {
	id, a := b.dealer.fix(x.R, x.C)
	return &Fixed{id: id, a: a, open: e.open(e.Sub(x, a))[0]}
}

func (b *beaver) mulFixed(e *Engine, x *Fixed, y Shared) Shared {
	bm, ab := b.dealer.fixedTriple(x.id, x.open.R, x.open.C, y.C)
	F := e.open(e.Sub(y, bm))[0]
	return e.each(ab, func(i int, z Mat) Mat {
		z = add(z, add(mul(x.open, bm.S[i]), mul(x.a.S[i], F)))
		if i == 0 {
			z = add(z, mul(x.open, F))
		}
		return z
	})
}

// truncMask is a dealt pair (r, r >> s): one rounding carry, no bias.
func (b *beaver) truncMask(e *Engine, rows, cols int, s uint) (Shared, Shared, Word) {
	r, hi := b.dealer.truncPair(rows, cols, e.P.L+e.P.Lambda, s)
	return r, hi, Word{}
}

// ltz compares with a dealt mask (maskedLTZ).
func (b *beaver) ltz(e *Engine, x Shared, m uint) (Shared, error) {
	r, top, low := b.dealer.bitMask(x.R, m, e.P.Lambda)
	return e.maskedLTZ(x, m, r, top, low)
}

func (b *beaver) share(e *Engine, m Mat) Shared {
	return b.dealer.split(m.R, m.C, func() Mat { return m })
}

func (b *beaver) shareModT(e *Engine, count int, t uint64, value func() []uint64) ModT {
	return b.dealer.splitModT(count, t, value)
}

// fromModT: party 0 offsets x by H = floor(T/2) into [0, T); the parties
// open z = x + H + r mod T for a dealt r uniform mod T (perfectly hiding),
// and x + H = z - r + T [z < r] over the integers: ceil(log2 nbits) + 2
// rounds for T of nbits bits.
func (b *beaver) fromModT(e *Engine, x ModT) (Shared, error) {
	t := x.T
	nbits := uint(bits.Len64(t))
	h := t / 2
	count := e.modTCount(x)
	mt, r, low := b.dealer.modTMask(count, t, nbits)
	// Open z = x + H + r mod T: each party's share mod T, summed over
	// Z_2^128 (no wrap for n < 2^60) and reduced.
	sh := Shared{R: count, C: 1, S: make([]Mat, e.N)}
	for i := range e.N {
		if !e.holds(i) {
			continue
		}
		m := NewMat(count, 1)
		for j := range count {
			v := addMod(x.S[i][j], mt.S[i][j], t)
			if i == 0 {
				v = addMod(v, h, t)
			}
			m.V[j] = Word{0, v}
		}
		sh.S[i] = m
	}
	opened := e.open(sh)[0]
	z := make([]uint64, count)
	for j, w := range opened.V {
		z[j] = bits.Rem64(w.Hi, w.Lo, t)
	}
	zw := make([]Word, count)
	for j, v := range z {
		zw[j] = Word{0, v}
	}
	lt, err := e.lessThanBits(zw, low)
	if err != nil {
		return Shared{}, err
	}
	// x = z - H - r + T lt
	zc := NewMat(count, 1)
	for j, v := range z {
		zc.V[j] = Word{0, v}.Sub(Word{0, h})
	}
	return e.Add(e.Sub(e.Const(zc), r), e.Scale(lt, int64(t))), nil
}
