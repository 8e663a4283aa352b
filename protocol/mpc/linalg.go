package mpc

import "fmt"

// Const returns a public matrix as shares (component 0 holds it, the
// others zero): no communication.
func (e *Engine) Const(m Mat) Shared {
	s := Shared{R: m.R, C: m.C, S: make([]Mat, e.N)}
	for i := range e.N {
		switch {
		case !e.holds(i):
		case i == 0:
			s.S[0] = m
		default:
			s.S[i] = NewMat(m.R, m.C)
		}
	}
	return s
}

// InvSqrt returns Z with Z G Z close to the identity on the directions
// where G + ridge I has eigenvalues above about 1.5^-2steps: the coupled
// Newton-Schulz iteration for the inverse square root (Higham, Functions
// of Matrices, SIAM 2008, eq. 6.35: Y <- Y T, Z <- T Z with
// T = (3 I - Z Y) / 2, Y_0 = G, Z_0 = I), which needs only products. G
// must be symmetric with eigenvalues in [0, 1]; the ridge (public) keeps
// every eigenvalue of G + ridge I above the fixed point's rounding, where
// a negative one would make the iteration diverge, and bounds Z by
// ridge^-1/2. Each step is two rounds of products (four rounds).
func (e *Engine) InvSqrt(g Shared, ridge float64, steps int) (Shared, error) {
	if g.R != g.C {
		return Shared{}, fmt.Errorf("inverse square root of a %dx%d matrix", g.R, g.C)
	}
	n := g.R
	y := e.AddPublic(g, Identity(n, Encode(ridge, e.P.F)))
	z := e.Const(Identity(n, Encode(1, e.P.F)))
	three := Identity(n, Encode(3, e.P.F))
	for s := range steps {
		zy := y // Z_0 = I
		if s > 0 {
			out, err := e.MatMul(0, Product{z, y})
			if err != nil {
				return Shared{}, err
			}
			zy = out[0]
		}
		t := e.AddPublic(e.Scale(zy, -1), three) // 2T
		out, err := e.MatMul(1, Product{y, t}, Product{t, z})
		if err != nil {
			return Shared{}, err
		}
		y, z = out[0], out[1]
	}
	return z, nil
}
