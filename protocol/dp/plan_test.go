package dp

import (
	"crypto/sha256"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/stats"
)

func TestSplitValidate(t *testing.T) {
	if err := DefaultSplit.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Split{{1.1, -0.1, 0}, {0.5, 0.5, 0.1}, {-0.1, 0.6, 0.5}, {math.NaN(), 0.5, 0.5}} {
		if err := s.Validate(); err == nil {
			t.Errorf("split %+v accepted", s)
		}
	}
}

func TestCalibrate(t *testing.T) {
	const g = 16
	b := int64(1) << g
	c, err := Calibrate(1, 1e-6, DefaultSplit, stats.Layout{D: 50, K: 1}, b, g)
	if err != nil {
		t.Fatal(err)
	}
	if c.NoiseOff() {
		t.Fatal("noise off")
	}
	sens := [3]float64{math.Ldexp(1, 2*g), math.Ldexp(1, g), math.Ldexp(1, g)}
	var rho float64
	for _, blk := range stats.Blocks {
		if c.Sensitivity[blk] != sens[blk] {
			t.Errorf("sensitivity %s = %v, want %v", blk, c.Sensitivity[blk], sens[blk])
		}
		v, _ := new(big.Float).SetInt(c.Variance[blk]).Float64()
		r := GaussRho(v, sens[blk])
		// Ceil rounding: at most the block's share of the add-one rho
		// (rho under the cap over the factor), and within 1e-9 of it.
		if want := DefaultSplit.of(blk) * c.Rho / c.Factor; r > want*(1+1e-9) || r < want*(1-1e-9) {
			t.Errorf("block %s: rho %v, budget %v", blk, r, want)
		}
		rho += r
	}
	if eps := c.Account([]Share{{Party: "proxy", Weight: big.NewRat(1, 1)}}).Epsilon; eps > 1 || eps < 0.999 {
		t.Errorf("epsilon of the calibrated noise %v, want 1", eps)
	}
	// One class: the worst neighbours replace a row within its class.
	f := DefaultSplit
	if want := 2*f.R + 2*f.V + f.V*f.V/(2*f.R); math.Abs(c.Factor/want-1) > 1e-9 {
		t.Errorf("factor %v, want %v", c.Factor, want)
	}
	// Data units: sigma_R = C^2 sqrt(factor / f_R) / mu with C = 1.
	if got, want := c.SigmaData(stats.BlockR), math.Sqrt(c.Factor/DefaultSplit.R)/c.Mu; math.Abs(got-want) > 1e-6*want {
		t.Errorf("sigma_R %v, want %v", got, want)
	}
	if _, err := Calibrate(0, 1e-6, DefaultSplit, stats.Layout{D: 1, K: 1}, b, g); err == nil || !strings.Contains(err.Error(), "epsilon") {
		t.Errorf("epsilon 0: %v", err)
	}
	if _, err := Calibrate(1, 1e-6, Split{0.5, 0.5, 0}, stats.Layout{D: 1, K: 1}, b, g); err == nil || !strings.Contains(err.Error(), "split gives block n no share") {
		t.Errorf("a block without budget: %v", err)
	}
	// A histogram has only the n block: the whole budget goes there, and a
	// share for an empty block is refused.
	l, _ := stats.NewLayoutOf(stats.Histogram, 30, 9)
	c, err = Calibrate(1, 1e-6, Split{N: 1}, l, b, g)
	if err != nil {
		t.Fatal(err)
	}
	if c.Variance[stats.BlockR].Sign() != 0 || c.Variance[stats.BlockV].Sign() != 0 || c.Dims != [3]int{0, 0, 9} {
		t.Fatalf("histogram calibration %+v", c)
	}
	// A row moving between buckets changes two counts: sensitivity sqrt(2).
	if got, want := c.SigmaData(stats.BlockN), math.Sqrt2/GaussMu(1, 1e-6); got < want || got > want*1.01 {
		t.Errorf("histogram count sigma %v, want within 1%% above sqrt(2)/mu = %v", got, want)
	}
	if _, err := Calibrate(1, 1e-6, Split{R: 0.5, N: 0.5}, l, b, g); err == nil || !strings.Contains(err.Error(), "block R is empty") {
		t.Errorf("a share for an empty block: %v", err)
	}
	// Moments rows lie in the box: the diagonal's sensitivity is 2^g B, not B^2.
	m, _ := stats.NewLayoutOf(stats.Moments, 30, 1)
	if s := m.Sensitivity2(b, g)[stats.BlockR]; s.Cmp(new(big.Int).Lsh(big.NewInt(b*b), 2*g)) != 0 {
		t.Errorf("moments R squared sensitivity %v, want (2^g B)^2 = %d 2^%d", s, b*b, 2*g)
	}
	// Marginals: a row adds one to a count of each feature; moving each
	// feature's value to another bucket changes two counts each.
	mg, _ := stats.NewLayoutOf(stats.Marginals, 30, 16)
	c, err = Calibrate(1, 1e-6, Split{N: 1}, mg, b, g)
	if err != nil {
		t.Fatal(err)
	}
	if c.Dims != [3]int{0, 0, 480} || math.Abs(c.Factor/2-1) > 1e-9 || math.Abs(c.Sensitivity[stats.BlockN]/(math.Sqrt(30)*math.Ldexp(1, g))-1) > 1e-12 {
		t.Fatalf("marginals calibration: dims %v, factor %v, sensitivity %v", c.Dims, c.Factor, c.Sensitivity[stats.BlockN])
	}
	if got, want := c.SigmaData(stats.BlockN), math.Sqrt(60)/GaussMu(1, 1e-6); got < want || got > want*1.01 {
		t.Errorf("marginals count sigma %v, want within 1%% above sqrt(2 d)/mu = %v", got, want)
	}
}

// residual is the sum of the weights minus the t largest.
func residual(ws []*big.Rat, t int) *big.Rat {
	s := append([]*big.Rat(nil), ws...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j].Cmp(s[i]) > 0 {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	out := new(big.Rat)
	for _, w := range s[min(t, len(s)):] {
		out.Add(out, w)
	}
	return out
}

func r(a, b int64) *big.Rat { return big.NewRat(a, b) }

func TestTopUpExamples(t *testing.T) {
	for _, tc := range []struct {
		p        Plan
		uploaded int
		role     Role
		want     *big.Rat
	}{
		{Plan{PlanCentral, 0, 5, 1}, 5, RoleProxy, r(1, 1)},
		{Plan{PlanCentral, 0, 5, 1}, 5, RoleCSP, r(0, 1)},
		{Plan{PlanServers, 0, 5, 2}, 3, RoleProxy, r(1, 3)},
		{Plan{PlanServers, 1, 5, 2}, 3, RoleCSP, r(1, 2)},
		{Plan{PlanOwners, 0, 5, 2}, 5, RoleOwner, r(1, 5)},
		{Plan{PlanOwners, 0, 5, 2}, 5, RoleProxy, r(0, 1)},
		// The proxy and the two switching members top up alike.
		{Plan{PlanOwners, 0, 5, 2}, 3, RoleProxy, r(2, 15)},
		{Plan{PlanOwners, 0, 5, 2}, 3, RoleCSP, r(2, 15)},
		{Plan{PlanOwners, 1, 5, 2}, 4, RoleProxy, r(1, 12)},
		{Plan{PlanOwners, 1, 5, 2}, 3, RoleCSP, r(1, 6)},
		// A proxy that sums one owner's upload alone: the members top up
		// so that, its own top-up withheld, the victim's noise is whole.
		{Plan{PlanOwners, 1, 10, 2}, 1, RoleCSP, r(4, 9)},
		{Plan{PlanAll, 1, 5, 2}, 5, RoleCSP, r(1, 7)},
		{Plan{PlanAll, 1, 5, 2}, 3, RoleCSP, r(2, 7)},
		{Plan{PlanAll, 1, 5, 2}, 3, RoleOwner, r(1, 7)},
	} {
		got, err := tc.p.Weight(tc.role, tc.uploaded)
		if err != nil {
			t.Errorf("%+v %s uploaded %d: %v", tc.p, tc.role, tc.uploaded, err)
			continue
		}
		if got.Cmp(tc.want) != 0 {
			t.Errorf("%+v %s uploaded %d: weight %s, want %s", tc.p, tc.role, tc.uploaded, got.RatString(), tc.want.RatString())
		}
	}
	// Too many dropouts for the owners plan with t = 2 and one member:
	// withholding the two largest shares leaves at most 2/3.
	if _, err := (Plan{PlanOwners, 2, 5, 1}).Weight(RoleProxy, 2); !errors.Is(err, ErrPlanInfeasible) {
		t.Errorf("owners plan t=2, 3 dropouts, 1 member: %v", err)
	}
}

// TestTopUpProperty: for random plans and dropouts, the shares after top-up
// reach the central variance after removing the t largest, and the top-up is
// minimal (a toppers' weight any smaller would not).
func TestTopUpProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		p := Plan{Kind: Plans[rng.IntN(len(Plans))], Owners: 1 + rng.IntN(12), CSPs: 1 + rng.IntN(4)}
		p.Tolerate = rng.IntN(p.Parties())
		m := rng.IntN(p.Owners + 1)
		owners := make([]string, m)
		for i := range owners {
			owners[i] = string(rune('a' + i))
		}
		csps := make([]string, p.CSPs)
		for i := range csps {
			csps[i] = string(rune('1' + i))
		}
		shares, err := p.Shares(owners, csps)
		if errors.Is(err, ErrPlanInfeasible) {
			continue
		}
		if err != nil {
			t.Fatalf("%+v m=%d: %v", p, m, err)
		}
		ws := make([]*big.Rat, len(shares))
		for i, s := range shares {
			ws[i] = s.Weight
		}
		if residual(ws, p.Tolerate).Cmp(r(1, 1)) < 0 {
			t.Fatalf("%+v m=%d: residual %s < 1", p, m, residual(ws, p.Tolerate).RatString())
		}
		// Minimality: shrink the toppers by 1e-9 (if they were topped up).
		base := new(big.Rat)
		if p.planned(RoleProxy) {
			base = p.base()
		}
		y, _ := p.Weight(RoleProxy, m)
		if p.topper(RoleProxy) && y.Cmp(base) > 0 {
			smaller := new(big.Rat).Sub(y, r(1, 1_000_000_000))
			for i, s := range shares {
				if p.topper(s.Role) {
					ws[i] = smaller
				}
			}
			if residual(ws, p.Tolerate).Cmp(r(1, 1)) >= 0 {
				t.Fatalf("%+v m=%d: top-up %s is not minimal", p, m, y.RatString())
			}
		}
	}
}

func TestPlanValidate(t *testing.T) {
	for _, tc := range []struct {
		p    Plan
		want string
	}{
		{Plan{"nope", 0, 1, 1}, "must be one of"},
		{Plan{PlanCentral, 1, 3, 1}, "tolerate 1 must be in [0, 0]"},
		{Plan{PlanServers, 3, 3, 2}, "tolerate 3 must be in [0, 2]"},
		{Plan{PlanAll, -1, 3, 2}, "tolerate -1"},
		{Plan{PlanOwners, 0, 0, 1}, "planned owners 0"},
	} {
		if err := tc.p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
	}
}

func TestCollusionTable(t *testing.T) {
	c, err := Calibrate(1, 1e-6, DefaultSplit, stats.Layout{D: 10, K: 2}, 1<<16, 16)
	if err != nil {
		t.Fatal(err)
	}
	owners := []string{"a", "b", "c", "d", "e"}
	for _, p := range []Plan{{PlanCentral, 0, 5, 2}, {PlanServers, 0, 5, 2}, {PlanServers, 1, 5, 2}, {PlanOwners, 2, 5, 2}, {PlanAll, 3, 5, 2}} {
		shares, err := p.Shares(owners, []string{"1", "2"})
		if err != nil {
			t.Fatal(err)
		}
		table := p.CollusionTable(c, shares)
		honest, worst := table[0], table[len(table)-1]
		// The promise: with the worst t colluders epsilon is still at most the target.
		if float64(worst.Epsilon) > 1+1e-9 || worst.Epsilon < 0.99 {
			t.Errorf("%+v: worst-%d epsilon %v, want 1", p, p.Tolerate, worst.Epsilon)
		}
		for _, row := range table {
			if row.Epsilon > worst.Epsilon+1e-12 && row.Parties <= p.Tolerate {
				t.Errorf("%+v: row %q epsilon %v above the worst-t row %v", p, row.With, row.Epsilon, worst.Epsilon)
			}
		}
		// Everyone honest: the total variance is k/(k-t) times central, so
		// epsilon is smaller unless t = 0.
		if p.Tolerate > 0 && honest.Epsilon >= worst.Epsilon {
			t.Errorf("%+v: honest epsilon %v not below worst %v", p, honest.Epsilon, worst.Epsilon)
		}
		if p.Tolerate == 0 && math.Abs(float64(honest.Epsilon-worst.Epsilon)) > 1e-12 {
			t.Errorf("%+v: t=0 but honest %v != worst %v", p, honest.Epsilon, worst.Epsilon)
		}
		if p.Kind == PlanCentral && !math.IsInf(float64(table[1].Epsilon), 1) {
			t.Errorf("central plan: colluding with the proxy leaves epsilon %v, want +Inf", table[1].Epsilon)
		}
		a := c.Account(shares)
		for _, lt := range a.Log10Tau {
			if len(shares) > 1 && (math.IsInf(float64(lt), 0) || lt > -1e6) {
				t.Errorf("%+v: log10 tau %v, want finite and astronomically small", p, lt)
			}
		}
	}
}

// TestPlanSummedVariance: the noise of all the shares of a plan, summed over
// many trials, has the planned variance per block (k/(k-t) times central with
// everyone taking part, more after a top-up).
func TestPlanSummedVariance(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical test")
	}
	t.Parallel()
	l, _ := stats.NewLayout(20, 10) // R: 210, v: 200, n: 10 coordinates
	c := Calibration{Delta: 1e-6, Variance: [3]*big.Int{big.NewInt(40000), big.NewInt(2500), big.NewInt(900)}}
	p := Plan{Kind: PlanAll, Tolerate: 1, Owners: 4, CSPs: 2}
	owners := []string{"a", "b", "c"} // one dropout: proxy and CSPs top up
	shares, err := p.Shares(owners, []string{"1", "2"})
	if err != nil {
		t.Fatal(err)
	}
	want := [3]float64{}
	for _, s := range shares {
		for b, v := range c.ShareVariance(s.Weight) {
			f, _ := v.Float64()
			want[b] += f
		}
	}
	seed := sha256.Sum256([]byte("plan variance"))
	rnd := &hashStream{seed: seed, off: sha256.Size}
	const trials = 1000
	var sum2 [3]float64
	var count [3]float64
	for range trials {
		total := make([]int64, l.Len())
		for _, s := range shares {
			v, err := c.NoiseVector(l, s.Weight, rnd, 1)
			if err != nil {
				t.Fatal(err)
			}
			for i := range total {
				total[i] += v[i]
			}
		}
		for _, b := range stats.Blocks {
			lo, hi := l.Range(b)
			for _, x := range total[lo:hi] {
				sum2[b] += float64(x) * float64(x)
				count[b]++
			}
		}
	}
	for _, b := range stats.Blocks {
		got := sum2[b] / count[b]
		// The sample variance of n Gaussian draws has relative standard
		// error sqrt(2/n); allow 5 of them.
		tol := 5 * math.Sqrt(2/count[b])
		if math.Abs(got/want[b]-1) > tol {
			t.Errorf("block %s: summed variance %.1f, planned %.1f (tolerance %.2f%%)", b, got, want[b], 100*tol)
		}
	}
}

// TestCalibrateNamesLargestEpsilon: an epsilon no noise level meets is
// refused naming the largest that works, which does calibrate (and a bit
// more does not).
func TestCalibrateNamesLargestEpsilon(t *testing.T) {
	const g = 16
	b := int64(1) << g
	l := stats.Layout{D: 30, K: 2}
	_, err := Calibrate(50, 1e-6, DefaultSplit, l, b, g)
	if err == nil {
		t.Skip("epsilon 50 calibrates here: nothing to name")
	}
	m := regexp.MustCompile(`the largest epsilon this job's noise allows is ([0-9.e+-]+)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error names no largest epsilon: %v", err)
	}
	most, _ := strconv.ParseFloat(m[1], 64)
	if _, err := Calibrate(most, 1e-6, DefaultSplit, l, b, g); err != nil {
		t.Errorf("the largest epsilon named, %v, does not calibrate: %v", most, err)
	}
	if _, err := Calibrate(most*1.01, 1e-6, DefaultSplit, l, b, g); err == nil {
		t.Errorf("1%% above the largest epsilon named, %v, calibrates", most)
	}
	t.Log(err)
}
