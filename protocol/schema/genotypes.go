package schema

import (
	"fmt"
	"math/big"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
)

// GenotypeDigits is the significant digits of a genotype schema's scales
// (the centers 2 p are exact when the frequencies are decimals).
const GenotypeDigits = 12

// Genotypes returns the schema of genotype dosages (a PLINK fileset read as
// rows, plink://PREFIX: one column a variant, cells 0, 1, 2, empty for a
// missing call) standardised as genotype PCA does it (Patterson, Price and
// Reich 2006), from public frequencies p_j of allele 1 (a reference panel's,
// never the owners'): variant j maps x to (x - 2 p_j) / sqrt(2 p_j (1 -
// p_j)) and a missing call reads as 2 p_j (so it maps to 0). A variant with
// p_j of 0 or 1 carries no information on the reference's scale (the exact
// map sends it to 0): it is left out, and its name returned in
// monomorphic. Rows are clipped to clip (for standardised genotypes, a
// multiple of sqrt(d)) and quantised to bits.
// protocol/power.Standardiser is the same map computed exactly; this one
// writes the scales to GenotypeDigits digits, a public choice every party
// reads from the same file.
func Genotypes(id string, variants []string, freqs []*big.Rat, bits uint, clip fixedpoint.Decimal) (s *Schema, monomorphic []string, err error) {
	if len(variants) != len(freqs) {
		return nil, nil, fmt.Errorf("schema %s: %d variants, %d frequencies", id, len(variants), len(freqs))
	}
	one := big.NewRat(1, 1)
	s = &Schema{ID: id, ClipNorm: clip, Bits: bits}
	for j, p := range freqs {
		if p == nil || p.Sign() < 0 || p.Cmp(one) > 0 {
			return nil, nil, fmt.Errorf("schema %s: variant %q: frequency %v is outside [0, 1]", id, variants[j], p)
		}
		if p.Sign() == 0 || p.Cmp(one) == 0 {
			monomorphic = append(monomorphic, variants[j])
			continue
		}
		twoP := new(big.Rat).Mul(p, big.NewRat(2, 1))
		center, err := ratDecimal(twoP)
		if err != nil {
			return nil, nil, fmt.Errorf("schema %s: variant %q: %w", id, variants[j], err)
		}
		v := new(big.Rat).Sub(one, p)
		v.Mul(v, twoP)
		sd := new(big.Float).SetPrec(256).SetRat(v)
		scale, err := fixedpoint.ParseDecimal(sd.Sqrt(sd).Text('g', GenotypeDigits))
		if err != nil {
			return nil, nil, fmt.Errorf("schema %s: variant %q: %w", id, variants[j], err)
		}
		s.Features = append(s.Features, Feature{Name: variants[j], Center: center, Scale: scale,
			Missing: &Missing{Policy: MissingFill, Fill: center.String(), Values: []string{""}}})
	}
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	return s, monomorphic, nil
}

// ratDecimal writes r exactly when it is a decimal of at most 18 places,
// else to GenotypeDigits + 6 significant digits.
func ratDecimal(r *big.Rat) (fixedpoint.Decimal, error) {
	text := r.FloatString(18)
	if exact, ok := new(big.Rat).SetString(text); !ok || exact.Cmp(r) != 0 {
		text = new(big.Float).SetPrec(256).SetRat(r).Text('g', GenotypeDigits+6)
	}
	return fixedpoint.ParseDecimal(text)
}
