package schema

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzInfer: `fedpca schema infer` reads a CSV file. Whatever it accepts is
// a valid schema whose canonical form parses to the same hash, and every row
// of the file it was inferred from maps under it.
func FuzzInfer(f *testing.F) {
	f.Add([]byte(csvSmall), "label")
	f.Add([]byte("f1,f2,f3,label\n1,2,3,a\n3,2,3,b\n5,2,3,a\n"), "label")
	f.Add([]byte("x,y\n1e300,-1e300\n-1e300,1e300\n"), "")
	f.Add([]byte("x\n0x1p-2\n"), "")
	f.Add([]byte("x,label\n1,a\n\"2\n"), "label")
	f.Add([]byte("a,a\n1,2\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, label string) {
		s, err := Infer(bytes.NewReader(data), "inferred", label)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("inferred an invalid schema: %v", err)
		}
		back, err := Parse(s.Canonical())
		if err != nil {
			t.Fatalf("inferred schema does not parse: %v\n%s", err, s.Canonical())
		}
		if back.HashHex() != s.HashHex() {
			t.Fatal("canonical form changes the hash")
		}
		rd, err := s.NewReader(bytes.NewReader(data), label != "")
		if err != nil {
			t.Fatalf("the file a schema was inferred from has no valid header for it: %v", err)
		}
		for {
			_, _, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("a row the schema was inferred from does not map: %v", err)
			}
		}
	})
}

// FuzzCSVRows: any bytes as a CSV file of any dialect. The delimiter found
// is one of the four, header names are trimmed and valid UTF-8, every row
// has as many cells as the header, and errors are *RowErrors with a line
// (reading goes on) or final.
func FuzzCSVRows(f *testing.F) {
	f.Add([]byte("\ufeff a ; b \r\n1,5;2\r\n"), byte(0))
	f.Add([]byte("a\tb\n\"x\ty\"\t2\n"), byte(0))
	f.Add([]byte("a,b\n\"1\n2\",3\n4\n"), byte(','))
	f.Add([]byte("a|b|c\n1|2|3\n"), byte('|'))
	f.Add([]byte("\"a;b\",c\n1,2\n"), byte(';'))
	f.Fuzz(func(t *testing.T, data []byte, delim byte) {
		rows, err := NewCSVRows(bytes.NewReader(data), CSVOptions{Delimiter: rune(delim)})
		if err != nil {
			return
		}
		switch rows.Delimiter() {
		case ',', ';', '\t', '|':
		default:
			t.Fatalf("delimiter %q", rows.Delimiter())
		}
		for _, c := range rows.Columns() {
			if c != strings.TrimSpace(c) || !utf8.ValidString(c) {
				t.Fatalf("header name %q", c)
			}
		}
		for {
			rec, err := rows.Next()
			if err == io.EOF {
				return
			}
			var re *RowError
			if errors.As(err, &re) {
				if re.Line < 2 {
					t.Fatalf("row error at line %d", re.Line)
				}
				continue
			}
			if err != nil {
				t.Fatalf("final error from a bytes.Reader: %v", err)
			}
			if len(rec) != len(rows.Columns()) {
				t.Fatalf("%d cells, %d columns", len(rec), len(rows.Columns()))
			}
		}
	})
}

// fuzzOptSchema has every reading option: a fill, a drop, one-hot
// categories, decimal comma, trim and ignore_case.
const fuzzOptSchema = `{"id":"x","features":[
 {"name":"a","center":"0.5","scale":"2","min":"-10","max":"10"},
 {"name":"b","center":"0","scale":"1","missing":{"policy":"fill","fill":"2.5"}},
 {"name":"c=x","column":"c","category":"x","center":"0.5","scale":"0.5"},
 {"name":"c=y","column":"c","category":"y","center":"0.5","scale":"0.5"}],
 "label":"l","classes":["Yes","no"],"quant_bits":8,"clip_norm":"3",
 "missing":{"policy":"drop"},
 "categorical":[{"column":"c","categories":["x","Y"],"missing":{"policy":"fill","fill":"x"}}],
 "decimal_comma":true,"trim":true,"ignore_case":true}`

// FuzzMissingCategorical: rows of any cells through a schema with every
// reading option. A row either maps (one-hot cells are 0 or 1 in the
// quantized domain, the row within the clip norm) or gives a *RowError
// that names a column of the source or none, with the row's line; the
// counts add up.
func FuzzMissingCategorical(f *testing.F) {
	f.Add("1,5", " NA ", "X", "yes")
	f.Add("NA", "", "", "No")
	f.Add("", "3,25", " y ", "no")
	f.Add("1e400", "1", "z", "maybe")
	f.Add("1,2,3", "null", "NaN", " YES ")
	s, err := Parse([]byte(fuzzOptSchema))
	if err != nil {
		f.Fatal(err)
	}
	cols := map[string]bool{"a": true, "b": true, "c": true, "l": true, "": true}
	f.Fuzz(func(t *testing.T, a, b, c, l string) {
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		w.Comma = ';'
		_ = w.Write([]string{"a", "b", "c", "l"})
		_ = w.Write([]string{a, b, c, l})
		w.Flush()
		rd, err := s.NewReader(&buf, true)
		if err != nil {
			t.Fatal(err)
		}
		q, k, err := rd.Next()
		if err == io.EOF {
			return // a record of one empty cell is a blank line
		}
		var re *RowError
		switch {
		case errors.As(err, &re):
			if !cols[re.Column] || re.Line != 2 {
				t.Fatalf("row error %v", re)
			}
			if errors.Is(err, ErrMissing) != (rd.MissingDropped() == 1) {
				t.Fatalf("drop counted %d for %v", rd.MissingDropped(), err)
			}
			return
		case err != nil:
			t.Fatal(err)
		}
		if k != 0 && k != 1 {
			t.Fatalf("class %d", k)
		}
		if n, _ := rd.Rows(); n != 1 {
			t.Fatalf("rows %d", n)
		}
		// One-hot: (v - 0.5)/0.5 is -1 or 1 before the clip; after it the
		// two indicators have opposite signs.
		if (q[2] > 0) == (q[3] > 0) {
			t.Fatalf("one-hot cells %d %d", q[2], q[3])
		}
	})
}

// csvReference reads like CSVRows with encoding/csv alone (as CSVRows did
// before its quote-free fast path): the records, their lines and errors.
// csvReference reads the rows after the header with encoding/csv alone,
// written as csvTrace writes CSVRows's reading; ok is false when
// encoding/csv meets a quote error (where CSVRows skips a line and reads
// on).
func csvReference(data []byte, delim rune) (trace []string, ok bool) {
	rows, err := NewCSVRows(bytes.NewReader(data), CSVOptions{Delimiter: delim})
	if err != nil {
		return []string{"header: " + err.Error()}, true
	}
	cr := csv.NewReader(rows.br)
	cr.Comma, cr.FieldsPerRecord = rows.comma, -1
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return trace, true
		}
		if err != nil {
			return trace, false
		}
		line, _ := cr.FieldPos(0)
		rows.line = rows.read + line
		if _, err := rows.check(rec); err != nil {
			trace = append(trace, "error: "+err.Error())
			continue
		}
		trace = append(trace, fmt.Sprintf("line %d: %q", rows.line, rec))
	}
}

func csvTrace(rows *CSVRows) []string {
	var out []string
	for {
		rec, err := rows.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			out = append(out, "error: "+err.Error())
			var re *RowError
			if !errors.As(err, &re) {
				return out
			}
			continue
		}
		out = append(out, fmt.Sprintf("line %d: %q", rows.Line(), rec))
	}
}

// FuzzCSVRowsFastPath: CSVRows reads every file that encoding/csv reads
// without a quote error exactly as encoding/csv does: the same records,
// lines and errors (its quote-free fast path, its records of several
// lines).
func FuzzCSVRowsFastPath(f *testing.F) {
	for _, s := range []string{
		"a,b\n1,2\n3,4\n", "a,b\r\n1,2\r\n\r\n3,4\r", "a,b\n1,2\n\n\n3\n4,5,6\n", "a,b\n1,\"2\n3\",x\n5,6\n",
		"a,b\n1,2\r\r\n3,4", "\"a\nb\",c\n1,2\n3,4\n", "a;b\n1,5;2\n\"x\";y\n", "a,b\n1,2\n3,\"4\n", "a,b\n1\r2,3\n",
		"a,b\n" + strings.Repeat("x", 70000) + ",1\n2,3\n", "a,b\n\r\n\r", "a\tb\n1\t2\n\"q\"\"\"\t3\n4\t5\n",
	} {
		f.Add([]byte(s), byte(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, delim byte) {
		rows, err := NewCSVRows(bytes.NewReader(data), CSVOptions{Delimiter: rune(delim)})
		if err != nil {
			return
		}
		got := csvTrace(rows)
		want, ok := csvReference(data, rune(delim))
		if ok && !slices.Equal(got, want) {
			t.Fatalf("%q:\nfast path %q\nencoding/csv %q", data, got, want)
		}
	})
}
