package proxy

import (
	"errors"
	"testing"

	"github.com/fedpca/fedpca/protocol/job"
)

// TestWatchHub: the hub refuses a watch beyond its limit, announces a
// change of state to the watches of the owners the job names only, never
// queues more than watchQueue announcements for a stream (it marks the
// stream lagged instead), numbers only the changes that were applied, and
// resumes from its own cursors only.
func TestWatchHub(t *testing.T) {
	h := newWatchHub(2, "EPOCH")
	tree, err := job.NewOwnerTree([]job.Owner{{ID: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	j := &jobState{}
	j.owners.Store(tree)
	w, last, err := h.subscribe("a")
	if err != nil || last != 0 {
		t.Fatalf("subscribe: %v, after %d", err, last)
	}
	other, _, err := h.subscribe("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.subscribe("c"); !errors.Is(err, ErrTooManyWatchers) || !errors.Is(err, ErrBusy) {
		t.Fatalf("third watch of two: %v", err)
	}
	n := uint64(watchQueue + 5)
	for range n {
		if err := h.sequence(j, func(uint64) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.sequence(j, func(uint64) error { return errors.New("disk full") }); err == nil {
		t.Fatal("a failed change was applied")
	}
	if !w.lagged.Load() || len(w.queue) != watchQueue {
		t.Fatalf("slow stream: lagged %v with %d queued, want lagged with %d", w.lagged.Load(), len(w.queue), watchQueue)
	}
	if a := <-w.queue; a.seq != 1 || a.job != j {
		t.Fatalf("first announcement %d", a.seq)
	}
	if other.lagged.Load() || len(other.queue) != 0 {
		t.Fatal("an owner the job does not name was told of it")
	}
	if got := h.mark(w); got != n || w.lagged.Load() || len(w.queue) != 0 {
		t.Fatalf("mark: %d (lagged %v, %d queued), want %d", got, w.lagged.Load(), len(w.queue), n)
	}
	h.unsubscribe(w)
	if _, _, err := h.subscribe("c"); err != nil {
		t.Fatalf("a watch after one ended: %v", err)
	}

	for _, c := range []struct {
		cursor string
		seq    uint64
		ok     bool
	}{{"", 0, false}, {h.cursor(3), 3, true}, {h.cursor(n), n, true}, {h.cursor(n + 1), n + 1, false}, {"OTHER.1", 1, false}} {
		seq, ok, err := h.resumeFrom(c.cursor)
		if err != nil || seq != c.seq || ok != c.ok {
			t.Errorf("resume from %q: %d %v %v, want %d %v", c.cursor, seq, ok, err, c.seq, c.ok)
		}
	}
	for _, bad := range []string{"x", "EPOCH.-1", "EPOCH.1.2"} {
		if _, _, err := h.resumeFrom(bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("resume from %q: %v, want a bad request", bad, err)
		}
	}
}
