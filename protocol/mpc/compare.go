package mpc

import (
	"fmt"
	"math/bits"
)

// ModT is a vector held as n additive shares mod T (S[i] is party i's): the
// form lattigo's encryption-to-shares protocol gives a BGV plaintext in.
type ModT struct {
	T uint64
	S [][]uint64
}

func addMod(a, b, t uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 || s >= t {
		s -= t
	}
	return s
}

func subMod(a, b, t uint64) uint64 {
	if a >= b {
		return a - b
	}
	return a + (t - b)
}

// Hadamard returns every X * Y entrywise as integers (no truncation: for
// shared bits and signs), in one round.
func (e *Engine) Hadamard(ps ...Product) ([]Shared, error) {
	if err := entrywise.check(ps); err != nil {
		return nil, err
	}
	return e.be.products(e, entrywise, ps), nil
}

// cols returns columns [from, to) of x.
func (e *Engine) cols(x Shared, from, to int) Shared {
	return e.each(x, func(_ int, s Mat) Mat {
		out := NewMat(s.R, to-from)
		for i := range s.R {
			copy(out.V[i*out.C:(i+1)*out.C], s.V[i*s.C+from:i*s.C+to])
		}
		return out
	})
}

// linear returns, per party, f applied entrywise with party 0 adding the
// constant: for maps x -> a x + b with public a, b per entry.
func (e *Engine) affine(x Shared, a, b func(row, col int) Word) Shared {
	return e.each(x, func(i int, s Mat) Mat {
		out := NewMat(s.R, s.C)
		for r := range s.R {
			for c := range s.C {
				v := s.At(r, c).Mul(a(r, c))
				if i == 0 {
					v = v.Add(b(r, c))
				}
				out.Set(r, c, v)
			}
		}
		return out
	})
}

var one = Word{0, 1}

// lessThanBits returns the shared bit [c_i < r_i] per row i, for public
// m-bit c_i and r_i given by its shared bits (row i, column j: bit j):
// r > c where, at the highest bit where they differ, r has the one:
// sum_j r_j (1 - c_j) prod_{j' > j} (1 - (c_j' xor r_j')), the suffix
// products by a parallel prefix (Hillis and Steele 1986) in ceil(log2 m)
// rounds, then one round for the sum's products (Catrina and de Hoogh
// 2010, section 4, with a dealer's bits).
func (e *Engine) lessThanBits(c []Word, rb Shared) (Shared, error) {
	m := rb.C
	cbit := func(row, j int) uint64 { return c[row].Bit(uint(j)) }
	// eq[:, k] = equality of bit m-1-k (top first), gt[:, j] = r_j (1 - c_j).
	eq := e.affine(rb, func(r, k int) Word {
		if cbit(r, k) == 1 {
			return one
		}
		return one.Neg()
	}, func(r, k int) Word {
		if cbit(r, k) == 1 {
			return Word{}
		}
		return one
	})
	// Reverse the columns so that column k is bit m-1-k.
	eq = e.each(eq, func(_ int, s Mat) Mat {
		out := NewMat(s.R, s.C)
		for r := range s.R {
			for k := range s.C {
				out.Set(r, k, s.At(r, m-1-k))
			}
		}
		return out
	})
	for off := 1; off < m; off *= 2 {
		prod, err := e.Hadamard(Product{e.cols(eq, off, m), e.cols(eq, 0, m-off)})
		if err != nil {
			return Shared{}, err
		}
		eq = e.each(eq, func(i int, s Mat) Mat {
			out := NewMat(s.R, s.C)
			copy(out.V, s.V)
			p := prod[0].S[i]
			for r := range s.R {
				copy(out.V[r*s.C+off:(r+1)*s.C], p.V[r*p.C:(r+1)*p.C])
			}
			return out
		})
	}
	// suffix[:, j] = prod over bits above j = eq column m-2-j; 1 for j = m-1.
	gt := e.affine(rb, func(r, j int) Word {
		if cbit(r, j) == 1 {
			return Word{}
		}
		return one
	}, func(int, int) Word { return Word{} })
	lowGt := e.cols(gt, 0, m-1)
	suffix := e.each(eq, func(_ int, s Mat) Mat {
		out := NewMat(s.R, m-1)
		for r := range s.R {
			for j := range m - 1 {
				out.Set(r, j, s.At(r, m-2-j))
			}
		}
		return out
	})
	prod, err := e.Hadamard(Product{lowGt, suffix})
	if err != nil {
		return Shared{}, err
	}
	return e.each(gt, func(i int, g Mat) Mat {
		out := NewMat(g.R, 1)
		p := prod[0].S[i]
		for r := range g.R {
			v := g.At(r, m-1)
			for j := range m - 1 {
				v = v.Add(p.At(r, j))
			}
			out.V[r] = v
		}
		return out
	}), nil
}

// LTZ returns the shared bit [x < 0] for each entry of the column x, whose
// entries must satisfy |x| < 2^m (m + Lambda + 3 <= 128). How is the
// backend's: with the dealer a mask of m + 1 dealt bits under a
// statistical top (maskedLTZ); with the replicated backend a mask
// uniform over Z_2^128 and a comparison of its bits over Z_2 (ltz in
// boolean.go), which hides x perfectly whatever its size.
func (e *Engine) LTZ(x Shared, m uint) (Shared, error) {
	if x.C != 1 {
		return Shared{}, fmt.Errorf("LTZ of a %dx%d matrix: want a column", x.R, x.C)
	}
	if m+e.P.Lambda+3 > 128 || m < 2 {
		return Shared{}, fmt.Errorf("LTZ bound 2^%d: want 2 <= m and m + Lambda + 3 <= 128", m)
	}
	return e.be.ltz(e, x, m)
}

// maskedLTZ is LTZ with a mask r whose m + 1 low bits are shared (r below
// 2^(m + Lambda + 3), top = floor(r / 2^m), low its m low bits): component
// 0 offsets a = x + 2^m into [0, 2^(m+1)), the parties open c = a + r,
// and [x >= 0] = floor(a / 2^m) = floor(c / 2^m) - floor(r / 2^m) - [c mod
// 2^m < r mod 2^m] (Catrina and de Hoogh 2010). ceil(log2 m) + 2 rounds.
func (e *Engine) maskedLTZ(x Shared, m uint, r, top, low Shared) (Shared, error) {
	off := Pow2(m)
	masked := e.Add(e.AddPublic(x, ConstCol(x.R, off)), r)
	c := e.open(masked)[0]
	lowMask := Pow2(m).Sub(one)
	cl := make([]Word, x.R)
	for i := range cl {
		cl[i] = c.V[i].And(lowMask)
	}
	lt, err := e.lessThanBits(cl, low)
	if err != nil {
		return Shared{}, err
	}
	// ltz = 1 - (c >> m - top - lt)
	ge := e.Sub(e.Sub(e.Const(colOf(c, func(w Word) Word { return w.Shr(m) })), top), lt)
	return e.AddPublic(e.Scale(ge, -1), ConstCol(x.R, one)), nil
}

// ConstCol returns the public n x 1 column of w.
func ConstCol(n int, w Word) Mat {
	m := NewMat(n, 1)
	for i := range m.V {
		m.V[i] = w
	}
	return m
}

func colOf(c Mat, f func(Word) Word) Mat {
	m := NewMat(c.R, c.C)
	for i, w := range c.V {
		m.V[i] = f(w)
	}
	return m
}

// FromModT converts shares mod T of signed integers (x mod T) with x in
// [-floor(T/2), T - floor(T/2)) (the centred representative) into shares
// over Z_2^128 of the same integers. x.S[i] is party i's additive share
// mod T (the encryption to shares gives them; with the replicated backend
// a party not in the conversion passes zeros). The dealer's backend opens
// x + floor(T/2) + r mod T for a dealt r uniform mod T and compares with
// r's shared bits; the replicated backend moves one party's share to
// another, masked, reshares the two sums and subtracts T after a
// comparison of their sum with T. It works in chunks of ConvertChunk
// values, which bound the memory (a d = 784 sum holds 307,720 values).
func (e *Engine) FromModT(x ModT) (Shared, error) {
	if len(x.S) != e.N {
		return Shared{}, fmt.Errorf("shares of %d parties, engine of %d", len(x.S), e.N)
	}
	count := e.modTCount(x)
	if count < 0 {
		return Shared{}, fmt.Errorf("no share mod %d held here", x.T)
	}
	if count <= ConvertChunk {
		return e.be.fromModT(e, x)
	}
	var parts []Shared
	for lo := 0; lo < count; lo += ConvertChunk {
		part := ModT{T: x.T, S: make([][]uint64, len(x.S))}
		for i, s := range x.S {
			if s != nil {
				part.S[i] = s[lo:min(lo+ConvertChunk, count)]
			}
		}
		y, err := e.be.fromModT(e, part)
		if err != nil {
			return Shared{}, err
		}
		parts = append(parts, y)
	}
	return e.Stack(parts...), nil
}

// ConvertChunk is how many values FromModT converts at once.
const ConvertChunk = 1 << 14

// modTCount returns the length of the shares mod T of the parties run
// here (-1 if none is).
func (e *Engine) modTCount(x ModT) int {
	count := -1
	for i, s := range x.S {
		if e.Me < 0 || i == e.Me {
			count = len(s)
		}
	}
	return count
}

// InputModT deals count values mod t that the dealer holds (value is called
// by the dealer only: the proxy's blinding masks, negated) as shares mod t.
// The replicated backend has no dealer: its engine of all parties splits
// the values as ShareModT does, and a party's engine fails (a sticky
// error).
func (e *Engine) InputModT(count int, t uint64, value func() []uint64) ModT {
	return e.be.shareModT(e, count, t, value)
}

// AddModT returns a + b for shares mod T (local).
func (e *Engine) AddModT(a, b ModT) (ModT, error) {
	if a.T != b.T || len(a.S) != len(b.S) {
		return ModT{}, fmt.Errorf("shares mod %d and mod %d", a.T, b.T)
	}
	out := ModT{T: a.T, S: make([][]uint64, len(a.S))}
	for i := range a.S {
		if a.S[i] == nil {
			continue
		}
		if len(a.S[i]) != len(b.S[i]) {
			return ModT{}, fmt.Errorf("party %d: %d and %d values mod %d", i, len(a.S[i]), len(b.S[i]), a.T)
		}
		out.S[i] = make([]uint64, len(a.S[i]))
		for j := range a.S[i] {
			out.S[i][j] = addMod(a.S[i][j], b.S[i][j], a.T)
		}
	}
	return out, nil
}

// ShareModT splits public or input values into fresh shares mod t (tests;
// the engine of all parties only).
func (e *Engine) ShareModT(vals []uint64, t uint64) ModT {
	return e.be.shareModT(e, len(vals), t, func() []uint64 { return vals })
}
