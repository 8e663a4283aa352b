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
// # Calibration (floating point)
//
// DeltaFor, EpsilonFor and RhoFor convert between rho-zCDP and
// (epsilon, delta)-DP with the tight bound of Canonne, Kamath and Steinke
// (Proposition 12 / Corollary 13 of arXiv:2004.00010), in the numerically
// careful form of Steinke's reference code. These operate on public
// parameters in float64. Their results are rounded in the safe direction:
// EpsilonFor never understates epsilon and RhoFor never overstates rho; any
// imprecision in the inner minimisation only overstates delta.
//
// # Distributed discrete Gaussian (floating point)
//
// A sum of independent discrete Gaussians is close to, but not exactly, a
// discrete Gaussian. DDG accounts for it with the bound of Kairouz, Liu and
// Steinke (ICML 2021, arXiv:2102.06387), generalised to shares of different
// variances, and reports the size of the correction. GaussRho is the plain
// Gaussian-mechanism rho.
//
// # Concurrency
//
// Sampler is not safe for concurrent use; make one per goroutine.
// ParallelFill, DeltaFor, EpsilonFor, RhoFor, DDG and GaussRho are pure
// functions and safe for concurrent use. The package has no mutable global
// state.
package dp
