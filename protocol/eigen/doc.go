// Package eigen computes a components job's eigenpairs without anyone
// seeing the statistics. What jobs run is route (ii) (docs/PROTOCOL.md 7.2):
// PCAJob and DCAJob, the members' program on additive shares (protocol/mpc),
// from the verified sum's shares to the components (program.go, dca.go,
// regularise.go: a DP DCA's regulariser chosen on shares, shared.go). The rest of this comment and solver.go, committee.go and
// ritz.go are route (i), kept as the measurement that ruled it out: the
// top eigenpairs of a covariance C that stays encrypted under a committee's
// CKKS key, by block subspace iteration with the normalisation evaluated
// homomorphically and a collective refresh as the bootstrapper
// (docs/design-components.md holds its tables).
//
// What it computes. With a block of p = min(d, k + 10) columns and a fixed
// count T of iterations (public parameters, not read from the spectrum):
//
//	Y = (C / B) Q                        one encrypted product
//	Q = Y h(Y^T Y)                       s Newton-Schulz steps, h(G) = a I - b G
//
// where B >= lambda_1 is public (rows clipped to norm 1 give trace C <= 1,
// so B = 1) and each Newton-Schulz step is the polar (Löwdin) iteration
// X <- X (a I - b X^T X) (Higham, Functions of Matrices, SIAM 2008, ch. 8;
// Löwdin 1950): it tends to the orthonormal factor Y (Y^T Y)^(-1/2) and, with
// a and b chosen so that a s - b s^3 maps [0, 1] into [0, 1], it needs no
// division, no square root and no comparison, only products. The block need
// not be exactly orthonormal: the final Rayleigh-Ritz step solves the
// generalised p x p problem (Q^T C Q) x = theta (Q^T Q) x (Saad, Numerical
// Methods for Large Eigenvalue Problems, 2011, ch. 5; Halko, Martinsson and
// Tropp 2011 for the oversampling).
//
// For whom, under which assumption. The covariance is encrypted under the
// collective public key of n members holding additive shares of the CKKS
// secret (Cheon, Kim, Kim and Song 2017) whose public, relinearisation and
// rotation keys come from lattigo's mhe protocols (Mouchet, Troncoso-Pastoriza,
// Bossuat and Hubaux, PETS 2021; Asharov et al. 2012 for the key generation);
// here n of n members must take part (t = n). The collective refresh
// (mhefloat RefreshProtocol, the same paper) is the bootstrapper: every
// member's share is its decryption share masked by a uniform integer of
// logBound = 128 + log2(scale) bits, so the refreshed plaintext is hidden
// with 128-bit statistical distance from anyone without all the masks
// (semi-honest members; a deviating party is issue 28's subject, not this
// package's). The members see only masked shares; nobody sees C, Y, Q or G.
//
// Parameters (ParamsLiteral): N = 2^14, log Q = 55 + 8 x 40, log P = 61,
// log QP = 436 <= 438, the homomorphic encryption standard's bound for 128
// bits at N = 2^14 with a ternary secret; scale 2^40; a refresh at level 3,
// the lowest where 168-bit masks of 3 members fit (mhefloat
// GetMinimumLevelForRefresh at 128 bits).
//
// What it does not do yet (placeholders, measured around): the conversion
// from the owners' BGV aggregate into this layout (the input is encrypted
// directly under the collective key from a plaintext covariance, by the
// tests), and the final Rayleigh-Ritz: Release switches the block Q and
// C Q to the user's key (mhe PublicKeySwitchProtocol), who solves the p x p
// problem. That release shows the user 2 d p numbers, more than the top-k
// components: it is not the privacy claim. No member checks what it
// refreshes (a refresh is a decryption oracle for a crafted ciphertext:
// issue 28), no flooding is sized for the release, and n of n must answer.
package eigen
