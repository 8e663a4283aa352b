package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/user"
)

// TestCancelReleasesEveryReservation: a job names three running owners and
// one that never runs, so it stays open after the three uploaded. Another
// user may not cancel it; its user does, and every owner's ledger then
// shows the job's budget returned (refunded: nothing was ever key-switched),
// nothing spent or reserved. A cancelled job cannot be cancelled into
// anything else, and a done job cannot be cancelled.
func TestCancelReleasesEveryReservation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, false)
	owners = owners[:3]
	// hospital-z is issued a certificate (the user's roster knows its key)
	// but never runs.
	cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners, Users: []string{"bob"}, Identities: []string{"owner/hospital-z"}}, "alice")
	names := []string{owners[0].ID, owners[1].ID, owners[2].ID, "hospital-z"}
	spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 2, Epsilon: 1, Owners: names, Deadline: time.Now().Add(5 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}
	for {
		info, err := u.Job(ctx, spec.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.GetStatus().GetOwnersUploaded() == 3 {
			// The user sees counts only while the job is open; the
			// operator's status names who is awaited.
			st := cl.Proxy().Status(spec.ID())
			var waiting []string
			for _, o := range st.Jobs[0].Owners {
				if o.State == proxy.OwnerWaiting {
					waiting = append(waiting, o.ID)
				}
			}
			if len(waiting) != 1 || waiting[0] != "hospital-z" {
				t.Fatalf("awaited %v, want [hospital-z]", waiting)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the three owners did not upload")
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Each owner commits its reservation once the proxy acknowledged its
	// upload (just after the proxy counts it).
	for _, o := range owners {
		for {
			bal, _ := cl.Owner(o.ID).Balance("wdbc")
			if bal.Spent > 0 && bal.Reserved == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s has not committed its upload: %+v", o.ID, bal)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	bob, err := cl.User("bob")
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if _, err := bob.Cancel(ctx, spec.ID()); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("bob cancelled alice's job: %v", err)
	}
	st, err := u.Cancel(ctx, spec.ID())
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_FAILED || st.GetReason() != "cancelled by the user" || st.GetSwitched() {
		t.Fatalf("after cancel: %s (%s), switched %v", st.GetState(), st.GetReason(), st.GetSwitched())
	}
	if _, err := u.Cancel(ctx, spec.ID()); err != nil {
		t.Fatalf("cancelling again: %v", err)
	}
	// Every owner settles the job at its next poll: the budget comes back.
	for _, o := range owners {
		for {
			bal, err := cl.Owner(o.ID).Balance("wdbc")
			if err != nil {
				t.Fatal(err)
			}
			entries, _ := cl.Owner(o.ID).Ledger("wdbc")
			if bal.Spent == 0 && bal.Reserved == 0 && len(entries) == 1 && entries[0].State == owner.Refunded {
				t.Logf("%s: ledger %+v, entry %s", o.ID, bal, entries[0].State)
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: ledger %+v %+v after the cancel", o.ID, bal, entries)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// TestMissingOwnersNamed: a job naming an owner that never appears fails at
// its deadline saying who never uploaded.
func TestMissingOwnersNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	_, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners[:1], AllowNoNoise: true}, "alice")
	// hospital-z is named by a key the user was given (never deployed).
	z := "hospital-z=" + job.Fingerprint([]byte("hospital-z's key"))
	_, st := submitWait(ctx, t, u, sch, user.Request{Analysis: job.PCA, K: 2, NoNoise: true, Owners: []string{owners[0].ID, z},
		Deadline: time.Now().Add(6 * time.Second)}) // room for the one owner's upload under -race on a loaded machine
	if st.GetState() != fedpcav1.JobState_JOB_STATE_FAILED || !strings.Contains(st.GetReason(), "never uploaded: hospital-z") ||
		strings.Contains(st.GetReason(), owners[0].ID) {
		t.Fatalf("job %s: %s", st.GetState(), st.GetReason())
	}
	t.Log(st.GetReason())
}
