package owner

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
)

func testOwner(t testing.TB) *Owner {
	t.Helper()
	csv := "a,b,label\n1,2,x\n2,1,y\n3,3,x\n"
	sch, err := schema.Infer(strings.NewReader(csv), "ds", "label")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "rows.csv")
	if err := transport.WriteFileAtomic(path, []byte(csv)); err != nil {
		t.Fatal(err)
	}
	o, err := New(Config{Dialer: transport.Dialer{Insecure: true, Self: transport.Identity{Role: transport.RoleOwner, ID: "o1"}},
		ProxyAddr: "passthrough:///nowhere", Store: filepath.Join(dir, "state"),
		Datasets: []*Dataset{{Schema: sch, CSV: path, Epsilon: 10, Delta: 1e-6}}, Policy: Policy{Committee: job.CommitteePolicy{AnyMembers: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.db.Close() })
	return o
}

// TestReservationReleasedAfterRestart: an owner that stopped between
// reserving budget for a job and storing its upload (two transactions; a
// SIGKILL, or a stop while computing) has a reservation and no record of the
// job. The job ends while it is down. On restart it must find the job
// (pending) and release the reservation; it used to skip the ended job and
// keep the reservation forever.
func TestReservationReleasedAfterRestart(t *testing.T) {
	o := testOwner(t)
	id := strings.Repeat("ab", 32)
	if _, err := o.ledger.Reserve("ds", id, dp.Cost{Rho: 0.25}, 1, 1e-6, ""); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(o.pending(), id) {
		t.Fatalf("pending %v does not include the job with a reservation and no note", o.pending())
	}
	o.handle(context.Background(), &fedpcav1.JobStatus{JobId: id, Dataset: "ds", State: fedpcav1.JobState_JOB_STATE_FAILED, Reason: "deadline"})
	bal, err := o.Balance("ds")
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := o.Ledger("ds")
	recs, _ := o.JobRecords()
	if bal.Reserved != 0 || bal.Spent != 0 || len(entries) != 1 || entries[0].State != Released ||
		len(recs) != 1 || recs[0].State != PartSkipped || len(o.pending()) != 0 {
		t.Fatalf("after the job ended: balance %+v, entries %+v, records %+v, pending %v", bal, entries, recs, o.pending())
	}
}

// TestPendingFollowsTheStore: pending's answer is kept between calls, and
// every change of the store (a reservation, a note, a release) is in the
// next answer.
func TestPendingFollowsTheStore(t *testing.T) {
	o := testOwner(t)
	a, b := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	want := func(ids ...string) {
		t.Helper()
		for range 2 { // computed, then kept
			got := o.pending()
			slices.Sort(got)
			if !slices.Equal(got, ids) {
				t.Fatalf("pending %v, want %v", got, ids)
			}
		}
	}
	want()
	if _, err := o.ledger.Reserve("ds", a, dp.Cost{Rho: 0.25}, 1, 1e-6, ""); err != nil {
		t.Fatal(err)
	}
	want(a)
	o.setNote(b, jobNote{State: PartUploading, Dataset: "ds"})
	want(a, b)
	o.pending()[0] = "changed by the caller"
	want(a, b)
	if err := o.ledger.Release("ds", a); err != nil {
		t.Fatal(err)
	}
	want(b)
	o.setNote(b, jobNote{State: PartReleased, Dataset: "ds"})
	want()
}

// BenchmarkPending: the run loop's look for unsettled jobs (at every tick)
// in an owner that has settled 10,000 jobs.
func BenchmarkPending(b *testing.B) {
	o := testOwner(b)
	o.db.NoSync = true
	for i := range 10000 {
		id := fmt.Sprintf("%064x", i)
		if _, err := o.ledger.Reserve("ds", id, dp.Cost{Rho: 1e-6}, 1, 1e-6, ""); err != nil {
			b.Fatal(err)
		}
		if err := o.ledger.Release("ds", id); err != nil {
			b.Fatal(err)
		}
		o.setNote(id, jobNote{State: PartSkipped, Dataset: "ds"})
	}
	o.pending() // the store has not changed since: what the run loop's ticks between jobs find
	b.ResetTimer()
	for b.Loop() {
		if len(o.pending()) != 0 {
			b.Fatal("a settled job is pending")
		}
	}
}
