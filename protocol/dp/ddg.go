package dp

import (
	"math"
	"slices"
)

// Distributed discrete Gaussian accounting (Kairouz, Liu, Steinke, "The
// Distributed Discrete Gaussian Mechanism for Federated Learning with Secure
// Aggregation", ICML 2021, arXiv:2102.06387; "KLS" below).
//
// The sum of independent discrete Gaussians is not exactly a discrete
// Gaussian. KLS bound the gap inductively: adding one more share to a sum
// that is close to N_Z(0, A) gives something close to N_Z(0, A + b), with an
// extra error 10 exp(-2 pi^2 A b/(A + b)) (A b/(A + b) is the "parallel sum"
// of the two variances, the quantity that appears when the product of the
// two Gaussian pmfs is summed over the integers by Poisson summation). For n
// equal shares of variance sigma^2, the k-th step joins a sum of variance k
// sigma^2 and a share of variance sigma^2, so A b/(A+b) = sigma^2 k/(k+1) and
//
//	tau = 10 * sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k/(k+1)).
//
// With heterogeneous variances s_1..s_n the same induction, adding the shares
// in some order, gives
//
//	tau = 10 * sum_{k=1}^{n-1} exp(-2 pi^2 h_k),  h_k = S_k s_{k+1}/(S_k + s_{k+1}),
//
// with S_k = s_1 + ... + s_k. Addition is commutative, so every order yields a
// valid bound and we may use the best one. Each h_k is at most
// min(S_k, s_{k+1}), so tau is dominated by the smallest shares; in
// descending order S_k >= k s_{k+1}, so h_k >= s_{k+1} k/(k+1), which for each
// term is within a factor k/(k+1) of the largest value that share can
// contribute. Exhaustive minimisation over orders is not needed for the
// guarantee; DDG evaluates the descending and the ascending order and keeps
// the smaller tau. For equal variances both orders are the paper's formula.
//
// Rényi divergence and rho. KLS bound the Rényi divergence of order alpha of
// the summed mechanism with L2 sensitivity Delta over d coordinates (their
// Proposition 14 / Eq. 17, as implemented by the authors in
// github.com/google-research/federated, distributed_dp/accounting_utils.py,
// _compute_rdp_discrete_gaussian_simplified) by
//
//	min( alpha Delta^2/(2 S) + tau d,  (alpha/2) (Delta/sqrt(S) + tau sqrt(d))^2 ),
//
// with S the total variance (n sigma^2 for equal shares). Since alpha > 1, the
// first term is at most alpha (Delta^2/(2S) + tau d), so the mechanism is
// rho-zCDP with
//
//	rho = min( Delta^2/(2S) + tau d,  (Delta/sqrt(S) + tau sqrt(d))^2 / 2 ).
//
// KLS Theorem 1 is sometimes quoted as (1/2) eps^2-concentrated DP with eps =
// min(sqrt(Delta^2/(n sigma^2) + tau d/2), Delta/(sqrt(n) sigma) + tau
// sqrt(d)), whose first branch is rho = Delta^2/(2 n sigma^2) + tau d/4. We
// could not check the theorem's text with the tools available; the form
// above, derived from the authors' released RDP bound, is never smaller, so
// it is the conservative choice. The difference only matters when tau is not
// negligible; at the protocol's integer scales (share variances >= 2^20) tau
// underflows float64 and rho equals GaussRho of the total variance.
//
// Guard. The constant 10 comes from a theta-series estimate that needs the
// parallel sums h_k to be bounded away from 0 (for h_k near 0 the error term
// is of order 1 and the estimate no longer holds). As a conservative guard of
// our own (not from KLS), DDG returns rho = +Inf, i.e. no claim, when every
// order it tries has some h_k < 1/2. At h_k = 1/2 the term is 10 exp(-pi^2) ~
// 5e-4 and the estimate holds with a wide margin.

// minParallelVariance is the guard on h_k described above.
const minParallelVariance = 0.5

// GaussRho returns the zCDP rho of adding (discrete or continuous) Gaussian
// noise of the given variance to a query with L2 sensitivity delta2:
// delta2^2 / (2 variance). It is 0 if delta2 == 0, +Inf if variance == 0 <
// delta2, and NaN for a negative or NaN argument.
func GaussRho(variance, delta2 float64) float64 {
	switch {
	case math.IsNaN(variance) || math.IsNaN(delta2) || variance < 0 || delta2 < 0:
		return math.NaN()
	case delta2 == 0:
		return 0
	case variance == 0:
		return math.Inf(1)
	}
	return delta2 * delta2 / (2 * variance)
}

// DDG returns the zCDP rho of the sum of independent discrete Gaussian shares
// with the given variances (in the query's integer units) for a block with L2
// sensitivity delta2 over dim coordinates (every coordinate gets an
// independent share of the same variance from each party), including the
// Kairouz-Liu-Steinke correction, and log10 of tau for reporting.
//
// log10Tau is computed in log space with a log-sum-exp, so tiny tau values
// are reported (e.g. -1e24 for variances near 2^80) rather than rounded to 0;
// it is -Inf only when tau is exactly 0, that is with fewer than two nonzero
// shares (a single discrete Gaussian needs no correction).
//
// Shares of variance 0 add no noise and are ignored. With no noise at all,
// rho is +Inf (0 if delta2 == 0). rho is +Inf as well when the shares are too
// small for the KLS estimate (see the guard above). Negative or NaN
// variances, a negative, infinite or NaN delta2, or dim < 0 give (NaN, NaN).
func DDG(variances []float64, delta2 float64, dim int) (rho float64, log10Tau float64) {
	if math.IsNaN(delta2) || delta2 < 0 || math.IsInf(delta2, 1) || dim < 0 {
		return math.NaN(), math.NaN()
	}
	shares := make([]float64, 0, len(variances))
	total := 0.0
	for _, v := range variances {
		if math.IsNaN(v) || v < 0 || math.IsInf(v, 1) {
			return math.NaN(), math.NaN()
		}
		if v > 0 {
			shares = append(shares, v)
			total += v
		}
	}
	slices.Sort(shares)
	logTauAsc, okAsc := logTau(shares)
	slices.Reverse(shares)
	logTauDesc, okDesc := logTau(shares)
	lt := math.Inf(1)
	if okDesc {
		lt = logTauDesc
	}
	if okAsc && logTauAsc < lt {
		lt = logTauAsc
	}
	if !okAsc && !okDesc {
		lt = math.Min(logTauAsc, logTauDesc)
	}
	log10Tau = lt / math.Ln10
	switch {
	case delta2 == 0:
		return 0, log10Tau
	case total == 0:
		return math.Inf(1), log10Tau
	case !okAsc && !okDesc:
		return math.Inf(1), log10Tau
	}
	tau := math.Exp(lt)
	d := float64(dim)
	rho1 := delta2*delta2/(2*total) + tau*d
	e2 := delta2/math.Sqrt(total) + tau*math.Sqrt(d)
	rho2 := e2 * e2 / 2
	return math.Min(rho1, rho2), log10Tau
}

// logTau returns log(tau) for the shares added in the given order, and
// whether every parallel sum h_k passes the guard. log(tau) is -Inf for fewer
// than two shares.
func logTau(shares []float64) (float64, bool) {
	if len(shares) < 2 {
		return math.Inf(-1), true
	}
	ok := true
	terms := make([]float64, 0, len(shares)-1)
	sum := shares[0]
	for _, s := range shares[1:] {
		// h = S s/(S + s), written to avoid overflow of S*s.
		h := s * (sum / (sum + s))
		if h < minParallelVariance {
			ok = false
		}
		terms = append(terms, math.Log(10)-2*math.Pi*math.Pi*h)
		sum += s
	}
	m := slices.Max(terms)
	acc := 0.0
	for _, t := range terms {
		acc += math.Exp(t - m)
	}
	return m + math.Log(acc), ok
}
