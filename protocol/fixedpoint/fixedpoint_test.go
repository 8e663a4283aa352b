package fixedpoint

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseDecimalCanonical(t *testing.T) {
	cases := map[string]string{
		"0":                                    "0",
		"-0":                                   "0",
		"+0.000":                               "0",
		"1":                                    "1",
		"1.50":                                 "1.5",
		"-12.5000":                             "-12.5",
		"007":                                  "7",
		".5":                                   "0.5",
		"5.":                                   "5",
		"1e3":                                  "1000",
		"1.25E-3":                              "0.00125",
		"-6.75e-02":                            "-0.0675",
		"123456789012345678901234567890":       "123456789012345678901234567890",
		"0.1000000000000000055511151231257827": "0.1000000000000000055511151231257827",
		" 42 ":                                 "42",
		"12e+2":                                "1200",
	}
	for in, want := range cases {
		d, err := ParseDecimal(in)
		if err != nil {
			t.Errorf("ParseDecimal(%q): %v", in, err)
			continue
		}
		if got := d.String(); got != want {
			t.Errorf("ParseDecimal(%q) = %s, want %s", in, got, want)
		}
		back, err := ParseDecimal(d.String())
		if err != nil || back.String() != want {
			t.Errorf("round trip of %q: %v %v", in, back, err)
		}
	}
}

func TestParseDecimalErrors(t *testing.T) {
	for _, in := range []string{"", " ", "-", "+", ".", "1.2.3", "abc", "1e", "1e+", "1x", "NaN", "Inf", "0x10", "1e99999", "1,5", "--1", strings.Repeat("9", 200)} {
		if _, err := ParseDecimal(in); err == nil {
			t.Errorf("ParseDecimal(%q) succeeded", in)
		} else if !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseDecimal(%q): %v is not ErrSyntax", in, err)
		}
	}
}

// refQuantize is an independent exact computation with big.Rat.
func refQuantize(x, c, s string, g uint) *big.Int {
	xr, ok := new(big.Rat).SetString(strings.Trim(x, " \t"))
	if !ok {
		return nil
	}
	cr, _ := new(big.Rat).SetString(c)
	sr, _ := new(big.Rat).SetString(s)
	z := new(big.Rat).Sub(xr, cr)
	z.Quo(z, sr)
	z.Mul(z, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), g)))
	neg := z.Sign() < 0
	z.Abs(z)
	// floor(z + 1/2)
	z.Add(z, big.NewRat(1, 2))
	q := new(big.Int).Quo(z.Num(), z.Denom())
	if neg {
		q.Neg(q)
	}
	return q
}

func TestQuantizeGolden(t *testing.T) {
	// Hand-computed: 2^16 * (14.23 - 13) / 0.5 = 2.46 * 65536 = 161218.56 -> 161219.
	// 2^16 * (12.77 - 13) / 0.5 = -0.46 * 65536 = -30146.56 -> -30147.
	// 2^4 * (1.03125 - 1) / 1 = 0.5 -> 1 (half away from zero); negative half -> -1.
	// 2^16 * (1065 - 746.893258) / 314.021657 = 66388.553... (Python fractions) -> 66389.
	cases := []struct {
		x, c, s string
		g       uint
		want    int64
	}{
		{"14.23", "13", "0.5", 16, 161219},
		{"12.77", "13", "0.5", 16, -30147},
		{"1.03125", "1", "1", 4, 1},
		{"0.96875", "1", "1", 4, -1},
		{"1065", "746.893258", "314.021657", 16, 66389},
	}
	for _, tc := range cases {
		q, err := NewQuantizer(MustDecimal(tc.c), MustDecimal(tc.s), tc.g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := q.Quantize(tc.x, &Scratch{})
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("quantize %s (c=%s s=%s g=%d) = %d, want %d", tc.x, tc.c, tc.s, tc.g, got, tc.want)
		}
	}
}

func TestQuantizeMatchesRational(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	centers := []string{"0", "13.000617977528089", "-2.5", "746.893258426966", "1e-7"}
	scales := []string{"1", "0.8095745", "314.0216570", "3e-5", "123456.789"}
	var sc Scratch
	for i := 0; i < 20000; i++ {
		c := centers[rng.IntN(len(centers))]
		s := scales[rng.IntN(len(scales))]
		g := uint(rng.IntN(25))
		q, err := NewQuantizer(MustDecimal(c), MustDecimal(s), g)
		if err != nil {
			t.Fatal(err)
		}
		var x string
		switch rng.IntN(4) {
		case 0:
			x = big.NewRat(rng.Int64N(2_000_000)-1_000_000, 1000).FloatString(3)
		case 1:
			x = big.NewRat(rng.Int64N(1<<40)-(1<<39), 1<<20).FloatString(20)
		case 2:
			x = fmt.Sprintf("%de-%d", rng.Int64N(100000), rng.IntN(10))
		default:
			x = big.NewRat(rng.Int64N(1000)-500, 7).FloatString(30)
		}
		want := refQuantize(x, c, s, g)
		got, err := q.Quantize(x, &sc)
		if !want.IsInt64() || want.Int64() >= MaxAbs || want.Int64() <= -MaxAbs {
			if !errors.Is(err, ErrRange) {
				t.Fatalf("quantize %s c=%s s=%s g=%d: want ErrRange, got %d, %v", x, c, s, g, got, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("quantize %s: %v", x, err)
		}
		if got != want.Int64() {
			t.Fatalf("quantize %s c=%s s=%s g=%d = %d, want %s", x, c, s, g, got, want)
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	if _, err := NewQuantizer(MustDecimal("0"), MustDecimal("0"), 16); err == nil {
		t.Error("zero scale accepted")
	}
	if _, err := NewQuantizer(MustDecimal("0"), MustDecimal("-1"), 16); err == nil {
		t.Error("negative scale accepted")
	}
	if _, err := NewQuantizer(MustDecimal("0"), MustDecimal("1"), MaxBits+1); err == nil {
		t.Error("too many bits accepted")
	}
	q, _ := NewQuantizer(MustDecimal("0"), MustDecimal("1"), 16)
	if _, err := q.Quantize("1e40", &Scratch{}); !errors.Is(err, ErrRange) {
		t.Errorf("huge value: %v", err)
	}
	if _, err := q.Quantize("n/a", &Scratch{}); !errors.Is(err, ErrSyntax) {
		t.Errorf("text: %v", err)
	}
}

func TestBound(t *testing.T) {
	for _, tc := range []struct {
		c    string
		g    uint
		want int64
	}{{"1", 16, 65536}, {"0.5", 16, 32768}, {"2.75", 10, 2816}, {"0.1", 16, 6553}} {
		b, err := Bound(MustDecimal(tc.c), tc.g)
		if err != nil || b != tc.want {
			t.Errorf("Bound(%s, %d) = %d, %v; want %d", tc.c, tc.g, b, err, tc.want)
		}
	}
	for _, c := range []string{"0", "-1", "1e-9"} {
		if _, err := Bound(MustDecimal(c), 16); err == nil {
			t.Errorf("Bound(%s) accepted", c)
		}
	}
}

func TestClip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var sumDev float64
	var nDev int
	for _, b := range []int64{1, 7, 1 << 10, 1 << 16, 1 << 24} {
		c, err := NewClipper(b)
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 2000; trial++ {
			d := 1 + rng.IntN(100)
			q := make([]int64, d)
			scale := int64(1) << rng.IntN(40)
			for i := range q {
				q[i] = rng.Int64N(2*scale+1) - scale
			}
			orig := append([]int64(nil), q...)
			n2 := norm2(orig)
			clipped, err := c.Clip(q)
			if err != nil {
				t.Fatal(err)
			}
			// Always inside the ball, checked independently with big.Int.
			var s, tmp big.Int
			for _, x := range q {
				tmp.SetInt64(x)
				s.Add(&s, tmp.Mul(&tmp, &tmp))
			}
			if s.Cmp(new(big.Int).Mul(big.NewInt(b), big.NewInt(b))) > 0 {
				t.Fatalf("B=%d: ||q||^2 = %s above B^2", b, &s)
			}
			if n2.cmp(c.b2) <= 0 {
				if clipped || !equal(q, orig) {
					t.Fatalf("row inside the ball was changed")
				}
				continue
			}
			if !clipped {
				t.Fatal("row outside the ball not reported as clipped")
			}
			// Each entry within 1 of the exact scaling q_i B / ||q||.
			var nb big.Int
			n2.big(&nb)
			nf, _ := new(big.Float).SetInt(&nb).Float64()
			norm := sqrt(nf)
			for i := range q {
				exact := float64(orig[i]) * float64(b) / norm
				dev := float64(q[i]) - exact
				if dev > 1.0001 || dev < -1.0001 {
					t.Fatalf("B=%d entry %d: %d vs exact %.3f", b, i, q[i], exact)
				}
				if b >= 1<<16 && orig[i] > 0 {
					sumDev += dev
					nDev++
				}
			}
		}
	}
	// Unbiased: rounding to nearest, not truncation (truncation gives about -0.5).
	if mean := sumDev / float64(nDev); mean < -0.05 || mean > 0.05 {
		t.Errorf("mean deviation of clipped positive entries %.4f, want about 0", mean)
	}
}

func TestClipRejects(t *testing.T) {
	c, _ := NewClipper(100)
	q := []int64{1, MaxAbs}
	if _, err := c.Clip(q); !errors.Is(err, ErrRange) {
		t.Errorf("out-of-range entry: %v", err)
	}
	if q[1] != MaxAbs {
		t.Error("rejected row was modified")
	}
	if _, err := NewClipper(0); err == nil {
		t.Error("zero bound accepted")
	}
}

func equal(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func sqrt(x float64) float64 {
	f, _ := new(big.Float).SetPrec(200).Sqrt(big.NewFloat(x)).Float64()
	return f
}

func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "-12.5e-3", "1e1000", "9999999999999999999999", ".", "1.2.3", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDecimal(s)
		if err != nil {
			return
		}
		back, err := ParseDecimal(d.String())
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", d.String(), s, err)
		}
		if back.String() != d.String() || back.Rat().Cmp(d.Rat()) != 0 {
			t.Fatalf("round trip of %q: %s vs %s", s, d, back)
		}
	})
}

func FuzzQuantize(f *testing.F) {
	f.Add("14.23", uint8(16))
	f.Add("-1e-30", uint8(30))
	f.Add("1e400", uint8(0))
	q := map[uint8]*Quantizer{}
	f.Fuzz(func(t *testing.T, x string, g uint8) {
		g %= MaxBits + 1
		if q[g] == nil {
			q[g], _ = NewQuantizer(MustDecimal("13.000617977528089"), MustDecimal("0.8095745"), uint(g))
		}
		got, err := q[g].Quantize(x, &Scratch{})
		if err != nil {
			return
		}
		want := refQuantize(x, "13.000617977528089", "0.8095745", uint(g))
		if want == nil {
			t.Skip("big.Rat does not parse it")
		}
		if !want.IsInt64() || want.Int64() != got {
			t.Fatalf("quantize %q g=%d = %d, want %s", x, g, got, want)
		}
	})
}

func BenchmarkQuantize(b *testing.B) {
	q, _ := NewQuantizer(MustDecimal("13.000617977528089"), MustDecimal("0.8095745"), 16)
	var sc Scratch
	for b.Loop() {
		if _, err := q.Quantize("14.23", &sc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClip(b *testing.B) {
	for _, d := range []int{50, 784} {
		b.Run(strconvI(d), func(b *testing.B) {
			c, _ := NewClipper(1 << 16)
			rng := rand.New(rand.NewPCG(5, 6))
			row := make([]int64, d)
			q := make([]int64, d)
			for i := range row {
				row[i] = rng.Int64N(1<<18) - (1 << 17)
			}
			for b.Loop() {
				copy(q, row)
				if _, err := c.Clip(q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func strconvI(d int) string { return "d=" + big.NewInt(int64(d)).String() }
