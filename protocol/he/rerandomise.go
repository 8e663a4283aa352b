package he

import (
	"crypto/sha3"
	"errors"
	"fmt"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// Re-randomisation of a verified sum (docs/PROTOCOL.md section 5.2).
//
// The upload proofs bind each c1 to the relaxed relation 2 c1 = a U + E
// with short U and E, and U = 0 is a valid witness: owners who make up
// every upload of a sum (or whose U cancel) can hand the members a short
// c1. A member's share multiplies c1 by its additive key, which under a
// threshold committee (t < n) is uniform mod Q: against a short c1 the
// flooding would hide only the low bits of that product. Before a member
// switches or converts a sum, it therefore adds the encryption of zero
// (u b, u a) under the committee key (b, a), where u is the ternary
// polynomial that SHAKE-256 expands from a seed the caller derives from
// the sum itself (job.Rerandomise): c1 becomes c1 + a u with u fixed only
// after c1 was, and every member (and the proxy, which combines the key
// switch) computes the same ciphertext. u is public; what matters is that
// no one chose it: for all but a negligible fraction of reference
// polynomials a, at most one ternary u makes c1 + a u short for any c1, so
// each query to the random oracle hits it with probability 3^-N.
//
// The encryption of zero has no error terms: its noise after decryption is
// e_pk u, which the flooding already covers for every upload's u.

// Rerandomise returns ct + (u pk[0], u pk[1]) for the ternary u that
// SHAKE-256 expands from seed. It does not modify ct. The same seed gives
// the same ciphertext on every machine (integer arithmetic only).
func Rerandomise(p Params, pk *rlwe.PublicKey, seed []byte, ct *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	if pk == nil {
		return nil, errors.New("re-randomise: no committee key")
	}
	if len(seed) < 32 {
		return nil, fmt.Errorf("re-randomise: a seed of %d bytes, want at least 32", len(seed))
	}
	if ct == nil || ct.Degree() != 1 || ct.Level() != p.Level() || !ct.IsNTT {
		return nil, errors.New("re-randomise: the ciphertext must be of degree 1, at the protocol level, in the NTT domain")
	}
	rq := p.RingQ().AtLevel(p.Level())
	u := rq.NewPoly()
	ternary(seed, rq, u)
	rq.NTT(u, u)
	out := ct.CopyNew()
	tmp := rq.NewPoly()
	for i := range 2 {
		rq.MulCoeffsMontgomery(u, pk.Value[i].Q, tmp)
		rq.Add(out.Value[i], tmp, out.Value[i])
	}
	return out, nil
}

// ternary sets u (coefficient domain) to the polynomial whose coefficients
// are uniform over {-1, 0, 1}, read from SHAKE-256(seed): one byte per
// coefficient, bytes of 243 and above rejected (243 = 3^5, so the byte
// mod 3 is exactly uniform). Not lattigo's TernarySampler: it builds its
// probability table in floating point (the same seed must give every party
// the same u) and its density 2/3 is approximated.
func ternary(seed []byte, rq *ring.Ring, u ring.Poly) {
	x := sha3.NewSHAKE256()
	x.Write([]byte("fedpca/rerandomise/v1"))
	x.Write(seed)
	buf := make([]byte, 4096)
	pos := len(buf)
	for j := range rq.N() {
		var b byte
		for {
			if pos == len(buf) {
				x.Read(buf)
				pos = 0
			}
			b = buf[pos]
			pos++
			if b < 243 {
				break
			}
		}
		v := int64(b%3) - 1
		for i, s := range rq.SubRings[:rq.Level()+1] {
			u.Coeffs[i][j] = uint64(v) + s.Modulus&uint64(v>>63) // v mod q
		}
	}
}
