package mpc

import (
	"fmt"
	"math/bits"
)

// Verified triples and Beaver products (the replicated backend's checks
// of its entrywise products and ANDs). A product that is reshared lets
// the party that reshares it add an error of its choice; a Beaver
// product (Beaver 1991) x y = c + (x - a) b + (y - b) a + (x - a)(y - b)
// on a triple (a, b, c = a b) is local once x - a and y - b are opened,
// and openings are checked (open), so no error can enter it if the
// triple is right. The triples are made by resharing, where a party can
// spoil them, and checked in batches before any is used, by cut-and-
// choose with buckets (Furukawa, Lindell, Nof and Weinstein, EUROCRYPT
// 2017; Araki et al., S&P 2017), which needs nothing of the ring but
// equality, so it holds over Z_2^128 and over Z_2 alike:
//
//   - M = N B + C triples are made, a and b random sharings drawn from
//     the pairs' streams, c reshared (one round);
//   - the parties then open a random seed (one round: a sharing drawn from
//     the streams, so that no party knows it before the opening, and a
//     party cannot change an opening), which permutes the M triples;
//   - the first C are opened and must be products (one round);
//   - the rest fall into N buckets of B; the first triple of each is
//     checked against each of the other B - 1 by opening rho = a - x and
//     sigma = b - y and checking that c - z - sigma x - rho y - rho sigma,
//     which is e_c - e_z for the triples' errors, is zero (one round of
//     openings, one of hashes: zeroCheck). The first triples are the batch.
//
// A party that spoils t of the M triples escapes only if none is opened
// and every bucket that holds one holds B with equal errors: for t = B
// the chance is N / binom(N B, B) < B! / (B^B N^(B-1)), and larger t
// only lowers it. With B = 4 and N >= tripleBatch = 32,768 that is
// below 2^-48 a batch (a d = 50 job makes 16: matrixProducts adds its
// own checks to the job's bound). Over
// Z_2 the 128 bits of a word are 128 triples permuted alike: the
// adversary must win in every bit it spoils, and the bound holds for
// each.
const (
	bucketSize  = 4
	tripleBatch = 2 * ConvertChunk
)

// ring is the arithmetic of a sharing: over Z_2^128, or over Z_2 with a
// word holding 128 bits (xor and and).
type ring struct {
	add, sub, mul func(a, b Mat) Mat
	subW, mulW    func(a, b Word) Word
	name          string
}

func ringOf(xor bool) ring {
	if xor {
		return ring{xorMat, xorMat, andMat, Word.Xor, Word.And, "Z_2"}
	}
	return ring{add, sub, hadamard, Word.Sub, Word.Mul, "Z_2^128"}
}

// combine returns op applied to the components of x and y.
func (e *Engine) combine(op func(a, b Mat) Mat, x, y Shared) Shared {
	return e.each(x, func(i int, s Mat) Mat { return op(s, y.S[i]) })
}

// triples are verified triples a, b, c = a b (entrywise, or and over
// Z_2), columns.
type triples struct{ a, b, c Shared }

// take returns the first n triples of t and the rest, sharing t's words.
func (t triples) take(e *Engine, n int) (triples, triples) {
	var out, rest triples
	out.a, rest.a = e.split(t.a, n)
	out.b, rest.b = e.split(t.b, n)
	out.c, rest.c = e.split(t.c, n)
	return out, rest
}

// triples returns n verified triples from the pool of the ring.
func (rp *replicated) triples(e *Engine, xor bool, n int) triples {
	pool := rp.reserve(e, xor, n)
	out, rest := pool.take(e, n)
	*pool = rest
	return out
}

// reserve makes sure that the pool of the ring holds n triples, making
// at least a batch (tripleBatch, or what a test set) in one go if not:
// a circuit that knows how many products it will take reserves them
// first, so that its rounds of products do not each wait for a batch.
func (rp *replicated) reserve(e *Engine, xor bool, n int) *triples {
	pool := &rp.tri[0]
	if xor {
		pool = &rp.tri[1]
	}
	if pool.a.R < n {
		batch := rp.tbatch
		if batch == 0 {
			batch = tripleBatch
		}
		fresh := rp.makeTriples(e, xor, max(n-pool.a.R, batch))
		rp.batches++
		if pool.a.R > 0 {
			fresh = triples{e.Stack(pool.a, fresh.a), e.Stack(pool.b, fresh.b), e.Stack(pool.c, fresh.c)}
		}
		*pool = fresh
	}
	return pool
}

// makeTriples makes n verified triples (see above): five rounds.
func (rp *replicated) makeTriples(e *Engine, xor bool, n int) triples {
	const b = bucketSize
	g := ringOf(xor)
	m := n*b + b
	draw := func() Shared { return e.drawn(func(j int) Mat { return rp.prss.random(j, m, 1) }) }
	x, y := draw(), draw()
	z := rp.reshare(e, []Shared{rp.terms(e, g.mul, g.add, x, y)}, xor)[0]
	perm := rp.coinPermutation(e, m)
	x, y, z = e.gather(x, perm), e.gather(y, perm), e.gather(z, perm)
	// The first b are opened whole.
	cut := rp.openAs(e, xor, []Shared{e.split1(x, b), e.split1(y, b), e.split1(z, b)})
	prod := g.mul(cut[0], cut[1])
	for k := range prod.V {
		if prod.V[k] != cut[2].V[k] {
			e.fail(fmt.Errorf("round %d: a triple over %s opened in the check is not a product: a party spoilt the triples", e.Cost.Rounds, g.name))
			break
		}
	}
	// Bucket k is rows b + k b to b + k b + b - 1; the first is checked
	// against each other (row r below): rho = a - x_r, sigma = b - y_r.
	first := func(k int) int { return b + k*b }
	pairs := func(f func(k, p, r int)) {
		for k := range n {
			for j := 1; j < b; j++ {
				f(k, k*(b-1)+j-1, first(k)+j)
			}
		}
	}
	// each fills, per component held, one word a checked pair from the
	// component's x, y and z.
	each := func(f func(i int, out, x, y, z []Word)) Shared {
		out := Shared{R: n * (b - 1), C: 1, S: make([]Mat, 3)}
		for i := range 3 {
			if e.holds(i) {
				out.S[i] = NewMat(n*(b-1), 1)
				f(i, out.S[i].V, x.S[i].V, y.S[i].V, z.S[i].V)
			}
		}
		return out
	}
	rho := each(func(_ int, out, x, _, _ []Word) {
		pairs(func(k, p, r int) { out[p] = g.subW(x[first(k)], x[r]) })
	})
	sigma := each(func(_ int, out, _, y, _ []Word) {
		pairs(func(k, p, r int) { out[p] = g.subW(y[first(k)], y[r]) })
	})
	op := rp.openAs(e, xor, []Shared{rho, sigma})
	rv, sv := op[0].V, op[1].V
	// v = c - z_r - sigma x_r - rho y_r - rho sigma: e_c - e_z, with
	// (a, b, c) the bucket's first triple.
	v := each(func(i int, out, x, y, z []Word) {
		pairs(func(k, p, r int) {
			w := g.subW(g.subW(g.subW(z[first(k)], z[r]), g.mulW(sv[p], x[r])), g.mulW(rv[p], y[r]))
			if i == 0 {
				w = g.subW(w, g.mulW(rv[p], sv[p]))
			}
			out[p] = w
		})
	})
	rp.zeroCheck(e, g, v, "the triples over "+g.name)
	kept := make([]int, n)
	for k := range kept {
		kept[k] = first(k)
	}
	return triples{e.gather(x, kept), e.gather(y, kept), e.gather(z, kept)}
}

// split1 returns the first n rows of the column x.
func (e *Engine) split1(x Shared, n int) Shared {
	out, _ := e.split(x, n)
	return out
}

// gather returns the rows idx of the column x, in that order (local).
func (e *Engine) gather(x Shared, idx []int) Shared {
	out := Shared{R: len(idx), C: 1, S: make([]Mat, len(x.S))}
	for i, s := range x.S {
		if !e.holds(i) {
			continue
		}
		m := NewMat(len(idx), 1)
		for k, r := range idx {
			m.V[k] = s.V[r]
		}
		out.S[i] = m
	}
	return out
}

// coin opens a random seed, a sharing drawn from the pairs' streams, with
// xs in one round (no party knows the seed before it, and a party cannot
// change an opening), and returns a stream keyed by it and xs opened.
func (rp *replicated) coin(e *Engine, xs ...Shared) (*Stream, []Mat) {
	r := e.drawn(func(j int) Mat { return rp.prss.random(j, 2, 1) })
	out := rp.open(e, append([]Shared{r}, xs...))
	var seed Seed
	copy(seed[:16], out[0].V[0].AppendBytes(nil))
	copy(seed[16:], out[0].V[1].AppendBytes(nil))
	return NewStream(seed), out[1:]
}

// coinPermutation returns the permutation of m rows that a coin's stream
// draws (Fisher and Yates), one round.
func (rp *replicated) coinPermutation(e *Engine, m int) []int {
	s, _ := rp.coin(e)
	perm := make([]int, m)
	for i := range perm {
		perm[i] = i
	}
	for i := m - 1; i > 0; i-- {
		j := int(uniformMod(s, uint64(i+1)))
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

// zeroCheck checks that every entry of v is zero without opening it (what
// names the values checked, for the error), one
// round: party i sends a hash of v_i + v_(i+1), its components' sum, to
// party i + 1, which compares it with a hash of -v_(i+2), its own
// component: they agree when v is zero. Each honest party checks the sum
// of two honest parties' copies, so one deviating party cannot pass a
// nonzero v (a mismatch is a sticky error). v's entries here are
// differences of errors a deviating party chose, so nothing else is
// learnt.
func (rp *replicated) zeroCheck(e *Engine, g ring, v Shared, what string) {
	round := e.Cost.Rounds
	e.round(2)
	bad := fmt.Errorf("round %d: %s failed their check: a party spoilt them", round+1, what)
	if e.Me < 0 {
		sum := g.add(g.add(v.S[0], v.S[1]), v.S[2])
		for _, w := range sum.V {
			if w != (Word{}) {
				e.fail(bad)
				return
			}
		}
		return
	}
	me, prev, next := e.Me, (e.Me+2)%3, (e.Me+1)%3
	msg, want := make([][]Word, 3), make([]int, 3)
	msg[next] = openingHash(round, g.add(v.S[me], v.S[next]).V)
	want[prev] = 2
	in := rp.exchange(e, msg, want)
	h := openingHash(round, g.sub(NewMat(v.R, v.C), v.S[next]).V)
	if e.err == nil && (h[0] != in[prev][0] || h[1] != in[prev][1]) {
		e.fail(bad)
	}
}

// beaver returns every X Y (entrywise over Z_2^128, or X AND Y over Z_2)
// as Beaver products on verified triples: one round of openings, x - a
// and y - b for every entry.
func (rp *replicated) beaver(e *Engine, xor bool, ps []Product) []Shared {
	g := ringOf(xor)
	xs, ys := make([]Shared, len(ps)), make([]Shared, len(ps))
	for k, p := range ps {
		xs[k], ys[k] = p.X.Column(), p.Y.Column()
	}
	x, y := e.Stack(xs...), e.Stack(ys...)
	t := rp.triples(e, xor, x.R)
	op := rp.openAs(e, xor, []Shared{e.combine(g.sub, x, t.a), e.combine(g.sub, y, t.b)})
	d, f := op[0], op[1]
	z := e.each(t.c, func(i int, c Mat) Mat {
		c = g.add(g.add(c, g.mul(d, t.b.S[i])), g.mul(f, t.a.S[i]))
		if i == 0 {
			c = g.add(c, g.mul(d, f))
		}
		return c
	})
	out := make([]Shared, len(ps))
	from := 0
	for k, p := range ps {
		n := p.X.R * p.X.C
		out[k] = e.Reshape(e.Rows(z, from, n), p.X.R, p.X.C)
		from += n
	}
	return out
}

// Matrix products: a projection check. A product Z = X Y (p x q by q x r)
// is reshared, and with it a triple (A, B, C = A B) of a random p x q A
// and q x m B; once both are reshared the parties draw a public r x m V
// (coin) and check Z V = X (Y V), computing X (Y V) as a Beaver product
// on the triple: X - A and Y V - B opened, X (Y V) = C + (X - A) B + X (Y
// V - B), and Z V - X (Y V) = E_Z V - E_C for the errors of the two
// resharings, which are fixed before V is drawn. V's entries are bits:
// for a nonzero row of E_Z and any target, at most one of the two values
// of a bit whose coefficient is nonzero meets it, so each column passes
// with probability at most 1/2 and checkColumns columns with
// 2^-checkColumns, whatever E_C (no triple need be right, so none is
// sacrificed), and Z V, Y V are sums. 52 columns: a d = 50 job checks
// 1,604 products and 16 batches of triples, 2^-41 in all. The same check
// on Z^T = Y^T X^T projects Z from the left (matrixProducts takes the
// side that opens less). Three rounds after the resharing: the coin with
// X - A, Y V - B, and the zero check. The check runs before the product
// is returned, so before any opening of a value computed from it: an
// error in Z is caught before a later product could multiply it by a
// secret and a truncation's opening could show the result
// (design-components.md, "When a check must run").
const checkColumns = 52

// matrixProducts returns every X Y, reshared and checked. The check runs
// on Z = X Y, opening X - A (p q words), or on Z^T = Y^T X^T, opening
// Y^T - A (q r words): whichever factor is smaller (the covariance times
// a block of columns opens the block).
func (rp *replicated) matrixProducts(e *Engine, ps []Product) []Shared {
	const m = checkColumns
	k := len(ps)
	checked := make([]Product, k)
	flip := make([]bool, k)
	terms := make([]Shared, 2*k)
	as, bs := make([]Shared, k), make([]Shared, k)
	for n, p := range ps {
		checked[n] = p
		if flip[n] = p.Y.C < p.X.R; flip[n] {
			checked[n] = Product{e.Transpose(p.Y), e.Transpose(p.X)}
		}
		x, y := checked[n].X, checked[n].Y
		terms[n] = rp.terms(e, mul, add, p.X, p.Y)
		as[n] = e.drawn(func(j int) Mat { return rp.prss.random(j, x.R, x.C) })
		bs[n] = e.drawn(func(j int) Mat { return rp.prss.random(j, y.R, m) })
		terms[k+n] = rp.terms(e, mul, add, as[n], bs[n])
	}
	out := rp.reshare(e, terms, false)
	zs, cs := out[:k], out[k:]
	masked := make([]Shared, k)
	for n, p := range checked {
		masked[n] = e.Sub(p.X, as[n])
	}
	stream, ds := rp.coin(e, masked...)
	vs := make([]bitRows, k)
	fs := make([]Shared, k)
	for n, p := range checked {
		vs[n] = randomBitRows(stream, p.Y.C)
		fs[n] = e.each(p.Y, func(i int, y Mat) Mat { return sub(vs[n].mulBy(y), bs[n].S[i]) })
	}
	fo := rp.open(e, fs)
	checks := make([]Shared, k)
	// X (Y V) = C + (X - A) B + X (Y V - B), with X (Y V - B) local (the
	// second factor public): the Beaver product's terms, A f + d f, in one.
	for n, p := range checked {
		d, f, z := ds[n], fo[n], zs[n]
		if flip[n] {
			z = e.Transpose(z)
		}
		checks[n] = e.each(z, func(i int, z Mat) Mat {
			return sub(sub(sub(vs[n].mulBy(z), cs[n].S[i]), mul(d, bs[n].S[i])), mul(p.X.S[i], f))
		}).Column()
	}
	rp.zeroCheck(e, ringOf(false), e.Stack(checks...), "the matrix products")
	return zs
}

// bitRows is a public r x checkColumns matrix of bits, a row's in one
// uint64 (checkColumns <= 64).
type bitRows []uint64

// randomBitRows draws r rows of checkColumns uniform bits from s.
func randomBitRows(s *Stream, r int) bitRows {
	v := make(bitRows, r)
	for i := range v {
		v[i] = s.Uint64() & (1<<checkColumns - 1)
	}
	return v
}

// mulBy returns z v (z with len(v) columns): sums of z's entries.
func (v bitRows) mulBy(z Mat) Mat {
	out := NewMat(z.R, checkColumns)
	for i := range z.R {
		row := out.V[i*checkColumns : (i+1)*checkColumns]
		for k, w := range z.V[i*z.C : (i+1)*z.C] {
			for b := v[k]; b != 0; b &= b - 1 {
				c := bits.TrailingZeros64(b)
				row[c] = row[c].Add(w)
			}
		}
	}
	return out
}
