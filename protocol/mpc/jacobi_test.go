package mpc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// spectrumMatrix returns U diag(lambda) U^T for a random orthogonal U (the
// Q factor of a Gaussian matrix), encoded with f bits, and the float
// matrix that encoding holds.
func spectrumMatrix(rng *rand.Rand, lambda []float64, f uint) (Mat, [][]float64) {
	p := len(lambda)
	g := mat.NewDense(p, p, nil)
	for i := range p {
		for j := range p {
			g.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var u mat.Dense
	qr.QTo(&u)
	a := make([][]float64, p)
	for i := range p {
		a[i] = make([]float64, p)
	}
	for i := range p {
		for j := i; j < p; j++ {
			v := 0.0
			for k := range p {
				v += u.At(i, k) * lambda[k] * u.At(j, k)
			}
			a[i][j], a[j][i] = v, v
		}
	}
	m := EncodeMat(a, f)
	return m, m.Decode(f)
}

// eigRef returns gonum's eigenpairs of a, descending.
func eigRef(t testing.TB, a [][]float64) ([]float64, [][]float64) {
	p := len(a)
	s := mat.NewSymDense(p, nil)
	for i := range p {
		for j := i; j < p; j++ {
			s.SetSym(i, j, a[i][j])
		}
	}
	var es mat.EigenSym
	if !es.Factorize(s, true) {
		t.Fatal("gonum: no eigendecomposition")
	}
	vals := es.Values(nil)
	var vec mat.Dense
	es.VectorsTo(&vec)
	order := make([]int, p)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return vals[order[i]] > vals[order[j]] })
	outV := make([]float64, p)
	outU := make([][]float64, p) // outU[i]: the i-th eigenvector
	for n, i := range order {
		outV[n] = vals[i]
		outU[n] = mat.Col(nil, i, &vec)
	}
	return outV, outU
}

type eigCheck struct {
	valErr    float64 // worst relative eigenvalue error over values >= 1e-3
	angle     float64 // worst eigenvector angle where the gap is >= 1e-4
	dk        float64 // worst angle times gap (Davis-Kahan: the perturbation's norm)
	orth      float64 // worst |V^T V - I| entry over the k vectors
	cost      Cost
	unchecked int // vectors whose gap is below 1e-4
}

// checkSymEig runs SymEig on the encoded a and compares with gonum.
func checkSymEig(t *testing.T, e *Engine, a Mat, af [][]float64, k, sweeps int) eigCheck {
	t.Helper()
	f := e.P.F
	before := e.Cost
	vals, vecs, err := SymEig(e, e.Share(a), k, sweeps)
	if err != nil {
		t.Fatal(err)
	}
	r := eigCheck{cost: Cost{e.Cost.Rounds - before.Rounds, e.Cost.BytesPerParty - before.BytesPerParty}}
	gv := e.Reveal(vals).Decode(f)
	gu := e.Reveal(vecs).Decode(f)
	wv, wu := eigRef(t, af)
	p := len(af)
	for i := range k {
		if i > 0 && gv[i][0] > gv[i-1][0] {
			t.Errorf("eigenvalues out of order: %g after %g", gv[i][0], gv[i-1][0])
		}
		if math.Abs(wv[i]) >= 1e-3 {
			r.valErr = max(r.valErr, math.Abs(gv[i][0]-wv[i])/math.Abs(wv[i]))
		}
		gap := math.Inf(1)
		for j := range p {
			if j != i {
				gap = min(gap, math.Abs(wv[i]-wv[j]))
			}
		}
		dot, norm := 0.0, 0.0
		for r := range p {
			dot += gu[r][i] * wu[i][r]
			norm += gu[r][i] * gu[r][i]
		}
		angle := math.Acos(min(1, math.Abs(dot)/math.Sqrt(norm)))
		if math.Abs(dot) > 1e-3 {
			// the arccos is ill-conditioned near 0: sin of the angle
			s2 := 0.0
			sgn := math.Copysign(1, dot)
			for r := range p {
				d := gu[r][i]/math.Sqrt(norm) - sgn*wu[i][r]
				s2 += d * d
			}
			angle = math.Sqrt(s2)
		}
		r.dk = max(r.dk, angle*gap)
		if gap >= 1e-4 {
			r.angle = max(r.angle, angle)
		} else {
			r.unchecked++
		}
		for j := range k {
			d := 0.0
			for r := range p {
				d += gu[r][i] * gu[r][j]
			}
			if i == j {
				d--
			}
			r.orth = max(r.orth, math.Abs(d))
		}
	}
	return r
}

func spreadSpectrum(p int, rng *rand.Rand) []float64 {
	// From 1 down to 1e-6, log-spaced, with a cluster 1e-3 apart near the
	// top and one in the middle.
	l := make([]float64, p)
	for i := range p {
		l[i] = math.Pow(10, -6*float64(i)/float64(p-1))
	}
	if p >= 6 {
		l[1], l[2] = l[0]-1e-3, l[0]-2e-3
		l[4] = l[3] - 1e-3
	}
	rng.Shuffle(p, func(i, j int) { l[i], l[j] = l[j], l[i] })
	return l
}

// TestSymEig holds SymEig to the brief's bar against gonum: eigenvalues
// >= 1e-3 within 1e-6 relative, eigenvectors with a gap >= 1e-4 within
// 1e-5 rad and every angle within 1e-9 / gap, on spread spectra (1 down to 1e-6, clusters 1e-3 apart), a
// spectrum with negative eigenvalues, a diagonal matrix (every rotation
// the identity) and the zero matrix.
func TestSymEig(t *testing.T) {
	forEngines(t, 3, checkSymEigCases)
}

func checkSymEigCases(t *testing.T, e *Engine) {
	rng := rand.New(rand.NewPCG(21, 22))
	f := e.P.F
	cases := []struct {
		name   string
		lambda []float64
	}{
		{"spread p=6", spreadSpectrum(6, rng)},
		{"spread p=9", spreadSpectrum(9, rng)},
		{"signed p=7", []float64{0.9, -0.8, 0.5, -0.499, 0.3, 1e-4, -1e-5}},
	}
	if !raceEnabled {
		cases = append(cases, struct {
			name   string
			lambda []float64
		}{"spread p=16", spreadSpectrum(16, rng)})
	}
	for _, c := range cases {
		a, af := spectrumMatrix(rng, c.lambda, f)
		p := len(c.lambda)
		r := checkSymEig(t, e, a, af, p, DefaultSweeps)
		t.Logf("%s: eigenvalue rel. err %.1e, angle %.1e (%d vectors with a gap below 1e-4), angle x gap %.1e, orthogonality %.1e, %d rounds, %.1f MB per party",
			c.name, r.valErr, r.angle, r.unchecked, r.dk, r.orth, r.cost.Rounds, float64(r.cost.BytesPerParty)/1e6)
		if r.valErr > 1e-6 || r.angle > 1e-5 || r.dk > 1e-9 || r.orth > 1e-6 {
			t.Errorf("%s: eigenvalues %.1e (bar 1e-6), angles %.1e (bar 1e-5), angle x gap %.1e (bar 1e-9), orthogonality %.1e",
				c.name, r.valErr, r.angle, r.dk, r.orth)
		}
	}
	// A diagonal matrix: rotations with y = 0; the zero matrix: x = y = 0.
	// With the replicated backend the zero matrix is zero only within the
	// truncations' units, and any orthonormal basis is its eigenbasis:
	// the vectors are held to orthonormality alone.
	for _, d := range [][]float64{{0.5, -0.25, 0.75, 0}, {0, 0, 0, 0}} {
		anyBasis := replicatedBackend(e) && d[0] == 0
		a := make([][]float64, len(d))
		for i := range d {
			a[i] = make([]float64, len(d))
			a[i][i] = d[i]
		}
		vals, vecs, err := SymEig(e, e.Share(EncodeMat(a, f)), len(d), 2)
		if err != nil {
			t.Fatal(err)
		}
		gv, gu := e.Reveal(vals).Decode(f), e.Reveal(vecs).Decode(f)
		want := append([]float64(nil), d...)
		sort.Sort(sort.Reverse(sort.Float64Slice(want)))
		for i := range d {
			if math.Abs(gv[i][0]-want[i]) > 1e-8 {
				t.Errorf("diagonal %v: eigenvalue %d = %g, want %g", d, i, gv[i][0], want[i])
			}
			n := 0.0
			for r := range d {
				n += gu[r][i] * gu[r][i]
				if v := math.Abs(gu[r][i]); !anyBasis && v > 1e-8 && math.Abs(v-1) > 1e-8 {
					t.Errorf("diagonal %v: eigenvector %d has entry %g: want a unit vector", d, i, gu[r][i])
				}
			}
			if math.Abs(n-1) > 1e-8 {
				t.Errorf("diagonal %v: eigenvector %d of norm %g", d, i, math.Sqrt(n))
			}
			for j := range i {
				dot := 0.0
				for r := range d {
					dot += gu[r][i] * gu[r][j]
				}
				if math.Abs(dot) > 1e-8 {
					t.Errorf("diagonal %v: eigenvectors %d and %d at dot product %g", d, i, j, dot)
				}
			}
		}
	}
}

// TestSymEigErrors checks the argument errors.
func TestSymEigErrors(t *testing.T) {
	e := newEngine(t, 2)
	sq := e.Share(NewMat(4, 4))
	for _, c := range []struct {
		a         Shared
		k, sweeps int
	}{{e.Share(NewMat(4, 3)), 2, 6}, {sq, 0, 6}, {sq, 5, 6}, {sq, 2, 0}, {e.Share(NewMat(1, 1)), 1, 6}} {
		if _, _, err := SymEig(e, c.a, c.k, c.sweeps); err == nil {
			t.Errorf("%dx%d, k %d, %d sweeps accepted", c.a.R, c.a.C, c.k, c.sweeps)
		}
	}
}

// TestRoundRobinAndNetwork checks that each sweep's steps hold disjoint
// pairs covering every pair once, and that the sorting network sorts
// every 0-1 input (the 0-1 principle) for p up to 12, and random inputs
// up to 33.
func TestRoundRobinAndNetwork(t *testing.T) {
	for p := 2; p <= 33; p++ {
		seen := map[[2]int]int{}
		for _, step := range roundRobin(p) {
			used := map[int]bool{}
			for _, pq := range step {
				if used[pq[0]] || used[pq[1]] || pq[0] >= pq[1] {
					t.Fatalf("p = %d: step %v not disjoint", p, step)
				}
				used[pq[0]], used[pq[1]] = true, true
				seen[pq]++
			}
		}
		if len(seen) != p*(p-1)/2 {
			t.Fatalf("p = %d: %d pairs a sweep, want %d", p, len(seen), p*(p-1)/2)
		}
		layers := oddEvenMerge(p)
		run := func(x []float64) {
			for _, l := range layers {
				for _, ij := range l {
					if x[ij[0]] < x[ij[1]] {
						x[ij[0]], x[ij[1]] = x[ij[1]], x[ij[0]]
					}
				}
			}
			if !sort.IsSorted(sort.Reverse(sort.Float64Slice(x))) {
				t.Fatalf("p = %d: network leaves %v", p, x)
			}
		}
		if p <= 12 {
			for bits := range 1 << p {
				x := make([]float64, p)
				for i := range p {
					x[i] = float64(bits >> i & 1)
				}
				run(x)
			}
		}
		rng := rand.New(rand.NewPCG(uint64(p), 1))
		for range 100 {
			x := make([]float64, p)
			for i := range x {
				x[i] = rng.Float64()
			}
			run(x)
		}
	}
}

// TestSymEigCost reports rounds and bytes per party and the accuracy for
// p = 15 and 25 (k = 5 and 15) and the sweep count (SYMEIG_COST=1; about
// a minute, not under the race detector). SYMEIG_SWEEPS=6,8,10 varies it.
func TestSymEigCost(t *testing.T) {
	if os.Getenv("SYMEIG_COST") == "" {
		t.Skip("SYMEIG_COST=1 measures SymEig's cost at p = 15 and 25")
	}
	sweeps := []int{DefaultSweeps}
	if v := os.Getenv("SYMEIG_SWEEPS"); v != "" {
		sweeps = splitInts(v)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for _, p := range []int{15, 25} {
		// One step's and the sort's share of the cost.
		e := newEngine(t, 3)
		f := (e.P.L - 6) / 2
		A, V := e.Share(NewMat(p, p)), e.Share(NewMat(p, p))
		step := e.Cost
		if _, _, err := e.rotate(A, V, roundRobin(p)[0], f); err != nil {
			t.Fatal(err)
		}
		sorted := e.Cost
		if _, _, err := e.sortDesc(e.Share(NewMat(p, 1)), V, f+2); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("p = %d: a step %d rounds, %.2f MB per party; the sort %d rounds, %.2f MB\n", p,
			sorted.Rounds-step.Rounds, float64(sorted.BytesPerParty-step.BytesPerParty)/1e6,
			e.Cost.Rounds-sorted.Rounds, float64(e.Cost.BytesPerParty-sorted.BytesPerParty)/1e6)
		lambda := spreadSpectrum(p, rng)
		a, af := spectrumMatrix(rng, lambda, e.P.F)
		for _, k := range []int{5, 15} {
			if k > p {
				continue
			}
			for _, s := range sweeps {
				e := newEngine(t, 3)
				r := checkSymEig(t, e, a, af, k, s)
				fmt.Printf("| %d | %d | %d | %d | %.1f | %.1e | %.1e | %.1e | %.1e |\n", p, k, s, r.cost.Rounds,
					float64(r.cost.BytesPerParty)/1e6, r.valErr, r.angle, r.dk, r.orth)
			}
		}
	}
}

func splitInts(s string) []int {
	var out []int
	n, in := 0, false
	for _, c := range s + "," {
		if c >= '0' && c <= '9' {
			n, in = 10*n+int(c-'0'), true
		} else if in {
			out = append(out, n)
			n, in = 0, false
		}
	}
	return out
}

// TestSymEigOverNet runs SymEig (p = 4, two sweeps) and the scalar
// functions as separate party engines over LocalNets: the program touches
// only each party's own share and its control flow does not depend on the
// data (the dealer's corrections come from a run on zero shares).
func TestSymEigOverNet(t *testing.T) {
	const n = 3
	rng := rand.New(rand.NewPCG(41, 42))
	f := DefaultParams.F
	a, _ := spectrumMatrix(rng, []float64{0.9, 0.5, -0.3, 1e-3}, f)
	prog := func(e *Engine, x Shared, _ ModT) []Mat {
		vals, vecs, err := SymEig(e, x, 2, 2)
		if err != nil {
			t.Error(err)
			return nil
		}
		col := e.each(x, func(_ int, s Mat) Mat { return Mat{R: 4, C: 1, V: s.V[:4]} })
		pos, _ := e.Abs(col, f+2)
		r, _ := e.Reciprocal(pos)
		s, _ := e.Sqrt(pos)
		return []Mat{e.Reveal(vals), e.Reveal(vecs), e.Reveal(r), e.Reveal(s)}
	}
	ref := newEngine(t, n)
	want := prog(ref, ref.Share(a), ModT{T: 7, S: make([][]uint64, n)})
	in := newEngine(t, n)
	xt := ModT{T: 7, S: make([][]uint64, n)}
	for i := range n {
		xt.S[i] = []uint64{0}
	}
	got := overNet(t, n, in.Share(a), xt, prog)
	for i := range n {
		for k := range want {
			for j := range want[k].V {
				if d := math.Abs(got[i][k].V[j].Signed(f) - want[k].V[j].Signed(f)); d > 1e-6 {
					t.Fatalf("party %d output %d entry %d: %g, want %g", i, k, j, got[i][k].V[j].Signed(f), want[k].V[j].Signed(f))
				}
			}
		}
	}
}
