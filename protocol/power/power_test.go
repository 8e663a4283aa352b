package power

import (
	"bytes"
	"crypto/rand"
	"math"
	"math/big"
	mrand "math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/schema"
)

// floatRows reads a bundled dataset with reference.json's preprocessing
// (datasets.ReferenceRows): the input, not the golden numbers, which come
// from reference.json.
func floatRows(t *testing.T, name string) [][]float64 {
	t.Helper()
	rows, err := datasets.ReferenceRows(name)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// startQ is Q_1 from the seed, quantised.
func startQ(tb testing.TB, pr Params) *QMatrix {
	tb.Helper()
	q0, err := Start(pr)
	if err != nil {
		tb.Fatal(err)
	}
	q, _, err := Quantize(q0, pr.QBits)
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// compareReference checks the components against reference.json's top k
// eigenvectors (same sign convention) entry by entry.
func compareReference(t *testing.T, name string, got Components, tol float64) float64 {
	t.Helper()
	ref, err := datasets.LoadReference(name)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	_, kk := got.W.Dims()
	for j := range kk {
		for i, want := range ref.PCATopK[j] {
			worst = math.Max(worst, math.Abs(got.W.At(i, j)-want))
		}
		if rel := math.Abs(got.Values[j]-ref.PCAEigenvalues[j]) / ref.PCAEigenvalues[j]; rel > tol {
			t.Errorf("%s: eigenvalue %d = %.10g, reference %.10g (relative %.2g > %.2g)", name, j, got.Values[j], ref.PCAEigenvalues[j], rel, tol)
		}
	}
	if worst > tol {
		t.Errorf("%s: components differ from reference.json's by %.3g > %.3g", name, worst, tol)
	}
	return worst
}

// TestNoiselessGolden runs the power method without noise and without
// quantisation (Y = S Q in float64 from the reference's preprocessing) and
// compares its components and eigenvalues with reference.json's exact top k
// to 1e-6.
func TestNoiselessGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		k, p   int
		rounds int
	}{{"wine", 5, 10, 40}, {"digits", 5, 15, 60}} {
		rows := floatRows(t, tc.name)
		d, n := len(rows[0]), len(rows)
		x := mat.NewDense(n, d, nil)
		for i, r := range rows {
			x.SetRow(i, r)
		}
		// S = sum (z - m)(z - m)^T.
		var s mat.Dense
		s.Mul(x.T(), x)
		m := make([]float64, d)
		for _, r := range rows {
			for j, v := range r {
				m[j] += v / float64(n)
			}
		}
		mv := mat.NewVecDense(d, m)
		s.RankOne(&s, -float64(n), mv, mv)
		pr := Params{D: d, K: tc.k, P: tc.p, Rounds: tc.rounds, Seed: []byte("golden"), Bits: 16, Bound: 1 << 16, QBits: 16, MaxRows: 1}
		q, err := Start(pr)
		if err != nil {
			t.Fatal(err)
		}
		var y mat.Dense
		for range pr.Rounds {
			y.Mul(&s, q)
			if q, err = Orth(&y); err != nil {
				t.Fatal(err)
			}
		}
		y.Mul(&s, q)
		got, err := Finish(pr, q, &y)
		if err != nil {
			t.Fatal(err)
		}
		worst := compareReference(t, tc.name, got, 1e-6)
		ritz, err := FinishRitz(pr, q, &y)
		if err != nil {
			t.Fatal(err)
		}
		worstRitz := compareReference(t, tc.name, ritz, 1e-6)
		t.Logf("%s: k = %d, p = %d, %d rounds: largest difference %.2g (Rayleigh-Ritz %.2g)", tc.name, tc.k, tc.p, tc.rounds, worst, worstRitz)
	}
}

// TestNoiselessIntegers runs the protocol's integer path without noise on
// wine: rows quantised and clipped by the schema (g = 17), round 0 and every
// round's statistic summed by owners' Accumulators over three owners,
// public matrices at h = 17, decoded and centred by the user. Against
// reference.json: the fixed point's rounding (2^-18 per row entry, 2^-18 per
// matrix entry) bounds the agreement, 2e-5.
func TestNoiselessIntegers(t *testing.T) {
	raw, err := datasets.CSV("wine")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Infer(bytes.NewReader(raw), "wine", "label")
	if err != nil {
		t.Fatal(err)
	}
	sch.Bits = 17
	rows, err := schema.NewCSVRows(bytes.NewReader(raw), schema.CSVOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rm, err := sch.NewRowMap(rows, false)
	if err != nil {
		t.Fatal(err)
	}
	var qs [][]int64
	for {
		rec, err := rows.Next()
		if err != nil {
			break
		}
		q := make([]int64, len(sch.Features))
		if _, _, err := rm.Map(rec, rows.Line(), q); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	d := len(sch.Features)
	pr := Params{D: d, K: 5, P: 10, Rounds: 40, Seed: []byte("wine"), Bits: 17, Bound: sch.Bound(), QBits: 17, MaxRows: 180}
	owners := [][][]int64{qs[:60], qs[60:120], qs[120:]}
	sum := func(q *QMatrix) []int64 {
		var out []int64
		for _, part := range owners {
			acc, err := NewAccumulator(pr, q, 100)
			if err != nil {
				t.Fatal(err)
			}
			if err := acc.Add(part); err != nil {
				t.Fatal(err)
			}
			if out == nil {
				out = make([]int64, len(acc.Values()))
			}
			for i, x := range acc.Values() {
				out[i] += x
			}
		}
		return out
	}
	cal := NoNoise(pr)
	mean, err := DecodeMean(pr, cal, sum(nil))
	if err != nil {
		t.Fatal(err)
	}
	if mean.Shrink != 1 || mean.N != float64(len(qs)) {
		t.Fatalf("round 0 without noise: n = %v (want %d), centring %v (want 1)", mean.N, len(qs), mean.Shrink)
	}
	q := startQ(t, pr)
	var yc *mat.Dense
	for r := 1; r <= pr.Rounds; r++ {
		if yc, err = DecodeRound(pr, q, sum(q), mean); err != nil {
			t.Fatal(err)
		}
		if r < pr.Rounds {
			if q, err = Next(pr, yc); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := Finish(pr, q.Float(), yc)
	if err != nil {
		t.Fatal(err)
	}
	worst := compareReference(t, "wine", got, 2e-5)
	t.Logf("integer path: largest difference %.2g", worst)
}

// TestAccumulatorExact checks an owner's round statistic against a
// big-integer computation, for every grouping of the rows, and that rows
// outside the clip bound or beyond the cap are refused.
func TestAccumulatorExact(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(1, 2))
	pr := Params{D: 40, K: 2, P: 5, Rounds: 3, Seed: []byte("s"), Bits: 16, Bound: 1 << 16, QBits: 14, MaxRows: 1000}
	qq := startQ(t, pr)
	rows := make([][]int64, 57)
	for i := range rows {
		rows[i] = make([]int64, pr.D)
		for j := range rows[i] {
			rows[i][j] = int64(rng.IntN(2*9000+1) - 9000) // ||q|| <= 9000 sqrt(40) < 2^16
		}
	}
	want := make([]*big.Int, pr.Len())
	for i := range want {
		want[i] = new(big.Int)
	}
	for _, q := range rows {
		for c := range pr.P {
			tc := new(big.Int)
			for j, x := range q {
				tc.Add(tc, new(big.Int).Mul(big.NewInt(x), big.NewInt(qq.At(j, c))))
			}
			for j, x := range q {
				want[j*pr.P+c].Add(want[j*pr.P+c], new(big.Int).Mul(big.NewInt(x), tc))
			}
		}
	}
	for _, split := range []int{57, 1, 20} {
		acc, err := NewAccumulator(pr, qq, 100)
		if err != nil {
			t.Fatal(err)
		}
		for lo := 0; lo < len(rows); lo += split {
			if err := acc.Add(rows[lo:min(lo+split, len(rows))]); err != nil {
				t.Fatal(err)
			}
		}
		for i, x := range acc.Values() {
			if want[i].Cmp(big.NewInt(x)) != 0 {
				t.Fatalf("batches of %d: entry %d = %d, want %s", split, i, x, want[i])
			}
		}
	}
	acc, _ := NewAccumulator(pr, qq, 2)
	far := make([]int64, pr.D)
	far[3] = pr.Bound + 1
	if err := acc.Add([][]int64{far}); err == nil {
		t.Error("a row outside the clip bound was added")
	}
	if err := acc.Add(rows[:3]); err != ErrRowCap {
		t.Errorf("3 rows under a cap of 2: %v, want ErrRowCap", err)
	}
	if acc.Rows() != 0 {
		t.Errorf("refused rows were counted: %d", acc.Rows())
	}
}

// TestCheckQ: Quantize's matrices pass; a matrix whose spectral norm
// exceeds 2^h (two equal columns, or entries above 2^h) is refused, as is a
// wrong shape.
func TestCheckQ(t *testing.T) {
	for _, dims := range [][2]int{{30, 5}, {2000, 20}} {
		pr := Params{D: dims[0], K: 1, P: dims[1], Rounds: 1, Seed: []byte("q"), Bits: 16, Bound: 1 << 16, QBits: 12, MaxRows: 10}
		q0, err := Start(pr)
		if err != nil {
			t.Fatal(err)
		}
		qq, c, err := Quantize(q0, pr.QBits)
		if err != nil {
			t.Fatal(err)
		}
		if c < 0.95 {
			t.Errorf("%v: shrink %v below 0.95", dims, c)
		}
		if err := CheckQ(qq, pr.D, pr.P, pr.QBits); err != nil {
			t.Fatal(err)
		}
		if err := CheckQ(qq, pr.D, pr.P+1, pr.QBits); err == nil {
			t.Error("a wrong shape passed")
		}
		// Unshrunk rounding: ||round(2^h Q)||_2 is above 2^h by about the rounding.
		bad := &QMatrix{D: pr.D, P: pr.P, H: pr.QBits, Data: make([]int64, len(qq.Data))}
		for i := range pr.D {
			for j := range pr.P {
				bad.Data[i*pr.P+j] = int64(math.Round(math.Ldexp(q0.At(i, 0), int(pr.QBits))))
			}
		}
		if err := CheckQ(bad, pr.D, pr.P, pr.QBits); err == nil {
			t.Errorf("%v: a matrix of %d equal unit columns (norm 2^h sqrt(p)) passed", dims, pr.P)
		}
		big := &QMatrix{D: pr.D, P: pr.P, H: pr.QBits, Data: append([]int64(nil), qq.Data...)}
		big.Data[0] = 1<<pr.QBits + 1
		if err := CheckQ(big, pr.D, pr.P, pr.QBits); err == nil {
			t.Error("an entry above 2^h passed")
		}
	}
}

// TestNeighboursWithinMu: for rows at the clip norm, the change of the
// whole job's releases (every round under its own public matrix, v and n)
// between neighbours (a row added; a row replaced by another) weighed by
// the calibrated variances is at most mu^2, and the bound is nearly reached.
func TestNeighboursWithinMu(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(3, 4))
	// p = d: every row is in the span of every round's matrix, where the
	// bound ||Qq^T q|| <= 2^h ||q|| is nearly reached.
	pr := Params{D: 12, K: 2, P: 12, Rounds: 5, Seed: []byte("n"), Bits: 10, Bound: 1 << 10, QBits: 12, MaxRows: 100}
	sb := dp.ShareBound{Max: 3, MinWeight: big.NewRat(1, 2)}
	cal, err := Calibrate(pr, 1, 1e-6, dp.DefaultSplit, sb)
	if err != nil {
		t.Fatal(err)
	}
	if !cal.Cost.Within(1, 1e-6) || cal.Cost.Epsilon(1e-6) < 0.99 {
		t.Fatalf("cost %+v certifies epsilon %v, want just within 1", cal.Cost, cal.Cost.Epsilon(1e-6))
	}
	qs := make([]*QMatrix, pr.Rounds)
	for r := range qs {
		pr.Seed = []byte{byte(r)}
		qs[r] = startQ(t, pr)
	}
	atNorm := func() []int64 {
		f := make([]float64, pr.D)
		n := 0.0
		for j := range f {
			f[j] = rng.NormFloat64()
			n += f[j] * f[j]
		}
		q := make([]int64, pr.D)
		for j := range q {
			q[j] = int64(math.Floor(f[j] / math.Sqrt(n) * float64(pr.Bound)))
		}
		return q
	}
	vy, _ := new(big.Rat).SetInt(cal.VarY).Float64()
	vv, _ := new(big.Rat).SetInt(cal.VarV).Float64()
	vn, _ := new(big.Rat).SetInt(cal.VarN).Float64()
	mu2 := 2 * float64(cal.Cost.Rho)
	worst := 0.0
	for range 200 {
		a, b := atNorm(), atNorm()
		if rng.IntN(2) == 0 {
			// b orthogonal to a (up to rounding): the worst replacement
			// when the rounds hold most of the budget.
			fa, fb, ab, aa := make([]float64, pr.D), make([]float64, pr.D), 0.0, 0.0
			for j := range fa {
				fa[j], fb[j] = float64(a[j]), float64(b[j])
				ab += fa[j] * fb[j]
				aa += fa[j] * fa[j]
			}
			n := 0.0
			for j := range fb {
				fb[j] -= ab / aa * fa[j]
				n += fb[j] * fb[j]
			}
			for j := range b {
				b[j] = int64(math.Floor(fb[j] / math.Sqrt(n) * float64(pr.Bound)))
			}
		}
		// add a: each round's change a a^T Qq, v by a, n by 2^g.
		add, rep := 0.0, 0.0
		for _, q := range qs {
			for _, pair := range []struct {
				dst *float64
				in  [][]int64
				out [][]int64
			}{{&add, [][]int64{a}, nil}, {&rep, [][]int64{a}, [][]int64{b}}} {
				one, _ := NewAccumulator(pr, q, 10)
				one.Add(pair.in)
				y := append([]int64(nil), one.Values()...)
				if pair.out != nil {
					two, _ := NewAccumulator(pr, q, 10)
					two.Add(pair.out)
					for i, x := range two.Values() {
						y[i] -= x
					}
				}
				for _, x := range y {
					*pair.dst += float64(x) * float64(x) / vy
				}
			}
		}
		for j := range pr.D {
			add += float64(a[j]) * float64(a[j]) / vv
			rep += float64(a[j]-b[j]) * float64(a[j]-b[j]) / vv
		}
		add += math.Ldexp(1, int(2*pr.Bits)) / vn
		worst = max(worst, add, rep)
		if add > mu2 || rep > mu2 {
			t.Fatalf("neighbours change the job by mu^2 %v (add) / %v (replace) > calibrated %v", add, rep, mu2)
		}
	}
	if worst < 0.9*mu2 {
		t.Errorf("largest change %v is far below the calibrated mu^2 %v: the bound is loose", worst, mu2)
	}
	t.Logf("mu^2 %.4g, largest change between neighbours %.4g; sigma_Y = %.3g C^2, factor %.3f", mu2, worst, cal.SigmaY(), cal.Factor)
}

// TestCalibrationComposes: the job's cost is all its rounds' (more rounds,
// proportionally more variance per round at the same budget) and within
// the budget; the noise drawn has the calibrated variance.
func TestCalibrationComposes(t *testing.T) {
	base := Params{D: 1000, K: 10, P: 20, Rounds: 4, Seed: []byte("c"), Bits: 16, Bound: 1 << 16, QBits: 12, MaxRows: 10000}
	sb := dp.ShareBound{Max: 3, MinWeight: big.NewRat(1, 2)}
	c4, err := Calibrate(base, 1, 1e-6, dp.DefaultSplit, sb)
	if err != nil {
		t.Fatal(err)
	}
	eight := base
	eight.Rounds = 8
	c8, err := Calibrate(eight, 1, 1e-6, dp.DefaultSplit, sb)
	if err != nil {
		t.Fatal(err)
	}
	ratio, _ := new(big.Rat).SetFrac(c8.VarY, c4.VarY).Float64()
	if math.Abs(ratio-2) > 0.01 {
		t.Errorf("8 rounds' variance / 4 rounds' = %v, want 2", ratio)
	}
	for _, c := range []Calibration{c4, c8} {
		if e := c.Cost.Epsilon(1e-6); e > 1 || e < 0.999 {
			t.Errorf("composed cost certifies epsilon %v", e)
		}
	}
	// One round's cost alone is well within: the job is charged the sum.
	one := base
	one.Rounds = 1
	single := JobCost(one, c4.VarY, c4.VarV, c4.VarN, 1e-6, sb)
	if single.Rho >= c4.Cost.Rho {
		t.Errorf("a single round costs rho %v, the job %v", single.Rho, c4.Cost.Rho)
	}
	w := big.NewRat(1, 2)
	noise, err := c4.Noise(2, w, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := new(big.Rat).Mul(new(big.Rat).SetInt(c4.VarY), w).Float64()
	ss := 0.0
	for _, x := range noise {
		ss += float64(x) * float64(x)
	}
	got := ss / float64(len(noise))
	// 20,000 draws: the variance estimate's relative std is sqrt(2/20000) = 0.01.
	if math.Abs(got/v-1) > 0.05 {
		t.Errorf("noise variance %.4g, want %.4g", got, v)
	}
	t.Logf("d = 1000, p = 20: sigma_Y = %.3f C^2 at 4 rounds, %.3f at 8", c4.SigmaY(), c8.SigmaY())
}
