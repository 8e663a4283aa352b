package sim

import (
	"bytes"
	"context"
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

	"github.com/fedpca/fedpca/csp"
	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// ChaosConfig configures a chaos run: episodes of jobs, each episode on a
// fresh deployment (dataset, owners, committee and transport drawn from its
// seed), every job with random faults from the seed, and the invariants
// checked after every job.
type ChaosConfig struct {
	Seed uint64
	// Jobs is the number of jobs (default 200), JobsPerEpisode how many run
	// on one deployment (default 10).
	Jobs, JobsPerEpisode int
	// Episodes, if set, runs only these episodes (to reproduce one).
	Episodes []int
	// Binary is the fedpca executable: with it, every fourth episode runs
	// the proxy as a separate process over TCP, crashed with SIGKILL.
	Binary string
	// Parallel runs that many episodes at once (default 1). The machine's
	// load changes timings, not what is checked.
	Parallel int
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
// the bound within which a job must end.
const (
	chaosDeadline      = 6 * time.Second
	chaosSwitchTimeout = 30 * time.Second
	chaosJobBound      = chaosDeadline + chaosSwitchTimeout + 30*time.Second
	chaosSettleBound   = 30 * time.Second
)

// chaosDatasets are the bundled datasets the episodes draw from (small,
// with classes, in reference.json).
var chaosDatasets = []string{"wine", "iris", "glass", "wdbc"}

// episodePlan is an episode's deployment.
type episodePlan struct {
	Index        int
	Seed         uint64
	Dataset      string
	Owners       int
	CSPs, T      int
	TCP, Process bool
	// Tight is the owner with a small budget (exhausted after a few noisy
	// jobs), or -1.
	Tight int
	// CeremonyFaults runs the key ceremony under message faults.
	CeremonyFaults bool
}

type jobPlan struct {
	Analysis  string
	NoNoise   bool
	Epsilon   float64
	Plan      string
	Tolerate  int
	MinOwners int
}

type trigger struct {
	kind    string // "time", "uploads", "switching"
	after   time.Duration
	uploads int
}

type event struct {
	kind   string
	target int // member or owner index
	when   trigger
	down   time.Duration
}

type stepPlan struct {
	jobs   []jobPlan
	rates  Rates
	events []event
}

// EpisodeSeed is the seed of episode e of a run.
func EpisodeSeed(seed uint64, e int) uint64 { return mix(seed ^ mix(uint64(e)+1)) }

func planEpisode(cfg ChaosConfig, e int) (episodePlan, *rand.Rand) {
	seed := EpisodeSeed(cfg.Seed, e)
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	p := episodePlan{Index: e, Seed: seed, Dataset: chaosDatasets[rng.IntN(len(chaosDatasets))], Owners: 3 + rng.IntN(3), CSPs: 1, T: 1, Tight: -1}
	if rng.IntN(2) == 0 {
		p.CSPs, p.T = 3, 2
	}
	p.TCP = rng.Float64() < 0.25
	if cfg.Binary != "" && e%4 == 3 {
		p.TCP, p.Process = true, true
	}
	if rng.IntN(2) == 0 {
		p.Tight = rng.IntN(p.Owners)
	}
	// Drawn apart from rng, so that the draws above and the steps' stay
	// what they were for a seed.
	p.CeremonyFaults = mix(seed^0xce7e)&1 == 1
	return p, rng
}

// Message fault rates of a step.
var (
	lightRates = Rates{DropRequest: 0.02, DropResponse: 0.02, Duplicate: 0.03, Delay: 0.05, MaxDelay: 100 * time.Millisecond}
	heavyRates = Rates{DropRequest: 0.06, DropResponse: 0.06, Duplicate: 0.06, Delay: 0.1, MaxDelay: 300 * time.Millisecond}
)

func planStep(rng *rand.Rand, ep episodePlan, step int, disk bool, remaining int) stepPlan {
	var s stepPlan
	n := 1
	if remaining > 1 && rng.Float64() < 0.25 {
		n = 2
	}
	for range n {
		j := jobPlan{Analysis: job.PCA, Epsilon: []float64{0.5, 1, 2}[rng.IntN(3)], MinOwners: ep.Owners}
		if rng.Float64() < 0.4 {
			j.Analysis = job.DCA
		}
		j.NoNoise = rng.IntN(2) == 0
		j.Plan = []string{dp.PlanServers, dp.PlanCentral, dp.PlanOwners, dp.PlanAll}[rng.IntN(4)]
		if j.Plan != dp.PlanCentral && rng.Float64() < 0.3 {
			j.Tolerate = 1
		}
		if rng.Float64() < 0.3 {
			j.MinOwners = ep.Owners - 1
		}
		s.jobs = append(s.jobs, j)
	}
	switch u := rng.Float64(); {
	case u < 0.3:
	case u < 0.7:
		s.rates = lightRates
	default:
		s.rates = heavyRates
	}
	events := []int{0, 1, 1, 1, 2, 2, 3}[rng.IntN(7)]
	kinds := []struct {
		kind   string
		weight int
	}{{FaultCrashProxy, 25}, {FaultCrashCSP, 20}, {FaultCrashOwner, 20}, {FaultPartitionCommittee, 15}, {FaultPartitionOwner, 10}, {FaultPartitionUser, 10}}
	seen := map[string]bool{}
	for range events {
		w := rng.IntN(100)
		var kind string
		for _, k := range kinds {
			if w < k.weight {
				kind = k.kind
				break
			}
			w -= k.weight
		}
		e := event{kind: kind}
		switch kind {
		case FaultCrashCSP:
			e.target = rng.IntN(ep.CSPs)
		case FaultCrashOwner, FaultPartitionOwner:
			e.target = rng.IntN(ep.Owners)
		}
		switch u := rng.Float64(); {
		case u < 0.4:
			e.when = trigger{kind: "time", after: time.Duration(rng.IntN(600)) * time.Millisecond}
		case u < 0.7:
			e.when = trigger{kind: "uploads", uploads: 1 + rng.IntN(ep.Owners)}
		default:
			e.when = trigger{kind: "switching"}
		}
		e.down = time.Duration(50+rng.IntN(1450)) * time.Millisecond
		if strings.HasPrefix(kind, "partition") {
			e.down = time.Duration(200+rng.IntN(2800)) * time.Millisecond
		}
		if kind == FaultCrashOwner && rng.Float64() < 0.15 {
			e.down = chaosDeadline + time.Second // the job goes on without it
		}
		key := fmt.Sprint(kind, e.target)
		if kind == FaultCrashProxy {
			key = kind // one proxy
		}
		if !seen[key] {
			seen[key] = true
			s.events = append(s.events, e)
		}
	}
	// One step in six fills the proxy's disk for a while (when it can be
	// filled), drawn apart from rng so that the rest of a seed's plan does
	// not depend on it.
	if h := mix(ep.Seed ^ mix(uint64(step)+0xd15c)); disk && h%6 == 0 {
		s.events = append(s.events, event{kind: FaultDiskFull, when: trigger{kind: "time", after: time.Duration(h>>8%600) * time.Millisecond},
			down: time.Duration(200+h>>20%1800) * time.Millisecond})
	}
	return s
}

func (e event) String() string {
	what := e.kind
	switch e.kind {
	case FaultCrashCSP:
		what += "(" + cspID(e.target) + ")"
	case FaultCrashOwner, FaultPartitionOwner:
		what += "(" + ownerName(e.target) + ")"
	}
	switch e.when.kind {
	case "time":
		what += fmt.Sprintf("@%dms", e.when.after.Milliseconds())
	case "uploads":
		what += fmt.Sprintf("@%d-uploads", e.when.uploads)
	default:
		what += "@switching"
	}
	return what + fmt.Sprintf("/%dms", e.down.Milliseconds())
}

func ownerName(i int) string { return fmt.Sprintf("owner-%c", 'a'+i) }

// RunChaos runs the chaos suite and reports the faults injected and the
// invariants checked. An error means the suite itself could not run (a
// deployment did not start); violations are in the report.
func RunChaos(ctx context.Context, cfg ChaosConfig) (*ChaosReport, error) {
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
	cfg     ChaosConfig
	plan    episodePlan
	rep     *ChaosReport
	cl      *Cluster
	net     *Network
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
}

func runEpisode(ctx context.Context, cfg ChaosConfig, plan episodePlan, rng *rand.Rand, dir string, rep *ChaosReport) error {
	data, err := datasets.CSV(plan.Dataset)
	if err != nil {
		return err
	}
	sch, err := schema.Infer(bytes.NewReader(data), plan.Dataset, "label")
	if err != nil {
		return err
	}
	sch.Bits = 22 // as the reference comparisons (cluster_test)
	parts, err := Split(data, "label", plan.Owners, "iid", plan.Seed)
	if err != nil {
		return err
	}
	ep := &episode{cfg: cfg, plan: plan, rep: rep, sch: sch, parts: parts, budgets: map[string]float64{}, acks: map[string]map[string]bool{},
		net: NewNetwork(plan.Seed)}
	var owners []OwnerConfig
	for i, p := range parts {
		id := ownerName(i)
		eps := 1e6
		if i == plan.Tight {
			eps = 3 // a few noisy jobs
		}
		ep.owners, ep.budgets[id] = append(ep.owners, id), eps
		owners = append(owners, OwnerConfig{ID: id, Schema: sch, CSV: p, Epsilon: eps, Delta: 1e-6, Policy: OwnerPolicy(true)})
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
	binary := ""
	if plan.Process {
		binary = cfg.Binary
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cl, err := Start(sctx, Config{Dir: dir, CSPs: plan.CSPs, Threshold: plan.T, Owners: owners, Users: []string{"analyst"}, TCP: plan.TCP,
		AllowNoNoise: true, PollInterval: 50 * time.Millisecond, RetryInterval: 100 * time.Millisecond, Logger: cfg.Logger.With("episode", plan.Index),
		Network: ep.net, SwitchTimeout: chaosSwitchTimeout, Binary: binary, ProxyProcess: plan.Process})
	if err != nil {
		return err
	}
	ep.cl = cl
	defer cl.Stop()
	if ep.user, err = cl.User("analyst"); err != nil {
		return err
	}
	defer ep.user.Close()
	uid := transport.Identity{Role: transport.RoleUser, ID: "analyst"}
	if ep.obsConn, err = cl.dialerAs(uid, "observer", false).Dial(cl.ProxyAddr, transport.Identity{Role: transport.RoleProxy}); err != nil {
		return err
	}
	defer ep.obsConn.Close()
	ep.obs = fedpcav1.NewProxyServiceClient(ep.obsConn)

	ep.net.SetEpoch(0, Rates{})
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
	fmt.Fprintf(cfg.Progress, "episode %d (seed %d): %s, %d owners, committee %d-of-%d, %s\n",
		plan.Index, plan.Seed, plan.Dataset, plan.Owners, plan.T, plan.CSPs, transportName)
	for done := 0; done < cfg.JobsPerEpisode; {
		sp := planStep(rng, plan, ep.step, ep.proxyDisk != "", cfg.JobsPerEpisode-done)
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
		runs[i] = &jobRun{plan: jp, idReady: make(chan struct{})}
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
	// Quiet: no more faults while the outcome is read.
	ep.net.SetRates(Rates{})
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
	if sp.rates != (Rates{}) {
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
	req := user.Request{Schema: ep.sch, Analysis: jp.Analysis, Epsilon: jp.Epsilon, Delta: 1e-6, NoNoise: jp.NoNoise, Plan: jp.Plan,
		Tolerate: jp.Tolerate, Owners: ep.owners, MinOwners: jp.MinOwners, Deadline: time.Now().Add(chaosDeadline), MaxOwnerRows: ep.rows}
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
// faults, only the proxy's crashes).
func (ep *episode) jobStatus(ctx context.Context, id string, brief bool) (*fedpcav1.JobStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := ep.obs.GetJob(cctx, &fedpcav1.GetJobRequest{JobId: id, Brief: brief})
	if err != nil {
		return nil, err
	}
	return r.GetJob().GetStatus(), nil
}

// waitTrigger waits for an event's trigger; false if the job ended (or
// was never created) first.
func (ep *episode) waitTrigger(ctx context.Context, tr trigger, jr *jobRun, stepStart time.Time) bool {
	if tr.kind == "time" {
		return sleepCtx(ctx, time.Until(stepStart.Add(tr.after))) == nil
	}
	select {
	case <-jr.idReady:
	case <-ctx.Done():
		return false
	}
	id := jr.id()
	if id == "" {
		return false
	}
	for ctx.Err() == nil {
		if st, err := ep.jobStatus(ctx, id, true); err == nil {
			switch {
			case ended(st.GetState()):
				return false
			case tr.kind == "uploads" && int(st.GetOwnersUploaded()) >= tr.uploads:
				return true
			case tr.kind == "switching" && st.GetState() == fedpcav1.JobState_JOB_STATE_SWITCHING:
				return true
			}
		}
		_ = sleepCtx(ctx, 5*time.Millisecond)
	}
	return false
}

// inject applies one event when its trigger fires, and undoes it (restart,
// heal) after its down time.
func (ep *episode) inject(ctx context.Context, e event, jr *jobRun, stepStart time.Time) {
	if !ep.waitTrigger(ctx, e.when, jr, stepStart) {
		return
	}
	// The down time runs even if the step's context ends: every crashed
	// node must come back for the next step.
	pause := func() { time.Sleep(e.down) }
	switch e.kind {
	case FaultCrashProxy:
		ep.crashProxy(ctx, e, pause)
	case FaultCrashCSP:
		ep.crashCSP(ctx, e, pause)
	case FaultCrashOwner:
		ep.crashOwner(e, pause)
	case FaultDiskFull:
		free, err := fillDisk(ep.proxyDisk)
		if err != nil {
			ep.fault("disk_full_failed", fmt.Sprintf("%s(failed: %v)", e, err))
			return
		}
		ep.fault(e.kind, e.String())
		pause()
		if err := free(); err != nil {
			ep.restartViolation("free the proxy's disk: %v", err)
		}
	case FaultPartitionCommittee, FaultPartitionOwner, FaultPartitionUser:
		proxyNode := []string{"proxy/proxy"}
		var other []string
		switch e.kind {
		case FaultPartitionCommittee:
			for i := range ep.plan.CSPs {
				other = append(other, "csp/"+cspID(i))
			}
		case FaultPartitionOwner:
			other = []string{"owner/" + ownerName(e.target)}
		default:
			other = []string{"user/analyst"}
		}
		ep.fault(e.kind, e.String())
		ep.net.Partition(proxyNode, other)
		pause()
		ep.net.Heal(proxyNode, other)
	}
}

// restartViolation records a restart-consistency violation of this step.
func (ep *episode) restartViolation(format string, args ...any) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.restart = append(ep.restart, fmt.Sprintf(format, args...))
}

// restartChecked counts restart-consistency comparisons.
func (ep *episode) restartChecked(n int) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.rchecks += n
}

// proxySnapshot is what the proxy reports about every job.
type proxySnapshot map[string]jobSnap

type jobSnap struct {
	state    fedpcav1.JobState
	uploaded []string
}

func (ep *episode) snapshotProxy(ctx context.Context, patience time.Duration) (proxySnapshot, error) {
	deadline := time.Now().Add(patience)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := ep.obs.ListJobs(cctx, &fedpcav1.ListJobsRequest{IncludeEnded: true})
		cancel()
		if err == nil {
			out := proxySnapshot{}
			for _, info := range r.GetJobs() {
				st := info.GetStatus()
				out[st.GetJobId()] = jobSnap{state: st.GetState(), uploaded: st.GetUploadedOwners()}
			}
			return out, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stateRank(s fedpcav1.JobState) int {
	switch s {
	case fedpcav1.JobState_JOB_STATE_OPEN:
		return 0
	case fedpcav1.JobState_JOB_STATE_SWITCHING:
		return 1
	}
	return 2
}

func (ep *episode) crashProxy(ctx context.Context, e event, pause func()) {
	before, err := ep.snapshotProxy(ctx, 2*time.Second)
	if err != nil {
		before = nil // the proxy is unreachable anyway; crash it without a record
	}
	kind := FaultCrashProxy
	if ep.plan.Process {
		kind = FaultKillProxy
	}
	ep.fault(kind, strings.Replace(e.String(), FaultCrashProxy, kind, 1))
	if err := ep.cl.CrashProxy(); err != nil {
		ep.restartViolation("proxy crash: %v", err)
	}
	acked := map[string][]string{}
	for id := range before {
		acked[id] = ep.ackedOwners(id)
	}
	pause()
	if err := retryStart(ep.cl.RestartProxy); err != nil {
		ep.restartViolation("proxy restart: %v", err)
		return
	}
	after, err := ep.snapshotProxy(context.WithoutCancel(ctx), 30*time.Second)
	if err != nil {
		ep.restartViolation("the restarted proxy does not answer: %v", err)
		return
	}
	ep.restartChecked(1 + len(before))
	for id, b := range before {
		a, ok := after[id]
		switch {
		case !ok:
			ep.restartViolation("job %s… lost by the proxy's restart", id[:12])
		case stateRank(a.state) < stateRank(b.state) || (stateRank(b.state) == 2 && a.state != b.state):
			ep.restartViolation("job %s… was %s before the proxy's crash, %s after", id[:12], b.state, a.state)
		default:
			for _, o := range append(slices.Clone(b.uploaded), acked[id]...) {
				if !slices.Contains(a.uploaded, o) {
					ep.restartViolation("job %s…: upload of %s included (or acknowledged) before the proxy's crash, missing after", id[:12], o)
				}
			}
		}
	}
}

// retryStart restarts a node, retrying a few times (a port may still be
// held for a moment).
func retryStart(start func() error) error {
	var err error
	for range 20 {
		if err = start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (ep *episode) crashCSP(ctx context.Context, e event, pause func()) {
	before, err := ep.cl.CSP(e.target).Audit()
	if err != nil {
		ep.restartViolation("%s audit before its crash: %v", cspID(e.target), err)
	}
	ep.fault(FaultCrashCSP, e.String())
	if err := ep.cl.CrashCSP(e.target); err != nil {
		ep.restartViolation("%s crash: %v", cspID(e.target), err)
	}
	pause()
	if err := retryStart(func() error { return ep.cl.StartCSP(e.target) }); err != nil {
		ep.restartViolation("%s restart: %v", cspID(e.target), err)
		return
	}
	after, err := ep.cl.CSP(e.target).Audit()
	if err != nil {
		ep.restartViolation("%s audit after its restart: %v", cspID(e.target), err)
		return
	}
	ep.restartChecked(1 + len(before))
	for _, b := range before {
		i := slices.IndexFunc(after, func(a csp.SwitchRecord) bool { return a.JobID == b.JobID })
		if i < 0 || after[i].Digest != b.Digest || after[i].Owners != b.Owners {
			ep.restartViolation("%s: switch record of job %s… changed or lost by its restart", cspID(e.target), b.JobID[:12])
		}
	}
}

func (ep *episode) crashOwner(e event, pause func()) {
	id := ownerName(e.target)
	o := ep.cl.Owner(id)
	ledgerBefore, err1 := o.Ledger(ep.sch.ID)
	recsBefore, err2 := o.JobRecords()
	if err := errors.Join(err1, err2); err != nil {
		ep.restartViolation("%s state before its crash: %v", id, err)
	}
	ep.fault(FaultCrashOwner, e.String())
	if err := ep.cl.CrashOwner(id); err != nil {
		ep.restartViolation("%s crash: %v", id, err)
	}
	pause()
	if err := ep.cl.RestartOwner(id); err != nil {
		ep.restartViolation("%s restart: %v", id, err)
		return
	}
	o = ep.cl.Owner(id)
	ledgerAfter, err1 := o.Ledger(ep.sch.ID)
	recsAfter, err2 := o.JobRecords()
	if err := errors.Join(err1, err2); err != nil {
		ep.restartViolation("%s state after its restart: %v", id, err)
		return
	}
	ep.restartChecked(1 + len(ledgerBefore) + len(recsBefore))
	for _, b := range ledgerBefore {
		i := slices.IndexFunc(ledgerAfter, func(a owner.LedgerEntry) bool { return a.Job == b.Job })
		if i < 0 || !owner.LedgerReaches(b.State, ledgerAfter[i].State) || ledgerAfter[i].Rho != b.Rho {
			got := "missing"
			if i >= 0 {
				got = ledgerAfter[i].State
			}
			ep.restartViolation("%s: ledger entry of job %s… was %s before its crash, %s after", id, b.Job[:12], b.State, got)
		}
	}
	for _, b := range recsBefore {
		i := slices.IndexFunc(recsAfter, func(a owner.JobRecord) bool { return a.Job == b.Job })
		if i < 0 || !b.State.Reaches(recsAfter[i].State) {
			got := owner.Part("missing")
			if i >= 0 {
				got = recsAfter[i].State
			}
			ep.restartViolation("%s: its part in job %s… was %s before its crash, %s after", id, b.Job[:12], b.State, got)
		}
	}
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
