package eigen

import (
	"errors"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/analysis"
)

// Ritz solves the Rayleigh-Ritz problem of a block that need not be
// orthonormal: (Q^T Y) x = theta (Q^T Q) x with Y = C Q / B, by the
// eigendecomposition of Q^T Q (directions below relTol of its largest
// eigenvalue are dropped: the oversampling columns that the normalisation
// left in the noise). It returns the top k Ritz values (times B) and unit
// Ritz vectors (k rows of d). This is the user's placeholder step (see the
// package comment).
func Ritz(q, y [][]float64, k int, bound, relTol float64) (values []float64, vectors [][]float64, err error) {
	d, p := len(q), len(q[0])
	Q := mat.NewDense(d, p, nil)
	Y := mat.NewDense(d, p, nil)
	for r := range d {
		Q.SetRow(r, q[r])
		Y.SetRow(r, y[r])
	}
	var gram, a mat.Dense
	gram.Mul(Q.T(), Q)
	a.Mul(Q.T(), Y)
	gv, gvec, err := eigSym(&gram, "Q^T Q")
	if err != nil {
		return nil, nil, err
	}
	top := 0.0
	for _, v := range gv {
		top = math.Max(top, v)
	}
	var keep []int
	for i, v := range gv {
		if v > relTol*top {
			keep = append(keep, i)
		}
	}
	if len(keep) < k {
		return nil, nil, errors.New("the block has fewer well-conditioned directions than k")
	}
	w := mat.NewDense(p, len(keep), nil)
	for j, i := range keep {
		for r := range p {
			w.Set(r, j, gvec.At(r, i)/math.Sqrt(gv[i]))
		}
	}
	var small, tmp mat.Dense
	tmp.Mul(&a, w)
	small.Mul(w.T(), &tmp)
	theta, u, err := eigSym(&small, "the Ritz matrix")
	if err != nil {
		return nil, nil, err
	}
	order := make([]int, len(theta))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return theta[order[i]] > theta[order[j]] })
	var wu, x mat.Dense
	wu.Mul(w, u)
	x.Mul(Q, &wu)
	for _, i := range order[:k] {
		values = append(values, theta[i]*bound)
		v := make([]float64, d)
		norm := 0.0
		for r := range d {
			v[r] = x.At(r, i)
			norm += v[r] * v[r]
		}
		for r := range v {
			v[r] /= math.Sqrt(norm)
		}
		vectors = append(vectors, v)
	}
	return values, vectors, nil
}

// eigSym decomposes m's symmetric part.
func eigSym(m *mat.Dense, name string) ([]float64, *mat.Dense, error) {
	var es mat.EigenSym
	if !es.Factorize(analysis.Symmetric(m), true) {
		return nil, nil, errors.New(name + ": no eigendecomposition")
	}
	var vec mat.Dense
	es.VectorsTo(&vec)
	return es.Values(nil), &vec, nil
}

// RitzTol is the relative cut on Q^T Q's eigenvalues in Ritz: directions
// whose squared length is below 1e-6 of the longest are the encryption's
// noise (entries carry about 1e-6 of error after a dozen iterations).
const RitzTol = 1e-6
