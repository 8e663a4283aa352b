package proxy

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// testJob returns a new open job of n owners as CreateJob stores it.
func testJob(tb testing.TB, n int) (string, jobRecord, []string) {
	tb.Helper()
	sch, err := schema.Parse([]byte(`{"id":"wdbc","features":[{"name":"a","center":"1.5","scale":"2"},{"name":"b","center":"0","scale":"0.5"}],"label":"label","classes":["x","y"]}`))
	if err != nil {
		tb.Fatal(err)
	}
	owners := make([]string, n)
	for i := range owners {
		owners[i] = fmt.Sprintf("hospital-%05d", i)
	}
	h := func(c string) string { return strings.Repeat(c, 64) }
	s := &job.Spec{Version: job.Version, Dataset: "wdbc", SchemaHash: sch.HashHex(), Analysis: job.DCA, K: 1,
		Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Split: dp.DefaultSplit, MinOwners: 1,
		Deadline: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRows: 30_000 * int64(n), MaxOwnerRows: 30_000,
		HEParams: he.DefaultParamsID, HEParamsHash: h("b"), CommitteeN: 3, CommitteeThreshold: 2,
		CommitteeKey: h("c"), User: "spiffe://fedpca/user/alice", UserKey: h("d"), Nonce: "store"}
	if err := s.SetOwners(keyedOwners(owners)); err != nil {
		tb.Fatal(err)
	}
	at := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	return s.ID(), jobRecord{
		jobTicket:   jobTicket{Spec: s.Canonical(), Signature: []byte{1, 2}, Schema: sch.Canonical(), Owners: keyedOwners(owners), Created: at},
		jobProgress: jobProgress{State: fedpcav1.JobState_JOB_STATE_OPEN, Reason: "waiting for uploads", Updated: at},
	}, owners
}

func openTestStore(tb testing.TB, path string) *store {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	s, err := openStore(db)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func randomBlobs(tb testing.TB, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, size)
		if _, err := rand.Read(out[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// upload stores owner's upload as the proxy does: progress, record, sum,
// digests and budget in one transaction.
func upload(tb testing.TB, s *store, id string, prog *jobProgress, owner string, sum [][]byte) {
	tb.Helper()
	prog.Uploaded++
	prog.Reason = fmt.Sprintf("%d owners uploaded", prog.Uploaded)
	u := uploadRecord{Owner: owner, Digest: strings.Repeat("e", 64), At: time.Now().UTC()}
	b := &budgetRecord{Owner: owner, Dataset: "wdbc", RhoBudget: 1, At: u.At}
	if err := s.addUpload(id, prog, u, sum, randomBlobs(tb, len(sum), 32), b); err != nil {
		tb.Fatalf("upload of %s: %v", owner, err)
	}
}

// TestStoreUploadCostFlat: an upload writes the same records whatever the
// job's number of owners (its own record, the job's progress, the running
// sum, its digests and budget report), so the pages its transaction writes
// (bbolt's own count) at the last uploads of a job of 1,000 owners are those
// of a job of 10 but for the B+tree levels the larger buckets add (measured:
// 6 pages at 10 owners, 11 at 1,000). Before store format 2 the job's one
// record held every upload, and the 1,000th upload rewrote all of them
// (about 120 KB, 30 pages, more at every upload).
func TestStoreUploadCostFlat(t *testing.T) {
	perUpload := func(n int) float64 {
		s := openTestStore(t, filepath.Join(t.TempDir(), "proxy.db"))
		id, rec, owners := testJob(t, n)
		if err := s.createJob(id, &rec, []byte("pk"), nil); err != nil {
			t.Fatal(err)
		}
		prog := rec.jobProgress
		sum := randomBlobs(t, 2, 1000)
		last := max(n/10, 5) // measure the last uploads, when the job is fullest
		var before bolt.TxStats
		for i, o := range owners {
			if i == n-last {
				before = s.db.Stats().TxStats
			}
			upload(t, s, id, &prog, o, sum)
		}
		after := s.db.Stats().TxStats
		bytes := float64(after.GetPageAlloc()-before.GetPageAlloc()) / float64(last)
		t.Logf("%d owners: %.0f bytes of pages written per upload (%d pages of %d bytes), %.1f page writes",
			n, bytes, (after.GetPageCount()-before.GetPageCount())/int64(last), s.db.Info().PageSize,
			float64(after.GetWrite()-before.GetWrite())/float64(last))
		return bytes
	}
	small, large := perUpload(10), perUpload(1000)
	if page := float64(os.Getpagesize()); large > 1.5*small+4*page {
		t.Fatalf("an upload writes %.0f bytes at 1,000 owners, %.0f at 10: the cost grows with the owners", large, small)
	}
}

// TestStoreCrashKeepsAcknowledged: the store file as a crash leaves it after
// every step (a copy taken while the store is open, just after the step
// returned) holds every acknowledged upload and the running sum of exactly
// those, and loads as a job the proxy can drive. An upload refused inside
// its transaction (a replayed ciphertext) leaves nothing behind.
func TestStoreCrashKeepsAcknowledged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.db")
	s := openTestStore(t, path)
	id, rec, owners := testJob(t, 5)
	if err := s.createJob(id, &rec, []byte("pk"), nil); err != nil {
		t.Fatal(err)
	}
	crash := func(step string) *store {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cp := filepath.Join(dir, fmt.Sprintf("crash-%s.db", step))
		if err := os.WriteFile(cp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return openTestStore(t, cp)
	}
	// check loads the crashed copy and compares it with what was acknowledged.
	check := func(c *store, acked []string, sum [][]byte, state fedpcav1.JobState) {
		t.Helper()
		sjs, err := c.jobs()
		if err != nil || len(sjs) != 1 {
			t.Fatalf("jobs after a crash: %d, %v", len(sjs), err)
		}
		j, err := decodeJob(sjs[0], func(int) int { return 2 }, c)
		if err != nil {
			t.Fatalf("job after a crash: %v", err)
		}
		if got, _ := j.uploadedOwners(); strings.Join(got, ",") != strings.Join(acked, ",") || j.rec.Uploaded != len(acked) || j.rec.State != state {
			t.Fatalf("after a crash: uploads %v (count %d, state %v), acknowledged %v (state %v)", got, j.rec.Uploaded, j.rec.State, acked, state)
		}
		if sum == nil {
			return
		}
		got, err := c.seq(id, "sum", len(sum))
		if err != nil {
			t.Fatal(err)
		}
		for i := range sum {
			if !bytes.Equal(got[i], sum[i]) {
				t.Fatalf("after a crash: sum %d is not the acknowledged one", i)
			}
		}
	}
	check(crash("created"), nil, nil, fedpcav1.JobState_JOB_STATE_OPEN)
	prog := rec.jobProgress
	var acked []string
	var sum [][]byte
	for _, o := range owners[:3] {
		sum = randomBlobs(t, 2, 100)
		upload(t, s, id, &prog, o, sum)
		acked = append(acked, o)
		check(crash("upload-"+o), acked, sum, fedpcav1.JobState_JOB_STATE_OPEN)
	}

	// A replayed ciphertext: refused in the transaction, nothing written.
	replay := randomBlobs(t, 2, 32)
	next := prog
	next.Uploaded++
	u := uploadRecord{Owner: owners[3], Digest: strings.Repeat("f", 64), At: time.Now()}
	if err := s.addUpload(id, &next, u, randomBlobs(t, 2, 100), [][]byte{replay[0], replay[0]}, nil); err == nil {
		t.Fatal("an upload holding the same ciphertext twice was accepted")
	}
	check(crash("refused"), acked, sum, fedpcav1.JobState_JOB_STATE_OPEN)

	prog.State = fedpcav1.JobState_JOB_STATE_SWITCHING
	prog.Active, prog.CSPs = []uint32{1, 2}, []string{"csp-1", "csp-2"}
	if err := s.seal(id, &prog, randomBlobs(t, 2, 100), randomBlobs(t, 2, 16)); err != nil {
		t.Fatal(err)
	}
	c := crash("sealed")
	check(c, acked, nil, fedpcav1.JobState_JOB_STATE_SWITCHING)
	if _, err := c.seq(id, "sum", 2); err == nil {
		t.Fatal("the running sum is still stored after sealing")
	}
	if err := s.putShares(id, 1, randomBlobs(t, 2, 50)); err != nil {
		t.Fatal(err)
	}
	in, err := crash("share").switchInputs(id, 2, 2, prog.Active)
	if err != nil || len(in.shares) != 1 || len(in.masks) != 2 || len(in.blinded) != 2 {
		t.Fatalf("switch inputs after a crash: %v", err)
	}
	prog.State = fedpcav1.JobState_JOB_STATE_DONE
	if err := s.finish(id, &prog, randomBlobs(t, 2, 100)); err != nil {
		t.Fatal(err)
	}
	c = crash("done")
	check(c, acked, nil, fedpcav1.JobState_JOB_STATE_DONE)
	if in, err := c.switchInputs(id, 2, 2, prog.Active); err == nil || in != nil && len(in.shares) > 0 {
		t.Fatal("the key switch's inputs are still stored after the job is done")
	}
}

// TestStoreMigratesV1: a version 1 store (one record per job holding every
// upload and decline) is rewritten once at start; a store of an unknown
// version is refused with its version named.
func TestStoreMigratesV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.db")
	id, rec, owners := testJob(t, 3)
	at := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	old := map[string]any{"spec": rec.Spec, "signature": rec.Signature, "schema": rec.Schema, "owners": rec.Owners, "state": 1, "reason": "1 of 3 owners uploaded",
		"created": at, "updated": at,
		"uploads":  []uploadRecord{{Owner: owners[1], Digest: strings.Repeat("e", 64), At: at}},
		"declined": []declineRecord{{Owner: owners[2], Reason: job.DeclineBudget, At: at}}}
	v, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		jobs, err := tx.CreateBucket(bucketJobs)
		if err != nil {
			return err
		}
		b, err := jobs.CreateBucket([]byte(id))
		if err != nil {
			return err
		}
		if err := b.Put(keyV1Record, v); err != nil {
			return err
		}
		if err := b.Put(keyUserPK, []byte("user key")); err != nil {
			return err
		}
		return b.Put(seqKey("sum", 0), []byte("ciphertext"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := openTestStore(t, path)
	sjs, err := s.jobs()
	if err != nil || len(sjs) != 1 {
		t.Fatalf("jobs after migration: %d, %v", len(sjs), err)
	}
	j, err := decodeJob(sjs[0], func(int) int { return 1 }, s)
	if err != nil {
		t.Fatalf("migrated job: %v", err)
	}
	up, _, _ := j.answerOf(owners[1])
	_, declined, _ := j.answerOf(owners[2])
	if up == nil || !declined || j.rec.Uploaded != 1 || j.rec.Declined != 1 || j.rec.Reason != "1 of 3 owners uploaded" {
		t.Fatalf("migrated job: %+v, uploads %v, declines %v", j.rec.jobProgress, j.uploads, j.declines)
	}
	if sum, err := s.seq(id, "sum", 1); err != nil || string(sum[0]) != "ciphertext" {
		t.Fatalf("running sum after migration: %q, %v", sum, err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if pk := tx.Bucket(bucketTickets).Get(userPKKey(id)); string(pk) != "user key" {
			return fmt.Errorf("user key after migration: %q", pk)
		}
		if jb := tx.Bucket(bucketJobs).Bucket([]byte(id)); jb.Get(keyV1Record) != nil || jb.Get(keyUserPK) != nil {
			return errors.New("the version 1 record and user key are still in the job's bucket")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyVersion, []byte("3")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(s.db); err == nil || !strings.Contains(err.Error(), `version "3"`) {
		t.Fatalf("a version 3 store: %v, want a refusal naming the version", err)
	}
}

// BenchmarkStoreUpload: one upload's transaction (fsync'd) in a job that
// already holds owners uploads (a running sum of two 1 KB ciphertexts).
func BenchmarkStoreUpload(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("owners=%d", n), func(b *testing.B) {
			s := openTestStore(b, filepath.Join(b.TempDir(), "proxy.db"))
			id, rec, owners := testJob(b, n)
			if err := s.createJob(id, &rec, []byte("pk"), nil); err != nil {
				b.Fatal(err)
			}
			prog := rec.jobProgress
			sum := randomBlobs(b, 2, 1000)
			s.db.NoSync = true // fill the job quickly
			for _, o := range owners {
				upload(b, s, id, &prog, o, sum)
			}
			s.db.NoSync = false
			before := s.db.Stats().TxStats
			b.ResetTimer()
			for i := range b.N {
				upload(b, s, id, &prog, fmt.Sprintf("extra-%d", i), sum)
			}
			after := s.db.Stats().TxStats
			b.ReportMetric(float64(after.GetPageAlloc()-before.GetPageAlloc())/float64(b.N), "page-bytes/op")
		})
	}
}
