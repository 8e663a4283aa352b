// Package dp holds the differential-privacy primitives of the protocol: an
// exact sampler for discrete Gaussian noise, the conversion between
// zero-concentrated DP and (epsilon, delta)-DP used to calibrate and report
// budgets, and the accounting for noise that is split into shares added by
// several parties (the distributed discrete Gaussian). It does no I/O beyond
// reading the random source it is given.
//
// # Sampler (exact)
//
// Sampler draws from N_Z(0, sigma^2), P[X = x] proportional to
// exp(-x^2/(2 sigma^2)) on the integers, with the algorithms of Canonne,
// Kamath and Steinke, "The Discrete Gaussian for Differential Privacy"
// (NeurIPS 2020, arXiv:2004.00010): Bernoulli(exp(-gamma)) for rational gamma
// (Algorithm 1), the discrete Laplace (Algorithm 2) and the discrete Gaussian
// by rejection from the discrete Laplace with scale t = floor(sigma) + 1
// (Algorithm 3). The variance parameter is an exact rational (*big.Rat) and
// all arithmetic is on integers (uint64 fast paths, math/big otherwise):
// every Bernoulli(p) with rational p compares uniform random integers against
// the exact binary expansion of p, reading further bits only on ties. Given
// uniform random bytes the output distribution is exactly N_Z(0, sigma^2);
// there is no floating point anywhere in the sampler. Randomness comes from
// an io.Reader, crypto/rand.Reader by default, read in 4 KiB blocks.
// ParallelFill splits large fills over goroutines.
//
// # Calibration and accounting (floating point)
//
// Neighbours are one row added to, or removed from, an owner's source; since
// an owner keeps only its first max_owner_rows rows, an added row may push
// out a kept one, so the release's sensitivity is the larger of adding one
// row and replacing one kept row by another (Neighbours; Geometry.Mu2 gives
// it in closed form for each layout: full, with its class-dependent v_k and
// n_k; the profile's moments; its histogram). The release is one Gaussian
// mechanism: blocks R, v and n with variances S_b make it mu-Gaussian DP with
// mu^2 = Geometry.Mu2(S). Calibrate gives each block the share Split_b of
// the add-one mu^2, scales the variances by the Factor the replacements
// cost at that split, and finds the largest mu that the exact (epsilon,
// delta) profile of the Gaussian mechanism allows (GaussMu, Balle and Wang
// 2018) once the discrete correction is set aside.
//
// Cost is the one privacy account: rho = mu^2/2 of the continuous
// mechanism a release is compared with, the discrete correction eta (the
// protocol's noise is a sum of discrete Gaussians per coordinate, and
// Correction bounds its distance to a rounded continuous Gaussian,
// pointwise on a region) and the tails outside the region. Costs compose by
// adding; Cost.Epsilon gives the epsilon at delta of any composition. A
// calibration's Cost covers the worst set of shares its plan can produce
// (ShareBound, Plan.ShareBound) and is within its (epsilon, delta) as
// Cost.Within computes it; every result, every owner's ledger and budget
// check and the profile's total use Cost. At the protocol's usual scales
// (16 fractional bits) eta is about 1e-10; at 4 bits it reaches 1e-3 to
// 1e-2 per job. BudgetRho is the rho an (epsilon, delta) budget holds for
// releases without correction, for display. TestGaussMuPublished and
// TestGaussEpsilonPublished check GaussMu and GaussEpsilon against
// Google's dp_accounting (testdata/analytic_gaussian.json, with its
// source).
//
// DeltaFor, EpsilonFor and RhoFor convert between rho-zCDP and
// (epsilon, delta)-DP with the bound of Canonne, Kamath and Steinke
// (Proposition 12 / Corollary 13 of arXiv:2004.00010), in the numerically
// careful form of Steinke's reference code. The protocol used them to
// calibrate until the exact profile replaced them (at epsilon 1, delta 1e-6
// the conversion allows noise 4.53 times the sensitivity where the exact
// profile allows 4.22); they remain for comparing the two (tested against
// Steinke's values in testdata/zcdp_conversions.json). Their results are
// rounded in the safe direction, as are GaussEpsilon's and GaussMu's.
//
// # Distributed discrete Gaussian (floating point)
//
// A sum of independent discrete Gaussians is close to, but not exactly, a
// discrete Gaussian. DDG accounts for it with the bound of Kairouz, Liu and
// Steinke (ICML 2021, arXiv:2102.06387), generalised to shares of different
// variances, and reports the size of the correction (the accounting takes
// its term into the Correction). GaussRho is the plain Gaussian-mechanism
// rho.
//
// # Concurrency
//
// Sampler is not safe for concurrent use; make one per goroutine.
// ParallelFill, the conversions, the Gaussian profile, the corrections,
// Geometry, Cost, DDG and GaussRho are pure functions and values, safe for
// concurrent use. The package has no mutable global
// state.
package dp
