package owner

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

var allParts = []Part{PartDeclined, PartUploading, PartUploaded, PartReleased, PartRefunded, PartSkipped, PartCompleted}

// What a job record may be after a crash, given what it was before: written
// out here, not derived from partSteps.
func TestPartReaches(t *testing.T) {
	want := map[Part][]Part{
		PartUploading: {PartUploading, PartUploaded, PartReleased, PartCompleted, PartRefunded},
		PartUploaded:  {PartUploaded, PartCompleted, PartRefunded},
	}
	for _, from := range allParts {
		w, ok := want[from]
		if !ok {
			w = []Part{from}
		}
		for _, to := range allParts {
			if got := from.Reaches(to); got != slices.Contains(w, to) {
				t.Errorf("%s reaches %s: %v", from, to, got)
			}
		}
		if from.Final() != !ok {
			t.Errorf("%s final: %v", from, from.Final())
		}
	}
	if Part("uploading").Reaches("bogus") || Part("bogus").Known() {
		t.Fatal("an unknown part is reachable or known")
	}
	ledger := map[string][]string{
		Reserved:  {Reserved, Committed, Released, Refunded},
		Committed: {Committed, Refunded},
		Released:  {Released},
		Refunded:  {Refunded},
	}
	for from, w := range ledger {
		for to := range ledger {
			if got := LedgerReaches(from, to); got != slices.Contains(w, to) {
				t.Errorf("ledger %s reaches %s: %v", from, to, got)
			}
		}
	}
}

// The owner's store refuses a job record's transition that its part does
// not allow, and keeps the record as it was.
func TestPutNoteRefusesIllegalTransition(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "o.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := func(p Part) error {
		return db.Update(func(tx *bolt.Tx) error {
			if _, err := tx.CreateBucketIfNotExists(bucketJobs); err != nil {
				return err
			}
			return putNote(tx, "job1", jobNote{State: p, Dataset: "d"})
		})
	}
	for _, p := range []Part{PartUploading, PartUploading, PartUploaded, PartUploaded, PartCompleted} {
		if err := put(p); err != nil {
			t.Fatalf("to %s: %v", p, err)
		}
	}
	for _, p := range []Part{PartUploading, PartRefunded, PartDeclined, "bogus"} {
		if err := put(p); !errors.Is(err, errPartTransition) {
			t.Fatalf("completed to %s: %v, want refused", p, err)
		}
	}
	if err := db.Update(func(tx *bolt.Tx) error { return putNote(tx, "job2", jobNote{State: PartUploaded}) }); !errors.Is(err, errPartTransition) {
		t.Fatalf("a new record as uploaded: %v, want refused", err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		var n jobNote
		if v := tx.Bucket(bucketJobs).Get([]byte("job1")); v == nil || json.Unmarshal(v, &n) != nil || n.State != PartCompleted {
			t.Fatalf("record after refused writes: %s", v)
		}
		return nil
	})
}
