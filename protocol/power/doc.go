// Package power is the noisy power method for private PCA when d is large
// (10^4 to 10^5 features, such as genotypes), where the d x d scatter of the
// statistics release (package stats) cannot be uploaded.
//
// # What it computes, for whom
//
// A data user wants the top k principal components of the union of the
// owners' rows z (clipped to ||z|| <= C, quantised to g fractional bits) and
// must learn nothing beyond a differentially private release. A power-method
// job fixes, in public: k, p = k + oversampling columns, T rounds, a public
// seed, the rows' bits g and clip bound B = floor(2^g C), the bits h of the
// public matrices, and one privacy budget for the whole job. Its releases:
//
//   - round 0: v = sum_i q_i and n (scale 2^g, as the statistics release's v
//     and n), each owner's share [v | n] packed (Round0Len values);
//   - round t = 1..T: Y_t = sum_i q_i (q_i^T Qq_t), a d x p integer matrix at
//     scale 2^(2g+h), for the public integer matrix Qq_t (Quantize); each owner
//     computes its part exactly in int64 (Accumulator), encrypts it, proves it
//     well formed and uploads it as for any job (d p values per round instead
//     of d (d+1)/2).
//
// The sum of each round gets the split discrete Gaussian noise of the job's
// noise plan (Calibration.ShareVariance, drawn with dp.ParallelFill from
// crypto/rand). The user decodes Y_t, centres it with round 0's mean (a
// public rank-one correction, post-processing), and takes Q_{t+1} =
// orth(Y_t) (Next); Q_1 comes from the seed (Start) or from a public matrix
// such as a reference panel's components (StartFrom). After round T the
// components are the top k left singular vectors of the centred Y_T, their
// singular values estimating the eigenvalues (Finish), or the Rayleigh-Ritz
// vectors in the span of the last public matrix (FinishRitz), whose noise is
// its p x p projection only: the public rule is FinishRitz when the job
// starts from a public matrix. Both are post-processing of the release.
//
// # The construction
//
// The noisy power method of Hardt and Price ("The Noisy Power Method: A Meta
// Algorithm with Applications", NeurIPS 2014, Algorithm 1 and Corollary 1.1
// for private PCA) with the gap-dependent analysis of Balcan, Du, Wang and
// Yu ("An Improved Gap-Dependency Analysis of the Noisy Power Method",
// COLT 2016): Y_t = A Q_t + G_t, Q_{t+1} = orth(Y_t), here with A = sum z z^T
// minus the rank-one mean correction. Their bound (Hardt-Price Theorem 1.1,
// with p >= k): if in every round
//
//	5 ||G_t|| <= e (lambda_k - lambda_{k+1})   and
//	5 ||U^T G_t|| <= (lambda_k - lambda_{k+1}) (sqrt(p) - sqrt(k-1)) / (tau sqrt(d)),
//
// then after T = O(lambda_k / (lambda_k - lambda_{k+1}) log(d tau / e))
// rounds ||(I - Q_T Q_T^T) U_k|| <= e with probability at least
// 1 - tau^-Omega(p+1-k) - e^-Omega(d), U_k the top k eigenvectors of A.
// Balcan et al. (Theorem 2.3) replace the gap lambda_k - lambda_{k+1} by
// lambda_k - lambda_{q+1} for any k <= q <= p, with the second condition
// relaxed accordingly. For Gaussian noise of standard deviation sigma (per
// entry, data units) ||G_t|| <= sigma (sqrt(d) + sqrt(p) + x) with
// probability 1 - e^(-x^2/2) (Davidson and Szarek); the discrete Gaussian
// and its sums of shares are subgaussian with the same variance parameter
// (Canonne, Kamath and Steinke 2020), for which the same bound holds up to
// a constant. Bound returns e from the first condition at x = sqrt(2 log(T
// / beta)); the second holds for these sigma whenever lambda_k -
// lambda_{k+1} exceeds it by the factor tau sqrt(d) (sqrt(k) + sqrt(p)) /
// (sqrt(p) - sqrt(k-1)): the bound is stated, not a guarantee this package
// checks on data it cannot see.
//
// # Privacy
//
// Neighbours are those of the statistics release (dp.Neighbours): one row
// added to or removed from an owner's source, which at the row cap may
// replace one kept row by another. Adding a row q changes Y_t by q q^T Qq_t,
// whose Frobenius norm is ||q|| ||Qq_t^T q|| <= B^2 ||Qq_t||_2; every party
// checks that ||Qq_t||_2 <= 2^h by the integer test CheckQ (max_i sum_j
// |(Qq_t^T Qq_t)_ij| <= 2^(2h), which bounds the largest eigenvalue of Qq_t^T
// Qq_t), so each round's add-one sensitivity is B^2 2^h in integer units, C^2
// in data units: the quantisation of Q costs nothing in sensitivity, because
// the user shrinks Q by (1 - 2^-6) before rounding and further until the
// test passes (Quantize), which scales the signal by less than 2 percent.
// Replacing q by q' of the same class (the only class) changes Y_t by
// (q q^T - q' q'^T) Qq_t, of Frobenius norm squared at most (2 B^4 - 2
// (q.q')^2) 2^(2h), and v by |q - q'|^2 <= 2 B^2 - 2 q.q'. The bounds of
// every round hold for the same neighbouring pair, fixed in advance of the
// rounds' adaptive choices of Q_t, so the rounds compose for each pair as
// Gaussian mechanisms do (Dong, Roth and Su 2022, Theorem 3.2, whose proof
// fixes the pair): the whole job is one Gaussian mechanism with
//
//	mu^2 = max over the neighbour cases of  sum_t m_t + m_v + m_n,
//
// exactly the shape of the statistics release's full layout with one class,
// whose R block here has mR = T (B^2 2^h)^2 / sigma_Y^2 (dp.Geometry.Mu2 with
// the R block's variance sigma_Y^2 / (T 2^(2h))). The calibration gives the
// budget split's share of mu^2 to the rounds, v and n, scales by the factor
// that replacements cost, and adds the discrete correction of all
// T d p + d + 1 noisy coordinates (dp.DiscreteCorrection, with the share
// bound of the noise plan), so the job's cost (Calibration.Cost, a dp.Cost)
// is the composed cost of all its rounds. Every owner's ledger charges it
// once, at round 0, for the whole job.
//
// Nothing here uses floating point where a row is involved: rows are
// quantised and clipped by package fixedpoint, the statistics are int64 sums,
// the public matrices enter as integers, and the noise is drawn by
// dp.ParallelFill from rational variances. Floating point is used only for
// public values: the seed's matrix, orth, the calibration's search for mu and
// the user's post-processing.
package power
