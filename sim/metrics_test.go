package sim

import (
	"slices"
	"testing"
)

// Since keeps the owners that computed exactly one share in between.
func TestSharesSince(t *testing.T) {
	type s = struct {
		Count uint64
		Sum   float64
	}
	before := Shares{"a": s{1, 0.5}, "b": s{2, 1}, "c": s{0, 0}}
	after := Shares{"a": s{2, 0.75}, "b": s{4, 3}, "c": s{0, 0}, "d": s{1, 0.125}}
	got := after.Since(before)
	slices.Sort(got)
	if want := []float64{0.125, 0.25}; !slices.Equal(got, want) {
		t.Fatalf("Since = %v, want %v", got, want)
	}
}
