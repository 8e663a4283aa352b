package schema

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
)

// TestHashUnchangedByOptions: schemas written before the reading options
// existed keep their hash (computed by the code of commit b07bb67): unset
// options are not written.
func TestHashUnchangedByOptions(t *testing.T) {
	for path, want := range map[string]string{
		"testdata/small.schema.json":                    "1b3aa7efc121fa4aa4cdefc24575ccd858865babde7c9c3d2a06c9b5ca7db46f",
		"../job/testdata/derived/wine.schema.json":      "a233a075db418f42a0a80ae6e1d31dc516107b9f599a37d693a09fc5d54d965a",
		"../../source/testdata/corpus/wine.schema.json": "54d6eb7ef280d40d35983c563720f80cf777300578a75b8f07f349439fe9b273",
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.HashHex(); got != want {
			t.Errorf("%s: hash %s, want %s", path, got, want)
		}
	}
}

const optSchema = `{"id":"x","features":[
 {"name":"a","center":"0","scale":"1"},
 {"name":"b b","column":" b b","center":"0","scale":"1","missing":{"policy":"fill","fill":"2.5"}},
 {"name":"c=x","column":"c","category":"X","center":"0","scale":"1"},
 {"name":"c=y","column":"c","category":"y","center":"0","scale":"1"}],
 "label":"l","classes":["Yes","no"],"quant_bits":4,"clip_norm":"100",
 "missing":{"policy":"drop","values":["NA",""]},
 "categorical":[{"column":"c","categories":["x","Y"]}],
 "decimal_comma":true,"trim":true,"ignore_case":true}`

// TestOptionsRead: each option changes how a cell reads, and the hash.
func TestOptionsRead(t *testing.T) {
	s, err := Parse([]byte(optSchema))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := NewCSVRows(strings.NewReader("\ufeffa;b b;c;l\n1,5; NA ; x ;YES\n2;3,25;Y;no\nNA;1;x;no\n1;;y;no\n1;1;z;no\n1;1;x;maybe\n"), CSVOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rows.Columns(); strings.Join(got, "|") != "a|b b|c|l" {
		t.Fatalf("columns %q", got)
	}
	rd, err := s.NewRowReader(rows, true)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		row   []int64
		class int
		err   string
	}
	var got []res
	for {
		q, k, err := rd.Next()
		if err == io.EOF {
			break
		}
		r := res{row: append([]int64(nil), q...), class: k}
		if err != nil {
			r.err = err.Error()
		}
		got = append(got, r)
	}
	want := []res{
		{row: []int64{24, 40, 16, 0}, class: 0},            // 1.5, filled 2.5, x, YES
		{row: []int64{32, 52, 0, 16}, class: 1},            // 2, 3.25, Y
		{err: `line 4, column "a": missing value (the`},    // NA: drop
		{row: []int64{16, 40, 0, 16}, class: 1},            // "" in b b: per-feature fill wins
		{err: `line 6, column "c": "z" is not one of the`}, // unknown category
		{err: `line 7, column "l": "maybe": label is not`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows: %+v", len(got), got)
	}
	for i := range want {
		if want[i].err != "" {
			if !strings.HasPrefix(got[i].err, want[i].err) {
				t.Errorf("row %d: error %q, want %q…", i, got[i].err, want[i].err)
			}
			continue
		}
		if got[i].err != "" || got[i].class != want[i].class || !equal(got[i].row, want[i].row) {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if rd.MissingDropped() != 1 || rd.Filled() != 2 {
		t.Errorf("dropped %d filled %d", rd.MissingDropped(), rd.Filled())
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOptionsValidate: bad options are refused, naming what is wrong.
func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{`"policy":"drop","values"`, `"policy":"zero","values"`, `policy "zero"`},
		{`"policy":"drop","values"`, `"policy":"fill","values"`, `schema-wide missing policy cannot be "fill"`},
		{`"fill":"2.5"`, `"fill":"two"`, `fill "two" is not a decimal`},
		{`"category":"X"`, `"category":"w"`, `"w" is not a category of column "c"`},
		{`"categories":["x","Y"]`, `"categories":["x","X"]`, `appears twice`},
		{`"classes":["Yes","no"]`, `"classes":["Yes","yes"]`, `same with ignore_case`},
		{`"category":"y",`, ``, `"c=y" reads categorical column`},
		{`"column":" b b"`, `"column":"l"`, `reads the label column`},
	} {
		_, err := Parse([]byte(strings.Replace(optSchema, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: %v, want %q", c.from, c.to, err, c.want)
		}
	}
}

// TestNoPolicyHint: without a missing policy, a missing cell names the
// option to add; a decimal comma without decimal_comma names it.
func TestNoPolicyHint(t *testing.T) {
	s, err := Parse([]byte(`{"id":"x","features":[{"name":"a","center":"0","scale":"1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"a\nNA\n":      `line 2, column "a": missing value and no missing-value policy: add "missing"`,
		"a;b\n1,5;2\n": `FILE#decimal_comma=true`,
	} {
		rd, err := s.NewReader(strings.NewReader(in), false)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = rd.Next()
		var re *RowError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// TestDetectDelimiter: the most frequent of , ; tab | outside quotes.
func TestDetectDelimiter(t *testing.T) {
	for in, want := range map[string]rune{
		"a,b,c": ',', "a;b;c": ';', "a\tb": '\t', `"a;b",c`: ',', `"a,b";c;d`: ';', "abc": ',', "a|b": '|', "a,b;c": ',',
	} {
		if got := DetectDelimiter([]byte(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestInferOptions: infer on a spreadsheet export (BOM, ';', an id column,
// a categorical text column, padded mixed-case labels, NA cells) with
// exclude, categorical, trim, ignore_case and a drop policy gives clean
// names, the category list, normalised classes, and a schema under which
// the same file reads with the NA rows dropped.
func TestInferOptions(t *testing.T) {
	in := "\ufeffid ; age ;sex;outcome\n1;50;F; Yes\n2;60;m;no\n3;NA;M;YES \n4;70; f ;No\n5;40;M;no\n"
	rows, err := NewCSVRows(strings.NewReader(in), CSVOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := InferRows(rows, InferOptions{ID: "x", Label: "outcome", Exclude: []string{"id"}, Categorical: []string{"sex"},
		Missing: &Missing{Policy: MissingDrop}, Trim: true, IgnoreCase: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.FeatureNames(), ","); got != "age,sex=f,sex=m" {
		t.Errorf("features %s", got)
	}
	if got := strings.Join(s.Classes, ","); got != "no,yes" {
		t.Errorf("classes %s", got)
	}
	if len(s.Categorical) != 1 || strings.Join(s.Categorical[0].Categories, ",") != "f,m" {
		t.Errorf("categorical %+v", s.Categorical)
	}
	if s.Features[0].Center.String() != "55" {
		t.Errorf("age center %s (NA left out of the mean)", s.Features[0].Center)
	}
	back, err := Parse(s.Canonical())
	if err != nil || back.HashHex() != s.HashHex() {
		t.Fatalf("round trip: %v", err)
	}
	rows, _ = NewCSVRows(strings.NewReader(in), CSVOptions{})
	rep, err := back.Check(rows)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Used != 4 || rep.Missing != 1 || rep.Skipped != 0 || strings.Join(rep.Ignored, ",") != "id" {
		t.Errorf("report %+v", rep)
	}
	// Without the options the same file names what to do.
	rows, _ = NewCSVRows(strings.NewReader(in), CSVOptions{})
	_, err = InferRows(rows, InferOptions{ID: "x", Label: "outcome"})
	if err == nil || !strings.Contains(err.Error(), `column "id"`) && !strings.Contains(err.Error(), `column "sex"`) {
		t.Errorf("no options: %v", err)
	}
	rows, _ = NewCSVRows(strings.NewReader(in), CSVOptions{})
	_, err = InferRows(rows, InferOptions{ID: "x", Label: "outcome", Exclude: []string{"id"}})
	if err == nil || !strings.Contains(err.Error(), `line 2, column "sex"`) || !strings.Contains(err.Error(), "--categorical") {
		t.Errorf("categorical column without the option: %v", err)
	}
}

// TestDefaultsInCode: a schema built in code with a missing policy and no
// values hashes as its parsed file (with the defaults written out) and
// reads NA as missing.
func TestDefaultsInCode(t *testing.T) {
	s := &Schema{ID: "x", Features: []Feature{{Name: "a", Center: fixedpoint.MustDecimal("0"), Scale: fixedpoint.MustDecimal("1")}},
		ClipNorm: fixedpoint.MustDecimal("1"), Bits: 8, Missing: &Missing{Policy: MissingDrop}}
	back, err := Parse(s.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if back.HashHex() != s.HashHex() || len(back.Missing.Values) != len(DefaultMissingValues) || s.Missing.Values != nil {
		t.Errorf("defaults: %s", s.Canonical())
	}
	rd, err := s.NewReader(strings.NewReader("a\nNA\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rd.Next(); !errors.Is(err, ErrMissing) {
		t.Errorf("NA: %v", err)
	}
}

// isDefaultMissing answers false at once for a cell that starts like a
// number; that is right only while no default missing value does.
func TestDefaultMissingValuesDoNotStartLikeNumbers(t *testing.T) {
	for _, v := range DefaultMissingValues {
		if v != "" && strings.ContainsRune("0123456789+-.", rune(v[0])) {
			t.Errorf("default missing value %q starts like a number", v)
		}
		if !isDefaultMissing(v) || !isDefaultMissing(" "+v+" ") {
			t.Errorf("%q is not recognised", v)
		}
	}
	for _, v := range []string{"0", "-1", "+2", ".5", "1e3"} {
		if isDefaultMissing(v) {
			t.Errorf("%q read as missing", v)
		}
	}
}

// TestReadingHints: a label that differs from a class only in case or white
// space names the option to set, and a '.' under decimal_comma is refused
// (1.234: a thousands separator or a decimal point?), not read as 1.234.
func TestReadingHints(t *testing.T) {
	s, err := Parse([]byte(`{"id":"h","features":[{"name":"a","center":"0","scale":"1"}],"label":"l","classes":["yes","no"],"decimal_comma":true}`))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := NewCSVRows(strings.NewReader("a;l\n1,5;yes\n1.234;no\n2;Yes\n3; no\n"), CSVOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := s.NewRowReader(rows, true)
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for {
		_, _, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, err.Error())
		} else {
			errs = append(errs, "")
		}
	}
	want := []string{"", `a '.' in a number read with decimal commas`, `set "ignore_case": true`, `set "trim": true`}
	for i, w := range want {
		if i >= len(errs) || (w == "") != (errs[i] == "") || !strings.Contains(errs[i], w) {
			t.Errorf("row %d: %q, want %q", i, errs, w)
		}
	}
}
