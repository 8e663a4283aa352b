package csp

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/fedpca/fedpca/transport"
)

// ReadAudit reads a stopped member's store without starting a member: it
// refuses a store a member holds, creates nothing where there is no store.
func TestReadAudit(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nothing")
	if recs, err := ReadAudit(missing); err != nil || len(recs) != 0 {
		t.Fatalf("no store: %d records, %v", len(recs), err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadAudit created %s: %v", missing, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	m, err := New(Config{ID: "csp-1", Listener: l, Insecure: true, Store: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAudit(dir); !errors.Is(err, transport.ErrStoreLocked) {
		t.Fatalf("store of a running member: %v, want ErrStoreLocked", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if recs, err := ReadAudit(dir); err != nil || len(recs) != 0 {
		t.Fatalf("stopped member without switches: %d records, %v", len(recs), err)
	}
}
