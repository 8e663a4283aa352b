package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/source/pgtest"
	"github.com/fedpca/fedpca/transport"
)

// Tests of what a newcomer meets in a real deployment of processes
// (issue 30): failures are told at once and in one line, results say what
// they are worth, nothing is overwritten.

// TestUnreachableFailsFast: user run, user status and user jobs against an
// address nobody listens on fail within seconds with one line naming the
// address, and no WARN line per retry.
func TestUnreachableFailsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a closed port")
	}
	d := newDeployment(t, 2, 3, 2) // certificates and data; nothing started
	closed := freePort(t)
	keys := filepath.Join(d.dir, "keys")
	if out, err := run(t, "user", "keygen", "--keys", keys); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	conn := []string{"--certs", d.certs("user", "alice"), "--proxy", closed}
	for _, args := range [][]string{
		append(append(append([]string{"user", "run"}, conn...), "--keys", keys, "--schema", d.schema, "--owners", strings.Join(d.owners, ","), "--epsilon", "1"), d.committee()...),
		append([]string{"user", "status"}, append(conn, "0123")...),
		append([]string{"user", "jobs"}, conn...),
	} {
		start := time.Now()
		out, err := exec.Command(binary, args...).CombinedOutput()
		took := time.Since(start)
		text := strings.TrimSpace(string(out))
		t.Logf("%s (%s):\n%s", strings.Join(args[:2], " "), took.Round(time.Millisecond), text)
		if err == nil || took > 15*time.Second {
			t.Fatalf("%s: %v after %s", args[1], err, took)
		}
		if strings.Contains(text, "WARN") || strings.Count(text, "\n") > 0 ||
			!strings.Contains(text, "cannot connect to the proxy at "+closed+" (connection refused)") {
			t.Fatalf("%s: not one line naming the address:\n%s", args[1], text)
		}
	}
}

// checkQualityPrinted: a command that wrote res printed what it is worth:
// the noise figures and every warning of result.json's quality.
func checkQualityPrinted(t *testing.T, what, out string, res *job.Result) {
	t.Helper()
	if res.Quality == nil {
		t.Fatalf("%s: the result has no quality (a noised job should)", what)
	}
	if !strings.Contains(out, "noise in the result: noisy n ") {
		t.Errorf("%s printed no noise figures:\n%s", what, out)
	}
	for _, w := range res.Quality.Warnings {
		if !strings.Contains(out, "warning: "+w+"\n") {
			t.Errorf("%s did not print the result's warning %q:\n%s", what, w, out)
		}
	}
}

// TestNoOverwrite: every command that writes files refuses, before any
// work, to replace one that exists, naming it and --force; with --force it
// replaces them. A failed owner project leaves no output file.
func TestNoOverwrite(t *testing.T) {
	dir := exported(t)
	refuses := func(args ...string) {
		t.Helper()
		out, err := fedpca(t, dir, args...)
		if err == nil || !strings.Contains(out, "exist") || !strings.Contains(out, "--force") {
			t.Fatalf("%s over existing files: %v\n%s", strings.Join(args[:2], " "), err, out)
		}
		if out, err := fedpca(t, dir, append(args, "--force")...); err != nil {
			t.Fatalf("%s --force: %v\n%s", strings.Join(args[:2], " "), err, out)
		}
	}
	refuses("dataset", "export", "wdbc", "--owners", "hospital-a,hospital-b", "--out", "data")
	ref := []string{"reference", "--schema", "data/schema.json", "--data", "data/all.csv", "--out", "ref"}
	if out, err := fedpca(t, dir, ref...); err != nil {
		t.Fatalf("reference: %v\n%s", err, out)
	}
	refuses(ref...)
	cov := []string{"user", "analyze", "--result", "ref/result.json", "--analysis", "covariance", "--out", "cov"}
	if out, err := fedpca(t, dir, cov...); err != nil {
		t.Fatalf("user analyze: %v\n%s", err, out)
	}
	refuses(cov...)
	pca := []string{"user", "analyze", "--result", "ref/result.json", "--analysis", "pca", "-k", "2", "--out", "pca2"}
	if out, err := fedpca(t, dir, pca...); err != nil {
		t.Fatalf("user analyze: %v\n%s", err, out)
	}
	refuses(pca...)
	proj := []string{"owner", "project", "--result", "ref/result.json", "--schema", "data/schema.json", "--data", "data/hospital-a.csv", "--out", "p.csv"}
	if out, err := fedpca(t, dir, proj...); err != nil {
		t.Fatalf("owner project: %v\n%s", err, out)
	}
	refuses(proj...)
	// Figures: an earlier run's are not replaced either (user analyze and
	// owner project draw the same result's scree plot into one directory).
	fig := []string{"user", "analyze", "--result", "ref/result.json", "--analysis", "pca", "-k", "2", "--out", "pca2b", "--plots", "figs"}
	if out, err := fedpca(t, dir, fig...); err != nil {
		t.Fatalf("user analyze --plots: %v\n%s", err, out)
	}
	refuses(append(fig[:len(fig)-3:len(fig)-3], "pca2c", "--plots", "figs")...)
	refuses(append(proj[:len(proj)-1:len(proj)-1], "p2.csv", "--plots", "figs")...)
	// user run refuses before it calls anyone (the proxy here does not exist).
	args := userRun("--owners", "hospital-a", "--out", "ref")
	if out, err := fedpca(t, dir, args...); err == nil || !strings.Contains(out, filepath.Join("ref", "result.json")+" and 5 more output files exist") {
		t.Fatalf("user run over an earlier result: %v\n%s", err, out)
	}
}

// TestJobFailsFast: a job fails as soon as it can no longer succeed, and
// every owner's reservation for it goes back: when it needs an owner the
// proxy never heard from (a typo in --owners: named, with the owner it may
// mean), after the proxy's --unknown-owner-grace, and when so many owners
// declined that the others cannot make the number needed. user run returns
// then, not at the deadline (10 minutes).
func TestJobFailsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeployment(t, 3, 1, 1)
	d.startCSP(t, 0)
	d.startProxy(t, "--unknown-owner-grace", "4s")
	a := d.startOwner(t, d.owners[0], "--budget-epsilon", "0.5") // declines a job at epsilon 1
	b := d.startOwner(t, d.owners[1])
	d.startOwner(t, d.owners[2])
	// Every owner has called the proxy once its watch runs.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// An owner started with a wrong pin (another key for csp-1) says so on
	// its own log at once, naming the key it pinned and the member's.
	_, memberKey, err := transport.NodeFingerprint(d.certs("csp", "csp-1"))
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Repeat("0f", 32)
	started := time.Now()
	w := start(t, "wrong-pin", "owner", "serve", "--certs", d.certs("owner", d.owners[2]), "--state", filepath.Join(d.dir, "state", "wrong-pin"),
		"--proxy", d.proxy, "--dataset", d.schema+"="+d.csvs[d.owners[2]], "--log-json", "--committee", "csp-1="+wrong,
		"--committee-min-members", "1", "--committee-min-threshold", "1")
	var report map[string]any
	for report == nil && time.Since(started) < 5*time.Second {
		time.Sleep(50 * time.Millisecond)
		report = w.find("THIS OWNER'S COMMITTEE PIN DOES NOT MATCH")
	}
	if report == nil || !strings.Contains(fmt.Sprint(report["error"]), "presents key "+memberKey+", not the pinned key "+wrong) {
		t.Fatalf("an owner with a wrong pin, %s after it started: %v", time.Since(started).Round(time.Millisecond), report)
	}
	t.Logf("the owner reported its wrong pin %s after it started: %v", time.Since(started).Round(time.Millisecond), report["error"])
	w.stop()
	// A typo: the user's own roster knows no such owner, so no job is made,
	// and the error says which name was likely meant.
	typo := "hosptial-c"
	out, took, err := d.userRun(t, "--owners", d.owners[1]+","+typo, "--epsilon", "1", "--out", filepath.Join(d.dir, "typo"))
	t.Logf("user run with a typo (%s):\n%s", took.Round(time.Millisecond), out)
	if err == nil || took > 10*time.Second || !strings.Contains(out, "no key is known for owner/"+typo+" (did you mean hospital-c?)") {
		t.Fatalf("a job naming an owner the user's roster does not know: %v after %s", err, took)
	}
	// An owner named by a key the user was given, that never called the
	// proxy (not deployed): the job fails after the proxy's grace, naming
	// it, and the owner that took part gets its budget back.
	ghost := "hospital-z"
	out, took, err = d.userRun(t, "--owners", d.owners[1]+","+ghost+"="+strings.Repeat("ab", 32), "--epsilon", "1", "--out", filepath.Join(d.dir, "ghost"))
	t.Logf("user run naming an owner never deployed (%s):\n%s", took.Round(time.Millisecond), out)
	if err == nil || took > time.Minute || !strings.Contains(out, "never heard from "+ghost) ||
		!strings.Contains(out, "failed: the job needs 2 owners, and 1 owner never called this proxy") {
		t.Fatalf("a job naming an owner nobody knows: %v after %s", err, took)
	}
	refunded := func(p *proc) bool {
		return p.count("job failed before any key switch: budget refunded", nil)+p.count("job ended before this owner uploaded: reservation released", nil) > 0
	}
	waitFor(t, ctx, func() bool { return refunded(b) })

	out, took, err = d.userRun(t, "--owners", strings.Join(d.owners, ","), "--epsilon", "1", "--out", filepath.Join(d.dir, "declined"), "--quiet")
	t.Logf("user run with an owner out of budget (%s):\n%s", took.Round(time.Millisecond), out)
	if err == nil || took > time.Minute || !strings.Contains(out, "1 of the 3 owners declined: the other 2 cannot make the 3 needed") ||
		!strings.Contains(out, "owner "+d.owners[0]+" declined (budget)") {
		t.Fatalf("a job that can no longer succeed: %v after %s", err, took)
	}
	// --quiet: the error alone, no notes on the job or its progress.
	if lines := strings.Split(strings.TrimSpace(out), "\n"); !strings.HasPrefix(lines[0], "fedpca: job ") {
		t.Errorf("user run --quiet printed more than its error:\n%s", out)
	}
	if a.count("declining job", nil) != 1 {
		t.Errorf("%s declined %d jobs, want 1", d.owners[0], a.count("declining job", nil))
	}
	waitFor(t, ctx, func() bool {
		return b.count("job failed before any key switch: budget refunded", nil)+b.count("job ended before this owner uploaded: reservation released", nil) == 2
	})
}

// TestCommitteeGoneFailsJob: two of three committee members stop while a
// job is open; at its deadline the job cannot be sealed, fails soon after
// (saying which members are not ready), every owner's budget goes back,
// and user run returns.
func TestCommitteeGoneFailsJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeployment(t, 3, 3, 2)
	members := d.startCSPs(t)
	d.startProxy(t)
	a := d.startOwner(t, d.owners[0])
	d.startOwner(t, d.owners[1])
	// hospital-c is not running: the job stays open until its deadline.
	// It is known to the proxy, so only the committee decides the job.
	c := d.startOwner(t, d.owners[2])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, _, err := d.userRun(t, "--owners", d.owners[0], "--min-owners", "1", "--epsilon", "1", "--analysis", "scatter", "--out", filepath.Join(d.dir, "warmup")); err != nil ||
		!strings.Contains(out, "on wdbc, 1 owner,") || strings.Contains(out, ", 1 owners") || strings.Contains(out, "with 1 owners") {
		t.Fatalf("a first job (one owner, said so): %v\n%s", err, out)
	}
	c.stop()
	keys := filepath.Join(d.dir, "keys")
	p := startLines(t, append(append([]string{"user", "run", "--certs", d.certs("user", "alice"), "--keys", keys, "--proxy", d.proxy, "--schema", d.schema},
		d.committee()...), "--owners", strings.Join(d.owners, ","), "--min-owners", "2", "--epsilon", "1", "--deadline", "15s", "--out", filepath.Join(d.dir, "out"))...)
	waitFor(t, ctx, func() bool { return strings.Contains(p.text(), "created") || p.exited() })
	members[1].stop()
	members[2].stop()
	deadline := time.Now().Add(15 * time.Second)
	waitFor(t, ctx, p.exited)
	after := time.Since(deadline)
	out := p.text()
	t.Logf("user run, %s after the deadline:\n%s", after.Round(time.Millisecond), out)
	if p.cmd.ProcessState.ExitCode() == 0 || after > time.Minute || !strings.Contains(out, "the committee could not switch the job") ||
		!strings.Contains(out, "csp/csp-2, csp/csp-3") {
		t.Fatalf("user run with the committee gone: exit %d, %s after the deadline", p.cmd.ProcessState.ExitCode(), after)
	}
	waitFor(t, ctx, func() bool { return a.count("job failed before any key switch: budget refunded", nil) == 1 })
}

// TestNoUsableRow: a source of which no row is usable through its schema
// (here every mean_radius is text) is an error: owner check prints its
// report and exits non-zero saying why, owner serve refuses to start (before
// it calls the proxy). The counts are the operator's own terminal's.
func TestNoUsableRow(t *testing.T) {
	dir := exported(t)
	b, err := os.ReadFile(filepath.Join(dir, "data", "hospital-a.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := 1; i < len(lines); i++ {
		_, rest, _ := strings.Cut(lines[i], ",")
		lines[i] = "n/a," + rest
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.csv")
	if err := os.WriteFile(empty, []byte(lines[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{bad: "no row of the source is usable: of its " + fmt.Sprint(len(lines)-1) + " rows, " + fmt.Sprint(len(lines)-1) + " are unreadable",
		empty: "no row of the source is usable: the source has no rows"} {
		out, err := fedpca(t, dir, "owner", "check", "--dataset", "data/schema.json="+src)
		if err == nil || !strings.Contains(out, want) || strings.Contains(out, "NaN") || !strings.Contains(out, "no row used") {
			t.Fatalf("owner check of %s: %v\n%s", filepath.Base(src), err, out)
		}
		out, err = fedpca(t, dir, "owner", "check", "--json", "--dataset", "data/schema.json="+src)
		if err == nil || !strings.Contains(out, `"Used": 0`) {
			t.Fatalf("owner check --json of %s: %v\n%s", filepath.Base(src), err, out)
		}
		out, err = fedpca(t, dir, "owner", "serve", "--insecure", "--id", "hospital-a", "--state", "state", "--proxy", "127.0.0.1:1",
			"--dataset", "data/schema.json="+src, "--any-committee")
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("owner serve of %s: %v\n%s", filepath.Base(src), err, out)
		}
	}
}

// TestBoundsOnlySchemas: a schema that gives only min and max per feature
// (no center or scale), and one-hot category features that give nothing
// (an indicator's bounds are [0, 1]), are read by owner check as they are:
// the schema a profile starts from is one the owners accept.
func TestBoundsOnlySchemas(t *testing.T) {
	corpus, err := filepath.Abs(filepath.Join("..", "..", "source", "testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(corpus, "categorical.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sch map[string]any
	if err := json.Unmarshal(b, &sch); err != nil {
		t.Fatal(err)
	}
	for _, f := range sch["features"].([]any) {
		f := f.(map[string]any)
		delete(f, "center")
		delete(f, "scale")
		if _, ok := f["category"]; !ok {
			f["min"], f["max"] = -10000, 10000 // wide public bounds
		}
	}
	out, _ := json.Marshal(sch)
	dir := t.TempDir()
	p := filepath.Join(dir, "bounds.schema.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := fedpca(t, dir, "owner", "check", "--dataset", p+"="+filepath.Join(corpus, "categorical.csv"))
	if err != nil || !strings.Contains(got, "rows used          178\n") || !strings.Contains(got, "rows skipped       0") {
		t.Fatalf("owner check with a schema of bounds only: %v\n%s", err, got)
	}
}

// TestOwnerProject: owner project leaves out, and counts, the rows the
// schema's drop policy leaves out (it used to stop at the first NA), copies
// an ID column to join the rows back, leaves no output file when it fails,
// and reads a PostgreSQL table as owner serve does.
func TestOwnerProject(t *testing.T) {
	corpus, err := filepath.Abs(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(corpus, "missing_drop.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := range lines {
		id := "record_id"
		if i > 0 {
			id = fmt.Sprintf("r%03d", i)
		}
		lines[i] = id + "," + lines[i]
	}
	data := filepath.Join(dir, "rows.csv")
	if err := os.WriteFile(data, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sch := filepath.Join(corpus, "missing_drop.schema.json")
	if out, err := fedpca(t, dir, "reference", "--schema", sch, "--data", data, "--k", "2", "--out", "ref"); err != nil {
		t.Fatalf("reference: %v\n%s", err, out)
	}
	out, err := fedpca(t, dir, "owner", "project", "--result", "ref/result.json", "--schema", sch, "--data", data, "--id-column", "record_id", "--out", "p.csv")
	if err != nil || !strings.Contains(out, "projected 178 of 186 rows on 2 components; left out 0 unreadable and 8 with a missing value") {
		t.Fatalf("owner project with NA rows: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "p.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(rows) != 179 || rows[0] != "record_id,component_1,component_2,label" || !strings.HasPrefix(rows[1], "r001,") {
		t.Fatalf("p.csv: %d lines, first %q, %q", len(rows), rows[0], rows[1])
	}
	// Without an ID column the output says the order no longer holds.
	if out, err := fedpca(t, dir, "owner", "project", "--result", "ref/result.json", "--schema", sch, "--data", data, "--out", "q.csv"); err != nil ||
		!strings.Contains(out, "join them back with --id-column") {
		t.Fatalf("owner project without an ID column: %v\n%s", err, out)
	}
	// A failure leaves no file, not even an empty one.
	if out, err := fedpca(t, dir, "owner", "project", "--result", "ref/result.json", "--schema", sch, "--data", data, "--id-column", "nosuch", "--out", "r.csv"); err == nil ||
		!strings.Contains(out, `no column "nosuch"`) {
		t.Fatalf("owner project with a wrong ID column: %v\n%s", err, out)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*r.csv*")); len(left) > 0 {
		t.Fatalf("a failed owner project left %v", left)
	}

	// A PostgreSQL table, as an owner serves it.
	srv := pgWine(t)
	wine := filepath.Join(corpus, "wine.schema.json")
	if out, err := fedpca(t, dir, "reference", "--schema", wine, "--data", filepath.Join(corpus, "clean.csv"), "--k", "2", "--out", "wine"); err != nil {
		t.Fatalf("reference: %v\n%s", err, out)
	}
	fromCSV, err := fedpca(t, dir, "owner", "project", "--result", "wine/result.json", "--schema", wine, "--data", filepath.Join(corpus, "clean.csv"))
	if err != nil {
		t.Fatalf("owner project of the CSV: %v\n%s", err, fromCSV)
	}
	fromPG, err := fedpca(t, dir, "owner", "project", "--result", "wine/result.json", "--schema", wine, "--data", srv.URL("table=wine"))
	if err != nil || fromPG != fromCSV || !strings.Contains(fromPG, "projected 178 of 178 rows") || strings.Contains(fromPG, pgtest.Password) {
		t.Fatalf("owner project of the PostgreSQL table: %v\n%.300s", err, fromPG)
	}
}

// TestDerivedUnits: every derived analysis says the units of its numbers,
// in KIND.json and on the terminal.
func TestDerivedUnits(t *testing.T) {
	dir := exported(t)
	if out, err := fedpca(t, dir, "reference", "--schema", "data/schema.json", "--data", "data/all.csv", "--out", "ref"); err != nil {
		t.Fatalf("reference: %v\n%s", err, out)
	}
	for _, kind := range []string{"covariance", "correlation", "means", "regression"} {
		args := []string{"user", "analyze", "--result", "ref/result.json", "--analysis", kind, "--out", kind}
		if kind == "regression" {
			args = append(args, "--target", "mean_radius")
		}
		out, err := fedpca(t, dir, args...)
		if err != nil || !strings.Contains(out, "units: ") {
			t.Fatalf("user analyze %s: %v\n%s", kind, err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, kind, kind+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Units string }
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		want := "the schema's units: each feature as z = (x - center) / scale"
		if kind == "correlation" {
			want = "dimensionless"
		}
		if !strings.Contains(doc.Units, want) || !strings.Contains(out, doc.Units) {
			t.Errorf("%s.json's units %q, want %q (terminal:\n%s)", kind, doc.Units, want, out)
		}
	}
}

// TestWording: what the user's own checks say before anything is sent
// (issue 30's list): a deadline of 0, an unknown analysis (no note about k
// first), a delta that gives no guarantee, and an epsilon no noise level
// meets, which names the largest that does.
func TestWording(t *testing.T) {
	dir := exported(t)
	for _, tc := range []struct {
		args       []string
		want, none string
	}{
		{userRun("--owners", "hospital-a", "--deadline", "0s"), "--deadline 0s: want how long the job accepts uploads", "before the call"},
		{userRun("--owners", "hospital-a", "--analysis", "pcaa"), `--analysis "pcaa": want pca, dca, lda or scatter`, "k: "},
		{userRun("--owners", "hospital-a", "--delta", "0.5"), "--delta 0.5: a delta above 0.001 gives no meaningful guarantee", ""},
		{[]string{"simulate", "--dataset", "wine", "--owners", "2", "--epsilon", "50"}, "the largest epsilon this job's noise allows is", ""},
	} {
		out, err := fedpca(t, dir, tc.args...)
		if err == nil || !strings.Contains(out, tc.want) || tc.none != "" && strings.Contains(out, tc.none) {
			t.Errorf("%v: %v\n%s", tc.args[2:], err, out)
		}
	}
}
