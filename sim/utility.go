package sim

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// Utility compares a private result with the non-private, centralised result
// of the same analysis on the same rows.
type Utility struct {
	// PrincipalAnglesDeg are the principal angles between the two subspaces
	// (degrees, ascending); 0 means identical.
	PrincipalAnglesDeg []float64 `json:"principal_angles_deg"`
	// CapturedVarianceRatio is q/q0 (PCA): the variance of the true centred
	// scatter captured by the private components, over the best possible
	// (its top-k eigenvalues).
	CapturedVarianceRatio *float64 `json:"captured_variance_ratio,omitempty"`
	// CapturedVarianceRatioUncentred is the same on the uncentred second
	// moment A = sum z z^T with k = min(5, d): the measure of the Analyze
	// Gauss baseline in reference.json.
	CapturedVarianceRatioUncentred *float64 `json:"captured_variance_ratio_uncentred,omitempty"`
	// EigenvalueRelErrors are |lambda_private - lambda| / |lambda| for the
	// top components.
	EigenvalueRelErrors []float64 `json:"eigenvalue_rel_errors"`
	// Accuracy is the 5-fold cross-validated accuracy of a nearest-centroid
	// classifier on the rows projected on the private components;
	// AccuracyCentral on the non-private ones; AccuracyAll on all the
	// (preprocessed) features. Absent without class labels.
	Accuracy        *float64 `json:"accuracy,omitempty"`
	AccuracyCentral *float64 `json:"accuracy_central,omitempty"`
	AccuracyAll     *float64 `json:"accuracy_all_features,omitempty"`
	Classifier      string   `json:"classifier,omitempty"`
}

// labelledRows are the dataset's rows through the schema's row map (data
// units) with their class indices.
type labelledRows struct {
	z       *mat.Dense
	y       []int
	classes int
}

func (r *labelledRows) n() int { rows, _ := r.z.Dims(); return rows }

// maxUtilityValues bounds the rows x features kept for the classifier.
const maxUtilityValues = 20_000_000

func mapRows(sch *schema.Schema, data []byte) (*labelledRows, error) {
	useClasses := len(sch.Classes) > 0
	rd, err := sch.NewReader(bytes.NewReader(data), useClasses)
	if err != nil {
		return nil, err
	}
	d := sch.D()
	scale := math.Ldexp(1, -int(sch.Bits))
	var vals []float64
	var y []int
	for {
		q, k, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(vals)+d <= maxUtilityValues {
			for _, x := range q {
				vals = append(vals, float64(x)*scale)
			}
			y = append(y, k)
		}
	}
	if len(y) == 0 {
		return nil, errors.New("no rows")
	}
	return &labelledRows{z: mat.NewDense(len(y), d, vals), y: y, classes: len(sch.Classes)}, nil
}

// orthonormal returns an orthonormal basis of W's columns.
func orthonormal(w *mat.Dense) *mat.Dense {
	var qr mat.QR
	qr.Factorize(w)
	var q mat.Dense
	qr.QTo(&q)
	_, k := w.Dims()
	d, _ := q.Dims()
	return mat.DenseCopyOf(q.Slice(0, d, 0, k))
}

// principalAngles returns the principal angles (degrees) between the column
// spaces of a and b (same number of columns).
func principalAngles(a, b *mat.Dense) []float64 {
	qa, qb := orthonormal(a), orthonormal(b)
	var m mat.Dense
	m.Mul(qa.T(), qb)
	var svd mat.SVD
	if !svd.Factorize(&m, mat.SVDNone) {
		return nil
	}
	var out []float64
	for _, c := range svd.Values(nil) {
		out = append(out, math.Acos(math.Min(1, c))*180/math.Pi)
	}
	sort.Float64s(out)
	return out
}

func (r *labelledRows) utility(priv, central *job.Result, seed uint64) (*Utility, error) {
	u := &Utility{}
	pc, cc := priv.Components, central.Components
	if pc == nil || cc == nil {
		return u, nil
	}
	_, k := pc.W.Dims()
	_, kc := cc.W.Dims()
	k = min(k, kc)
	pw := mat.DenseCopyOf(pc.W.Slice(0, pc.W.RawMatrix().Rows, 0, k))
	cw := mat.DenseCopyOf(cc.W.Slice(0, cc.W.RawMatrix().Rows, 0, k))
	u.PrincipalAnglesDeg = principalAngles(pw, cw)
	for i := range k {
		want := cc.Eigenvalues[i]
		u.EigenvalueRelErrors = append(u.EigenvalueRelErrors, math.Abs(pc.Eigenvalues[i]-want)/math.Max(math.Abs(want), 1e-300))
	}
	if priv.Analysis == job.PCA {
		// q/q0 on the true centred scatter, whose top eigenvalues the
		// central result holds in AllEigenvalues.
		rel, err := central.Release.Release()
		if err != nil {
			return nil, err
		}
		sc, err := job.Moments(rel).Scatters()
		if err != nil {
			return nil, err
		}
		q := orthonormal(pw)
		var sq, qsq mat.Dense
		sq.Mul(sc.ST, q)
		qsq.Mul(q.T(), &sq)
		q0 := 0.0
		for _, v := range cc.AllEigenvalues[:k] {
			q0 += v
		}
		ratio := mat.Trace(&qsq) / q0
		u.CapturedVarianceRatio = &ratio
		u.CapturedVarianceRatioUncentred = capturedUncentred(job.Moments(rel).R, q)
	}
	if r.classes > 1 {
		u.Classifier = "nearest class centroid, 5-fold stratified cross-validation"
		a := r.accuracy(r.project(pc.Mean, pw), seed)
		b := r.accuracy(r.project(cc.Mean, cw), seed)
		all := r.accuracy(r.z, seed)
		u.Accuracy, u.AccuracyCentral, u.AccuracyAll = &a, &b, &all
	}
	return u, nil
}

// project returns (z - mean) W for every row.
func (r *labelledRows) project(mean []float64, w *mat.Dense) *mat.Dense {
	n, d := r.z.Dims()
	centred := mat.DenseCopyOf(r.z)
	for i := range n {
		row := centred.RawRowView(i)
		for j := range d {
			row[j] -= mean[j]
		}
	}
	var p mat.Dense
	p.Mul(centred, w)
	return &p
}

// accuracy is the 5-fold stratified cross-validated accuracy of a nearest
// class centroid classifier on x.
func (r *labelledRows) accuracy(x *mat.Dense, seed uint64) float64 {
	n, d := x.Dims()
	const folds = 5
	rng := rand.New(rand.NewPCG(seed, 0xacc))
	fold := make([]int, n)
	byClass := make([][]int, r.classes)
	for i, c := range r.y {
		byClass[c] = append(byClass[c], i)
	}
	for _, idx := range byClass {
		rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		for k, i := range idx {
			fold[i] = k % folds
		}
	}
	correct := 0
	for f := range folds {
		cent := make([][]float64, r.classes)
		cnt := make([]int, r.classes)
		for c := range cent {
			cent[c] = make([]float64, d)
		}
		for i := range n {
			if fold[i] == f {
				continue
			}
			c := r.y[i]
			cnt[c]++
			for j := range d {
				cent[c][j] += x.At(i, j)
			}
		}
		for c := range cent {
			for j := range d {
				if cnt[c] > 0 {
					cent[c][j] /= float64(cnt[c])
				}
			}
		}
		for i := range n {
			if fold[i] != f {
				continue
			}
			best, bestD := -1, math.Inf(1)
			for c := range cent {
				if cnt[c] == 0 {
					continue
				}
				dist := 0.0
				for j := range d {
					v := x.At(i, j) - cent[c][j]
					dist += v * v
				}
				if dist < bestD {
					best, bestD = c, dist
				}
			}
			if best == r.y[i] {
				correct++
			}
		}
	}
	return float64(correct) / float64(n)
}

// capturedUncentred is q/q0 of the basis q (first min(5, d) columns) on the
// uncentred second moment a.
func capturedUncentred(a *mat.SymDense, q *mat.Dense) *float64 {
	d, k := q.Dims()
	k = min(k, 5, d)
	qk := q.Slice(0, d, 0, k)
	var eig mat.EigenSym
	if !eig.Factorize(a, false) {
		return nil
	}
	vals := eig.Values(nil)
	sort.Sort(sort.Reverse(sort.Float64Slice(vals)))
	q0 := 0.0
	for _, v := range vals[:k] {
		q0 += v
	}
	var aq, qaq mat.Dense
	aq.Mul(a, qk)
	qaq.Mul(qk.T(), &aq)
	r := mat.Trace(&qaq) / q0
	return &r
}

// AnalyzeGauss is the central baseline of the utility benchmark: Analyze
// Gauss (Dwork, Talwar, Thakurta and Zhang 2014) on the same preprocessed
// rows as the simulated jobs, noise of standard deviation sigma (sensitivity
// 1: reference.json's classical calibration is sqrt(2 ln(1.25/delta)) /
// epsilon, the analytic one 1/dp.GaussMu(epsilon, delta)) i.i.d. on the
// upper triangle of the second moment. It returns the captured variance
// q/q0 of its top min(5, d) components on the uncentred second moment, as
// Utility.CapturedVarianceRatioUncentred measures a job, and on the centred
// scatter of the same rows (Analyze Gauss releases no mean: its components
// are the uncentred ones), as Utility.CapturedVarianceRatio measures a PCA
// job. The noise is a seeded float Gaussian: this is a measuring stick,
// never the privacy path.
func (s *Simulator) AnalyzeGauss(sigma float64, seed uint64) (uncentred, centred float64) {
	_, d := s.rows.z.Dims()
	var a mat.SymDense
	a.SymOuterK(1, s.rows.z.T())
	rng := rand.New(rand.NewPCG(seed, 0x616e616c797a65))
	noisy := mat.NewSymDense(d, nil)
	for i := range d {
		for j := i; j < d; j++ {
			noisy.SetSym(i, j, a.At(i, j)+sigma*rng.NormFloat64())
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(noisy, true) {
		return math.NaN(), math.NaN()
	}
	vals := eig.Values(nil)
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	// Columns by descending eigenvalue.
	order := make([]int, d)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(x, y int) bool { return vals[order[x]] > vals[order[y]] })
	k := min(5, d)
	top := mat.NewDense(d, k, nil)
	for c := range k {
		for r := range d {
			top.Set(r, c, vecs.At(r, order[c]))
		}
	}
	q := capturedUncentred(&a, top)
	if q == nil {
		return math.NaN(), math.NaN()
	}
	// S = A - n m m^T with m the rows' mean.
	n, _ := s.rows.z.Dims()
	m := make([]float64, d)
	for i := range n {
		for j := range d {
			m[j] += s.rows.z.At(i, j) / float64(n)
		}
	}
	sc := mat.NewSymDense(d, nil)
	sc.SymRankOne(&a, -float64(n), mat.NewVecDense(d, m))
	qc := capturedUncentred(sc, top)
	if qc == nil {
		return *q, math.NaN()
	}
	return *q, *qc
}
