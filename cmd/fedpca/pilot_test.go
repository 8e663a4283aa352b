package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/user"
)

// TestHospitalPilot (issue 43) walks a three-hospital pilot as separate
// processes, where its defects were seen: one hospital exports with ';'
// and decimal commas (its source's format, the schema unchanged), one caps
// epsilon per job. A standardised PCA says its explained variance is out
// of d; an LDA warns per component; a decline reaches the user with the
// owner's limit, a schema mismatch with the field that differs;
// max-owner-rows is printed only when given; a running member's switch
// records and a running owner's ledger are read from their state
// directories; the proxy logs a member going down and coming back once.
func TestHospitalPilot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeploymentOf(t, "wine", 3, 3, 2)
	// hospital-c exports with ';' and decimal commas.
	c := d.csvs["hospital-c"]
	raw, _ := os.ReadFile(c)
	comma := strings.ReplaceAll(strings.ReplaceAll(string(raw), ",", ";"), ".", ",")
	if err := os.WriteFile(c, []byte(comma), 0o644); err != nil {
		t.Fatal(err)
	}
	d.csvs["hospital-c"] = c + "#decimal_comma=true"
	members := d.startCSPs(t)
	px := d.startProxy(t)
	d.startOwner(t, "hospital-a")
	d.startOwner(t, "hospital-b", "--max-epsilon", "0.5")
	d.startOwner(t, "hospital-c")
	out := func(name string) string { return filepath.Join(d.dir, name) }

	// A standardised PCA at epsilon 1: hospital-b declines with its limit.
	text, _, err := d.userRun(t, "--owners", strings.Join(d.owners, ","), "--min-owners", "2", "--epsilon", "1", "--standardize", "-k", "3", "--out", out("pca"))
	if err != nil {
		t.Fatalf("user run --standardize: %v\n%s", err, text)
	}
	t.Logf("user run --standardize:\n%s", text)
	res, err := user.LoadResult(filepath.Join(out("pca"), user.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	c3 := res.Components
	if !res.Standardized || c3.TotalVariance != 13 || strings.Join(res.Owners, ",") != "hospital-a,hospital-c" {
		t.Fatalf("standardised result: %v, total variance %v, owners %v", res.Standardized, c3.TotalVariance, res.Owners)
	}
	for i, v := range c3.Eigenvalues {
		if math.Abs(c3.ExplainedVarianceRatio[i]-v/13) > 1e-12 {
			t.Errorf("ratio %d is %v, eigenvalue %v out of 13 is %v", i+1, c3.ExplainedVarianceRatio[i], v, v/13)
		}
	}
	for _, want := range []string{"explained variance ratio (of d = 13, the trace of the correlation matrix):",
		"owner hospital-b declined (policy): the owner's policy refuses this job (its epsilon, delta or noise): its epsilon is above the owner's limit of 0.5 per job (owner serve --max-epsilon)"} {
		if !strings.Contains(text, want) {
			t.Errorf("user run --standardize does not say %q", want)
		}
	}
	if strings.Contains(text, "max-owner-rows") {
		t.Errorf("user run printed the row cap nobody set and no source reaches:\n%s", text)
	}
	checkQualityPrinted(t, "user run --standardize", text, res)
	// All of hospital-c's rows were read, decimal commas and all.
	a, _ := os.ReadFile(d.csvs["hospital-a"])
	if n := float64(strings.Count(string(a)+comma, "\n") - 2); math.Abs(res.NoisyN-n) > 5*res.Quality.NoisyNStd {
		t.Errorf("noisy n %.1f, the two hospitals hold %.0f rows", res.NoisyN, n)
	}

	// An LDA of the two hospitals that take part: a warning for each
	// component the noise may turn, with the angles in result.json.
	text, _, err = d.userRun(t, "--owners", "hospital-a,hospital-c", "--analysis", "lda", "--epsilon", "1", "--max-owner-rows", "1000", "--out", out("lda"))
	if err != nil {
		t.Fatalf("user run --analysis lda: %v\n%s", err, text)
	}
	t.Logf("user run --analysis lda:\n%s", text)
	res, err = user.LoadResult(filepath.Join(out("lda"), user.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Quality; q == nil || len(q.DirectionNoise) != 2 || len(q.ComponentEigenvalueStd) != 2 || !strings.Contains(text, "directions turned by about") {
		t.Errorf("LDA quality %+v", res.Quality)
	}
	checkQualityPrinted(t, "user run --analysis lda", text, res)
	if !strings.Contains(text, "max-owner-rows: 1000 (as given;") {
		t.Errorf("user run --max-owner-rows 1000 does not say the cap")
	}

	// A job under a schema whose bounds differ: every owner declines, and
	// the job fails saying which field of which feature.
	b, _ := os.ReadFile(d.schema)
	other, _ := schema.Parse(b)
	lo := fixedpoint.MustDecimal("-100")
	other.Features[4].Min = &lo
	otherPath := out("other.schema.json")
	os.WriteFile(otherPath, other.Canonical(), 0o644)
	args := []string{"user", "run", "--certs", d.certs("user", "alice"), "--keys", filepath.Join(d.dir, "keys"), "--proxy", d.proxy, "--schema", otherPath,
		"--owners", "hospital-a,hospital-c", "--epsilon", "0.5", "--out", out("other")}
	failed, err := exec.Command(binary, append(args, d.committee()...)...).CombinedOutput()
	want := fmt.Sprintf("owner hospital-a declined (schema_mismatch): the owner does not serve this dataset with this schema: it reads features[4] (%s) otherwise, its \"min\" differs from the job's schema", other.Features[4].Name)
	if err == nil || !strings.Contains(string(failed), want) {
		t.Errorf("a job under other bounds: %v, want %q:\n%s", err, want, failed)
	}

	// Each member's switch records, read while it runs: two members
	// switched each of the two jobs.
	switched := 0
	for i := range members {
		b, err := exec.Command(binary, "csp", "audit", "--state", filepath.Join(d.dir, "state", fmt.Sprintf("csp-%d", i+1))).Output()
		if err != nil {
			t.Fatalf("csp audit of a running member: %v", err)
		}
		switched += strings.Count(string(b), `"job_id"`)
	}
	if switched != 4 {
		t.Errorf("%d switch records on the running members, want 2 jobs x 2 members", switched)
	}

	// hospital-a's ledger, read while it runs and once it is stopped.
	ledger := func(extra ...string) string {
		b, err := exec.Command(binary, append([]string{"owner", "ledger", "--state", filepath.Join(d.dir, "state", "hospital-a")}, extra...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("owner ledger: %v\n%s", err, b)
		}
		return string(b)
	}
	live := ledger()
	t.Logf("owner ledger:\n%s", live)
	var views []struct {
		Jobs []struct {
			State string
			Cost  struct{ Epsilon float64 }
		}
	}
	if err := json.Unmarshal([]byte(ledger("--json")), &views); err != nil || len(views) != 1 || len(views[0].Jobs) != 2 {
		t.Fatalf("owner ledger --json: %v %+v", err, views)
	}
	for _, j := range views[0].Jobs {
		if j.State != "committed" || !(j.Cost.Epsilon > 0.99 && j.Cost.Epsilon <= 1+1e-9) {
			t.Errorf("ledger entry %+v, want committed at epsilon 1", j)
		}
	}
	if !strings.Contains(live, "the running owner's") || !strings.Contains(live, "committed") {
		t.Errorf("owner ledger of a running owner:\n%s", live)
	}

	// A member goes down between jobs and comes back: logged once each.
	members[2].kill()
	deadline := time.Now().Add(40 * time.Second)
	for px.count("committee member down", map[string]string{"member": "csp-3"}) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the proxy never logged csp-3 going down")
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.startCSP(t, 2)
	for px.count("committee member up", map[string]string{"member": "csp-3"}) < 2 {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatal("the proxy never logged csp-3 coming back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := px.count("committee member down", map[string]string{"member": "csp-3"}); n != 1 {
		t.Errorf("the proxy logged csp-3 down %d times, want once", n)
	}
}
