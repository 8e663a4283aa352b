package source_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/source"
	"github.com/fedpca/fedpca/source/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goleak: goroutines left after the tests:", err)
		code = 1
	}
	os.Exit(code)
}

// packed reads rows through ReadRows for a DCA layout and returns the exact
// packed statistics.
func packed(t *testing.T, sch *schema.Schema, rows schema.Rows) ([]int64, job.ReadReport) {
	t.Helper()
	spec := &job.Spec{Analysis: job.Scatter, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}
	acc, rep, err := job.ReadRows(spec, sch, rows)
	if err != nil {
		t.Fatal(err)
	}
	return acc.Pack(), rep
}

func wine(t *testing.T) ([]byte, *schema.Schema) {
	t.Helper()
	data, err := datasets.CSV("wine")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Infer(bytes.NewReader(data), "wine", "label")
	if err != nil {
		t.Fatal(err)
	}
	return data, sch
}

// TestPostgresEqualsCSV: wine loaded into a real PostgreSQL table (numeric
// columns, by COPY) and read through a server-side cursor, by table= and by
// query=, with small FETCH batches, gives the same integers as the CSV.
func TestPostgresEqualsCSV(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	data, sch := wine(t)
	conn, err := srv.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if n, err := pgtest.LoadCSV(ctx, conn, "wine", data); err != nil || n != 178 {
		t.Fatalf("load: %d rows, %v", n, err)
	}
	csvRows, err := source.NewCSV(bytes.NewReader(data), schema.CSVOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := packed(t, sch, csvRows)
	qf := filepath.Join(t.TempDir(), "q.sql")
	os.WriteFile(qf, []byte("SELECT * FROM wine WHERE magnesium > 0;\n"), 0o600)
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte(pgtest.Password+"\n"), 0o600)
	for _, spec := range []string{
		srv.URL("table=wine"),
		srv.URL("table=public.wine&fetch=7"),
		srv.URL("query=" + strings.ReplaceAll("SELECT label, alcohol, malic_acid, ash, alcalinity_of_ash, magnesium, total_phenols, flavanoids, nonflavanoid_phenols, proanthocyanins, color_intensity, hue, od280_od315_of_diluted_wines, proline, 1 AS extra FROM wine", " ", "%20")),
		srv.URL("query_file=" + qf + "&fetch=1"),
		srv.URLNoPassword("table=wine&password_file=" + pw),
	} {
		rows, err := source.Open(ctx, spec)
		if err != nil {
			t.Fatalf("%s: %v", source.Redact(spec), err)
		}
		got, rep := packed(t, sch, rows)
		rows.Close()
		if rep.Rows != 178 || !slices.Equal(got, want) {
			t.Errorf("%s: %d rows, statistics differ from the CSV's", source.Redact(spec), rep.Rows)
		}
	}
	t.Setenv("PGPASSWORD", pgtest.Password)
	rows, err := source.Open(ctx, srv.URLNoPassword("table=wine"))
	if err != nil {
		t.Fatalf("PGPASSWORD: %v", err)
	}
	got, _ := packed(t, sch, rows)
	rows.Close()
	if !slices.Equal(got, want) {
		t.Error("PGPASSWORD: statistics differ")
	}
}

// TestPostgresErrors: a wrong password, a missing table, a missing column;
// no error quotes the password.
func TestPostgresErrors(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	data, sch := wine(t)
	conn, err := srv.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := pgtest.LoadCSV(ctx, conn, "wine2", data); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(srv.URL("table=wine2"), pgtest.Password, "wrong-pass-123", 1)
	_, err = source.Open(ctx, bad)
	if err == nil || strings.Contains(err.Error(), "wrong-pass-123") {
		t.Errorf("wrong password: %v", err)
	}
	_, err = source.Open(ctx, srv.URL("table=nope"))
	if err == nil || !strings.Contains(err.Error(), "nope") || strings.Contains(err.Error(), pgtest.Password) {
		t.Errorf("missing table: %v", err)
	}
	rows, err := source.Open(ctx, srv.URL("query=SELECT%20alcohol%20FROM%20wine2"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	_, err = sch.NewRowReader(rows, true)
	if err == nil || !strings.Contains(err.Error(), `column "malic_acid": feature missing from the header`) {
		t.Errorf("missing column: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?table=t":         "postgres://u:xxxxx@h:5432/db?table=t",
		"postgres://u@h/db?password=pw&table=t":     "postgres://u@h/db?password=xxxxx&table=t",
		"data/x.csv":                                "data/x.csv",
		"postgres://u:p%40ss@h/db?query=SELECT%201": "postgres://u:xxxxx@h/db?query=SELECT%201",
	} {
		if got := source.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGzip: a gzip file reads the same, by magic bytes whatever its name.
func TestGzip(t *testing.T) {
	data, sch := wine(t)
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(data)
	w.Close()
	dir := t.TempDir()
	for _, name := range []string{"wine.csv.gz", "wine.csv"} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, z.Bytes(), 0o600)
		rows, err := source.Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		got, rep := packed(t, sch, rows)
		rows.Close()
		plain, _ := source.NewCSV(bytes.NewReader(data), schema.CSVOptions{})
		want, _ := packed(t, sch, plain)
		if rep.Rows != 178 || !slices.Equal(got, want) {
			t.Errorf("%s: differs", name)
		}
	}
}

// TestGzipNameNotGzip: a .gz file that is not gzip is refused saying so.
func TestGzipNameNotGzip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.csv.gz")
	os.WriteFile(p, []byte("a,b\n1,2\n"), 0o600)
	_, err := source.Open(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "not gzip") {
		t.Errorf("%v", err)
	}
	// Options after '#': the delimiter given.
	p2 := filepath.Join(t.TempDir(), "y.csv")
	os.WriteFile(p2, []byte("a;b,c\n1;2,3\n"), 0o600)
	r, err := source.Open(context.Background(), p2+"#delimiter=semicolon")
	if err != nil || strings.Join(r.Columns(), "|") != "a|b,c" {
		t.Errorf("delimiter option: %v %v", err, r)
	}
	r.Close()
}

// TestDecimalCommaPerSource (issue 43): one hospital exports with ';' and
// decimal commas, the others with ',' and points, all under one schema
// without decimal_comma (so its hash is theirs too). Given as
// FILE#delimiter=;&decimal_comma=true the export reads the same integers as
// the plain file; without the option each comma-decimal row is unreadable
// and the error names the source option; decimal commas with ',' as the
// delimiter are refused; the schema-wide option still reads it.
func TestDecimalCommaPerSource(t *testing.T) {
	data, sch := wine(t)
	plain, _ := source.NewCSV(bytes.NewReader(data), schema.CSVOptions{})
	want, _ := packed(t, sch, plain)
	comma := strings.ReplaceAll(strings.ReplaceAll(string(data), ",", ";"), ".", ",")
	p := filepath.Join(t.TempDir(), "hospital-c.csv")
	if err := os.WriteFile(p, []byte(comma), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{p + "#delimiter=;&decimal_comma=true", p + "#decimal_comma=true", "file://" + p + "?decimal_comma=1&sep=%3B"} {
		rows, err := source.Open(context.Background(), spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		got, rep := packed(t, sch, rows)
		rows.Close()
		if rep.Rows != 178 || rep.Skipped != 0 || !slices.Equal(got, want) {
			t.Errorf("%s: %d rows, %d skipped, same statistics %v", spec, rep.Rows, rep.Skipped, slices.Equal(got, want))
		}
	}
	// Without the option: every row with a decimal comma is unreadable,
	// and the error says which option to give.
	rows, err := source.Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	_, rep := packed(t, sch, rows)
	rows.Close()
	if rep.Rows != 0 || len(rep.Examples) == 0 || !strings.Contains(rep.Examples[0], "FILE#decimal_comma=true") {
		t.Errorf("without decimal_comma: %d rows read, examples %q", rep.Rows, rep.Examples)
	}
	os.WriteFile(filepath.Join(filepath.Dir(p), "x.csv"), data, 0o600)
	if _, err := source.Open(context.Background(), filepath.Join(filepath.Dir(p), "x.csv")+"#delimiter=,&decimal_comma=true"); err == nil || !strings.Contains(err.Error(), "decimal commas with ','") {
		t.Errorf("decimal commas with ',' as the delimiter: %v", err)
	}
	if _, _, err := source.ParseCSVSpec(p + "#decimal_comma=yes please"); err == nil {
		t.Error("decimal_comma=yes please accepted")
	}
	// schema infer reads the format too, and writes nothing about it.
	rows, _ = source.Open(context.Background(), p+"#decimal_comma=true")
	inferred, err := schema.InferRows(rows, schema.InferOptions{ID: "wine", Label: "label"})
	rows.Close()
	if err != nil || inferred.HashHex() != sch.HashHex() {
		t.Errorf("infer on the decimal-comma export: %v, hash %s, want the plain file's %s", err, inferred.HashHex(), sch.HashHex())
	}
	// The schema-wide option of existing schemas reads every source so.
	old := *sch
	old.DecimalComma = true
	rows, _ = source.Open(context.Background(), p)
	got, rep := packed(t, &old, rows)
	rows.Close()
	if rep.Rows != 178 || !slices.Equal(got, want) || old.HashHex() == sch.HashHex() {
		t.Errorf("schema-wide decimal_comma: %d rows, same statistics %v", rep.Rows, slices.Equal(got, want))
	}
}

// TestCSVQuoteErrorSkipsOneLine: a line with an unbalanced quote is
// skipped as unreadable, alone: the 1,000 good rows around it are all used
// (it used to swallow the rest of the file: 1 row used). So is a line with a
// stray quote in an unquoted field, or quotes that make its fields too few;
// a quoted field over two lines is one row.
func TestCSVQuoteErrorSkipsOneLine(t *testing.T) {
	sch, err := schema.Parse([]byte(`{"id":"q","features":[{"name":"a","center":"0","scale":"1"},{"name":"b","center":"0","scale":"1"}],"label":"y","classes":["p","q"]}`))
	// A note column the schema does not read, holding a line break.
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`0.5,"0.25,p`, `0.5,0.2"5,p`, `"0.5,0.25",p`, `0.5,0.25,"p`} {
		var b strings.Builder
		b.WriteString("a,b,y,note\n")
		for i := range 1000 {
			if i == 300 {
				b.WriteString(bad + ",\n")
			}
			if i == 600 {
				b.WriteString("0.1,0.2,\"p\",\n0.3,\"0.4\",q,\"two\nlines\"\n") // quoted fields, one over two lines: 2 rows
			}
			fmt.Fprintf(&b, "%d.5,0.25,%s,\n", i%3, []string{"p", "q"}[i%2])
		}
		rows, err := source.NewCSV(strings.NewReader(b.String()), schema.CSVOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, rep := packed(t, sch, rows)
		if rep.Rows != 1002 || rep.Skipped != 1 || len(rep.Examples) != 1 || !strings.Contains(rep.Examples[0], "line 302") {
			t.Errorf("%q among 1,002 good rows: %d used, %d skipped %q", bad, rep.Rows, rep.Skipped, rep.Examples)
		}
	}
}

// TestPostgresBadValuesSkipRows: a real PostgreSQL table whose feature
// column is text and holds values that are not numbers. Read by table= (or
// by a query that selects the column itself), every value goes to the
// schema as text and a row it cannot convert is skipped and counted: the
// 1,000 good rows are all used. A query that converts the column itself
// (a cast) would stop part-way on the first bad value, so whether the
// owner could read its rows would depend on a row: it is refused before any
// row is read, with or without bad values, naming the column.
func TestPostgresBadValuesSkipRows(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	conn, err := srv.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, tbl := range []string{"mixed", "clean"} {
		if _, err := conn.Exec(ctx, "CREATE TABLE "+tbl+" (a text, b double precision, y text)"); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := range 1000 {
			a := fmt.Sprintf("%d.5", i%3)
			if tbl == "mixed" && i%250 == 100 {
				a, bad = []string{"n/a", "1,5", "--", "x9"}[bad], bad+1
			}
			if _, err := conn.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1, $2, $3)", a, 0.25, []string{"p", "q"}[i%2]); err != nil {
				t.Fatal(err)
			}
		}
	}
	sch, err := schema.Parse([]byte(`{"id":"m","features":[{"name":"a","center":"0","scale":"1"},{"name":"b","center":"0","scale":"1"}],"label":"y","classes":["p","q"]}`))
	if err != nil {
		t.Fatal(err)
	}
	read := func(spec string) (job.ReadReport, error) {
		rows, err := source.Open(ctx, spec)
		if err != nil {
			return job.ReadReport{}, err
		}
		defer rows.Close()
		_, rep, err := job.ReadRows(&job.Spec{Analysis: job.Scatter, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}, sch, rows)
		return rep, err
	}
	for _, spec := range []string{srv.URL("table=mixed&fetch=64"), srv.URL("query=" + url.QueryEscape("SELECT a, b, y FROM mixed WHERE b > 0"))} {
		rep, err := read(spec)
		if err != nil || rep.Rows != 996 || rep.Skipped != 4 {
			t.Errorf("%s: %d rows used, %d skipped (%v)", source.Redact(spec), rep.Rows, rep.Skipped, err)
		}
	}
	for _, tbl := range []string{"mixed", "clean"} {
		for q, col := range map[string]string{"SELECT a::numeric AS a, b, y FROM " + tbl: "a", "SELECT a, b * 2 AS b, y FROM " + tbl: "b", "SELECT a, b, 'p' AS y FROM " + tbl: "y"} {
			_, err := read(srv.URL("query=" + url.QueryEscape(q)))
			var re *schema.RowError
			if !errors.As(err, &re) || re.Line != 1 || re.Column != col || !strings.Contains(err.Error(), "computed by the query") {
				t.Errorf("%s: %v", q, err)
			}
		}
	}
}
