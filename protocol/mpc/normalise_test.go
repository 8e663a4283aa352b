package mpc

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestMSBShiftAndRecip(t *testing.T) {
	forEngines(t, 3, checkMSBShiftAndRecip)
}

func checkMSBShiftAndRecip(t *testing.T, e *Engine) {
	const m = 60
	vals := []int64{1, 2, 3, 1<<59 + 12345, 1<<60 - 1, 65536, 65537}
	rng := rand.New(rand.NewPCG(13, 14))
	for range 50 {
		vals = append(vals, 1+rng.Int64N(1<<(1+rng.IntN(59))))
	}
	x := NewMat(len(vals), 1)
	for i, v := range vals {
		x.V[i] = FromInt64(v)
	}
	xs := e.Share(x)
	s, err := e.MSBShift(xs, m)
	if err != nil {
		t.Fatal(err)
	}
	shift := e.Reveal(s)
	for i, v := range vals {
		want := int64(1) << (m - 1 - (63 - int64(countLeading(uint64(v)))))
		if shift.V[i] != FromInt64(want) {
			t.Fatalf("shift of %d: %v, want %d", v, shift.V[i], want)
		}
	}
	// y = x shift / 2^(m - F) in [0.5, 1), and its reciprocal.
	p, err := e.Hadamard(Product{xs, s})
	if err != nil {
		t.Fatal(err)
	}
	y := e.Trunc(m-e.P.F, p[0])[0]
	w, err := e.RecipHalf(y)
	if err != nil {
		t.Fatal(err)
	}
	ys, ws := e.Reveal(y), e.Reveal(w)
	for i := range vals {
		yv, wv := ys.V[i].Signed(e.P.F), ws.V[i].Signed(e.P.F)
		// At most two units above 1 (the truncation's error).
		if yv < 0.5-1e-9 || yv > 1+0x1p-31 {
			t.Fatalf("normalised %d: %g", vals[i], yv)
		}
		if math.Abs(wv*yv-1) > 1e-8 {
			t.Fatalf("1/%g = %g", yv, wv)
		}
	}
}

func countLeading(v uint64) int {
	n := 0
	for v&(1<<63) == 0 {
		v <<= 1
		n++
	}
	return n
}
