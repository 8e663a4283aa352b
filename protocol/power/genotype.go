package power

import (
	"fmt"
	"math/big"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
)

// Genotypes enter as dosages (the count of allele 1: 0, 1 or 2; -1 for a
// missing call) and leave as the rows' integers.

// MissingDosage is the dosage of a missing call.
const MissingDosage int8 = -1

// Standardiser maps an individual's dosages to a row of integers: for
// variant j with public frequency p_j of allele 1,
//
//	z_j = (x_j - 2 p_j) / sqrt(2 p_j (1 - p_j)),   q_j = round(2^g z_j),
//
// the usual per-variant standardisation of genotype PCA (Patterson, Price
// and Reich 2006). A missing call is imputed at the public mean 2 p_j, so
// z_j = 0 (the rule never depends on the individual's other calls or on
// other rows); a variant with p_j of 0 or 1 gives 0 always. The three
// integers of each variant are computed once from the public frequencies,
// exactly enough (256-bit big.Float, rounded half away from zero) that every
// owner gets the same table; a row meets only table look-ups and the integer
// clip to ||q|| <= B (package fixedpoint). Not safe for concurrent use
// (Clone one per goroutine).
type Standardiser struct {
	codes [][3]int64
	clip  *fixedpoint.Clipper
}

// NewStandardiser builds the table for public frequencies (each in [0,
// 1]), g bits and clip bound B.
func NewStandardiser(freqs []*big.Rat, bits uint, bound int64) (*Standardiser, error) {
	if bits > 30 {
		return nil, fmt.Errorf("power: genotype bits g = %d above 30", bits)
	}
	clip, err := fixedpoint.NewClipper(bound)
	if err != nil {
		return nil, err
	}
	s := &Standardiser{codes: make([][3]int64, len(freqs)), clip: clip}
	one := new(big.Rat).SetInt64(1)
	for j, p := range freqs {
		if p == nil || p.Sign() < 0 || p.Cmp(one) > 0 {
			return nil, fmt.Errorf("power: variant %d's reference frequency %v is outside [0, 1]", j, p)
		}
		if p.Sign() == 0 || p.Cmp(one) == 0 {
			continue // monomorphic: every code 0
		}
		// v = 2 p (1 - p); z = (x - 2p) / sqrt(v).
		v := new(big.Rat).Sub(one, p)
		v.Mul(v, p).Mul(v, big.NewRat(2, 1))
		sd := new(big.Float).SetPrec(256).SetRat(v)
		sd.Sqrt(sd)
		for x := range 3 {
			num := new(big.Rat).Sub(big.NewRat(int64(x), 1), new(big.Rat).Mul(big.NewRat(2, 1), p))
			z := new(big.Float).SetPrec(256).SetRat(num)
			z.Quo(z, sd)
			z.SetMantExp(z, int(bits))
			s.codes[j][x] = roundHalfAway(z)
		}
	}
	return s, nil
}

func roundHalfAway(z *big.Float) int64 {
	half := new(big.Float).SetPrec(256).SetFloat64(0.5)
	if z.Sign() < 0 {
		half.Neg(half)
	}
	r, _ := new(big.Float).SetPrec(256).Add(z, half).Int(nil)
	return r.Int64()
}

// Clone returns a standardiser sharing the table with its own clipper.
func (s *Standardiser) Clone() *Standardiser {
	c, _ := fixedpoint.NewClipper(s.clip.Bound())
	return &Standardiser{codes: s.codes, clip: c}
}

// D is the number of variants.
func (s *Standardiser) D() int { return len(s.codes) }

// Map writes the row of an individual's dosages to dst (both D long) and
// clips it; it reports whether the row was clipped. A dosage other than 0,
// 1, 2 or MissingDosage is an error naming the variant.
func (s *Standardiser) Map(dosages []int8, dst []int64) (bool, error) {
	if len(dosages) != len(s.codes) || len(dst) != len(s.codes) {
		return false, fmt.Errorf("power: %d dosages for %d variants", len(dosages), len(s.codes))
	}
	for j, x := range dosages {
		switch {
		case x == MissingDosage:
			dst[j] = 0
		case x >= 0 && x <= 2:
			dst[j] = s.codes[j][x]
		default:
			return false, fmt.Errorf("power: variant %d: a dosage that is not 0, 1, 2 or missing", j)
		}
	}
	return s.clip.Clip(dst)
}
