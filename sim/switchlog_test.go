package sim

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/csp"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/user"
)

// TestMemberRefusesForeignSwitchLog mounts issue 28's restarted member: a
// member that switched a job is stopped and started again beside its key
// file with a new csp.db (a lost store, or a key file restored without its
// log), then with another member's csp.db. Either way it could switch the
// old job again with fresh noise (a user averaging two answers halves that
// noise's variance); it refuses to start instead, naming both files, the key
// and what to do. With its own log back it starts, holding the job's switch
// record, and the next job completes.
func TestMemberRefusesForeignSwitchLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:2]
	dir := t.TempDir()
	cl, u := startUser(ctx, t, Config{Dir: dir, CSPs: 3, Threshold: 2, Owners: owners, AllowNoNoise: true, Logger: testLogger(t)}, "alice")
	runJob(ctx, t, u, sch, owners, user.Request{Analysis: job.PCA, NoNoise: true})

	// A member that switched the job, and another.
	victim := -1
	for i := range 3 {
		recs, err := cl.CSP(i).Audit()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 && victim < 0 {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no member switched the job")
	}
	other := (victim + 1) % 3
	st, err := cl.CSP(victim).GetStatus(ctx, &fedpcav1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	fp := st.GetCommitteeKeyFingerprint()
	for _, i := range []int{victim, other} {
		if err := cl.StopCSP(i); err != nil {
			t.Fatal(err)
		}
	}
	state := func(i int) string { return filepath.Join(dir, "state", CSPID(i)) }
	db := filepath.Join(state(victim), "csp.db")
	if err := os.Rename(db, db+".saved"); err != nil {
		t.Fatal(err)
	}

	// A fresh log beside the key file.
	err = cl.StartCSP(victim)
	if !errors.Is(err, csp.ErrForeignLog) {
		t.Fatalf("restarted with a fresh csp.db: %v, want ErrForeignLog", err)
	}
	for _, want := range []string{db, filepath.Join(state(victim), "secret-key.json"), "records no key", fp[:16],
		"csp/" + CSPID(victim) + "'s share", "Restore csp.db from the same backup as secret-key.json", "move the state directory aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("fresh log: the error does not say %q:\n%v", want, err)
		}
	}
	t.Logf("a fresh log: %v", err)

	// Another member's log (of the same committee key, another share).
	copyFile(t, filepath.Join(state(other), "csp.db"), db)
	err = cl.StartCSP(victim)
	if !errors.Is(err, csp.ErrForeignLog) || !strings.Contains(err.Error(), "is the log of csp/"+CSPID(other)+"'s share") {
		t.Fatalf("restarted with csp/%s's csp.db: %v", CSPID(other), err)
	}
	t.Logf("another member's log: %v", err)

	// Its own log: it starts, with the job's switch record.
	if err := os.Rename(db+".saved", db); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{victim, other} {
		if err := cl.StartCSP(i); err != nil {
			t.Fatalf("restart csp/%s with its own state: %v", CSPID(i), err)
		}
	}
	if recs, err := cl.CSP(victim).Audit(); err != nil || len(recs) != 1 {
		t.Fatalf("the restored log: %d records, %v", len(recs), err)
	}
	runJob(ctx, t, u, sch, owners, user.Request{Analysis: job.PCA, NoNoise: true})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
