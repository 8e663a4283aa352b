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
	PlanOwners  = "owners"  // each owner; the proxy and the switching CSP members top up for owners who never upload
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

// DefaultSplit is PCA's: most of the budget on R, where PCA's utility
// lives; v and n are sums over many rows and tolerate more noise, all the
// more since PCA centres S_T on a James-Stein-shrunk mean
// (analysis.Scatters.ShrinkCentring), which keeps the noise on v from
// entering S_T in full.
//
// The split gives each block its share of the add-one mu^2; under
// Neighbours the release's mu^2 is Factor times that (Geometry.Mu2). With
// one class a replaced row changes no count, so the count's share is free
// until adding a row costs as much as replacing one: 0.65/0.02/0.33 has
// the R noise of 0.98/0.015/0.005 under the cap (sigma_R 6.07 against 6.02
// at epsilon 1, delta 1e-6, C = 1), v's where the old default had it before
// the cap was accounted for (34.6), and the count's ten times lower (8.5
// against 84).
//
// Measured (go run ./bench -suite split-sweep -split ..., 2026-11-27):
// PCA captured variance q/q0 (k = 5, true centred scatter) averaged over
// the ten shared datasets with a reference, epsilon 0.5/1/2 at delta 1e-6,
// 30 seeds each, central noise, shrunk centring, calibrated under
// Neighbours:
//
//	split (R/v/n)      factor  eps 0.5  eps 1   eps 2   mean
//	0.98/0.015/0.005   1.990   0.7723   0.8577  0.9222  0.8507   (the default until then)
//	0.66/0.01/0.33     1.340   0.7739   0.8572  0.9229  0.8514
//	0.65/0.02/0.33     1.340   0.7739   0.8585  0.9236  0.8520   (DefaultSplit)
//	0.64/0.03/0.33     1.341   0.7773   0.8559  0.9222  0.8518
//	0.70/0.02/0.28     1.440   0.7751   0.8592  0.9218  0.8520
//	0.60/0.02/0.38     1.240   0.7745   0.8556  0.9234  0.8512
//	0.55/0.02/0.43     1.140   0.7774   0.8554  0.9213  0.8514
//	0.495/0.01/0.495   1.010   0.7756   0.8564  0.9239  0.8520
//	0.98/0.015/0.005, add-one only (no valid guarantee):  0.8174 0.8959 0.9475  0.8869
//
// Utility is flat across these (within the seeds' noise, about 0.002):
// R's noise is about the same in all, since under the cap R can have at
// most half the add-one mu^2 (replacing a row by an orthogonal one changes R
// by sqrt(2) B^2). The last row is what the default split gave when the cap's
// replacements were not accounted for: the cap costs 0.036 of q/q0 on
// average. An earlier sweep, for adding one row alone (2026-11-24), chose
// 0.98/0.015/0.005 among R from 0.8 to 0.995, flat between 0.95 and 0.99.
var DefaultSplit = Split{R: 0.65, V: 0.02, N: 0.33}

// DiscriminantSplit is the default for DCA and LDA, which need the class
// sums and counts (v_k, n_k) far more than PCA does.
//
// Under Neighbours a row replaced by one of another class changes R, v and
// n by sqrt(2) times their add-one sensitivities (a factor 2 on mu^2), and
// one replaced within its class changes v by up to 2 B: the factor is
// above 2 unless n >= v^2 / (4 R). 0.25/0.5/0.25 (factor 2) has the R and v
// noise of the earlier default 0.3/0.6/0.1 under the cap (factor 2.4) and
// the counts' three times lower variance.
//
// Measured (go run ./bench -suite dca-sweep -split ..., 2026-11-27):
// change of the 5-fold cross-validated nearest-centroid accuracy on the
// DCA projections against non-private DCA, averaged over the ten shared
// datasets, epsilon 0.5/1/2 at delta = 1/N, 8 seeds, central noise,
// regulariser with the full noise margin, calibrated under Neighbours:
//
//	split (R/v/n)   factor  eps 0.5   eps 1    eps 2    mean
//	0.30/0.60/0.10  2.400   -0.0555   -0.0377  -0.0302  -0.0411   (the default until then)
//	0.25/0.50/0.25  2.000   -0.0572   -0.0388  -0.0266  -0.0408   (DiscriminantSplit)
//	0.30/0.50/0.20  2.017   -0.0524   -0.0374  -0.0302  -0.0400
//	0.30/0.45/0.25  2.000   -0.0552   -0.0418  -0.0325  -0.0432
//	0.20/0.45/0.35  2.000   -0.0576   -0.0383  -0.0298  -0.0419
//	0.15/0.50/0.35  2.000   -0.0560   -0.0382  -0.0306  -0.0416
//	0.35/0.40/0.25  2.000   -0.0586   -0.0373  -0.0305  -0.0421
//	0.30/0.60/0.10, add-one only (no valid guarantee):  -0.0423  -0.0300  -0.0239  -0.0320
//
// Flat within the seeds' noise (about 0.003); the cap costs 0.009 of
// accuracy on average. An earlier sweep for adding one row alone
// (2026-11-24) found utility flat for R between 0.1 and 0.4 with most of
// the rest on v, and halving the regulariser's noise margin costing 0.01 to
// 0.02.
var DiscriminantSplit = Split{R: 0.25, V: 0.5, N: 0.25}

// DefaultSplitFor returns the default budget split of an analysis: the
// discriminant one for "dca" and "lda", the profile rounds' for "moments",
// "marginals" and "norms", DefaultSplit otherwise.
func DefaultSplitFor(analysis string) Split {
	switch analysis {
	case "dca", "lda":
		return DiscriminantSplit
	case "moments":
		// The profile's first round: the diagonal and the sums have the
		// same sensitivity (sqrt(d) in data units) and matter alike.
		return Split{R: 0.45, V: 0.45, N: 0.1}
	case "norms", "marginals":
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

// MaxTotalWeight is the largest total noise, as a multiple of the central
// variance, that any seal of the plan with minOwners to Owners uploads can
// add (every share present: the owners', the proxy's and the CSPs'
// members'); seals the plan cannot make (ErrPlanInfeasible) fail and add
// nothing.
func (p Plan) MaxTotalWeight(minOwners int) *big.Rat {
	best := new(big.Rat)
	for m := max(minOwners, 0); m <= p.Owners; m++ {
		w := new(big.Rat).Mul(p.OwnerWeight(), big.NewRat(int64(m), 1))
		feasible := true
		for _, r := range []Role{RoleProxy, RoleCSP} {
			x, err := p.Weight(r, m)
			if err != nil {
				feasible = false // such a seal fails; it cannot overflow
				break
			}
			n := int64(1)
			if r == RoleCSP {
				n = int64(p.CSPs)
			}
			w.Add(w, x.Mul(x, big.NewRat(n, 1)))
		}
		if feasible && w.Cmp(best) > 0 {
			best = w
		}
	}
	return best
}

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
	return sb.Eta(s[:], dims[:])
}

// Eta returns the bound's part of the correction of a release whose blocks
// have central variances s and dims coordinates: the sum over the blocks of
// dims_b (-log(1 - tau_b)), tau_b = 10 (Max - 1) exp(-pi^2 s_b MinWeight)
// (+Inf when some tau_b >= 1; 0 for a release of one share).
func (sb ShareBound) Eta(s []float64, dims []int) float64 {
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
// (stats.Layout.Sensitivity2), under Neighbours, for releases whose shares
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
//
// When no noise level meets (epsilon, delta) (an epsilon so large that the
// discrete correction alone exceeds it), the error names the largest
// epsilon that works at delta, to three significant digits.
func CalibrateShares(epsilon, delta float64, split Split, l stats.Layout, bound int64, bits uint, sb ShareBound) (Calibration, error) {
	c, err := calibrateShares(epsilon, delta, split, l, bound, bits, sb)
	if !errors.Is(err, errNoLevel) {
		return c, err
	}
	// Bisect on log epsilon for the largest that calibrates.
	lo, hi := 0.0, epsilon
	for try := epsilon / 2; try > 1e-6; try /= 2 {
		if _, err := calibrateShares(try, delta, split, l, bound, bits, sb); err == nil {
			lo = try
			break
		}
	}
	if lo == 0 {
		return c, err
	}
	for range 40 {
		mid := math.Sqrt(lo * hi)
		if _, err := calibrateShares(mid, delta, split, l, bound, bits, sb); err == nil {
			lo = mid
		} else {
			hi = mid
		}
		if hi/lo < 1+1e-4 {
			break
		}
	}
	most := math.Floor(lo*1000) / 1000
	if lo >= 1 {
		most = math.Floor(lo*100) / 100
	}
	return c, fmt.Errorf("%w: at delta %v the largest epsilon this job's noise allows is %.4g", err, delta, most)
}

// errNoLevel: no noise level meets (epsilon, delta).
var errNoLevel = errors.New("no noise level meets the target")

func calibrateShares(epsilon, delta float64, split Split, l stats.Layout, bound int64, bits uint, sb ShareBound) (Calibration, error) {
	if bound < 1 || bits > 30 {
		return Calibration{}, fmt.Errorf("calibrate: clip bound %d and bits %d out of range", bound, bits)
	}
	if sb.Max < 1 || sb.MinWeight == nil || sb.MinWeight.Sign() <= 0 {
		return Calibration{}, fmt.Errorf("calibrate: share bound %d shares of at least %v", sb.Max, sb.MinWeight)
	}
	geom := Geometry{Layout: l, Bound: bound, Bits: bits}
	sens2, dims := l.Sensitivity2(bound, bits), l.Dims()
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
			v := new(big.Rat).SetInt(sens2[b])
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
			return Calibration{}, fmt.Errorf("calibrate: %w (%v, %v) with the discrete correction %.3g", errNoLevel, epsilon, delta, 2*c0.Eta)
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
		return Calibration{}, fmt.Errorf("calibrate: %w (%v, %v) with the discrete correction %.3g", errNoLevel, epsilon, delta, 2*c.Cost.Eta)
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
// Under the owners plan the switching CSP members top up as well as the
// proxy: a member knows how many owners' uploads are in the sum it switches
// (it verifies them), so a proxy that leaves uploads out of the sum cannot
// also leave out their noise (its own top-up is one of the t it may
// withhold).
func (p Plan) topper(r Role) bool {
	switch p.Kind {
	case PlanOwners, PlanAll:
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
	case PlanOwners, PlanAll:
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
