package sim

import (
	"math/big"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// The audit's attack on an unverified key switch, for the tests and the
// chaos suite's deviations: a ciphertext whose c1 is the constant
// K T^-1 mod Q comes back to the user, after the members' switch of 2 ct,
// as 2 K T^-1 s + flooding (c0 = 0): multiplied by T, 2 K s + T floods,
// and with K = 2^190 (T floods < 2^182 for the committees here, 2 K s
// < Q/2 for |s| <= 64) rounding gives every coefficient of the committee
// secret s. Members refuse such a ciphertext: it has no proof.

// craftK is log2 of K.
const craftK = 190

// CraftC1 sets ct to the attack ciphertext: c0 = 0, c1 = K T^-1 (NTT
// domain).
func CraftC1(p he.Params, ct *rlwe.Ciphertext) {
	rq := p.RingQ().AtLevel(p.Level())
	Q := rq.Modulus()
	k := new(big.Int).Lsh(big.NewInt(1), craftK)
	c := new(big.Int).ModInverse(new(big.Int).SetUint64(p.T()), Q)
	c.Mul(c, k).Mod(c, Q)
	coeffs := make([]*big.Int, p.N())
	for i := range coeffs {
		coeffs[i] = new(big.Int)
	}
	coeffs[0] = c
	ct.Value[0].Zero()
	rq.SetCoefficientsBigint(coeffs, ct.Value[1])
	rq.NTT(ct.Value[1], ct.Value[1])
}

// RecoverSecret is what a user colluding with the sender of a crafted
// ciphertext computes from the switch's decryption v (the raw polynomial
// c0' + c1' s_user, NTT domain): round(T v / 2^(craftK+1)) per coefficient.
// It returns the committee secret's coefficients, if the switch was made.
func RecoverSecret(p he.Params, v rlwe.Plaintext) []int64 {
	rq := p.RingQ().AtLevel(p.Level())
	c := rq.NewPoly()
	if v.IsNTT {
		rq.INTT(v.Value, c)
	} else {
		c.Copy(v.Value)
	}
	coeffs := make([]*big.Int, p.N())
	for i := range coeffs {
		coeffs[i] = new(big.Int)
	}
	rq.PolyToBigintCentered(c, 1, coeffs)
	Q := rq.Modulus()
	T := new(big.Int).SetUint64(p.T())
	half := new(big.Int).Lsh(big.NewInt(1), craftK)
	out := make([]int64, p.N())
	for i, x := range coeffs {
		x.Mul(x, T).Mod(x, Q) // T v mod Q, centred
		if x.Cmp(new(big.Int).Rsh(Q, 1)) > 0 {
			x.Sub(x, Q)
		}
		// round(x / 2^(craftK+1))
		x.Add(x, half)
		x.Rsh(x, craftK+1)
		out[i] = x.Int64()
	}
	return out
}
