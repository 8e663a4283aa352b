// Package he is the homomorphic-encryption layer of fedpca: one BGV
// parameter set (lattigo v5), the CSP committee's collective key, encryption
// of packed statistics, aggregation, blinding, the public-key switch to the
// data user, decryption, and validating wire codecs for every object that
// crosses a process boundary.
//
// # Parameters
//
// DefaultParams is the only parameter set: logN = 13 (8192 slots), plaintext
// modulus T = 2^60 - 16383 (prime, T = 1 mod 2^14 so that all 8192 slots are
// usable), ciphertext modulus Q = q0 q1 with q0 = 2^61 - 376831 (a 61-bit
// NTT prime above T) and q1 = 2^45 - 219135 (a 45-bit NTT prime), no special
// modulus P.
// log2 Q = 106, well inside the HE-standard bound of 218 bits for 128-bit
// security at logN = 13, with ternary secrets and error sigma = 3.2.
//
// Lattigo's BGV encodes a plaintext m as m T^-1 mod Q, and decoding multiplies
// by T, so an RLWE noise e becomes T e: decryption is exact while
// |T e + m| < Q/2, that is |e| < Q / (2T) ~ 2^45. Fresh public-key
// encryptions have |e| of about 2^12; the sum of 10,000 of them measured
// 2^17.9; the public-key switch adds the smudging noise DiscreteGaussian(2^30,
// bound 6 * 2^30) of each committee member taking part, and the result
// measured 2^32.4 with 2 members: a margin of 12.6 bits over the 2^45 budget
// (TestNoiseMargin10k proves at least 8).
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
//     ciphertext per 8192 values.
//   - The proxy adds ciphertexts, adds plaintext vectors (its DP noise share)
//     and a uniform mask mod T (blinding), combines the members' key-switch
//     shares, and removes the mask under the user's key.
//   - Each member's key-switch share (mhe.PublicKeySwitchProtocol with
//     smudging) has the encryption of its DP noise share under the user's key
//     added component by component, so the proxy cannot separate the noise.
//   - The user decrypts with its own key and decodes signed values in
//     (-T/2, T/2).
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
