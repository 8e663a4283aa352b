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
// errors over rings"), repeated Reps = 10 times in parallel, over lattigo's
// ring R_Q = Z_Q[X]/(X^N + 1), N = 8192. In each repetition the prover draws
// masks y_u, y_e with coefficients uniform over [-B, B) (B_u = 2^18 for u,
// B_e = 2^22 for e1), commits to w = a y_u + y_e; the challenge of every
// repetition comes from one SHA-256 over the statement (the binding: job,
// owner, ciphertext index, the hash of c0, and a and c1) and all the
// commitments; the responses are z = y + c w_witness, released only if
// every coefficient lies in [-(B - beta), B - 1 - beta] (beta = 1 for u, 19
// for e1), else the prover starts again with fresh masks (about 2
// attempts on average). The proof is the challenge seed and the responses:
// the verifier recomputes w = a z_u + z_e - c c1 from them, and the seed.
//
// # Security
//
//   - Completeness: an honest prover's responses are accepted with
//     probability prod over reps and coefficients of (B - beta)/B, about
//     exp(-Reps N (1/B_u + 19/B_e)) = 0.505 per attempt.
//
//   - Zero knowledge: since |c w|_inf = |w|_inf <= beta for a monomial c,
//     every accepted response is exactly uniform over its interval whatever
//     the witness, and the acceptance probability does not depend on the
//     witness: a simulator picks z and the challenges, sets
//     w = a z_u + z_e - c c1 and programs the random oracle. Perfect (statistical distance
//     0) honest-verifier zero knowledge per repetition, hence zero knowledge
//     of the Fiat-Shamir proof in the random-oracle model; the rejected
//     attempts are never shown.
//
//   - Soundness: from two accepted transcripts with the same commitments
//     and challenges c != c' in one repetition, (c - c') c1 = a u' + e' with
//     |u'|_inf < 2 B_u, |e'|_inf < 2 B_e; for monomials, kappa =
//     2/(c - c') has coefficients in {-1, 0, 1} (BKLP14, Lemma 3.2), so
//     the prover knows
//
//     2 c1 = a u* + e*,  |u*|_inf <= N 2 (B_u - 1) < 2^32,
//     |e*|_inf <= N 2 (B_e - 19) < 2^36,
//
//     and, since multiplication by kappa has operator norm at most 2N/pi in
//     the coefficient embedding, |u*|_2 < 2^37.86 and |e*|_2 < 2^41.86
//     (ProvenBounds). The slack against an honest witness is 2^32 for u
//     and 2^31.8 for e1 in the infinity norm. A cheating prover that knows
//     no such preimage succeeds only by guessing all Reps challenges: with
//     2N = 2^14 challenges per repetition the soundness error is 2^-140 per
//     random-oracle query.
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
// Proving costs about 2 attempts of 2 Reps NTTs and a SHA-256 of 2.6 MB
// (21-33 ms on one core of the development machine); verifying, 2 Reps
// NTTs and the same hashing (12.5-12.8 ms on one core). The repetitions
// run on up to GOMAXPROCS goroutines (BenchmarkProve, BenchmarkVerify;
// docs/BENCHMARKS.md). A proof is 430,114 bytes at N = 8192.
//
// The package does no I/O. Proving draws its masks from the reader it is
// given (crypto/rand for owners). Key is safe for concurrent use.
package zk
