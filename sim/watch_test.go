package sim

import (
	"context"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// proxyMetric sums the samples of one of the in-process proxy's series
// whose labels contain match.
func proxyMetric(t *testing.T, cl *Cluster, name, match string) float64 {
	t.Helper()
	cl.mu.Lock()
	m := cl.proxyMetrics
	cl.mu.Unlock()
	samples, err := transport.Scrape(m.Registry, name)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for labels, v := range samples {
		if strings.Contains(labels, match) {
			sum += v
		}
	}
	return sum
}

// waitFor waits until cond holds (or fails the test when ctx ends).
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ownersMetric sums the samples of the in-process owners' series whose
// labels contain match.
func ownersMetric(t *testing.T, cl *Cluster, name, match string) float64 {
	t.Helper()
	cl.mu.Lock()
	ms := slices.Collect(maps.Values(cl.ownerMetrics))
	cl.mu.Unlock()
	sum := 0.0
	for _, m := range ms {
		samples, err := transport.Scrape(m.Registry, name)
		if err != nil {
			t.Fatal(err)
		}
		for labels, v := range samples {
			if strings.Contains(labels, match) {
				sum += v
			}
		}
	}
	return sum
}

// TestOwnersLearnOfJobsByWatch: with a poll interval of an hour, owners
// still learn of two jobs and take part in both: the proxy's watch tells
// them, with their tickets. Each owner listed the jobs once, at its start,
// before any job existed, and never again, and fetched no ticket.
func TestOwnersLearnOfJobsByWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:3]
	cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners, AllowNoNoise: true, PollInterval: time.Hour}, "alice")
	waitFor(ctx, t, "the owners' watches", func() bool { return proxyMetric(t, cl, "fedpca_proxy_owner_watch_streams", "") == 3 })
	for range 2 {
		_, st := submitWait(ctx, t, u, sch, user.Request{Analysis: job.PCA, K: 2, NoNoise: true, Owners: IDs(owners)})
		if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE || len(st.GetUploadedOwners()) != 3 {
			t.Fatalf("job %s with %v uploaded: %s", st.GetState(), st.GetUploadedOwners(), st.GetReason())
		}
	}
	if n := proxyMetric(t, cl, "fedpca_rpc_requests_total", "ListJobs"); n != 3 {
		t.Errorf("the proxy served %v ListJobs calls, want 3 (one per owner at its start)", n)
	}
	if n := ownersMetric(t, cl, "fedpca_rpc_client_requests_total", "ProxyService/GetJob"); n != 0 {
		t.Errorf("the owners made %v GetJob calls, want none (the watch sends the tickets)", n)
	}
}

// TestWatchResumesAfterProxyRestart: an owner's watch cursor survives a
// crash of the proxy. A hand-driven owner takes a cursor, a job naming it
// is created and the proxy crashes and restarts; the watch resumed from
// the cursor announces the job (no snapshot), and then its cancellation.
// The running owners, watching with a poll interval of an hour, take part
// in the job before the crash and in another after it.
func TestWatchResumesAfterProxyRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:3]
	cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners, AllowNoNoise: true, PollInterval: time.Hour,
		Identities: []string{"owner/hospital-z"}}, "alice")
	z, _ := proxyAs(t, cl, "owner/hospital-z")
	// first opens a watch and returns its first message.
	first := func(cursor string) (*fedpcav1.WatchOwnerJobsResponse, fedpcav1.ProxyService_WatchOwnerJobsClient, context.CancelFunc) {
		t.Helper()
		wctx, stop := context.WithCancel(ctx)
		var s fedpcav1.ProxyService_WatchOwnerJobsClient
		var r *fedpcav1.WatchOwnerJobsResponse
		err := transport.Retry(wctx, transport.Call{What: "watch", Timeout: 10 * time.Second, Attempts: 50}, func(context.Context) (err error) {
			if s, err = z.WatchOwnerJobs(wctx, &fedpcav1.WatchOwnerJobsRequest{Cursor: cursor}); err == nil {
				r, err = s.Recv()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return r, s, stop
	}

	r, _, stop := first("")
	stop()
	if !r.GetSnapshot() || len(r.GetJobs()) != 0 || r.GetCursor() == "" {
		t.Fatalf("first watch: %v", r)
	}
	cursor := r.GetCursor()
	waitFor(ctx, t, "the owners' watches", func() bool { return proxyMetric(t, cl, "fedpca_proxy_owner_watch_streams", "") == 3 })

	// awaitZ submits a job naming hospital-z (and the running owners): it
	// stays open after the three running owners uploaded.
	awaitZ := func() *job.Spec {
		t.Helper()
		sp, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 2, NoNoise: true, Owners: append(IDs(owners), "hospital-z"),
			Deadline: time.Now().Add(5 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.Submit(ctx, sp, sch); err != nil {
			t.Fatal(err)
		}
		return sp
	}
	// The running owners learn of it by their watches.
	spec := awaitZ()
	waitFor(ctx, t, "three uploads", func() bool {
		info, err := u.Job(ctx, spec.ID())
		return err == nil && info.GetStatus().GetOwnersUploaded() == 3
	})

	if err := cl.CrashProxy(); err != nil {
		t.Fatal(err)
	}
	if err := cl.RestartProxy(); err != nil {
		t.Fatal(err)
	}
	r, s, stop := first(cursor)
	defer stop()
	if r.GetSnapshot() || len(r.GetJobs()) != 1 || r.GetJobs()[0].GetJobId() != spec.ID() || r.GetJobs()[0].GetState() != fedpcav1.JobState_JOB_STATE_OPEN {
		t.Fatalf("watch resumed after the restart: %v; want the job created since the cursor, open, not a snapshot", r)
	}
	if r.GetCursor() == cursor {
		t.Fatalf("the cursor did not move: %s", cursor)
	}
	// hospital-z has not uploaded: its ticket comes with the announcement.
	if r.GetTicket().GetStatus().GetJobId() != spec.ID() || spec.CheckMember(transport.Owners(cl.OwnerRefs("hospital-z"))[0], job.OwnerProof{Index: int(r.GetOwnerProof().GetIndex()), Path: r.GetOwnerProof().GetPath()}) != nil {
		t.Fatalf("the announcement of an open job carries no valid ticket for hospital-z: %v", r)
	}
	if _, err := u.Cancel(ctx, spec.ID()); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetJobs()) != 1 || r.GetJobs()[0].GetState() != fedpcav1.JobState_JOB_STATE_FAILED || r.GetJobs()[0].GetCallerIncluded() {
		t.Fatalf("the cancellation was announced as %v", r)
	}

	// A cursor of another store gets a snapshot; a malformed one is refused.
	if r, _, stop := first("OTHERSTORE.1"); !r.GetSnapshot() {
		t.Fatalf("a foreign cursor resumed: %v", r)
	} else {
		stop()
	}
	if s, err := z.WatchOwnerJobs(ctx, &fedpcav1.WatchOwnerJobsRequest{Cursor: "no cursor"}); err == nil {
		if _, err = s.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a malformed cursor: %v, want InvalidArgument", err)
		}
	}

	// Two open jobs await hospital-z: a snapshot lists both with its two
	// tickets, one a message, each before or with its job's status.
	specs := map[string]*job.Spec{}
	for range 2 {
		sp := awaitZ()
		specs[sp.ID()] = sp
	}
	r, s, stop = first("")
	defer stop()
	tickets, listed := 0, 0
	for {
		if tk := r.GetTicket(); tk != nil {
			sp := specs[tk.GetStatus().GetJobId()]
			if sp == nil || sp.CheckMember(transport.Owners(cl.OwnerRefs("hospital-z"))[0], job.OwnerProof{Index: int(r.GetOwnerProof().GetIndex()), Path: r.GetOwnerProof().GetPath()}) != nil {
				t.Fatalf("a snapshot's ticket is not hospital-z's of a listed job: %v", r)
			}
			tickets++
		}
		listed += len(r.GetJobs())
		if r.GetCursor() != "" {
			break
		}
		if r, err = s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if tickets != 2 || listed != 2 {
		t.Fatalf("the snapshot listed %d open jobs with %d tickets, want 2 and 2", listed, tickets)
	}
	for id := range specs {
		if _, err := u.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	// The running owners' watches came back: they take part in a new job.
	_, st := submitWait(ctx, t, u, sch, user.Request{Analysis: job.PCA, K: 2, NoNoise: true, Owners: IDs(owners)})
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE || len(st.GetUploadedOwners()) != 3 {
		t.Fatalf("job after the restart: %s with %v uploaded: %s", st.GetState(), st.GetUploadedOwners(), st.GetReason())
	}
}

// TestWatchCapFallsBackToPolling: a proxy that serves one watch refuses
// the second owner's with ResourceExhausted; that owner polls and takes
// part in the job all the same.
func TestWatchCapFallsBackToPolling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:2]
	cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners, AllowNoNoise: true, PollInterval: 200 * time.Millisecond,
		ProxyMaxWatchers: 1}, "alice")
	waitFor(ctx, t, "a refused watch", func() bool { return proxyMetric(t, cl, "fedpca_proxy_owner_watches_total", "event=refused") >= 1 })
	if n := proxyMetric(t, cl, "fedpca_proxy_owner_watch_streams", ""); n != 1 {
		t.Fatalf("%v watches open, want 1", n)
	}
	_, st := submitWait(ctx, t, u, sch, user.Request{Analysis: job.PCA, K: 2, NoNoise: true, Owners: IDs(owners)})
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE || len(st.GetUploadedOwners()) != 2 {
		t.Fatalf("job %s with %v uploaded: %s", st.GetState(), st.GetUploadedOwners(), st.GetReason())
	}
}

// TestWatchStreamsEndWithoutLeaks: twenty watches opened and closed by a
// client leave no goroutine behind in the proxy.
func TestWatchStreamsEndWithoutLeaks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, owners := wdbcOwners(t, true)
	cl, _ := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners[:1], AllowNoNoise: true, PollInterval: time.Hour,
		Identities: []string{"owner/hospital-z"}}, "alice")
	z, _ := proxyAs(t, cl, "owner/hospital-z")
	waitFor(ctx, t, "the owner's watch", func() bool { return proxyMetric(t, cl, "fedpca_proxy_owner_watch_streams", "") == 1 })
	// A first round warms the connection up (its goroutines stay).
	round := func() {
		wctx, stop := context.WithCancel(ctx)
		for range 20 {
			s, err := z.WatchOwnerJobs(wctx, &fedpcav1.WatchOwnerJobsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		if n := proxyMetric(t, cl, "fedpca_proxy_owner_watch_streams", ""); n != 21 {
			t.Fatalf("%v watches open, want 21", n)
		}
		stop()
		waitFor(ctx, t, "the watches to end", func() bool { return proxyMetric(t, cl, "fedpca_proxy_owner_watch_streams", "") == 1 })
	}
	round()
	settle := func() int {
		n := runtime.NumGoroutine()
		for range 50 {
			time.Sleep(20 * time.Millisecond)
			n = min(n, runtime.NumGoroutine())
		}
		return n
	}
	before := settle()
	round()
	sctx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	waitFor(sctx, t, "the goroutines to settle", func() bool { return settle() <= before })
}
