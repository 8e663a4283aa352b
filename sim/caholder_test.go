package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedpca/fedpca/csp"
	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// TestCAHolderGetsNothing is the attack of issue 39, through the daemons
// over mutual TLS, with the proxy's operator holding a CA: the deployment's
// one in the single-CA layout, its own organisation's in a federation. It
// issues csp/csp-1..3 certificates for keys of its own, runs three members
// under them and points a proxy of its own at them (its roster's keys for
// the members dropped): the ceremony completes, every member attests the key.
// Owners and users that pin the real members by key refuse it:
//
//   - the user creates no job, and its error names the key it pinned and the
//     one the committee presents;
//   - an owner started against that proxy says at once (well within 5 s), in
//     its own log, that its pin does not match, naming both keys;
//   - a job a colluding user creates there is declined by the owner with
//     committee_pin: no upload, the owner's ledger untouched.
//
// (A forged owner's upload statement in a real committee's key switch is
// chaos's forged_owner deviation and sim.TestHostileKeySwitch.)
func TestCAHolderGetsNothing(t *testing.T) {
	for _, fed := range []bool{false, true} {
		name := map[bool]string{false: "single CA", true: "federation"}[fed]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			sch, owners := wdbcOwners(t, true)
			owners = owners[:1]
			cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 3, Threshold: 2, Owners: owners, Users: []string{"alice", "mallory"},
				TCP: true, Federation: fed, AllowNoNoise: true, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Stop()
			addr, forged := startRogueCommittee(ctx, t, cl)
			real := cl.Pins()
			if fed && !strings.HasPrefix(forged[0].Identity.String(), "spiffe://"+DomainOf(transport.Identity{Role: transport.RoleProxy, ID: "proxy"})+"/csp/") {
				t.Fatalf("the forged member is %s, not of the proxy's organisation", forged[0].Identity)
			}

			// The user, pinning the real members, creates no job there.
			alice := rogueUser(t, cl, "alice", addr, cl.Policy(), false)
			_, err = alice.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, NoNoise: true, Owners: IDs(owners), Deadline: time.Now().Add(time.Minute)})
			var pin *job.PinError
			if !errors.As(err, &pin) || !strings.Contains(err.Error(), "csp/csp-1 presents key "+forged[0].Key+", not the pinned key "+real[0].Key) {
				t.Fatalf("the user under the forged committee: %v", err)
			}
			t.Logf("user: %v", err)

			// The owner says so at start.
			logs := &lockedBuffer{}
			started := time.Now()
			o := rogueOwner(ctx, t, cl, owners[0], addr, logs)
			for !strings.Contains(logs.String(), "COMMITTEE PIN DOES NOT MATCH") {
				if time.Since(started) > 5*time.Second {
					t.Fatalf("the owner said nothing of its pin within 5 s:\n%s", logs)
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("the owner reported its pin's mismatch %s after it started", time.Since(started).Round(time.Millisecond))
			if l := logs.String(); !strings.Contains(l, forged[0].Key) || !strings.Contains(l, real[0].Key) {
				t.Fatalf("the owner's report does not name both keys:\n%s", l)
			}

			// A colluding user's job: declined, nothing uploaded.
			mallory := rogueUser(t, cl, "mallory", addr, job.CommitteePolicy{AnyMembers: true}, true)
			named := owners[0].ID + "=" + cl.Creds("owner/"+owners[0].ID).Key // the owner's real key: its trust has no roster
			_, st := submitWait(ctx, t, mallory, sch, user.Request{Analysis: job.PCA, NoNoise: true, Owners: []string{named}})
			if st.GetState() != fedpcav1.JobState_JOB_STATE_FAILED || len(st.GetUploadedOwners()) != 0 || len(st.GetDeclinedOwners()) != 1 ||
				st.GetDeclinedOwners()[0].GetReason() != fedpcav1.DeclineReason_DECLINE_REASON_COMMITTEE_PIN {
				t.Fatalf("the colluding user's job: %s (%s), uploaded %v, declined %v", st.GetState(), st.GetReason(), st.GetUploadedOwners(), st.GetDeclinedOwners())
			}
			if !strings.Contains(st.GetReason(), owners[0].ID+" (committee_pin)") {
				t.Errorf("the job's reason does not name the owner whose pin refused: %s", st.GetReason())
			}
			b, err := o.Balance(owners[0].Schema.ID)
			if err != nil || b.Spent != 0 || b.Reserved != 0 {
				t.Fatalf("the owner's ledger: %+v, %v", b, err)
			}
		})
	}
}

// startRogueCommittee is the proxy's operator's committee: three members
// whose certificates its own CA issued (csp/csp-1..3 of fresh keys) and a
// proxy over them (the real proxy's certificate, its roster dropped). It
// returns the proxy's address, once the ceremony is over, and the members'
// credentials.
func startRogueCommittee(ctx context.Context, t *testing.T, cl *Cluster) (string, []*transport.Credentials) {
	t.Helper()
	var members []proxy.Member
	var forged []*transport.Credentials
	dir := t.TempDir()
	for i := range 3 {
		id := transport.Identity{Role: transport.RoleCSP, ID: CSPID(i)}
		cr, err := cl.ForgeCredentials("proxy/proxy", id)
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := cl.Params()
		m, err := csp.New(csp.Config{ID: id.ID, Listener: l, Creds: cr, Store: filepath.Join(dir, id.ID), AllowNoNoise: true, Logger: hclog.NewNullLogger(), Params: &p})
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, m.Run)
		members = append(members, proxy.Member{ID: id.ID, Addr: l.Addr().String()})
		forged = append(forged, cr)
	}
	pc := colluding(t, cl, "proxy/proxy")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := cl.Params()
	px, err := proxy.New(proxy.Config{ID: "proxy", Listener: l, Creds: pc, Store: filepath.Join(dir, "proxy"), Committee: members, Threshold: 2,
		AllowNoNoise: true, RetryInterval: 100 * time.Millisecond, ProgressInterval: 100 * time.Millisecond, Logger: hclog.NewNullLogger(), Params: &p})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, px.Run)
	for !px.CommitteeReady() {
		if ctx.Err() != nil {
			t.Fatal("the forged committee's ceremony did not finish")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return l.Addr().String(), forged
}

// colluding is a node's real certificate with the trust store of the
// proxy's organisation without its roster: what a node that colludes with
// the CA's holder uses (its checks accept the holder's identities).
func colluding(t *testing.T, cl *Cluster, id string) *transport.Credentials {
	t.Helper()
	real := cl.Creds(id)
	forged, err := cl.ForgeCredentials("proxy/proxy", transport.Identity{Role: real.Identity.Role, ID: real.Identity.ID}) // for its trust store
	if err != nil {
		t.Fatal(err)
	}
	c, err := transport.NewCredentialsTrust(forged.Trust, real.Cert)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rogueUser is a client of a cluster's user against another proxy;
// colluding, it accepts the CA holder's identities.
func rogueUser(t *testing.T, cl *Cluster, name, addr string, policy job.CommitteePolicy, collude bool) *user.Client {
	t.Helper()
	d, err := cl.Dialer("user/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if collude {
		d.Creds = colluding(t, cl, "user/"+name)
	}
	kp, err := user.GenerateKeys(filepath.Join(t.TempDir(), "keys"), cl.Params())
	if err != nil {
		t.Fatal(err)
	}
	p := cl.Params()
	u, err := user.NewClient(user.Config{Dialer: d, ProxyAddr: addr, Keys: kp, Committee: policy, Logger: hclog.NewNullLogger(), Params: &p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// rogueOwner runs one of the cluster's owners (its credentials and pin)
// against another proxy, logging to logs.
func rogueOwner(ctx context.Context, t *testing.T, cl *Cluster, oc OwnerConfig, addr string, logs io.Writer) *owner.Owner {
	t.Helper()
	d, err := cl.Dialer("owner/" + oc.ID)
	if err != nil {
		t.Fatal(err)
	}
	p := cl.Params()
	data := oc.CSV
	o, err := owner.New(owner.Config{ID: oc.ID, Dialer: d, ProxyAddr: addr, Store: t.TempDir(), Params: &p,
		Policy: owner.Policy{Committee: cl.Policy(), AllowNoNoise: true}, PollInterval: 100 * time.Millisecond,
		Datasets: []*owner.Dataset{{Schema: oc.Schema, Epsilon: 10, Delta: 1e-6, Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(data))), nil }}},
		Logger:   hclog.New(&hclog.LoggerOptions{Name: "owner", Output: logs, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, o.Run)
	return o
}

// runUntilCleanup runs a daemon until the test ends.
func runUntilCleanup(t *testing.T, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Log(fmt.Sprint("daemon: ", err))
		}
	})
}
