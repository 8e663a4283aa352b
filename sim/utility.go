package sim

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/analysis"
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
	for row, err := range rd.All() {
		if err != nil {
			return nil, err
		}
		if len(vals)+d <= maxUtilityValues {
			for _, x := range row.Values {
				vals = append(vals, float64(x)*scale)
			}
			y = append(y, row.Class)
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

// private returns a private result's components (d x k), their
// eigenvalues on the scale of the central result's (those of S_T) and the
// mean they are centred on: a components release's covariance eigenvalues
// times the rows' exact count (PCA; DCA's and LDA's generalised
// eigenvalues as they are), and no mean (nil).
func private(priv, central *job.Result) (w *mat.Dense, eig, mean []float64) {
	top, eig := priv.Top(central.NoisyN)
	if top == nil {
		return nil, nil, nil
	}
	w = mat.NewDense(len(top), len(top[0]), nil)
	for i, row := range top {
		w.SetRow(i, row)
	}
	if pc := priv.Components; pc != nil {
		mean = pc.Mean
	}
	return w, eig, mean
}

func (r *labelledRows) utility(priv, central *job.Result, seed uint64) (*Utility, error) {
	u := &Utility{}
	pW, pEig, pMean := private(priv, central)
	cc := central.Components
	if pW == nil || cc == nil {
		return u, nil
	}
	_, k := pW.Dims()
	_, kc := cc.W.Dims()
	k = min(k, kc)
	pw := mat.DenseCopyOf(pW.Slice(0, pW.RawMatrix().Rows, 0, k))
	cw := mat.DenseCopyOf(cc.W.Slice(0, cc.W.RawMatrix().Rows, 0, k))
	u.PrincipalAnglesDeg = principalAngles(pw, cw)
	for i := range k {
		want := cc.Eigenvalues[i]
		u.EigenvalueRelErrors = append(u.EigenvalueRelErrors, math.Abs(pEig[i]-want)/math.Max(math.Abs(want), 1e-300))
	}
	if priv.Analysis == job.PCA {
		// q/q0 on the true centred scatter, whose top eigenvalues the
		// central result holds in AllEigenvalues: it needs only the
		// private components (and the simulator's rows), so a components
		// release has it too.
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
		u.CapturedVarianceRatioUncentred = captured(job.Moments(rel).R, q)
	}
	if r.classes > 1 {
		// A components release has no mean: its rows are projected
		// uncentred, which moves every projected row by the same vector and
		// so leaves the nearest-centroid accuracy as it is.
		if pMean == nil {
			pMean = make([]float64, pw.RawMatrix().Rows)
		}
		u.Classifier = "nearest class centroid, 5-fold stratified cross-validation"
		a := r.accuracy(r.project(pMean, pw), seed)
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

// captured is q/q0 of the orthonormal basis q (its first min(5, d)
// columns) on the symmetric matrix a (a second moment or a scatter): the
// trace of q^T a q over the sum of a's top eigenvalues.
func captured(a *mat.SymDense, q *mat.Dense) *float64 {
	d, k := q.Dims()
	k = min(k, 5, d)
	r, ok := CapturedVariance(a, q.Slice(0, d, 0, k))
	if !ok {
		return nil
	}
	return &r
}

// CapturedVariance is q/q0 of components w (orthonormal columns) on the
// symmetric matrix a (a second moment or a scatter): the trace of w^T a w
// over the sum of a's top k eigenvalues, k the columns of w; ok is false
// when a cannot be factorised.
func CapturedVariance(a *mat.SymDense, w mat.Matrix) (q float64, ok bool) {
	_, k := w.Dims()
	var eig mat.EigenSym
	if !eig.Factorize(a, false) {
		return 0, false
	}
	vals := eig.Values(nil)
	sort.Sort(sort.Reverse(sort.Float64Slice(vals)))
	q0 := 0.0
	for _, v := range vals[:k] {
		q0 += v
	}
	var aw, waw mat.Dense
	aw.Mul(a, w)
	waw.Mul(w.T(), &aw)
	return mat.Trace(&waw) / q0, true
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
	a, _, sc := s.rows.moments()
	d := a.SymmetricDim()
	rng := rand.New(rand.NewPCG(seed, 0x616e616c797a65))
	noisy := mat.NewSymDense(d, nil)
	for i := range d {
		for j := i; j < d; j++ {
			noisy.SetSym(i, j, a.At(i, j)+sigma*rng.NormFloat64())
		}
	}
	top := topK(noisy, 5)
	if top == nil {
		return math.NaN(), math.NaN()
	}
	q, qc := captured(a, top), captured(sc, top)
	if q == nil || qc == nil {
		return math.NaN(), math.NaN()
	}
	return *q, *qc
}

// moments returns the rows' second moment A = Z^T Z, their sum v and the
// centred scatter A - v v^T / n.
func (r *labelledRows) moments() (a *mat.SymDense, v []float64, centred *mat.SymDense) {
	n, d := r.z.Dims()
	a = mat.NewSymDense(d, nil)
	a.SymOuterK(1, r.z.T())
	v = make([]float64, d)
	for i := range n {
		for j := range d {
			v[j] += r.z.At(i, j)
		}
	}
	centred = mat.NewSymDense(d, nil)
	centred.SymRankOne(a, -1/float64(n), mat.NewVecDense(d, v))
	return a, v, centred
}

// topK returns the eigenvectors of m's k largest eigenvalues (at most d),
// nil if the decomposition fails.
func topK(m *mat.SymDense, k int) *mat.Dense {
	d := m.SymmetricDim()
	k = min(k, d)
	var eig mat.EigenSym
	if !eig.Factorize(m, true) {
		return nil
	}
	var vecs mat.Dense
	eig.VectorsTo(&vecs) // ascending
	return mat.DenseCopyOf(vecs.Slice(0, d, d-k, d))
}

// Paired is what PairedGauss measured: per draw, q/q0 of Analyze Gauss and
// of fedpca on the uncentred second moment and on the centred scatter.
type Paired struct {
	AG, Ours               []float64 // uncentred
	AGCentred, OursCentred []float64
}

// PairedGauss measures, on the same draws, Analyze Gauss (noise of
// standard deviation sigmaAG on the upper triangle of the second moment)
// and fedpca's PCA on a release of the same rows with noise of standard
// deviations sigmaR, sigmaV, sigmaN on R, v and n (the job's SigmaTotal),
// analysed as a job is (pretest James-Stein centring, top k of S_T): q/q0
// of each on the uncentred second moment and on the centred scatter, for
// draws seeds. Both use the same standard normal matrix for the second
// moment (common random numbers), so their difference is measured far more
// precisely than two independent runs would allow. The release's
// distribution is the job's: the exact sums plus independent Gaussian noise
// of those variances (the discrete noise the parties add has them, see
// protocol/job's noise tests), so this measures the calibration and the
// analysis, not the transport.
func (s *Simulator) PairedGauss(sigmaAG, sigmaR, sigmaV, sigmaN float64, k int, seeds int) Paired {
	a, v, centred := s.rows.moments()
	n, d := s.rows.z.Dims()
	var out Paired
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x706169726564))
		e := mat.NewSymDense(d, nil)
		for i := range d {
			for j := i; j < d; j++ {
				e.SetSym(i, j, rng.NormFloat64())
			}
		}
		noisyA := mat.NewSymDense(d, nil)
		noisyA.AddSym(a, scaled(e, sigmaAG))
		noisyR := mat.NewSymDense(d, nil)
		noisyR.AddSym(a, scaled(e, sigmaR))
		nv := make([]float64, d)
		for j := range d {
			nv[j] = v[j] + sigmaV*rng.NormFloat64()
		}
		m := analysis.Moments{R: noisyR, V: [][]float64{nv}, N: []float64{float64(n) + sigmaN*rng.NormFloat64()}}
		sc, err := m.Scatters()
		if err != nil {
			continue
		}
		w := topK(sc.ShrinkCentring(sigmaV*sigmaV).ST, k)
		wa := topK(noisyA, k)
		if w == nil || wa == nil {
			continue
		}
		qa, qo := captured(a, wa), captured(a, w)
		ca, co := captured(centred, wa), captured(centred, w)
		if qa == nil || qo == nil || ca == nil || co == nil {
			continue
		}
		out.AG, out.Ours = append(out.AG, *qa), append(out.Ours, *qo)
		out.AGCentred, out.OursCentred = append(out.AGCentred, *ca), append(out.OursCentred, *co)
	}
	return out
}

// Diff returns the mean and standard error of ours - AG, uncentred or
// centred.
func (p Paired) Diff(centred bool) (mean, se float64) {
	a, o := p.AG, p.Ours
	if centred {
		a, o = p.AGCentred, p.OursCentred
	}
	if len(a) == 0 {
		return math.NaN(), math.NaN()
	}
	var sum, sq float64
	for i := range a {
		x := o[i] - a[i]
		sum += x
		sq += x * x
	}
	nn := float64(len(a))
	mean = sum / nn
	return mean, math.Sqrt(math.Max(sq/nn-mean*mean, 0) / nn)
}

func scaled(e *mat.SymDense, s float64) *mat.SymDense {
	out := mat.NewSymDense(e.SymmetricDim(), nil)
	out.ScaleSym(s, e)
	return out
}

// Rows are a dataset's rows through a schema's map, with their classes: what
// the utility measures use (experiments in bench/).
type Rows struct{ r *labelledRows }

// MapRows reads a CSV file's rows through a schema's map.
func MapRows(sch *schema.Schema, data []byte) (*Rows, error) {
	r, err := mapRows(sch, data)
	if err != nil {
		return nil, err
	}
	return &Rows{r: r}, nil
}

// Accuracy is the nearest-class-centroid accuracy (5-fold stratified
// cross-validation from seed) of the rows projected on components: (z -
// mean) W.
func (r *Rows) Accuracy(mean []float64, w *mat.Dense, seed uint64) float64 {
	return r.r.accuracy(r.r.project(mean, w), seed)
}
