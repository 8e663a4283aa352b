package mpc

import (
	"errors"
	"fmt"
)

// Shared is a matrix held as n additive shares over Z_2^128: S[i] is party
// i's share and the value is their sum. Parties compute on their own share;
// the only communication is an opening (every party sends its share of a
// masked value to every other), counted by the Engine.
type Shared struct {
	R, C int
	S    []Mat
}

// Params are the fixed-point parameters. F fractional bits; every value
// that is truncated must lie in (-2^L, 2^L) before truncation (products
// carry 2F fractional bits), and the truncation's masks have L + Lambda
// bits, so an opened masked value is within statistical distance
// 2^(1 - Lambda) of one independent of the value (Catrina and Saxena
// 2010; Mohassel and Zhang, SecureML 2017, for matrices). L + Lambda + 1
// must stay below 128, where the masked value cannot wrap.
type Params struct {
	F, L, Lambda uint
}

// DefaultParams: 32 fractional bits, values below 2^86 before truncation
// (2^22 after a product's truncation), 40 bits of statistical hiding.
var DefaultParams = Params{F: 32, L: 86, Lambda: 40}

// Validate checks the bounds above.
func (p Params) Validate() error {
	if p.F == 0 || 2*p.F >= p.L || p.L+p.Lambda+1 >= 128 {
		return fmt.Errorf("fixed point F %d L %d Lambda %d: want 0 < 2F < L and L + Lambda + 1 < 128", p.F, p.L, p.Lambda)
	}
	if p.Lambda < 40 {
		return fmt.Errorf("statistical hiding of %d bits: want at least 40", p.Lambda)
	}
	return nil
}

// Cost counts the communication: rounds of openings (openings sent in the
// same round count once) and the bytes each party sends.
type Cost struct {
	Rounds        int
	BytesPerParty int64
}

// Net carries a party's openings: Exchange sends the party's share of a
// round's masked values to every other party and returns the sum of all
// parties' shares (mod 2^128).
type Net interface {
	Exchange(mine []Word) ([]Word, error)
}

// Engine runs the parties' shares: all n of them in one process (the
// shares are kept apart: no step reads another party's share except
// through an opening), or one party's (Me >= 0) with the others over a
// Net. Its dealer is the whole dealer in the first case and the party's
// view of it in the second. The first error (a Net or dealer failure)
// sticks: later openings return zeros at once, so a program runs out
// quickly, and Err reports it.
type Engine struct {
	N      int
	Me     int // -1: every party here
	P      Params
	dealer *Dealer
	net    Net
	err    error
	Cost   Cost
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
	return &Engine{N: n, Me: -1, P: p, dealer: d}, nil
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
	return &Engine{N: n, Me: me, P: p, dealer: src, net: net}, nil
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
	e.Me, e.net = 0, zeroNet{}
	return e, nil
}

// zeroNet opens every value as zero.
type zeroNet struct{}

func (zeroNet) Exchange(mine []Word) ([]Word, error) { return make([]Word, len(mine)), nil }

// Err returns the first failure of the net or the dealer.
func (e *Engine) Err() error {
	if e.err != nil {
		return e.err
	}
	return e.dealer.Err()
}

// open runs one round in which the parties open every x: each party sends
// its shares to the n - 1 others and all sum them.
func (e *Engine) open(xs ...Shared) []Mat {
	out := make([]Mat, len(xs))
	words := 0
	for _, x := range xs {
		words += x.R * x.C
	}
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
		if sum, err = e.net.Exchange(mine); err == nil && len(sum) != words {
			err = fmt.Errorf("round %d: %d words opened, %d sent", e.Cost.Rounds, len(sum), words)
		}
		if err != nil {
			e.err = err
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

// Share splits m into fresh shares: an input held by the dealer (tests;
// the engine of all parties only).
func (e *Engine) Share(m Mat) Shared {
	return e.dealer.split(m.R, m.C, func() Mat { return m })
}

// Reveal opens x to every party. The solver reveals only its output,
// and only to the user; tests use it to measure.
func (e *Engine) Reveal(x Shared) Mat { return e.open(x)[0] }

// each applies f to every share held here (all of them, or the party's).
func (e *Engine) each(x Shared, f func(i int, s Mat) Mat) Shared {
	out := Shared{R: x.R, C: x.C, S: make([]Mat, e.N)}
	for i, s := range x.S {
		if e.Me >= 0 && i != e.Me {
			continue
		}
		out.S[i] = f(i, s)
		out.R, out.C = out.S[i].R, out.S[i].C
	}
	return out
}

// Add returns x + y.
func (e *Engine) Add(x, y Shared) Shared {
	return e.each(x, func(i int, s Mat) Mat { return add(s, y.S[i]) })
}

// Sub returns x - y.
func (e *Engine) Sub(x, y Shared) Shared {
	return e.each(x, func(i int, s Mat) Mat { return sub(s, y.S[i]) })
}

// AddPublic returns x + m for a public m (party 0 adds it).
func (e *Engine) AddPublic(x Shared, m Mat) Shared {
	return e.each(x, func(i int, s Mat) Mat {
		if i == 0 {
			return add(s, m)
		}
		return s
	})
}

// Scale returns k x for a public integer k (no truncation).
func (e *Engine) Scale(x Shared, k int64) Shared {
	w := FromInt64(k)
	return e.each(x, func(_ int, s Mat) Mat { return scale(s, w) })
}

// Transpose returns x^T (local).
func (e *Engine) Transpose(x Shared) Shared {
	return e.each(x, func(_ int, s Mat) Mat { return s.Transpose() })
}

// Product is one factor pair of a round of multiplications.
type Product struct{ X, Y Shared }

// MatMul returns every X Y, truncated by F + extra bits (extra divides
// by 2^extra), in two rounds whatever the number of products: the
// Beaver openings of X - A and Y - B, then the truncations.
func (e *Engine) MatMul(extra uint, ps ...Product) ([]Shared, error) {
	var opens []Shared
	type tr struct{ a, b, ab Shared }
	trs := make([]tr, len(ps))
	for k, p := range ps {
		if p.X.C != p.Y.R {
			return nil, fmt.Errorf("product %d: %dx%d by %dx%d", k, p.X.R, p.X.C, p.Y.R, p.Y.C)
		}
		a, b, ab := e.dealer.triple(p.X.R, p.X.C, p.Y.C)
		trs[k] = tr{a, b, ab}
		opens = append(opens, e.Sub(p.X, a), e.Sub(p.Y, b))
	}
	opened := e.open(opens...)
	raw := make([]Shared, len(ps))
	for k := range ps {
		E, F := opened[2*k], opened[2*k+1]
		t := trs[k]
		raw[k] = e.each(t.ab, func(i int, ab Mat) Mat {
			z := add(ab, add(mul(E, t.b.S[i]), mul(t.a.S[i], F)))
			if i == 0 {
				z = add(z, mul(E, F))
			}
			return z
		})
	}
	return e.Trunc(e.P.F+extra, raw...), nil
}

// Gram returns x^T x truncated by F, in two rounds (x - A opened once for
// both factors).
func (e *Engine) Gram(x Shared) Shared {
	a, ata := e.dealer.gramPair(x.R, x.C)
	E := e.open(e.Sub(x, a))[0]
	Et := E.Transpose()
	raw := e.each(ata, func(i int, z Mat) Mat {
		at := a.S[i].Transpose()
		z = add(z, add(mul(Et, a.S[i]), mul(at, E)))
		if i == 0 {
			z = add(z, mul(Et, E))
		}
		return z
	})
	return e.Trunc(e.P.F, raw)[0]
}

// Fixed is an operand opened once, masked, for many products on its left
// (a covariance in every iteration): the mask's reuse is safe because the
// masked value X - A is opened only once (SecureML's precomputed masks).
type Fixed struct {
	id   int
	a    Shared
	open Mat
}

// Fix opens x - A for later MulFixed calls (one round).
func (e *Engine) Fix(x Shared) *Fixed {
	id, a := e.dealer.fix(x.R, x.C)
	return &Fixed{id: id, a: a, open: e.open(e.Sub(x, a))[0]}
}

// MulFixed returns X y truncated by F for the fixed X, in two rounds.
func (e *Engine) MulFixed(x *Fixed, y Shared) (Shared, error) {
	if x.open.C != y.R {
		return Shared{}, fmt.Errorf("fixed product: %dx%d by %dx%d", x.open.R, x.open.C, y.R, y.C)
	}
	b, ab := e.dealer.fixedTriple(x.id, x.open.R, x.open.C, y.C)
	F := e.open(e.Sub(y, b))[0]
	raw := e.each(ab, func(i int, z Mat) Mat {
		z = add(z, add(mul(x.open, b.S[i]), mul(x.a.S[i], F)))
		if i == 0 {
			z = add(z, mul(x.open, F))
		}
		return z
	})
	return e.Trunc(e.P.F, raw)[0], nil
}

// Trunc divides every x by 2^s (s <= F + a few bits), rounding down or
// up by one unit, in one round: party 0 offsets x by 2^L into [0, 2^(L+1)),
// the parties open c = x + 2^L + r for a dealt r < 2^(L+Lambda), and the
// result is c >> s - r >> s - 2^(L-s). No wrap: L + Lambda + 1 < 128.
func (e *Engine) Trunc(s uint, xs ...Shared) []Shared {
	shifts := make([]uint, len(xs))
	for k := range shifts {
		shifts[k] = s
	}
	return e.TruncEach(shifts, xs...)
}
