package mpc

import (
	"errors"
	"fmt"
)

// MaxSymEig is the largest matrix SymEig takes.
const MaxSymEig = 32

// DefaultSweeps is the public Jacobi sweep count: the smallest that meets
// the bar (eigenvalues >= 1e-3 within 1e-6 relative, eigenvectors within
// 1e-5 rad where the gap is >= 1e-4) at p = 25, k = 15 on a spectrum from
// 1 to 1e-6 with clusters 1e-3 apart (TestSymEigCost: 7 sweeps leave
// 2.6e-5 rad, 8 leave 7.6e-8, 10 the same); p = 15 needs 7.
const DefaultSweeps = 8

// Newton counts and initial guesses of the rotations (see rotate): the
// inverse square root of r^2 = x^2 + y^2 in [1/32, 1) and of
// h = (1 + |cos 2 theta|) / 2 in [1/2, 1]; the guesses' worst relative
// errors are 0.72 and 0.046 (TestGuesses), hence 6 steps (2^-42) and 3
// (2^-38, at the fixed point's rounding).
const (
	jacobiR2Steps   = 6
	jacobiHalfSteps = 3
)

var (
	jacobiR2Guess   = guess{3.07, 20, 3} // 3.07 - 2.5 a on [1/32, 1]
	jacobiHalfGuess = guess{1.79, 26, 5} // 1.79 - 0.8125 a on [1/2, 1]
)

// SymEig returns the top k eigenvalues of the shared symmetric p x p
// matrix a (p <= MaxSymEig, eigenvalues in [-1, 1], so that every entry
// stays in [-1, 1] through the rotations) in descending order (a k x 1
// column) and their unit eigenvectors (the p x k columns), all as shares
// with F fractional bits; nothing is opened but masked values.
//
// The method is the cyclic Jacobi method with the parallel (round-robin)
// ordering: p - 1 steps per sweep (p odd: a dummy index makes it p), each
// of floor(p/2) disjoint rotations batched into the same rounds (Golub and
// Van Loan, Matrix Computations, section 8.5: the 2 x 2 symmetric Schur
// decomposition symSchur2 and the parallel ordering), for a fixed public
// number of sweeps. Rotation (p, q) uses x = a_qq - a_pp and
// y = a_pq + a_qp: tan theta = t = sign(x) y / (|x| + sqrt(x^2 + y^2)),
// c = 1/sqrt(1 + t^2), s = t c, and A <- J^T A J, V <- V J with
// J_pp = J_qq = c, J_pq = s, J_qp = -s. It is evaluated
// homogeneously (rotate) with Catrina and Saxena's normalisation (FC 2010)
// so that each Newton iteration runs on a fixed interval; x = y = 0 gives
// the identity. The work runs at f = (L - 6)/2 fractional bits (40 by
// default; the input is scaled up exactly and the outputs truncated
// back), so that the 10^4 truncations of 8 sweeps leave the eigenvalues
// within about 1e-10 and the eigenvectors orthonormal within 1e-9
// (measured). The eigenvalues (the diagonal) are sorted by Batcher's
// odd-even merge network (Batcher, "Sorting networks and their
// applications", AFIPS 1968; Knuth, TAOCP vol. 3, 5.3.4), one LTZ per
// layer and the eigenvector columns swapped along, and the top k kept.
// Rounds: 65 a step, (p - 1 + p%2) steps a sweep, 9 a layer of the sort
// (10 layers at p = 16, 15 at 25 to 32), one for the output truncation.
func SymEig(e *Engine, a Shared, k, sweeps int) (values, vectors Shared, err error) {
	p := a.R
	switch {
	case a.R != a.C:
		return values, vectors, fmt.Errorf("eigendecomposition of a %dx%d matrix: want a square one", a.R, a.C)
	case p < 2 || p > MaxSymEig:
		return values, vectors, fmt.Errorf("eigendecomposition of a %dx%d matrix: want 2 to %d rows", p, p, MaxSymEig)
	case k < 1 || k > p:
		return values, vectors, fmt.Errorf("%d eigenpairs of a %dx%d matrix: want 1 to %d", k, p, p, p)
	case sweeps < 1:
		return values, vectors, fmt.Errorf("%d Jacobi sweeps: want at least 1", sweeps)
	}
	f := (e.P.L - 6) / 2
	if f < e.P.F {
		return values, vectors, errors.New("fixed point: L too small for the eigensolver's working precision")
	}
	g := f - e.P.F
	A := e.Scale(a, int64(1)<<g)
	V := e.Const(Identity(p, Pow2(f)))
	for range sweeps {
		for _, pairs := range roundRobin(p) {
			if A, V, err = e.rotate(A, V, pairs, f); err != nil {
				return values, vectors, err
			}
		}
	}
	d := e.each(A, func(_ int, s Mat) Mat {
		out := NewMat(p, 1)
		for i := range p {
			out.V[i] = s.At(i, i)
		}
		return out
	})
	if d, V, err = e.sortDesc(d, V, f+2); err != nil {
		return values, vectors, err
	}
	values = e.each(d, func(_ int, s Mat) Mat { return Mat{R: k, C: 1, V: s.V[:k]} })
	vectors = e.cols(V, 0, k)
	if g > 0 {
		out := e.Trunc(g, values, vectors)
		values, vectors = out[0], out[1]
	}
	return values, vectors, nil
}

// roundRobin returns the steps of one sweep in the parallel ordering, p - 1
// for an even p and p for an odd one (a dummy index p): the circle method,
// index 0 fixed and the others rotating, pairs with the dummy left out.
func roundRobin(p int) [][][2]int {
	n := p + p%2
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	var steps [][][2]int
	for range n - 1 {
		var pairs [][2]int
		for i := range n / 2 {
			u, v := idx[i], idx[n-1-i]
			if u >= p || v >= p {
				continue
			}
			pairs = append(pairs, [2]int{min(u, v), max(u, v)})
		}
		steps = append(steps, pairs)
		last := idx[n-1]
		copy(idx[2:], idx[1:n-1])
		idx[1] = last
	}
	return steps
}

// rotate applies the disjoint rotations pairs to A (J^T A J) and V (V J),
// f fractional bits, all in the same rounds. With sigma = sign(x),
// (x, sigma y) is normalised by the even power of two that brings
// |x| + |y| into [1/4, 1) (Catrina-Saxena's one-hot msb, of the pair of
// bits: half the comparisons of the exact msb, for one Newton step more;
// x = y = 0 is set to (1/2, 0)); w = 1/sqrt(x^2 + y^2) (Newton on
// [1/32, 1)) gives
// cos 2 theta = |x| w and sin 2 theta = sigma y w, then h = (1 + |x| w)/2
// in [1/2, 1] = c^2 and, with z = 1/sqrt(h) (Newton on [1/2, 1]),
// c = h z and s = sigma y w z / 2: the same c and s as GVL's t, without a
// division and with no cancellation. 65 rounds a step (two LTZ of
// ceil(log2(f + 2)) + 2 rounds, 9 Newton steps of 4, 17 others).
func (e *Engine) rotate(A, V Shared, pairs [][2]int, f uint) (Shared, Shared, error) {
	n, p := len(pairs), A.R
	m := f + 2 // |x|, |y| <= 2: below 2^m as integers, and |x| + |y| too
	// The column (x; y).
	xy := e.each(A, func(_ int, s Mat) Mat {
		out := NewMat(2*n, 1)
		for k, pq := range pairs {
			i, j := pq[0], pq[1]
			out.V[k] = s.At(j, j).Sub(s.At(i, i))
			out.V[n+k] = s.At(i, j).Add(s.At(j, i))
		}
		return out
	})
	sg, err := e.Sign(xy, m)
	if err != nil {
		return A, V, err
	}
	sigma := e.Rows(sg, 0, n)
	abs, err := e.Hadamard(Product{sg, xy}, Product{sigma, e.Rows(xy, n, n)})
	if err != nil {
		return A, V, err
	}
	absX, sy := e.Rows(abs[0], 0, n), abs[1]
	norm, err := e.normalise(e.Add(absX, e.Rows(abs[0], n, n)), m, true)
	if err != nil {
		return A, V, err
	}
	// (|x|, sigma y) scaled >> (m - f): |x| + |y| in [1/4, 1).
	raw, err := e.Hadamard(Product{e.Stack(absX, sy), e.Stack(norm.scale, norm.scale)})
	if err != nil {
		return A, V, err
	}
	xyn := e.Trunc(m-f, raw[0])[0]
	xyn = e.Add(xyn, e.Stack(e.Scale(norm.zero, int64(1)<<(f-1)), e.Scale(norm.zero, 0)))
	sq, err := e.Hadamard(Product{xyn, xyn})
	if err != nil {
		return A, V, err
	}
	r2raw := e.Add(e.Rows(sq[0], 0, n), e.Rows(sq[0], n, n))
	r2, w0 := e.truncGuess(r2raw, f, 0, jacobiR2Guess, f)
	w, err := e.newtonInvSqrt(r2, w0, f, jacobiR2Steps)
	if err != nil {
		return A, V, err
	}
	cs2, err := e.Hadamard(Product{xyn, e.Stack(w, w)})
	if err != nil {
		return A, V, err
	}
	cos2, sin2 := e.Rows(cs2[0], 0, n), e.Rows(cs2[0], n, n)
	g := jacobiHalfGuess
	tr := e.TruncEach([]uint{f + 1, f + 1 + g.J, f}, cos2, e.Scale(cos2, g.BetaNum), sin2)
	beta := float64(g.BetaNum) / float64(uint64(1)<<g.J)
	h := e.AddPublic(tr[0], ConstCol(n, Encode(0.5, f)))
	z0 := e.AddPublic(e.Scale(tr[1], -1), ConstCol(n, Encode(g.Alpha-beta/2, f)))
	z, err := e.newtonInvSqrt(h, z0, f, jacobiHalfSteps)
	if err != nil {
		return A, V, err
	}
	cs, err := e.mulTruncs([]uint{f, f + 1}, Product{h, z}, Product{tr[2], z})
	if err != nil {
		return A, V, err
	}
	c, s := cs[0], cs[1]
	J := e.each(c, func(i int, cm Mat) Mat {
		sm := s.S[i]
		out := NewMat(p, p)
		if i == 0 {
			for d := range p {
				out.Set(d, d, Pow2(f))
			}
		}
		for k, pq := range pairs {
			u, v := pq[0], pq[1]
			out.Set(u, u, cm.V[k])
			out.Set(v, v, cm.V[k])
			out.Set(u, v, sm.V[k])
			out.Set(v, u, sm.V[k].Neg())
		}
		return out
	})
	g2 := f - e.P.F
	prods, err := e.MatMul(g2, Product{A, J}, Product{V, J})
	if err != nil {
		return A, V, err
	}
	out, err := e.MatMul(g2, Product{e.Transpose(J), prods[0]})
	if err != nil {
		return A, V, err
	}
	return out[0], prods[1], nil
}

// sortDesc sorts the column d (|d_i - d_j| < 2^m as integers) into
// descending order by Batcher's odd-even merge network and permutes the
// columns of V along: per layer, one LTZ of every comparator's d_i - d_j
// and one round of entrywise products b (d_j - d_i), b (V_j - V_i). The
// network is that of the next power of two; comparators that reach past p
// are left out (the padding would be -infinity, which never moves).
func (e *Engine) sortDesc(d, V Shared, m uint) (Shared, Shared, error) {
	p := d.R
	for _, layer := range oddEvenMerge(p) {
		diff := e.each(d, func(_ int, s Mat) Mat {
			out := NewMat(len(layer), 1)
			for k, ij := range layer {
				out.V[k] = s.V[ij[0]].Sub(s.V[ij[1]])
			}
			return out
		})
		b, err := e.LTZ(diff, m)
		if err != nil {
			return d, V, err
		}
		vdiff := e.each(V, func(_ int, s Mat) Mat {
			out := NewMat(s.R, len(layer))
			for r := range s.R {
				for k, ij := range layer {
					out.Set(r, k, s.At(r, ij[1]).Sub(s.At(r, ij[0])))
				}
			}
			return out
		})
		wide := e.each(b, func(_ int, s Mat) Mat {
			out := NewMat(V.R, len(layer))
			for r := range V.R {
				copy(out.V[r*len(layer):], s.V)
			}
			return out
		})
		delta, err := e.Hadamard(Product{b, e.Scale(diff, -1)}, Product{wide, vdiff})
		if err != nil {
			return d, V, err
		}
		d = e.each(d, func(i int, s Mat) Mat {
			out := NewMat(s.R, 1)
			copy(out.V, s.V)
			dl := delta[0].S[i]
			for k, ij := range layer {
				out.V[ij[0]] = out.V[ij[0]].Add(dl.V[k])
				out.V[ij[1]] = out.V[ij[1]].Sub(dl.V[k])
			}
			return out
		})
		V = e.each(V, func(i int, s Mat) Mat {
			out := NewMat(s.R, s.C)
			copy(out.V, s.V)
			dl := delta[1].S[i]
			for r := range s.R {
				for k, ij := range layer {
					out.Set(r, ij[0], out.At(r, ij[0]).Add(dl.At(r, k)))
					out.Set(r, ij[1], out.At(r, ij[1]).Sub(dl.At(r, k)))
				}
			}
			return out
		})
	}
	return d, V, nil
}

// oddEvenMerge returns the layers of Batcher's odd-even merge sorting
// network on the next power of two above p, keeping the comparators (i, j),
// i < j, with j < p; each layer's comparators are disjoint.
func oddEvenMerge(p int) [][][2]int {
	n := 1
	for n < p {
		n *= 2
	}
	var layers [][][2]int
	for q := 1; q < n; q *= 2 {
		for k := q; k >= 1; k /= 2 {
			var layer [][2]int
			for j := k % q; j+k < n; j += 2 * k {
				for i := 0; i < min(k, n-j-k); i++ {
					if (i+j)/(2*q) == (i+j+k)/(2*q) && i+j+k < p {
						layer = append(layer, [2]int{i + j, i + j + k})
					}
				}
			}
			if len(layer) > 0 {
				layers = append(layers, layer)
			}
		}
	}
	return layers
}
