package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fedpca/fedpca/datasets"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// binary is the fedpca binary built once for the process tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fedpca-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "fedpca")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build fedpca: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goleak: goroutines left after the tests:", err)
		code = 1
	}
	os.Exit(code)
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is a daemon process whose JSON log lines are kept.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs []map[string]any
	done chan struct{}
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(binary, args...), done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				p.mu.Lock()
				p.logs = append(p.logs, m)
				p.mu.Unlock()
			} else if testing.Verbose() {
				t.Logf("%s: %s", name, sc.Text())
			}
		}
		p.cmd.Wait()
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return // already exited
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// find returns the first log line whose message starts with prefix (nil
// if none).
func (p *proc) find(prefix string) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.logs {
		if msg, _ := m["@message"].(string); strings.HasPrefix(msg, prefix) {
			return m
		}
	}
	return nil
}

// count returns how many log lines have the message and the given fields.
func (p *proc) count(msg string, fields map[string]string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, m := range p.logs {
		if m["@message"] != msg {
			continue
		}
		ok := true
		for k, v := range fields {
			ok = ok && fmt.Sprint(m[k]) == v
		}
		if ok {
			n++
		}
	}
	return n
}

// deployment is certificates, a schema, owners' CSV files and ports.
type deployment struct {
	dir     string
	schema  string
	owners  []string
	csvs    map[string]string
	csps    []string // ports
	proxy   string
	threshd int
}

func newDeployment(t *testing.T, nOwners, nCSP, threshold int) *deployment {
	t.Helper()
	return newDeploymentOf(t, "wdbc", nOwners, nCSP, threshold)
}

// newDeploymentOf is newDeployment with a bundled dataset's rows.
func newDeploymentOf(t *testing.T, dataset string, nOwners, nCSP, threshold int) *deployment {
	t.Helper()
	d := &deployment{dir: t.TempDir(), csvs: map[string]string{}, threshd: threshold}
	ids := []string{"proxy/proxy", "user/alice"}
	for i := range nCSP {
		ids = append(ids, fmt.Sprintf("csp/csp-%d", i+1))
		d.csps = append(d.csps, freePort(t))
	}
	for i := range nOwners {
		o := fmt.Sprintf("hospital-%c", 'a'+i)
		d.owners = append(d.owners, o)
		ids = append(ids, "owner/"+o)
	}
	d.proxy = freePort(t)
	out, err := exec.Command(binary, append([]string{"certs", "--out", filepath.Join(d.dir, "certs")}, ids...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("fedpca certs: %v\n%s", err, out)
	}
	data, _ := datasets.CSV(dataset)
	sch, err := schema.Infer(bytes.NewReader(data), dataset, "label")
	if err != nil {
		t.Fatal(err)
	}
	d.schema = filepath.Join(d.dir, dataset+".schema.json")
	if err := os.WriteFile(d.schema, sch.Canonical(), 0o644); err != nil {
		t.Fatal(err)
	}
	parts, err := sim.Split(data, "label", nOwners, "iid", 7)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range d.owners {
		d.csvs[o] = filepath.Join(d.dir, o+".csv")
		if err := os.WriteFile(d.csvs[o], parts[i], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// committee is the committee policy flags of the deployment's owners and
// user: its members pinned, and the minimums lowered to its committee when
// that is smaller than the default policy's.
func (d *deployment) committee() []string {
	var ids []string
	for i := range d.csps {
		ids = append(ids, fmt.Sprintf("csp-%d", i+1))
	}
	return []string{"--committee", strings.Join(ids, ","), "--committee-min-members", fmt.Sprint(len(ids)), "--committee-min-threshold", fmt.Sprint(d.threshd)}
}

// policy is the committee policy of the committee flags: the members by
// the keys of their certificates.
func (d *deployment) policy(t *testing.T) job.CommitteePolicy {
	var pins []job.MemberPin
	for i := range d.csps {
		id := fmt.Sprintf("csp-%d", i+1)
		_, key, err := transport.NodeFingerprint(d.certs("csp", id))
		if err != nil {
			t.Fatal(err)
		}
		pins = append(pins, job.MemberPin{ID: id, Key: key})
	}
	return job.CommitteePolicy{Members: pins, MinMembers: len(pins), MinThreshold: d.threshd}
}

func (d *deployment) certs(role, id string) string {
	return filepath.Join(d.dir, "certs", role+"-"+id)
}

func (d *deployment) startCSP(t *testing.T, i int) *proc {
	id := fmt.Sprintf("csp-%d", i+1)
	return start(t, id, "csp", "serve", "--certs", d.certs("csp", id), "--state", filepath.Join(d.dir, "state", id),
		"--listen", d.csps[i], "--log-json", "--allow-no-noise")
}

// startCSPs starts every committee member.
func (d *deployment) startCSPs(t *testing.T) []*proc {
	var members []*proc
	for i := range d.csps {
		members = append(members, d.startCSP(t, i))
	}
	return members
}

func (d *deployment) startProxy(t *testing.T, extra ...string) *proc {
	args := []string{"proxy", "serve", "--certs", d.certs("proxy", "proxy"), "--state", filepath.Join(d.dir, "state", "proxy"),
		"--listen", d.proxy, "--threshold", fmt.Sprint(d.threshd), "--log-json", "--allow-no-noise"}
	for i, port := range d.csps {
		args = append(args, "--csp", fmt.Sprintf("csp-%d=%s", i+1, port))
	}
	return start(t, "proxy", append(args, extra...)...)
}

func (d *deployment) startOwner(t *testing.T, o string, extra ...string) *proc {
	return start(t, o, append(append([]string{"owner", "serve", "--certs", d.certs("owner", o), "--state", filepath.Join(d.dir, "state", o),
		"--proxy", d.proxy, "--dataset", d.schema + "=" + d.csvs[o], "--poll", "200ms", "--log-json", "--allow-no-noise"}, d.committee()...), extra...)...)
}

// userRun runs user run against the deployment (retrying while the
// committee's key ceremony has not finished) and returns its output, how
// long the last attempt took, and its error.
func (d *deployment) userRun(t *testing.T, extra ...string) (string, time.Duration, error) {
	t.Helper()
	keys := filepath.Join(d.dir, "keys")
	if _, err := os.Stat(keys); err != nil {
		if out, err := exec.Command(binary, "user", "keygen", "--keys", keys).CombinedOutput(); err != nil {
			t.Fatalf("keygen: %v\n%s", err, out)
		}
	}
	args := append(append([]string{"user", "run", "--certs", d.certs("user", "alice"), "--keys", keys, "--proxy", d.proxy, "--schema", d.schema}, d.committee()...), extra...)
	for attempt := 0; ; attempt++ {
		start := time.Now()
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "ceremony has not finished") || attempt == 100 {
			return string(out), time.Since(start), err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestProcesses starts the daemons as separate processes on loopback ports,
// with certificates from `fedpca certs`, runs `fedpca user run` and checks the
// files it writes.
func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeployment(t, 3, 3, 2)
	members := d.startCSPs(t)
	d.startProxy(t)
	for _, o := range d.owners {
		d.startOwner(t, o)
	}
	keys := filepath.Join(d.dir, "keys")
	if out, err := exec.Command(binary, "user", "keygen", "--keys", keys).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	out := filepath.Join(d.dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, binary, append([]string{"user", "run", "--certs", d.certs("user", "alice"), "--keys", keys, "--proxy", d.proxy,
		"--schema", d.schema, "--owners", strings.Join(d.owners, ","), "--analysis", "dca", "--epsilon", "1", "--noise-plan", "servers",
		"--tolerate", "1", "--out", out, "--publish", "--plots", filepath.Join(d.dir, "plots")}, d.committee()...)...)
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	// The committee may still be in its ceremony: retry until the proxy has a key.
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		run = exec.CommandContext(ctx, run.Path, run.Args[1:]...)
		stdout.Reset()
		stderr.Reset()
		run.Stdout, run.Stderr = &stdout, &stderr
		if err = run.Run(); err == nil || !strings.Contains(stderr.String(), "ceremony has not finished") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("user run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("user run:\n%s%s", stderr.String(), stdout.String())
	// Off a terminal: one line per change of the job, no progress bar.
	if !strings.Contains(stderr.String(), "3/3 owners uploaded") || strings.ContainsAny(stderr.String(), "\r█") {
		t.Errorf("user run's progress on a pipe:\n%s", stderr.String())
	}
	// One discriminant component (two classes): a scree plot, no scatter.
	for _, f := range []string{"wdbc-dca-scree.svg", "wdbc-dca-scree.png"} {
		if _, err := os.Stat(filepath.Join(d.dir, "plots", f)); err != nil {
			t.Errorf("user run --plots: %v", err)
		}
	}
	res, err := user.LoadResult(filepath.Join(out, user.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if res.Analysis != "dca" || res.NumOwners != 3 || res.Components == nil || len(res.Components.Eigenvalues) != 1 ||
		res.Privacy.Epsilon > 1+1e-9 || len(res.Privacy.Collusion) != 5 || res.Release == nil {
		t.Fatalf("result: %+v", res)
	}
	checkQualityPrinted(t, "user run", stdout.String(), res)
	csv, err := os.ReadFile(filepath.Join(out, user.ComponentsFile))
	if err != nil || !strings.HasPrefix(string(csv), "feature,mean,component_1\n") || strings.Count(string(csv), "\n") != 31 {
		t.Fatalf("components.csv: %v\n%s", err, csv)
	}
	if _, err := os.Stat(filepath.Join(out, user.ReleaseFile)); err != nil {
		t.Fatal(err)
	}
	// The offline re-analysis works on the saved release.
	again := exec.Command(binary, "user", "analyze", "--result", filepath.Join(out, user.ResultFile), "--analysis", "pca", "--k", "2", "--out", filepath.Join(d.dir, "again"))
	if b, err := again.CombinedOutput(); err != nil || !strings.Contains(string(b), "explained variance ratio") {
		t.Fatalf("user analyze: %v\n%s", err, b)
	}
	// An owner fetches the published result and projects its rows on it.
	pub := filepath.Join(d.dir, "published.json")
	if b, err := exec.Command(binary, "owner", "published", "--certs", d.certs("owner", d.owners[0]), "--proxy", d.proxy,
		"--out", pub, res.JobID).CombinedOutput(); err != nil {
		t.Fatalf("owner published: %v\n%s", err, b)
	}
	proj := exec.Command(binary, "owner", "project", "--result", pub, "--schema", d.schema,
		"--data", d.csvs[d.owners[0]], "--out", filepath.Join(d.dir, "proj.csv"), "--plots", filepath.Join(d.dir, "owner-plots"))
	if b, err := proj.CombinedOutput(); err != nil || !strings.Contains(string(b), "no scatter: the dca result has 1 component") {
		t.Fatalf("owner project: %v\n%s", err, b)
	}
	rows, _ := os.ReadFile(d.csvs[d.owners[0]])
	projected, err := os.ReadFile(filepath.Join(d.dir, "proj.csv"))
	if err != nil || !strings.HasPrefix(string(projected), "component_1,label\n") || strings.Count(string(projected), "\n") != strings.Count(string(rows), "\n") {
		t.Fatalf("owner project wrote (%v):\n%.200s", err, projected)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "owner-plots", "wdbc-dca-scree.png")); err != nil {
		t.Errorf("owner project --plots: %v", err)
	}
	// Each active member keeps an audit record of the switch.
	switched := 0
	for i, m := range members {
		m.stop()
		if !m.cmd.ProcessState.Success() {
			t.Errorf("csp-%d did not exit cleanly on SIGTERM: %v", i+1, m.cmd.ProcessState)
		}
		b, err := exec.Command(binary, "csp", "audit", "--state", filepath.Join(d.dir, "state", fmt.Sprintf("csp-%d", i+1))).Output()
		if err != nil {
			t.Fatalf("csp audit: %v", err)
		}
		if strings.Contains(string(b), res.JobID) && strings.Contains(string(b), `"user":"spiffe://fedpca/user/alice"`) {
			switched++
		}
	}
	if switched != 2 {
		t.Errorf("%d members have an audit record of the switch, want the 2 active ones", switched)
	}
}

// TestProxyKilled: the proxy is killed with SIGKILL after some acknowledged
// uploads and restarted; the job completes with every acknowledged upload
// and no owner uploads again.
func TestProxyKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeployment(t, 5, 1, 1)
	d.startCSP(t, 0)
	px := d.startProxy(t)
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := transport.LoadCredentials(d.certs("user", "alice"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := user.GenerateKeys(filepath.Join(d.dir, "keys"), p)
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.NewClient(user.Config{Dialer: transport.Dialer{Creds: creds}, ProxyAddr: d.proxy, Keys: kp, Committee: d.policy(t), Params: &p})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, _ := os.ReadFile(d.schema)
	sch, _ := schema.Parse(b)
	var spec *job.Spec
	for {
		spec, err = u.Spec(ctx, user.Request{Schema: sch, Analysis: "pca", K: 3, NoNoise: true, Owners: d.owners, Deadline: time.Now().Add(5 * time.Minute)})
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}
	// Three owners upload; wait for their acknowledgements.
	early := d.owners[:3]
	var owners []*proc
	for _, o := range early {
		owners = append(owners, d.startOwner(t, o))
	}
	waitFor(t, ctx, func() bool { return px.count("upload included", nil) == 3 })
	px.kill()
	t.Log("proxy killed after 3 acknowledged uploads")
	// The others come up while the proxy is down; then it restarts.
	for _, o := range d.owners[3:] {
		owners = append(owners, d.startOwner(t, o))
	}
	time.Sleep(500 * time.Millisecond)
	px2 := d.startProxy(t)
	st, err := u.Wait(ctx, spec.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		t.Fatalf("job %s: %s", st.GetState(), st.GetReason())
	}
	if got := strings.Join(st.GetUploadedOwners(), ","); got != strings.Join(d.owners, ",") {
		t.Fatalf("uploaded owners %s", got)
	}
	res, err := u.Fetch(ctx, spec, sch)
	if err != nil {
		t.Fatal(err)
	}
	if res.NumOwners != 5 || res.NoisyN < 568.9 || res.NoisyN > 569.1 {
		t.Fatalf("result: %d owners, n = %v (wdbc has 569 rows)", res.NumOwners, res.NoisyN)
	}
	// No re-upload: the restarted proxy included only the two late owners,
	// and every owner's upload was acknowledged exactly once, never again.
	if n := px2.count("upload included", nil); n != 2 {
		t.Errorf("restarted proxy included %d uploads, want the 2 late owners'", n)
	}
	for i, op := range owners {
		if n := op.count("upload acknowledged", nil); n != 1 {
			t.Errorf("owner %s: %d acknowledgements, want 1", d.owners[i], n)
		}
		if n := op.count("share computed", nil); n != 1 {
			t.Errorf("owner %s computed its share %d times", d.owners[i], n)
		}
	}
}

func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("timed out")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestPowerProcesses: user run --method power against the daemons as
// processes (wine, 3 owners, a 2-of-3 committee): the parent job and its
// rounds run, the result is written as a components result is, with the
// power method's account, and each owner's ledger holds one entry, the
// parent's, committed at the composed cost within the job's epsilon.
func TestPowerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeploymentOf(t, "wine", 3, 3, 2)
	d.startCSPs(t)
	d.startProxy(t)
	for _, o := range d.owners {
		d.startOwner(t, o)
	}
	out := filepath.Join(d.dir, "out")
	text, took, err := d.userRun(t, "--owners", strings.Join(d.owners, ","), "--method", "power", "-k", "2", "--oversample", "3", "--rounds", "2",
		"--epsilon", "1", "--round-window", "2m", "--out", out)
	if err != nil {
		t.Fatalf("user run --method power: %v\n%s", err, text)
	}
	t.Logf("user run --method power (%.1f s):\n%s", took.Seconds(), text)
	res, err := user.LoadResult(filepath.Join(out, user.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if res.Released != job.ReleasePower || res.Power == nil || len(res.Power.Each) != 3 || res.Output == nil || len(res.Output.Eigenvalues) != 2 ||
		res.Privacy.Cost == nil || res.Privacy.Epsilon > 1 || res.Privacy.Epsilon < 0.99 {
		t.Fatalf("result: released %q, power %+v, output %v, privacy %+v", res.Released, res.Power, res.Output, res.Privacy)
	}
	if !strings.Contains(text, "by the power method (p = 5, 2 rounds after round 0, svd)") || !strings.Contains(text, "all 3 rounds composed, charged once") {
		t.Errorf("user run's summary:\n%s", text)
	}
	for _, f := range []string{user.ComponentsFile, user.ComponentsNPYFile, user.EigenvaluesNPYFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// user fetch follows the job again from its parent: the same rounds,
	// released once, give the same result.
	again := filepath.Join(d.dir, "again")
	b, err := exec.Command(binary, "user", "fetch", "--certs", d.certs("user", "alice"), "--keys", filepath.Join(d.dir, "keys"), "--proxy", d.proxy,
		"--out", again, res.JobID[:12]).CombinedOutput()
	if err != nil {
		t.Fatalf("user fetch of the power job: %v\n%s", err, b)
	}
	res2, err := user.LoadResult(filepath.Join(again, user.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res2.Output.Eigenvalues, res.Output.Eigenvalues) || len(res2.Power.Each) != 3 {
		t.Errorf("user fetch: eigenvalues %v in %d rounds, the run's %v", res2.Output.Eigenvalues, len(res2.Power.Each), res.Output.Eigenvalues)
	}
	b, err = exec.Command(binary, "owner", "ledger", "--json", "--state", filepath.Join(d.dir, "state", d.owners[0])).CombinedOutput()
	if err != nil {
		t.Fatalf("owner ledger: %v\n%s", err, b)
	}
	var views []struct {
		Jobs []struct {
			Job   string
			State string
			Cost  struct{ Epsilon float64 }
		}
	}
	if err := json.Unmarshal(b, &views); err != nil || len(views) != 1 || len(views[0].Jobs) != 1 {
		t.Fatalf("owner ledger --json: %v\n%s", err, b)
	}
	if e := views[0].Jobs[0]; e.Job != res.JobID || e.State != "committed" || e.Cost.Epsilon > 1+1e-9 || e.Cost.Epsilon < 0.99 {
		t.Errorf("the ledger's entry %+v, want the parent job %s committed at epsilon 1", e, res.JobID)
	}
}
