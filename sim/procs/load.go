package procs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// LoadConfig describes a load test: Owners owners with Rows rows each of d
// = D synthetic features upload at the same moment to one proxy process.
type LoadConfig struct {
	Owners, Rows, D int
	// Launcher runs the proxy as a process.
	Launcher *Launcher
	Seed     uint64
	Logger   hclog.Logger
}

// LoadReport is what a load test measured. Latencies run from the moment
// every owner is released to its acknowledgement (waits for a busy proxy
// included); the window from the release to the last acknowledgement.
type LoadReport struct {
	Owners       int     `json:"owners"`
	Acknowledged int     `json:"acknowledged"`
	Failed       int     `json:"failed"`
	Busy         int     `json:"busy_answers"`
	Retries      int     `json:"retries_after_errors"`
	Window       float64 `json:"window_seconds"`
	UploadBytes  int64   `json:"upload_bytes"`
	LatencyP50   float64 `json:"latency_p50_seconds"`
	LatencyP99   float64 `json:"latency_p99_seconds"`
	LatencyMax   float64 `json:"latency_max_seconds"`
	ProxyCPU     float64 `json:"proxy_cpu_seconds"`
	ProxyPeakRSS int64   `json:"proxy_peak_rss_bytes"`
	// Prepare is the time to compute every owner's share and open every
	// owner's connection (mutual TLS) before the release.
	Prepare float64 `json:"prepare_seconds"`
	// Included is the number of owners in the job's result, which the
	// user fetched and decrypted after the uploads.
	Included int `json:"included_in_result"`
	// KeySwitch is the job's key switch, in which each member receives and
	// verifies every upload's proofs before it switches.
	KeySwitch float64  `json:"key_switch_seconds"`
	Errors    []string `json:"errors,omitempty"`
}

// RunLoad starts a committee of three (any two) in this process and the
// proxy as a process on loopback TCP with mutual TLS, has a user submit a
// PCA job naming every owner, prepares each owner's real encrypted share
// and connection (its own certificate), then releases every upload at once.
// Each owner uploads as the owner daemon does (transport.Upload, waiting
// for its connection, coming back after the proxy's retry hint when told
// it is busy). It then waits for the job's result.
func RunLoad(ctx context.Context, cfg LoadConfig) (*LoadReport, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	data := sim.Synthetic(cfg.Owners*cfg.Rows, cfg.D, 5, cfg.Seed)
	parts, err := sim.Split(data, "label", cfg.Owners, "iid", cfg.Seed)
	if err != nil {
		return nil, err
	}
	sch, err := schema.Infer(bytes.NewReader(data), fmt.Sprintf("synthetic-d%d", cfg.D), "label")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fedpca-load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ids := make([]string, cfg.Owners)
	idents := make([]string, cfg.Owners)
	for i := range ids {
		ids[i] = fmt.Sprintf("owner-%05d", i+1)
		idents[i] = "owner/" + ids[i]
	}
	cl, err := sim.Start(ctx, sim.Config{Dir: dir, CSPs: 3, Threshold: 2, Users: []string{"analyst"}, Identities: idents, TCP: true,
		Processes: cfg.Launcher, ProxyProcess: true, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	if err := cl.WaitCommittee(ctx); err != nil {
		return nil, err
	}
	u, err := cl.User("analyst")
	if err != nil {
		return nil, err
	}
	defer u.Close()
	spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 5, Epsilon: 1, Plan: dp.PlanServers,
		Split: dp.DefaultSplitFor(job.PCA), Owners: ids, Deadline: time.Now().Add(time.Hour), MaxOwnerRows: int64(cfg.Rows)})
	if err != nil {
		return nil, err
	}
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		return nil, err
	}

	// Prepare: every owner's connection (TLS handshake, the job's ticket,
	// the committee key) and share, before anyone uploads.
	prepStart := time.Now()
	clients := make([]fedpcav1.ProxyServiceClient, cfg.Owners)
	conns := make([]*grpc.ClientConn, cfg.Owners)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	ups := make([]sim.Upload, cfg.Owners)
	creds := make([]*transport.Credentials, cfg.Owners)
	var cpk *rlwe.PublicKey
	var cpkOnce sync.Once
	p := cl.Params()
	err = parallel(ctx, cfg.Owners, func(ctx context.Context, i int) error {
		conn, d, err := cl.DialProxy(idents[i])
		if err != nil {
			return err
		}
		creds[i] = d.Creds
		conns[i], clients[i] = conn, fedpcav1.NewProxyServiceClient(conn)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, err := clients[i].GetJob(cctx, &fedpcav1.GetJobRequest{JobId: spec.ID(), Ticket: true}, grpc.WaitForReady(true)); err != nil {
			return fmt.Errorf("%s: ticket: %w", ids[i], err)
		}
		var cerr error
		cpkOnce.Do(func() {
			var cmt *fedpcav1.GetCommitteeResponse
			if cmt, cerr = clients[i].GetCommittee(cctx, &fedpcav1.GetCommitteeRequest{}); cerr == nil {
				cpk, cerr = p.Codecs().PublicKey.Unmarshal(cmt.GetPublicKey())
			}
		})
		return cerr
	})
	if err != nil {
		return nil, err
	}
	if cpk == nil {
		return nil, errors.New("load: no committee key")
	}
	err = parallel(ctx, cfg.Owners, func(_ context.Context, i int) (err error) {
		ups[i], err = sim.OwnerUpload(spec, sch, p, cpk, parts[i], ids[i], creds[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	rep := &LoadReport{Owners: cfg.Owners, Prepare: time.Since(prepStart).Seconds()}

	// Release every upload at once.
	cpu0, err := cfg.Launcher.ProxyCPUSeconds()
	if err != nil {
		return nil, err
	}
	var latency []float64
	var released time.Time // set before release is closed
	var mu sync.Mutex
	var wg sync.WaitGroup
	release := make(chan struct{})
	for i := range cfg.Owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			busy, retries, err := uploadLikeAnOwner(ctx, clients[i], ups[i], spec.Deadline)
			mu.Lock()
			defer mu.Unlock()
			rep.Busy += busy
			rep.Retries += retries
			if err != nil {
				rep.Failed++
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", ids[i], err))
				return
			}
			rep.Acknowledged++
			latency = append(latency, time.Since(released).Seconds())
			for _, b := range ups[i].Blobs {
				rep.UploadBytes += int64(len(b))
			}
		}()
	}
	released = time.Now()
	close(release)
	wg.Wait()
	rep.Window = time.Since(released).Seconds()
	cpu1, err := cfg.Launcher.ProxyCPUSeconds()
	if err != nil {
		return nil, err
	}
	rep.ProxyCPU = cpu1 - cpu0
	if rep.ProxyPeakRSS, err = cfg.Launcher.ProxyPeakRSS(); err != nil {
		return nil, err
	}
	slices.Sort(latency)
	rep.LatencyP50, rep.LatencyP99, rep.LatencyMax = Quantile(latency, 0.5), Quantile(latency, 0.99), Quantile(latency, 1)

	// The job completes with every upload, and the user decrypts it.
	st, err := u.Wait(ctx, spec.ID(), nil)
	if err != nil {
		return rep, err
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		return rep, fmt.Errorf("load: job ended %s: %s", st.GetState(), st.GetReason())
	}
	res, err := u.Fetch(ctx, spec, sch)
	if err != nil {
		return rep, err
	}
	rep.Included, rep.KeySwitch = res.NumOwners, st.GetTimings().GetKeySwitchSeconds()
	return rep, nil
}

// uploadLikeAnOwner uploads until acknowledged, as the owner daemon does:
// transient errors are retried after the proxy's retry hint or a jittered
// backoff, until the deadline. It counts busy answers and other retries.
func uploadLikeAnOwner(ctx context.Context, c fedpcav1.ProxyServiceClient, up sim.Upload, deadline time.Time) (busy, retries int, err error) {
	b := transport.Backoff{Initial: time.Second, Max: 30 * time.Second}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		_, err := transport.Upload(ctx, c, up.Header, up.Blobs, up.Proofs, grpc.WaitForReady(true))
		switch {
		case err == nil:
			return busy, retries, nil
		case !transport.Transient(err) || ctx.Err() != nil:
			return busy, retries, err
		case status.Code(err) == codes.ResourceExhausted:
			busy++
		default:
			retries++
		}
		if werr := b.WaitFor(ctx, err); werr != nil {
			return busy, retries, err
		}
	}
}

// parallel runs fn for 0..n-1 on every core and returns the first error.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) * 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// Quantile is the q-quantile of sorted values (nearest rank; q = 1 is the
// maximum).
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[max(0, int(float64(len(sorted))*q+0.999999)-1)]
}
