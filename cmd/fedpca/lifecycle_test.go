package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fedpca/fedpca/user"
)

// lineProc is a foreground command whose stderr is read line by line.
type lineProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	stdout bytes.Buffer
	done   chan struct{}
}

func startLines(t *testing.T, args ...string) *lineProc {
	t.Helper()
	p := &lineProc{cmd: exec.Command(binary, args...), done: make(chan struct{})}
	p.cmd.Stdout = &lockedWriter{mu: &p.mu, w: &p.stdout}
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *lineProc) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String() + p.stdout.String()
}

func (p *lineProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// run runs a fedpca command to its end.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	return string(out), err
}

// TestJobLifecycle: user run is interrupted while the job waits for an
// owner; it says how to re-attach or cancel and exits non-zero. The job is
// still there: user jobs lists it by its prefix, user status names the
// owner awaited, and once that owner runs, user fetch by an 8-digit prefix
// gets the result and writes the outputs as user run would have.
func TestJobLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeployment(t, 2, 1, 1)
	d.startCSP(t, 0)
	d.startProxy(t, "--unknown-owner-grace", "10m") // hospital-b's first call comes late
	d.startOwner(t, d.owners[0])
	keys := filepath.Join(d.dir, "keys")
	if out, err := run(t, "user", "keygen", "--keys", keys); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	conn := []string{"--certs", d.certs("user", "alice"), "--proxy", d.proxy}
	args := append(append(append([]string{"user", "run"}, conn...), "--keys", keys, "--schema", d.schema,
		"--owners", strings.Join(d.owners, ","), "--analysis", "pca", "-k", "3", "--epsilon", "1", "--out", filepath.Join(d.dir, "run-out")), d.committee()...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var p *lineProc
	for {
		p = startLines(t, args...)
		for !p.exited() && !strings.Contains(p.text(), "1/2 owners uploaded") && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		if !p.exited() || !strings.Contains(p.text(), "ceremony has not finished") || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond) // the committee key is not ready yet
	}
	if p.exited() {
		t.Fatalf("user run ended before the interrupt:\n%s", p.text())
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	<-p.done
	out := p.text()
	t.Logf("user run, interrupted:\n%s", out)
	if code := p.cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("user run exited 0 after Ctrl-C")
	}
	m := regexp.MustCompile(`job ([0-9a-f]{16}) created`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("user run did not print the job")
	}
	prefix := m[1]
	if !strings.Contains(out, "fedpca user fetch --certs "+d.certs("user", "alice")) || !strings.Contains(out, "fedpca user cancel") ||
		!strings.Contains(out, prefix) {
		t.Fatalf("the interrupt did not say how to re-attach or cancel:\n%s", out)
	}

	list, err := run(t, append([]string{"user", "jobs"}, conn...)...)
	if err != nil || !regexp.MustCompile(prefix+`\s+pca\s+wdbc\s+open\s+1/2\s+in `).MatchString(list) {
		t.Fatalf("user jobs: %v\n%s", err, list)
	}
	t.Logf("user jobs:\n%s", list)
	st, err := run(t, append(append([]string{"user", "status"}, conn...), prefix[:8])...)
	// While the job is open the user sees counts at the proxy's ticks, not
	// who uploaded (docs/PROTOCOL.md section 12).
	if err != nil || !strings.Contains(st, "uploads   1 of 2 expected") || strings.Contains(st, d.owners[0]) || strings.Contains(st, "awaiting") {
		t.Fatalf("user status: %v\n%s", err, st)
	}
	if out, err := run(t, append(append([]string{"user", "status"}, conn...), "0000")...); err == nil || !strings.Contains(out, "no job matches 0000") {
		t.Fatalf("user status of no job: %v\n%s", err, out)
	}

	d.startOwner(t, d.owners[1])
	fetchOut := filepath.Join(d.dir, "fetched")
	got, err := run(t, append(append([]string{"user", "fetch"}, conn...), "--keys", keys, "--out", fetchOut, prefix[:8])...)
	if err != nil {
		t.Fatalf("user fetch: %v\n%s", err, got)
	}
	res, err := user.LoadResult(filepath.Join(fetchOut, user.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.JobID, prefix) || res.NumOwners != 2 || len(res.Components.Eigenvalues) != 3 {
		t.Fatalf("fetched result: job %s, %d owners, %d components", res.JobID, res.NumOwners, len(res.Components.Eigenvalues))
	}
	checkQualityPrinted(t, "user fetch", got, res)
	for _, f := range []string{user.ComponentsFile, user.ReleaseFile} {
		if _, err := os.Stat(filepath.Join(fetchOut, f)); err != nil {
			t.Error(err)
		}
	}
	list, err = run(t, append([]string{"user", "jobs"}, conn...)...)
	if err != nil || !regexp.MustCompile(prefix+`\s+pca\s+wdbc\s+done\s+2/2`).MatchString(list) {
		t.Fatalf("user jobs after: %v\n%s", err, list)
	}
	// An ended job's status gives its deadline once, not "T (T)".
	if st, err := run(t, append(append([]string{"user", "status"}, conn...), prefix)...); err != nil || !regexp.MustCompile(`(?m)^deadline  \S+$`).MatchString(st) {
		t.Fatalf("user status of a done job: %v\n%s", err, st)
	}
	// An open job can be cancelled; a done one cannot.
	if out, err := run(t, append(append([]string{"user", "cancel"}, conn...), prefix)...); err == nil || !strings.Contains(out, "can no longer be cancelled") ||
		strings.Contains(out, "rpc error") || !strings.Contains(out, "is done: its result is ready") || strings.Contains(out, "wait for its result") {
		t.Fatalf("cancelling a done job: %v\n%s", err, out)
	}
	// The owner fetches a published result by prefix too.
	if out, err := run(t, append(append([]string{"user", "fetch"}, conn...), "--keys", keys, "--out", filepath.Join(d.dir, "again"), "--publish", prefix)...); err != nil {
		t.Fatalf("user fetch --publish: %v\n%s", err, out)
	}
	pub := filepath.Join(d.dir, "published.json")
	if out, err := run(t, "owner", "published", "--certs", d.certs("owner", d.owners[0]), "--proxy", d.proxy, "--out", pub, prefix[:6]); err != nil {
		t.Fatalf("owner published: %v\n%s", err, out)
	}
}

// TestCancelFromCLI: user cancel ends an open job; the owners see it end.
func TestCancelFromCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeployment(t, 2, 1, 1)
	d.startCSP(t, 0)
	d.startProxy(t, "--unknown-owner-grace", "10m") // hospital-b never runs
	own := d.startOwner(t, d.owners[0])
	keys := filepath.Join(d.dir, "keys")
	if out, err := run(t, "user", "keygen", "--keys", keys); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	conn := []string{"--certs", d.certs("user", "alice"), "--proxy", d.proxy}
	args := append(append(append([]string{"user", "run"}, conn...), "--keys", keys, "--schema", d.schema,
		"--owners", strings.Join(d.owners, ","), "--analysis", "pca", "-k", "2", "--out", filepath.Join(d.dir, "out")), d.committee()...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var p *lineProc
	for {
		p = startLines(t, args...)
		for !p.exited() && !strings.Contains(p.text(), "1/2 owners uploaded") && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		if !p.exited() || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := regexp.MustCompile(`job ([0-9a-f]{16}) created`).FindStringSubmatch(p.text())
	if m == nil {
		t.Fatalf("no job:\n%s", p.text())
	}
	out, err := run(t, append(append([]string{"user", "cancel"}, conn...), m[1][:10])...)
	if err != nil || !strings.Contains(out, "cancelled") {
		t.Fatalf("user cancel: %v\n%s", err, out)
	}
	<-p.done
	if !strings.Contains(p.text(), "cancelled by the user") || p.cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("user run after the cancel (exit %d):\n%s", p.cmd.ProcessState.ExitCode(), p.text())
	}
	waitFor(t, ctx, func() bool { return own.count("job failed before any key switch: budget refunded", nil) == 1 })
}

// TestOperatorErrors: a second node on a state directory in use fails at
// once saying so; a wrong address (a CSP's port for the proxy's) fails at
// once naming the node found there, not after retries; health --expect ""
// accepts any role.
func TestOperatorErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeployment(t, 1, 1, 1)
	d.startCSP(t, 0)
	d.startProxy(t)
	own := d.startOwner(t, d.owners[0])
	waitFor(t, context.Background(), func() bool { return own.count("owner running", nil) == 1 })
	for _, args := range [][]string{
		{"proxy", "serve", "--certs", d.certs("proxy", "proxy"), "--state", filepath.Join(d.dir, "state", "proxy"), "--listen", "127.0.0.1:0", "--csp", "csp-1=" + d.csps[0]},
		{"csp", "serve", "--certs", d.certs("csp", "csp-1"), "--state", filepath.Join(d.dir, "state", "csp-1"), "--listen", "127.0.0.1:0"},
		append([]string{"owner", "serve", "--certs", d.certs("owner", d.owners[0]), "--state", filepath.Join(d.dir, "state", d.owners[0]), "--proxy", d.proxy, "--dataset", d.schema + "=" + d.csvs[d.owners[0]]}, d.committee()...),
	} {
		start := time.Now()
		out, err := run(t, args...)
		if err == nil || !strings.Contains(out, "another process holds the store at "+filepath.Join(d.dir, "state")) || strings.Contains(out, "timeout") {
			t.Errorf("%s %s on a state directory in use: %v\n%s", args[0], args[1], err, out)
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("%s: took %s", args[0], took)
		}
	}
	keys := filepath.Join(d.dir, "keys")
	if out, err := run(t, "user", "keygen", "--keys", keys); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	start := time.Now()
	out, err := run(t, append([]string{"user", "run", "--certs", d.certs("user", "alice"), "--keys", keys, "--proxy", d.csps[0], "--schema", d.schema, "--owners", d.owners[0]}, d.committee()...)...)
	if err == nil || !strings.Contains(out, "server is spiffe://fedpca/csp/csp-1, expected proxy/*") || strings.Contains(out, "rpc error") || strings.Contains(out, "retrying") {
		t.Fatalf("user run at a CSP's address: %v\n%s", err, out)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("wrong address: failed after %s", took)
	}
	t.Logf("wrong address: %s", out)
	// An owner pointed at a CSP's address stops at once, saying why.
	start = time.Now()
	out, err = run(t, append([]string{"owner", "serve", "--certs", d.certs("owner", d.owners[0]), "--state", filepath.Join(d.dir, "state", "other"), "--proxy", d.csps[0],
		"--dataset", d.schema + "=" + d.csvs[d.owners[0]]}, d.committee()...)...)
	if err == nil || !strings.Contains(out, "server is spiffe://fedpca/csp/csp-1, expected proxy/*") || time.Since(start) > 10*time.Second {
		t.Errorf("owner serve at a CSP's address (%s): %v\n%s", time.Since(start), err, out)
	}
	if out, err := run(t, "health", "--addr", d.csps[0], "--certs", d.certs("proxy", "proxy")); err != nil || !strings.Contains(out, "SERVING") {
		t.Errorf("health --expect empty: %v\n%s", err, out)
	}
	if out, err := run(t, "health", "--addr", d.csps[0], "--certs", d.certs("proxy", "proxy"), "--expect", "proxy"); err == nil || !strings.Contains(out, "server is spiffe://fedpca/csp/csp-1, expected proxy/*") {
		t.Errorf("health --expect proxy at a CSP: %v\n%s", err, out)
	}
}

// TestAnalyzeCLI: user analyze on a saved PCA release never writes into the
// result's directory, says to run a DCA job for DCA, and derives the
// covariance, correlation, means and a ridge regression as KIND.json and
// KIND.csv.
func TestAnalyzeCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a simulation")
	}
	dir := t.TempDir()
	res := filepath.Join(dir, "res")
	if out, err := fedpca(t, dir, "simulate", "--dataset", "wdbc", "--owners", "3", "--analysis", "pca", "-k", "2", "--no-noise", "--out", res); err != nil {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	result := filepath.Join(res, user.ResultFile)
	before, _ := os.ReadFile(result)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--analysis", "pca"}, `"out" not set`},
		{[]string{"--analysis", "pca", "--out", res}, "is the directory of --result"},
		{[]string{"--analysis", "dca", "--out", filepath.Join(dir, "dca")}, "run a dca job"},
		{[]string{"--analysis", "regression", "--out", filepath.Join(dir, "r")}, "needs --target"},
		{[]string{"--analysis", "pca", "-k", "40", "--out", filepath.Join(dir, "p")}, "at most 30"},
		{[]string{"--analysis", "means", "--target", "x", "--out", filepath.Join(dir, "m")}, "--target and --ridge are for --analysis regression"},
	} {
		out, err := fedpca(t, dir, append([]string{"user", "analyze", "--result", result}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("user analyze %v: %v\n%s", tc.args, err, out)
		}
	}
	if after, _ := os.ReadFile(result); !bytes.Equal(before, after) {
		t.Fatal("user analyze changed its input")
	}
	for i, tc := range [][]string{{"covariance"}, {"correlation"}, {"means"}, {"regression", "--target", "mean_radius"}, {"regression", "--target", "mean_radius", "--ridge", "100"}} {
		out := filepath.Join(dir, fmt.Sprint("derived-", i))
		got, err := fedpca(t, dir, append([]string{"user", "analyze", "--result", result, "--out", out, "--analysis"}, tc...)...)
		if err != nil {
			t.Fatalf("user analyze %v: %v\n%s", tc, err, got)
		}
		for _, ext := range []string{".json", ".csv"} {
			if fi, err := os.Stat(filepath.Join(out, tc[0]+ext)); err != nil || fi.Size() == 0 {
				t.Errorf("user analyze %s: %s%s: %v", tc[0], tc[0], ext, err)
			}
		}
	}
	if out, err := fedpca(t, dir, "user", "analyze", "--result", result, "--analysis", "pca", "-k", "3", "--out", filepath.Join(dir, "pca3")); err != nil ||
		!strings.Contains(out, "explained variance ratio") {
		t.Fatalf("user analyze pca: %v\n%s", err, out)
	}
}
