package power

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/stats"
)

// Calibration is the noise of a whole power-method job: the central
// variances, in integer units, of every power round's entries (VarY, scale
// 2^(2g+h)) and of round 0's v and n (scale 2^g), and the job's composed
// cost. A Calibration is a plain value.
type Calibration struct {
	Epsilon, Delta float64
	// Mu is the Gaussian-DP parameter of the whole job (all rounds) under
	// dp.Neighbours and Factor what replacements cost at this split (mu^2
	// under Neighbours over mu^2 for adding one row).
	Mu, Factor float64
	Split      dp.Split
	// VarY, VarV, VarN are the central variances. Nil when noise is off.
	VarY, VarV, VarN *big.Int
	// Cost is the job's cost, all T + 1 rounds composed, with the discrete
	// correction of all their coordinates for the worst set of shares the
	// noise plan can produce: what every owner's ledger charges once.
	Cost dp.Cost
	pr   Params
}

// geometry is the statistics release's full layout with one class, whose
// neighbour cases (dp.Geometry.Mu2) are the power job's: see the package
// documentation.
func geometry(pr Params) dp.Geometry {
	return dp.Geometry{Layout: stats.Layout{D: pr.D, K: 1, Kind: stats.Full}, Bound: pr.Bound, Bits: pr.Bits}
}

// yUnit is the add-one sensitivity of a power round squared times the
// rounds, T (B^2 2^h)^2, the numerator of the rounds' mR.
func yUnit(pr Params) *big.Int {
	b := big.NewInt(pr.Bound)
	b.Mul(b, b).Lsh(b, pr.QBits)
	b.Mul(b, b)
	return b.Mul(b, big.NewInt(int64(pr.Rounds)))
}

// blockVariances returns the variances Mu2 is given: the R block's
// equivalent sigma_Y^2 / (T 2^(2h)), so that B^4 over it is the rounds' mR.
func blockVariances(pr Params, vy, vv, vn *big.Int) [3]float64 {
	ry := new(big.Rat).SetFrac(vy, new(big.Int).Lsh(big.NewInt(int64(pr.Rounds)), 2*pr.QBits))
	f, _ := ry.Float64()
	v, _ := new(big.Rat).SetInt(vv).Float64()
	n, _ := new(big.Rat).SetInt(vn).Float64()
	return [3]float64{f, v, n}
}

// JobCost is the cost of a job with the given central variances and shares
// within sb: rho from the neighbour cases of all rounds (dp.Geometry.Mu2),
// the discrete correction of the T d p + d + 1 coordinates
// (dp.DiscreteCorrection) plus the share bound's part (dp.ShareBound.Eta).
func JobCost(pr Params, vy, vv, vn *big.Int, delta float64, sb dp.ShareBound) dp.Cost {
	fy, _ := new(big.Rat).SetInt(vy).Float64()
	fv, _ := new(big.Rat).SetInt(vv).Float64()
	fn, _ := new(big.Rat).SetInt(vn).Float64()
	blocks := []dp.BlockNoise{
		{Shares: []float64{fy}, Dim: pr.Rounds * pr.Len()},
		{Shares: []float64{fv}, Dim: pr.D},
		{Shares: []float64{fn}, Dim: 1},
	}
	corr := dp.DiscreteCorrection(blocks, delta)
	mu2 := geometry(pr).Mu2(blockVariances(pr, vy, vv, vn))
	return dp.Cost{
		Rho:  dp.Float(mu2 / 2),
		Eta:  dp.Float(corr.Eta + sb.Eta([]float64{fy, fv, fn}, []int{pr.Rounds * pr.Len(), pr.D, 1})),
		Tail: dp.Float(math.Exp(corr.LogTail)),
	}
}

// Calibrate computes the central noise of a job for (epsilon, delta): the
// largest mu whose variances give a cost within it (dp.Cost.Within, as the
// ledgers compute it). The split gives the rounds (its R share), v and n
// their shares of the add-one mu^2; each variance is
// ceil(sensitivity^2 Factor / (share mu^2)), the rounds' sensitivity being
// T (B^2 2^h)^2.
func Calibrate(pr Params, epsilon, delta float64, split dp.Split, sb dp.ShareBound) (Calibration, error) {
	if err := pr.Validate(); err != nil {
		return Calibration{}, err
	}
	if err := split.Validate(); err != nil {
		return Calibration{}, err
	}
	if split.R <= 0 || split.V <= 0 || split.N <= 0 {
		return Calibration{}, fmt.Errorf("power: the budget split %+v must give the rounds, v and n a share each", split)
	}
	switch {
	case math.IsNaN(epsilon) || epsilon <= 0 || math.IsInf(epsilon, 1):
		return Calibration{}, fmt.Errorf("power: epsilon = %v must be positive and finite", epsilon)
	case math.IsNaN(delta) || delta <= 0 || delta >= 1:
		return Calibration{}, fmt.Errorf("power: delta = %v must be in (0, 1)", delta)
	case sb.Max < 1 || sb.MinWeight == nil || sb.MinWeight.Sign() <= 0:
		return Calibration{}, errors.New("power: no share bound")
	}
	g := geometry(pr)
	sens := g.Sensitivity()
	c := Calibration{Epsilon: epsilon, Delta: delta, Split: split, pr: pr}
	c.Factor = g.Mu2([3]float64{sens[0] * sens[0] / split.R, sens[1] * sens[1] / split.V, sens[2] * sens[2] / split.N})
	if !(c.Factor > 0) || math.IsInf(c.Factor, 1) {
		return Calibration{}, fmt.Errorf("power: the split %+v gives no finite sensitivity", split)
	}
	bv := big.NewInt(pr.Bound)
	bv.Mul(bv, bv)
	bn := new(big.Int).Lsh(big.NewInt(1), 2*pr.Bits)
	variances := func(mu float64) (vy, vv, vn *big.Int) {
		v := func(num *big.Int, share float64) *big.Int {
			fr := new(big.Rat).SetFloat64(share * mu * mu / c.Factor)
			q := new(big.Rat).SetFrac(num, big.NewInt(1))
			return ceilRat(q.Quo(q, fr))
		}
		return v(yUnit(pr), split.R), v(bv, split.V), v(bn, split.N)
	}
	mu := dp.GaussMu(epsilon, delta)
	for range 200 {
		if !(mu > 0) {
			break
		}
		c.VarY, c.VarV, c.VarN = variances(mu)
		if c.Cost = JobCost(pr, c.VarY, c.VarV, c.VarN, delta, sb); c.Cost.Within(epsilon, delta) {
			c.Mu = c.Cost.Mu()
			return c, nil
		}
		mu *= 1 - 1e-4
	}
	return Calibration{}, fmt.Errorf("power: no noise level meets (%v, %v) for %d rounds of %d values", epsilon, delta, pr.Rounds, pr.Len())
}

func ceilRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// NoiseOff reports whether the calibration adds no noise (NoNoise).
func (c Calibration) NoiseOff() bool { return c.VarY == nil }

// NoNoise is the calibration of a job without noise (tests, simulations).
func NoNoise(pr Params) Calibration { return Calibration{pr: pr} }

// SigmaY is the central standard deviation of a power round's entries in
// data units (sigma_Y / 2^(2g+h)); 0 without noise.
func (c Calibration) SigmaY() float64 {
	if c.NoiseOff() {
		return 0
	}
	f, _ := new(big.Rat).SetInt(c.VarY).Float64()
	return math.Sqrt(f) / math.Ldexp(1, int(2*c.pr.Bits+c.pr.QBits))
}

// SigmaV is the central standard deviation of v's entries in data units.
func (c Calibration) SigmaV() float64 {
	if c.NoiseOff() {
		return 0
	}
	f, _ := new(big.Rat).SetInt(c.VarV).Float64()
	return math.Sqrt(f) / math.Ldexp(1, int(c.pr.Bits))
}

// Noise returns a share of weight w (dp.Plan.Weight) of round 0's noise
// (round == 0: [v | n]) or of a power round's (d p values), drawn from rnd
// (crypto/rand when nil) by dp.ParallelFill.
func (c Calibration) Noise(round int, w *big.Rat, rnd io.Reader) ([]int64, error) {
	pr := c.pr
	if round < 0 || round > pr.Rounds {
		return nil, fmt.Errorf("power: round %d outside [0, %d]", round, pr.Rounds)
	}
	n := pr.Len()
	if round == 0 {
		n = pr.Round0Len()
	}
	out := make([]int64, n)
	if c.NoiseOff() || w.Sign() == 0 {
		return out, nil
	}
	scaled := func(v *big.Int) *big.Rat { return new(big.Rat).Mul(new(big.Rat).SetInt(v), w) }
	if round > 0 {
		return out, dp.ParallelFill(out, scaled(c.VarY), rnd, 0)
	}
	if err := dp.ParallelFill(out[:pr.D], scaled(c.VarV), rnd, 0); err != nil {
		return nil, err
	}
	return out, dp.ParallelFill(out[pr.D:], scaled(c.VarN), rnd, 0)
}

// CheckRange verifies that a round's sum with every share of noise stays
// inside the plaintext space (-half, half): the statistics' bound plus 12
// standard deviations of the largest total noise (maxWeight times the
// central variance). Every party checks it for the job's parameters.
func (c Calibration) CheckRange(half *big.Int, maxWeight *big.Rat) error {
	pr := c.pr
	check := func(name string, bound, v *big.Int) error {
		total := new(big.Int).Set(bound)
		if v != nil {
			f, _ := new(big.Rat).Mul(new(big.Rat).SetInt(v), maxWeight).Float64()
			sd := new(big.Float).SetFloat64(12 * math.Sqrt(f))
			s, _ := sd.Int(nil)
			total.Add(total, s.Add(s, big.NewInt(1)))
		}
		if total.Cmp(half) >= 0 {
			return fmt.Errorf("power: %s with noise reaches 2^%d, beyond the plaintext space's 2^%d", name, total.BitLen(), half.BitLen())
		}
		return nil
	}
	if err := check("a round's statistic", yBound(pr), c.VarY); err != nil {
		return err
	}
	vb := new(big.Int).Mul(big.NewInt(pr.MaxRows), big.NewInt(max(pr.Bound, int64(1)<<pr.Bits)))
	if err := check("round 0's v", vb, c.VarV); err != nil {
		return err
	}
	return check("round 0's n", new(big.Int).Lsh(big.NewInt(pr.MaxRows), pr.Bits), c.VarN)
}
