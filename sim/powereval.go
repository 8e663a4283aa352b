package sim

import (
	"fmt"
	"math"
	"math/big"
	"runtime"
	"slices"
	"sync"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/power"
)

// Central is the exact PCA of the rows (all owners' together, in data units
// q / 2^g, centred on their mean), the baseline of a power job's accuracy:
// float64 block subspace iteration with p = k + 20 columns, Rayleigh-Ritz
// at every iteration, until the sum of the top k Ritz values changes by
// less than 1e-8 relative (at most maxIters iterations, 200 when 0; Change
// is the last relative change, which the reports print).
type Central struct {
	U       *mat.Dense // d x k
	Values  []float64  // top k + 1 eigenvalues
	Iters   int
	Change  float64
	Seconds float64
}

// dataMatrix holds the rows as floats, row-major, and their mean.
type dataMatrix struct {
	n, d int
	x    []float64
	mean []float64
}

func newDataMatrix(rows [][][]int64, d int, bits uint) *dataMatrix {
	m := &dataMatrix{d: d, mean: make([]float64, d)}
	s := math.Ldexp(1, -int(bits))
	for _, owner := range rows {
		for _, q := range owner {
			for j, v := range q {
				f := float64(v) * s
				m.x = append(m.x, f)
				m.mean[j] += f
			}
			m.n++
		}
	}
	for j := range m.mean {
		m.mean[j] /= float64(m.n)
	}
	return m
}

// project returns X_c W (n x c) for the centred rows.
func (m *dataMatrix) project(w *mat.Dense) *mat.Dense {
	_, c := w.Dims()
	x := mat.NewDense(m.n, m.d, m.x)
	var out mat.Dense
	out.Mul(x, w)
	var mw mat.VecDense
	mw.MulVec(w.T(), mat.NewVecDense(m.d, m.mean))
	for i := range m.n {
		for j := range c {
			out.Set(i, j, out.At(i, j)-mw.AtVec(j))
		}
	}
	return &out
}

// scatterTimes returns S W = X_c^T (X_c W), the rows split over
// GOMAXPROCS goroutines (X_c^T = X^T - mean 1^T, and 1^T X_c W = 0).
func (m *dataMatrix) scatterTimes(w *mat.Dense) *mat.Dense {
	_, c := w.Dims()
	var mw mat.VecDense
	mw.MulVec(w.T(), mat.NewVecDense(m.d, m.mean))
	workers := runtime.GOMAXPROCS(0)
	parts := make([]*mat.Dense, workers)
	var wg sync.WaitGroup
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo, hi := k*m.n/workers, (k+1)*m.n/workers
			if lo == hi {
				return
			}
			x := mat.NewDense(hi-lo, m.d, m.x[lo*m.d:hi*m.d])
			var xw mat.Dense
			xw.Mul(x, w)
			for i := range hi - lo {
				for j := range c {
					xw.Set(i, j, xw.At(i, j)-mw.AtVec(j))
				}
			}
			parts[k] = new(mat.Dense)
			parts[k].Mul(x.T(), &xw)
		}()
	}
	wg.Wait()
	out := mat.NewDense(m.d, c, nil)
	for _, p := range parts {
		if p != nil {
			out.Add(out, p)
		}
	}
	return out
}

// captured is trace(W^T S W) = ||X_c W||_F^2.
func (m *dataMatrix) captured(w *mat.Dense) float64 {
	xw := m.project(w)
	return mat.Norm(xw, 2) * mat.Norm(xw, 2)
}

func centralPCA(m *dataMatrix, k int, seed string, maxIters int) (*Central, error) {
	if maxIters <= 0 {
		maxIters = 200
	}
	start := time.Now()
	p := min(k+20, m.d)
	pr := power.Params{D: m.d, K: k, P: p, Rounds: 1, Seed: []byte("central " + seed), Bits: 0, Bound: 1, QBits: power.MinQBits, MaxRows: 1}
	q, err := power.Start(pr)
	if err != nil {
		return nil, err
	}
	prev := 0.0
	c := &Central{}
	var ritz []float64
	var vecs *mat.Dense
	for c.Iters = 1; ; c.Iters++ {
		y := m.scatterTimes(q)
		// Rayleigh-Ritz on span(Q): eigenpairs of Q^T S Q.
		var h mat.Dense
		h.Mul(q.T(), y)
		sym := mat.NewSymDense(p, nil)
		for i := range p {
			for j := i; j < p; j++ {
				sym.SetSym(i, j, (h.At(i, j)+h.At(j, i))/2)
			}
		}
		var eig mat.EigenSym
		if !eig.Factorize(sym, true) {
			return nil, fmt.Errorf("central PCA: eigendecomposition failed")
		}
		vals := eig.Values(nil)
		var ev mat.Dense
		eig.VectorsTo(&ev)
		ritz = make([]float64, p)
		order := make([]int, p)
		for i := range p {
			order[i] = p - 1 - i // ascending from gonum
			ritz[i] = vals[order[i]]
		}
		sum := 0.0
		for _, v := range ritz[:k] {
			sum += v
		}
		vecs = mat.NewDense(m.d, k, nil)
		var full mat.Dense
		full.Mul(q, &ev)
		for j := range k {
			vecs.SetCol(j, mat.Col(nil, order[j], &full))
		}
		c.Change = math.Abs(sum-prev) / math.Abs(sum)
		if c.Change <= 1e-8 || c.Iters == maxIters {
			break
		}
		prev = sum
		if q, err = power.Orth(y); err != nil {
			return nil, err
		}
	}
	c.U, c.Values = vecs, ritz[:min(k+1, p)]
	c.Seconds = time.Since(start).Seconds()
	return c, nil
}

// PowerAccuracy compares a power job's components with the exact central
// PCA of the same rows.
type PowerAccuracy struct {
	// CapturedRatio is trace(W^T S W) / (lambda_1 + ... + lambda_k): the
	// variance the components capture against the exact top k's.
	CapturedRatio float64 `json:"captured_variance_ratio"`
	// Angles are the principal angles between span(W) and the exact top-k
	// span, in degrees, largest first.
	Angles []float64 `json:"principal_angles_deg"`
	// Separation is the nearest-centroid accuracy of the populations on
	// the top 2 components (the top one when k = 1; centroids and accuracy
	// on all rows, in sample), for the job's components and the central
	// ones.
	Separation        float64   `json:"separation_top2"`
	CentralSeparation float64   `json:"central_separation_top2"`
	CentralValues     []float64 `json:"central_eigenvalues"`
	CentralIters      int       `json:"central_iterations"`
	CentralChange     float64   `json:"central_last_relative_change"`
	CentralSeconds    float64   `json:"central_seconds"`
}

// EvaluatePower measures components (each d x k) against the central PCA
// of the same rows, computed once (at most maxIters iterations, 200 when
// 0); pops gives each row's population (nil: no separation).
func EvaluatePower(rows [][][]int64, d int, bits uint, ws []*mat.Dense, k int, pops [][]int, seed string, maxIters int) ([]*PowerAccuracy, error) {
	m := newDataMatrix(rows, d, bits)
	c, err := centralPCA(m, k, seed, maxIters)
	if err != nil {
		return nil, err
	}
	top := 0.0
	for _, v := range c.Values[:k] {
		top += v
	}
	var labels []int
	for _, o := range pops {
		labels = append(labels, o...)
	}
	var out []*PowerAccuracy
	for _, w := range ws {
		acc := &PowerAccuracy{CentralValues: c.Values, CentralIters: c.Iters, CentralChange: c.Change, CentralSeconds: c.Seconds}
		acc.CapturedRatio = m.captured(w) / top
		var uw mat.Dense
		uw.Mul(c.U.T(), w)
		var svd mat.SVD
		if svd.Factorize(&uw, mat.SVDNone) {
			for _, s := range svd.Values(nil) {
				acc.Angles = append(acc.Angles, math.Acos(math.Min(1, s))*180/math.Pi)
			}
			slices.Reverse(acc.Angles)
		}
		if labels != nil {
			top2 := min(2, k)
			acc.Separation = nearestCentroid(m.project(w.Slice(0, d, 0, top2).(*mat.Dense)), labels)
			acc.CentralSeparation = nearestCentroid(m.project(c.U.Slice(0, d, 0, top2).(*mat.Dense)), labels)
		}
		out = append(out, acc)
	}
	return out, nil
}

// nearestCentroid classifies each projected row to the nearest population
// centroid (centroids from all rows) and returns the accuracy.
func nearestCentroid(x *mat.Dense, labels []int) float64 {
	n, c := x.Dims()
	k := 0
	for _, l := range labels {
		k = max(k, l+1)
	}
	cent := make([][]float64, k)
	cnt := make([]float64, k)
	for i := range cent {
		cent[i] = make([]float64, c)
	}
	for i := range n {
		for j := range c {
			cent[labels[i]][j] += x.At(i, j)
		}
		cnt[labels[i]]++
	}
	for i := range cent {
		for j := range c {
			cent[i][j] /= math.Max(cnt[i], 1)
		}
	}
	right := 0
	for i := range n {
		best, at := math.Inf(1), 0
		for l := range cent {
			d := 0.0
			for j := range c {
				d += (x.At(i, j) - cent[l][j]) * (x.At(i, j) - cent[l][j])
			}
			if d < best {
				best, at = d, l
			}
		}
		if at == labels[i] {
			right++
		}
	}
	return float64(right) / float64(n)
}

// StandardiseCohort maps every owner's individuals to rows with the
// cohort's public reference frequencies (power.Standardiser, g bits, clip
// bound B), on GOMAXPROCS goroutines.
func StandardiseCohort(c *GenotypeCohort, bits uint, bound int64) ([][][]int64, error) {
	std, err := power.NewStandardiser(c.Reference, bits, bound)
	if err != nil {
		return nil, err
	}
	out := make([][][]int64, len(c.Owners))
	for o, g := range c.Owners {
		out[o] = make([][]int64, g.N())
		workers := runtime.GOMAXPROCS(0)
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := std.Clone()
				dos := make([]int8, g.M())
				for i := w; i < g.N(); i += workers {
					g.Row(i, dos)
					row := make([]int64, g.M())
					if _, err := s.Map(dos, row); err != nil {
						errs[w] = err
						return
					}
					out[o][i] = row
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// ClipBound returns floor(2^g C) for C = factor sqrt(d).
func ClipBound(bits uint, d int, factor float64) int64 {
	b := new(big.Float).SetFloat64(math.Ldexp(factor*math.Sqrt(float64(d)), int(bits)))
	i, _ := b.Int64()
	return i
}
