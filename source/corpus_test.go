package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/source"
)

// corpusEntry is one line of testdata/corpus/manifest.json (made by gen.py).
type corpusEntry struct {
	File, Schema, Expect, Note string
	Clean                      string `json:"clean"`
	CleanSchema                string `json:"clean_schema"`
	RowsLeftOut                int64  `json:"rows_left_out"`
	Line                       int
	Column                     string
	Contains                   string
}

func loadCorpus(t *testing.T) []corpusEntry {
	t.Helper()
	b, err := os.ReadFile("testdata/corpus/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m []corpusEntry
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func corpusSchema(t *testing.T, name string) *schema.Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/corpus", name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := schema.Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func openCorpus(t *testing.T, name string) source.Rows {
	t.Helper()
	r, err := source.Open(context.Background(), filepath.Join("testdata/corpus", name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestCorpus: every real-world variant of wine in testdata/corpus reads,
// with its schema's options, to exactly the integers of the clean file, or
// is refused with an error that names the line, the column and what to
// change.
func TestCorpus(t *testing.T) {
	for _, e := range loadCorpus(t) {
		t.Run(e.File+"/"+e.Schema, func(t *testing.T) {
			sch := corpusSchema(t, e.Schema)
			switch e.Expect {
			case "equal", "equal_to":
				clean, cleanSchema := "clean.csv", "wine.schema.json"
				if e.Expect == "equal_to" {
					clean, cleanSchema = e.Clean, e.CleanSchema
				}
				want, wrep := packed(t, corpusSchema(t, cleanSchema), openCorpus(t, clean))
				got, rep := packed(t, sch, openCorpus(t, e.File))
				if rep.Rows != wrep.Rows || rep.Skipped != 0 || rep.Missing != e.RowsLeftOut || !slices.Equal(got, want) {
					t.Errorf("%s (%s): report %+v; statistics equal to the clean file's: %v", e.File, e.Note, rep, slices.Equal(got, want))
				}
				if e.Schema != "wine.schema.json" && sch.HashHex() == corpusSchema(t, "wine.schema.json").HashHex() {
					t.Errorf("%s: the options do not change the schema hash", e.Schema)
				}
			case "refused":
				re := firstRowError(t, sch, openCorpus(t, e.File))
				if re == nil {
					t.Fatalf("%s with %s (%s): read without an error", e.File, e.Schema, e.Note)
				}
				if re.Line != e.Line || re.Column != e.Column || !strings.Contains(re.Error(), e.Contains) {
					t.Errorf("%s with %s: error %q, want line %d, column %q, containing %q", e.File, e.Schema, re, e.Line, e.Column, e.Contains)
				}
				t.Logf("%s with %s: %v", e.File, e.Schema, re)
			default:
				t.Fatalf("expect %q", e.Expect)
			}
		})
	}
}

// firstRowError returns the first error reading the rows gives: the
// header's, or the first skipped row's.
func firstRowError(t *testing.T, sch *schema.Schema, rows schema.Rows) *schema.RowError {
	t.Helper()
	var re *schema.RowError
	rd, err := sch.NewRowReader(rows, true)
	if err != nil {
		if !errors.As(err, &re) {
			t.Fatalf("not a RowError: %v", err)
		}
		return re
	}
	for {
		_, _, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if !errors.As(err, &re) {
				t.Fatalf("not a RowError: %v", err)
			}
			return re
		}
	}
}
