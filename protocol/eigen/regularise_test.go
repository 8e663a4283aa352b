package eigen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/stats"
)

// plainShares shares a packed integer vector mod T between two parties, as
// the encryption to shares leaves it (without the encryption).
func plainShares(t testing.TB, e *mpc.Engine, vec []int64) mpc.ModT {
	t.Helper()
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	T := int64(p.T())
	modT := make([]uint64, len(vec))
	for i, v := range vec {
		modT[i] = uint64((T + v%T) % T)
	}
	return e.ShareModT(modT, p.T())
}

// moments converts a packed vector as the statistics release's user does.
func moments(t testing.TB, l stats.Layout, g uint, vec []int64) analysis.Moments {
	t.Helper()
	rel, err := stats.Unpack(l, g, vec)
	if err != nil {
		t.Fatal(err)
	}
	rr, v, n := rel.Float()
	return analysis.Moments{R: mat.NewSymDense(l.D, rr), V: v, N: n}
}

// classStats are a labelled dataset's packed statistics at g bits.
func classStats(t testing.TB, name string, g uint) (stats.Layout, []int64) {
	t.Helper()
	rows, d, labels, classes := quantisedLabelled(t, name, g)
	l, err := stats.NewLayout(d, classes)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := stats.NewAccumulator(l, 1<<g, g)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range rows {
		if err := acc.Add(q, labels[i]); err != nil {
			t.Fatal(err)
		}
	}
	return l, acc.Pack()
}

// dpRun runs the DP program (DCA, or LDA's rule when within) on vec and
// returns the decoded eigenvalues and components (k of d).
func dpRun(t testing.TB, l stats.Layout, g uint, vec []int64, sigma float64, k int, within bool) ([]float64, [][]float64, mpc.Cost) {
	t.Helper()
	e := twoParties(t)
	job := DCAJob{Layout: l, Bits: g, Clip: 1, K: k, Solver: DefaultShared, NoiseStd: sigma, Doublings: analysis.MaxRetryDoublings, Within: within}
	out, err := job.Run(e, plainShares(t, e, vec))
	if err != nil {
		t.Fatal(err)
	}
	col := e.Reveal(out)
	d := l.D
	vals := make([]float64, k)
	vecs := make([][]float64, k)
	for i := range k {
		vals[i] = col.V[i].Signed(e.P.F)
		vecs[i] = make([]float64, d)
		for r := range d {
			vecs[i][r] = col.V[k+r*k+i].Signed(e.P.F)
		}
	}
	return vals, vecs, e.Cost
}

// angleTo is the angle (radians) between v and w's direction (sign free).
func angleTo(v, w []float64) float64 {
	dot, nv, nw := 0.0, 0.0, 0.0
	for i := range v {
		dot += v[i] * w[i]
		nv += v[i] * v[i]
		nw += w[i] * w[i]
	}
	return math.Acos(math.Min(1, math.Abs(dot)/math.Sqrt(nv*nw)))
}

// TestDPDCASelection: a noisy sum crafted so that the regulariser's first
// candidate leaves S_T + rho I (LDA: S_W + rho I) indefinite; the
// statistics release needs a doubling (or more), and the members' program
// must choose the same rho: the first positive definite candidate, its
// divergent predecessors kept out of it. Its eigenvalues and components
// match the statistics release's solve of the same sum.
func TestDPDCASelection(t *testing.T) {
	if raceEnabled {
		t.Skip("slow under the race detector")
	}
	const g = 16
	l, exact := classStats(t, "wine", g)
	d := l.D
	sigma := 0.5
	margin := analysis.NoiseMargin(sigma, d)
	for _, within := range []bool{false, true} {
		name := analysis.AnalysisDCA
		if within {
			name = analysis.AnalysisLDA
		}
		vec := append([]int64(nil), exact...)
		// R's noise (seeded, of standard deviation sigma), then the first
		// feature's variance taken down by 1.6 margins past its own.
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range l.RLen() {
			vec[i] += int64(math.Round(rng.NormFloat64() * sigma * math.Ldexp(1, 2*g)))
		}
		m := moments(t, l, g, vec)
		sc, err := m.Scatters()
		if err != nil {
			t.Fatal(err)
		}
		s := sc.ST
		if within {
			s = sc.SW
		}
		vec[l.R(0, 0)] -= int64(math.Round((s.At(0, 0) + 1.6*margin) * math.Ldexp(1, 2*g)))
		m = moments(t, l, g, vec)
		opts := analysis.Options{K: 2, Regularizer: analysis.Regularizer{NoiseStd: sigma}}
		want, doublings, err := analysis.SolveWithRetry(name, m, opts)
		if err != nil {
			t.Fatal(err)
		}
		if doublings == 0 {
			t.Fatalf("%s: the crafted sum needs no doubling", name)
		}
		vals, vecs, cost := dpRun(t, l, g, vec, sigma, 2, within)
		t.Logf("%s: %d doublings, rho %.4g; eigenvalues %v, statistics release %v; %d rounds, %.0f MB", name, doublings, want.Rho, vals, want.Eigenvalues, cost.Rounds, float64(cost.BytesPerParty)/1e6)
		for i := range 2 {
			wantV := want.Eigenvalues[i]
			if within {
				wantV /= 1 + wantV // the output is DCA's lambda = mu / (1 + mu)
			}
			if math.Abs(vals[i]-wantV) > 1e-4*math.Max(1, wantV) {
				t.Errorf("%s: eigenvalue %d is %.6g, the statistics release's %.6g", name, i+1, vals[i], wantV)
			}
			if a := angleTo(vecs[i], mat.Col(nil, i, want.Unit)); a > 1e-3 {
				t.Errorf("%s: component %d is %.3g rad from the statistics release's", name, i+1, a)
			}
		}
	}
}

// symmetric returns Q diag(vals) Q^T for a seeded random orthogonal Q.
func symmetric(vals []float64, seed uint64) *mat.SymDense {
	n := len(vals)
	rng := rand.New(rand.NewPCG(seed, 3))
	g := mat.NewDense(n, n, nil)
	for i := range n {
		for j := range n {
			g.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	out := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			s := 0.0
			for k, v := range vals {
				s += q.At(i, k) * v * q.At(j, k)
			}
			out.SetSym(i, j, s)
		}
	}
	return out
}

// TestGuardedWhitening: candidates whitened side by side, two positive
// definite (the same matrix twice), one with an eigenvalue of -1/2 (its
// Newton-Schulz iteration passes 2^21, the fixed point's range, within
// six steps unguarded), one with an eigenvalue of -1e-3 (slow to diverge)
// and one positive definite below the whitening's resolution (1e-8). Only
// the resolved positive definite ones pass; after each of the first 8
// steps and the last the diverging candidate's Z is within the guard's
// bound (it is zeroed once past it); the passing ones are X^-1/2 as if
// whitened alone, whatever their neighbours did.
func TestGuardedWhitening(t *testing.T) {
	const d = 6
	pd := []float64{1, 0.6, 0.3, 0.1, 0.02, 0.004}
	specs := [][]float64{
		{1, 0.6, 0.3, 0.1, -0.5, 0.02},
		pd,
		{1, 0.6, 0.3, 0.1, 0.02, -1e-3},
		{1, 0.6, 0.3, 0.1, 0.02, 1e-8},
		pd,
	}
	want := []uint64{0, 1, 0, 0, 1}
	xs := make([]*mat.SymDense, len(specs))
	for i, s := range specs {
		seed := uint64(i)
		if i == 4 {
			seed = 1 // the same matrix as candidate 1
		}
		xs[i] = symmetric(s, seed)
	}
	g, err := newGuard(d, mpc.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	// Unguarded, the first candidate's iteration leaves the range.
	z, y := mat.NewDense(d, d, nil), mat.DenseCopyOf(xs[0])
	for i := range d {
		z.Set(i, i, 1)
	}
	left := -1
	for step := range WhitenSteps {
		var zy, tt, y2, z2 mat.Dense
		zy.Mul(z, y)
		tt.Scale(-0.5, &zy)
		for i := range d {
			tt.Set(i, i, tt.At(i, i)+1.5)
		}
		y2.Mul(y, &tt)
		z2.Mul(&tt, z)
		y, z = &y2, &z2
		if mat.Norm(z, math.Inf(1)) > 1<<21 || mat.Norm(y, math.Inf(1)) > 1<<21 {
			left = step
			break
		}
	}
	if left < 0 || left > 5 {
		t.Fatalf("unguarded, the indefinite candidate leaves the range at step %d", left)
	}
	e := twoParties(t)
	share := func() []mpc.Shared {
		out := make([]mpc.Shared, len(xs))
		for i, x := range xs {
			rows := make([][]float64, d)
			for r := range d {
				rows[r] = mat.Row(nil, r, x)
			}
			out[i] = e.Share(mpc.EncodeMat(rows, e.P.F))
		}
		return out
	}
	// ||Z~||_F one step after a state within the bounds: ||T||_2 <= 1 + P / 2.
	P := math.Exp2(float64(g.c)) * math.Sqrt(math.Exp2(float64(g.bd)))
	bound := (1 + P/2) * math.Sqrt(math.Exp2(float64(g.by)))
	zeroed := -1
	// Every step count to 8 (the diverging candidate is stopped within
	// them), then all of them.
	for steps := 0; steps <= WhitenSteps; steps++ {
		if steps > 8 && steps < WhitenSteps {
			continue
		}
		zs, pass, err := g.whiten(e, share(), steps)
		if err != nil {
			t.Fatal(err)
		}
		z0 := mat.NewDense(d, d, nil)
		for i, w := range e.Reveal(zs[0]).V {
			z0.Set(i/d, i%d, w.Signed(e.P.F))
		}
		f := mat.Norm(z0, 2) // Frobenius
		if f > bound {
			t.Fatalf("step %d: the indefinite candidate's ||Z~||_F is %g, past the guard's bound %g", steps, f, bound)
		}
		if zeroed < 0 && f < 1e-6 {
			zeroed = steps
		}
		if steps < WhitenSteps {
			continue
		}
		t.Logf("unguarded, the indefinite candidate left the range at step %d; guarded, it was zeroed at step %d (bound on ||Z~||_F %.3g)", left, zeroed, bound)
		if zeroed < 0 || f > 1e-6 {
			t.Errorf("the indefinite candidate's Z~ is %g in norm, want zeroed", f)
		}
		bits := e.Reveal(pass)
		for i := range want {
			if bits.V[i] != (mpc.Word{Lo: want[i]}) {
				t.Errorf("candidate %d: pass %v, want %d", i, bits.V[i], want[i])
			}
		}
		var es mat.EigenSym
		es.Factorize(xs[1], true)
		var q mat.Dense
		es.VectorsTo(&q)
		ev := es.Values(nil)
		inv := mat.NewDense(d, d, nil)
		for i := range d {
			for j := range d {
				s := 0.0
				for k := range d {
					s += q.At(i, k) * q.At(j, k) / math.Sqrt(ev[k])
				}
				inv.Set(i, j, s)
			}
		}
		for _, c := range []int{1, 4} {
			worst := 0.0
			for i, w := range e.Reveal(zs[c]).V {
				worst = math.Max(worst, math.Abs(math.Ldexp(w.Signed(e.P.F), int(g.e))-inv.At(i/d, i%d)))
			}
			if worst > 1e-5 {
				t.Errorf("candidate %d: Z is %.2g from X^-1/2", c, worst)
			}
		}
	}
}

// TestDPDCACost measures the members' program (both parties in one
// process) for docs/PROTOCOL.md 7.2 with DP_DCA_COST=1: DCA with 2
// components on wine (d = 13) and on digits' first 50 features, exact and
// with noise (sigma_R of epsilon 1, the servers plan's order) at 0, 3 and
// 10 doublings: rounds, MB opened per party, seconds.
func TestDPDCACost(t *testing.T) {
	if os.Getenv("DP_DCA_COST") == "" {
		t.Skip("DP_DCA_COST=1 runs the measurement")
	}
	const g = 16
	for _, c := range []struct {
		name string
		d    int
	}{{"wine", 13}, {"digits", 50}} {
		rows, _, labels, classes := quantisedLabelled(t, c.name, g)
		for i := range rows {
			rows[i] = rows[i][:c.d]
		}
		l, err := stats.NewLayout(c.d, classes)
		if err != nil {
			t.Fatal(err)
		}
		acc, err := stats.NewAccumulator(l, 1<<g, g)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range rows {
			if err := acc.Add(q, labels[i]); err != nil {
				t.Fatal(err)
			}
		}
		vec := acc.Pack()
		for _, doublings := range []int{-1, 0, 3, analysis.MaxRetryDoublings} {
			e := twoParties(t)
			job := DCAJob{Layout: l, Bits: g, Clip: 1, K: 2, Solver: DefaultShared}
			what := "exact"
			if doublings >= 0 {
				job.NoiseStd, job.Doublings, what = 5, doublings, fmt.Sprintf("DP, %d doublings", doublings)
			}
			start := time.Now()
			if _, err := job.Run(e, plainShares(t, e, vec)); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("| %s | %d | %s | %d | %.0f | %.2f |\n", c.name, c.d, what, e.Cost.Rounds, float64(e.Cost.BytesPerParty)/1e6, time.Since(start).Seconds())
		}
	}
}
