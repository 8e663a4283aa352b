package mpc

// Replicate returns the column x (r x 1) repeated c times (local).
func (e *Engine) Replicate(x Shared, c int) Shared {
	return e.each(x, func(_ int, s Mat) Mat {
		out := NewMat(s.R, c)
		for i := range s.R {
			for j := range c {
				out.Set(i, j, s.V[i])
			}
		}
		return out
	})
}

// Rows returns rows [from, from+count) of x (local).
func (e *Engine) Rows(x Shared, from, count int) Shared {
	return e.each(x, func(_ int, s Mat) Mat {
		return Mat{R: count, C: s.C, V: append([]Word(nil), s.V[from*s.C:(from+count)*s.C]...)}
	})
}

// Stack returns the columns xs one under the other (local).
func (e *Engine) Stack(xs ...Shared) Shared {
	rows := 0
	for _, x := range xs {
		rows += x.R
	}
	out := Shared{R: rows, C: 1, S: make([]Mat, e.N)}
	for i := range e.N {
		if !e.holds(i) {
			continue
		}
		m := NewMat(rows, 1)
		m.V = m.V[:0]
		for _, x := range xs {
			m.V = append(m.V, x.S[i].V...)
		}
		out.S[i] = m
	}
	return out
}

// Column returns x read row-major as one column (local).
func (x Shared) Column() Shared {
	out := Shared{R: x.R * x.C, C: 1, S: make([]Mat, len(x.S))}
	for i, s := range x.S {
		if s.V != nil {
			out.S[i] = Mat{R: s.R * s.C, C: 1, V: s.V}
		}
	}
	return out
}

// Symmetric expands a column holding an upper triangle (index(i, j) for
// i <= j gives its row) into the d x d symmetric matrix (local).
func (e *Engine) Symmetric(x Shared, d int, index func(i, j int) int) Shared {
	return e.each(x, func(_ int, s Mat) Mat {
		out := NewMat(d, d)
		for i := range d {
			for j := i; j < d; j++ {
				w := s.V[index(i, j)]
				out.Set(i, j, w)
				out.Set(j, i, w)
			}
		}
		return out
	})
}

// Symmetrise returns (x + x^T) / 2, the halving by the truncation
// protocol (one round): shares cannot be halved locally, a share's halving
// is off by 2^127 whenever the shares wrap.
func (e *Engine) Symmetrise(x Shared) Shared {
	sum := e.each(x, func(_ int, s Mat) Mat { return add(s, s.Transpose()) })
	return e.Trunc(1, sum)[0]
}

// ColumnSums returns the sums of x's columns as a column (local).
func (e *Engine) ColumnSums(x Shared) Shared {
	return e.each(x, func(_ int, s Mat) Mat {
		out := NewMat(s.C, 1)
		for r := range s.R {
			for c := range s.C {
				out.V[c] = out.V[c].Add(s.At(r, c))
			}
		}
		return out
	})
}

// Reshape reads x row-major as an r x c matrix (local).
func (e *Engine) Reshape(x Shared, r, c int) Shared {
	return e.each(x, func(_ int, s Mat) Mat { return Mat{R: r, C: c, V: s.V} })
}

// Diagonal returns the diagonal of the square x as a column (local).
func (e *Engine) Diagonal(x Shared) Shared {
	return e.each(x, func(_ int, s Mat) Mat {
		out := NewMat(s.R, 1)
		for i := range s.R {
			out.V[i] = s.At(i, i)
		}
		return out
	})
}

// AddDiagonal returns x + c I for the shared 1 x 1 c (local).
func (e *Engine) AddDiagonal(x, c Shared) Shared {
	return e.each(x, func(i int, s Mat) Mat {
		out := NewMat(s.R, s.C)
		copy(out.V, s.V)
		for r := range s.R {
			out.Set(r, r, out.At(r, r).Add(c.S[i].V[0]))
		}
		return out
	})
}
