package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/encoding/prototext"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/user"
)

// TestRowCountNotLeaked reproduces the row-count attack: a user who could
// vary max_owner_rows around an owner's row count and see whether the owner
// declines (before the fix, an owner refused a job when its rows reached
// the cap, and the refusal carried the count) learns the count for free
// (a job that fails before the key switch is refunded). Now every job sees
// the same outcome from the owner, an upload, whatever the cap, and the
// release is the exact sum of each owner's first max_owner_rows rows.
func TestRowCountNotLeaked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:2]
	n := int64(bytes.Count(owners[0].CSV, []byte("\n")) - 1)
	cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners, AllowNoNoise: true, Logger: testLogger(t)}, "mallory")
	var outcomes []string
	for cap := n - 2; cap <= n+2; cap++ {
		spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, NoNoise: true, Owners: []string{owners[0].ID, owners[1].ID},
			Deadline: time.Now().Add(time.Minute), MaxOwnerRows: cap})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.Submit(ctx, spec, sch); err != nil {
			t.Fatal(err)
		}
		// The release is the exact sum of each owner's first cap rows.
		st, _ := finishExact(ctx, t, u, spec, sch, owners[0].CSV, owners[1].CSV)
		outcome := fmt.Sprintf("state %s, uploaded %v, declined %v", st.GetState(), st.GetUploadedOwners(), st.GetDeclinedOwners())
		t.Logf("max_owner_rows %d (%s has %d rows): %s", cap, owners[0].ID, n, outcome)
		outcomes = append(outcomes, outcome)
	}
	for _, o := range outcomes[1:] {
		if o != outcomes[0] {
			t.Fatalf("the owner's outcome depends on max_owner_rows around its row count:\n%s", strings.Join(outcomes, "\n"))
		}
	}
	// The owner knows what it left out; nobody else does.
	recs, err := cl.Owner(owners[0].ID).JobRecords()
	if err != nil || len(recs) != 5 {
		t.Fatalf("records %v %v", recs, err)
	}
	dropped := map[int64]bool{}
	for _, r := range recs {
		if r.Read == nil || r.Read.Rows+r.Read.Dropped != n || r.Read.Clipped > r.Read.Rows {
			t.Fatalf("%s's record of job %s: %+v", owners[0].ID, r.Job[:12], r.Read)
		}
		dropped[r.Read.Dropped] = true
	}
	if len(dropped) != 3 { // 2, 1 and 0 rows dropped
		t.Errorf("dropped counts %v, want 2, 1 and 0", dropped)
	}
}

// lockedBuffer is a log sink for several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNothingLeavesOwnerButCodes puts sentinel strings where an owner's
// data can go wrong: a cell that is not a number, a label not in the
// schema, a data source that cannot be opened (its error names a path), a
// file whose header misses a feature. The owners with bad rows skip them
// and upload; the others decline with a code. No sentinel appears anywhere
// outside the owners: not in the proxy's, the committee's or the user's
// logs, the proxy's or members' stores, the status page or /status.json,
// the job statuses the user receives or the result it writes; the owners'
// own logs and records have the detail.
func TestNothingLeavesOwnerButCodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:4]
	const (
		cell   = "SENTINEL-CELL-7731"
		label  = "SENTINEL-LABEL-4412"
		path   = "/nonexistent/SENTINEL-PATH-9902/rows.csv"
		header = "SENTINEL-HEADER-5150"
	)
	sentinels := []string{cell, label, "SENTINEL-PATH-9902", header}
	// hospital-a: a bad cell and an unknown label among its rows.
	lines := strings.SplitAfter(string(owners[0].CSV), "\n")
	cols := strings.Split(strings.TrimSpace(lines[1]), ",")
	hdr := strings.Split(strings.TrimSpace(lines[0]), ",")
	badCell, badLabel := append([]string{}, cols...), append([]string{}, cols...)
	for i, h := range hdr {
		if h == "label" {
			badLabel[i] = label
		} else if h == sch.Features[3].Name {
			badCell[i] = cell
		}
	}
	owners[0].CSV = []byte(lines[0] + strings.Join(badCell, ",") + "\n" + strings.Join(lines[1:3], "") + strings.Join(badLabel, ",") + "\n" + strings.Join(lines[3:], ""))
	// hospital-c: its data source cannot be opened.
	owners[2].Open = func() (io.ReadCloser, error) { return os.Open(path) }
	// hospital-d: its header misses a feature.
	owners[3].CSV = bytes.Replace(owners[3].CSV, []byte(sch.Features[0].Name+","), []byte(header+","), 1)

	logs := &lockedBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, JSONFormat: true, Output: logs})
	dir := t.TempDir()
	cl, u := startUser(ctx, t, Config{Dir: dir, CSPs: 3, Threshold: 2, Owners: owners, AllowNoNoise: true, Logger: log}, "alice")
	spec, full := submitWait(ctx, t, u, sch, user.Request{Analysis: job.DCA, NoNoise: true, Owners: IDs(owners), MinOwners: 2})
	var seen bytes.Buffer // everything the user receives
	seen.WriteString(prototext.Format(full))
	st := full
	declined := map[string]fedpcav1.DeclineReason{}
	for _, d := range full.GetDeclinedOwners() {
		declined[d.GetOwner()] = d.GetReason()
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE || strings.Join(full.GetUploadedOwners(), ",") != "hospital-a,hospital-b" ||
		declined["hospital-c"] != fedpcav1.DeclineReason_DECLINE_REASON_UNAVAILABLE || declined["hospital-d"] != fedpcav1.DeclineReason_DECLINE_REASON_SCHEMA_MISMATCH {
		t.Fatalf("job %s, uploaded %v, declined %v", st.GetState(), full.GetUploadedOwners(), declined)
	}
	res, err := u.Fetch(ctx, spec, sch)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	seen.Write(doc)
	outDir := t.TempDir()
	if _, err := user.WriteOutputs(outDir, res); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(cl.Proxy().StatusHandler())
	defer srv.Close()
	var pages bytes.Buffer
	for _, p := range []string{"/", "/status.json", "/jobs/" + spec.ID()} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", p, resp.Status)
		}
		pages.Write(b)
	}
	if !strings.Contains(pages.String(), "schema_mismatch") {
		t.Error("the status page does not show hospital-d's decline code")
	}

	// The owners' own logs and records have the detail (the test can see it).
	recs, err := cl.Owner("hospital-c").JobRecords()
	if err != nil || len(recs) != 1 || recs[0].Code != "unavailable" || !strings.Contains(recs[0].Reason, "SENTINEL-PATH-9902") {
		t.Errorf("hospital-c's record: %+v %v", recs, err)
	}
	cl.Stop()
	var ownerLines, otherLines int
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		module, _ := rec["@module"].(string)
		if strings.HasPrefix(module, "owner") {
			if strings.Contains(line, cell) || strings.Contains(line, label) {
				ownerLines++
			}
			continue
		}
		otherLines++
		for _, s := range sentinels {
			if strings.Contains(line, s) {
				t.Errorf("%q left the owners, in the %s log: %s", s, module, line)
			}
		}
	}
	if ownerLines == 0 || otherLines == 0 {
		t.Fatalf("log lines with the owners' sentinels %d, other lines %d: the test does not see the logs", ownerLines, otherLines)
	}
	for what, b := range map[string][]byte{"what the user received": seen.Bytes(), "the status page": pages.Bytes()} {
		for _, s := range sentinels {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%q is in %s", s, what)
			}
		}
	}
	// Every file of the proxy, the members, the user and the outputs.
	var files int
	for _, root := range []string{filepath.Join(dir, "state"), outDir} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.Contains(p, string(filepath.Separator)+"owner-") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			for _, s := range sentinels {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%q is in %s", s, p)
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if files < 5 {
		t.Fatalf("only %d files checked", files)
	}
}

// TestOwnerCapsDelta: an owner refuses a job whose delta is above its
// per-job limit (--max-delta; by default the deployment's 1e-6) with the
// policy code and, for the user (issue 43), the limit and its value, and
// takes part in one within it.
func TestOwnerCapsDelta(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, false)
	owners = owners[:2]
	owners[1].Policy.MaxDelta = 1e-7
	_, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners, Logger: testLogger(t)}, "alice")
	ids := IDs(owners)
	for _, tc := range []struct {
		delta    float64
		uploaded string
	}{
		{1e-5, ""},                     // above both: the default 1e-6 and 1e-7
		{1e-6, owners[0].ID},           // the default limit admits it
		{1e-7, strings.Join(ids, ",")}, // within both
	} {
		_, st := submitWait(ctx, t, u, sch, user.Request{Analysis: job.PCA, K: 2, Epsilon: 1, Delta: tc.delta, Owners: ids, MinOwners: 1})
		if got := strings.Join(st.GetUploadedOwners(), ","); got != tc.uploaded {
			t.Errorf("delta %g: uploaded %q, want %q", tc.delta, got, tc.uploaded)
		}
		limits := map[string]float64{owners[0].ID: 1e-6, owners[1].ID: 1e-7}
		for _, d := range st.GetDeclinedOwners() {
			if d.GetReason() != fedpcav1.DeclineReason_DECLINE_REASON_POLICY {
				t.Errorf("delta %g: %s declined with %s, want policy", tc.delta, d.GetOwner(), d.GetReason())
			}
			if det := d.GetDetail(); det.GetLimit() != fedpcav1.PolicyLimit_POLICY_LIMIT_MAX_DELTA || det.GetLimitValue() != limits[d.GetOwner()] {
				t.Errorf("delta %g: %s said %v, want its max_delta %g", tc.delta, d.GetOwner(), det, limits[d.GetOwner()])
			}
		}
	}
}
