package sim

import "testing"

func TestTauDisplay(t *testing.T) {
	for _, c := range []struct {
		log10 float64
		want  string
	}{
		{-1.58e20, "< 1e-300 (negligible)"},
		{-301, "< 1e-300 (negligible)"},
		{-12, "1e-12"},
		{-0.5, "0.316"},
	} {
		if got := tau(c.log10); got != c.want {
			t.Errorf("tau(%g) = %q, want %q", c.log10, got, c.want)
		}
	}
}
