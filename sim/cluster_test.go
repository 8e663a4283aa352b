package sim

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	"github.com/fedpca/fedpca/datasets"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// wdbcOwners returns sim.WDBCOwners' schema and owners.
func wdbcOwners(t *testing.T, noNoise bool) (*schema.Schema, []OwnerConfig) {
	t.Helper()
	sch, owners, err := WDBCOwners(noNoise)
	if err != nil {
		t.Fatal(err)
	}
	return sch, owners
}

// startUser starts a cluster and a client for one of its users; both stop
// when the test ends.
func startUser(ctx context.Context, t *testing.T, cfg Config, name string) (*Cluster, *user.Client) {
	t.Helper()
	cfg.Users = append(cfg.Users, name)
	cl, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	u, err := cl.User(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return cl, u
}

// proxyAs dials the cluster's proxy as node id (for example
// "owner/hospital-z", an identity the cluster made) and returns its client
// and the node's dialer; the connection closes when the test ends.
func proxyAs(t *testing.T, cl *Cluster, id string) (fedpcav1.ProxyServiceClient, transport.Dialer) {
	t.Helper()
	conn, d, err := cl.DialProxy(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return fedpcav1.NewProxyServiceClient(conn), d
}

// committeeKey fetches the committee's public key from the proxy.
func committeeKey(ctx context.Context, t *testing.T, c fedpcav1.ProxyServiceClient, p he.Params) *rlwe.PublicKey {
	t.Helper()
	cmt, err := c.GetCommittee(ctx, &fedpcav1.GetCommitteeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cpk, err := p.Codecs().PublicKey.Unmarshal(cmt.GetPublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return cpk
}

// submitWait creates a job (the request's schema is sch) and waits until it
// ends; it returns the spec and the full final status.
func submitWait(ctx context.Context, t *testing.T, u *user.Client, sch *schema.Schema, r user.Request) (*job.Spec, *fedpcav1.JobStatus) {
	t.Helper()
	r.Schema = sch
	if r.Deadline.IsZero() {
		r.Deadline = time.Now().Add(5 * time.Minute)
	}
	spec, err := u.Spec(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}
	st, err := u.Wait(ctx, spec.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return spec, st
}

// runJob submits a job through the user client, waits and fetches.
func runJob(ctx context.Context, t *testing.T, u *user.Client, sch *schema.Schema, owners []OwnerConfig, r user.Request) *job.Result {
	t.Helper()
	for _, o := range owners {
		r.Owners = append(r.Owners, o.ID)
	}
	spec, st := submitWait(ctx, t, u, sch, r)
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		t.Fatalf("job %s: %s", st.GetState(), st.GetReason())
	}
	res, err := u.Fetch(ctx, spec, sch)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestClusterWDBC is the integration test of the daemons: the proxy,
// committees of 1 member and of 3 members with threshold 2 (one of them
// stopped before the jobs), 5 owners with slices of wdbc and a user, all over
// bufconn with real mutual TLS. Noise off, the PCA and DCA results match
// reference.json; with noise the result carries the privacy accounting.
func TestClusterWDBC(t *testing.T) {
	ref, err := datasets.LoadReference("wdbc")
	if err != nil {
		t.Fatal(err)
	}
	for _, cc := range []struct {
		n, t, stop int
	}{{1, 1, -1}, {3, 2, 1}} {
		t.Run(fmt.Sprintf("csps=%d_t=%d", cc.n, cc.t), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			sch, owners := wdbcOwners(t, true)
			cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: cc.n, Threshold: cc.t, Owners: owners, Users: []string{"alice"}, AllowNoNoise: true, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Stop()
			if cc.stop >= 0 {
				if err := cl.StopCSP(cc.stop); err != nil {
					t.Fatal(err)
				}
			}
			u, err := cl.User("alice")
			if err != nil {
				t.Fatal(err)
			}
			defer u.Close()

			pca := runJob(ctx, t, u, sch, owners, user.Request{Analysis: job.PCA, K: 5, NoNoise: true})
			checkEigen(t, "pca", pca.Components.AllEigenvalues, ref.PCAEigenvalues, 1e-6)
			for j, want := range ref.PCATopK {
				for i := range want {
					if got := pca.Components.W.At(i, j); math.Abs(got-want[i]) > 1e-6 {
						t.Fatalf("pca component %d entry %d: %.9f, reference %.9f", j, i, got, want[i])
					}
				}
			}
			dca := runJob(ctx, t, u, sch, owners, user.Request{Analysis: job.DCA, NoNoise: true})
			checkEigen(t, "dca", dca.Components.Eigenvalues, ref.DCAEigenvalues, 1e-6)
			if pca.NumOwners != 5 || len(pca.Privacy.Collusion) != 0 || !pca.Privacy.NoNoise {
				t.Errorf("noise-off result: owners %d, privacy %+v", pca.NumOwners, pca.Privacy)
			}

			noisy := runJob(ctx, t, u, sch, owners, user.Request{Analysis: job.PCA, K: 3, Epsilon: 1, Delta: 1e-6, Plan: dp.PlanServers, Tolerate: 1})
			pr := noisy.Privacy
			if pr.NoNoise || pr.Delta != 1e-6 || pr.Epsilon > 1+1e-9 || pr.Epsilon < 0.99 || !(pr.Rho > 0) || len(pr.Collusion) != 5 {
				t.Errorf("noisy result privacy: %+v", pr)
			}
			if want := 1 + cc.t; len(pr.Shares) != want {
				t.Errorf("noise shares %d, want proxy + %d members", len(pr.Shares), cc.t)
			}
			if _, err := user.WriteOutputs(t.TempDir(), noisy); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func checkEigen(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d eigenvalues, reference %d", what, len(got), len(want))
	}
	for i := range want {
		if e := math.Abs(got[i]-want[i]) / math.Max(math.Abs(want[i]), 1e-3*math.Abs(want[0])); e > tol {
			t.Errorf("%s eigenvalue %d: %.10g, reference %.10g (relative %.2e)", what, i, got[i], want[i], e)
		}
	}
}

func testLogger(t *testing.T) hclog.Logger {
	if !testing.Verbose() {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Info, Output: testWriter{t}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
