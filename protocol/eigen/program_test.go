package eigen

import (
	"bytes"
	"crypto/rand"
	"encoding/csv"
	"math"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/stats"
)

// quantised reads a bundled dataset, standardises it (population std),
// clips the rows to norm 1 and quantises them at g bits, as reference.json
// defines the preprocessing: the rows an owner would accumulate under a
// schema with clip norm 1.
func quantised(t testing.TB, name string, g uint) (rows [][]int64, d int) {
	t.Helper()
	rows, d, _, _ = quantisedLabelled(t, name, g)
	return rows, d
}

// quantisedLabelled is quantised with each row's class (the last column)
// as an index into the sorted class names, and their number.
func quantisedLabelled(t testing.TB, name string, g uint) (rows [][]int64, d int, labels []int, classes int) {
	t.Helper()
	b, err := datasets.CSV(name)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	d = len(recs[0]) - 1
	names := map[string]int{}
	for _, rec := range recs[1:] {
		names[rec[d]] = 0
	}
	sorted := make([]string, 0, len(names))
	for nme := range names {
		sorted = append(sorted, nme)
	}
	slices.Sort(sorted)
	for i, nme := range sorted {
		names[nme] = i
	}
	for _, rec := range recs[1:] {
		labels = append(labels, names[rec[d]])
	}
	classes = len(sorted)
	x := make([][]float64, len(recs)-1)
	for i, rec := range recs[1:] {
		x[i] = make([]float64, d)
		for j := range d {
			if x[i][j], err = strconv.ParseFloat(rec[j], 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	for j := range d {
		mean, ss := 0.0, 0.0
		for _, r := range x {
			mean += r[j]
		}
		mean /= float64(len(x))
		for _, r := range x {
			ss += (r[j] - mean) * (r[j] - mean)
		}
		sd := math.Sqrt(ss / float64(len(x)))
		if sd <= 1e-12*(math.Abs(mean)+1) {
			sd = 1
		}
		for _, r := range x {
			r[j] = (r[j] - mean) / sd
		}
	}
	// Quantise, then clip in integers as owners do (fixedpoint.Clipper).
	clip, err := fixedpoint.NewClipper(1 << g)
	if err != nil {
		t.Fatal(err)
	}
	scale := math.Ldexp(1, int(g))
	for _, r := range x {
		q := make([]int64, d)
		for j, v := range r {
			q[j] = int64(math.Round(v * scale))
		}
		if _, err := clip.Clip(q); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, q)
	}
	return rows, d, labels, classes
}

// encryptedShares accumulates the rows, encrypts the statistics under a
// 2-of-3 committee's key, and runs the encryption to shares with member 2
// down: the two parties' shares mod T (party 0: point 1, the receiver).
func encryptedShares(t testing.TB, l stats.Layout, rows [][]int64, g uint) (mpc.ModT, []int64) {
	t.Helper()
	return encryptedClassShares(t, l, rows, nil, g)
}

// encryptedClassShares is encryptedShares with each row's class.
func encryptedClassShares(t testing.TB, l stats.Layout, rows [][]int64, labels []int, g uint) (mpc.ModT, []int64) {
	t.Helper()
	acc, err := stats.NewAccumulator(l, 1<<g, g)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range rows {
		class := 0
		if labels != nil {
			class = labels[i]
		}
		if err := acc.Add(q, class); err != nil {
			t.Fatal(err)
		}
	}
	vec := acc.Pack()
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	members, pk, err := he.LocalCeremony(p, he.Committee{N: 3, Threshold: 2}, []byte("components test seed"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := he.NewEncryptor(p, pk)
	if err != nil {
		t.Fatal(err)
	}
	cts, err := enc.EncryptVector(vec)
	if err != nil {
		t.Fatal(err)
	}

	active := []he.Point{1, 3}
	own := map[he.Point][]uint64{}
	for _, ct := range cts {
		slots := map[he.Point]he.SlotShare{}
		var pubs []*he.ConversionShare
		for _, pt := range active {
			s, pub, err := members[pt-1].EncToShare(ct, active)
			if err != nil {
				t.Fatal(err)
			}
			slots[pt] = s
			pubs = append(pubs, pub)
		}
		agg, err := he.AggregateConversionShares(p, pubs)
		if err != nil {
			t.Fatal(err)
		}
		if slots[1], err = members[0].GetShare(ct, active, agg, slots[1]); err != nil {
			t.Fatal(err)
		}
		for _, pt := range active {
			own[pt] = append(own[pt], slots[pt]...)
		}
	}
	x := mpc.ModT{T: p.T(), S: [][]uint64{own[1][:len(vec)], own[3][:len(vec)]}}
	return x, vec
}

// TestCovarianceFromEncrypted: wine's statistics, encrypted, converted to
// shares by two of three members, formed into cov / c^2 under MPC, match
// the covariance of the same quantised rows in float64.
func TestCovarianceFromEncrypted(t *testing.T) {
	const g = 16
	rows, d := quantised(t, "wine", g)
	l, err := stats.NewLayout(d, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := encryptedShares(t, l, rows, g)
	e := twoParties(t)
	ints, err := e.FromModT(x)
	if err != nil {
		t.Fatal(err)
	}
	job := PCAJob{Layout: l, Bits: g, Clip: 1, K: 5, Solver: DefaultShared}
	if err := job.Validate(); err != nil {
		t.Fatal(err)
	}
	a, _, err := job.Covariance(e, ints)
	if err != nil {
		t.Fatal(err)
	}
	rounds := e.Cost.Rounds
	got := e.Reveal(a).Decode(e.P.F)
	// float64 reference from the same integer rows.
	n := float64(len(rows))
	s := math.Ldexp(1, -g)
	mean := make([]float64, d)
	for _, q := range rows {
		for j := range d {
			mean[j] += float64(q[j]) * s / n
		}
	}
	worst := 0.0
	for i := range d {
		for j := range d {
			c := 0.0
			for _, q := range rows {
				c += float64(q[i]) * s * float64(q[j]) * s
			}
			c = c/n - mean[i]*mean[j]
			worst = math.Max(worst, math.Abs(got[i][j]-c))
		}
	}
	t.Logf("wine: covariance within %.2e of float64, %d rounds", worst, rounds)
	if worst > 1e-8 {
		t.Fatalf("covariance off by %g", worst)
	}
}

// TestRunWine: the whole program on wine's encrypted statistics with one
// member of three down: the top 5 components and eigenvalues against the
// float64 decomposition of the same quantised rows' covariance.
func TestRunWine(t *testing.T) {
	const g, k = 16, 5
	rows, d := quantised(t, "wine", g)
	l, err := stats.NewLayout(d, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := encryptedShares(t, l, rows, g)
	e := twoParties(t)
	job := PCAJob{Layout: l, Bits: g, Clip: 1, K: k, Solver: DefaultShared}
	out, err := job.Run(e, x)
	if err != nil {
		t.Fatal(err)
	}
	cost := e.Cost
	col := e.Reveal(out)
	f := e.P.F
	vals := make([]float64, k)
	vecs := make([][]float64, k)
	for i := range k {
		vals[i] = col.V[i].Signed(f)
		vecs[i] = make([]float64, d)
		for r := range d {
			vecs[i][r] = col.V[k+r*k+i].Signed(f)
		}
	}
	if n := col.V[k+d*k].Signed(0); n != float64(len(rows))*(1<<g) {
		t.Errorf("n: %g, want %d rows at scale 2^%d", n, len(rows), g)
	}
	// float64 covariance of the same rows.
	c := make([][]float64, d)
	mean := make([]float64, d)
	s := math.Ldexp(1, -g)
	for _, q := range rows {
		for j := range d {
			mean[j] += float64(q[j]) * s / float64(len(rows))
		}
	}
	for i := range d {
		c[i] = make([]float64, d)
		for j := range d {
			for _, q := range rows {
				c[i][j] += float64(q[i]) * s * float64(q[j]) * s / float64(len(rows))
			}
			c[i][j] -= mean[i] * mean[j]
		}
	}
	ev, evec := exact(t, c)
	rel, sub, vec := accuracy(vals, vecs, ev, evec)
	t.Logf("wine k=%d: eigenvalues %.1e, angle %.1e rad, vectors %.1e; %d rounds, %.1f MB per party", k, rel, sub, vec, cost.Rounds, float64(cost.BytesPerParty)/1e6)
	if rel > 1e-4 || sub > 1e-3 {
		t.Fatalf("wine: eigenvalues %.2e (bar 1e-4), angle %.2e rad (bar 1e-3)", rel, sub)
	}
}

// TestRunLarge measures the members' program at d = 784, k = 10 in one
// process (EIGEN_LARGE=1; EIGEN_LARGE=replicated on the replicated
// backend, three parties): synthetic rows with a decaying spectrum,
// encrypted, converted with one member of three down.
func TestRunLarge(t *testing.T) {
	b := dealerBackend
	switch os.Getenv("EIGEN_LARGE") {
	case "":
		t.Skip("EIGEN_LARGE=1 runs d = 784")
	case "replicated":
		b = replicatedBackend
	}
	const g, d, k, n = 16, 784, 10, 2000
	rng := mrand.New(mrand.NewPCG(3, 4))
	rows := make([][]int64, n)
	clip, err := fixedpoint.NewClipper(1 << g)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		q := make([]int64, d)
		for j := range d {
			q[j] = int64(math.Round(rng.NormFloat64() * math.Pow(0.97, float64(j)) * 0.2 * (1 << g)))
		}
		if _, err := clip.Clip(q); err != nil {
			t.Fatal(err)
		}
		rows[i] = q
	}
	l, err := stats.NewLayout(d, 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	x, _ := encryptedShares(t, l, rows, g)
	t.Logf("statistics, encryption and conversion: %v", time.Since(start))
	e := b.engine(t)
	x = b.shares(t, x)
	job := PCAJob{Layout: l, Bits: g, Clip: 1, K: k, Solver: DefaultShared}
	start = time.Now()
	out, err := job.Run(e, x)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("d = %d, k = %d, %s: the program in %v (every party in one process), %d rounds, %.0f MB per party", d, k, b.name, time.Since(start), e.Cost.Rounds, float64(e.Cost.BytesPerParty)/1e6)
	_ = out
}

// twoParties is the engine of two parties (two of three members) with a
// dealer drawing from crypto/rand.
func twoParties(t testing.TB) *mpc.Engine {
	t.Helper()
	dealer, err := mpc.NewDealer(2, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e, err := mpc.NewEngine(2, mpc.DefaultParams, dealer)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
