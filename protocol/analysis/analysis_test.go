package analysis

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// randomData draws n rows of dimension d in K classes (class means separated by sep), with every
// row clipped to norm <= 1 like the protocol's rows. Deterministic for a given seed.
func randomData(seed uint64, n, d, classes int, sep float64) (rows [][]float64, labels []int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	means := make([][]float64, classes)
	for k := range means {
		means[k] = make([]float64, d)
		for i := range means[k] {
			means[k][i] = sep * rng.NormFloat64()
		}
	}
	scales := make([]float64, d)
	for i := range scales {
		scales[i] = 0.2 + rng.Float64()
	}
	for r := 0; r < n; r++ {
		k := r % classes
		row := make([]float64, d)
		nrm := 0.0
		for i := range row {
			row[i] = 0.3 * (means[k][i] + scales[i]*rng.NormFloat64())
			nrm += row[i] * row[i]
		}
		if nrm = math.Sqrt(nrm); nrm > 1 {
			for i := range row {
				row[i] /= nrm
			}
		}
		rows = append(rows, row)
		labels = append(labels, k)
	}
	return rows, labels
}

func momentsFromRows(rows [][]float64, labels []int, classes int) Moments {
	d := len(rows[0])
	r := mat.NewSymDense(d, nil)
	v := make([][]float64, classes)
	for k := range v {
		v[k] = make([]float64, d)
	}
	n := make([]float64, classes)
	for idx, row := range rows {
		r.SymRankOne(r, 1, mat.NewVecDense(d, row))
		k := labels[idx]
		n[k]++
		for i, x := range row {
			v[k][i] += x
		}
	}
	return Moments{R: r, V: v, N: n}
}

func randomMoments(seed uint64, n, d, classes int) Moments {
	rows, labels := randomData(seed, n, d, classes, 1)
	return momentsFromRows(rows, labels, classes)
}

func maxAbsDiff(a, b mat.Matrix) float64 {
	r, c := a.Dims()
	worst := 0.0
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			worst = math.Max(worst, math.Abs(a.At(i, j)-b.At(i, j)))
		}
	}
	return worst
}

func TestValidate(t *testing.T) {
	good := func() Moments {
		return Moments{
			R: mat.NewSymDense(2, []float64{2, 1, 1, 2}),
			V: [][]float64{{1, 0}, {0, 1}},
			N: []float64{3, 4},
		}
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("valid moments: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(*Moments)
		want   string
	}{
		{"nil r", func(m *Moments) { m.R = nil }, "r is nil"},
		{"empty r", func(m *Moments) { m.R = &mat.SymDense{} }, "r is nil or empty"},
		{"nan r", func(m *Moments) { m.R.SetSym(0, 1, math.NaN()) }, "r[0][1] = NaN"},
		{"inf r", func(m *Moments) { m.R.SetSym(1, 1, math.Inf(1)) }, "r[1][1] = +Inf"},
		{"no classes", func(m *Moments) { m.V = nil; m.N = nil }, "v has no classes"},
		{"counts mismatch", func(m *Moments) { m.N = m.N[:1] }, "n has 1 counts but v has 2 classes"},
		{"short v", func(m *Moments) { m.V[1] = []float64{1} }, "v[1] has length 1, want d = 2"},
		{"nan v", func(m *Moments) { m.V[0][1] = math.NaN() }, "v[0][1] = NaN"},
		{"inf n", func(m *Moments) { m.N[1] = math.Inf(-1) }, "n[1] = -Inf"},
	}
	for _, tc := range cases {
		m := good()
		tc.mutate(&m)
		err := m.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
		if _, err := PCA(m, 1); err == nil || !strings.HasPrefix(err.Error(), "pca: ") {
			t.Errorf("%s: PCA error %v, want a \"pca: \" prefix", tc.name, err)
		}
	}
}

func TestScattersMatchCentredDefinitions(t *testing.T) {
	const n, d, classes = 300, 6, 3
	rows, labels := randomData(1, n, d, classes, 1)
	m := momentsFromRows(rows, labels, classes)
	s, err := m.Scatters()
	if err != nil {
		t.Fatal(err)
	}
	// Direct, centred definitions (as in reference.json's meta).
	mean := make([]float64, d)
	cm := make([][]float64, classes)
	cn := make([]float64, classes)
	for k := range cm {
		cm[k] = make([]float64, d)
	}
	for idx, row := range rows {
		cn[labels[idx]]++
		for i, x := range row {
			mean[i] += x / n
			cm[labels[idx]][i] += x
		}
	}
	st := mat.NewSymDense(d, nil)
	sw := mat.NewSymDense(d, nil)
	sb := mat.NewSymDense(d, nil)
	for k := range cm {
		for i := range cm[k] {
			cm[k][i] /= cn[k]
		}
	}
	for idx, row := range rows {
		a := make([]float64, d)
		b := make([]float64, d)
		for i, x := range row {
			a[i] = x - mean[i]
			b[i] = x - cm[labels[idx]][i]
		}
		st.SymRankOne(st, 1, mat.NewVecDense(d, a))
		sw.SymRankOne(sw, 1, mat.NewVecDense(d, b))
	}
	for k := range cm {
		c := make([]float64, d)
		for i := range c {
			c[i] = cm[k][i] - mean[i]
		}
		sb.SymRankOne(sb, cn[k], mat.NewVecDense(d, c))
	}
	for _, tc := range []struct {
		name      string
		got, want mat.Matrix
	}{{"s_t", s.ST, st}, {"s_w", s.SW, sw}, {"s_b", s.SB, sb}} {
		if e := maxAbsDiff(tc.got, tc.want); e > 1e-11 {
			t.Errorf("%s differs from the centred definition by %g", tc.name, e)
		}
	}
	var sum mat.SymDense
	sum.AddSym(s.SB, s.SW)
	if e := maxAbsDiff(&sum, s.ST); e > 1e-11 {
		t.Errorf("s_b + s_w differs from s_t by %g", e)
	}
	for i := range mean {
		if math.Abs(s.Mean[i]-mean[i]) > 1e-14 {
			t.Errorf("mean[%d] = %g, want %g", i, s.Mean[i], mean[i])
		}
	}
	if s.N != n {
		t.Errorf("n = %g, want %d", s.N, n)
	}
}

func TestScattersClampCounts(t *testing.T) {
	m := Moments{
		R: mat.NewSymDense(2, []float64{4, 1, 1, 3}),
		V: [][]float64{{0.5, 0}, {0, -0.25}, {1, 1}},
		N: []float64{0.3, -2, 5},
	}
	s, err := m.Scatters()
	if err != nil {
		t.Fatal(err)
	}
	wantN := []float64{1, 1, 5}
	for k, w := range wantN {
		if s.ClassN[k] != w {
			t.Errorf("class_n[%d] = %g, want %g", k, s.ClassN[k], w)
		}
	}
	if s.N != 7 {
		t.Errorf("n = %g, want 7 (sum of clamped counts)", s.N)
	}
	v := []float64{1.5, 0.75}
	for i := range v {
		if got := s.Mean[i]; math.Abs(got-v[i]/7) > 1e-15 {
			t.Errorf("mean[%d] = %g, want %g", i, got, v[i]/7)
		}
	}
	// S_W = R - V0 V0^T/1 - V1 V1^T/1 - V2 V2^T/5.
	want := mat.NewSymDense(2, []float64{
		4 - 0.25 - 0.2, 1 - 0.2,
		1 - 0.2, 3 - 0.0625 - 0.2,
	})
	if e := maxAbsDiff(s.SW, want); e > 1e-15 {
		t.Errorf("s_w with clamped counts differs by %g", e)
	}
	if m.N[0] != 0.3 || m.N[1] != -2 {
		t.Error("Scatters modified the input counts")
	}
}

func TestPSDIndefinite(t *testing.T) {
	s := mat.NewSymDense(2, []float64{1, 2, 2, 1}) // eigenvalues 3 and -1
	p, err := PSD(s)
	if err != nil {
		t.Fatal(err)
	}
	want := mat.NewSymDense(2, []float64{1.5, 1.5, 1.5, 1.5}) // 3 u u^T, u = (1, 1)/sqrt(2)
	if e := maxAbsDiff(p, want); e > 1e-14 {
		t.Errorf("PSD = %v, want %v", mat.Formatted(p), mat.Formatted(want))
	}
	// A PSD matrix is a fixed point; the result is always PSD.
	m := randomMoments(2, 50, 5, 1)
	s2, _ := m.Scatters()
	p2, err := PSD(s2.ST)
	if err != nil {
		t.Fatal(err)
	}
	if e := maxAbsDiff(p2, s2.ST); e > 1e-12 {
		t.Errorf("PSD changed a PSD matrix by %g", e)
	}
	var es mat.EigenSym
	rng := rand.New(rand.NewPCG(3, 3))
	a := mat.NewSymDense(6, nil)
	for i := 0; i < 6; i++ {
		for j := i; j < 6; j++ {
			a.SetSym(i, j, rng.NormFloat64())
		}
	}
	p3, _ := PSD(a)
	es.Factorize(p3, false)
	if min := es.Values(nil)[0]; min < -1e-13 {
		t.Errorf("PSD result has eigenvalue %g", min)
	}
	if _, err := PSD(mat.NewSymDense(1, []float64{math.NaN()})); err == nil || !strings.Contains(err.Error(), "not finite") {
		t.Errorf("PSD(NaN) error = %v", err)
	}
}

func checkSigns(t *testing.T, what string, w *mat.Dense) {
	t.Helper()
	r, c := w.Dims()
	for j := 0; j < c; j++ {
		best, arg := -1.0, 0
		for i := 0; i < r; i++ {
			if a := math.Abs(w.At(i, j)); a > best {
				best, arg = a, i
			}
		}
		if w.At(arg, j) < 0 {
			t.Errorf("%s: column %d breaks the sign convention", what, j)
		}
	}
}

func TestPCAProperties(t *testing.T) {
	m := randomMoments(4, 400, 8, 1)
	c, err := PCA(m, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, _ := m.Scatters()
	d, k := c.Dims()
	if d != 8 || k != 3 || len(c.AllEigenvalues) != 8 || c.Analysis != AnalysisPCA || c.Unit != nil {
		t.Fatalf("unexpected shape: d=%d k=%d all=%d", d, k, len(c.AllEigenvalues))
	}
	var wtw mat.Dense
	wtw.Mul(c.W.T(), c.W)
	if e := maxAbsDiff(&wtw, eye(k)); e > 1e-13 {
		t.Errorf("W^T W differs from I by %g", e)
	}
	var sw, lw mat.Dense
	sw.Mul(s.ST, c.W)
	lw.Mul(c.W, mat.NewDiagDense(k, c.Eigenvalues))
	if e := maxAbsDiff(&sw, &lw); e > 1e-12 {
		t.Errorf("S_T W differs from W L by %g", e)
	}
	sum, tr := 0.0, mat.Trace(s.ST)
	for i, l := range c.AllEigenvalues {
		sum += l
		if i > 0 && l > c.AllEigenvalues[i-1] {
			t.Errorf("eigenvalues not descending at %d", i)
		}
	}
	if math.Abs(sum-tr) > 1e-12*tr {
		t.Errorf("sum of eigenvalues %g != trace %g", sum, tr)
	}
	for i, r := range c.ExplainedVarianceRatio {
		if math.Abs(r-c.Eigenvalues[i]/tr) > 1e-14 {
			t.Errorf("explained variance ratio %d = %g, want %g", i, r, c.Eigenvalues[i]/tr)
		}
	}
	checkSigns(t, "pca", c.W)

	// k = 0 means all, k > d is capped, k < 0 is an error.
	if all, _ := PCA(m, 0); len(all.Eigenvalues) != 8 {
		t.Errorf("k = 0 gave %d components", len(all.Eigenvalues))
	}
	if all, _ := PCA(m, 99); len(all.Eigenvalues) != 8 {
		t.Errorf("k = 99 gave %d components", len(all.Eigenvalues))
	}
	if _, err := PCA(m, -1); err == nil || !strings.Contains(err.Error(), "k = -1") {
		t.Errorf("k = -1: %v", err)
	}
}

func TestPCAClampsNegativeEigenvalues(t *testing.T) {
	// A "noisy" R whose S_T is indefinite.
	m := Moments{R: mat.NewSymDense(2, []float64{1, 2, 2, 1}), V: [][]float64{{0, 0}}, N: []float64{10}}
	c, err := PCA(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.AllEigenvalues[0] != 3 && math.Abs(c.AllEigenvalues[0]-3) > 1e-14 || c.AllEigenvalues[1] != 0 {
		t.Errorf("eigenvalues %v, want [3 0]", c.AllEigenvalues)
	}
	if c.ExplainedVarianceRatio[0] != 1 || c.ExplainedVarianceRatio[1] != 0 {
		t.Errorf("explained variance ratio %v, want [1 0]", c.ExplainedVarianceRatio)
	}
	// All eigenvalues <= 0: ratios are zero, not NaN.
	m.R = mat.NewSymDense(2, []float64{-1, 0, 0, -2})
	c, err = PCA(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.ExplainedVarianceRatio {
		if r != 0 {
			t.Errorf("explained variance ratio %v, want zeros", c.ExplainedVarianceRatio)
		}
	}
}

func eye(k int) *mat.Dense {
	e := mat.NewDense(k, k, nil)
	for i := 0; i < k; i++ {
		e.Set(i, i, 1)
	}
	return e
}

func withRidge(a *mat.SymDense, rho float64) *mat.SymDense {
	out := mat.NewSymDense(a.SymmetricDim(), nil)
	out.CopySym(a)
	addDiag(out, rho)
	return out
}

// checkGeneralised verifies B W = A W L and W^T A W = I.
func checkGeneralised(t *testing.T, what string, b, a mat.Symmetric, c *Components) {
	t.Helper()
	_, k := c.Dims()
	var bw, aw, awl, wtaw mat.Dense
	bw.Mul(b, c.W)
	aw.Mul(a, c.W)
	awl.Mul(&aw, mat.NewDiagDense(k, c.Eigenvalues))
	if e := maxAbsDiff(&bw, &awl); e > 1e-10 {
		t.Errorf("%s: B W differs from A W L by %g", what, e)
	}
	wtaw.Mul(c.W.T(), &aw)
	if e := maxAbsDiff(&wtaw, eye(k)); e > 1e-10 {
		t.Errorf("%s: W^T A W differs from I by %g", what, e)
	}
	for j := 0; j < k; j++ {
		if nrm := mat.Norm(c.Unit.ColView(j), 2); math.Abs(nrm-1) > 1e-14 {
			t.Errorf("%s: unit column %d has norm %g", what, j, nrm)
		}
		// Unit is W scaled by a positive factor.
		f := c.Unit.At(0, j) / c.W.At(0, j)
		if !(f > 0) {
			t.Errorf("%s: unit column %d is not a positive multiple of W's", what, j)
		}
	}
	checkSigns(t, what+" w", c.W)
	checkSigns(t, what+" unit", c.Unit)
}

func TestDCAAndLDARelation(t *testing.T) {
	const d, classes = 7, 4
	m := randomMoments(5, 600, d, classes)
	s, _ := m.Scatters()
	rho := 0.05
	opts := Options{Regularizer: Regularizer{Rho: &rho}}
	dca, err := DCA(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	lda, err := LDA(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(dca.Eigenvalues) != classes-1 || len(lda.Eigenvalues) != classes-1 {
		t.Fatalf("got %d and %d components, want K-1 = %d", len(dca.Eigenvalues), len(lda.Eigenvalues), classes-1)
	}
	checkGeneralised(t, "dca", s.SB, withRidge(s.ST, rho), dca)
	checkGeneralised(t, "lda", s.SB, withRidge(s.SW, rho), lda)
	for i, mu := range lda.Eigenvalues {
		if want := mu / (1 + mu); math.Abs(dca.Eigenvalues[i]-want) > 1e-12 {
			t.Errorf("lambda_dca[%d] = %.15g, want lambda_lda/(1+lambda_lda) = %.15g", i, dca.Eigenvalues[i], want)
		}
	}
	// Same eigenvectors: the unit vectors agree after the sign convention.
	if e := maxAbsDiff(dca.Unit, lda.Unit); e > 1e-9 {
		t.Errorf("dca and lda unit vectors differ by %g", e)
	}
	if dca.Rho != rho || lda.Rho != rho || dca.RhoPrime != 0 {
		t.Errorf("rho reported %g/%g, rho' %g", dca.Rho, lda.Rho, dca.RhoPrime)
	}
	if dca.ExplainedVarianceRatio != nil {
		t.Error("dca has an explained variance ratio")
	}

	// rho' shifts the left-hand side.
	opts.RhoPrime = 0.01
	dp, err := DCA(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkGeneralised(t, "dca rho'", withRidge(s.SB, 0.01), withRidge(s.ST, rho), dp)
	if dp.RhoPrime != 0.01 {
		t.Errorf("rho' reported %g", dp.RhoPrime)
	}
	if _, err := LDA(m, opts); err == nil || !strings.Contains(err.Error(), "rho_prime") {
		t.Errorf("lda with rho': %v", err)
	}
}

func TestDiscriminantComponentCount(t *testing.T) {
	m := randomMoments(6, 200, 5, 3)
	cases := []struct {
		opts Options
		want int
	}{
		{Options{}, 2},
		{Options{K: 1}, 1},
		{Options{K: 4}, 2},
		{Options{K: 4, NonDiscriminant: true}, 4},
		{Options{NonDiscriminant: true}, 5},
		{Options{K: 9, NonDiscriminant: true}, 5},
	}
	for _, tc := range cases {
		for _, f := range []func(Moments, Options) (*Components, error){DCA, LDA} {
			c, err := f(m, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, k := c.Dims(); k != tc.want || len(c.Eigenvalues) != tc.want || len(c.AllEigenvalues) != 5 {
				t.Errorf("%s %+v: %d components, want %d", c.Analysis, tc.opts, k, tc.want)
			}
		}
	}
	one := randomMoments(7, 50, 3, 1)
	if _, err := DCA(one, Options{}); err == nil || !strings.Contains(err.Error(), "K = 1") {
		t.Errorf("dca with one class: %v", err)
	}
	if _, err := DCA(m, Options{K: -2}); err == nil || !strings.Contains(err.Error(), "k = -2") {
		t.Errorf("dca with k = -2: %v", err)
	}
	bad := -1.0
	if _, err := LDA(m, Options{Regularizer: Regularizer{Rho: &bad}}); err == nil || !strings.Contains(err.Error(), "rho = -1") {
		t.Errorf("lda with rho = -1: %v", err)
	}
}

// indefiniteMoments returns moments whose S_T (and S_W) have a negative eigenvalue of about
// -shift, as strong DP noise on R can produce.
func indefiniteMoments(shift float64) Moments {
	m := randomMoments(8, 300, 6, 3)
	for i := 0; i < 6; i++ {
		m.R.SetSym(i, i, m.R.At(i, i)-shift)
	}
	return m
}

func TestCholeskyFailure(t *testing.T) {
	m := indefiniteMoments(100)
	zero := 0.0
	for _, f := range []func(Moments, Options) (*Components, error){DCA, LDA} {
		_, err := f(m, Options{Regularizer: Regularizer{Rho: &zero}})
		if !errors.Is(err, ErrNotPositiveDefinite) {
			t.Fatalf("error %v does not wrap ErrNotPositiveDefinite", err)
		}
		for _, want := range []string{"not positive definite", "rho = 0", "cholesky"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
}

func TestSolveWithRetry(t *testing.T) {
	m := indefiniteMoments(3)
	s, _ := m.Scatters()
	reg := Regularizer{NoiseStd: 0.01}
	base, err := Regularizer{}.Value(s.ST)
	if err != nil {
		t.Fatal(err)
	}
	noise := NoiseMargin(reg.NoiseStd, 6)
	for _, analysis := range []string{AnalysisDCA, AnalysisLDA} {
		if _, err := Solve(analysis, m, Options{Regularizer: reg}); !errors.Is(err, ErrNotPositiveDefinite) {
			t.Fatalf("%s: the first attempt should fail, got %v", analysis, err)
		}
		c, retries, err := SolveWithRetry(analysis, m, Options{Regularizer: reg})
		if err != nil {
			t.Fatal(err)
		}
		if retries < 1 || retries > MaxRetryDoublings {
			t.Fatalf("%s: %d retries", analysis, retries)
		}
		t.Logf("%s: %d doublings, rho = %g", analysis, retries, c.Rho)
		want := base + noise*math.Pow(2, float64(retries))
		if math.Abs(c.Rho-want) > 1e-12*want {
			t.Errorf("%s: rho = %g, want trace term + 2^%d noise term = %g", analysis, c.Rho, retries, want)
		}
		// One doubling fewer still fails: the retry stopped at the first rho that works.
		prev := base + noise*math.Pow(2, float64(retries-1))
		if _, err := Solve(analysis, m, Options{Regularizer: Regularizer{Rho: &prev}}); !errors.Is(err, ErrNotPositiveDefinite) {
			t.Errorf("%s: rho = %g should fail, got %v", analysis, prev, err)
		}
	}
	// PCA goes straight through.
	if c, retries, err := SolveWithRetry(AnalysisPCA, m, Options{K: 2}); err != nil || retries != 0 || len(c.Eigenvalues) != 2 {
		t.Errorf("pca through SolveWithRetry: %v, %d retries", err, retries)
	}
	// Hopeless: the noise term doubled 10 times is still too small.
	_, retries, err := SolveWithRetry(AnalysisDCA, indefiniteMoments(1e6), Options{Regularizer: reg})
	if !errors.Is(err, ErrNotPositiveDefinite) || retries != MaxRetryDoublings || !strings.Contains(err.Error(), "after 10 doublings") {
		t.Errorf("hopeless case: %v after %d doublings", err, retries)
	}
	// Explicit rho = 0 cannot be doubled.
	zero := 0.0
	if _, _, err := SolveWithRetry(AnalysisLDA, indefiniteMoments(3), Options{Regularizer: Regularizer{Rho: &zero}}); err == nil || !strings.Contains(err.Error(), "cannot be doubled") {
		t.Errorf("rho = 0: %v", err)
	}
	if _, _, err := SolveWithRetry("svd", m, Options{}); err == nil || !strings.Contains(err.Error(), `"svd"`) {
		t.Errorf("unknown analysis: %v", err)
	}
}

func TestRegularizerValue(t *testing.T) {
	st := mat.NewSymDense(4, []float64{
		4, 1, 0, 0,
		1, 3, 0, 0,
		0, 0, 2, 0,
		0, 0, 0, 1,
	})
	rho, err := Regularizer{}.Value(st)
	if err != nil || math.Abs(rho-1e-3*10/4) > 1e-18 {
		t.Errorf("default rho = %g, %v; want %g", rho, err, 1e-3*10/4)
	}
	rho, _ = Regularizer{TraceFactor: 0.1, NoiseStd: 2}.Value(st)
	if want := 0.1*10/4 + 2*(2*2+6); math.Abs(rho-want) > 1e-12 {
		t.Errorf("rho = %g, want %g", rho, want)
	}
	x := 0.5
	if rho, _ = (Regularizer{Rho: &x, NoiseStd: 2}).Value(st); rho != 0.5 {
		t.Errorf("explicit rho = %g, want 0.5", rho)
	}
	neg := mat.NewSymDense(1, []float64{-5})
	if rho, _ = (Regularizer{NoiseStd: 1}).Value(neg); rho != NoiseMargin(1, 1) {
		t.Errorf("negative trace: rho = %g, want the noise term %g only", rho, NoiseMargin(1, 1))
	}
	nan := math.NaN()
	for _, r := range []Regularizer{{Rho: &nan}, {TraceFactor: -1}, {NoiseStd: math.Inf(1)}} {
		if _, err := r.Value(st); err == nil {
			t.Errorf("%+v: no error", r)
		}
	}
}

// TestNoiseMarginWigner checks empirically that the spectral norm of a symmetric matrix with
// i.i.d. N(0, sigma^2) entries on and above the diagonal stays below sigma (2 sqrt(d) + 6).
func TestNoiseMarginWigner(t *testing.T) {
	const draws = 200
	const sigma = 3.7
	rng := rand.New(rand.NewPCG(20240601, 7))
	for _, d := range []int{4, 13, 30, 64} {
		bound := NoiseMargin(sigma, d)
		above, worst := 0, 0.0
		e := mat.NewSymDense(d, nil)
		var es mat.EigenSym
		for r := 0; r < draws; r++ {
			for i := 0; i < d; i++ {
				for j := i; j < d; j++ {
					e.SetSym(i, j, sigma*rng.NormFloat64())
				}
			}
			if !es.Factorize(e, false) {
				t.Fatal("eigendecomposition failed")
			}
			vals := es.Values(nil)
			norm := math.Max(-vals[0], vals[d-1])
			worst = math.Max(worst, norm)
			if norm > bound {
				above++
			}
		}
		t.Logf("d = %2d: largest ||E|| / sigma = %.2f, 2 sqrt(d) = %.2f, bound %.2f", d, worst/sigma, 2*math.Sqrt(float64(d)), bound/sigma)
		if above != 0 {
			t.Errorf("d = %d: %d of %d Wigner matrices exceed the margin", d, above, draws)
		}
	}
}

// TestNoisyDCADefaultRho: with DP-like noise of std sigma on R, the default rho with NoiseStd =
// sigma keeps S_T + rho I positive definite on a dataset whose S_T is rank deficient.
func TestNoisyDCADefaultRho(t *testing.T) {
	const d, classes, sigma = 12, 3, 0.5
	rows, labels := randomData(9, 400, d, classes, 1)
	for _, row := range rows { // two constant features: S_T is singular
		row[d-1], row[d-2] = 0, 0
	}
	rng := rand.New(rand.NewPCG(10, 10))
	failWithout := 0
	for trial := 0; trial < 20; trial++ {
		m := momentsFromRows(rows, labels, classes)
		for i := 0; i < d; i++ {
			for j := i; j < d; j++ {
				m.R.SetSym(i, j, m.R.At(i, j)+sigma*rng.NormFloat64())
			}
		}
		c, err := DCA(m, Options{Regularizer: Regularizer{NoiseStd: sigma}})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if c.Rho < NoiseMargin(sigma, d) {
			t.Fatalf("rho %g below the noise margin", c.Rho)
		}
		if _, err := DCA(m, Options{}); errors.Is(err, ErrNotPositiveDefinite) {
			failWithout++
		}
	}
	// The margin matters: without it (trace term only) the noisy S_T + rho I is indefinite.
	if failWithout == 0 {
		t.Error("the trace term alone never failed: the test does not exercise the noise margin")
	}
	t.Logf("without the noise margin %d of 20 trials fail", failWithout)
}

func TestProject(t *testing.T) {
	c := &Components{
		Analysis:       AnalysisDCA,
		Mean:           []float64{1, 2, 3},
		W:              mat.NewDense(3, 2, []float64{1, 0, 0, 2, 1, -1}),
		Eigenvalues:    []float64{0.9, 0.1},
		AllEigenvalues: []float64{0.9, 0.1, 0},
		Unit:           mat.NewDense(3, 2, []float64{1, 0, 0, 1, 0, 0}),
	}
	got := c.Project([]float64{2, 2, 5}) // centred (1, 0, 2)
	if want := []float64{3, -2}; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Project = %v, want %v", got, want)
	}
	z := mat.NewDense(2, 3, []float64{2, 2, 5, 1, 2, 3})
	batch := c.ProjectBatch(z)
	if r, cc := batch.Dims(); r != 2 || cc != 2 || batch.At(0, 0) != 3 || batch.At(0, 1) != -2 || batch.At(1, 0) != 0 || batch.At(1, 1) != 0 {
		t.Errorf("ProjectBatch = %v", mat.Formatted(batch))
	}
	// Against the real thing: batch and single agree.
	m := randomMoments(11, 100, 4, 2)
	pca, _ := PCA(m, 2)
	rows, _ := randomData(12, 5, 4, 2, 1)
	data := []float64{}
	for _, r := range rows {
		data = append(data, r...)
	}
	b := pca.ProjectBatch(mat.NewDense(5, 4, data))
	for i, r := range rows {
		p := pca.Project(r)
		for j := range p {
			if math.Abs(p[j]-b.At(i, j)) > 1e-15 {
				t.Errorf("row %d: Project %v, ProjectBatch %v", i, p, mat.Row(nil, i, b))
			}
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "length 2, want d = 3") {
			t.Errorf("Project with a short row: recover() = %v", r)
		}
	}()
	c.Project([]float64{1, 2})
}

func TestSignConventionTies(t *testing.T) {
	w := mat.NewDense(4, 3, []float64{
		-0.5, 0.5, 0.1,
		0.5, -0.5, -0.7,
		0.5, -0.5, 0.7,
		-0.5, 0.5, 0.1,
	})
	u := mat.DenseCopyOf(w)
	u.Scale(2, u)
	fixSigns(w, u)
	want := mat.NewDense(4, 3, []float64{
		0.5, 0.5, -0.1, // tie: first entry decides
		-0.5, -0.5, 0.7, // tie between rows 1 and 2 in column 2: row 1 decides
		-0.5, -0.5, -0.7,
		0.5, 0.5, -0.1,
	})
	if !mat.Equal(w, want) {
		t.Errorf("fixSigns = %v, want %v", mat.Formatted(w), mat.Formatted(want))
	}
	want.Scale(2, want)
	if !mat.Equal(u, want) {
		t.Errorf("companion matrix not flipped alike: %v", mat.Formatted(u))
	}
}

// sampleComponents returns a PCA, a DCA and an LDA result of random moments.
func sampleComponents() []*Components {
	m := randomMoments(13, 300, 5, 3)
	pca, _ := PCA(m, 2)
	dca, _ := DCA(m, Options{RhoPrime: 0.001})
	lda, _ := LDA(m, Options{})
	return []*Components{pca, dca, lda}
}

func TestComponentsJSONRoundTrip(t *testing.T) {
	all := sampleComponents()
	pca := all[0]
	for _, c := range all {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back Components
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !mat.Equal(back.W, c.W) || (c.Unit != nil) != (back.Unit != nil) || (c.Unit != nil && !mat.Equal(back.Unit, c.Unit)) {
			t.Errorf("%s: matrices changed in the round trip", c.Analysis)
		}
		if back.Analysis != c.Analysis || back.Rho != c.Rho || back.RhoPrime != c.RhoPrime ||
			!slices.Equal(back.Mean, c.Mean) || !slices.Equal(back.Eigenvalues, c.Eigenvalues) ||
			!slices.Equal(back.AllEigenvalues, c.AllEigenvalues) || !slices.Equal(back.ExplainedVarianceRatio, c.ExplainedVarianceRatio) {
			t.Errorf("%s: fields changed in the round trip", c.Analysis)
		}
		// Embedded by value in a larger result, it still encodes the same way.
		wrapped, err := json.Marshal(struct{ C Components }{*c})
		if err != nil || !strings.Contains(string(wrapped), string(b)) {
			t.Errorf("%s: by-value encoding differs: %v", c.Analysis, err)
		}
	}
	// Layout: d rows of k columns.
	b, _ := json.Marshal(pca)
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(b, &raw)
	var rows [][]float64
	_ = json.Unmarshal(raw["components"], &rows)
	if len(rows) != 5 || len(rows[0]) != 2 || rows[3][1] != pca.W.At(3, 1) {
		t.Errorf("components JSON is not d x k row-major: %s", raw["components"])
	}
	if _, ok := raw["unit_components"]; ok {
		t.Error("pca JSON has unit_components")
	}

	bad := []struct{ json, want string }{
		{`{"analysis":"svd","mean":[0],"components":[[1]],"eigenvalues":[1],"all_eigenvalues":[1],"explained_variance_ratio":[1]}`, `analysis = "svd"`},
		{`{"analysis":"pca","mean":[0,0],"components":[[1],[0,1]],"eigenvalues":[1],"all_eigenvalues":[1,0],"explained_variance_ratio":[1]}`, "components row 1 has 2 entries"},
		{`{"analysis":"pca","mean":[0],"components":[[1]],"eigenvalues":[1,2],"all_eigenvalues":[1],"explained_variance_ratio":[1]}`, "eigenvalues has length 2"},
		{`{"analysis":"dca","mean":[0],"components":[[1]],"eigenvalues":[1],"all_eigenvalues":[1]}`, "unit_components is missing"},
		{`{"analysis":"pca","mean":[0],"components":[],"eigenvalues":[],"all_eigenvalues":[1]}`, "components is empty"},
		{`{"analysis":"pca","mean":[0,1],"components":[[1]],"eigenvalues":[1],"all_eigenvalues":[1],"explained_variance_ratio":[1]}`, "mean has length 2"},
	}
	for _, tc := range bad {
		c := *pca
		err := json.Unmarshal([]byte(tc.json), &c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("unmarshal %s: %v, want %q", tc.json, err, tc.want)
		}
		if c.W != pca.W {
			t.Error("failed unmarshal changed the receiver")
		}
	}
	if _, err := json.Marshal(&Components{Analysis: "pca"}); err == nil {
		t.Error("marshalling an empty Components succeeded")
	}
}

func TestScattersMethodsAndSolve(t *testing.T) {
	m := randomMoments(14, 200, 4, 2)
	s, err := m.Scatters()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{AnalysisPCA, AnalysisDCA, AnalysisLDA} {
		c1, err := s.Solve(a, Options{K: 1})
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Solve(a, m, Options{K: 1})
		if err != nil {
			t.Fatal(err)
		}
		if c1.Analysis != a || !mat.Equal(c1.W, c2.W) {
			t.Errorf("%s: Scatters.Solve and Solve differ", a)
		}
	}
	if _, err := (Scatters{}).PCA(1); err == nil || !strings.Contains(err.Error(), "s_t is nil") {
		t.Errorf("empty scatters: %v", err)
	}
	if _, err := (Scatters{ST: s.ST, Mean: s.Mean, ClassN: s.ClassN}).DCA(Options{}); err == nil || !strings.Contains(err.Error(), "s_w is missing") {
		t.Errorf("scatters without s_w: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	m := randomMoments(15, 300, 6, 3)
	c, _ := DCA(m, Options{})
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			if _, err := DCA(m, Options{}); err != nil {
				t.Error(err)
			}
			c.Project(make([]float64, 6))
			if _, err := json.Marshal(c); err != nil {
				t.Error(err)
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
}

// TestShrinkCentring: the James-Stein centring leaves S_T as it is without
// noise, removes the centring entirely when the noise dominates the mean
// (S_T = R), and in between subtracts c^2 n m m^T with the positive-part
// factor c.
func TestShrinkCentring(t *testing.T) {
	r := mat.NewSymDense(3, []float64{10, 1, 2, 1, 8, 3, 2, 3, 9})
	m := Moments{R: r, V: [][]float64{{3, 4, 0}}, N: []float64{5}}
	sc, err := m.Scatters()
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.ShrinkCentring(0); !mat.EqualApprox(got.ST, sc.ST, 1e-12) {
		t.Error("no noise changed S_T")
	}
	if got := sc.ShrinkCentring(1e9); !mat.EqualApprox(got.ST, r, 1e-9) {
		t.Errorf("noise dominating the mean: S_T %v, want R", mat.Formatted(got.ST))
	}
	// ||v||^2 = 25 is within what noise of variance 5 gives ((3 + 4
	// sqrt(6)) 5 = 64): no centring.
	if got := sc.ShrinkCentring(5); !mat.EqualApprox(got.ST, r, 1e-12) {
		t.Errorf("a mean within the noise: S_T %v, want R", mat.Formatted(got.ST))
	}
	// noiseVar = 1.5: 25 > (3 + 4 sqrt(6)) 1.5 = 19.2, James-Stein
	// c = 1 - 1*1.5/25 = 0.94.
	got := sc.ShrinkCentring(1.5)
	want := mat.NewSymDense(3, nil)
	want.SymRankOne(r, -0.94*0.94/5, mat.NewVecDense(3, []float64{3, 4, 0}))
	if !mat.EqualApprox(got.ST, want, 1e-12) {
		t.Errorf("c = 0.94: S_T %v, want %v", mat.Formatted(got.ST), mat.Formatted(want))
	}
	if !slices.Equal(got.Mean, sc.Mean) || got.SW != sc.SW {
		t.Error("the mean or S_W changed")
	}
	two := Moments{R: mat.NewSymDense(2, []float64{1, 0, 0, 1}), V: [][]float64{{1, 1}}, N: []float64{2}}
	sc2, _ := two.Scatters()
	if got := sc2.ShrinkCentring(100); got.ST != sc2.ST {
		t.Error("d < 3 was shrunk")
	}
}

// TestCovarianceUnbiased: with noise on the class sums, the covariance's
// numerator is unbiased: averaged over many draws it matches the noise-free
// one, where S_T = R - v v^T / n alone would be off by K NoiseV^2 / n.
func TestCovarianceUnbiased(t *testing.T) {
	r := mat.NewSymDense(3, []float64{50, 5, 2, 5, 40, 3, 2, 3, 30})
	v := [][]float64{{3, -2, 1}, {1, 4, -2}}
	n := []float64{20, 30}
	clean, err := Moments{R: r, V: v, N: n}.Covariance(Noise{})
	if err != nil {
		t.Fatal(err)
	}
	const draws, sv = 40000, 3.0
	rng := rand.New(rand.NewPCG(1, 2))
	sum := mat.NewSymDense(3, nil)
	for range draws {
		nv := [][]float64{make([]float64, 3), make([]float64, 3)}
		for k := range v {
			for i := range v[k] {
				nv[k][i] = v[k][i] + sv*rng.NormFloat64()
			}
		}
		c, err := Moments{R: r, V: nv, N: n}.Covariance(Noise{V: sv})
		if err != nil {
			t.Fatal(err)
		}
		sum.AddSym(sum, c.C)
	}
	sum.ScaleSym(1.0/draws, sum)
	// Standard error of the diagonal's mean: about 2 |v_i| sv / (n (n-1)) / sqrt(draws).
	for i := range 3 {
		if d := math.Abs(sum.At(i, i) - clean.C.At(i, i)); d > 2e-3 {
			t.Errorf("entry %d: mean %.5f over noisy draws, noise-free %.5f", i, sum.At(i, i), clean.C.At(i, i))
		}
	}
	// The uncorrected numerator would be lower by K sv^2 / n / (n - 1).
	if bias := 2 * sv * sv / 50 / 49; bias < 5e-3 {
		t.Fatalf("test too weak: bias %g", bias)
	}
}

// TestStandardizedPCAScaleFree: the PCA of the correlation matrix does not
// depend on the features' units: rescaling a column leaves the projections
// of the rows unchanged, and they are those of the standardised rows.
func TestStandardizedPCAScaleFree(t *testing.T) {
	rows := [][]float64{{1, 20, 0.3}, {2, 18, 0.1}, {3, 25, 0.4}, {4, 21, 0.2}, {5, 30, 0.9}, {6, 26, 0.5}}
	scales := []float64{1, 1000, 0.01}
	proj := func(sc []float64) *mat.Dense {
		d := len(sc)
		x := mat.NewDense(len(rows), d, nil)
		for i, r := range rows {
			for j := range d {
				x.Set(i, j, r[j]*sc[j])
			}
		}
		var r mat.SymDense
		r.SymOuterK(1, x.T())
		v := make([]float64, d)
		for i := range rows {
			for j := range d {
				v[j] += x.At(i, j)
			}
		}
		m := Moments{R: &r, V: [][]float64{v}, N: []float64{float64(len(rows))}}
		s, err := m.Scatters()
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := s.StandardizedPCA(2, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c.ProjectBatch(x)
	}
	a, b := proj([]float64{1, 1, 1}), proj(scales)
	if !mat.EqualApprox(a, b, 1e-9) {
		t.Fatalf("projections change with the units:\n%v\n%v", mat.Formatted(a), mat.Formatted(b))
	}
	// The projections have the variance of the correlation's eigenvalues.
	col := mat.Col(nil, 0, a)
	v := 0.0
	for _, x := range col {
		v += x * x
	}
	if v /= float64(len(col)); v < 1 || v > 3 {
		t.Fatalf("first standardised component's variance %v, want in [1, d]", v)
	}
}
