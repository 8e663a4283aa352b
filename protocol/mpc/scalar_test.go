package mpc

import (
	"math"
	"math/rand/v2"
	"testing"
)

// scalarInputs are positive values across the whole range of the scalar
// functions (the smallest fixed-point value 2^-F, powers of two and their
// neighbours, random log-uniform values, the top of the range) and 0.
func scalarInputs(p Params) []float64 {
	top := math.Ldexp(1, int(p.ScalarRangeBits()))
	ulp := math.Ldexp(1, -int(p.F))
	vals := []float64{0, ulp, 2 * ulp, 3 * ulp, 0.5, 1, 1 - ulp, 1 + ulp, 0.75, top - ulp, top / 2, 1e-6, 12345.678}
	for i := -int(p.F); i < int(p.ScalarRangeBits()); i += 3 {
		vals = append(vals, math.Ldexp(1, i), math.Ldexp(1, i)*(2-1e-3))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 30 {
		vals = append(vals, math.Exp2(rng.Float64()*(float64(p.ScalarRangeBits())+float64(p.F))-float64(p.F)))
	}
	return vals
}

// TestScalarFunctions checks Reciprocal, InvSqrtScalar and Sqrt against
// math on the encoded inputs: relative error within a few units of the
// last place (of the result, or of the input where it has few bits), and
// 0 at 0.
func TestScalarFunctions(t *testing.T) {
	forEngines(t, 3, checkScalarFunctions)
}

func checkScalarFunctions(t *testing.T, e *Engine) {
	f := e.P.F
	vals := scalarInputs(e.P)
	x := NewMat(len(vals), 1)
	for i, v := range vals {
		x.V[i] = Encode(v, f)
	}
	xs := e.Share(x)
	type fn struct {
		name string
		run  func(Shared) (Shared, error)
		want func(float64) float64
	}
	for _, c := range []fn{
		{"Reciprocal", e.Reciprocal, func(v float64) float64 { return 1 / v }},
		{"InvSqrtScalar", e.InvSqrtScalar, func(v float64) float64 { return 1 / math.Sqrt(v) }},
		{"Sqrt", e.Sqrt, math.Sqrt},
	} {
		before := e.Cost
		out, err := c.run(xs)
		if err != nil {
			t.Fatal(err)
		}
		rounds := e.Cost.Rounds - before.Rounds
		got := e.Reveal(out)
		worst := 0.0
		for i := range vals {
			in := x.V[i].Signed(f) // the encoded input
			g := got.V[i].Signed(f)
			if in == 0 {
				// Exactly 0 with the dealer's truncation (exact on a
				// multiple of 2^s); within its two units of error with
				// the replicated backend's.
				if zero := math.Ldexp(2, -int(f)); g != 0 && (!replicatedBackend(e) || math.Abs(g) > zero) {
					t.Errorf("%s(0) = %g, want 0", c.name, g)
				}
				continue
			}
			w := c.want(in)
			// The result's last place, and the input's (4 ulp of x relative).
			tol := 4*math.Ldexp(1, -int(f))/math.Abs(w) + 4e-9 + 4*math.Ldexp(1, -int(f))/in
			if c.name == "Sqrt" {
				tol = 4*math.Ldexp(1, -int(f))/math.Abs(w) + 4e-9
			}
			rel := math.Abs(g-w) / math.Abs(w)
			if rel > tol {
				t.Errorf("%s(%g) = %.12g, want %.12g (rel %.2e, tol %.2e)", c.name, in, g, w, rel, tol)
			}
			if math.Abs(w) > 0x1p-10 && math.Abs(w) < 0x1p10 {
				worst = max(worst, rel)
			}
		}
		t.Logf("%s: %d values, worst relative error %.2e for results in [2^-10, 2^10], %d rounds", c.name, len(vals), worst, rounds)
	}
}

// TestSignAbs checks Sign and Abs at 0, at the edges of the bound and on
// random values.
func TestSignAbs(t *testing.T) {
	forEngines(t, 2, checkSignAbs)
}

func checkSignAbs(t *testing.T, e *Engine) {
	const m = 50
	vals := []int64{0, 1, -1, 1<<m - 1, -(1<<m - 1), 7, -7}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		vals = append(vals, rng.Int64N(1<<(m+1))-(1<<m-1))
	}
	x := NewMat(len(vals), 1)
	for i, v := range vals {
		x.V[i] = FromInt64(v)
	}
	s, err := e.Sign(e.Share(x), m)
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.Abs(e.Share(x), m)
	if err != nil {
		t.Fatal(err)
	}
	gs, ga := e.Reveal(s), e.Reveal(a)
	for i, v := range vals {
		ws, wa := int64(1), v
		if v < 0 {
			ws, wa = -1, -v
		}
		if gs.V[i] != FromInt64(ws) || ga.V[i] != FromInt64(wa) {
			t.Errorf("sign, abs of %d: %g, %g", v, gs.V[i].Signed(0), ga.V[i].Signed(0))
		}
	}
}

// TestGuesses checks the public initial guesses' worst relative errors
// on their intervals, from which the Newton step counts follow.
func TestGuesses(t *testing.T) {
	worst := func(g guess, lo, hi float64, inv func(float64) float64) float64 {
		beta := float64(g.BetaNum) / math.Ldexp(1, int(g.J))
		w := 0.0
		for i := range 10001 {
			a := lo + (hi-lo)*float64(i)/10000
			y := g.Alpha - beta*a
			w = max(w, math.Abs(inv(y*a)))
		}
		return w
	}
	recip := func(ya float64) float64 { return 1 - ya }
	if w := worst(recipGuess, 0.5, 1, recip); math.Pow(w, 1<<recipSteps) > 0x1p-32 {
		t.Errorf("reciprocal guess: %g after %d steps", math.Pow(w, 1<<recipSteps), recipSteps)
	}
	for _, c := range []struct {
		g      guess
		lo, hi float64
		steps  int
		want   float64
	}{
		{invSqrtQuarter, 0.25, 1, invSqrtSteps, 0x1p-40},
		{jacobiR2Guess, 1.0 / 32, 1, jacobiR2Steps, 0x1p-42},
		{jacobiHalfGuess, 0.5, 1, jacobiHalfSteps, 0x1p-38},
	} {
		beta := float64(c.g.BetaNum) / math.Ldexp(1, int(c.g.J))
		w := 0.0
		for i := range 10001 {
			a := c.lo + (c.hi-c.lo)*float64(i)/10000
			y := c.g.Alpha - beta*a
			w = max(w, math.Abs(1-a*y*y))
		}
		for range c.steps {
			w = 0.75*w*w + 0.25*w*w*w
		}
		if w > c.want {
			t.Errorf("inverse square root guess on [%g, %g]: %g after %d steps", c.lo, c.hi, w, c.steps)
		}
	}
}
