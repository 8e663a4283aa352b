package profile

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

func TestSplitComposesToTotal(t *testing.T) {
	b, err := Split(1, 1e-6, 0.1, RoundShares[Quantiles])
	if err != nil {
		t.Fatal(err)
	}
	mu2 := b.Mu * b.Mu
	for _, r := range b.Rounds {
		mu2 += r.Mu * r.Mu
		if !(r.Epsilon < b.Main) {
			t.Errorf("round %+v above the main job's %v", r, b.Main)
		}
	}
	if got := dp.GaussEpsilon(math.Sqrt(mu2), 1e-6); math.Abs(got-1) > 1e-6 || len(b.Rounds) != 3 {
		t.Fatalf("the rounds compose to epsilon %v, want 1 (%+v)", got, b)
	}
	// With public scales the norms round takes the whole share.
	n, err := Split(1, 1e-6, 0.1, []float64{1})
	if err != nil || len(n.Rounds) != 1 || math.Abs(n.Rounds[0].Mu*n.Rounds[0].Mu+n.Mu*n.Mu-mu2) > 1e-12 || n.Main != b.Main {
		t.Fatalf("norms only: %+v (%v)", n, err)
	}
	for _, bad := range []struct {
		share float64
		f     []float64
	}{{0, []float64{1}}, {1, []float64{1}}, {0.1, []float64{0.5, 0.4}}, {0.1, []float64{1.5, -0.5}}, {0.1, nil}} {
		if _, err := Split(1, 1e-6, bad.share, bad.f); err == nil {
			t.Errorf("shares %v accepted", bad)
		}
	}
}

// TestAutoQuantile: the regime follows n mu / sqrt(d) (the bundled
// datasets at epsilon 1 fall in all three: wdbc, 569 rows and 30 features,
// about 23; satellite, 6,435 and 36, about 240; letter, 20,000 and 16,
// about 1,100).
func TestAutoQuantile(t *testing.T) {
	mu := dp.GaussMu(1, 1e-6) * math.Sqrt(1-DefaultShare)
	at := func(r float64, d int) float64 { return r * math.Sqrt(float64(d)) / mu }
	for _, c := range []struct {
		n    float64
		d    int
		want float64
	}{{569, 30, SmallQuantile}, {6435, 36, MiddleQuantile}, {20000, 16, LargeQuantile},
		{at(SmallThreshold*0.99, 30), 30, SmallQuantile}, {at(SmallThreshold*1.01, 30), 30, MiddleQuantile},
		{at(MiddleThreshold*0.99, 30), 30, MiddleQuantile}, {at(MiddleThreshold*1.01, 30), 30, LargeQuantile}} {
		if got := AutoQuantile(c.n, mu, c.d); got != c.want {
			t.Errorf("n %v, d %d: quantile %v, want %v", c.n, c.d, got, c.want)
		}
	}
}

func TestBoundsSchema(t *testing.T) {
	s, err := schema.Parse([]byte(`{"id":"b","features":[{"name":"a","center":0,"scale":1,"min":-0.5,"max":120},{"name":"b","center":0,"scale":1,"min":0.001,"max":0.002}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := BoundsSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	// (min+max)/2 and (max-min)/2 exactly, C = sqrt(2) rounded up.
	want := [][2]string{{"59.75", "60.25"}, {"0.0015", "0.0005"}}
	for i, f := range b.Features {
		if f.Center.String() != want[i][0] || f.Scale.String() != want[i][1] {
			t.Errorf("feature %s: center %s scale %s, want %v", f.Name, f.Center, f.Scale, want[i])
		}
	}
	if b.ClipNorm.String() != "1.415" || b.InBox() != nil || s.SameReading(b) != nil {
		t.Errorf("C %s, in box %v, same reading %v", b.ClipNorm, b.InBox(), s.SameReading(b))
	}
	s.Features[1].Max = nil
	if _, err := BoundsSchema(s); err == nil {
		t.Error("a feature without bounds accepted")
	}

	// A one-hot category feature needs no declared bounds: an indicator is
	// in [0, 1], mapped onto [-1, 1]; the bounds schema reads as the
	// declared one (owners accept its jobs).
	c, err := schema.Parse([]byte(`{"id":"c","features":[{"name":"a","min":0,"max":10},` +
		`{"name":"kind=x","column":"kind","category":"x"},{"name":"kind=y","column":"kind","category":"y"}],` +
		`"categorical":[{"column":"kind","categories":["x","y"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err = BoundsSchema(c)
	if err != nil {
		t.Fatalf("one-hot features without bounds: %v", err)
	}
	if f := b.Features[1]; f.Center.String() != "0.5" || f.Scale.String() != "0.5" || b.InBox() != nil || c.SameReading(b) != nil {
		t.Errorf("category feature: center %s scale %s, in box %v, same reading %v", f.Center, f.Scale, b.InBox(), c.SameReading(b))
	}
}

func TestClipAt(t *testing.T) {
	edges := []fixedpoint.Decimal{fixedpoint.MustDecimal("1"), fixedpoint.MustDecimal("2"), fixedpoint.MustDecimal("4")}
	l, _ := stats.NewLayoutOf(stats.Histogram, 3, 4)
	// Counts (at scale 2^g) 10, -3 (noise), 60, 30, 0: the cumulative share
	// passes 0.5 in bucket 2 (below edge 4), 1.0 only past the last edge.
	rel, err := stats.Unpack(l, 4, []int64{10 << 4, -3 << 4, 60 << 4, 30 << 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := NoisyCount(rel); got != 97 {
		t.Errorf("noisy count %v, want 97 (unbiased: the negative count included)", got)
	}
	for q, want := range map[float64]string{0.05: "1", 0.5: "4", 0.7: "4", 1: "4"} {
		c, err := ClipAt(edges, rel, q)
		if err != nil || c.String() != want {
			t.Errorf("quantile %v: C %v (%v), want %s", q, c, err, want)
		}
	}
	if e := Edges(16); len(e) != 29 || e[20].String() != "4" || e[0].String() != "0.125" || e[28].String() != "16" {
		t.Errorf("edges for d = 16: %v", e)
	}
}

// TestMainEpsilonWithinTotal: the profile's rounds and the main job, each
// calibrated at 4, 8 and 16 fractional bits (d = 30), compose (dp.Compose,
// discrete corrections included: the owners' one account) to at most the
// total budget when the main job gets MainEpsilon, and to within 1e-5 of
// it. The epsilons of Split alone leave no room for the corrections: at 4
// and 8 bits they compose to more than the total.
func TestMainEpsilonWithinTotal(t *testing.T) {
	const d, delta = 30, 1e-6
	for _, g := range []uint{4, 8, 16} {
		b, err := Split(1, delta, DefaultShare, RoundShares[Moments])
		if err != nil {
			t.Fatal(err)
		}
		mom, _ := stats.NewLayoutOf(stats.Moments, d, 1)
		hist, _ := stats.NewLayoutOf(stats.Histogram, d, 21)
		full, _ := stats.NewLayout(d, 1)
		cost := func(eps float64, l stats.Layout, split dp.Split, bound int64) dp.Cost {
			c, err := dp.Calibrate(eps, delta, split, l, bound, g)
			if err != nil {
				t.Fatal(err)
			}
			return c.Cost
		}
		h := int64(1) << g
		rounds := dp.Compose(cost(b.Rounds[0].Epsilon, mom, MomentsSplit, int64(math.Floor(math.Sqrt(d)*float64(h)))), cost(b.Rounds[1].Epsilon, hist, NormsSplit, h))
		mainOf := func(eps float64) (dp.Cost, error) { return cost(eps, full, dp.DefaultSplit, h/2), nil }
		main, err := MainEpsilon(1, delta, rounds, mainOf)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := mainOf(main)
		_, total := Total(delta, rounds, m)
		if total > 1 || total < 1-1e-5 {
			t.Errorf("g = %d: main epsilon %v, total %.9f", g, main, total)
		}
		old, _ := mainOf(b.Main)
		_, naive := Total(delta, rounds, old)
		if g < 16 && naive <= 1 {
			t.Errorf("g = %d: Split's main epsilon %v composes to %.9f, not above 1", g, b.Main, naive)
		}
		t.Logf("g = %2d: main epsilon %.7f (Split's %.7f), total %.7f (Split's %.7f)", g, main, b.Main, total, naive)
	}
}

// TestSpan: a window grows from the buckets above the seed level through
// neighbours above the growth level, one bucket more each side; a bucket
// above the growth level alone, away from the others, is noise; without a
// seed there is no window.
func TestSpan(t *testing.T) {
	// 8 buckets on [-1, 1] (width 0.25); seed 10, grow 4.
	m := Marginal{Lo: -1, Hi: 1, Counts: []float64{0, 5, 0, 6, 50, 12, 0, 0}}
	lo, hi, ok := m.Span(10, 4)
	// Buckets 3 (6, next to the seed), 4 and 5 (seeds); bucket 1 (5) is
	// alone: the window is buckets 2..6.
	if !ok || lo != -0.5 || hi != 0.75 {
		t.Errorf("window [%v, %v] %v, want [-0.5, 0.75]", lo, hi, ok)
	}
	// With every bucket above 4 a seed (the single threshold of before),
	// the lone bucket 1 stretches the window to the edge.
	if lo, hi, _ := m.Span(4, 4); lo != -1 || hi != 0.75 {
		t.Errorf("single threshold: window [%v, %v], want [-1, 0.75]", lo, hi)
	}
	if lo, hi, ok := (Marginal{Lo: -1, Hi: 1, Counts: []float64{3, 9, 5, 0}}).Span(10, 4); ok || lo != -1 || hi != 1 {
		t.Errorf("no seed: [%v, %v] %v, want the whole range and false", lo, hi, ok)
	}
}

// TestSeedSignificance: noise alone (standard normal per bucket) exceeds
// the seed level in any of the round's d k buckets with probability at most
// SeedAlpha (the union bound), and close to it.
func TestSeedSignificance(t *testing.T) {
	for _, d := range []int{1, 9, 30, 784} {
		z := SeedSignificance(d, CoarseBuckets)
		tail := 0.5 * math.Erfc(z/math.Sqrt2) // P(N(0,1) > z)
		buckets := float64(d * CoarseBuckets)
		if any := 1 - math.Pow(1-tail, buckets); any > SeedAlpha || any < 0.95*SeedAlpha {
			t.Errorf("d = %d: seed at %.3f noise, P(noise seeds somewhere) = %.4f, want at most %v and close to it", d, z, any, SeedAlpha)
		}
	}
	if z := SeedSignificance(9, 32); math.Abs(z-3.5773) > 1e-3 {
		t.Errorf("d = 9: %v, want 3.577", z)
	}
}

// fromMoments returns FromMoments' estimate for d features declared on
// [0, 10] (8 fractional bits) from a moments release of sums of squares rr,
// sums v and count n (data units of the bounds schema) with the noise
// levels sigmaR and sigmaV.
func fromMoments(t *testing.T, rr, v []int64, n int64, sigmaR, sigmaV float64) *Estimate {
	t.Helper()
	d := len(v)
	s := &schema.Schema{ID: "m", Bits: 8}
	for j := range d {
		lo, hi := fixedpoint.MustDecimal("0"), fixedpoint.MustDecimal("10")
		s.Features = append(s.Features, schema.Feature{Name: string(rune('a' + j)), Center: fixedpoint.MustDecimal("5"), Scale: fixedpoint.MustDecimal("5"), Min: &lo, Max: &hi})
	}
	b, err := BoundsSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	l, err := stats.NewLayoutOf(stats.Moments, d, 1)
	if err != nil {
		t.Fatal(err)
	}
	vec := make([]int64, l.Len())
	for j := range d {
		vec[l.R(j, j)], vec[l.V(0, j)] = rr[j]<<16, v[j]<<8
	}
	vec[l.N(0)] = n << 8
	rel, err := stats.Unpack(l, 8, vec)
	if err != nil {
		t.Fatal(err)
	}
	e, err := FromMoments(b, rel, sigmaR, sigmaV)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestFromMomentsFewRows: a noisy row count below 2 is taken at 2 and every
// spread marked at the noise level (an upper estimate), not refused.
func TestFromMomentsFewRows(t *testing.T) {
	e := fromMoments(t, []int64{0, 0}, []int64{0, 0}, -3, 10, 10)
	for j := range 2 {
		if !e.AtNoise[j] || e.N != 2 || e.Mean[j] != 5 || e.Std[j] != 5 {
			t.Errorf("feature %d: n %v mean %v std %v at noise %v, want 2, 5 (the middle), 5 (the half-range), true", j, e.N, e.Mean[j], e.Std[j], e.AtNoise[j])
		}
	}
}

// TestFromMomentsShrinksTheVector: the means are shrunk as one vector (the
// positive-part James-Stein factor 1 - (d-2) se^2/|m|^2): all the way to the
// middles when the vector is within its noise, a little when it stands out,
// less than each mean alone would be.
func TestFromMomentsShrinksTheVector(t *testing.T) {
	// 100 rows, the sums' noise 50: se = 0.5 of the half-range 5.
	js := 5 + 4.5*(1-0.5/3.24)
	for _, c := range []struct {
		sums []int64
		want []float64
	}{
		// |m|^2 = 0.0225 < 2 se^2: every mean at its middle.
		{[]int64{10, -10, 5, 0}, []float64{5, 5, 5, 5}},
		// m = 0.9 each, |m|^2 = 3.24: factor 1 - 0.5/3.24 (each alone:
		// 1 - 0.25/0.81, 8.11).
		{[]int64{90, 90, 90, 90}, []float64{js, js, js, js}},
	} {
		e := fromMoments(t, []int64{100, 100, 100, 100}, c.sums, 100, 10, 50)
		for j, want := range c.want {
			if math.Abs(e.Mean[j]-want) > 1e-9 {
				t.Errorf("sums %v: mean %d %v, want %v", c.sums, j, e.Mean[j], want)
			}
		}
	}
}

// TestAdvise (issue 43): with most spreads unresolved the profile advises
// public reference scales; the expectation it states is the measured band
// of its rows per unit of noise (n mu/sqrt(d)), and the pilot (442
// rows, d = 10, which lost 0.215 of q/q0 against public scales) falls in
// the band it is told.
func TestAdvise(t *testing.T) {
	res := &Result{N: 442}
	for i := range 10 {
		res.Features = append(res.Features, Feature{Name: fmt.Sprint(i), Unresolved: i < 6})
	}
	a := res.Advise(0.22, 10) // the pilot's main job: epsilon 0.94 at 1e-6
	if !a.PublicScales || a.Unresolved != 6 || a.Features != 10 || math.Abs(a.RowsPerNoise-442*0.22/math.Sqrt(10)) > 1e-9 {
		t.Fatalf("advice %+v", a)
	}
	if lost := 0.902 - 0.687; a.Band.Below != SmallThreshold || lost < a.Band.BelowPublic[0] || lost > a.Band.BelowPublic[1] {
		t.Errorf("the pilot lost %.3f against public scales; its band says %v", lost, a.Band.BelowPublic)
	}
	res.Features[0].Unresolved = false
	if a := res.Advise(0.22, 10); a.PublicScales {
		t.Errorf("half the spreads unresolved: %+v", a)
	}
	for _, tc := range []struct{ n, below float64 }{{2000, MiddleThreshold}, {58000, math.Inf(1)}} {
		res.N = tc.n
		if a := res.Advise(0.22, 10); a.Band.Below != tc.below || a.Band.BelowPublic[1] > 0.08 {
			t.Errorf("%v rows: band %+v", tc.n, a.Band)
		}
	}
}

// TestBandJSON: every band encodes (the top one has no upper bound, which
// JSON could not hold as +Inf), and the others keep theirs.
func TestBandJSON(t *testing.T) {
	for _, b := range Bands {
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("%+v: %v", b, err)
		}
		if has := strings.Contains(string(out), "rows_per_noise_below"); has == math.IsInf(b.Below, 0) {
			t.Errorf("%+v encodes as %s", b, out)
		}
	}
}
