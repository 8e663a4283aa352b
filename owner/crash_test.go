package owner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

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

// TestUploadFiles: an upload is kept in a file of its own until its job is
// settled: it reads back as written; a damaged or truncated file reads as
// missing (the retry then fails with DataLoss, as for a missing upload); an
// upload stored in the bucket by an owner before this layout still reads;
// at start, files no note in PartUploading refers to are removed, the
// others kept.
func TestUploadFiles(t *testing.T) {
	o := testOwner(t)
	kept, orphan, old := strings.Repeat("ab", 32), strings.Repeat("cd", 32), strings.Repeat("ef", 32)
	up := &upload{cts: [][]byte{[]byte("ct0"), {}, []byte("ct2")}, proofs: [][]byte{[]byte("p0"), []byte("p1"), {}}, signature: []byte("sig")}
	for _, id := range []string{kept, orphan} {
		if err := o.writeUpload(id, up); err != nil {
			t.Fatal(err)
		}
	}
	got := o.readUpload(kept, 3)
	if got == nil || !slices.EqualFunc(got.cts, up.cts, bytes.Equal) || !slices.EqualFunc(got.proofs, up.proofs, bytes.Equal) || !bytes.Equal(got.signature, up.signature) {
		t.Fatalf("read back %+v, wrote %+v", got, up)
	}
	if o.readUpload(kept, 2) != nil {
		t.Error("an upload of 3 ciphertexts read as one of 2")
	}
	b, err := os.ReadFile(o.uploadFile(kept))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(bytes.Clone(b[:4]), b[5:]...), append([]byte{b[0] ^ 1}, b[1:]...)} {
		if err := os.WriteFile(o.uploadFile(orphan), bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if o.readUpload(orphan, 3) != nil {
			t.Errorf("a damaged file (%d bytes of %d) read as an upload", len(bad), len(b))
		}
	}
	// An upload stored in the bucket before uploads moved to files.
	if err := o.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketUploads)
		for i := range up.cts {
			if err := errors.Join(bk.Put(blobKey(old, i), up.cts[i]), bk.Put(proofKey(old, i), up.proofs[i])); err != nil {
				return err
			}
		}
		return errors.Join(bk.Put(signatureKey(old), up.signature), putNote(tx, kept, jobNote{State: PartUploading, Dataset: "ds", Blobs: 3}))
	}); err != nil {
		t.Fatal(err)
	}
	if got := o.readUpload(old, 3); got == nil || !bytes.Equal(got.cts[2], up.cts[2]) {
		t.Errorf("the bucket's upload read as %+v", got)
	}
	if err := o.sweepUploads(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.uploadFile(kept)); err != nil {
		t.Errorf("the noted upload's file: %v", err)
	}
	if _, err := os.Stat(o.uploadFile(orphan)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the file no note refers to was kept: %v", err)
	}
}
