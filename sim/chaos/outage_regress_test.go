package chaos

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/sim/faultnet"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// recoveryBound is the stated bound (docs/RELIABILITY.md, "Recovery after
// an outage"): the user's first call after an outage starts within 1 s of
// its end.
const recoveryBound = time.Second

// TestCreateJobAfterOutageUnderLoad: the proxy down 1.3 s and the user cut
// off from it 1.6 s while the user creates its job, under message faults
// (drop 6%+6%, dup 6%, delay 10%), on a machine kept busy. The user's
// retries used to back off up to 10 s (and the reconnects too), so it came
// back past the job's deadline and was refused "deadline is in the past":
// the job was never created. Found by `make chaos` (seed 1, episode 13,
// job 13.9) on a loaded machine. Now the user is back within the bound
// and the job is created and done, with its exact sum; and when the
// deadline is too close, the user is told so in plain words, and nothing
// was created.
func TestCreateJobAfterOutageUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stop := Load(ctx, runtime.NumCPU(), 3*time.Minute)
	defer stop()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:2]
	net := faultnet.NewNetwork(13)
	cl, err := sim.Start(ctx, sim.Config{Dir: t.TempDir(), CSPs: 1, Owners: owners, Users: []string{"alice"}, AllowNoNoise: true, Network: net,
		PollInterval: 50 * time.Millisecond, RetryInterval: 100 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	attempts := &attemptLog{}
	u := outageUser(t, cl, attempts)
	ids := []string{owners[0].ID, owners[1].ID}

	for _, tc := range []struct {
		name           string
		deadline       time.Duration    // from now; the spec keeps whole seconds
		down           time.Duration    // the proxy's, from the start
		cut            [2]time.Duration // the user's: from, for
		wantDeadlineIn bool
	}{
		// The failure of the issue: the proxy down from before the first
		// attempt, the outage ends 1.9 s in, the deadline is 9-10 s away
		// (the owners prove their uploads after the outage, slowly under
		// the race detector: three times that there, where one owner missed
		// 10 s on a loaded machine).
		{name: "outage", deadline: raceSlowdown * 10 * time.Second, down: 1334 * time.Millisecond,
			cut: [2]time.Duration{241 * time.Millisecond, 1616 * time.Millisecond}},
		// The deadline (1-2 s away) passes during the outage: the user is
		// told so in plain words.
		{name: "deadline during the outage", deadline: 2 * time.Second, down: 2500 * time.Millisecond,
			cut: [2]time.Duration{241 * time.Millisecond, 2600 * time.Millisecond}, wantDeadlineIn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 2, NoNoise: true, Owners: ids,
				Deadline: time.Now().Add(tc.deadline)})
			if err != nil {
				t.Fatal(err)
			}
			net.SetEpoch(uint64(len(tc.name)), heavyRates)
			attempts.reset()
			// The proxy crashes before the first attempt (nothing reaches it).
			if err := cl.CrashProxy(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			outageEnd := make(chan time.Time, 2)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				time.Sleep(tc.down)
				if err := retryStart(cl.RestartProxy); err != nil {
					t.Error(err)
				}
				outageEnd <- time.Now()
			}()
			go func() {
				defer wg.Done()
				time.Sleep(tc.cut[0])
				net.Partition([]string{"proxy/proxy"}, []string{"user/alice"})
				time.Sleep(tc.cut[1])
				net.Heal([]string{"proxy/proxy"}, []string{"user/alice"})
				outageEnd <- time.Now()
			}()
			_, err = u.Submit(ctx, spec, sch)
			submitted := time.Now()
			wg.Wait()
			end := <-outageEnd
			if e := <-outageEnd; e.After(end) {
				end = e
			}
			t.Logf("outage ended %s in, submit returned %s in (deadline %s in): %v; attempts (start-end from the outage's end): %s",
				end.Sub(start).Round(time.Millisecond), submitted.Sub(start).Round(time.Millisecond), spec.Deadline.Sub(start).Round(time.Millisecond), err, attempts.around(end))

			if tc.wantDeadlineIn {
				if !errors.Is(err, transport.ErrDeadlinePassed) || !strings.Contains(err.Error(), "job "+spec.ID()[:12]+"…'s deadline") ||
					strings.Contains(err.Error(), "in the past") || strings.Contains(err.Error(), "rpc error") {
					t.Fatalf("want the plain deadline error, got %v", err)
				}
				if submitted.After(spec.Deadline.Add(time.Second)) {
					t.Errorf("the user retried %s past the job's deadline", submitted.Sub(spec.Deadline))
				}
				net.SetRates(faultnet.Rates{})
				if _, err := u.Job(ctx, spec.ID()); status.Code(err) != codes.NotFound {
					t.Errorf("the proxy knows a job whose creation the user was told failed: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("job creation after a short outage: %v", err)
			}
			if gap := attempts.gapAfter(end); gap > recoveryBound {
				t.Errorf("the user's first call after the outage started %s after its end (bound %s)", gap, recoveryBound)
			}
			res := doneResult(ctx, t, u, spec, sch)
			net.SetRates(faultnet.Rates{})
			if !isExactSum(t, res, spec, sch, owners) {
				t.Error("the release is not the exact sum of the owners' statistics")
			}
		})
	}
}

// outageUser is the user "alice" of a cluster, whose calls to the proxy
// are logged (their start and end) ahead of the network's faults.
func outageUser(t *testing.T, cl *sim.Cluster, log *attemptLog) *user.Client {
	t.Helper()
	kp, err := user.GenerateKeys(filepath.Join(t.TempDir(), "keys"), cl.Params())
	if err != nil {
		t.Fatal(err)
	}
	d := cl.DialerAs(transport.Identity{Role: transport.RoleUser, ID: "alice"}, "user/alice", true)
	d.Options = append([]grpc.DialOption{grpc.WithChainUnaryInterceptor(log.intercept)}, d.Options...)
	p := cl.Params()
	u, err := user.NewClient(user.Config{Dialer: d, ProxyAddr: cl.ProxyAddr(), Keys: kp, Committee: cl.Policy(), Logger: testLogger(t), Params: &p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// attemptLog records when each CreateJob attempt started and ended.
type attemptLog struct {
	mu    sync.Mutex
	spans [][2]time.Time
}

func (l *attemptLog) reset() { l.mu.Lock(); l.spans = nil; l.mu.Unlock() }

func (l *attemptLog) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if method == fedpcav1.ProxyService_CreateJob_FullMethodName {
		l.mu.Lock()
		l.spans = append(l.spans, [2]time.Time{start, time.Now()})
		l.mu.Unlock()
	}
	return err
}

// gapAfter is how long after t the first attempt in flight at or after t
// started (0 if one was in flight at t; an hour if none came).
func (l *attemptLog) gapAfter(t time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	gap := time.Hour
	for _, s := range l.spans {
		if !s[1].Before(t) {
			gap = min(gap, max(s[0].Sub(t), 0))
		}
	}
	return gap
}

func (l *attemptLog) around(t time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, s := range l.spans {
		b.WriteString(" [" + s[0].Sub(t).Round(time.Millisecond).String() + ", " + s[1].Sub(t).Round(time.Millisecond).String() + "]")
	}
	return b.String()
}
