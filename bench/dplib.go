package main

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/analysis"
)

// dpLibPCA is diffprivlib's PCA (IBM diffprivlib 0.6, models/pca.py with
// tools.mean and models.utils.covariance_eig, mechanisms LaplaceTruncated
// and Bingham), written out in Go after its published code because the
// benchmark machines reach no Python package index: scikit-learn-style
// central DP PCA, epsilon-DP (delta 0), for a curator holding every row,
// given per-feature bounds and a row norm bound. Half of epsilon buys the
// mean (each feature's clipped mean, LaplaceTruncated with sensitivity
// (hi - lo) / n at epsilon / (2 d), truncated to the bounds), the other
// half the components: the rows centred on it and clipped to dataNorm,
// their second moment over dataNorm^2 (each row adds at most 1), and k
// components drawn one after the other from the Bingham distribution
// (exp(eps_i/4 u^T A u), Kent, Ganeiber and Mardia's rejection sampler),
// each in the complement of the ones before, eps_i = (epsilon/2)/(k + 1)
// (k < d: one share is the eigenvalues', which PCA's components do not
// use). It returns the d x k components (orthonormal columns).
func dpLibPCA(x *mat.Dense, lo, hi []float64, dataNorm, epsilon float64, k int, rng *rand.Rand) *mat.Dense {
	n, d := x.Dims()
	k = min(k, d)
	xc := mat.NewDense(n, d, nil)
	for j := range d {
		sum := 0.0
		for i := range n {
			sum += math.Max(lo[j], math.Min(hi[j], x.At(i, j)))
		}
		mean := sum/float64(n) + laplace(rng, (hi[j]-lo[j])/float64(n)/(epsilon/2/float64(d)))
		mean = math.Max(lo[j], math.Min(hi[j], mean))
		for i := range n {
			xc.Set(i, j, x.At(i, j)-mean)
		}
	}
	for i := range n {
		row := xc.RawRowView(i)
		if nr := mat.Norm(mat.NewVecDense(d, row), 2); nr > dataNorm {
			for j := range row {
				row[j] *= dataNorm / nr
			}
		}
	}
	cov := mat.NewSymDense(d, nil)
	cov.SymOuterK(1/(dataNorm*dataNorm), xc.T())
	epsI := epsilon / 2 / float64(k+boolInt(k != d))
	theta := mat.NewDense(d, k, nil)
	proj := eye(d) // rows: a basis of the complement of the components so far
	for c := range k {
		m, _ := proj.Dims()
		var u []float64
		if m == 1 {
			u = []float64{1}
		} else {
			var pc, sub mat.Dense
			pc.Mul(proj, cov)
			sub.Mul(&pc, proj.T())
			u = bingham(analysis.Symmetric(&sub), epsI, rng)
		}
		var t mat.VecDense
		t.MulVec(proj.T(), mat.NewVecDense(m, u))
		theta.SetCol(c, t.RawVector().Data)
		if c+1 < k {
			proj = nullSpace(theta.Slice(0, d, 0, c+1))
		}
	}
	return theta
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// laplace draws Laplace noise of the given scale.
func laplace(rng *rand.Rand, scale float64) float64 {
	u := rng.Float64() - 0.5
	return -scale * math.Copysign(math.Log(1-2*math.Abs(u)), u)
}

func eye(d int) *mat.Dense {
	m := mat.NewDense(d, d, nil)
	for i := range d {
		m.Set(i, i, 1)
	}
	return m
}

// nullSpace returns the rows of an orthonormal basis of the complement of
// the columns of t (d x c): scipy's null_space of t^T, transposed.
func nullSpace(t mat.Matrix) *mat.Dense {
	d, c := t.Dims()
	var svd mat.SVD
	if !svd.Factorize(t.T(), mat.SVDFull) {
		panic("dplib: SVD failed")
	}
	var v mat.Dense
	svd.VTo(&v)
	out := mat.NewDense(d-c, d, nil)
	for i := c; i < d; i++ {
		out.SetRow(i-c, mat.Col(nil, i, &v))
	}
	return out
}

// bingham samples a unit vector with density proportional to
// exp(epsilon/4 u^T a u) (diffprivlib's Bingham mechanism, sensitivity 1):
// Kent, Ganeiber and Mardia's rejection sampler from an angular central
// Gaussian envelope.
func bingham(a *mat.SymDense, epsilon float64, rng *rand.Rand) []float64 {
	d := a.SymmetricDim()
	var eig mat.EigenSym
	if !eig.Factorize(a, false) {
		panic("dplib: eigendecomposition failed")
	}
	top := 0.0
	for _, v := range eig.Values(nil) {
		top = math.Max(top, v)
	}
	// V = epsilon (top I - a) / 4: positive semidefinite.
	v := mat.NewSymDense(d, nil)
	for i := range d {
		for j := i; j < d; j++ {
			x := -a.At(i, j)
			if i == j {
				x += top
			}
			v.SetSym(i, j, epsilon*x/4)
		}
	}
	var ve mat.EigenSym
	ve.Factorize(v, false)
	lam := ve.Values(nil)
	left, right, mid := 1.0, float64(d), (1+float64(d))/2
	old := (right - left) * 2
	for right-left < old {
		old = right - left
		mid = (right + left) / 2
		f := 0.0
		for _, e := range lam {
			f += 1 / (mid + 2*e)
		}
		if f <= 1 {
			right = mid
		}
		if f >= 1 {
			left = mid
		}
	}
	b := mid
	omega := mat.NewSymDense(d, nil)
	for i := range d {
		for j := i; j < d; j++ {
			x := 2 * v.At(i, j) / b
			if i == j {
				x++
			}
			omega.SetSym(i, j, x)
		}
	}
	var chol mat.Cholesky
	if !chol.Factorize(omega) {
		panic("dplib: omega is not positive definite")
	}
	var inv mat.SymDense
	if err := chol.InverseTo(&inv); err != nil {
		panic(err)
	}
	inv.ScaleSym(0.25, &inv)
	var cov mat.Cholesky
	if !cov.Factorize(&inv) {
		panic("dplib: the envelope's covariance is not positive definite")
	}
	var l mat.TriDense
	cov.LTo(&l)
	logNorm := -(float64(d)-b)/2 + float64(d)/2*math.Log(float64(d)/b)
	z, u := make([]float64, d), mat.NewVecDense(d, nil)
	for {
		for i := range z {
			z[i] = rng.NormFloat64()
		}
		u.MulVec(&l, mat.NewVecDense(d, z))
		u.ScaleVec(1/mat.Norm(u, 2), u)
		logProb := -mat.Inner(u, v, u) - logNorm - float64(d)/2*math.Log(mat.Inner(u, omega, u))
		if math.Log(rng.Float64()) <= logProb {
			return append([]float64(nil), u.RawVector().Data...)
		}
	}
}
