package dp

import (
	"fmt"
	"math"
	"sync"
)

// Cost is what releases spend in the project's one privacy account: every
// owner's ledger, every owner's budget check, the profile's total and every
// epsilon printed are Cost.Epsilon of a Cost.
//
// A release M with discrete noise is compared with M', the same release with
// continuous Gaussian noise of the same variances rounded to the integers,
// which is mu-Gaussian DP (Rho = mu^2 / 2; Geometry.Mu2 for the sensitivity).
// On a region of the noise the two mechanisms' probabilities differ by a
// factor of at most e^Eta, and outside it each has mass at most Tail (see
// Correction). Costs add: Gaussian DP composes exactly (mu^2, so Rho,
// adds), the pointwise factors multiply (Eta adds) and the tails add (a
// union bound), for releases chosen one after another in any adaptive way.
// Epsilon then applies the argument of Correction to the sum: M is
// (eps' + 2 Eta, e^Eta delta' + (e^(eps' + Eta) + 1) Tail)-DP whenever M' is
// (eps', delta')-DP.
//
// A Cost is a plain value.
type Cost struct {
	Rho  Float `json:"rho"`
	Eta  Float `json:"eta"`
	Tail Float `json:"tail"`
}

// Plus returns the cost of both releases.
func (c Cost) Plus(o Cost) Cost {
	return Cost{Rho: c.Rho + o.Rho, Eta: c.Eta + o.Eta, Tail: c.Tail + o.Tail}
}

// Compose returns the cost of all the releases.
func Compose(costs ...Cost) Cost {
	var out Cost
	for _, c := range costs {
		out = out.Plus(c)
	}
	return out
}

// Valid reports whether every part is a number >= 0 (+Inf allowed: no
// guarantee).
func (c Cost) Valid() bool {
	return c.Rho >= 0 && c.Eta >= 0 && c.Tail >= 0
}

// Mu returns sqrt(2 Rho).
func (c Cost) Mu() float64 { return math.Sqrt(2 * float64(c.Rho)) }

// Epsilon returns the epsilon at which the releases are together
// (epsilon, delta)-DP: GaussEpsilon(mu, delta') + 2 Eta with delta' = (delta
// - (e^(eps0 + 1 + Eta) + 1) Tail) e^-Eta, eps0 = GaussEpsilon(mu, delta).
// It never understates epsilon; +Inf when no bound applies (an invalid
// cost, or tails not small against delta), 0 for a zero cost.
func (c Cost) Epsilon(delta float64) float64 {
	rho, eta, tail := float64(c.Rho), float64(c.Eta), float64(c.Tail)
	switch {
	case !c.Valid() || math.IsNaN(delta) || delta <= 0:
		return math.Inf(1)
	case math.IsInf(rho, 1) || math.IsInf(eta, 1) || math.IsInf(tail, 1):
		return math.Inf(1)
	case rho == 0 && eta == 0 && tail == 0:
		return 0
	}
	mu := c.Mu()
	eps0 := GaussEpsilon(mu, delta)
	dc := (delta - (math.Exp(eps0+1+eta)+1)*tail) * math.Exp(-eta)
	if !(dc > 0) {
		return math.Inf(1)
	}
	e := GaussEpsilon(mu, dc)
	if e > eps0+1 {
		// The tail term assumed epsilon <= eps0 + 1 (it holds whenever the
		// tails are small against delta, as they are by construction).
		return math.Inf(1)
	}
	return e + 2*eta
}

// Within reports whether the releases are together (epsilon, delta)-DP.
func (c Cost) Within(epsilon, delta float64) bool { return c.Epsilon(delta) <= epsilon }

// Room returns how much more Rho, with no correction of its own, the
// releases of c leave within (epsilon, delta): the largest r (to bisection
// precision, rounded down) such that c plus a release of cost {r, 0, 0} is
// within the budget. It is negative when c alone is not within it (minus
// the Rho that would have to go), and 0 for an invalid budget. Operators
// read it as the budget left; owners decide with Within.
func (c Cost) Room(epsilon, delta float64) float64 {
	if !(epsilon > 0) || math.IsInf(epsilon, 1) || !(delta > 0 && delta < 1) {
		return 0
	}
	key := roomKey{math.Float64bits(float64(c.Rho)), math.Float64bits(float64(c.Eta)), math.Float64bits(float64(c.Tail)),
		math.Float64bits(epsilon), math.Float64bits(delta)}
	if r, ok := roomMemo.get(key); ok {
		return r
	}
	r := c.room(epsilon, delta)
	roomMemo.put(key, r)
	return r
}

// roomMemo keeps Room's answers: a pure function of its inputs that costs
// nested bisections (some 5 ms), which an owner asks of the same ledger
// several times a job (its budget, its balance, each metrics scrape) and a
// farm of simulated owners thousands of times (a fifth of a 1,000-owner
// farm's CPU).
var roomMemo = roomCache{limit: 4096}

type roomKey struct{ rho, eta, tail, epsilon, delta uint64 }

// roomCache is a map of at most limit answers, emptied when full; safe for
// concurrent use.
type roomCache struct {
	mu    sync.Mutex
	m     map[roomKey]float64
	limit int
}

func (m *roomCache) get(k roomKey) (float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

func (m *roomCache) put(k roomKey, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= m.limit {
		m.m = make(map[roomKey]float64)
	}
	m.m[k] = v
}

// room is Room, computed.
func (c Cost) room(epsilon, delta float64) float64 {
	fits := func(r float64) bool {
		return Cost{Rho: c.Rho + Float(r), Eta: c.Eta, Tail: c.Tail}.Within(epsilon, delta)
	}
	if !fits(0) {
		// How much of c's Rho would have to go for the rest to fit (all of
		// it, and more, when its correction alone does not).
		if !fits(-float64(c.Rho)) {
			return -float64(c.Rho)
		}
		lo, _ := bisect(-float64(c.Rho), 0, func(r float64) bool { return !fits(r) })
		return lo
	}
	hi := math.Max(1, 2*float64(c.Rho))
	for fits(hi) {
		if hi > math.MaxFloat64/4 {
			return hi
		}
		hi *= 2
	}
	lo, _ := bisect(0, hi, func(r float64) bool { return !fits(r) })
	for lo > 0 && !fits(lo) {
		lo = math.Nextafter(lo, 0)
	}
	return lo
}

// BudgetRho returns the Rho of a total (epsilon, delta) budget for releases
// without correction (Cost{}.Room): what an operator reads as the budget in
// rho. Owners decide with Cost.Within, corrections included. It fails for
// epsilon not positive and finite, or delta outside (0, 1).
func BudgetRho(epsilon, delta float64) (float64, error) {
	switch {
	case math.IsNaN(epsilon) || epsilon <= 0 || math.IsInf(epsilon, 1):
		return 0, fmt.Errorf("dp: budget: epsilon = %v must be positive and finite", epsilon)
	case math.IsNaN(delta) || delta <= 0 || delta >= 1:
		return 0, fmt.Errorf("dp: budget: delta = %v must be in (0, 1)", delta)
	}
	return Cost{}.Room(epsilon, delta), nil
}

// LegacyFactor bounds how much larger a release's mu^2 is under Neighbours
// than under adding one row, for every layout and budget split (Geometry.Mu2:
// at most 4 m_v, 2 m_R + 3 m_v or twice the add-one sum).
const LegacyFactor = 4

// LegacyCost bounds the cost of a release recorded before costs were kept
// (an owner's ledger entry with its rho, epsilon and delta only). Its rho
// was calibrated for adding one row, not for Neighbours, so its mu^2 is at
// most LegacyFactor times 2 rho. Its calibration met (epsilon, delta) with
// the correction of its central noise set aside, which is therefore at most
// (epsilon - GaussEpsilon(mu, delta)) / 2, and its tails were below
// delta e^-40.
func LegacyCost(rho, epsilon, delta float64) Cost {
	c := Cost{Rho: Float(LegacyFactor * rho)}
	if !(delta > 0) || !(epsilon > 0) || math.IsInf(epsilon, 1) {
		return c
	}
	c.Eta = Float(math.Max(0, (epsilon-GaussEpsilon(math.Sqrt(2*rho), delta))/2))
	c.Tail = Float(delta * math.Exp(-tailMargin))
	return c
}

// BudgetEpsilon returns the epsilon at delta of a rho without correction,
// Cost{Rho: rho}.Epsilon(delta): what an operator reads next to a rho that
// an older owner reported alone.
func BudgetEpsilon(rho, delta float64) float64 {
	if math.IsNaN(rho) || rho < 0 {
		return math.NaN()
	}
	return Cost{Rho: Float(rho)}.Epsilon(delta)
}
