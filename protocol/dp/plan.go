package dp

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"

	"github.com/fedpca/fedpca/protocol/stats"
)

// Noise plans: who adds the DP noise (PROTOCOL.md section 6).
const (
	PlanCentral = "central" // the proxy alone (DPDPCA as published)
	PlanServers = "servers" // the proxy and each CSP member taking part in the switch (default)
	PlanOwners  = "owners"  // each owner; the proxy tops up for owners who never upload
	PlanAll     = "all"     // owners, proxy and CSP members
)

// Plans lists the plan names.
var Plans = []string{PlanCentral, PlanServers, PlanOwners, PlanAll}

// Role is the kind of party that adds a noise share.
type Role int

// The roles that can add noise.
const (
	RoleOwner Role = iota
	RoleProxy
	RoleCSP
)

func (r Role) String() string {
	switch r {
	case RoleOwner:
		return "owner"
	case RoleProxy:
		return "proxy"
	case RoleCSP:
		return "csp"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// Split says how the zCDP budget rho is divided between the R, v and n
// blocks. The fractions are public job parameters and must sum to 1.
type Split struct {
	R float64 `json:"r"`
	V float64 `json:"v"`
	N float64 `json:"n"`
}

// DefaultSplit puts most of the budget on R, where PCA's utility lives; v and
// n are sums over many rows and tolerate more noise, all the more since PCA
// centres S_T on a James-Stein-shrunk mean (analysis.Scatters.ShrinkCentring),
// which keeps the noise on v from entering S_T in full.
//
// Measured (go run ./bench -suite split-sweep, 2026-11-24):
// PCA captured variance q/q0 (k = 5, true centred scatter) averaged over the
// ten shared datasets with a reference, epsilon 0.5/1/2 at delta 1e-6, 30
// seeds each, central noise, exact Gaussian calibration, shrunk centring:
//
//	split (R/v/n)      eps 0.5  eps 1   eps 2   mean
//	0.80/0.16/0.04     0.8053   0.8838  0.9411  0.8767
//	0.90/0.08/0.02     0.8146   0.8909  0.9456  0.8837
//	0.95/0.04/0.01     0.8172   0.8935  0.9453  0.8853   (the default until then)
//	0.97/0.015/0.015   0.8172   0.8965  0.9482  0.8873
//	0.98/0.016/0.004   0.8203   0.8936  0.9468  0.8869
//	0.98/0.019/0.001   0.8242   0.8926  0.9472  0.8880
//	0.99/0.008/0.002   0.8208   0.8949  0.9464  0.8873
//	0.99/0.005/0.000   0.8181   0.8903  0.9449  0.8845
//
// Utility is flat for R between 0.95 and 0.99 (differences within the seed
// noise, about 0.002); glass (214 rows) falls at 0.99, where the class sums
// get too little. The default takes R = 0.98, which brings the R block's
// noise within 1% of Analyze Gauss with the same (epsilon, delta) (sigma_R =
// 4.2675 against 4.2247 at epsilon 1, delta 1e-6), and keeps the sums and the
// count usable as a release: sigma_v = 34.5 and sigma_n = 59.7 there (a
// count's noise over all the rows, not per owner).
var DefaultSplit = Split{R: 0.98, V: 0.015, N: 0.005}

// DiscriminantSplit is the default for DCA and LDA, which need the class
// sums and counts (v_k, n_k) far more than PCA does.
//
// Measured (go run ./bench -suite dca-sweep): change of the 5-fold
// cross-validated nearest-centroid accuracy on the DCA projections against
// non-private DCA, averaged over the ten shared datasets, epsilon 0.5/1/2 at
// delta = 1/N, 8 seeds, central noise, regulariser with the full noise
// margin:
//
//	split (R/v/n)      eps 0.5   eps 1    eps 2    mean
//	0.95/0.04/0.01     -0.139    -0.110   -0.058   -0.102   (DefaultSplit)
//	0.80/0.16/0.04     -0.072    -0.051   -0.029   -0.051
//	0.50/0.40/0.10     -0.048    -0.036   -0.025   -0.036
//	0.40/0.54/0.06     -0.048    -0.031   -0.023   -0.034
//	0.30/0.56/0.14     -0.047    -0.034   -0.024   -0.035
//	0.20/0.72/0.08     -0.043    -0.032   -0.028   -0.034
//	0.10/0.72/0.18     -0.047    -0.034   -0.029   -0.036
//
// Flat for R between 0.1 and 0.4 with most of the rest on v; halving the
// regulariser's noise margin costs 0.01 to 0.02, doubling it gains nothing.
var DiscriminantSplit = Split{R: 0.3, V: 0.6, N: 0.1}

// DefaultSplitFor returns the default budget split of an analysis: the
// discriminant one for "dca" and "lda", the profile rounds' for "moments"
// and "norms", DefaultSplit otherwise.
func DefaultSplitFor(analysis string) Split {
	switch analysis {
	case "dca", "lda":
		return DiscriminantSplit
	case "moments":
		// The profile's first round: the diagonal and the sums have the
		// same sensitivity (sqrt(d) in data units) and matter alike.
		return Split{R: 0.45, V: 0.45, N: 0.1}
	case "norms":
		// A histogram has only counts.
		return Split{N: 1}
	}
	return DefaultSplit
}

// Validate checks that the fractions are positive and sum to 1.
func (s Split) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"r", s.R}, {"v", s.V}, {"n", s.N}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return fmt.Errorf("budget split %s = %v must be in [0, 1]", f.name, f.v)
		}
	}
	if sum := s.R + s.V + s.N; math.Abs(sum-1) > 1e-9 {
		return fmt.Errorf("budget split r + v + n = %v, must be 1", sum)
	}
	return nil
}

func (s Split) of(b stats.Block) float64 {
	switch b {
	case stats.BlockR:
		return s.R
	case stats.BlockV:
		return s.V
	}
	return s.N
}

// Calibration is the central noise of a job: the per-block variances, in
// integer units, that the honest shares must reach together. It is a pure
// function of public job parameters.
type Calibration struct {
	// Epsilon and Delta are the requested guarantee; Mu the Gaussian-DP
	// parameter of the whole release under Neighbours with the calibrated
	// central noise (the exact Gaussian profile, with room left for the
	// discrete correction), and Rho = Mu^2/2.
	Epsilon, Delta, Mu, Rho float64
	Split                   Split
	// Sensitivity is the L2 sensitivity of each block to adding one row, in
	// integer units: B^2 for R, B for v, 2^g for n (B = floor(2^g C)).
	Sensitivity [3]float64
	// Dims are the numbers of coordinates of the blocks.
	Dims [3]int
	// Variance is the central variance of each block in integer units,
	// ceil(Sensitivity^2 Factor / (Split_b Mu^2)). Nil when noise is off.
	Variance [3]*big.Int
	// Bits is g, to convert to data units.
	Bits uint
	// Geometry is the release's shape, for its sensitivity under Neighbours
	// (Geometry.Mu2).
	Geometry Geometry
	// Factor is mu^2 under Neighbours over mu^2 for adding one row, for this
	// split and layout: how much more noise variance the row cap costs
	// (1.99 for PCA's default split, 2.4 for DCA's; see Geometry.Mu2).
	Factor float64
	// Cost is what the job costs whoever's shares are in the release, as
	// long as the honest ones reach the central variance: the cost of the
	// central noise with the correction for the worst set of shares the
	// plan can produce (ShareBound). Every owner's ledger is charged it;
	// Cost.Epsilon(Delta) <= Epsilon.
	Cost Cost
}

// NoiseOff reports whether the calibration adds no noise (tests and
// simulations only; daemons refuse it unless explicitly allowed).
func (c Calibration) NoiseOff() bool { return c.Variance[0] == nil }

// ShareBound is what a noise plan can put in a release: at most Max shares,
// each of at least MinWeight of the central variance (Plan.ShareBound).
// Their sum is within the Kairouz-Liu-Steinke factor 1 +- tau of a discrete
// Gaussian, tau <= 10 (Max - 1) exp(-pi^2 s) per coordinate with s the
// smallest share's variance: added in descending order, the k-th parallel
// sum (see DDG) is at least s k / (k+1) >= s/2.
type ShareBound struct {
	Max       int
	MinWeight *big.Rat
}

// Central is the bound of a release with one share: the central noise.
var Central = ShareBound{Max: 1, MinWeight: big.NewRat(1, 1)}

// eta returns the bound's part of the correction per block: Dim_b (-log(1
// - tau_b)) for central variances s (+Inf when tau_b >= 1).
func (sb ShareBound) eta(s [3]float64, dims [3]int) float64 {
	if sb.Max <= 1 {
		return 0
	}
	w, _ := sb.MinWeight.Float64()
	out := 0.0
	for b, v := range s {
		if dims[b] == 0 {
			continue
		}
		tau := 10 * float64(sb.Max-1) * math.Exp(-math.Pi*math.Pi*v*w)
		if !(w > 0) || tau >= 1 {
			return math.Inf(1)
		}
		out += float64(dims[b]) * -math.Log1p(-tau)
	}
	return out
}

// Calibrate computes the central noise for (epsilon, delta) with the budget
// split for a release of one share (Central); see CalibrateShares.
func Calibrate(epsilon, delta float64, split Split, l stats.Layout, bound int64, bits uint) (Calibration, error) {
	return CalibrateShares(epsilon, delta, split, l, bound, bits, Central)
}

// CalibrateShares computes the central noise for (epsilon, delta) with the
// budget split, for rows clipped to B in integer units at scale 2^bits, for
// the blocks and sensitivities of a layout of any kind
// (stats.Layout.Sensitivity), under Neighbours, for releases whose shares
// are within sb. An empty block must get no share of the budget.
//
// The release is one Gaussian mechanism (see GaussDelta). The split gives
// block b the share Split_b of the add-one mu^2, i.e. variance proportional
// to Sensitivity_b^2 / Split_b, and Factor = Geometry.Mu2 of those
// variances scales them to the mu^2 under Neighbours. mu is the largest that
// the exact Gaussian profile allows at (epsilon, delta) once the discrete
// correction is set aside: first mu0 for (epsilon, delta), then mu for
// (epsilon - 2 Eta0, (delta - tails) e^-Eta0) with Eta0 the correction of
// mu0's noise (more noise only lowers it), lowered further until the
// calibration's Cost, computed exactly as ledgers compute it, is within
// (epsilon, delta): an owner whose whole budget is the job's (epsilon,
// delta) accepts it.
func CalibrateShares(epsilon, delta float64, split Split, l stats.Layout, bound int64, bits uint, sb ShareBound) (Calibration, error) {
	if bound < 1 || bits > 30 {
		return Calibration{}, fmt.Errorf("calibrate: clip bound %d and bits %d out of range", bound, bits)
	}
	if sb.Max < 1 || sb.MinWeight == nil || sb.MinWeight.Sign() <= 0 {
		return Calibration{}, fmt.Errorf("calibrate: share bound %d shares of at least %v", sb.Max, sb.MinWeight)
	}
	geom := Geometry{Layout: l, Bound: bound, Bits: bits}
	sens, dims := l.Sensitivity(bound, bits), l.Dims()
	if err := split.Validate(); err != nil {
		return Calibration{}, err
	}
	for _, b := range stats.Blocks {
		if dims[b] == 0 && split.of(b) != 0 {
			return Calibration{}, fmt.Errorf("calibrate: block %s is empty in this layout; its budget share %v must be 0", b, split.of(b))
		}
		if dims[b] != 0 && split.of(b) == 0 {
			return Calibration{}, fmt.Errorf("calibrate: the budget split gives block %s no share", b)
		}
	}
	switch {
	case math.IsNaN(epsilon) || epsilon <= 0 || math.IsInf(epsilon, 1):
		return Calibration{}, fmt.Errorf("calibrate: epsilon = %v must be positive and finite", epsilon)
	case math.IsNaN(delta) || delta <= 0 || delta >= 1:
		return Calibration{}, fmt.Errorf("calibrate: delta = %v must be in (0, 1)", delta)
	}
	c := Calibration{Epsilon: epsilon, Delta: delta, Split: split, Bits: bits, Dims: dims, Geometry: geom}
	c.Sensitivity = geom.Sensitivity()
	var unit [3]float64 // variances giving block b the add-one mu^2 share Split_b
	for _, b := range stats.Blocks {
		if dims[b] != 0 {
			unit[b] = c.Sensitivity[b] * c.Sensitivity[b] / split.of(b)
		}
	}
	c.Factor = geom.Mu2(unit)
	if !(c.Factor > 0) || math.IsInf(c.Factor, 1) {
		return Calibration{}, fmt.Errorf("calibrate: the split %+v gives no finite sensitivity", split)
	}
	variances := func(mu float64) ([3]*big.Int, error) {
		var out [3]*big.Int
		for _, b := range stats.Blocks {
			if dims[b] == 0 {
				out[b] = new(big.Int)
				continue
			}
			// variance = ceil(Delta^2 Factor / (f mu^2)), exactly in
			// rationals from the float64 value of f mu^2 / Factor.
			fr := new(big.Rat).SetFloat64(split.of(b) * mu * mu / c.Factor)
			if fr == nil || fr.Sign() <= 0 {
				return out, fmt.Errorf("calibrate: the budget split gives block %s no share", b)
			}
			v := new(big.Rat).SetInt(new(big.Int).Mul(sens[b], sens[b]))
			out[b] = ceilRat(v.Quo(v, fr))
		}
		return out, nil
	}
	cost := func(v [3]*big.Int) Cost {
		blocks := c.central(v)
		out, _ := ReleaseCost(geom, blocks, delta)
		out.Eta += Float(sb.eta(totals(blocks), dims))
		return out
	}
	mu0 := GaussMu(epsilon, delta)
	v0, err := variances(mu0)
	if err != nil {
		return Calibration{}, err
	}
	c0 := cost(v0)
	// The targets keep a relative 1e-9 for the bisections' rounding.
	mu := GaussMu(epsilon*(1-1e-9)-2*float64(c0.Eta), delta*(1-1e-9)*math.Exp(-float64(c0.Eta))-(math.Exp(epsilon)+1)*float64(c0.Tail))
	for range 64 {
		if !(mu > 0) || math.IsInf(mu, 1) {
			return Calibration{}, fmt.Errorf("calibrate: no noise level meets (%v, %v) with the discrete correction %.3g", epsilon, delta, 2*c0.Eta)
		}
		if c.Variance, err = variances(mu); err != nil {
			return Calibration{}, err
		}
		if c.Cost = cost(c.Variance); c.Cost.Within(epsilon, delta) {
			break
		}
		mu *= 1 - 1e-6
	}
	if !c.Cost.Within(epsilon, delta) {
		return Calibration{}, fmt.Errorf("calibrate: no noise level meets (%v, %v) with the discrete correction %.3g", epsilon, delta, 2*c.Cost.Eta)
	}
	c.Mu, c.Rho = c.Cost.Mu(), float64(c.Cost.Rho)
	return c, nil
}

// central describes the release's noise when the central variance comes in
// one share.
func (c Calibration) central(variance [3]*big.Int) []BlockNoise {
	return c.blocks(variance, []Share{{Party: "central", Weight: big.NewRat(1, 1)}})
}

// blocks describes the release's noise for the correction: each block's
// shares and size.
func (c Calibration) blocks(variance [3]*big.Int, shares []Share) []BlockNoise {
	out := make([]BlockNoise, 0, 3)
	for _, b := range stats.Blocks {
		bn := BlockNoise{Dim: c.Dims[b]}
		for _, s := range shares {
			v, _ := new(big.Rat).Mul(s.Weight, new(big.Rat).SetInt(variance[b])).Float64()
			bn.Shares = append(bn.Shares, v)
		}
		out = append(out, bn)
	}
	return out
}

// NoNoise is the calibration of a noise-free job (tests and simulations).
func NoNoise(bound int64, bits uint) Calibration {
	inf := Float(math.Inf(1))
	c := Calibration{Epsilon: math.Inf(1), Mu: math.Inf(1), Rho: math.Inf(1), Bits: bits, Cost: Cost{Rho: inf, Eta: inf, Tail: inf}}
	c.Sensitivity = [3]float64{float64(bound) * float64(bound), float64(bound), math.Ldexp(1, int(bits))}
	return c
}

func ceilRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// SigmaData returns the central standard deviation of a block in data units
// (R: divided by 2^(2g); v and n: by 2^g), for reports and the regulariser.
func (c Calibration) SigmaData(b stats.Block) float64 {
	if c.NoiseOff() {
		return 0
	}
	v, _ := new(big.Float).SetInt(c.Variance[b]).Float64()
	scale := int(c.Bits)
	if b == stats.BlockR {
		scale *= 2
	}
	return math.Ldexp(math.Sqrt(v), -scale)
}

// Plan is a job's public noise plan.
type Plan struct {
	Kind string `json:"plan"`
	// Tolerate is t: the guarantee must survive the user colluding with any t
	// noise parties.
	Tolerate int `json:"tolerate"`
	// Owners is the planned number of owners (k_o); CSPs the number of
	// committee members taking part in the key switch (the threshold).
	Owners int `json:"owners"`
	CSPs   int `json:"csps"`
}

// Validate checks the plan: a known kind, 0 <= t < k.
func (p Plan) Validate() error {
	if !slices.Contains(Plans, p.Kind) {
		return fmt.Errorf("noise plan %q: must be one of %v", p.Kind, Plans)
	}
	if p.Owners < 1 {
		return fmt.Errorf("noise plan: planned owners %d must be at least 1", p.Owners)
	}
	if p.CSPs < 1 {
		return fmt.Errorf("noise plan: %d committee members in the switch, want at least 1", p.CSPs)
	}
	if p.Tolerate < 0 || p.Tolerate >= p.Parties() {
		return fmt.Errorf("noise plan %s with %d noise parties: tolerate %d must be in [0, %d]", p.Kind, p.Parties(), p.Tolerate, p.Parties()-1)
	}
	return nil
}

// Parties returns k, the number of planned noise parties.
func (p Plan) Parties() int {
	switch p.Kind {
	case PlanCentral:
		return 1
	case PlanServers:
		return 1 + p.CSPs
	case PlanOwners:
		return p.Owners
	default:
		return p.Owners + 1 + p.CSPs
	}
}

// planned reports whether a role is a planned noise party.
func (p Plan) planned(r Role) bool {
	switch p.Kind {
	case PlanCentral:
		return r == RoleProxy
	case PlanServers:
		return r == RoleProxy || r == RoleCSP
	case PlanOwners:
		return r == RoleOwner
	}
	return true
}

// topper reports whether a role tops up for owners who did not upload.
func (p Plan) topper(r Role) bool {
	switch p.Kind {
	case PlanOwners:
		return r == RoleProxy
	case PlanAll:
		return r == RoleProxy || r == RoleCSP
	}
	return false
}

// base is every planned party's share of the central variance: 1/(k - t),
// so that any k - t of them alone reach it.
func (p Plan) base() *big.Rat { return big.NewRat(1, int64(p.Parties()-p.Tolerate)) }

// OwnerWeight is the share of the central variance an owner adds to its
// statistics before encrypting (0 when owners add no noise).
func (p Plan) OwnerWeight() *big.Rat {
	if !p.planned(RoleOwner) {
		return new(big.Rat)
	}
	return p.base()
}

// ErrPlanInfeasible reports a seal at which no top-up can restore the
// promised guarantee (too many planned noise parties never took part).
var ErrPlanInfeasible = errors.New("noise plan cannot reach its guarantee")

// Weight returns the share of the central variance that the proxy or a CSP
// member adds when the sum holds the uploads of `uploaded` owners: its
// planned share plus its top-up. Every party computes its own weight from
// public facts.
//
// Top-up: with m uploaded owners each at weight a = 1/(k - t) and c toppers
// at weight y = base + x, the smallest x >= 0 is chosen such that the sum of
// all shares minus the t largest is at least 1 (the central variance). With
// only two distinct weights the t largest are easy to name, so x has a closed
// form, computed in exact rationals. If no x works the seal fails with
// ErrPlanInfeasible and nothing is released.
func (p Plan) Weight(r Role, uploaded int) (*big.Rat, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if r == RoleOwner {
		return p.OwnerWeight(), nil
	}
	if uploaded < 0 || uploaded > p.Owners {
		return nil, fmt.Errorf("noise plan: %d uploaded owners, planned %d", uploaded, p.Owners)
	}
	base := new(big.Rat)
	if p.planned(r) {
		base = p.base()
	}
	if !p.topper(r) {
		return base, nil
	}
	y, err := p.topperWeight(uploaded, base)
	if err != nil {
		return nil, err
	}
	return y, nil
}

// toppers returns how many parties top up.
func (p Plan) toppers() int {
	switch p.Kind {
	case PlanOwners:
		return 1
	case PlanAll:
		return 1 + p.CSPs
	}
	return 0
}

// topperWeight solves for the toppers' weight y >= base.
func (p Plan) topperWeight(m int, base *big.Rat) (*big.Rat, error) {
	a := p.OwnerWeight()
	c, t := p.toppers(), p.Tolerate
	one := big.NewRat(1, 1)
	// f(y): sum of all weights minus the t largest, for m owners at a and c
	// toppers at y.
	f := func(y *big.Rat) *big.Rat {
		ws := make([]*big.Rat, 0, m+c)
		for range m {
			ws = append(ws, a)
		}
		for range c {
			ws = append(ws, y)
		}
		slices.SortFunc(ws, func(x, z *big.Rat) int { return z.Cmp(x) })
		s := new(big.Rat)
		for _, w := range ws[min(t, len(ws)):] {
			s.Add(s, w)
		}
		return s
	}
	if f(base).Cmp(one) >= 0 {
		return base, nil
	}
	// f is piecewise linear and non-decreasing in y, with a kink at y = a.
	// Below a the toppers are the smallest: f = (m - min(t,m)) a + (c - max(0, t-m)) y.
	// Above a they are the largest: f = (m - max(0, t-c)) a + (c - min(t,c)) y.
	if base.Cmp(a) < 0 {
		slope := int64(c - max(0, t-m))
		if slope > 0 {
			rest := new(big.Rat).Mul(a, big.NewRat(int64(m-min(t, m)), 1))
			y := new(big.Rat).Sub(one, rest)
			y.Quo(y, big.NewRat(slope, 1))
			if y.Cmp(base) < 0 {
				y.Set(base)
			}
			if y.Cmp(a) <= 0 && f(y).Cmp(one) >= 0 {
				return y, nil
			}
		}
	}
	slope := int64(c - min(t, c))
	if slope > 0 {
		rest := new(big.Rat).Mul(a, big.NewRat(int64(m-max(0, t-c)), 1))
		y := new(big.Rat).Sub(one, rest)
		y.Quo(y, big.NewRat(slope, 1))
		if y.Cmp(base) < 0 {
			y.Set(base)
		}
		if y.Cmp(a) < 0 {
			y.Set(a)
		}
		if f(y).Cmp(one) >= 0 {
			return y, nil
		}
	}
	return nil, fmt.Errorf("%w: %s plan tolerating %d with %d of %d planned owners uploaded and %d topping-up parties",
		ErrPlanInfeasible, p.Kind, t, m, p.Owners, c)
}

// Share is one noise share in the final sum.
type Share struct {
	Party  string   `json:"party"` // "proxy", "csp/2", "owner/hospital-a"
	Role   Role     `json:"-"`
	Weight *big.Rat `json:"-"`
}

// Shares lists every noise share in a release: the uploaded owners' (named
// by owners), the proxy's and each active CSP member's (named by csps).
func (p Plan) Shares(owners []string, csps []string) ([]Share, error) {
	if len(csps) != p.CSPs {
		return nil, fmt.Errorf("noise plan: %d committee members in the switch, planned %d", len(csps), p.CSPs)
	}
	var out []Share
	add := func(name string, r Role) error {
		w, err := p.Weight(r, len(owners))
		if err != nil {
			return err
		}
		if w.Sign() > 0 {
			out = append(out, Share{Party: name, Role: r, Weight: w})
		}
		return nil
	}
	for _, o := range owners {
		if err := add("owner/"+o, RoleOwner); err != nil {
			return nil, err
		}
	}
	if err := add("proxy", RoleProxy); err != nil {
		return nil, err
	}
	for _, c := range csps {
		if err := add("csp/"+c, RoleCSP); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ShareVariance returns the variance of a share of the given weight in each
// block, in integer units (exact rationals; zero when noise is off).
func (c Calibration) ShareVariance(w *big.Rat) [3]*big.Rat {
	var out [3]*big.Rat
	for _, b := range stats.Blocks {
		out[b] = new(big.Rat)
		if !c.NoiseOff() {
			out[b].Mul(w, new(big.Rat).SetInt(c.Variance[b]))
		}
	}
	return out
}

// NoiseVector draws a party's noise share of the given weight for a packed
// vector of the layout, block by block, from rnd (crypto/rand when nil),
// using up to workers goroutines.
func (c Calibration) NoiseVector(l stats.Layout, w *big.Rat, rnd io.Reader, workers int) ([]int64, error) {
	out := make([]int64, l.Len())
	if c.NoiseOff() || w.Sign() == 0 {
		return out, nil
	}
	vars := c.ShareVariance(w)
	for _, b := range stats.Blocks {
		lo, hi := l.Range(b)
		if err := ParallelFill(out[lo:hi], vars[b], rnd, workers); err != nil {
			return nil, fmt.Errorf("noise share, block %s: %w", b, err)
		}
	}
	return out, nil
}

// Accounting is the privacy of a release given the shares that count.
type Accounting struct {
	// Cost is the release's cost (ReleaseCost of the shares' variances);
	// Rho and Mu its parts for reports.
	Cost Cost  `json:"cost"`
	Rho  Float `json:"rho"`
	Mu   Float `json:"mu"`
	// Epsilon is Cost.Epsilon at the calibration's delta: the exact
	// Gaussian profile with the discrete correction included;
	// EpsilonCorrection (2 Eta) is the part of it that the correction adds.
	Epsilon           Float `json:"epsilon"`
	EpsilonCorrection Float `json:"epsilon_correction"`
	// Log10Tau is log10 of the Kairouz-Liu-Steinke distributed discrete
	// Gaussian correction term of each block (R, v, n).
	Log10Tau [3]Float `json:"log10_tau"`
}

// Account returns the privacy of the release for the given shares (see
// Accounting).
func (c Calibration) Account(shares []Share) Accounting {
	var acc Accounting
	if c.NoiseOff() {
		acc.Cost = c.Cost
		acc.Rho, acc.Mu, acc.Epsilon = Float(math.Inf(1)), Float(math.Inf(1)), Float(math.Inf(1))
		for b := range acc.Log10Tau {
			acc.Log10Tau[b] = Float(math.Inf(-1))
		}
		return acc
	}
	blocks := c.blocks(c.Variance, shares)
	for _, b := range stats.Blocks {
		_, lt := DDG(blocks[b].Shares, c.Sensitivity[b], c.Dims[b])
		acc.Log10Tau[b] = Float(lt)
	}
	cost, corr := ReleaseCost(c.Geometry, blocks, c.Delta)
	acc.Cost, acc.Rho, acc.Mu = cost, cost.Rho, Float(cost.Mu())
	acc.Epsilon, acc.EpsilonCorrection = Float(cost.Epsilon(c.Delta)), Float(2*corr.Eta)
	return acc
}

// ShareBound returns what the plan can put in a release that is sealed with
// at least minOwners uploads: at most one share per planned owner, the
// proxy and each switching member, each of at least the smallest positive
// weight any of them gets at any seal that can succeed.
func (p Plan) ShareBound(minOwners int) (ShareBound, error) {
	if err := p.Validate(); err != nil {
		return ShareBound{}, err
	}
	sb := ShareBound{Max: p.Owners + 1 + p.CSPs}
	for m := max(minOwners, 0); m <= p.Owners; m++ {
		for _, r := range []Role{RoleOwner, RoleProxy, RoleCSP} {
			w, err := p.Weight(r, m)
			if errors.Is(err, ErrPlanInfeasible) {
				break // such a seal fails: nothing is released
			}
			if err != nil {
				return ShareBound{}, err
			}
			if w.Sign() > 0 && (sb.MinWeight == nil || w.Cmp(sb.MinWeight) < 0) {
				sb.MinWeight = w
			}
		}
	}
	if sb.MinWeight == nil {
		return ShareBound{}, fmt.Errorf("noise plan %s: no seal with at least %d owners can reach its guarantee", p.Kind, minOwners)
	}
	return sb, nil
}

// Collusion is one row of the collusion table: the guarantee left when the
// user colludes with the named parties (whose shares it can subtract).
type Collusion struct {
	With    string `json:"with"`
	Parties int    `json:"parties"`
	Rho     Float  `json:"rho"`
	Mu      Float  `json:"mu"`
	Epsilon Float  `json:"epsilon"`
}

// CollusionTable returns the guarantee with everyone honest, with the user
// colluding with the proxy, with one CSP member, with one owner (the largest
// share of each kind present), and with the worst Tolerate parties (the t
// largest shares). The last row is what the job promises and what owners'
// ledgers are charged.
func (p Plan) CollusionTable(c Calibration, shares []Share) []Collusion {
	without := func(drop map[int]bool) []Share {
		var out []Share
		for i, s := range shares {
			if !drop[i] {
				out = append(out, s)
			}
		}
		return out
	}
	row := func(with string, drop map[int]bool) Collusion {
		a := c.Account(without(drop))
		return Collusion{With: with, Parties: len(drop), Rho: a.Rho, Mu: a.Mu, Epsilon: a.Epsilon}
	}
	largest := func(r Role) map[int]bool {
		best := -1
		for i, s := range shares {
			if s.Role == r && (best < 0 || s.Weight.Cmp(shares[best].Weight) > 0) {
				best = i
			}
		}
		if best < 0 {
			return map[int]bool{}
		}
		return map[int]bool{best: true}
	}
	rows := []Collusion{row("nobody", nil), row("proxy", largest(RoleProxy)), row("one csp member", largest(RoleCSP)), row("one owner", largest(RoleOwner))}
	order := make([]int, len(shares))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return shares[j].Weight.Cmp(shares[i].Weight) })
	worst := map[int]bool{}
	for _, i := range order[:min(p.Tolerate, len(order))] {
		worst[i] = true
	}
	return append(rows, row(fmt.Sprintf("worst %d (promised)", p.Tolerate), worst))
}

// ParseSplit reads a budget split written R/V/N (e.g. 0.95/0.04/0.01); the
// empty string is the zero Split (the analysis's default).
func ParseSplit(s string) (Split, error) {
	if s == "" {
		return Split{}, nil
	}
	var sp Split
	if _, err := fmt.Sscanf(s, "%g/%g/%g", &sp.R, &sp.V, &sp.N); err != nil {
		return sp, fmt.Errorf("split %q: want R/V/N, e.g. 0.95/0.04/0.01", s)
	}
	return sp, sp.Validate()
}
