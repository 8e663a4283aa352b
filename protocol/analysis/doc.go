// Package analysis is the data user's post-processing (PROTOCOL.md section 7): from the decrypted,
// decoded DP release of the sufficient statistics it rebuilds the scatter matrices and solves the
// PCA, DCA and LDA eigenproblems. It is pure computation on float64 data in data units: no I/O, no
// clock, no randomness, no global mutable state. Everything here is post-processing of the DP
// release and costs no privacy budget.
//
// # Scatters
//
// The input is [Moments]: R = sum z z^T (uncentred), V[k] = sum of the rows of class k and the
// class counts N[k]. Each count is clamped to n_k >= 1 (a noisy count can be tiny or negative);
// then v = sum_k V[k], n = sum_k n_k, mean = v/n and
//
//	S_T = R - v v^T / n
//	S_W = R - sum_k V[k] V[k]^T / n_k
//	S_B = S_T - S_W  (= sum_k V[k] V[k]^T / n_k - v v^T / n, evaluated in that form)
//
// These are sums (not divided by n), as in the reference (reference.json, meta.definitions).
//
// # PCA
//
// The top-k eigenpairs of PSD(S_T) = U max(L, 0) U^T (see [PSD]), eigenvalues descending; the
// explained variance ratio of component i is lambda_i / sum of all d clamped eigenvalues.
//
// # DCA and LDA
//
// DCA (Kung) solves (S_B + rho' I) w = lambda (S_T + rho I) w, LDA solves S_B w = lambda
// (S_W + rho I) w, both with one solver: Cholesky A = L L^T of the right-hand matrix, the
// symmetric eigenproblem of C = L^{-1} B L^{-T}, and w = L^{-T} y. The columns of W are normalised
// like scipy.linalg.eigh, W^T A W = I; [Components].Unit holds the same vectors scaled to unit
// 2-norm. By default min(k, K-1) components are returned (at most K-1 directions discriminate;
// Options.NonDiscriminant allows up to d). With the same rho and rho' = 0, LDA and DCA have the
// same eigenvectors and lambda_DCA = lambda_LDA / (1 + lambda_LDA), because S_T = S_B + S_W.
// If A has no Cholesky factorisation the error wraps [ErrNotPositiveDefinite] and names rho;
// the caller may raise rho or call [SolveWithRetry].
//
// # Regulariser
//
// rho = 1e-3 trace(S_T)/d (the reference's value) plus, when the release carries DP noise of
// per-entry standard deviation sigma on R, the margin sigma (2 sqrt(d) + 6). The noise matrix is a
// symmetric Gaussian (Wigner) matrix whose spectral norm is at most 2 sigma sqrt(d) in expectation
// and has Gaussian tails of width about sigma, so S_T + E + rho I stays positive definite except
// with probability at most 2 exp(-9) ~ 2.5e-4 (far less in practice); the derivation and what it
// does not cover are in [NoiseMargin]. The function depends only on public quantities (sigma, d)
// and on the release itself, so it is post-processing.
//
// # Sign convention
//
// Every returned eigenvector (PCA, DCA, LDA, and Unit alongside W) is flipped so that its entry of
// largest absolute value is positive; when several entries have exactly that absolute value, the
// first (lowest index) decides. This is the reference's convention, so results compare entry by
// entry with reference.json, which stores eigenvectors as rows (k x d) where this package stores
// them as columns of W (d x k).
//
// # Projection
//
// A row z (schema-mapped and clipped, data units) projects to (z - mean) W ([Components.Project],
// [Components.ProjectBatch]).
package analysis
