package dp

import (
	"math"
	"math/big"

	"github.com/fedpca/fedpca/protocol/stats"
)

// Neighbours names the neighbouring relation every guarantee is stated
// under (PROTOCOL.md section 6): two datasets are neighbours when one is the
// other with one row added to (or removed from) one owner's source. Each
// owner keeps at most max_owner_rows rows (the first ones, in file order), so
// at the cap an added row can push out the last kept one: the release then
// sees one kept row replaced by another. The sensitivity is therefore the
// larger of adding one row and replacing one kept row by another, and the
// guarantee holds for replace-one neighbours as well.
const Neighbours = "add or remove one row of an owner's source, which at the owner's row cap may replace one kept row by another (replace-one neighbours are covered too)"

// Geometry is what the sensitivity of a release depends on: its layout and
// the rows' clip bound B at scale 2^Bits (integer units). Rows are in the
// ball ||q|| <= B; a moments layout's rows are also in the box |q_i| <= 2^Bits
// (stats.Accumulator refuses others).
type Geometry struct {
	Layout stats.Layout
	Bound  int64
	Bits   uint
}

// Sensitivity returns the L2 sensitivity of each block to adding one row
// (the square root of stats.Layout.Sensitivity2) as float64.
func (g Geometry) Sensitivity() [3]float64 {
	var out [3]float64
	for b, s := range g.Layout.Sensitivity2(g.Bound, g.Bits) {
		out[b], _ = new(big.Float).SetPrec(128).Sqrt(new(big.Float).SetPrec(128).SetInt(s)).Float64()
	}
	return out
}

// Mu2 returns mu^2 of the release when each coordinate of block b gets
// Gaussian noise of total variance s[b] (integer units): the largest
// sum_b ||f_b(x) - f_b(x')||^2 / s[b] over neighbours x, x' (see
// Neighbours), i.e. the squared sensitivity of the whole release in the
// metric of its noise. It is +Inf when a nonempty block has no noise.
//
// With m_b = Delta_b^2 / s[b] the add-one terms (Delta_b the block's
// add-one sensitivity), the cases are:
//
//   - adding one row: m_R + m_v + m_n (the release is linear in the rows);
//   - full layout, a row q of class k replaced by q' of class k' != k: R
//     changes by q q^T - q' q'^T, whose Frobenius norm squared is
//     |q|^4 + |q'|^4 - 2 (q.q')^2 <= 2 B^4 (the packed upper triangle is never
//     longer), v_k by -q and v_k' by q' (2 B^2), n_k and n_k' by 2^g each:
//     2 (m_R + m_v + m_n), when K >= 2;
//   - full layout, same class: with p = q.q' in [-B^2, B^2], R changes by
//     at most 2 B^4 - 2 p^2 and v_k by |q - q'|^2 <= 2 B^2 - 2 p, n not at
//     all; the maximum over p of the weighted sum is 2 m_R + 2 m_v +
//     m_v^2 / (2 m_R) when m_v <= 2 m_R (at p = -m_v B^2 / (2 m_R)), else
//     4 m_v (at p = -B^2, q' = -q);
//   - moments (one class): per coordinate x = q_i, y = q'_i in [-h, h]
//     (h = 2^g) the diagonal changes by x^2 - y^2 = s t and v by t (s = x +
//     y, t = x - y, |s| + |t| <= 2h), so the sum is at most d times the
//     maximum of t^2 ((2h - t)^2 / s_R + 1 / s_v) over t in [0, 2h] (box
//     bound); also at most 2 m_R + 4 m_v (ball bound); the smaller holds;
//   - histogram: one row moves from one bucket to another: 2 m_n when
//     K >= 2;
//   - marginals: each of the D features' values moves from one bucket to
//     another, two counts each: 2 D 2^(2g) against the add-one D 2^(2g),
//     2 m_n when K >= 2.
//
// These are upper bounds that the rows can reach (up to the rounding of
// the rows to integers), so calibrating with them is tight. The result is
// raised by a relative 1e-12 for the rounding of the closed forms.
func (g Geometry) Mu2(s [3]float64) float64 {
	dims := g.Layout.Dims()
	sens := g.Sensitivity()
	var m [3]float64
	for b := range m {
		if dims[b] == 0 || sens[b] == 0 {
			continue
		}
		if !(s[b] > 0) {
			return math.Inf(1)
		}
		m[b] = sens[b] * sens[b] / s[b]
	}
	mR, mV, mN := m[stats.BlockR], m[stats.BlockV], m[stats.BlockN]
	out := mR + mV + mN // adding one row
	switch g.Layout.Kind {
	case stats.Full:
		same := 4 * mV
		if mV <= 2*mR {
			same = 2*mR + 2*mV + mV*mV/(2*mR)
		}
		out = max(out, same)
		if g.Layout.K >= 2 {
			out = max(out, 2*(mR+mV+mN))
		}
	case stats.Moments:
		h := math.Ldexp(1, int(g.Bits))
		out = max(out, min(2*mR+4*mV, float64(g.Layout.D)*boxTerm(16*h*h*h*h/s[stats.BlockR], 4*h*h/s[stats.BlockV])))
	case stats.Histogram, stats.Marginals:
		if g.Layout.K >= 2 {
			out = max(out, 2*mN)
		}
	}
	return out * (1 + 1e-12)
}

// boxTerm returns the maximum over u in [0, 1] of a u^2 (1-u)^2 + b u^2 (a,
// b >= 0): t = 2h u in Mu2's moments case, a = 16 h^4 / s_R, b = 4 h^2 /
// s_v. Its derivative vanishes at u = 0 and at the roots of
// 2a u^2 - 3a u + a + b = 0, u = (3 -+ sqrt(1 - 8b/a)) / 4, real when a >= 8b;
// the smaller is a local maximum, the larger a local minimum, and the
// derivative at u = 1 is 2b >= 0: the maximum is at u = 1 or at the smaller
// root.
func boxTerm(a, b float64) float64 {
	f := func(u float64) float64 { return a*u*u*(1-u)*(1-u) + b*u*u }
	best := f(1)
	if a > 0 && a >= 8*b {
		best = max(best, f((3-math.Sqrt(1-8*b/a))/4))
	}
	return best
}
