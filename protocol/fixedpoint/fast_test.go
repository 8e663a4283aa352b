package fixedpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
)

// Centers and scales as schemas hold them: short decimals, and the 17
// significant digits of schema.Infer's FromFloat, where the fast path's
// constants only fit a word after reduction.
var (
	fastCenters = []string{"0", "13.000617977528089", "-2.5", "746.893258426966", "1e-7", "0.07939088988555858", "-0.09093844618528625", "123456789012345678901234", "1e30"}
	fastScales  = []string{"1", "0.8095745", "314.0216570", "3e-5", "123456.789", "0.48679961163652585", "0.4452820367197203", "7", "1e-25"}
)

// fastCells are the cells of the fuzz corpus and the table test: plain
// decimals of every length around the 19-digit limit, negative zeros,
// exponents, blanks and malformed text (which the fast path must leave to
// the exact one).
var fastCells = []string{
	"0", "-0", "+0", "-0.000", "0.", ".0", "-.5", "+.5", "5.", "14.23", "-12.345", "0.5", "-0.5",
	"1.03125", "0.96875", "1065", "-1e-3", "1E3", "12e+2", " 7", "7 ", "\t-3.5",
	"9999999999999999999", "-9999999999999999999", "99999999999999999999", "1234567890.123456789",
	"0.0000000000000000001", "0.00000000000000000001", "-0.1234567890123456789", "12345678901234567890123",
	"18446744073709551615", "18446744073709551616", "9223372036854775807", "9223372036854775808",
	"1e400", "1e-400", "1e99999", "", "-", "+", ".", "-.", "1.2.3", "1,5", "NaN", "--1", "0x10", "1e", "١",
	"0.07939088988555858", "-0.09093844618528625", "746.893258426966", "13.000617977528089",
	"137438953471.99999", "-137438953472", "1e11", "140737488355328",
}

func quantizeBoth(t testing.TB, q *Quantizer, x string) {
	var sc Scratch
	fast, ok := q.quantizeFast(x)
	got, err := q.Quantize(x, &sc)
	want, werr := q.QuantizeExact(x, &sc)
	if (err == nil) != (werr == nil) || got != want || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("quantize %q: %d, %v; exact %d, %v", x, got, err, want, werr)
	}
	if ok && (werr != nil || fast != want) {
		t.Fatalf("fast path %q: %d; exact %d, %v", x, fast, want, werr)
	}
}

func TestQuantizeFastMatchesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fastHits, total := 0, 0
	for _, c := range fastCenters {
		for _, s := range fastScales {
			for _, g := range []uint{0, 1, 16, 22, 30} {
				q, err := NewQuantizer(MustDecimal(c), MustDecimal(s), g)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range fastCells {
					quantizeBoth(t, q, x)
				}
				for range 300 {
					x := randomCell(rng)
					quantizeBoth(t, q, x)
					if _, ok := q.quantizeFast(x); ok {
						fastHits++
					}
					total++
				}
			}
		}
	}
	// The fast path must actually carry the ordinary cells.
	if fastHits < total/4 {
		t.Errorf("fast path took %d of %d cells", fastHits, total)
	}
}

// The cells of an inferred schema's typical row (six significant digits)
// must all take the fast path at g = 16.
func TestQuantizeFastTakesOrdinaryCells(t *testing.T) {
	q, err := NewQuantizer(MustDecimal("0.07939088988555858"), MustDecimal("0.48679961163652585"), 16)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []string{"0.123456", "-1.23456", "12.3456", "-0.000123456", "123456", "3"} {
		if _, ok := q.quantizeFast(x); !ok {
			t.Errorf("%q took the exact path", x)
		}
		quantizeBoth(t, q, x)
	}
}

func randomCell(rng *rand.Rand) string {
	switch rng.IntN(6) {
	case 0:
		return big.NewRat(rng.Int64N(2_000_000)-1_000_000, 1000).FloatString(3)
	case 1:
		return big.NewRat(rng.Int64N(1<<40)-(1<<39), 1<<20).FloatString(rng.IntN(22))
	case 2:
		return fmt.Sprintf("%de-%d", rng.Int64N(100000), rng.IntN(10))
	case 3:
		return strings.Repeat("9", 1+rng.IntN(22))
	case 4:
		digits := make([]byte, 1+rng.IntN(25))
		for i := range digits {
			digits[i] = byte('0' + rng.IntN(10))
		}
		p := rng.IntN(len(digits) + 1)
		s := string(digits[:p]) + "." + string(digits[p:])
		if rng.IntN(2) == 0 {
			s = "-" + s
		}
		return s
	}
	return big.NewRat(rng.Int64N(1000)-500, 7).FloatString(rng.IntN(30))
}

func FuzzQuantizeFast(f *testing.F) {
	for i, x := range fastCells {
		f.Add(x, fastCenters[i%len(fastCenters)], fastScales[i%len(fastScales)], uint8(i))
	}
	f.Fuzz(func(t *testing.T, x, c, s string, g uint8) {
		cd, err := ParseDecimal(c)
		if err != nil {
			return
		}
		sd, err := ParseDecimal(s)
		if err != nil || sd.Sign() <= 0 {
			return
		}
		q, err := NewQuantizer(cd, sd, uint(g%(MaxBits+1)))
		if err != nil {
			t.Fatal(err)
		}
		quantizeBoth(t, q, x)
	})
}

func clipBoth(t testing.TB, c *Clipper, row []int64) {
	a, b := append([]int64(nil), row...), append([]int64(nil), row...)
	ca, ea := c.Clip(a)
	cb, eb := c.ClipExact(b)
	if ca != cb || (ea == nil) != (eb == nil) || !equal(a, b) {
		t.Fatalf("B=%d row %v: Clip %v %v %v, ClipExact %v %v %v", c.Bound(), row, ca, ea, a, cb, eb, b)
	}
}

func TestClipMatchesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, b := range []int64{1, 2, 3, 100, 1 << 16, 3 << 15, 1<<32 - 1, 1 << 32, 1 << 40, MaxAbs - 1} {
		c, err := NewClipper(b)
		if err != nil {
			t.Fatal(err)
		}
		for range 400 {
			d := 1 + rng.IntN(130)
			row := make([]int64, d)
			scale := int64(1) << rng.IntN(53)
			for i := range row {
				switch rng.IntN(5) {
				case 0: // ties: equal magnitudes give equal fractional parts
					row[i] = row[rng.IntN(i+1)]
				case 1:
					row[i] = 0
				default:
					row[i] = rng.Int64N(scale) - scale/2
				}
			}
			clipBoth(t, c, row)
			// Many small entries next to a large one: tens of undo and
			// fill moves, past the linear scans into the heaps.
			small := make([]int64, 50+rng.IntN(400))
			for i := range small {
				small[i] = 1 + rng.Int64N(3)
			}
			small[0] = 3*b + rng.Int64N(b+1)
			clipBoth(t, c, small)
			// At the boundary: a row of norm exactly B, and one just above.
			if d == 1 {
				clipBoth(t, c, []int64{b})
				clipBoth(t, c, []int64{-b - 1})
			}
		}
	}
}

func FuzzClip(f *testing.F) {
	f.Add(int64(1<<16), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(int64(65536), binary.LittleEndian.AppendUint64(nil, 65536)) // norm exactly B
	f.Add(int64(65536), binary.LittleEndian.AppendUint64(nil, 65537)) // just outside
	f.Add(int64(3), []byte{255, 255, 255, 255, 255, 255, 15, 0, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add(int64(MaxAbs-1), []byte{255, 255, 255, 255, 255, 255, 31, 0})
	f.Fuzz(func(t *testing.T, b int64, raw []byte) {
		c, err := NewClipper(b)
		if err != nil {
			return
		}
		row := make([]int64, 0, len(raw)/8)
		for ; len(raw) >= 8 && len(row) < 4096; raw = raw[8:] {
			row = append(row, int64(binary.LittleEndian.Uint64(raw))>>10)
		}
		clipBoth(t, c, row)
	})
}

func TestClipRejectsRange(t *testing.T) {
	c, _ := NewClipper(10)
	if _, err := c.Clip([]int64{-MaxAbs}); !errors.Is(err, ErrRange) {
		t.Errorf("got %v", err)
	}
}

func BenchmarkQuantizeFast(b *testing.B) {
	q, _ := NewQuantizer(MustDecimal("0.07939088988555858"), MustDecimal("0.48679961163652585"), 16)
	var sc Scratch
	for _, path := range []struct {
		name string
		fn   func(string, *Scratch) (int64, error)
	}{{"fast", q.Quantize}, {"exact", q.QuantizeExact}} {
		b.Run(path.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := path.fn("-1.23456", &sc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkClipFast(b *testing.B) {
	for _, d := range []int{100, 784} {
		c, _ := NewClipper(1 << 16)
		rng := rand.New(rand.NewPCG(5, 6))
		row := make([]int64, d)
		q := make([]int64, d)
		for i := range row {
			row[i] = rng.Int64N(1<<18) - (1 << 17)
		}
		for _, path := range []struct {
			name string
			fn   func([]int64) (bool, error)
		}{{"fast", c.Clip}, {"exact", c.ClipExact}} {
			b.Run(fmt.Sprintf("d=%d/%s", d, path.name), func(b *testing.B) {
				for b.Loop() {
					copy(q, row)
					if _, err := path.fn(q); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// div by the reciprocal is bits.Div64, including at the edges.
func TestFastDivMatchesDiv64(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	dens := []uint64{1, 2, 3, 5, 10, 1<<63 - 1, 1 << 63, 1<<64 - 1, 48679961163652585}
	for range 2000 {
		dens = append(dens, rng.Uint64()>>rng.IntN(64)|1)
	}
	for _, den := range dens {
		term := newFastTerm(1, 0, 1, den)
		for _, hi := range []uint64{0, den - 1, rng.Uint64N(den)} {
			for _, lo := range []uint64{0, 1, 1<<64 - 1, rng.Uint64()} {
				q, r := term.div(hi, lo)
				wq, wr := bits.Div64(hi, lo, den)
				if q != wq || r != wr {
					t.Fatalf("(%d, %d) / %d: %d r %d, want %d r %d", hi, lo, den, q, r, wq, wr)
				}
			}
		}
	}
}
