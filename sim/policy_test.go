package sim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/user"
)

// userWith is a client of the cluster's user name under a committee policy
// of its own.
func userWith(t *testing.T, cl *Cluster, name string, policy job.CommitteePolicy) *user.Client {
	t.Helper()
	d, err := cl.Dialer("user/" + name)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := user.GenerateKeys(filepath.Join(t.TempDir(), "keys"), cl.Params())
	if err != nil {
		t.Fatal(err)
	}
	p := cl.Params()
	u, err := user.NewClient(user.Config{Dialer: d, ProxyAddr: cl.ProxyAddr(), Keys: kp, Committee: policy, Logger: testLogger(t), Params: &p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// TestSmallCommitteeRefused mounts issue 28's committee of one (and of two
// of two, one of three): a proxy runs a ceremony with such a committee and
// its members all attest the key. Under the default committee policy (at
// least 3 members, a threshold of at least 2):
//
//   - an owner or a user that pins fewer members than the minimum does not
//     start (the owner) or create a job (the user);
//   - a user that accepts any committee of the deployment's CSPs refuses
//     to create a job under this one;
//   - when a user that lowered its own minimum (the user is not trusted)
//     creates one anyway, every owner declines it with the committee_key
//     code, uploads nothing and keeps its budget.
//
// The errors name the committee, the policy and the flags that lower it.
// Owners and users that lowered their minimum to the committee take part.
func TestSmallCommitteeRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:2]
	for _, c := range []struct{ n, t int }{{1, 1}, {2, 2}, {3, 1}} {
		t.Run(fmt.Sprintf("%d-of-%d", c.t, c.n), func(t *testing.T) {
			var ids []string
			for i := range c.n {
				ids = append(ids, CSPID(i))
			}
			anyCommittee := job.CommitteePolicy{AnyMembers: true}
			cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: c.n, Threshold: c.t, CommitteePolicy: &anyCommittee, Owners: owners,
				AllowNoNoise: true, Logger: testLogger(t)}, "alice")
			req := user.Request{Schema: sch, Analysis: job.PCA, NoNoise: true, Owners: IDs(owners), Deadline: time.Now().Add(time.Minute)}

			// Pinned, the committee is refused at start when it is below the
			// minimum.
			if c.n < job.DefaultMinCommitteeMembers {
				pinned := job.CommitteePolicy{Members: cl.Pins()}
				o := owners[0]
				o.ID, o.Policy.Committee = "hospital-z", pinned
				msg := fmt.Sprintf("--committee names %s, below this node's minimum committee of 3", map[int]string{1: "one member", 2: "2 members"}[c.n])
				if err := cl.StartOwner(o); !errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), msg) {
					t.Errorf("an owner pinning %v started: %v", ids, err)
				}
				if _, err := userWith(t, cl, "alice", pinned).Spec(ctx, req); !errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), msg) {
					t.Errorf("a user pinning %v created a job: %v", ids, err)
				}
			}

			want := []string{fmt.Sprintf("the committee is %d-of-%d (csp/%s)", c.t, c.n, strings.Join(ids, ", csp/")),
				"this node requires at least 3 members with a threshold of at least 2",
				fmt.Sprintf("--committee-min-members %d --committee-min-threshold %d", c.n, c.t)}
			_, err := u.Spec(ctx, req)
			if !errors.Is(err, job.ErrCommitteePolicy) {
				t.Fatalf("the user created a job under a %d-of-%d committee: %v", c.t, c.n, err)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the user's error does not say %q: %v", w, err)
				}
			}
			t.Logf("user: %v", err)

			// A user that lowered its own minimum creates the job; the owners
			// refuse the committee.
			lowered := job.CommitteePolicy{Members: cl.Pins(), MinMembers: c.n, MinThreshold: c.t, AllowMinorityThreshold: 2*c.t <= c.n}
			_, st := submitWait(ctx, t, userWith(t, cl, "alice", lowered), sch, req)
			if st.GetState() != fedpcav1.JobState_JOB_STATE_FAILED || len(st.GetUploadedOwners()) != 0 || len(st.GetDeclinedOwners()) != len(owners) {
				t.Fatalf("job %s (%s): uploaded %v, declined %v", st.GetState(), st.GetReason(), st.GetUploadedOwners(), st.GetDeclinedOwners())
			}
			for _, o := range owners {
				recs, err := cl.Owner(o.ID).JobRecords()
				if err != nil || len(recs) != 1 || recs[0].Code != "committee_key" {
					t.Fatalf("%s's record: %+v %v", o.ID, recs, err)
				}
				for _, w := range want {
					if !strings.Contains(recs[0].Reason, w) {
						t.Errorf("%s's reason does not say %q: %s", o.ID, w, recs[0].Reason)
					}
				}
				bal, err := cl.Owner(o.ID).Balance("wdbc")
				if err != nil || bal.Spent != 0 || bal.Reserved != 0 {
					t.Errorf("%s's ledger: %+v %v", o.ID, bal, err)
				}
			}

			// Owners that lowered their minimum take part.
			for _, o := range owners {
				if err := cl.StopOwner(o.ID); err != nil {
					t.Fatal(err)
				}
				o.Policy.Committee = lowered
				if err := cl.StartOwner(o); err != nil {
					t.Fatal(err)
				}
			}
			u2 := userWith(t, cl, "alice", lowered)
			req.Deadline = time.Now().Add(2 * time.Minute)
			spec, err := u2.Spec(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := u2.Submit(ctx, spec, sch); err != nil {
				t.Fatal(err)
			}
			finishExact(ctx, t, u2, spec, sch, owners[0].CSV, owners[1].CSV)
		})
	}
}

// TestUnpinnedRefused: an owner configured without a committee (and
// without saying that any will do) does not start, and a user without one
// creates no job; each error says how to pin the committee. With
// AnyMembers (local tests) they accept the deployment's committee, still
// only at the policy's size.
func TestUnpinnedRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:2]
	cl, _ := startUser(ctx, t, Config{Dir: t.TempDir(), Owners: owners, AllowNoNoise: true, Logger: testLogger(t)}, "alice")
	want := "no committee pinned: name the CSP members this node trusts with --committee (for example --committee csp-1,csp-2,csp-3"
	o := OwnerConfig{ID: "hospital-z", Schema: sch, CSV: owners[0].CSV, Policy: OwnerPolicy(true)}
	o.Policy.Committee.MinMembers = 3 // set, but pins nothing
	err := cl.StartOwner(o)
	if !errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--any-committee") {
		t.Errorf("an unpinned owner: %v", err)
	}
	req := user.Request{Schema: sch, Analysis: job.PCA, NoNoise: true, Owners: IDs(owners), Deadline: time.Now().Add(time.Minute)}
	_, err = userWith(t, cl, "alice", job.CommitteePolicy{}).Spec(ctx, req)
	if !errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), want) {
		t.Errorf("an unpinned user: %v", err)
	}
	// Any committee of the deployment's CSPs, explicitly: the default
	// committee (3 members, threshold 2) is accepted.
	if _, err := userWith(t, cl, "alice", job.CommitteePolicy{AnyMembers: true}).Spec(ctx, req); err != nil {
		t.Errorf("a user accepting any committee: %v", err)
	}
	if _, err := userWith(t, cl, "alice", job.CommitteePolicy{AnyMembers: true, MinMembers: 4}).Spec(ctx, req); !errors.Is(err, job.ErrCommitteePolicy) {
		t.Errorf("a user accepting any committee of at least 4: %v", err)
	}
}
