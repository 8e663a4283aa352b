package mpc

import "fmt"

// An oblivious choice among candidates computed side by side: which one
// is taken depends on shared bits, never on the control flow, so every
// candidate is computed whatever the data (each in the same rounds as the
// others) and the choice is a public-control-flow weighted sum. Built on
// Hadamard products only.

// FirstTrue returns the one-hot column of the first 1 of the column b of
// shared bits (0 or 1): e_j = b_j prod_{i<j} (1 - b_i), all zeros when no
// bit is set. The prefix products of 1 - b are a parallel prefix (Hillis
// and Steele 1986): ceil(log2 len(b)) rounds.
func (e *Engine) FirstTrue(b Shared) (Shared, error) {
	if b.C != 1 {
		return Shared{}, fmt.Errorf("first of a %dx%d matrix: want a column of bits", b.R, b.C)
	}
	n := b.R
	// u_j = prod_{i<=j} (1 - b_i), after the prefix rounds.
	u := e.AddPublic(e.Scale(b, -1), ConstCol(n, one))
	for step := 1; step < n; step *= 2 {
		hi := e.Rows(u, step, n-step)
		out, err := e.Hadamard(Product{hi, e.Rows(u, 0, n-step)})
		if err != nil {
			return Shared{}, err
		}
		u = e.Stack(e.Rows(u, 0, step), out[0])
	}
	// e_j = u_{j-1} - u_j with u_{-1} = 1 (local).
	before := e.Stack(e.Const(ConstCol(1, one)), e.Rows(u, 0, n-1))
	return e.Sub(before, u), nil
}

// Gate returns every xs[j] times the shared bit bits[j] (a column of
// len(xs) bits), in one round of products: a zero bit zeroes its operand
// exactly (the products are not truncated).
func (e *Engine) Gate(bits Shared, xs ...Shared) ([]Shared, error) {
	if bits.C != 1 || bits.R != len(xs) {
		return nil, fmt.Errorf("gate: %dx%d bits for %d operands, want a column of %d", bits.R, bits.C, len(xs), len(xs))
	}
	scalars := make([]Shared, len(xs))
	for j := range xs {
		scalars[j] = e.Rows(bits, j, 1)
	}
	return e.scaleEach(scalars, xs), nil
}

// ScaleBy returns s x for a shared 1 x 1 s, as integers (no truncation),
// in one round.
func (e *Engine) ScaleBy(s, x Shared) (Shared, error) {
	if s.R != 1 || s.C != 1 {
		return Shared{}, fmt.Errorf("scale by a %dx%d matrix, want 1x1", s.R, s.C)
	}
	return e.scaleEach([]Shared{s}, []Shared{x})[0], nil
}

// SquaredNorms returns the column of every ||xs[j]||_F^2, the sum of its
// entries' squares as integers (no truncation), in one round: the
// diagonal of W W^T for the operands read as the rows of W (all of one
// size), one matrix product, which the replicated backend checks by
// projection (about a fifth of the words of one Beaver product an entry).
func (e *Engine) SquaredNorms(xs ...Shared) (Shared, error) {
	if len(xs) == 0 {
		return Shared{}, fmt.Errorf("squared norms of no operand")
	}
	rows := make([]Shared, len(xs))
	for j, x := range xs {
		if x.R*x.C != xs[0].R*xs[0].C {
			return Shared{}, fmt.Errorf("squared norms: operand %d is %dx%d, operand 0 %dx%d", j, x.R, x.C, xs[0].R, xs[0].C)
		}
		rows[j] = x.Column()
	}
	w := e.Reshape(e.Stack(rows...), len(xs), xs[0].R*xs[0].C)
	return e.Diagonal(e.be.products(e, matrix, []Product{{w, e.Transpose(w)}})[0]), nil
}

// scaleEach returns every scalars[j] xs[j] in one round of products: each
// the matrix product of the 1 x 1 scalar and the operand as one row, so
// that the replicated backend checks it by projection (a few dozen words
// besides the product's own) rather than as one Beaver product an entry
// (twelve words an entry).
func (e *Engine) scaleEach(scalars, xs []Shared) []Shared {
	ps := make([]Product, len(xs))
	for j, x := range xs {
		ps[j] = Product{scalars[j], e.Reshape(x, 1, x.R*x.C)}
	}
	out := e.be.products(e, matrix, ps)
	for j, x := range xs {
		out[j] = e.Reshape(out[j], x.R, x.C)
	}
	return out
}

// Choose returns sum_j onehot[j] xs[j] for the one-hot column onehot
// (FirstTrue) and operands of one shape: the chosen one, or zero when the
// column is all zeros. One round.
func (e *Engine) Choose(onehot Shared, xs ...Shared) (Shared, error) {
	if len(xs) == 0 {
		return Shared{}, fmt.Errorf("choose among no operand")
	}
	for j, x := range xs {
		if x.R != xs[0].R || x.C != xs[0].C {
			return Shared{}, fmt.Errorf("choose: operand %d is %dx%d, operand 0 %dx%d", j, x.R, x.C, xs[0].R, xs[0].C)
		}
	}
	gated, err := e.Gate(onehot, xs...)
	if err != nil {
		return Shared{}, err
	}
	sum := gated[0]
	for _, g := range gated[1:] {
		sum = e.Add(sum, g)
	}
	return sum, nil
}
