package mpc

import "fmt"

// MulElem returns x * y entrywise in fixed point (truncated by F), in two
// rounds.
func (e *Engine) MulElem(x, y Shared) (Shared, error) {
	return e.mulTrunc([]uint{e.P.F}, Product{x, y})
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
	w := e.AddPublic(e.MulConst(y, -32.0/17), ConstCol(y.R, Encode(48.0/17, e.P.F)))
	return e.newtonRecip(y, w, e.P.F, 5)
}

// MSBShift returns, for a column of shared integers 0 <= x < 2^m, the
// shared integer 2^(m-1-i) where 2^i <= x < 2^(i+1) (0 for x = 0): x
// times it lies in [2^(m-1), 2^m). One batched LTZ of x - 2^j for every j
// (ceil(log2 m) + 2 rounds): [x < 2^(j+1)] - [x < 2^j] is the one-hot bit
// of i, and the shift is their public combination (normalise).
func (e *Engine) MSBShift(x Shared, m uint) (Shared, error) {
	norm, err := e.normalise(x, m, false)
	if err != nil {
		return Shared{}, fmt.Errorf("msb: %w", err)
	}
	return norm.scale, nil
}
