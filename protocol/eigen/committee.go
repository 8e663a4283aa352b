package eigen

import (
	"errors"
	"fmt"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/he/hefloat"
	"github.com/tuneinsight/lattigo/v5/mhe"
	"github.com/tuneinsight/lattigo/v5/mhe/mhefloat"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/utils/sampling"
)

// ParamsLiteral is the solver's CKKS ring: N = 2^14 (8,192 slots), a 55-bit
// base prime and eight 40-bit primes (scale 2^40), one 61-bit special prime
// for key switching. log QP = 436, under the 438 the homomorphic encryption
// standard (Albrecht et al. 2018, ternary secret) allows at N = 2^14 for
// 128-bit security.
var ParamsLiteral = hefloat.ParametersLiteral{
	LogN:            14,
	LogQ:            []int{55, 40, 40, 40, 40, 40, 40, 40, 40},
	LogP:            []int{61},
	LogDefaultScale: 40,
}

// MaxLogQP is the standard's bound on log QP at N = 2^14 for 128 bits.
const MaxLogQP = 438

// statSecurity is the refresh masks' statistical security in bits.
const statSecurity = 128

// Committee is n members holding additive shares of one CKKS secret, and
// the collective keys they generated with lattigo's mhe protocols. Members
// run in one process here, as lattigo's mhe tests run them.
type Committee struct {
	Params hefloat.Parameters
	shares []*rlwe.SecretKey // member i's share
	PK     *rlwe.PublicKey
	Evk    *rlwe.MemEvaluationKeySet

	crs       mhe.CRS
	refresh   []mhefloat.RefreshProtocol // one per member
	minLevel  int                        // the lowest level a refresh takes
	logBound  uint                       // refresh mask bits
	Refreshes int                        // refreshes run so far
}

// NewCommittee runs the key ceremony for n members: each draws its share,
// then the collective public key (mhe PublicKeyGenProtocol), the
// relinearisation key (two rounds, RelinearizationKeyGenProtocol) and one
// rotation key per Galois element of rotations and one for the complex
// conjugation (GaloisKeyGenProtocol). seed
// keys the common reference string.
func NewCommittee(n int, rotations []int, seed []byte) (*Committee, error) {
	if n < 2 {
		return nil, fmt.Errorf("committee of %d: want at least 2 members", n)
	}
	params, err := hefloat.NewParametersFromLiteral(ParamsLiteral)
	if err != nil {
		return nil, err
	}
	if params.LogQP() > MaxLogQP {
		return nil, fmt.Errorf("log QP %.1f exceeds %d", params.LogQP(), MaxLogQP)
	}
	crs, err := sampling.NewKeyedPRNG(seed)
	if err != nil {
		return nil, err
	}
	c := &Committee{Params: params, crs: crs}
	kg := rlwe.NewKeyGenerator(params)
	for range n {
		c.shares = append(c.shares, kg.GenSecretKeyNew())
	}

	// Public key.
	ckg := mhe.NewPublicKeyGenProtocol(params)
	ckgCRP := ckg.SampleCRP(crs)
	agg := ckg.AllocateShare()
	for i, sk := range c.shares {
		sh := ckg.AllocateShare()
		ckg.GenShare(sk, ckgCRP, &sh)
		if i == 0 {
			agg = sh
			continue
		}
		ckg.AggregateShares(agg, sh, &agg)
	}
	c.PK = rlwe.NewPublicKey(params)
	ckg.GenPublicKey(agg, ckgCRP, c.PK)

	// Relinearisation key: two rounds.
	rkg := mhe.NewRelinearizationKeyGenProtocol(params)
	rkgCRP := rkg.SampleCRP(crs)
	eph := make([]*rlwe.SecretKey, n)
	r1 := make([]mhe.RelinearizationKeyGenShare, n)
	r2 := make([]mhe.RelinearizationKeyGenShare, n)
	for i := range n {
		eph[i], r1[i], r2[i] = rkg.AllocateShare()
	}
	for i, sk := range c.shares {
		rkg.GenShareRoundOne(sk, rkgCRP, eph[i], &r1[i])
	}
	for i := 1; i < n; i++ {
		rkg.AggregateShares(r1[0], r1[i], &r1[0])
	}
	for i, sk := range c.shares {
		rkg.GenShareRoundTwo(eph[i], sk, r1[0], &r2[i])
	}
	for i := 1; i < n; i++ {
		rkg.AggregateShares(r2[0], r2[i], &r2[0])
	}
	rlk := rlwe.NewRelinearizationKey(params)
	rkg.GenRelinearizationKey(r1[0], r2[0], rlk)

	// Rotation keys.
	gkg := mhe.NewGaloisKeyGenProtocol(params)
	var gks []*rlwe.GaloisKey
	seen := map[uint64]bool{}
	els := []uint64{params.GaloisElementForComplexConjugation()}
	for _, k := range rotations {
		els = append(els, params.GaloisElement(k))
	}
	for _, el := range els {
		if seen[el] {
			continue
		}
		seen[el] = true
		crp := gkg.SampleCRP(crs)
		shares := make([]mhe.GaloisKeyGenShare, n)
		for i, sk := range c.shares {
			shares[i] = gkg.AllocateShare()
			if err := gkg.GenShare(sk, el, crp, &shares[i]); err != nil {
				return nil, err
			}
		}
		for i := 1; i < n; i++ {
			if err := gkg.AggregateShares(shares[0], shares[i], &shares[0]); err != nil {
				return nil, err
			}
		}
		gk := rlwe.NewGaloisKey(params)
		if err := gkg.GenGaloisKey(shares[0], crp, gk); err != nil {
			return nil, err
		}
		gks = append(gks, gk)
	}
	c.Evk = rlwe.NewMemEvaluationKeySet(rlk, gks...)

	var ok bool
	c.minLevel, c.logBound, ok = mhefloat.GetMinimumLevelForRefresh(statSecurity, params.DefaultScale(), n, params.Q())
	if !ok || c.minLevel >= params.MaxLevel() {
		return nil, errors.New("the ring has no level for a 128-bit refresh")
	}
	for range n {
		// The shares' smudging noise is the ring's error distribution:
		// the 128 + 40-bit masks, not this noise, hide the plaintext.
		rp, err := mhefloat.NewRefreshProtocol(params, 128, params.Xe())
		if err != nil {
			return nil, err
		}
		c.refresh = append(c.refresh, rp)
	}
	return c, nil
}

// Members is the committee's size.
func (c *Committee) Members() int { return len(c.shares) }

// MinRefreshLevel is the lowest level a ciphertext may be refreshed at.
func (c *Committee) MinRefreshLevel() int { return c.minLevel }

// LogBound is the refresh masks' bit length.
func (c *Committee) LogBound() uint { return c.logBound }

// Refresh re-encrypts ct at the top level with every member's masked share
// (mhefloat RefreshProtocol: Mouchet et al. 2021), in place. ct is first
// dropped to the lowest level the masks fit in, which makes the shares
// smallest.
func (c *Committee) Refresh(ct *rlwe.Ciphertext) error {
	if ct.Degree() != 1 {
		return fmt.Errorf("refresh of a degree-%d ciphertext", ct.Degree())
	}
	if ct.Level() < c.minLevel {
		return fmt.Errorf("refresh at level %d: the masks need level %d", ct.Level(), c.minLevel)
	}
	ct.Resize(1, c.minLevel)
	maxLevel := c.Params.MaxLevel()
	crp := c.refresh[0].SampleCRP(maxLevel, c.crs)
	var agg mhe.RefreshShare
	for i, sk := range c.shares {
		sh := c.refresh[i].AllocateShare(c.minLevel, maxLevel)
		if err := c.refresh[i].GenShare(sk, c.logBound, ct, crp, &sh); err != nil {
			return err
		}
		if i == 0 {
			agg = sh
			continue
		}
		if err := c.refresh[0].AggregateShares(&agg, &sh, &agg); err != nil {
			return err
		}
	}
	out := hefloat.NewCiphertext(c.Params, 1, maxLevel)
	if err := c.refresh[0].Finalize(ct, crp, agg, out); err != nil {
		return err
	}
	*ct = *out
	c.Refreshes++
	return nil
}

// Release switches ct from the committee's key to pk (mhe
// PublicKeySwitchProtocol, each member smudging with floodSigma).
func (c *Committee) Release(ct *rlwe.Ciphertext, pk *rlwe.PublicKey, floodSigma float64) (*rlwe.Ciphertext, error) {
	noise := ring.DiscreteGaussian{Sigma: floodSigma, Bound: 6 * floodSigma}
	pcks, err := mhe.NewPublicKeySwitchProtocol(c.Params, noise)
	if err != nil {
		return nil, err
	}
	agg := pcks.AllocateShare(ct.Level())
	for i, sk := range c.shares {
		sh := pcks.AllocateShare(ct.Level())
		pcks.GenShare(sk, pk, ct, &sh)
		if i == 0 {
			agg = sh
			continue
		}
		if err := pcks.AggregateShares(agg, sh, &agg); err != nil {
			return nil, err
		}
	}
	out := hefloat.NewCiphertext(c.Params, 1, ct.Level())
	pcks.KeySwitch(ct, agg, out)
	return out, nil
}
