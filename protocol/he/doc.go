// Package he is the homomorphic-encryption layer of fedpca: one BGV
// parameter set (lattigo v5), the CSP committee's collective key, encryption
// of packed statistics, aggregation, blinding, the public-key switch to the
// data user, decryption, and validating wire codecs for every object that
// crosses a process boundary.
//
// # Parameters
//
// DefaultParams is the only parameter set, "bgv-logn13-t60-q61x45x40x55":
// logN = 13 (8192 slots), plaintext modulus T = 2^60 - 16383 (prime,
// T = 1 mod 2^14 so that all 8192 slots are usable), ciphertext modulus
// Q = q0 q1 q2 q3 with q0 = 2^61 - 376831 (a 61-bit NTT prime above T),
// q1 = 2^45 - 219135 (45 bits), q2 = 2^40 - 147455 (the largest prime below
// 2^40 that is 1 mod 2^14) and q3 (the largest below 2^55), no special
// modulus P. log2 Q = 201, inside the HE-standard bound of 218 bits for
// 128-bit security at logN = 13, with ternary secrets and error sigma = 3.2
// (NewDefaultParams checks it). A ciphertext is 2 x 4 x 8192 coefficients,
// about 524 KB on the wire.
//
// Lattigo's BGV encodes a plaintext m as m T^-1 mod Q, and decoding multiplies
// by T, so an RLWE noise e becomes T e: decryption is exact while
// |T e + m| < Q/2, that is |e| < Q / (2T) ~ 2^140, the noise budget. Fresh
// public-key encryptions have |e| of about 2^12; the sum of 10,000 of them
// measured 2^17.7 to 2^17.9 with a committee of 3. The budget is this large
// for the flooding below, which must hide what a dishonest owner's upload
// could hold, not only honest noise.
//
// # Encryption with a witness
//
// Encryptor is lattigo's public-key encryption written out (the same
// samplers and formulas) so that it keeps the randomness of each
// ciphertext's second component, c1 = a u + e1: the witness an owner proves
// c1 with (protocol/zk). Without that proof, a c1 crafted by an owner or by
// the proxy (c1 = K T^-1, say) would come back to the user, after the
// members' key switch, as K s plus flooding, and hand it the committee
// secret s.
//
// # Flooding
//
// The user decrypts the key-switched result and knows what it decrypts to,
// so it learns the total noise exactly, and the noise of the ciphertext
// before the switch depends on the committee secret. Each member taking part
// therefore floods its key-switch share: it adds a polynomial whose
// coefficients are independent and exactly uniform over the integers
// [-2^S, 2^S), S = SmudgingLog2 = 124, S + 1 bits from crypto/rand minus
// 2^S (128-bit integers, no rejection, no floating point), reduced into each
// prime and added where lattigo adds its own flooding (in the NTT domain).
// By the smudging lemma (Asharov et al., Eurocrypt 2012), e + U is within
// statistical distance |e| / 2^(S+1) of U per coefficient.
//
// S is sized from what the upload proofs prove, not from honest noise: a
// proof (of one ciphertext or of a group of up to 8) guarantees only
// 2 c1 = a u* + e* with |u*|_2 < 2^40.9 and |e*|_2 < 2^44.9 for each of its
// c1 (zk.ProvenBounds), so members switch 2 c1 (SwitchFactor)
// and what is secret-dependent in each coefficient of the switched result
// is at most the sum over uploads of |e_pk|_2 |u*|_2 + |e*|_2 |s|_2
// (FloodingDistanceLog2). One honest member's flooding keeps the
// statistical distance of a whole job below 2^-40 when the job's sums hold
// 10,000 uploaded ciphertexts under the largest committee (64 members;
// 2^-44.6 with 3), and grows linearly with the number of uploads beyond.
// The flooding of t members is at most t 2^124: the noise after the switch
// measured 2^125.0 with 2 members, a margin of 15 bits under the 2^140
// budget (TestNoiseMargin10k proves at least 8), and a full committee of 64
// (2^130) would leave 10 (NewDefaultParams checks that at least 8 would).
//
// Lattigo's own flooding (the noise distribution of
// mhe.PublicKeySwitchProtocol) is not used: its sampler is float64-based (a
// ziggurat whose sample is a 31-bit integer times a table constant, then
// norm * sigma rounded), so at large sigma its values lie on a sparse grid
// and their low bits are far from uniform (measured at sigma 2^58: a
// chi-square of 1.3e7 on the low 8 bits, 255 expected), and the user would
// learn the noise modulo that spacing.
//
// # Protocol objects
//
//   - Committee members (CSP nodes) each hold a secret key share. The
//     collective public key is generated with mhe.PublicKeyGenProtocol from a
//     common reference string derived from a public seed. With a threshold
//     t < n the members also run mhe.Thresholdizer: each member deals Shamir
//     shares of its secret to every member, and at key-switch time any t of
//     them turn their aggregated Shamir share into an additive share with
//     mhe.Combiner. With t = n (including n = 1) the secret key shares are
//     used directly.
//   - Owners encrypt packed int64 vectors under the committee key, one
//     ciphertext per 8192 values, and prove each c1 (protocol/zk).
//   - The proxy adds ciphertexts, adds plaintext vectors (its DP noise share)
//     and a uniform mask mod T (blinding), combines the members' key-switch
//     shares, and removes the mask under the user's key.
//   - Each member's key-switch share (mhe.PublicKeySwitchProtocol's of
//     2 ct, plus the member's flooding) has the encryption of twice its DP
//     noise share under the user's key added component by component, so the
//     proxy cannot separate the noise. A member switches only a ciphertext
//     whose c1 it has checked to be the sum of the proven uploads of the
//     job's owners (csp).
//   - The user decrypts with its own key, halves modulo T
//     (Decryptor.DecryptSwitched) and decodes signed values in (-T/2, T/2).
//
// # Wire format
//
// Objects travel as the bytes of lattigo's MarshalBinary. Decoders never hand
// untrusted bytes to lattigo's parsers: the exact layout of each type (header
// bytes and coefficient runs) is derived once from lattigo's own encoding of
// a template object, and decoding checks the total length, every header byte
// and that every coefficient is reduced modulo its prime before copying the
// coefficients into a preallocated object. Anything else is an error that
// names the object and the offending byte or coefficient. Encoders produce
// exactly lattigo's bytes (tested).
//
// # Concurrency
//
// Params and the codecs are immutable and safe for concurrent use. Types
// that hold lattigo encoders, encryptors, evaluators or samplers (Encryptor,
// Evaluator, Member, Decryptor) are not: give each goroutine its own, e.g.
// with ShallowCopy.
//
// Secret material (secret keys, Shamir shares, masks) must never be logged;
// none of the types here implement fmt.Stringer in a way that prints it.
package he
