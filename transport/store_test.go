package transport

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestOpenStoreLocked: a second node on the same state directory is told at
// once that another process holds the store, not bbolt's "timeout".
func TestOpenStoreLocked(t *testing.T) {
	dir := t.TempDir() + "/state"
	db, err := OpenStore(dir, "node.db")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = OpenStore(dir, "node.db")
	if !errors.Is(err, ErrStoreLocked) || !strings.Contains(err.Error(), "another process holds the store at "+dir+"/node.db") || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("second open: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("second open took %s", d)
	}
	db.Close()
	db, err = OpenStore(dir, "node.db")
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	db.Close()
}
