package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/source/pgtest"
)

// corpusDir is the test corpus of real-world CSV variants (source/testdata).
const corpusDir = "../../source/testdata/corpus"

// TestOwnerCheckCorpus: `fedpca owner check` on every corpus file with its
// schema prints the local report with the rows used; a refused pairing
// either fails naming the column (a header that does not fit) or reports
// the skipped row with its line, column and what to change.
func TestOwnerCheckCorpus(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(corpusDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m []struct {
		File, Schema, Expect, Column, Contains string
		Line                                   int
		RowsLeftOut                            int `json:"rows_left_out"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, e := range m {
		arg := filepath.Join(corpusDir, e.Schema) + "=" + filepath.Join(corpusDir, e.File)
		out, err := exec.Command(binary, "owner", "check", "--dataset", arg).CombinedOutput()
		s := string(out)
		switch e.Expect {
		case "equal", "equal_to":
			if err != nil || !strings.Contains(s, "rows used          178\n") || !strings.Contains(s, "rows skipped       0") {
				t.Errorf("owner check %s: %v\n%s", arg, err, s)
			}
		case "refused":
			if e.Line == 1 {
				if err == nil || !strings.Contains(s, `column "`+e.Column+`"`) || !strings.Contains(s, e.Contains) {
					t.Errorf("owner check %s: want a failure naming column %q and %q: %v\n%s", arg, e.Column, e.Contains, err, s)
				}
				continue
			}
			// A source none of whose rows is usable is an error too.
			none := strings.Contains(s, "rows used          0\n")
			if (err != nil) != none || none && !strings.Contains(s, "no row of the source is usable") ||
				!strings.Contains(s, "skipped: line ") || !strings.Contains(s, e.Contains) {
				t.Errorf("owner check %s: want the skipped row reported with %q: %v\n%s", arg, e.Contains, err, s)
			}
		}
	}
}

// TestOwnerServeRefusesMismatch: `owner serve` reads its source at start,
// logs the local report, and exits naming the column and what differs when
// the source does not fit the schema (before it contacts any proxy).
func TestOwnerServeRefusesMismatch(t *testing.T) {
	d := newDeployment(t, 1, 1, 1)
	o := d.owners[0]
	serve := func(schemaFile, src string) *exec.Cmd {
		return exec.Command(binary, append([]string{"owner", "serve", "--certs", d.certs("owner", o), "--state", filepath.Join(d.dir, "state", o),
			"--proxy", d.proxy, "--dataset", filepath.Join(corpusDir, schemaFile) + "=" + filepath.Join(corpusDir, src), "--poll", "200ms"}, d.committee()...)...)
	}
	out, err := serve("decimal_comma.schema.json", "excel_export.csv").CombinedOutput()
	want := `does not fit schema wine: line 1, column "malic_acid": feature missing from the header: the header has "Malic Acid"; rename that column to "malic_acid" or set the feature's "column" to "Malic Acid"`
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("owner serve on a mismatched source: %v, want a refusal %q:\n%s", err, want, out)
	}
	// A source that fits starts: the check is logged, then it runs.
	cmd := serve("excel_export.schema.json", "excel_export.csv")
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("owner serve on a fitting source exited: %v\n%s", err, buf.String())
	case <-time.After(3 * time.Second):
	}
	_ = cmd.Process.Signal(os.Interrupt)
	<-done
	if !strings.Contains(buf.String(), "dataset checked") || !strings.Contains(buf.String(), "used=178") {
		t.Errorf("no check report in the log:\n%s", buf.String())
	}
}

// TestReadmeSchemaOptions: the README's schema example parses and reads a
// file with those columns as it says.
func TestReadmeSchemaOptions(t *testing.T) {
	sch, err := schema.Parse([]byte(readmeBlock(t, "<!-- schema-options-example -->")))
	if err != nil {
		t.Fatal(err)
	}
	in := "id;age;Cholesterol (mg/dl);sex;outcome\n1;60;;f;Yes \n2;NA;200;M;no\n3;50;250;X;no\n"
	rows, err := schema.NewCSVRows(strings.NewReader(in), schema.CSVOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sch.Check(rows)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 3 || rep.Used != 1 || rep.Filled != 1 || rep.Missing != 1 || rep.Skipped != 1 || rep.SkippedBy["sex"] != 1 {
		t.Errorf("report %+v", rep)
	}
}

// TestSchemaInferOptions: `schema infer` on a corpus file with
// --categorical, --trim, --ignore-case warns on stderr that it leaks, and
// writes a schema under which `owner check` reads the file.
func TestSchemaInferOptions(t *testing.T) {
	cmd := exec.Command(binary, "schema", "infer", "--data", filepath.Join(corpusDir, "categorical.csv"), "--id", "wine",
		"--categorical", "cultivar", "--trim", "--ignore-case", "--exclude", "hue,proline")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "LEAKS") || !strings.Contains(stderr.String(), "fedpca user profile") {
		t.Errorf("no leak warning on stderr:\n%s", stderr.String())
	}
	sch, err := schema.Parse([]byte(stdout.String()))
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Join(sch.FeatureNames(), ",")
	if !strings.Contains(names, "cultivar=barbera,cultivar=barolo,cultivar=grignolino") || strings.Contains(names, "hue") {
		t.Errorf("features %s", names)
	}
	p := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(p, []byte(stdout.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "owner", "check", "--dataset", p+"="+filepath.Join(corpusDir, "categorical.csv")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "rows used          178") {
		t.Errorf("owner check with the inferred schema: %v\n%s", err, out)
	}
	// The first complaint: a BOM no longer names a feature "\ufeffalcohol".
	out, err = exec.Command(binary, "schema", "infer", "--data", filepath.Join(corpusDir, "bom.csv"), "--id", "wine").Output()
	if err != nil || !strings.HasPrefix(string(out), `{"id":"wine","features":[{"name":"alcohol"`) {
		t.Errorf("infer on a BOM file: %v\n%.200s", err, out)
	}
}

// TestSchemaGenotypes: `schema genotypes` writes the schema of a PLINK
// fileset standardised by a panel's frequencies (from the panel's fileset
// or its .frq: the same features) and the panel's start matrix, under which
// `owner check` reads the fileset; a missing reference is named.
func TestSchemaGenotypes(t *testing.T) {
	plink := filepath.Join("..", "..", "source", "testdata", "plink")
	dir := t.TempDir()
	start := filepath.Join(dir, "start.csv")
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(binary, append([]string{"schema", "genotypes", "--id", "fixture", "--bim", filepath.Join(plink, "fixture.bim")}, args...)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, errOut, err := run("--panel", filepath.Join(plink, "fixture"), "--start", start, "--columns", "4")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	sch, err := schema.Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	fromFrq, errOut, err := run("--frq", filepath.Join(plink, "fixture.frq"))
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if frq, err := schema.Parse([]byte(fromFrq)); err != nil || strings.Join(frq.FeatureNames(), ",") != strings.Join(sch.FeatureNames(), ",") {
		t.Errorf("from the .frq: %v, features %v; from the panel %v", err, frq.FeatureNames(), sch.FeatureNames())
	}
	b, err := os.ReadFile(start)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != sch.D() || len(strings.Split(lines[0], ",")) != 4 {
		t.Errorf("start: %d lines of %d numbers, want %d of 4", len(lines), len(strings.Split(lines[0], ",")), sch.D())
	}
	p := filepath.Join(dir, "s.json")
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	check, err := exec.Command(binary, "owner", "check", "--dataset", p+"=plink://"+filepath.Join(plink, "fixture")).CombinedOutput()
	if err != nil || !strings.Contains(string(check), "rows used          30") {
		t.Errorf("owner check of the fileset: %v\n%s", err, check)
	}
	if _, errOut, err := run(); err == nil || !strings.Contains(errOut, "give a reference panel's fileset or its .frq") {
		t.Errorf("no reference: %v\n%s", err, errOut)
	}
}

// pgWine starts a PostgreSQL server for the test (skipping it when none
// starts) with the corpus's clean wine rows in table wine.
func pgWine(t *testing.T) *pgtest.Server {
	t.Helper()
	srv := pgtest.Start(t)
	ctx := context.Background()
	conn, err := srv.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	data, err := os.ReadFile(filepath.Join(corpusDir, "clean.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgtest.LoadCSV(ctx, conn, "wine", data); err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestOwnerCheckPostgres: `owner check` reads a real PostgreSQL table (the
// corpus's clean wine) with the password from PGPASSWORD or in the URL,
// and never prints the password, not even in an error.
func TestOwnerCheckPostgres(t *testing.T) {
	srv := pgWine(t)
	sch := filepath.Join(corpusDir, "wine.schema.json")
	cmd := exec.Command(binary, "owner", "check", "--dataset", sch+"="+srv.URLNoPassword("table=wine"))
	cmd.Env = append(os.Environ(), "PGPASSWORD="+pgtest.Password)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "rows used          178") {
		t.Errorf("owner check (PGPASSWORD): %v\n%s", err, out)
	}
	for _, u := range []string{srv.URL("table=wine"), srv.URL("table=no_such_table")} {
		out, err := exec.Command(binary, "owner", "check", "--dataset", sch+"="+u).CombinedOutput()
		if strings.Contains(string(out), pgtest.Password) {
			t.Errorf("owner check printed the password:\n%s", out)
		}
		if strings.Contains(u, "no_such") != (err != nil) {
			t.Errorf("owner check %s: %v\n%s", strings.ReplaceAll(u, pgtest.Password, "xxxxx"), err, out)
		}
		if err != nil && !strings.Contains(string(out), "no_such_table") {
			t.Errorf("the error does not name the table:\n%s", out)
		}
	}
}
