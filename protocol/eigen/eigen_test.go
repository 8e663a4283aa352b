package eigen

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/fedpca/fedpca/datasets"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"gonum.org/v1/gonum/mat"
)

// covariance reads a bundled dataset as reference.json defines it:
// standardise (population std; constant features divided by 1), clip rows
// to norm 1, centred scatter, here divided by n; first features only when
// maxD > 0. It returns C and n.
func covariance(t testing.TB, name string, maxD int) ([][]float64, int) {
	t.Helper()
	rows, err := datasets.ReferenceRows(name)
	if err != nil {
		t.Fatal(err)
	}
	n, d := len(rows), len(rows[0])
	if maxD > 0 && maxD < d {
		d = maxD
	}
	m := make([]float64, d)
	for _, x := range rows {
		for j := range d {
			m[j] += x[j] / float64(n)
		}
	}
	c := make([][]float64, d)
	for i := range c {
		c[i] = make([]float64, d)
	}
	for _, x := range rows {
		for i := range d {
			for j := range d {
				c[i][j] += (x[i] - m[i]) * (x[j] - m[j]) / float64(n)
			}
		}
	}
	return c, n
}

// exact is the plaintext eigendecomposition, descending.
func exact(t testing.TB, c [][]float64) ([]float64, [][]float64) {
	d := len(c)
	s := mat.NewSymDense(d, nil)
	for i := range d {
		for j := i; j < d; j++ {
			s.SetSym(i, j, c[i][j])
		}
	}
	var es mat.EigenSym
	if !es.Factorize(s, true) {
		t.Fatal("no eigendecomposition")
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	idx := make([]int, d)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return vals[idx[a]] > vals[idx[b]] })
	var ov []float64
	var ovec [][]float64
	for _, i := range idx {
		ov = append(ov, vals[i])
		ovec = append(ovec, mat.Col(nil, i, &vecs))
	}
	return ov, ovec
}

// accuracy compares k Ritz pairs with the exact ones: the largest relative
// eigenvalue error, the largest principal angle between the two k-spaces,
// and the largest angle between matching vectors.
func accuracy(vals []float64, vecs [][]float64, ev []float64, evec [][]float64) (relErr, subspace, vector float64) {
	k := len(vals)
	for i := range k {
		relErr = math.Max(relErr, math.Abs(vals[i]-ev[i])/ev[i])
		dot := 0.0
		for r := range vecs[i] {
			dot += vecs[i][r] * evec[i][r]
		}
		vector = math.Max(vector, math.Acos(math.Min(1, math.Abs(dot))))
	}
	d := len(evec[0])
	u := mat.NewDense(d, k, nil)
	v := mat.NewDense(d, k, nil)
	for i := range k {
		u.SetCol(i, vecs[i])
		v.SetCol(i, evec[i])
	}
	// Orthonormalise the Ritz vectors (they are only nearly orthogonal).
	var qr mat.QR
	qr.Factorize(u)
	var uq mat.Dense
	qr.QTo(&uq)
	var m mat.Dense
	m.Mul(uq.Slice(0, d, 0, k).T(), v)
	var svd mat.SVD
	svd.Factorize(&m, mat.SVDNone)
	sv := svd.Values(nil)
	subspace = math.Acos(math.Min(1, sv[len(sv)-1]))
	return relErr, subspace, vector
}

type result struct {
	relErr, subspace, vector float64
	stats                    Stats
	refreshes                int
	iterations               []time.Duration // wall time of each
	total                    time.Duration   // iterations and final product
}

// newSolver runs the key ceremony of a 3-member committee for cfg and
// encrypts c's diagonals.
func newSolver(t testing.TB, c [][]float64, cfg Config) (*Committee, *Solver) {
	t.Helper()
	rots, err := Rotations(cfg.D, cfg.K, cfg.Baby)
	if err != nil {
		t.Fatal(err)
	}
	com, err := NewCommittee(3, rots, []byte("eigen test crs"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSolver(com, cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	return com, s
}

// solve runs the encrypted iteration end to end for a 3-member committee and
// returns the top-k accuracy against the plaintext decomposition.
func solve(t testing.TB, c [][]float64, k int, cfg Config) result {
	t.Helper()
	d := len(c)
	cfg.D, cfg.K = d, k
	com, s := newSolver(t, c, cfg)
	times := timeIterations(s)
	begin := time.Now()
	q, y, err := s.Run(Start(d, Block(d, k)))
	runTime := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	// The user's key pair (placeholder release of Q and C Q / B).
	kg := rlwe.NewKeyGenerator(com.Params)
	usk, upk := kg.GenKeyPairNew()
	var mats [2][][]float64
	for i, ct := range []*rlwe.Ciphertext{q, y} {
		out, err := com.Release(ct, upk, 3.2)
		if err != nil {
			t.Fatal(err)
		}
		if mats[i], err = s.Decode(out, usk); err != nil {
			t.Fatal(err)
		}
	}
	vals, vecs, err := Ritz(mats[0], mats[1], k, cfg.Bound, RitzTol)
	if err != nil {
		t.Fatal(err)
	}
	ev, evec := exact(t, c)
	var r result
	r.relErr, r.subspace, r.vector = accuracy(vals, vecs, ev, evec)
	r.stats = s.Stats
	r.refreshes = com.Refreshes
	r.iterations, r.total = *times, runTime
	return r
}

func defaultConfig() Config {
	return Config{Iterations: 12, NS: []NSStep{Steep, Steep, Steep}, Bound: 1, Baby: 4}
}

// TestWineComponents runs the whole iteration on wine (d = 13, k = 5) and
// holds it to issue 32's bar: eigenvalues within 1e-4, principal angles
// within 1e-3 rad of gonum's decomposition of the same covariance, whose
// eigenvalues are first checked against reference.json.
func TestWineComponents(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("slow: the encrypted iteration (about 90 s; TestSteps covers each step under -race)")
	}
	c, n := covariance(t, "wine", 0)
	ref, err := datasets.LoadReference("wine")
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := exact(t, c)
	for i := range ev {
		if want := ref.PCAEigenvalues[i] / float64(n); math.Abs(ev[i]-want) > 1e-9*want+1e-15 {
			t.Fatalf("eigenvalue %d: %g, reference.json %g", i, ev[i], want)
		}
	}
	r := solve(t, c, 5, defaultConfig())
	t.Logf("wine k=5: rel err %.2e, subspace angle %.2e, vector angle %.2e, refreshes %d, rotations %d",
		r.relErr, r.subspace, r.vector, r.refreshes, r.stats.Rotations)
	if r.relErr > 1e-4 || r.subspace > 1e-3 {
		t.Fatalf("wine: eigenvalues %.2e (bar 1e-4), angle %.2e rad (bar 1e-3)", r.relErr, r.subspace)
	}
}

// envConfig is defaultConfig with EIGEN_STEPS polar steps and
// EIGEN_ITERATIONS iterations when set.
func envConfig(t testing.TB) Config {
	cfg := defaultConfig()
	if v := os.Getenv("EIGEN_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		cfg.NS = slices.Repeat([]NSStep{Steep}, n)
	}
	if v := os.Getenv("EIGEN_ITERATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Iterations = n
	}
	return cfg
}

// TestDatasets measures every bundled dataset (k = 5, and k = 15 at d >=
// 30) and prints the rows of docs/design-components.md's table. Minutes
// per dataset: it runs only with EIGEN_DATASETS set (all, or a list such
// as wine,wdbc); EIGEN_STEPS and EIGEN_ITERATIONS set the public counts.
func TestDatasets(t *testing.T) {
	v := os.Getenv("EIGEN_DATASETS")
	if v == "" {
		t.Skip("EIGEN_DATASETS=all (or a list) runs the encrypted iteration per dataset")
	}
	names := datasets.Names()
	if v != "all" {
		names = splitComma(v)
	}
	for _, name := range names {
		c, _ := covariance(t, name, 0)
		d := len(c)
		ks := []int{min(5, d)}
		if d >= 30 {
			ks = append(ks, 15)
		}
		for _, k := range ks {
			ev, _ := exact(t, c)
			gap := (ev[k-1] - ev[min(k, d-1)]) / ev[0]
			r := solve(t, c, k, envConfig(t))
			fmt.Printf("| %s | %d | %d | %d | %.4f | %.1e | %.1e | %.1e | %d | %d | %.1f | %.0f |\n", name, d, k, Block(d, k), gap,
				r.relErr, r.subspace, r.vector, r.refreshes, r.stats.Rotations, median(r.iterations).Seconds(), r.total.Seconds())
		}
	}
}

// timeIterations records each iteration's wall time through the hook.
func timeIterations(s *Solver) *[]time.Duration {
	var out []time.Duration
	last := time.Now()
	s.AfterIteration = func(int) {
		now := time.Now()
		out = append(out, now.Sub(last))
		last = now
	}
	return &out
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// idealSecret sums the shares: for test assertions only.
func (c *Committee) idealSecret() *rlwe.SecretKey {
	sk := rlwe.NewSecretKey(c.Params)
	rq := c.Params.RingQP()
	for _, s := range c.shares {
		rq.Add(sk.Value, s.Value, sk.Value)
	}
	return sk
}

// BenchmarkSonar50 times one subspace iteration (the product and the polar
// steps, EIGEN_STEPS of them, with their refreshes) and the final product
// at d = 50, k = 15 (p = 25) on sonar's first 50 features (a real
// 50-feature covariance), for a 3-member committee; key generation and the
// input's encryption are not timed. It reports the iteration's time and the
// refreshes and rotations per op.
func BenchmarkSonar50(b *testing.B) {
	c, _ := covariance(b, "sonar", 50)
	d, k := len(c), 15
	cfg := envConfig(b)
	cfg.D, cfg.K, cfg.Iterations, cfg.Baby = d, k, 1, 8
	com, s := newSolver(b, c, cfg)
	q0 := Start(d, Block(d, k))
	b.ResetTimer()
	for range b.N {
		before := com.Refreshes
		s.Stats = Stats{}
		times := timeIterations(s)
		if _, _, err := s.Run(q0); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(median(*times).Seconds(), "s/iteration")
		b.ReportMetric(float64(com.Refreshes-before), "refreshes/op")
		b.ReportMetric(float64(s.Stats.Rotations), "rotations/op")
	}
}
