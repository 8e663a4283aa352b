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

	"github.com/fedpca/fedpca/protocol/analysis"
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
// First the profile job, which with this few rows advises public
// reference scales and says what the main job is expected to capture.
func TestHospitalPilot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	d := newDeploymentOf(t, "wine", 3, 3, 2)
	// The hospitals declare public bounds: ten deviations either side.
	b, _ := os.ReadFile(d.schema)
	declared, _ := schema.Parse(b)
	for i, f := range declared.Features {
		c, _ := f.Center.Rat().Float64()
		s, _ := f.Scale.Rat().Float64()
		lo, hi := fixedpoint.MustDecimal(fmt.Sprintf("%.6g", c-10*s)), fixedpoint.MustDecimal(fmt.Sprintf("%.6g", c+10*s))
		declared.Features[i].Min, declared.Features[i].Max = &lo, &hi
	}
	if err := os.WriteFile(d.schema, declared.Canonical(), 0o644); err != nil {
		t.Fatal(err)
	}
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

	// The profile job (three rounds) of the two hospitals that take part.
	profileArgs := append([]string{"user", "profile", "--certs", d.certs("user", "alice"), "--keys", filepath.Join(d.dir, "keys"), "--proxy", d.proxy,
		"--schema", d.schema, "--owners", "hospital-a,hospital-c", "--epsilon", "1", "--out", out("profile")}, d.committee()...)
	if out, err := exec.Command(binary, "user", "keygen", "--keys", filepath.Join(d.dir, "keys")).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	var ptext []byte
	var err error
	for range 100 { // the committee may still be in its ceremony
		if ptext, err = exec.Command(binary, profileArgs...).CombinedOutput(); err == nil || !strings.Contains(string(ptext), "ceremony has not finished") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("user profile: %v\n%s", err, ptext)
	}
	t.Logf("user profile:\n%s", ptext)
	var prof struct {
		Advice struct {
			PublicScales bool    `json:"public_scales"`
			RowsPerNoise float64 `json:"rows_per_noise"`
		}
	}
	if b, err := os.ReadFile(filepath.Join(out("profile"), "profile.json")); err != nil || json.Unmarshal(b, &prof) != nil {
		t.Fatalf("profile.json: %v", err)
	}
	// At about 110 rows the spreads are at the noise's level: public scales
	// are advised, with the band measured at this many rows per unit of noise.
	if !prof.Advice.PublicScales || prof.Advice.RowsPerNoise > 100 || !strings.Contains(string(ptext), "--keep-scales --epsilon") ||
		!strings.Contains(string(ptext), "0.10 to 0.62 less than public scales") {
		t.Errorf("user profile at %.0f rows per unit of noise, public scales advised %v:\n%s", prof.Advice.RowsPerNoise, prof.Advice.PublicScales, ptext)
	}

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
		// Out of d = 13, each eigenvalue less what the noise adds to it.
		if want := analysis.Supported(v, res.Quality.CorrelationNoiseNorm) / 13; math.Abs(c3.ExplainedVarianceRatio[i]-want) > 1e-12 {
			t.Errorf("ratio %d is %v, eigenvalue %v less the noise's part out of 13 is %v", i+1, c3.ExplainedVarianceRatio[i], v, want)
		}
	}
	for _, want := range []string{"explained variance ratio (of d = 13, the trace of the correlation matrix; each eigenvalue less what the noise adds to it):",
		"owner hospital-b declined (policy): the owner's policy refuses this job (its epsilon, delta, noise or what it releases): its epsilon is above the owner's limit of 0.5 per job (owner serve --max-epsilon)"} {
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
	b, _ = os.ReadFile(d.schema)
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
	if switched != 10 {
		t.Errorf("%d switch records on the running members, want 5 jobs (3 of the profile) x 2 members", switched)
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
	if err := json.Unmarshal([]byte(ledger("--json")), &views); err != nil || len(views) != 1 || len(views[0].Jobs) != 5 {
		t.Fatalf("owner ledger --json: %v %+v", err, views)
	}
	for i, j := range views[0].Jobs {
		// The profile's three rounds, then the two main jobs at epsilon 1.
		if j.State != "committed" || i >= 3 && !(j.Cost.Epsilon > 0.99 && j.Cost.Epsilon <= 1+1e-9) || i < 3 && !(j.Cost.Epsilon < 0.3) {
			t.Errorf("ledger entry %d %+v, want committed, at epsilon 1 for the main jobs", i, j)
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
