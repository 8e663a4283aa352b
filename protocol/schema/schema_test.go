package schema

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
)

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseCanonicalHash(t *testing.T) {
	s, err := Parse(mustRead(t, "testdata/small.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := mustRead(t, "testdata/small.canonical.json")
	if got := s.Canonical(); !bytes.Equal(got, want) {
		t.Fatalf("canonical form\n got %s\nwant %s", got, want)
	}
	if s.Hash() != sha256.Sum256(want) {
		t.Fatal("hash is not the SHA-256 of the canonical form")
	}
	// Re-parsing the canonical form gives the same hash; a changed center does not.
	s2, err := Parse(want)
	if err != nil || s2.HashHex() != s.HashHex() {
		t.Fatalf("canonical form re-parsed: %v", err)
	}
	s2.Features[0].Center = fixedpoint.MustDecimal("1.5000001")
	if s2.HashHex() == s.HashHex() {
		t.Fatal("different centers hash equal")
	}
	if s.D() != 2 || s.K(true) != 2 || s.K(false) != 1 || s.Bound() != 1<<16 {
		t.Fatalf("D=%d K=%d B=%d", s.D(), s.K(true), s.Bound())
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		`{"id":"x","features":[{"name":"a","center":0,"scale":1}],"extra":1}`:                         "unknown field",
		`{"id":"","features":[{"name":"a","center":0,"scale":1}]}`:                                    "id is empty",
		`{"id":"x","features":[]}`:                                                                    "no features",
		`{"id":"x","features":[{"name":"a","center":0,"scale":0}]}`:                                   "scale 0 must be positive",
		`{"id":"x","features":[{"name":"a","center":0,"scale":1},{"name":"a","center":0,"scale":1}]}`: `feature "a" appears twice`,
		`{"id":"x","features":[{"name":"a","center":0,"scale":1}],"classes":["p"]}`:                   "no label column",
		`{"id":"x","features":[{"name":"a","center":0,"scale":1}],"label":"l","classes":["p","p"]}`:   `class "p" appears twice`,
		`{"id":"x","features":[{"name":"a","center":0,"scale":1}],"quant_bits":40}`:                   "quant_bits 40",
		`{"id":"x","features":[{"name":"a","center":0,"scale":1}],"clip_norm":0}`:                     "clip norm 0 must be positive",
		`{"id":"x","features":[{"name":"a","center":"zz","scale":1}]}`:                                "not a decimal",
		`{"id":"x","features":[{"name":"a","center":0,"scale":1}],"label":"a"}`:                       "also a feature",
		`{"id":"x","features":[{"name":"a","center":0,"scale":1}]} {}`:                                "trailing data",
		`{"id":"x","features":[{"name":"a","center":0,"scale":1,"min":2,"max":1}]}`:                   "min 2 is above max 1",
	}
	for in, want := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s): %v, want an error containing %q", in, err, want)
		}
	}
}

const csvSmall = `b,label,a,ignored
0.25,x,3.5,foo
-0.25,y,1.5,bar
`

func TestReader(t *testing.T) {
	s, _ := Parse(mustRead(t, "testdata/small.schema.json"))
	rd, err := s.NewReader(strings.NewReader(csvSmall), true)
	if err != nil {
		t.Fatal(err)
	}
	// Row 1: z = ((3.5-1.5)/2, (0.25+0.25)/0.5) = (1, 1): norm sqrt2 > 1, clipped to
	// 2^16 (1/sqrt2, 1/sqrt2) = 46340.95 -> (46341, 46341) has norm^2 above 2^32,
	// so one round-up is undone: (46340, 46341) (ties broken by index).
	q, k, err := rd.Next()
	if err != nil || k != 0 || q[0] != 46340 || q[1] != 46341 {
		t.Fatalf("row 1: %v %d %v", q, k, err)
	}
	q, k, err = rd.Next()
	if err != nil || k != 1 || q[0] != 0 || q[1] != 0 {
		t.Fatalf("row 2: %v %d %v", q, k, err)
	}
	if _, _, err := rd.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if rows, clipped := rd.Rows(); rows != 2 || clipped != 1 {
		t.Fatalf("rows %d clipped %d", rows, clipped)
	}
}

// TestClamp checks the declared bounds: values outside [min, max] are
// clamped before the map, exactly as if the clamped value had been read, and
// counted; a schema without bounds keeps its hash.
func TestClamp(t *testing.T) {
	plain := `{"id":"c","features":[{"name":"a","center":1,"scale":2},{"name":"b","center":0,"scale":1}],"clip_norm":100}`
	bounded := `{"id":"c","features":[{"name":"a","center":1,"scale":2,"min":-3,"max":5.5},{"name":"b","center":0,"scale":1,"max":0.25}],"clip_norm":100}`
	p, err := Parse([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(bounded))
	if err != nil {
		t.Fatal(err)
	}
	if p.HashHex() == b.HashHex() || strings.Contains(string(p.Canonical()), "min") {
		t.Fatalf("bounds must enter the hash and be absent when unset: %s", p.Canonical())
	}
	// Each row read with bounds must equal the clamped row read without.
	rows := [][2]string{{"0", "0"}, {"-7", "0.3"}, {"9.25", "-4"}, {"5.5", "0.25"}, {"-3", "1e3"}}
	want := [][2]string{{"0", "0"}, {"-3", "0.25"}, {"5.5", "-4"}, {"5.5", "0.25"}, {"-3", "0.25"}}
	var in, ref strings.Builder
	in.WriteString("a,b\n")
	ref.WriteString("a,b\n")
	for i := range rows {
		in.WriteString(rows[i][0] + "," + rows[i][1] + "\n")
		ref.WriteString(want[i][0] + "," + want[i][1] + "\n")
	}
	rb, err := b.NewReader(strings.NewReader(in.String()), false)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := p.NewReader(strings.NewReader(ref.String()), false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		qb, _, err1 := rb.Next()
		got := append([]int64(nil), qb...)
		qp, _, err2 := rp.Next()
		if err1 != nil || err2 != nil || got[0] != qp[0] || got[1] != qp[1] {
			t.Fatalf("row %d %v: bounded %v (%v), clamped by hand %v (%v)", i, rows[i], got, err1, qp, err2)
		}
	}
	if rb.Clamped() != 4 || rp.Clamped() != 0 {
		t.Fatalf("clamped %d and %d values, want 4 and 0", rb.Clamped(), rp.Clamped())
	}
}

func TestReaderErrors(t *testing.T) {
	s, _ := Parse(mustRead(t, "testdata/small.schema.json"))
	cases := []struct {
		csv, want string
	}{
		{"", "line 1: empty file"},
		{"a,label\n1,x\n", `line 1, column "b": feature missing`},
		{"a,b\n1,2\n", `line 1, column "label": label column missing`},
		{"a,b,label\n1,2,x\n1,oops,y\n", `line 3, column "b": "oops"`},
		{"a,b,label\n1,2,x\n\n1,2,z\n", `line 4, column "label": "z": label is not one of`},
		{"a,b,label\n1,2,x\n1,2\n", "line 3: wrong number of fields"},
		{"a,b,label\n1,1e300,x\n", `line 2, column "b"`},
		{"a,a,label\n", `column "a": column appears twice`},
	}
	for _, tc := range cases {
		rd, err := s.NewReader(strings.NewReader(tc.csv), true)
		for err == nil {
			_, _, err = rd.Next()
		}
		if err == io.EOF || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("csv %q: %v, want %q", tc.csv, err, tc.want)
		}
	}
	var re *RowError
	rd, _ := s.NewReader(strings.NewReader("a,b,label\n1,2,q\n"), true)
	if _, _, err := rd.Next(); !errors.As(err, &re) || re.Line != 2 || !errors.Is(err, ErrUnknownClass) {
		t.Errorf("unknown class: %v", err)
	}
}

func TestInfer(t *testing.T) {
	in := "f1,f2,label,f3\n1,10,b,5\n3,10,a,5\n5,10,b,5.000000000000001\n"
	s, err := Infer(strings.NewReader(in), "t", "label")
	if err != nil {
		t.Fatal(err)
	}
	// f1: mean 3, population std sqrt(8/3); f2 constant -> scale 1; f3 nearly constant -> scale 1.
	if s.Features[0].Center.String() != "3" || s.Features[1].Scale.String() != "1" || s.Features[2].Name != "f3" || s.Features[2].Scale.String() != "1" {
		t.Fatalf("inferred %s", s.Canonical())
	}
	if got := s.Features[0].Scale.String(); got != "1.632993161855452" {
		t.Fatalf("f1 scale %s, want sqrt(8/3) = 1.632993161855452", got)
	}
	if strings.Join(s.Classes, ",") != "a,b" {
		t.Fatalf("classes %v", s.Classes)
	}
	if _, err := Infer(strings.NewReader("a,label\nx,1\n"), "t", "label"); err == nil || !strings.Contains(err.Error(), `line 2, column "a"`) {
		t.Fatalf("bad cell: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte(csvSmall))
	f.Add([]byte("a,b,label\n1,2,x\n\"unterminated\n"))
	s, _ := Parse([]byte(`{"id":"small","features":[{"name":"a","center":"1.5","scale":"2"},{"name":"b","center":"-0.25","scale":"0.5"}],"label":"label","classes":["x","y"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd, err := s.NewReader(bytes.NewReader(data), true)
		if err != nil {
			return
		}
		for {
			q, _, err := rd.Next()
			if err != nil {
				return
			}
			var n2 float64
			for _, x := range q {
				n2 += float64(x) * float64(x)
			}
			if n2 > float64(int64(1)<<32)*(1+1e-9) {
				t.Fatalf("row outside the ball: %v", q)
			}
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add(mustReadF(f, "testdata/small.schema.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		s2, err := Parse(s.Canonical())
		if err != nil {
			t.Fatalf("canonical form does not parse: %v", err)
		}
		if s2.HashHex() != s.HashHex() {
			t.Fatal("canonical form changes the hash")
		}
	})
}

func mustReadF(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// TestSameReading: a job's schema may change only the map (centers, scales,
// clip norm) of the schema an owner serves.
func TestSameReading(t *testing.T) {
	base := `{"id":"s","features":[{"name":"a","center":1,"scale":2,"min":0,"max":9},{"name":"b","center":0,"scale":1}],"label":"y","classes":["p","q"]}`
	s, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	ok, _ := Parse([]byte(`{"id":"s","features":[{"name":"a","center":4.5,"scale":0.3,"min":0,"max":9},{"name":"b","center":7,"scale":3}],"label":"y","classes":["p","q"],"clip_norm":5}`))
	if err := s.SameReading(ok); err != nil {
		t.Fatalf("another map refused: %v", err)
	}
	for want, other := range map[string]string{
		"bounds":     `{"id":"s","features":[{"name":"a","center":1,"scale":2,"min":0,"max":10},{"name":"b","center":0,"scale":1}],"label":"y","classes":["p","q"]}`,
		"no bounds":  `{"id":"s","features":[{"name":"a","center":1,"scale":2},{"name":"b","center":0,"scale":1}],"label":"y","classes":["p","q"]}`,
		"feature 1":  `{"id":"s","features":[{"name":"a","center":1,"scale":2,"min":0,"max":9},{"name":"c","center":0,"scale":1}],"label":"y","classes":["p","q"]}`,
		"classes":    `{"id":"s","features":[{"name":"a","center":1,"scale":2,"min":0,"max":9},{"name":"b","center":0,"scale":1}],"label":"y","classes":["q","p"]}`,
		"quant_bits": `{"id":"s","features":[{"name":"a","center":1,"scale":2,"min":0,"max":9},{"name":"b","center":0,"scale":1}],"label":"y","classes":["p","q"],"quant_bits":12}`,
	} {
		o, err := Parse([]byte(other))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SameReading(o); err == nil {
			t.Errorf("%s changed: accepted", want)
		}
	}
}

// FuzzClamp checks the declared bounds on arbitrary values and bounds:
// clamping the quantized value equals quantizing the clamped value, and
// the clamp count says whether it moved.
func FuzzClamp(f *testing.F) {
	f.Add("-3", "5.5", "9.25")
	f.Add("0", "0", "-1e-9")
	f.Add("-1e3", "1e-3", "0.0005")
	f.Fuzz(func(t *testing.T, lo, hi, x string) {
		l, err1 := fixedpoint.ParseDecimal(lo)
		h, err2 := fixedpoint.ParseDecimal(hi)
		v, err3 := fixedpoint.ParseDecimal(x)
		if err1 != nil || err2 != nil || err3 != nil || l.Rat().Cmp(h.Rat()) > 0 {
			return
		}
		s := &Schema{ID: "f", Features: []Feature{{Name: "a", Center: fixedpoint.MustDecimal("0.5"), Scale: fixedpoint.MustDecimal("3"), Min: &l, Max: &h}}, ClipNorm: fixedpoint.MustDecimal("1e6"), Bits: 8}
		m, err := s.NewMapper()
		if err != nil {
			return // a bound beyond the quantizer's range: refused before any row
		}
		want := v
		if v.Rat().Cmp(l.Rat()) < 0 {
			want = l
		} else if v.Rat().Cmp(h.Rat()) > 0 {
			want = h
		}
		var sc fixedpoint.Scratch
		q, err := m.quant[0].Quantize(want.String(), &sc)
		if err != nil {
			return
		}
		dst := make([]int64, 1)
		_, err = m.Map([]string{v.String()}, dst)
		if err != nil {
			// the unclamped value may be beyond the quantizer's range: a row error, skipped by the policy
			return
		}
		if dst[0] != q {
			t.Fatalf("[%s, %s] x=%s: mapped %d, want the quantized clamp %d", lo, hi, x, dst[0], q)
		}
		// Counted when the quantized value moved (a value within a rounding
		// step of its bound quantizes to it already).
		raw, _ := m.quant[0].Quantize(v.String(), &sc)
		if moved := raw != q; moved != (m.Clamped() == 1) {
			t.Fatalf("clamp count %d, moved %v", m.Clamped(), moved)
		}
	})
}

// TestBoundsOnly: a feature with bounds and neither center nor scale gets
// the bounds' map (so a schema of bounds only is accepted wherever a
// schema is, and hashes as the same schema with that map written out);
// half a map, or neither bounds nor a scale, is refused naming the feature.
func TestBoundsOnly(t *testing.T) {
	s, err := Parse([]byte(`{"id":"b","features":[{"name":"glucose","min":40,"max":400},{"name":"age","center":50,"scale":10}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Features[0]; f.Center.String() != "220" || f.Scale.String() != "180" {
		t.Errorf("glucose: center %s scale %s, want 220 and 180", f.Center, f.Scale)
	}
	full, err := Parse([]byte(`{"id":"b","features":[{"name":"glucose","center":220,"scale":180,"min":40,"max":400},{"name":"age","center":50,"scale":10}]}`))
	if err != nil || full.HashHex() != s.HashHex() {
		t.Errorf("the map written out hashes differently (%v)", err)
	}
	for doc, want := range map[string]string{
		`{"id":"b","features":[{"name":"x","min":1,"max":1}]}`:            `"x": bounds [1, 1]`,
		`{"id":"b","features":[{"name":"x","center":1,"min":0,"max":2}]}`: `"x" gives a center or a scale but not both`,
		`{"id":"b","features":[{"name":"x","center":1}]}`:                 `"x" has no scale`,
		`{"id":"b","features":[{"name":"x","min":0}]}`:                    `"x" has no scale`,
	} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}
