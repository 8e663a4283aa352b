// Package seal holds the two primitives parties use to protect what they
// pass through the proxy: signatures with a context string (a user signs its
// job, a CSP member signs its exchange key) and sealed boxes (a CSP member's
// Shamir share for another member, readable only by that member).
//
// Signatures are ECDSA P-256 over SHA-256 or Ed25519, with the keys of the
// nodes' X.509 certificates; the signed bytes are "fedpca/" + context + 0x00
// + message, so a signature made for one purpose is never valid for another.
//
// A sealed box is ephemeral-static X25519 key agreement, HKDF-SHA-256 (salt:
// both public keys) and AES-256-GCM with additional data that binds the box
// to its ceremony, sender and recipient. Its layout is ephemeral public key
// (32 bytes) || nonce (12 bytes) || ciphertext and tag.
//
// Everything here is pure: randomness comes from crypto/rand.
package seal
