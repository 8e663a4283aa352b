package mpc

import "fmt"

// Scalar functions on a column of shared fixed-point values, after
// Catrina and Saxena, "Secure computation with fixed-point numbers"
// (Financial Cryptography 2010), sections 3.3 and 4: the value is
// normalised by a shared power of two (from its most significant bit)
// into a fixed interval, where Newton's iteration from a public linear
// initial guess converges in a fixed public number of steps, and the
// result is scaled back. The most significant bit comes from ONE batched
// comparison: the bits [x < 2^i] for every i (a single LTZ of the
// column x - 2^i) give the one-hot msb e_i = [x < 2^(i+1)] - [x < 2^i].
// Every count and every operand shape is public; nothing is opened but
// masked values.

// Sign returns the shared sign of every entry of the column x (integers
// with |x| < 2^m): 1 where x >= 0 (so the sign of 0 is 1), -1 where
// x < 0, as integers (1 - 2 LTZ(x)). The rounds of one LTZ.
func (e *Engine) Sign(x Shared, m uint) (Shared, error) {
	lt, err := e.LTZ(x, m)
	if err != nil {
		return Shared{}, fmt.Errorf("sign: %w", err)
	}
	return e.AddPublic(e.Scale(lt, -2), ConstCol(x.R, one)), nil
}

// Abs returns |x| = Sign(x) x for the column x (|x| < 2^m as integers):
// one round more than Sign (an entrywise product, no truncation).
func (e *Engine) Abs(x Shared, m uint) (Shared, error) {
	s, err := e.Sign(x, m)
	if err != nil {
		return Shared{}, err
	}
	out, err := e.Hadamard(Product{s, x})
	if err != nil {
		return Shared{}, err
	}
	return out[0], nil
}

// ScalarRangeBits is the range of Reciprocal and InvSqrtScalar: inputs
// below 2^(L - 2F - 2) (2^20 with the default parameters).
func (p Params) ScalarRangeBits() uint { return p.L - 2*p.F - 2 }

// Newton step counts for F = 32, from the public initial guesses'
// worst relative errors on the normalised interval (checked in the
// tests): 1/17 for the reciprocal on [1/2, 1) (three steps: 17^-8 <
// 2^-32), 0.171 for the inverse square root on [1/4, 1) (four steps: the
// error e goes to 3/4 e^2 + 1/4 e^3, below 2^-46).
const (
	recipSteps   = 3
	invSqrtSteps = 4
)

// guess is a public linear initial guess y0 = Alpha - BetaNum 2^-J a.
type guess struct {
	Alpha   float64
	BetaNum int64
	J       uint
}

var (
	// recipGuess: 48/17 - 32/17 a, the minimax line for 1/a on [1/2, 1].
	recipGuess = guess{48.0 / 17, 30841, 14}
	// invSqrtQuarter: the minimax-searched line for 1/sqrt(a) on [1/4, 1].
	invSqrtQuarter = guess{2.125, 19890, 14}
)

// Reciprocal returns 1/x for every entry of the column x, positive
// fixed-point values below 2^ScalarRangeBits (results for x below
// 2^-ScalarRangeBits exceed that bound: correct, but not to be
// multiplied again), and 0 where x = 0 (the normalisation's one-hot is
// then empty). Catrina and Saxena's normalisation (one batched LTZ), the
// line 48/17 - 32/17 a, three Newton steps y <- y (2 - a y), the shared
// power of two back: ceil(log2 M) + 18 rounds for M = F + range bits (24
// by default).
func (e *Engine) Reciprocal(x Shared) (Shared, error) {
	f := e.P.F
	m := f + e.P.ScalarRangeBits()
	raw, norm, err := e.normalised(x, m, false)
	if err != nil {
		return Shared{}, fmt.Errorf("reciprocal: %w", err)
	}
	a, y0 := e.truncGuess(raw, m-f, 0, recipGuess, f)
	y, err := e.newtonRecip(a, y0, f, recipSteps)
	if err != nil {
		return Shared{}, err
	}
	return e.mulTrunc([]uint{m - f}, Product{y, norm.scale})
}

// InvSqrtScalar returns 1/sqrt(x) for every entry of the column x,
// positive fixed-point values below 2^ScalarRangeBits, and 0 where x = 0:
// the normalisation by an even power of two into [1/4, 1), a public line,
// four Newton steps y <- y (3 - a y^2) / 2, the square root of the power
// back: ceil(log2 M) + 22 rounds (28 by default).
func (e *Engine) InvSqrtScalar(x Shared) (Shared, error) {
	f := e.P.F
	m := f + e.P.ScalarRangeBits()
	if (m-f)%2 != 0 {
		return Shared{}, fmt.Errorf("inverse square root: range of %d bits, want an even number", m-f)
	}
	raw, norm, err := e.normalised(x, m, true)
	if err != nil {
		return Shared{}, fmt.Errorf("inverse square root: %w", err)
	}
	a, y0 := e.truncGuess(raw, m-f, 0, invSqrtQuarter, f)
	y, err := e.newtonInvSqrt(a, y0, f, invSqrtSteps)
	if err != nil {
		return Shared{}, err
	}
	return e.mulTrunc([]uint{(m - f) / 2}, Product{y, norm.root})
}

// Sqrt returns sqrt(x) for the column x, in the range of InvSqrtScalar
// (0 at 0): sqrt(a) = a / sqrt(a) on the normalised a in [1/4, 1), then
// the inverse square root of the power back (a product by 1/sqrt(x) would
// lose the relative precision of a small 1/sqrt(x)): 30 rounds by default.
func (e *Engine) Sqrt(x Shared) (Shared, error) {
	f := e.P.F
	m := f + e.P.ScalarRangeBits()
	raw, norm, err := e.normalised(x, m, true)
	if err != nil {
		return Shared{}, fmt.Errorf("square root: %w", err)
	}
	a, y0 := e.truncGuess(raw, m-f, 0, invSqrtQuarter, f)
	y, err := e.newtonInvSqrt(a, y0, f, invSqrtSteps)
	if err != nil {
		return Shared{}, err
	}
	r, err := e.mulTrunc([]uint{f}, Product{a, y})
	if err != nil {
		return Shared{}, err
	}
	return e.mulTrunc([]uint{(m-1)/2 - (m-f)/2}, Product{r, norm.invRoot})
}

// normalised is a shared power of two that scales x into [2^(m-1), 2^m)
// (or [2^(m-2), 2^m) when even): scale, and for even ones its square
// root root and invRoot = 2^((m-1)/2) / root; zero = [x = 0].
type normalised struct {
	scale, root, invRoot, zero Shared
}

// normalise finds the one-hot most significant bit of every entry of the
// column x (non-negative integers below 2^m) by one LTZ of the column of
// x - 2^i, i < m, and returns the scale 2^(m-1-i) for the msb i (x times
// it is in [2^(m-1), 2^m)). When even (m even), only the even i are compared, so the one-hot
// marks the pair of bits holding the msb, with half the comparisons, and
// x 2^(m-2-i) for the even i is in [2^(m-2), 2^m), an even power of two
// (its square root in root). A zero entry gets the scale 0.
func (e *Engine) normalise(x Shared, m uint, even bool) (normalised, error) {
	st := uint(1)
	if even {
		st = 2
	}
	if m%st != 0 {
		return normalised{}, fmt.Errorf("even normalisation below 2^%d: want an even bound", m)
	}
	b, err := e.lessPow2(x, m, st)
	if err != nil {
		return normalised{}, err
	}
	g := m / st
	w := make([]Word, g)
	r := make([]Word, g)
	inv := make([]Word, g)
	for i := range g {
		pow := m - st*(i+1)
		w[i] = Pow2(pow)
		r[i] = Pow2(pow / 2)
		inv[i] = Pow2((m-1)/2 - pow/2)
	}
	out := normalised{scale: e.oneHot(b, w), zero: e.cols(b, 0, 1)}
	if even {
		out.root, out.invRoot = e.oneHot(b, r), e.oneHot(b, inv)
	}
	return out, nil
}

// normalised returns x times the normalisation's scale (one round).
func (e *Engine) normalised(x Shared, m uint, even bool) (Shared, normalised, error) {
	norm, err := e.normalise(x, m, even)
	if err != nil {
		return Shared{}, norm, err
	}
	raw, err := e.Hadamard(Product{x, norm.scale})
	if err != nil {
		return Shared{}, norm, err
	}
	return raw[0], norm, nil
}

// lessPow2 returns the count x m/st shared bits [x_k < 2^(st i)] (row k,
// column i) for the column x of integers in [0, 2^m): one LTZ of the
// count m/st values x_k - 2^(st i).
func (e *Engine) lessPow2(x Shared, m, st uint) (Shared, error) {
	if x.C != 1 {
		return Shared{}, fmt.Errorf("a %dx%d matrix where a column was due", x.R, x.C)
	}
	count, g := x.R, int(m/st)
	wide := e.each(x, func(i int, s Mat) Mat {
		out := NewMat(count*g, 1)
		for k := range count {
			for j := range g {
				v := s.V[k]
				if i == 0 {
					v = v.Sub(Pow2(st * uint(j)))
				}
				out.V[k*g+j] = v
			}
		}
		return out
	})
	lt, err := e.LTZ(wide, m)
	if err != nil {
		return Shared{}, err
	}
	return e.each(lt, func(_ int, s Mat) Mat { return Mat{R: count, C: g, V: s.V} }), nil
}

// oneHot returns sum_i e_i w_i per row of the bits b[:, i] = [x < 2^(st i)]
// (i < m/st), where e_i = b_{i+1} - b_i with b_(m/st) = 1 is the one-hot
// most significant bit (pair): w_{m-1} + sum_{i>=1} b_i (w_{i-1} - w_i) - b_0 w_0
// (local). It is 0 for x = 0, whose bits are all 1.
func (e *Engine) oneHot(b Shared, w []Word) Shared {
	m := len(w)
	return e.each(b, func(i int, s Mat) Mat {
		out := NewMat(s.R, 1)
		for k := range s.R {
			v := s.At(k, 0).Mul(w[0]).Neg()
			for j := 1; j < m; j++ {
				v = v.Add(s.At(k, j).Mul(w[j-1].Sub(w[j])))
			}
			if i == 0 {
				v = v.Add(w[m-1])
			}
			out.V[k] = v
		}
		return out
	})
}

// mulTrunc returns the entrywise products X Y, the k-th truncated by
// shifts[k]: one round of products and one of truncations.
func (e *Engine) mulTrunc(shifts []uint, ps ...Product) (Shared, error) {
	out, err := e.mulTruncs(shifts, ps...)
	if err != nil {
		return Shared{}, err
	}
	return out[0], nil
}

func (e *Engine) mulTruncs(shifts []uint, ps ...Product) ([]Shared, error) {
	raw, err := e.Hadamard(ps...)
	if err != nil {
		return nil, err
	}
	return e.TruncEach(shifts, raw...), nil
}

// truncGuess returns a = off + raw >> s (raw carrying s more fractional
// bits than f) and the initial guess y0 = g(a) = (Alpha - beta off) -
// (BetaNum raw) >> (s + J), both in one truncation round.
func (e *Engine) truncGuess(raw Shared, s uint, off float64, g guess, f uint) (a, y0 Shared) {
	out := e.TruncEach([]uint{s, s + g.J}, raw, e.Scale(raw, g.BetaNum))
	beta := float64(g.BetaNum) / float64(uint64(1)<<g.J)
	a = e.AddPublic(out[0], ConstCol(raw.R, Encode(off, f)))
	y0 = e.AddPublic(e.Scale(out[1], -1), ConstCol(raw.R, Encode(g.Alpha-beta*off, f)))
	return a, y0
}

// newtonRecip runs Newton's iteration y <- y (2 - a y) for 1/a (f
// fractional bits), four rounds a step.
func (e *Engine) newtonRecip(a, y Shared, f uint, steps int) (Shared, error) {
	two := ConstCol(a.R, Pow2(f+1))
	for range steps {
		ay, err := e.mulTrunc([]uint{f}, Product{a, y})
		if err != nil {
			return Shared{}, err
		}
		if y, err = e.mulTrunc([]uint{f}, Product{y, e.AddPublic(e.Scale(ay, -1), two)}); err != nil {
			return Shared{}, err
		}
	}
	return y, nil
}

// newtonInvSqrt runs Newton's iteration y <- (3 y - a y^3) / 2 for
// 1/sqrt(a) (f fractional bits): y^2 and a y in one product round, their
// product in the next, and one truncation for the difference and the
// halving; four rounds a step.
func (e *Engine) newtonInvSqrt(a, y Shared, f uint, steps int) (Shared, error) {
	three := int64(3) << f
	for range steps {
		sq, err := e.mulTruncs([]uint{f, f}, Product{y, y}, Product{a, y})
		if err != nil {
			return Shared{}, err
		}
		cube, err := e.Hadamard(Product{sq[0], sq[1]})
		if err != nil {
			return Shared{}, err
		}
		y = e.Trunc(f+1, e.Sub(e.Scale(y, three), cube[0]))[0]
	}
	return y, nil
}
