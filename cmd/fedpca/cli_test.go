package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
)

// fedpca runs the test binary and returns its combined output and error.
func fedpca(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// exported makes a directory with user keys and the wdbc data split between
// two owners (fedpca dataset export), as a hand deployment has them.
func exported(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := fedpca(t, dir, "dataset", "export", "wdbc", "--owners", "hospital-a,hospital-b", "--out", "data"); err != nil {
		t.Fatalf("dataset export: %v\n%s", err, out)
	}
	if out, err := fedpca(t, dir, "user", "keygen", "--keys", "keys"); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	return dir
}

// userRun is user run against a proxy that does not exist: every check
// below must fail before any call.
func userRun(extra ...string) []string {
	return append([]string{"user", "run", "--insecure", "--id", "alice", "--keys", "keys", "--proxy", "127.0.0.1:1",
		"--schema", "data/schema.json", "--committee", "csp-1,csp-2,csp-3"}, extra...)
}

// TestCommitteeRequired: owner serve, user run and user profile without a
// pinned committee stop before they read a source or call anyone, saying
// how to pin it (and that --any-committee is for local tests); a pinned
// committee below the minimum, or both flags, are refused too, naming the
// flag to change.
func TestCommitteeRequired(t *testing.T) {
	dir := exported(t)
	owner := []string{"owner", "serve", "--insecure", "--id", "hospital-a", "--state", "s", "--proxy", "127.0.0.1:1", "--dataset", "data/schema.json=data/hospital-a.csv"}
	run := []string{"user", "run", "--insecure", "--id", "alice", "--keys", "keys", "--proxy", "127.0.0.1:1", "--schema", "data/schema.json", "--owners", "hospital-a"}
	profile := []string{"user", "profile", "--insecure", "--id", "alice", "--keys", "keys", "--proxy", "127.0.0.1:1", "--schema", "data/schema.json",
		"--owners", "hospital-a", "--keep-scales", "--out", "p"}
	for _, cmd := range [][]string{owner, run, profile} {
		for _, tc := range []struct {
			extra []string
			want  string
		}{
			{nil, "no committee pinned: name the CSP members this node trusts with --committee (for example --committee csp-1,csp-2,csp-3"},
			{nil, "for local tests only, --any-committee accepts any committee"},
			{[]string{"--committee", "csp-1"}, "--committee names one member, below this node's minimum committee of 3 (--committee-min-members lowers it"},
			{[]string{"--committee", "csp-1,csp-2,csp-3", "--any-committee"}, "--committee and --any-committee together"},
			{[]string{"--any-committee", "--committee-min-members", "1"}, "a threshold of at least 2 needs at least 2 members, not 1"},
		} {
			args := append(append([]string{}, cmd...), tc.extra...)
			out, err := fedpca(t, dir, args...)
			if err == nil || !strings.Contains(out, tc.want) || strings.Contains(out, "retrying") {
				t.Errorf("%v: %v, want %q:\n%s", args, err, tc.want, out)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("owner serve refused for its committee made its state directory: %v", err)
	}
}

// TestStrayArguments: `--owners hospital-a, hospital-b` (a space after the
// comma) once ran a one-owner job; every command that takes no arguments
// now refuses them, naming the stray one.
func TestStrayArguments(t *testing.T) {
	dir := exported(t)
	out, err := fedpca(t, dir, userRun("--owners", "hospital-a,", "hospital-b")...)
	if err == nil || !strings.Contains(out, `got "hospital-b"`) || !strings.Contains(out, "--owners a,b") {
		t.Fatalf("user run with a stray argument: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"user", "keygen", "--keys", "k2", "extra"},
		{"proxy", "serve", "--insecure", "--id", "proxy", "--state", "s", "--csp", "csp-1=127.0.0.1:1", "extra"},
		{"owner", "serve", "--insecure", "--id", "o", "--state", "s", "--proxy", "127.0.0.1:1", "extra"},
		{"health", "extra"},
		{"dataset", "list", "extra"},
		{"simulate", "--dataset", "wine", "extra"},
		{"user", "analyze", "--result", "x.json", "--out", "o", "extra"},
		{"user", "jobs", "--insecure", "--id", "alice", "--proxy", "127.0.0.1:1", "extra"},
	} {
		out, err := fedpca(t, dir, args...)
		if err == nil || !strings.Contains(out, `got "extra"`) {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	if out, err := fedpca(t, dir, "user", "bogus"); err == nil || !strings.Contains(out, `unknown command "bogus"`) {
		t.Errorf("unknown subcommand: %v\n%s", err, out)
	}
	if out, err := fedpca(t, dir, "user", "status", "--insecure", "--id", "alice", "--proxy", "127.0.0.1:1", "abcd", "ef01"); err == nil || !strings.Contains(out, `takes one job, got "ef01"`) {
		t.Errorf("two jobs: %v\n%s", err, out)
	}
}

// TestNoSilentSubstitution: --delta 0 was run at 1e-6 and a too large -k
// was lowered, both silently; now they are errors, and a default -k too
// large for the analysis is lowered saying so.
func TestNoSilentSubstitution(t *testing.T) {
	dir := exported(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{userRun("--owners", "hospital-a", "--delta", "0"), "--delta 0: want a delta in (0, 1)"},
		{userRun("--owners", "hospital-a", "--epsilon", "0"), "--epsilon 0"},
		{userRun("--owners", "hospital-a", "-k", "31"), "-k 31: pca of 30 features gives at most 30 components"},
		{userRun("--owners", "hospital-a", "--analysis", "dca", "-k", "5"), "-k 5: dca on 2 classes gives at most 1 component"},
		{userRun("--owners", "hospital-a", "--budget-split", "0.5/0.5"), "--budget-split"},
		{[]string{"simulate", "--dataset", "wine", "--delta", "0"}, "--delta 0"},
		{[]string{"simulate", "--dataset", "wine", "--keep-scales"}, "--keep-scales needs --auto-schema"},
		{[]string{"simulate", "--dataset", "wine", "--quantile", "0.5"}, "--quantile needs --auto-schema"},
	} {
		out, err := fedpca(t, dir, tc.args...)
		if err == nil || !strings.Contains(out, tc.want) || strings.Contains(out, "proxy call failed") {
			t.Errorf("%v: %v\n%s", tc.args, err, out)
		}
	}
	// The default k (5) is more than DCA on 2 classes gives: said, then
	// the job goes on (here to the missing proxy; cut short).
	ctx, cancel := context.WithTimeout(context.Background(), 2e9)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, userRun("--owners", "hospital-a", "--analysis", "dca")...)
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "k: 1 (the default 5 is more than dca") {
		t.Errorf("default k for dca on 2 classes not stated:\n%s", out)
	}
}

// TestUserRunPowerFlags: user run's power-method flags are checked before
// any call, each error naming the flag.
func TestUserRunPowerFlags(t *testing.T) {
	dir := exported(t)
	power := func(extra ...string) []string {
		return userRun(append([]string{"--owners", "hospital-a", "--method", "power"}, extra...)...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{power("--analysis", "dca", "-k", "1"), "--method power: the power method computes pca only, not dca"},
		{userRun("--owners", "hospital-a", "--method", "bogus"), `--method "bogus": want release or power`},
		{userRun("--owners", "hospital-a", "--power-seed", "s"), "--power-seed: only with --method power"},
		{power("--rounds", "0"), "--rounds 0: want 1 to 64"},
		{power("--oversample", "40"), "--oversample 40: p = k + oversample = 45 must be between k and the 30 features"},
		{power("--release", "components"), "--method power: its result is the components it computes from the rounds"},
		{power("--round-window", "0s"), "--round-window 0s: want 1s to"},
		{power("--start", "missing.csv"), "--start: open missing.csv"},
	} {
		out, err := fedpca(t, dir, tc.args...)
		if err == nil || !strings.Contains(out, tc.want) || strings.Contains(out, "proxy call failed") {
			t.Errorf("%v: %v, want %q\n%s", tc.args, err, tc.want, out)
		}
	}
	bad := filepath.Join(dir, "start.csv")
	if err := os.WriteFile(bad, []byte("1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := fedpca(t, dir, power("--start", bad, "-k", "1", "--oversample", "1")...); err == nil || !strings.Contains(out, "1 rows, want one per feature, 30") {
		t.Errorf("a start matrix of 1 row: %v\n%s", err, out)
	}
}

// helpOf renders a command's help in process.
func helpOf(t *testing.T, path []string) string {
	t.Helper()
	var buf bytes.Buffer
	root := app()
	root.Writer, root.ErrWriter = &buf, &buf
	if err := root.Run(context.Background(), append(append([]string{"fedpca"}, path...), "--help")); err != nil {
		t.Fatalf("%v --help: %v", path, err)
	}
	return buf.String()
}

// TestHelp: every visible command's help has a real example, shows no
// placeholder taken from a usage string's backquotes, no default twice,
// and the real default budget splits.
func TestHelp(t *testing.T) {
	example := regexp.MustCompile(`(?m)^\s+fedpca [a-z]`)
	var walk func(c *cli.Command, path []string)
	walk = func(c *cli.Command, path []string) {
		for _, sub := range c.Commands {
			if sub.Hidden || sub.Name == "help" {
				continue
			}
			p := append(append([]string{}, path...), sub.Name)
			h := helpOf(t, p)
			if len(sub.Commands) == 0 && !example.MatchString(sub.Description) {
				t.Errorf("fedpca %s: no example in its help", strings.Join(p, " "))
			}
			for _, line := range strings.Split(h, "\n") {
				if strings.Count(line, "(default") > 1 {
					t.Errorf("fedpca %s: doubled default: %s", strings.Join(p, " "), strings.TrimSpace(line))
				}
				if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "--") && strings.HasPrefix(f[1], "fedpca") {
					t.Errorf("fedpca %s: placeholder: %s", strings.Join(p, " "), strings.TrimSpace(line))
				}
			}
			for _, f := range sub.Flags {
				if df, ok := f.(cli.DocGenerationFlag); ok && strings.Contains(df.GetUsage(), "`") {
					t.Errorf("fedpca %s --%s: a backquote in its usage becomes the placeholder", strings.Join(p, " "), f.Names()[0])
				}
			}
			if strings.Contains(h, "0.95/0.04/0.01") {
				t.Errorf("fedpca %s: help states the old default split", strings.Join(p, " "))
			}
			walk(sub, p)
		}
	}
	walk(app(), nil)
	h := helpOf(t, []string{"user", "run"})
	for _, want := range []string{"--noise-plan", "--budget-split", splitText(dp.DefaultSplit) + " for pca", splitText(dp.DiscriminantSplit) + " for dca"} {
		if !strings.Contains(h, want) {
			t.Errorf("user run --help lacks %q", want)
		}
	}
	// A real default stays shown where the usage explains 0.
	if !regexp.MustCompile(`(?m)^\s+-k int .*\(default: 5\)`).MatchString(h) {
		t.Errorf("user run --help hides k's default:\n%s", h)
	}
	for _, gone := range []string{"--plan ", "--split "} {
		if strings.Contains(h, gone) {
			t.Errorf("user run --help still has %q", gone)
		}
	}
	if h := helpOf(t, []string{"simulate"}); !strings.Contains(h, "--noise-plan") || !strings.Contains(h, "--partition") || strings.Contains(h, "--noise ") || strings.Contains(h, "--split ") {
		t.Errorf("simulate --help: one name per idea:\n%s", h)
	}
}

// TestVersion: fedpca version and --version say the module version, the
// commit, the Go version and lattigo's version.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := fedpca(t, t.TempDir(), args...)
		if err != nil || !strings.Contains(out, "fedpca ") || !strings.Contains(out, "commit ") || !strings.Contains(out, "go1.") || !strings.Contains(out, "lattigo v5.") {
			t.Errorf("fedpca %v: %v\n%s", args, err, out)
		}
	}
}

// TestErrorText: gRPC's framing never reaches the user.
func TestErrorText(t *testing.T) {
	err := errors.Join(errors.New("create job: x"), status.Error(codes.InvalidArgument, "epsilon: must be positive"))
	if got := errorText(err); strings.Contains(got, "rpc error") || !strings.Contains(got, "epsilon: must be positive") {
		t.Fatalf("%q", got)
	}
}

// TestCLIReferenceFresh: docs/CLI.md is what fedpca cli-reference writes
// (make docs); make check fails too when it is stale.
func TestCLIReferenceFresh(t *testing.T) {
	var buf bytes.Buffer
	if err := writeReference(&buf, app()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, buf.Bytes()) {
		t.Fatal("docs/CLI.md is stale: run make docs")
	}
	for _, want := range []string{"## fedpca user fetch", "## fedpca user cancel", "`--noise-plan`"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("reference lacks %q", want)
		}
	}
}

// TestCertsCopyFrom: credentials mounted group-readable (as a Kubernetes
// Secret with an fsGroup mounts them) are refused by the nodes; certs
// --copy-from copies them 0600 so that they load, and refuses a key that is
// not the certificate's, or ROLE/ID arguments beside it.
func TestCertsCopyFrom(t *testing.T) {
	dir := t.TempDir()
	if out, err := fedpca(t, dir, "certs", "--out", "certs", "csp/csp-1", "csp/csp-2"); err != nil {
		t.Fatalf("certs: %v\n%s", err, out)
	}
	mounted := filepath.Join(dir, "mounted")
	if err := os.MkdirAll(mounted, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ca.pem", "cert.pem", "key.pem"} {
		b, err := os.ReadFile(filepath.Join(dir, "certs", "csp-csp-1", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mounted, name), b, 0o440); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := fedpca(t, dir, "health", "--certs", "mounted", "--addr", "127.0.0.1:1"); err == nil || !strings.Contains(out, "readable by group or others") {
		t.Fatalf("a group-readable key was not refused: %v\n%s", err, out)
	}
	out, err := fedpca(t, dir, "certs", "--out", "copied", "--copy-from", "mounted")
	if err != nil || !strings.Contains(out, "csp/csp-1") {
		t.Fatalf("certs --copy-from: %v\n%s", err, out)
	}
	for _, name := range []string{"ca.pem", "cert.pem", "key.pem"} {
		fi, err := os.Stat(filepath.Join(dir, "copied", name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("copied %s: %v %v", name, fi, err)
		}
	}
	if out, err := fedpca(t, dir, "health", "--certs", "copied", "--addr", "127.0.0.1:1"); err == nil || strings.Contains(out, "credentials") {
		t.Fatalf("health with the copied credentials should fail only to connect: %v\n%s", err, out)
	}
	other, err := os.ReadFile(filepath.Join(dir, "certs", "csp-csp-2", "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mounted, "key.pem"), other, 0o440); err != nil {
		t.Fatal(err)
	}
	if out, err := fedpca(t, dir, "certs", "--out", "copied2", "--copy-from", "mounted"); err == nil || !strings.Contains(out, "--copy-from mounted") {
		t.Fatalf("a key that is not the certificate's was copied: %v\n%s", err, out)
	}
	if out, err := fedpca(t, dir, "certs", "--out", "copied3", "--copy-from", "copied", "csp/csp-3"); err == nil || !strings.Contains(out, "name no ROLE/ID") {
		t.Fatalf("--copy-from with ROLE/ID: %v\n%s", err, out)
	}
}

// TestCertsCopyFromTrust: as deploy/helm's init container does, a key
// Secret's cert.pem and key.pem alone, with the organisation's trust store
// from --trust (its ConfigMap), make a node's credentials, each file 0600
// even where OUT already held it with another mode; a trust store that does
// not accept the node is refused, naming the file and the node's trust
// domain, and without
// --trust a directory with no trust store is refused, naming what it lacks.
func TestCertsCopyFromTrust(t *testing.T) {
	dir := t.TempDir()
	for _, org := range []string{"csp-op-1", "csp-op-2"} {
		if out, err := fedpca(t, dir, "certs", "init", "--org", "orgs/"+org); err != nil {
			t.Fatalf("certs init: %v\n%s", err, out)
		}
	}
	if out, err := fedpca(t, dir, "certs", "issue", "--org", "orgs/csp-op-1", "csp/csp-1"); err != nil {
		t.Fatalf("certs issue: %v\n%s", err, out)
	}
	mounted := filepath.Join(dir, "mounted")
	copied := filepath.Join(dir, "copied")
	for _, d := range []string{mounted, copied} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"cert.pem", "key.pem"} {
		b, err := os.ReadFile(filepath.Join(dir, "orgs", "csp-op-1", "csp-csp-1", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mounted, name), b, 0o440); err != nil {
			t.Fatal(err)
		}
	}
	// A key.pem already in OUT, readable by all (a restarted pod's volume, a
	// directory used before).
	if err := os.WriteFile(filepath.Join(copied, "key.pem"), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := fedpca(t, dir, "certs", "--out", "copied", "--copy-from", "mounted", "--trust", "orgs/csp-op-1/trust.json")
	if err != nil || !strings.Contains(out, "spiffe://csp-op-1/csp/csp-1") {
		t.Fatalf("certs --copy-from --trust: %v\n%s", err, out)
	}
	for _, name := range []string{"cert.pem", "key.pem", "trust.json"} {
		fi, err := os.Stat(filepath.Join(copied, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("copied %s: %v %v", name, fi, err)
		}
	}
	if out, err := fedpca(t, dir, "health", "--certs", "copied", "--addr", "127.0.0.1:1"); err == nil || strings.Contains(out, "credentials") {
		t.Fatalf("health with the copied credentials should fail only to connect: %v\n%s", err, out)
	}
	out, err = fedpca(t, dir, "certs", "--out", "copied2", "--copy-from", "mounted", "--trust", "orgs/csp-op-2/trust.json")
	if err == nil || !strings.Contains(out, "trust store orgs/csp-op-2/trust.json") || !strings.Contains(out, "trust domain csp-op-1 is not trusted here") {
		t.Fatalf("a trust store of another organisation was accepted: %v\n%s", err, out)
	}
	out, err = fedpca(t, dir, "certs", "--out", "copied3", "--copy-from", "mounted")
	if err == nil || !strings.Contains(out, "has neither trust.json nor ca.pem") {
		t.Fatalf("credentials without a trust store were copied: %v\n%s", err, out)
	}
}

// TestCompareComponents: fedpca compare reads a components release as it
// reads a statistics release: an exact components job's top 3 against the
// statistics release of the same rows agree (its covariance eigenvalues
// taken on the scatter's scale); a DP components result carries its noise
// figures, per-component warnings and the note on the last gap, and prints
// them.
func TestCompareComponents(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		out, err := fedpca(t, dir, append([]string{"simulate", "--dataset", "wine", "--owners", "2", "--analysis", "pca", "--k", "3"}, args...)...)
		if err != nil {
			t.Fatalf("simulate %v: %v\n%s", args, err, out)
		}
		return out
	}
	run("--release", "components", "--no-noise", "--out", "components")
	run("--no-noise", "--out", "statistics")
	out, err := fedpca(t, dir, "compare", "--result", "components/result.json", "--reference", "statistics/result.json", "--tolerance", "1e-4")
	if err != nil || !strings.Contains(out, "the top 3 components") {
		t.Fatalf("compare: %v\n%s", err, out)
	}
	printed := run("--release", "components", "--epsilon", "1", "--out", "dp")
	b, err := os.ReadFile(filepath.Join(dir, "dp", "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := job.ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	q := res.Quality
	if q == nil || q.CovarianceNoiseNorm <= 0 || q.EigenvalueStd <= 0 || len(q.Notes) != 1 || !strings.Contains(q.Notes[0], "component 3: the next eigenvalue is not released") {
		t.Fatalf("a DP components result's quality: %+v", q)
	}
	for _, w := range q.Warnings {
		if !strings.Contains(printed, "warning: "+w) {
			t.Errorf("the warning %q is not printed:\n%s", w, printed)
		}
	}
	if !strings.Contains(res.Privacy.Computed, "3 members with their own randomness") || !strings.Contains(printed, "computed by 3 members") {
		t.Errorf("the result says it was computed %q; printed:\n%s", res.Privacy.Computed, printed)
	}
	// Only an exact job warns of a member colluding with the user.
	const shift = "a member colluding with the user could shift the exact statistics"
	if b, err = os.ReadFile(filepath.Join(dir, "components", "result.json")); err != nil {
		t.Fatal(err)
	}
	exact, err := job.ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(exact.Privacy.Computed, shift) || strings.Contains(res.Privacy.Computed, shift) {
		t.Errorf("exact job computed %q, DP job %q: only the exact one may be shifted by a member", exact.Privacy.Computed, res.Privacy.Computed)
	}
	if !strings.Contains(printed, "on the covariance spectral norm") || !strings.Contains(printed, "note: component 3") {
		t.Errorf("simulate does not print the components' noise:\n%s", printed)
	}
}
