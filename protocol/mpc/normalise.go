package mpc

import "fmt"

// MulElem returns x * y entrywise in fixed point (truncated by F), in two
// rounds.
func (e *Engine) MulElem(x, y Shared) (Shared, error) {
	p, err := e.Hadamard(Product{x, y})
	if err != nil {
		return Shared{}, err
	}
	return e.Trunc(e.P.F, p[0])[0], nil
}

// MulConst returns c x in fixed point for a public real c (one round: the
// truncation).
func (e *Engine) MulConst(x Shared, c float64) Shared {
	w := Encode(c, e.P.F)
	return e.Trunc(e.P.F, e.each(x, func(_ int, s Mat) Mat { return scale(s, w) }))[0]
}

// RecipHalf returns 1 / y entrywise for shared fixed-point y in [0.5, 1]:
// Newton-Raphson w <- w (2 - y w) from the linear start 48/17 - 32/17 y,
// whose relative error is at most 1/17 on the interval, so five steps
// reach 2^-60, below the fixed point's resolution (Goldschmidt's and
// Newton's iterations for division; e.g. Catrina and Saxena 2010, section
// 3.3). Twenty rounds.
func (e *Engine) RecipHalf(y Shared) (Shared, error) {
	if y.C != 1 {
		return Shared{}, fmt.Errorf("reciprocal of a %dx%d matrix: want a column", y.R, y.C)
	}
	w := e.AddPublic(e.MulConst(y, -32.0/17), constCol(y.R, Encode(48.0/17, e.P.F)))
	two := constCol(y.R, Encode(2, e.P.F))
	for range 5 {
		yw, err := e.MulElem(y, w)
		if err != nil {
			return Shared{}, err
		}
		if w, err = e.MulElem(w, e.AddPublic(e.Scale(yw, -1), two)); err != nil {
			return Shared{}, err
		}
	}
	return w, nil
}

// MSBShift returns, for a column of shared integers 1 <= x < 2^m, the
// shared integer 2^(m-1-i) where 2^i <= x < 2^(i+1): x times it lies in
// [2^(m-1), 2^m). One batched LTZ of x - 2^j for every j (ceil(log2 m) + 2
// rounds): [x >= 2^j] - [x >= 2^(j+1)] is the one-hot bit of i, and the
// shift is their public combination.
func (e *Engine) MSBShift(x Shared, m uint) (Shared, error) {
	if x.C != 1 {
		return Shared{}, fmt.Errorf("msb of a %dx%d matrix: want a column", x.R, x.C)
	}
	rows := x.R
	// Column of x - 2^j, rows grouped by j.
	big := e.each(x, func(i int, s Mat) Mat {
		out := NewMat(rows*int(m), 1)
		for j := range m {
			for r := range rows {
				v := s.V[r]
				if i == 0 {
					v = v.Sub(Pow2(j))
				}
				out.V[int(j)*rows+r] = v
			}
		}
		return out
	})
	lt, err := e.LTZ(big, m+1)
	if err != nil {
		return Shared{}, err
	}
	// ge_j = 1 - lt_j; shift = sum_j (ge_j - ge_(j+1)) 2^(m-1-j)
	//       = sum_j ge_j 2^(m-1-j) - sum_(j>=1) ge_j 2^(m-j)
	//       = ge_0 2^(m-1) - sum_(j>=1) ge_j 2^(m-1-j).
	return e.each(lt, func(i int, s Mat) Mat {
		out := NewMat(rows, 1)
		for r := range rows {
			var v Word
			for j := range m {
				ge := s.V[int(j)*rows+r].Neg() // -lt; the 1 is public
				if i == 0 {
					ge = ge.Add(one)
				}
				c := Pow2(m - 1 - j)
				if j == 0 {
					v = v.Add(ge.Mul(c))
				} else {
					v = v.Sub(ge.Mul(c))
				}
			}
			out.V[r] = v
		}
		return out
	}), nil
}
