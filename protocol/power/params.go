package power

import (
	"errors"
	"fmt"
	"math/big"
	"math/bits"
)

// Limits of a power-method job.
const (
	// MaxD is the widest row: the Gram test of CheckQ sums d products of at
	// most 2^(2 MaxQBits) in int64.
	MaxD = 1 << 22
	// MaxQBits bounds h, the fractional bits of the public matrices.
	MaxQBits = 20
	// MinQBits is the coarsest public matrix a job accepts: below it the
	// shrink that CheckQ needs, about sqrt(d p)/2^h of the signal, is large.
	MinQBits = 8
	// MaxRounds bounds T.
	MaxRounds = 64
	// statBits bounds every entry of a sum of statistics: |Y| < 2^statBits
	// leaves the int64 sums of the owners and of the noise room.
	statBits = 61
)

// Params are the public parameters of a power-method job, fixed by its
// parent spec. A Params is a plain value.
type Params struct {
	// D features, K components wanted, P >= K columns of the public
	// matrices (K plus the oversampling), Rounds = T power rounds after
	// round 0.
	D, K, P, Rounds int
	// Seed is the public seed of Q_1 (Start).
	Seed []byte
	// Bits is g, the rows' fractional bits, and Bound the clip bound B =
	// floor(2^g C) in integer units.
	Bits  uint
	Bound int64
	// QBits is h, the public matrices' fractional bits (ChooseQBits).
	QBits uint
	// MaxRows bounds the rows of all owners together (num_owners times
	// max_owner_rows), for the overflow bound.
	MaxRows int64
}

// Validate checks the shape and that no sum can overflow int64 before the
// noise: MaxRows B^2 2^h < 2^statBits (and the rows' own bound B 2^h).
func (pr Params) Validate() error {
	switch {
	case pr.D < 1 || pr.D > MaxD:
		return fmt.Errorf("power: d = %d outside [1, %d]", pr.D, MaxD)
	case pr.K < 1 || pr.K > pr.P:
		return fmt.Errorf("power: k = %d must be in [1, p = %d]", pr.K, pr.P)
	case pr.P > pr.D:
		return fmt.Errorf("power: p = %d columns exceed d = %d features", pr.P, pr.D)
	case pr.Rounds < 1 || pr.Rounds > MaxRounds:
		return fmt.Errorf("power: rounds = %d outside [1, %d]", pr.Rounds, MaxRounds)
	case len(pr.Seed) == 0:
		return errors.New("power: the seed of Q_1 is empty")
	case pr.Bits > 30:
		return fmt.Errorf("power: bits g = %d above 30", pr.Bits)
	case pr.QBits < MinQBits || pr.QBits > MaxQBits:
		return fmt.Errorf("power: matrix bits h = %d outside [%d, %d]", pr.QBits, MinQBits, MaxQBits)
	case pr.Bound < 1:
		return fmt.Errorf("power: clip bound B = %d must be at least 1", pr.Bound)
	case pr.MaxRows < 1:
		return fmt.Errorf("power: max rows %d must be at least 1", pr.MaxRows)
	}
	if b := yBound(pr); b.BitLen() >= statBits {
		return fmt.Errorf("power: max rows %d x B^2 2^h = 2^%d does not fit 2^%d: lower the bits g = %d or h = %d, or the row cap",
			pr.MaxRows, b.BitLen(), statBits, pr.Bits, pr.QBits)
	}
	return nil
}

// yBound is MaxRows B^2 2^h, the largest |entry| of a round's sum of
// statistics (each row adds at most |q_j| |q^T Qq_c| <= B^2 2^h).
func yBound(pr Params) *big.Int {
	b := big.NewInt(pr.Bound)
	b.Mul(b, b).Lsh(b, pr.QBits)
	return b.Mul(b, big.NewInt(pr.MaxRows))
}

// ChooseQBits returns the largest h <= MaxQBits with maxRows B^2 2^h below
// 2^(statBits - margin): the public matrices' precision that leaves the
// statistics margin bits for the noise. It fails when even MinQBits does
// not fit.
func ChooseQBits(maxRows, bound int64, margin uint) (uint, error) {
	if maxRows < 1 || bound < 1 {
		return 0, fmt.Errorf("power: max rows %d and clip bound %d must be positive", maxRows, bound)
	}
	hi, lo := bits.Mul64(uint64(bound), uint64(bound))
	used := uint(bits.Len64(uint64(maxRows)))
	if hi > 0 {
		used += 64 + uint(bits.Len64(hi))
	} else {
		used += uint(bits.Len64(lo))
	}
	room := int(statBits) - int(margin) - int(used)
	if room < MinQBits {
		return 0, fmt.Errorf("power: max rows %d and clip bound %d leave %d bits for the public matrices (need %d): lower the bits g or the row cap", maxRows, bound, room, MinQBits)
	}
	return uint(min(room, MaxQBits)), nil
}

// Len is the number of values of a power round's statistic, D P.
func (pr Params) Len() int { return pr.D * pr.P }

// Round0Len is the number of values of round 0's statistic, [v | n].
func (pr Params) Round0Len() int { return pr.D + 1 }
