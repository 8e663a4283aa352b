// Package zk proves, in zero knowledge and without interaction, that a
// ciphertext an owner uploads was made by public-key encryption under the
// committee key with short randomness: its second component is
//
//	c1 = a u + e1  (mod Q)
//
// with a the committee key's second component (the ceremony's common
// reference polynomial), u ternary and |e1| <= 19 (the public-key encryption
// of protocol/he). It is what a CSP member must know before it multiplies c1
// by its secret in a key switch: a c1 of any other shape (for example
// c1 = K T^-1 with a large constant K) would come back to the user as
// K s + flooding and hand it the committee secret s; a c1 with such a short
// preimage comes back as a known value plus e_pk u + e1 s, which the
// members' flooding hides (protocol/he, SmudgingLog2, sized from the bounds
// below).
//
// # Construction
//
// A Sigma protocol with rejection sampling made non-interactive by the
// Fiat-Shamir transform ("Fiat-Shamir with aborts", Lyubashevsky,
// Asiacrypt 2009 and Eurocrypt 2012), with monomial challenges c = X^k,
// k in [0, 2N) (Benhamouda, Krenn, Lyubashevsky, Pietrzak, ESORICS 2014,
// "Efficient zero-knowledge proofs for commitments from learning with
// errors over rings"), repeated R times in parallel, over lattigo's ring
// R_Q = Z_Q[X]/(X^N + 1), N = 8192. One proof covers a group of g = 1 to
// MaxGroup = 8 ciphertexts of one owner (an upload's ciphertexts are proven
// eight at a time, protocol/job.ProofGroup). In each repetition the prover
// draws masks y_u, y_e with coefficients uniform over [-B, B) (B_u = 2^18
// for u, B_e = 2^22 for e1, times 2^ceil(log2 g) for a group), commits to
// w = a y_u + y_e; the challenges, one monomial c_j per ciphertext and
// repetition, come from one SHA-256 over the statement (the binding: job,
// owner, the group's first index, the hashes of its c0s, and a and every c1)
// and all the commitments; the response is z = y + sum_j c_j w_j, released
// only if every coefficient lies in [-(B - beta), B - 1 - beta] (beta = g
// for u, 19 g for e1), else the prover starts again with fresh masks (about
// 2 attempts on average). The proof is the challenge seed and the
// responses: the verifier recomputes w = a z_u + z_e - sum_j c_j c1_j from
// them, and the seed. R = Reps = 10 for one ciphertext, 10 to 12 for a
// group (ShapeOf).
//
// # Security
//
//   - Completeness: an honest prover's responses are accepted with
//     probability prod over reps and coefficients of (B - beta)/B, about
//     exp(-R N (g/B_u + 19 g/B_e)) = 0.71 per attempt for one ciphertext,
//     0.44 for a group of 8.
//
//   - Zero knowledge: since |c w|_inf = |w|_inf for a monomial c, the
//     witness part of a response is at most beta = g max|w| per
//     coefficient: every accepted response is exactly uniform over its
//     interval whatever the witnesses, and the acceptance probability does
//     not depend on them: a simulator picks z and the challenges, sets
//     w = a z_u + z_e - sum_j c_j c1_j and programs the random oracle.
//     Perfect (statistical distance 0) honest-verifier zero knowledge per
//     repetition, hence zero knowledge of the Fiat-Shamir proof in the
//     random-oracle model; the rejected attempts are never shown.
//
//   - Soundness: from two accepted transcripts with the same commitments
//     whose challenges differ in one repetition only in ciphertext j's,
//     c_j != c_j', (c_j - c_j') c1_j = a u' + e' with |u'|_inf < 2 B_u,
//     |e'|_inf < 2 B_e; for monomials, kappa = 2/(c_j - c_j') has
//     coefficients in {-1, 0, 1} (BKLP14, Lemma 3.2), so the prover knows,
//     for each c1 of the group,
//
//     2 c1 = a u* + e*,  |u*|_inf <= N 2 (B_u - 1) < 2^35,
//     |e*|_inf <= N 2 (B_e - 19) < 2^39,
//
//     and, since multiplication by kappa has operator norm at most 2N/pi in
//     the coefficient embedding, |u*|_2 < 2^40.86 and |e*|_2 < 2^44.86
//     (ProvenBounds, taken at the largest group's masks for every proof:
//     for one ciphertext alone they are 2^2 smaller). A repetition's
//     challenge is a vector of g monomials from which an extractor needs, for
//     every j, two values differing in coordinate j only: coordinate-wise
//     special soundness (Fenzi, Moghaddas and Nguyen, "Lattice-based
//     polynomial commitments: towards asymptotic and concrete efficiency",
//     J. Cryptology 2024), knowledge error g/2N per repetition. A cheating
//     prover that knows no preimage of some c1 of the group succeeds with
//     probability at most (g/2^14)^R per random-oracle query: 2^-140 for
//     one ciphertext (R = 10), 2^-132 for a group of 8 (R = 12), at most
//     2^-128 for every g.
//
// The relation is relaxed by the factor 2: a c1 with 2 c1 = a u* + e* is
// accepted although c1 itself need not have a short preimage (for example
// c1 = (X - 1)^-1 (a u + e), which a prover can answer for every challenge),
// and c1 s would then carry halves mod Q, whose parity no flooding hides.
// Members therefore switch 2 c1 only, never c1 (he.Member.KeySwitchShare),
// and the user halves the decrypted values modulo T.
//
// Only c1 is proven: c0 never meets the committee secret in a key switch,
// so whatever it holds, what the switch reveals about the secret is
// determined by c1. A crafted c0 changes only what its owner's upload
// decrypts to (its own statistics, which it chooses anyway) and may push the
// sum's noise over the decryption budget (integrity, not privacy: the
// result is then garbage, which the user sees). The proof binds c0 through
// its hash, so a proof cannot be moved to another ciphertext.
//
// Proving costs about 2 attempts of 2 R NTTs and a SHA-256 of R 262 KB;
// verifying, 2 R NTTs (and one inverse NTT per c1) and the same hashing,
// whatever the group's size: one ciphertext about 8-9 ms to prove and 6 ms
// to verify on the two cores of the development machine, a group of 8
// about 16-21 and 12.6 ms (2-2.7 and 1.6 ms per ciphertext). The
// repetitions run on up to GOMAXPROCS goroutines (BenchmarkProve,
// BenchmarkVerify, BenchmarkProveGroup, BenchmarkVerifyGroup;
// docs/BENCHMARKS.md). A proof is 430,114 bytes at N = 8192 for one
// ciphertext, 589,859 for a group of 8 (73.7 KB per ciphertext, 0.14 of
// the ciphertext).
//
// The package does no I/O. Proving draws its masks from the reader it is
// given, or when it is given none (owners) from an AES-256-CTR keystream
// keyed from crypto/rand, one key per proof. Key is safe for concurrent use.
package zk
