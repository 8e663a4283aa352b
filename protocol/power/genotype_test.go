package power

import (
	"math"
	"math/big"
	"testing"
)

// TestStandardiser: the table is round(2^g (x - 2p) / sqrt(2p(1-p))) (checked
// against float64 at frequencies where it cannot round differently),
// missing calls and monomorphic variants give 0, rows are clipped to B, and
// a bad dosage is refused naming the variant only.
func TestStandardiser(t *testing.T) {
	freqs := []*big.Rat{big.NewRat(1, 10), big.NewRat(1, 2), big.NewRat(37, 100), big.NewRat(0, 1), big.NewRat(1, 1)}
	const g = 8
	s, err := NewStandardiser(freqs, g, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]int64, len(freqs))
	for x := int8(0); x <= 2; x++ {
		if _, err := s.Map([]int8{x, x, x, x, x}, dst); err != nil {
			t.Fatal(err)
		}
		for j, f := range freqs[:3] {
			p, _ := f.Float64()
			want := math.Round(math.Ldexp((float64(x)-2*p)/math.Sqrt(2*p*(1-p)), g))
			if float64(dst[j]) != want {
				t.Errorf("p = %v, x = %d: %d, want %v", f, x, dst[j], want)
			}
		}
		if dst[3] != 0 || dst[4] != 0 {
			t.Errorf("monomorphic variants gave %v", dst[3:])
		}
	}
	if _, err := s.Map([]int8{MissingDosage, 2, MissingDosage, 1, 0}, dst); err != nil || dst[0] != 0 || dst[2] != 0 {
		t.Errorf("missing calls gave %v, %v", dst, err)
	}
	if _, err := s.Map([]int8{3, 0, 0, 0, 0}, dst); err == nil || err.Error() != "power: variant 0: a dosage that is not 0, 1, 2 or missing" {
		t.Errorf("bad dosage: %v", err)
	}
	small, _ := NewStandardiser(freqs, g, 300)
	clipped, err := small.Map([]int8{2, 2, 2, 2, 2}, dst)
	n2 := int64(0)
	for _, x := range dst {
		n2 += x * x
	}
	if err != nil || !clipped || n2 > 300*300 {
		t.Errorf("clip to 300: clipped %v, ||q||^2 = %d, %v", clipped, n2, err)
	}
	if _, err := NewStandardiser([]*big.Rat{big.NewRat(3, 2)}, g, 10); err == nil {
		t.Error("a frequency above 1 was accepted")
	}
}
