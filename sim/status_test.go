package sim

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// TestStatusPage runs a job that names three owners of which only two run:
// after their uploads the job stays open, and the proxy's status page (HTML
// and JSON) shows it with its owners, who uploaded and who is awaited, the
// counts and the owners' budget reports; the metrics agree. Cancelled,
// the job's budget shows refunded.
func TestStatusPage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, false)
	running := owners[:2]
	cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 3, Threshold: 2, Owners: running, Users: []string{"alice"}, Identities: []string{"owner/hospital-z"}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	u, err := cl.User("alice")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 3, Epsilon: 1, MinOwners: 2,
		Owners: []string{running[0].ID, running[1].ID, "hospital-z"}, Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}
	id := spec.ID()

	srv := httptest.NewServer(cl.Proxy().StatusHandler())
	defer srv.Close()
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s, %v: %.300s", path, resp.Status, err, b)
		}
		return string(b)
	}
	var st proxy.Status
	for {
		if err := json.Unmarshal([]byte(get("/status.json")), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Jobs) == 1 && st.Jobs[0].OwnersUploaded == 2 && len(st.Budgets) == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the two uploads never showed: %+v", st.Jobs)
		case <-time.After(50 * time.Millisecond):
		}
	}

	j := st.Jobs[0]
	if j.ID != id || j.State != "open" || j.Analysis != "pca" || j.K != 3 || j.Dataset != "wdbc" || j.User != "spiffe://fedpca/user/alice" ||
		j.Epsilon != 1 || j.MinOwners != 2 || j.OwnersExpected != 3 || j.OwnersUploaded != 2 || j.OwnersDeclined != 0 ||
		j.DeadlineInSeconds < 3000 || j.DeadlineInSeconds > 3600 || j.AgeSeconds < 0 || j.AgeSeconds > 300 {
		t.Errorf("job status: %+v", j)
	}
	want := map[string]string{"hospital-z": proxy.OwnerWaiting, running[0].ID: proxy.OwnerUploaded, running[1].ID: proxy.OwnerUploaded}
	if len(j.Owners) != 3 || j.Owners[0].ID != "hospital-z" {
		t.Errorf("owners (the awaited one first): %+v", j.Owners)
	}
	for _, o := range j.Owners {
		if o.State != want[o.ID] || (o.State == proxy.OwnerUploaded) == o.At.IsZero() {
			t.Errorf("owner %+v, want state %q", o, want[o.ID])
		}
	}
	for _, b := range st.Budgets {
		if b.Dataset != "wdbc" || b.RhoBudget <= 0 || b.RhoSpent+b.RhoReserved <= 0 || b.RhoRemaining >= b.RhoBudget || b.Reported.IsZero() {
			t.Errorf("budget report %+v", b)
		}
		// Shown as epsilon at the owner's delta too, the unit operators set.
		if b.Delta != 1e-6 || math.Abs(b.EpsilonBudget-100) > 1e-3 || b.EpsilonRemaining >= b.EpsilonBudget || b.EpsilonRemaining <= 0 {
			t.Errorf("budget in epsilon: %+v", b)
		}
	}
	c := st.Committee
	if !c.Ready || c.Threshold != 2 || c.Size != 3 || len(c.Members) != 3 || c.Healthy != 3 || c.KeyFingerprint != spec.CommitteeKey {
		t.Errorf("committee: %+v", c)
	}
	for _, m := range c.Members {
		if !m.Reachable || !m.HoldsKey || m.LastContact.IsZero() || m.Error != "" {
			t.Errorf("member %+v", m)
		}
	}
	// Public information only: nothing key- or ciphertext-sized.
	if raw := get("/status.json"); regexp.MustCompile(`[A-Za-z0-9+/=]{200,}`).MatchString(raw) {
		t.Errorf("status.json carries a long encoded blob")
	}

	page := get("/")
	for _, s := range []string{`href="/jobs/` + id + `"`, "2 of 3 uploaded", "min 2", `class="state open"`,
		`<li class="owner uploaded" title="uploaded">` + running[0].ID + `</li>`,
		`<li class="owner uploaded" title="uploaded">` + running[1].ID + `</li>`,
		`<li class="owner waiting" title="waiting">hospital-z</li>`, "csp/csp-3", "user/alice", "ε 100 · ρ "} {
		if !strings.Contains(page, s) {
			t.Errorf("the overview lacks %q", s)
		}
	}
	jobPage := get("/jobs/" + id)
	for _, s := range []string{id, "2 of 3 uploaded", "hospital-z", running[0].ID, "ε 1"} {
		if !strings.Contains(jobPage, s) {
			t.Errorf("the job page lacks %q", s)
		}
	}
	// A prefix, as the CLI takes, leads to the job's page.
	if byPrefix := get("/jobs/" + id[:8]); !strings.Contains(byPrefix, id) || !strings.Contains(byPrefix, "hospital-z") {
		t.Errorf("the page of prefix %s is not the job's:\n%.300s", id[:8], byPrefix)
	}
	var one proxy.Status
	if err := json.Unmarshal([]byte(get("/status.json?job="+id)), &one); err != nil || len(one.Jobs) != 1 || one.Jobs[0].ID != id {
		t.Errorf("status.json?job=: %v, %+v", err, one.Jobs)
	}

	uploads, err := transport.Scrape(cl.proxyMetrics.Registry, "fedpca_proxy_uploads_total")
	if err != nil || uploads["result=included"] != 2 {
		t.Errorf("fedpca_proxy_uploads_total: %v, %v", uploads, err)
	}
	budgets, err := transport.Scrape(cl.proxyMetrics.Registry, "fedpca_proxy_owner_budget_rho")
	if err != nil || budgets["dataset=wdbc,kind=remaining,owner="+running[0].ID] <= 0 {
		t.Errorf("fedpca_proxy_owner_budget_rho: %v, %v", budgets, err)
	}
	jobs, err := transport.Scrape(cl.proxyMetrics.Registry, "fedpca_proxy_jobs")
	if err != nil || jobs["state=open"] != 1 {
		t.Errorf("fedpca_proxy_jobs: %v, %v", jobs, err)
	}

	// Once the job ends, each owner settles its part and reports its budget
	// again: the cancelled job is refunded, nothing stays reserved (the
	// reports sent with the uploads said reserved).
	if _, err := u.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	for {
		st = proxy.Status{} // fields left out as zero must read as zero
		if err := json.Unmarshal([]byte(get("/status.json")), &st); err != nil {
			t.Fatal(err)
		}
		settled := len(st.Budgets) == 2
		for _, b := range st.Budgets {
			settled = settled && b.RhoReserved == 0 && b.RhoSpent == 0 && b.EpsilonSpentAndReserved == 0
		}
		if settled {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("budgets after the job was cancelled: %+v", st.Budgets)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
