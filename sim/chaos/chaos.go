package chaos

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/sim/faultnet"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// Config configures a chaos run: episodes of jobs, each episode on a
// fresh deployment (dataset, owners, committee and transport drawn from its
// seed), every job with random faults from the seed, and the invariants
// checked after every job.
type Config struct {
	Seed uint64
	// Jobs is the number of jobs (default 200), JobsPerEpisode how many run
	// on one deployment (default 10).
	Jobs, JobsPerEpisode int
	// Episodes, if set, runs only these episodes (to reproduce one).
	Episodes []int
	// Processes, if set, runs the proxy of every fourth episode as a
	// separate process over TCP (package sim/procs), crashed with SIGKILL.
	Processes sim.Launcher
	// Parallel runs that many episodes at once (default 1). The machine's
	// load changes timings, not what is checked.
	Parallel int
	// LoadCores keeps that many cores busy during the run, for at most
	// LoadFor (default 30 minutes): the suite must pass on a loaded
	// machine (Load).
	LoadCores int
	LoadFor   time.Duration
	// Deviations, if set, gives episode e the deviating proxy
	// Deviations[e % len] (AllDeviations); otherwise one episode in two,
	// drawn from the seed, has one.
	Deviations []string
	// Dir holds the deployments (default: a temporary directory, removed).
	Dir    string
	Logger hclog.Logger
	// Progress, if set, gets a line per job (an episode's lines at its end).
	Progress io.Writer
}

// Fault kinds the chaos driver injects itself (the network counts the
// message faults).
const (
	FaultCrashProxy         = "crash_proxy"   // in-process: listener and connections cut, no draining
	FaultKillProxy          = "sigkill_proxy" // proxy process: SIGKILL
	FaultCrashCSP           = "crash_csp"
	FaultCrashOwner         = "crash_owner"
	FaultPartitionCommittee = "partition_proxy_committee"
	FaultPartitionOwner     = "partition_owner_proxy"
	FaultPartitionUser      = "partition_user_proxy"
	FaultDiskFull           = "disk_full_proxy" // the proxy's filesystem filled for a while (root only)
)

// chaos timing: upload deadline of a job, the proxy's switch timeout, and
// the bound within which a job must end. Variables only so that the tests
// can stretch them under the race detector (race_test.go), where owners
// prove their uploads twenty times slower.
var (
	chaosDeadline      = 6 * time.Second
	chaosSwitchTimeout = 30 * time.Second
	chaosJobBound      = chaosDeadline + chaosSwitchTimeout + 30*time.Second
	chaosSettleBound   = 30 * time.Second
)

// Run runs the chaos suite and reports the faults injected and the
// invariants checked. An error means the suite itself could not run (a
// deployment did not start); violations are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Jobs <= 0 {
		cfg.Jobs = 200
	}
	if cfg.JobsPerEpisode <= 0 {
		cfg.JobsPerEpisode = 10
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	dir := cfg.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "fedpca-chaos-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	episodes := cfg.Episodes
	if len(episodes) == 0 {
		for e := 0; e*cfg.JobsPerEpisode < cfg.Jobs; e++ {
			episodes = append(episodes, e)
		}
	}
	rep := newChaosReport(cfg.Seed, cfg.JobsPerEpisode)
	if cfg.LoadCores > 0 {
		if cfg.LoadFor <= 0 {
			cfg.LoadFor = 30 * time.Minute
		}
		stop := Load(ctx, cfg.LoadCores, cfg.LoadFor)
		defer stop()
	}
	start := time.Now()
	todo := make(chan int, len(episodes))
	for _, e := range episodes {
		todo <- e
	}
	close(todo)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range max(cfg.Parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range todo {
				if ctx.Err() != nil {
					return
				}
				plan, rng := planEpisode(cfg, e)
				edir := fmt.Sprintf("%s/episode-%03d", dir, e)
				var out bytes.Buffer
				ecfg := cfg
				ecfg.Progress = &out
				err := runEpisode(ctx, ecfg, plan, rng, edir, rep)
				mu.Lock()
				_, _ = cfg.Progress.Write(out.Bytes())
				if err != nil {
					errs = append(errs, fmt.Errorf("episode %d (seed %d): %w", e, plan.Seed, err))
				}
				mu.Unlock()
				if cfg.Dir == "" {
					os.RemoveAll(edir)
				}
			}
		}()
	}
	wg.Wait()
	rep.Wall = time.Since(start).Seconds()
	return rep, errors.Join(errs...)
}

// episode is a running deployment of the chaos suite.
type episode struct {
	cfg     Config
	plan    episodePlan
	rep     *Report
	cl      *sim.Cluster
	net     *faultnet.Network
	sch     *schema.Schema
	parts   [][]byte
	owners  []string
	budgets map[string]float64 // owner -> epsilon budget
	user    *user.Client
	obs     fedpcav1.ProxyServiceClient
	obsConn *grpc.ClientConn
	rows    int64
	step    int
	jobs    int
	// proxyDisk is the proxy's state directory on its own small
	// filesystem ("" if none could be mounted).
	proxyDisk string

	mu      sync.Mutex
	acks    map[string]map[string]bool // job -> owners whose upload acknowledgement was delivered
	faults  []string                   // this step's faults
	restart []string                   // this step's restart-consistency violations
	rchecks int                        // and the comparisons made

	// dev is the deviating proxy's test double (nil: an honest proxy),
	// devJob the job it deviates in and switched the requests members got.
	dev    *deviant
	devJob *jobRun
	runs   map[string]*jobRun // by job ID, every job of the episode
}

func runEpisode(ctx context.Context, cfg Config, plan episodePlan, rng *rand.Rand, dir string, rep *Report) error {
	data, err := datasets.CSV(plan.Dataset)
	if err != nil {
		return err
	}
	sch, err := schema.Infer(bytes.NewReader(data), plan.Dataset, "label")
	if err != nil {
		return err
	}
	sch.Bits = 22 // as the reference comparisons (cluster_test)
	parts, err := sim.Split(data, "label", plan.Owners, "iid", plan.Seed)
	if err != nil {
		return err
	}
	ep := &episode{cfg: cfg, plan: plan, rep: rep, sch: sch, parts: parts, budgets: map[string]float64{}, acks: map[string]map[string]bool{},
		net: faultnet.NewNetwork(plan.Seed), runs: map[string]*jobRun{}}
	var serverOpts []grpc.ServerOption
	var dialOpts []grpc.DialOption
	if plan.Deviation != "" {
		ep.dev = newDeviant(plan.Deviation)
		serverOpts, dialOpts = ep.dev.serverOptions(), ep.dev.dialOptions()
	}
	var owners []sim.OwnerConfig
	for i, p := range parts {
		id := ownerName(i)
		eps := 1e6
		if i == plan.Tight {
			eps = 3 // a few noisy jobs
		}
		ep.owners, ep.budgets[id] = append(ep.owners, id), eps
		owners = append(owners, sim.OwnerConfig{ID: id, Schema: sch, CSV: p, Epsilon: eps, Delta: 1e-6, Policy: sim.OwnerPolicy(true)})
	}
	ep.rows = int64(bytes.Count(data, []byte("\n")))
	ep.net.OnDelivered(ep.delivered)
	// The proxy's state on a small filesystem of its own, to be filled.
	diskNote := ""
	if unmount, err := mountSmall(filepath.Join(dir, "state", "proxy"), "64m"); err == nil {
		ep.proxyDisk = filepath.Join(dir, "state", "proxy")
		defer func() {
			if err := unmount(); err != nil {
				fmt.Fprintf(cfg.Progress, "  %v\n", err)
			}
		}()
	} else {
		diskNote = " (no disk-full faults: " + err.Error() + ")"
	}
	if plan.CeremonyFaults {
		ep.net.SetEpoch(1<<32, heavyRates)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cl, err := sim.Start(sctx, sim.Config{Dir: dir, CSPs: plan.CSPs, Threshold: plan.T, Owners: owners, Users: []string{"analyst"}, TCP: plan.TCP,
		AllowNoNoise: true, PollInterval: 50 * time.Millisecond, RetryInterval: 100 * time.Millisecond, Logger: cfg.Logger.With("episode", plan.Index),
		Network: ep.net, SwitchTimeout: chaosSwitchTimeout, Processes: cfg.Processes, ProxyProcess: plan.Process,
		ProxyServerOptions: serverOpts, ProxyDialOptions: dialOpts})
	if err != nil {
		return err
	}
	ep.cl = cl
	if ep.dev != nil {
		p := cl.Params()
		ep.dev.params = &p
		ep.dev.signer = func(owner string) crypto.Signer { return cl.Creds("owner/" + owner).Signer() }
		ep.dev.forge = func(owner string) (*transport.Credentials, error) {
			return cl.ForgeCredentials("proxy/proxy", transport.Identity{Role: transport.RoleOwner, ID: owner})
		}
	}
	defer cl.Stop()
	if ep.user, err = cl.User("analyst"); err != nil {
		return err
	}
	defer ep.user.Close()
	uid := transport.Identity{Role: transport.RoleUser, ID: "analyst"}
	if ep.obsConn, err = cl.DialerAs(uid, "observer", false).Dial(cl.ProxyAddr(), transport.Identity{Role: transport.RoleProxy}); err != nil {
		return err
	}
	defer ep.obsConn.Close()
	ep.obs = fedpcav1.NewProxyServiceClient(ep.obsConn)

	ep.net.SetEpoch(0, faultnet.Rates{})
	transportName := "memory"
	if plan.TCP {
		transportName = "tcp"
	}
	if plan.Process {
		transportName = "tcp, proxy process"
	}
	if plan.CeremonyFaults {
		transportName += ", key ceremony under message faults"
	}
	transportName += diskNote
	if plan.Deviation != "" {
		transportName += ", deviating proxy: " + plan.Deviation
	}
	fmt.Fprintf(cfg.Progress, "episode %d (seed %d): %s, %d owners, committee %d-of-%d, %s\n",
		plan.Index, plan.Seed, plan.Dataset, plan.Owners, plan.T, plan.CSPs, transportName)
	lastAnalysis := ""
	for done := 0; done < cfg.JobsPerEpisode; {
		sp := planStep(rng, plan, ep.step, ep.proxyDisk != "", cfg.JobsPerEpisode-done)
		if plan.Deviation != "" && ep.devJob == nil && (plan.Deviation == DevSwapKey || cfg.JobsPerEpisode-done <= len(sp.jobs)) {
			// The deviating job runs alone and without faults: what is
			// checked is the deviation's outcome.
			sp.jobs, sp.rates, sp.events, sp.deviate = sp.jobs[:1], faultnet.Rates{}, nil, true
			switch j := &sp.jobs[0]; plan.Deviation {
			case DevResubmit:
				if lastAnalysis != "" {
					// Sent an earlier sum of the same analysis; noise-off,
					// the release is that sum itself.
					j.NoNoise, j.Analysis = true, lastAnalysis
				}
			case DevDrop, DevSubset:
				// Under the plans that were said to protect against a
				// deviating proxy: the members must refuse.
				j.NoNoise, j.Plan = false, []string{dp.PlanOwners, dp.PlanAll}[rng.IntN(2)]
			}
		}
		lastAnalysis = sp.jobs[len(sp.jobs)-1].Analysis
		ep.runStep(ctx, sp)
		done += len(sp.jobs)
		ep.step++
	}
	ep.rep.addFaults(ep.net.Counts())
	ep.rep.episode()
	return nil
}

// delivered records upload acknowledgements that reached their owner.
func (ep *episode) delivered(from, method string, resp any) {
	r, ok := resp.(*fedpcav1.UploadResponse)
	if !ok || method != fedpcav1.ProxyService_Upload_FullMethodName || r.GetAdmitted() {
		return
	}
	owner := strings.TrimPrefix(from, transport.RoleOwner+"/")
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.acks[r.GetJobId()] == nil {
		ep.acks[r.GetJobId()] = map[string]bool{}
	}
	ep.acks[r.GetJobId()][owner] = true
}

func (ep *episode) ackedOwners(id string) []string {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var out []string
	for o := range ep.acks[id] {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

func (ep *episode) fault(kind, what string) {
	ep.net.Count(kind)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.faults = append(ep.faults, what)
}

// jobRun is one job of a step, as the user ran it.
type jobRun struct {
	plan    jobPlan
	spec    *job.Spec
	idReady chan struct{}
	userErr error
	result  *job.Result
	status  *fedpcav1.JobStatus // final, from the observer
	start   time.Time
	took    time.Duration
	// deviant: the proxy deviates in this job.
	deviant bool
}

func (jr *jobRun) id() string {
	if jr.spec == nil {
		return ""
	}
	return jr.spec.ID()
}

// runStep runs a step's jobs under its faults, then checks the invariants.
func (ep *episode) runStep(ctx context.Context, sp stepPlan) {
	ep.net.SetEpoch(uint64(ep.step), sp.rates)
	ep.mu.Lock()
	ep.faults, ep.restart = nil, nil
	ep.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, chaosJobBound+chaosSettleBound)
	defer cancel()
	runs := make([]*jobRun, len(sp.jobs))
	var wg sync.WaitGroup
	for i, jp := range sp.jobs {
		runs[i] = &jobRun{plan: jp, idReady: make(chan struct{}), deviant: sp.deviate}
		if sp.deviate {
			ep.devJob = runs[i]
		}
		wg.Add(1)
		go func() { defer wg.Done(); ep.runJob(sctx, runs[i]) }()
	}
	var ev sync.WaitGroup
	stepStart := time.Now()
	for _, e := range sp.events {
		ev.Add(1)
		go func() { defer ev.Done(); ep.inject(sctx, e, runs[0], stepStart) }()
	}
	wg.Wait()
	ev.Wait()
	if sp.deviate {
		defer ep.dev.end()
	}
	// Quiet: no more faults while the outcome is read.
	ep.net.SetRates(faultnet.Rates{})
	ep.net.HealAll()
	for _, jr := range runs {
		ep.finish(sctx, jr)
	}
	ep.settle(sctx, runs)
	ep.check(runs)
	ep.mu.Lock()
	faults := strings.Join(ep.faults, " ")
	ep.mu.Unlock()
	if faults == "" {
		faults = "none"
	}
	if sp.rates != (faultnet.Rates{}) {
		faults += fmt.Sprintf(" + messages(drop %.0f%%+%.0f%%, dup %.0f%%, delay %.0f%%)", 100*sp.rates.DropRequest, 100*sp.rates.DropResponse,
			100*sp.rates.Duplicate, 100*sp.rates.Delay)
	}
	for _, jr := range runs {
		ep.rep.job(jr)
		ep.jobs++
		noise := "noisy eps=" + fmt.Sprint(jr.plan.Epsilon) + " " + jr.plan.Plan
		if jr.plan.NoNoise {
			noise = "noise-off"
		}
		outcome := "NOT CREATED"
		if st := jr.status; st != nil {
			outcome = fmt.Sprintf("%s %d/%d", strings.TrimPrefix(st.GetState().String(), "JOB_STATE_"), len(st.GetUploadedOwners()), len(ep.owners))
			if st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED {
				outcome += " (" + st.GetReason() + ")"
			}
		}
		fmt.Fprintf(ep.cfg.Progress, "  job %d.%d %s %s min=%d: %s in %.1fs; faults: %s\n", ep.plan.Index, ep.jobs, jr.plan.Analysis, noise, jr.plan.MinOwners,
			outcome, jr.took.Seconds(), faults)
	}
}

// runJob runs one job as the user does, through the faulty network.
func (ep *episode) runJob(ctx context.Context, jr *jobRun) {
	defer func() { jr.took = time.Since(jr.start) }()
	jr.start = time.Now()
	jp := jr.plan
	deadline := chaosDeadline
	if jr.deviant {
		// The deviating job runs alone, without faults, and its check
		// needs every owner's upload: on a loaded machine under the race
		// detector five owners took longer than the others' deadline.
		deadline *= 2
	}
	req := user.Request{Schema: ep.sch, Analysis: jp.Analysis, Epsilon: jp.Epsilon, Delta: 1e-6, NoNoise: jp.NoNoise, Plan: jp.Plan,
		Tolerate: jp.Tolerate, Owners: ep.owners, MinOwners: jp.MinOwners, Deadline: time.Now().Add(deadline), MaxOwnerRows: ep.rows}
	if jp.Analysis == job.PCA {
		req.K = 2
	}
	if jp.NoNoise {
		req.Epsilon, req.Delta, req.Plan, req.Tolerate = 0, 0, "", 0
	}
	spec, err := ep.user.Spec(ctx, req)
	if err != nil {
		jr.userErr = fmt.Errorf("spec: %w", err)
		close(jr.idReady)
		return
	}
	jr.spec = spec
	if jr.deviant {
		ep.dev.setJob(spec.ID())
		if l, err := spec.Layout(ep.sch); ep.plan.Deviation == DevShiftC0 && err == nil {
			ep.dev.setShift(l, ep.sch.Bits)
		}
	}
	ep.mu.Lock()
	ep.runs[spec.ID()] = jr
	ep.mu.Unlock()
	close(jr.idReady)
	if _, err := ep.user.Submit(ctx, spec, ep.sch); err != nil {
		jr.userErr = err
		return
	}
	st, err := ep.user.Wait(ctx, spec.ID(), nil)
	if err != nil {
		jr.userErr = err
		return
	}
	if st.GetState() == fedpcav1.JobState_JOB_STATE_DONE {
		if jr.result, err = ep.user.Fetch(ctx, spec, ep.sch); err != nil {
			jr.userErr = err
		}
	}
}

// jobStatus reads a job's full status from the observer (which meets no
// faults, only the proxy's crashes, and is told no lies).
func (ep *episode) jobStatus(ctx context.Context, id string, brief bool) (*fedpcav1.JobStatus, error) {
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, observerKey, "1"), 2*time.Second)
	defer cancel()
	r, err := ep.obs.GetJob(cctx, &fedpcav1.GetJobRequest{JobId: id, Brief: brief})
	if err != nil {
		return nil, err
	}
	return r.GetJob().GetStatus(), nil
}

// finish reads a job's final status (waiting, within the bound, for it to
// end).
func (ep *episode) finish(ctx context.Context, jr *jobRun) {
	id := jr.id()
	if id == "" {
		return
	}
	bound := jr.start.Add(chaosJobBound)
	for {
		st, err := ep.jobStatus(ctx, id, false)
		if err == nil {
			jr.status = st
			if ended(st.GetState()) {
				return
			}
		}
		if time.Now().After(bound) || ctx.Err() != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ended(s fedpcav1.JobState) bool {
	return s == fedpcav1.JobState_JOB_STATE_DONE || s == fedpcav1.JobState_JOB_STATE_FAILED
}

// settle waits until every owner has settled its part in the step's jobs
// (nothing uploading or awaiting the job's end, no reservation left).
func (ep *episode) settle(ctx context.Context, runs []*jobRun) {
	deadline := time.Now().Add(chaosSettleBound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if len(ep.unsettled(runs)) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unsettled lists the owners' parts in ended jobs that are not settled.
func (ep *episode) unsettled(runs []*jobRun) []string {
	var out []string
	for _, id := range ep.owners {
		o := ep.cl.Owner(id)
		recs, err := o.JobRecords()
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		entries, err := o.Ledger(ep.sch.ID)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		for _, jr := range runs {
			if jr.status == nil || !ended(jr.status.GetState()) {
				continue
			}
			for _, r := range recs {
				if r.Job == jr.id() && (r.State == owner.PartUploading || r.State == owner.PartUploaded) {
					out = append(out, fmt.Sprintf("%s: part in job %s… still %s", id, r.Job[:12], r.State))
				}
			}
			for _, e := range entries {
				if e.Job == jr.id() && e.State == owner.Reserved {
					out = append(out, fmt.Sprintf("%s: budget of job %s… still reserved after the job ended", id, e.Job[:12]))
				}
			}
		}
	}
	return out
}
