package analysis

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// ErrNotPositiveDefinite is wrapped by the errors of DCA and LDA when the right-hand matrix of the
// generalised eigenproblem (S_T + rho I, resp. S_W + rho I) has no Cholesky factorisation. With
// DP noise this means rho was too small; see [Regularizer] and [SolveWithRetry].
var ErrNotPositiveDefinite = errors.New("matrix is not positive definite")

// symEigen returns the eigenvalues of s in descending order and the matching orthonormal
// eigenvectors as the columns of a d x d matrix.
func symEigen(s mat.Symmetric) ([]float64, *mat.Dense, error) {
	var es mat.EigenSym
	if !es.Factorize(s, true) {
		return nil, nil, errors.New("symmetric eigendecomposition did not converge")
	}
	d := s.SymmetricDim()
	asc := es.Values(nil)
	var q mat.Dense
	es.VectorsTo(&q)
	vals := make([]float64, d)
	vecs := mat.NewDense(d, d, nil)
	for j := 0; j < d; j++ {
		src := d - 1 - j
		vals[j] = asc[src]
		for i := 0; i < d; i++ {
			vecs.Set(i, j, q.At(i, src))
		}
	}
	return vals, vecs, nil
}

// Symmetric is the symmetric part (A + A^T) / 2 of the square matrix a: a
// product that is symmetric in exact arithmetic, made so in floating point.
func Symmetric(a mat.Matrix) *mat.SymDense {
	d, _ := a.Dims()
	s := mat.NewSymDense(d, nil)
	for i := range d {
		for j := i; j < d; j++ {
			s.SetSym(i, j, (a.At(i, j)+a.At(j, i))/2)
		}
	}
	return s
}

// PSD returns the projection of the symmetric matrix s onto the cone of positive semidefinite
// matrices in Frobenius norm: U max(L, 0) U^T where s = U L U^T.
func PSD(s mat.Symmetric) (*mat.SymDense, error) {
	if s == nil || s.SymmetricDim() < 1 {
		return nil, errors.New("psd: s is nil or empty")
	}
	if err := checkFiniteSym(s); err != nil {
		return nil, fmt.Errorf("psd: %w", err)
	}
	vals, vecs, err := symEigen(s)
	if err != nil {
		return nil, fmt.Errorf("psd: %w", err)
	}
	d := len(vals)
	// U diag(max(L,0)) U^T = sum_j max(l_j,0) u_j u_j^T, built as B B^T with B = U sqrt(max(L,0)).
	b := mat.NewDense(d, d, nil)
	for j, l := range vals {
		if l <= 0 {
			continue
		}
		r := math.Sqrt(l)
		for i := 0; i < d; i++ {
			b.Set(i, j, r*vecs.At(i, j))
		}
	}
	out := mat.NewSymDense(d, nil)
	out.SymOuterK(1, b)
	return out, nil
}

func checkFiniteSym(s mat.Symmetric) error {
	d := s.SymmetricDim()
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			if x := s.At(i, j); math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("s[%d][%d] = %v is not finite", i, j, x)
			}
		}
	}
	return nil
}

// fixSigns applies the sign convention to every column of w: the column is negated when its entry
// of largest absolute value is negative. When several entries share the largest absolute value
// exactly, the first (lowest row index) decides. The same negation is applied to the matching
// column of every matrix in also (which must have as many columns as w).
func fixSigns(w *mat.Dense, also ...*mat.Dense) {
	r, c := w.Dims()
	for j := 0; j < c; j++ {
		best, arg := -1.0, 0
		for i := 0; i < r; i++ {
			if a := math.Abs(w.At(i, j)); a > best {
				best, arg = a, i
			}
		}
		if w.At(arg, j) >= 0 {
			continue
		}
		for _, m := range append([]*mat.Dense{w}, also...) {
			rows, _ := m.Dims()
			for i := 0; i < rows; i++ {
				m.Set(i, j, -m.At(i, j))
			}
		}
	}
}

// generalizedEigen solves the symmetric-definite generalised eigenproblem B w = lambda A w for
// symmetric B and symmetric positive definite A. It factors A = L L^T (Cholesky), solves the
// symmetric problem C y = lambda y with C = L^{-1} B L^{-T}, and maps back with w = L^{-T} y. The
// eigenvalues are returned in descending order, the eigenvectors as the columns of a d x d matrix
// normalised so that W^T A W = I (the normalisation of scipy.linalg.eigh); signs are not fixed
// here. If A is not positive definite the error wraps ErrNotPositiveDefinite.
//
// It is the one solver behind both DCA and LDA.
func generalizedEigen(b, a mat.Symmetric) ([]float64, *mat.Dense, error) {
	d := a.SymmetricDim()
	if b.SymmetricDim() != d {
		return nil, nil, fmt.Errorf("generalised eigenproblem: b is %d x %d but a is %d x %d",
			b.SymmetricDim(), b.SymmetricDim(), d, d)
	}
	var chol mat.Cholesky
	if !chol.Factorize(a) {
		return nil, nil, ErrNotPositiveDefinite
	}
	var l mat.TriDense
	chol.LTo(&l)
	lraw := l.RawTriangular()

	// X = L^{-1} B, then C = X L^{-T}.
	x := mat.NewDense(d, d, nil)
	x.Copy(b)
	xraw := x.RawMatrix()
	blas64.Trsm(blas.Left, blas.NoTrans, 1, lraw, xraw)
	blas64.Trsm(blas.Right, blas.Trans, 1, lraw, xraw)
	c := mat.NewSymDense(d, nil)
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			c.SetSym(i, j, 0.5*(x.At(i, j)+x.At(j, i)))
		}
	}
	vals, y, err := symEigen(c)
	if err != nil {
		return nil, nil, err
	}
	// W = L^{-T} Y.
	blas64.Trsm(blas.Left, blas.Trans, 1, lraw, y.RawMatrix())
	return vals, y, nil
}
