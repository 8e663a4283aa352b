package owner

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/transport"
)

// TestReadLedgers (issue 43): a governance officer reads a stopped owner's
// ledgers from its state directory: each job with its state and what it
// cost, in epsilon at the budget's delta as well as rho, and totals that
// compose the costs as the ledger does (two jobs of epsilon 1 spend more
// than 1 and less than 2, and the remaining epsilon is what a further job
// may have); a job released or refunded spent nothing. While the store is
// open the reading says the store is locked.
func TestReadLedgers(t *testing.T) {
	dir := t.TempDir()
	db, err := transport.OpenStore(dir, dbFileName)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucketLedger); return err }); err != nil {
		t.Fatal(err)
	}
	l, _ := newLedger(db, 10)
	// The cost of a job of epsilon 1 at delta 1e-6 (its Gaussian part).
	one := dp.Cost{Rho: dp.Float(dp.Cost{}.Room(1, 1e-6))}
	for _, j := range []string{"job-a", "job-b", "job-c", "job-d"} {
		if _, err := l.Reserve("d", j, one, 1, 1e-6, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		job string
		do  func(string, string) error
	}{{"job-a", l.Commit}, {"job-b", l.Commit}, {"job-c", l.Release}} {
		if err := step.do("d", step.job); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadLedgers(dir, 10, 1e-6); !errors.Is(err, transport.ErrStoreLocked) {
		t.Fatalf("reading an open store: %v", err)
	}
	db.Close()
	views, err := ReadLedgers(dir, 10, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 1 || len(views[0].Jobs) != 4 || views[0].Ledger != "ledger:d" {
		t.Fatalf("views %+v", views)
	}
	v := views[0]
	states := map[string]string{}
	for _, j := range v.Jobs {
		states[j.Job] = j.State
		if math.Abs(j.Cost.Epsilon-1) > 1e-6 || j.Cost.Rho != float64(one.Rho) || j.JobEpsilon != 1 || j.Dataset != "d" {
			t.Errorf("job %s: %+v, want a cost of epsilon 1", j.Job, j)
		}
	}
	if states["job-a"] != Committed || states["job-c"] != Released || states["job-d"] != Reserved {
		t.Errorf("states %v", states)
	}
	two := dp.Compose(one, one)
	three := dp.Compose(one, one, one)
	if v.Spent.Rho != float64(two.Rho) || math.Abs(v.Spent.Epsilon-two.Epsilon(1e-6)) > 1e-12 || !(v.Spent.Epsilon > 1 && v.Spent.Epsilon < 2) ||
		math.Abs(v.SpentAndReserved.Epsilon-three.Epsilon(1e-6)) > 1e-12 {
		t.Errorf("totals: spent %+v, spent and reserved %+v", v.Spent, v.SpentAndReserved)
	}
	if want := three.Room(10, 1e-6); v.Remaining != want || !(v.EpsilonRemaining > 0 && v.EpsilonRemaining < 10) {
		t.Errorf("remaining rho %v (want %v), epsilon %v", v.Remaining, want, v.EpsilonRemaining)
	}
	// The delta given is the one every epsilon is at.
	at5, err := ReadLedgers(dir, 10, 1e-5)
	if err != nil || !(at5[0].Jobs[0].Cost.Epsilon < v.Jobs[0].Cost.Epsilon) {
		t.Errorf("at delta 1e-5: %v, %+v", err, at5)
	}
	if empty, err := ReadLedgers(filepath.Join(dir, "none"), 10, 1e-6); err != nil || empty != nil {
		t.Errorf("a directory without a store: %v %v", empty, err)
	}
}
