package csp

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
)

// openMember starts (without serving) a member on dir in insecure mode.
func openMember(t *testing.T, dir string) (*CSP, error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return New(Config{ID: "csp-1", Listener: l, Insecure: true, Store: dir})
}

// TestSwitchLogBinding: the member's switch log is bound to its key when a
// ceremony finishes; a member that stopped between writing its key file and
// binding the log finishes the binding at the next start; a log that holds
// switches does not start without its key file, nor without a binding,
// and no new key takes it over. (sim.TestMemberRefusesForeignSwitchLog: a fresh log, another
// member's.)
func TestSwitchLogBinding(t *testing.T) {
	dir := t.TempDir()
	c, err := openMember(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	req := &fedpcav1.KeyGenRequest{CeremonyId: "c1", Seed: make([]byte, 32), HeParams: c.params.ID(), Members: 1, Threshold: 1,
		Committee: []*fedpcav1.MemberRef{{Id: "csp-1", Point: 1}}}
	first, err := c.KeyGen(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	finishCeremony(t, c, req, first)
	want := bindingOf("csp-1", c.state)
	logOf := func(c *CSP) logState {
		t.Helper()
		var s logState
		if err := c.db.View(func(tx *bolt.Tx) (err error) { s, err = readLog(tx); return err }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := logOf(c); s.key == nil || *s.key != want || s.pending != nil {
		t.Fatalf("after the ceremony the log is bound to %v (pending %v), want %v", s.key, s.pending, want)
	}
	// Stopped after the key file was written, before the binding.
	if err := c.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketLog).Delete(logKey); err != nil {
			return err
		}
		return putBinding(tx, logPending, want)
	}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if c, err = openMember(t, dir); err != nil {
		t.Fatalf("restart after a ceremony that stopped before binding its log: %v", err)
	}
	if s := logOf(c); s.key == nil || *s.key != want || s.pending != nil {
		t.Fatalf("the binding was not finished: %v (pending %v)", s.key, s.pending)
	}
	// A switch; then no new key takes the log over.
	if err := c.storeShares(&switchRecord{JobID: strings.Repeat("ab", 32), Digest: strings.Repeat("cd", 32), Ciphertexts: 1, At: time.Now()}, [][]byte{{1}}); err != nil {
		t.Fatal(err)
	}
	other := want
	other.Ceremony, other.CommitteeKey = "c2", job.Fingerprint([]byte("another key"))
	if err := c.beginBind(other); !errors.Is(err, ErrCeremony) || !strings.Contains(err.Error(), "holds 1 switch record (the log of csp/csp-1's share (point 1)") {
		t.Fatalf("a new key taking over a log with a switch: %v", err)
	}
	// A log with that switch and no binding (state from before logs were
	// bound to keys) cannot be told from another key's.
	if err := c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketLog).Delete(logKey) }); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := openMember(t, dir); !errors.Is(err, ErrForeignLog) || !strings.Contains(err.Error(), "with 1 switch record: one written before switch logs were bound to keys") {
		t.Fatalf("a log with a switch and no binding: %v", err)
	}
	// The key file lost, the log kept.
	if err := os.Remove(c.secretPath()); err != nil {
		t.Fatal(err)
	}
	_, err = openMember(t, dir)
	if !errors.Is(err, ErrForeignLog) || !strings.Contains(err.Error(), "secret-key.json is missing") || !strings.Contains(err.Error(), "holds 1 switch record") {
		t.Fatalf("a log with a switch and no key file: %v", err)
	}
}
