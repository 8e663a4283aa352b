package mpc

import (
	"fmt"
)

// Shared is a matrix held as components over Z_2^128 whose sum is the
// value. With the dealer's backend (NewEngine) they are the n parties'
// additive shares, S[i] party i's; with the replicated backend
// (NewReplicatedEngine) they are three, and party i holds S[i] and
// S[i+1 mod 3]. Parties compute on the components they hold; the only
// communication is an opening, a product's resharing or a dealer's
// message, counted by the Engine. A party's engine fills only the
// components it holds.
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

// Cost counts the communication: rounds (the messages of operations in
// the same round count once) and the bytes each party sends: with the
// dealer's backend, its openings (the dealer's messages are not counted);
// with the replicated backend, the busiest party's (every party sends as
// much in every round but a conversion's first, where one party moves its
// share). Every party's engine counts the same.
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

// Engine runs a program on shares: the parties' shares all in one
// process (the shares are kept apart: no step reads a component a party
// does not hold except through a message), or one party's (Me >= 0)
// with the others over a network. How it multiplies, truncates, masks
// and opens is its backend's: a dealer's correlated randomness over a Net
// (NewEngine, NewPartyEngine), or replicated secret sharing among three
// parties over a PeerNet, with no dealer (NewReplicatedEngine,
// NewReplicatedPartyEngine). The program does not see which. The first
// error (a network or dealer failure, an inconsistent opening) sticks:
// later rounds send nothing and return zeros at once, so a program runs
// out quickly, and Err reports it. An Engine is not safe for concurrent
// use.
type Engine struct {
	N    int // parties (and components)
	Me   int // -1: every party here
	P    Params
	be   backend
	held []bool // by component: held here
	err  error
	Cost Cost
}

// A backend is how an engine's parties multiply, truncate, mask, open and
// convert (beaver.go: a dealer's correlated randomness; replicated.go:
// replicated sharing with pseudorandom secret sharing).
type backend interface {
	// open opens every x to every party, in one round.
	open(e *Engine, xs []Shared) []Mat
	// products returns the untruncated products of ps, in one round.
	products(e *Engine, k kind, ps []Product) []Shared
	// gram returns the untruncated x^T x.
	gram(e *Engine, x Shared) Shared
	// fix prepares x for products on its left; mulFixed returns the
	// untruncated x y.
	fix(e *Engine, x Shared) *Fixed
	mulFixed(e *Engine, x *Fixed, y Shared) Shared
	// truncMask returns a truncation's mask r (r x c, each entry's sum
	// below 2^(L + Lambda + 2)), the shares of the floor of its parts by
	// 2^s, and the bias: the opened c = x + 2^L + r gives x >> s =
	// c >> s - hi - 2^(L - s) - bias, off by less than two units.
	truncMask(e *Engine, r, c int, s uint) (mask, hi Shared, bias Word)
	// ltz returns the shared bits [x_i < 0] of the column x, |x_i| < 2^m.
	ltz(e *Engine, x Shared, m uint) (Shared, error)
	// fromModT converts one chunk of shares mod T (see FromModT).
	fromModT(e *Engine, x ModT) (Shared, error)
	// share splits an input of the test harness (the engine of all parties).
	share(e *Engine, m Mat) Shared
	// shareModT splits count values mod t that value returns (called
	// only where they are dealt).
	shareModT(e *Engine, count int, t uint64, value func() []uint64) ModT
	err() error
}

// Err returns the first failure of the network, the dealer or a check.
func (e *Engine) Err() error {
	if e.err != nil {
		return e.err
	}
	return e.be.err()
}

// fail records the first error.
func (e *Engine) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// holds reports whether component i is held here.
func (e *Engine) holds(i int) bool { return e.held[i] }

// open runs one round in which the parties open every x.
func (e *Engine) open(xs ...Shared) []Mat { return e.be.open(e, xs) }

// words counts the entries of xs.
func words(xs []Shared) int {
	n := 0
	for _, x := range xs {
		n += x.R * x.C
	}
	return n
}

// Share splits m into fresh shares: an input of the test harness (the
// engine of all parties only).
func (e *Engine) Share(m Mat) Shared { return e.be.share(e, m) }

// Reveal opens x to every party. The solver reveals only its output,
// and only to the user; tests use it to measure.
func (e *Engine) Reveal(x Shared) Mat { return e.open(x)[0] }

// each applies f to every component held here.
func (e *Engine) each(x Shared, f func(i int, s Mat) Mat) Shared {
	out := Shared{R: x.R, C: x.C, S: make([]Mat, e.N)}
	for i, s := range x.S {
		if !e.holds(i) {
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

// AddPublic returns x + m for a public m (component 0 takes it).
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

// kind is a bilinear map the backends multiply by.
type kind int

const (
	matrix    kind = iota // X Y
	entrywise             // X * Y
)

func (k kind) apply(a, b Mat) Mat {
	if k == entrywise {
		return hadamard(a, b)
	}
	return mul(a, b)
}

func (k kind) check(ps []Product) error {
	for n, p := range ps {
		switch {
		case k == matrix && p.X.C != p.Y.R:
			return fmt.Errorf("product %d: %dx%d by %dx%d", n, p.X.R, p.X.C, p.Y.R, p.Y.C)
		case k == entrywise && (p.X.R != p.Y.R || p.X.C != p.Y.C):
			return fmt.Errorf("entrywise product %d: %dx%d by %dx%d", n, p.X.R, p.X.C, p.Y.R, p.Y.C)
		}
	}
	return nil
}

// MatMul returns every X Y, truncated by F + extra bits (extra divides
// by 2^extra), in two rounds whatever the number of products: the
// products' round (Beaver's openings of X - A and Y - B, or the
// resharing) and the truncations'.
func (e *Engine) MatMul(extra uint, ps ...Product) ([]Shared, error) {
	if err := matrix.check(ps); err != nil {
		return nil, err
	}
	return e.Trunc(e.P.F+extra, e.be.products(e, matrix, ps)...), nil
}

// Gram returns x^T x truncated by F, in two rounds.
func (e *Engine) Gram(x Shared) Shared {
	return e.Trunc(e.P.F, e.be.gram(e, x))[0]
}

// Fixed is an operand for many products on its left (a covariance in
// every iteration). With the dealer's backend it is opened once, masked
// (the mask's reuse is safe because the masked value X - A is opened only
// once: SecureML's precomputed masks); the replicated backend needs no
// preparation.
type Fixed struct {
	x    Shared // replicated
	id   int    // dealer's
	a    Shared
	open Mat
	r, c int
}

// Fix prepares x for later MulFixed calls (one round with the dealer's
// backend, none with the replicated one).
func (e *Engine) Fix(x Shared) *Fixed {
	f := e.be.fix(e, x)
	f.r, f.c = x.R, x.C
	return f
}

// MulFixed returns X y truncated by F for the fixed X, in two rounds.
func (e *Engine) MulFixed(x *Fixed, y Shared) (Shared, error) {
	if x.c != y.R {
		return Shared{}, fmt.Errorf("fixed product: %dx%d by %dx%d", x.r, x.c, y.R, y.C)
	}
	return e.Trunc(e.P.F, e.be.mulFixed(e, x, y))[0], nil
}

// Trunc divides every x by 2^s (s <= F + a few bits), off by less than
// two units (one with the dealer's backend), in one round: component 0
// offsets x by 2^L into [0, 2^(L+1)), the parties open c = x + 2^L + r
// for a mask r of L + Lambda bits (dealt, or the sum of three drawn by
// pairs of parties), and the result is c >> s - r >> s - 2^(L-s) (r >> s
// per part, and a bias for the parts' carries). No wrap: L + Lambda + 2
// <= 128.
func (e *Engine) Trunc(s uint, xs ...Shared) []Shared {
	shifts := make([]uint, len(xs))
	for k := range shifts {
		shifts[k] = s
	}
	return e.TruncEach(shifts, xs...)
}
