package mpc

// TruncEach divides xs[k] by 2^shifts[k], every one in the same round:
// Trunc with a shift per operand (so that a product and a public multiple
// of it can be truncated by different amounts together).
func (e *Engine) TruncEach(shifts []uint, xs ...Shared) []Shared {
	off := Pow2(e.P.L)
	opens := make([]Shared, len(xs))
	his := make([]Shared, len(xs))
	bias := make([]Word, len(xs))
	for k, x := range xs {
		var r Shared
		r, his[k], bias[k] = e.be.truncMask(e, x.R, x.C, shifts[k])
		opens[k] = e.each(x, func(i int, m Mat) Mat {
			m = add(m, r.S[i])
			if i == 0 {
				for j := range m.V {
					m.V[j] = m.V[j].Add(off)
				}
			}
			return m
		})
	}
	opened := e.open(opens...)
	out := make([]Shared, len(xs))
	for k := range xs {
		c, s := opened[k], shifts[k]
		offOut := Pow2(e.P.L - s).Add(bias[k])
		out[k] = e.each(his[k], func(i int, h Mat) Mat {
			z := NewMat(h.R, h.C)
			for j := range z.V {
				z.V[j] = h.V[j].Neg()
				if i == 0 {
					z.V[j] = z.V[j].Add(c.V[j].Shr(s)).Sub(offOut)
				}
			}
			return z
		})
	}
	return out
}
