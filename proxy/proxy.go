package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/fedpca/fedpca/transport"
)

// Member is a CSP committee member the proxy talks to.
type Member struct {
	ID   string
	Addr string
}

// Config configures the proxy.
type Config struct {
	ID       string
	Listener net.Listener
	// Creds are the proxy's TLS credentials; nil only with Insecure.
	Creds    *transport.Credentials
	Insecure bool
	// Dialer reaches the CSP members (its Creds and Insecure default to the
	// proxy's own; the simulator adds an in-memory dialer).
	Dialer transport.Dialer
	// Store is the state directory.
	Store string
	// Committee lists the CSP members in Shamir-point order (point = index
	// + 1) and Threshold how many of them take part in a key switch.
	Committee []Member
	Threshold int
	// AllowNoNoise accepts jobs without DP noise (tests and simulations).
	AllowNoNoise bool
	// UploadMemory bounds the bytes of the uploads received at once
	// (default 64 MiB): an upload weighs 1.76 MB for one ciphertext (its
	// message and decoded copy, its proof, the c1 kept for the members)
	// and 1.39 MB per ciphertext in groups of eight (uploadWeight), so 38
	// one-ciphertext uploads (d <= 126) are received together, or one of
	// 39 ciphertexts (d = 784, 54 MB). MaxWaiting bounds the owners waiting for room (default
	// 1,024; a waiting owner has sent only its header): beyond it an upload
	// is refused at once with ResourceExhausted and a retry hint sized from
	// the queue, so that the proxy's memory does not grow with the number
	// of owners uploading at the same moment.
	UploadMemory int64
	MaxWaiting   int
	// MaxConnections, if set, bounds the client connections served at once
	// (further connections wait to be accepted). Every open connection
	// costs about 40 KiB (TLS and HTTP/2 state, three goroutines), so with
	// many owners this, with the owners' idle timeout, bounds the proxy's
	// memory.
	MaxConnections int
	// MaxWatchers bounds the owners' job watches (WatchOwnerJobs) open at
	// once (default 4,096, or fewer when the memory limit GOMEMLIMIT has
	// room for fewer at about 56 KiB each; at most half of MaxConnections
	// when that is set, so that owners beyond it still get connections to
	// poll): beyond it a watch is refused with ResourceExhausted and the
	// owner polls.
	MaxWatchers int
	// SwitchTimeout is how long a sealed job may wait for the committee
	// before it fails (default 24 h).
	SwitchTimeout time.Duration
	// RetryInterval is the pause between attempts to reach the committee
	// (default 2 s).
	RetryInterval time.Duration
	// CallTimeout bounds each call to a member (default 2 min).
	CallTimeout time.Duration
	Logger      hclog.Logger
	// Metrics is the proxy's registry (default: a new one); MetricsListener,
	// if set, serves it over HTTP at /metrics.
	Metrics         *transport.Metrics
	MetricsListener net.Listener
	// StatusListener, if set, serves the status page (see StatusHandler):
	// plain HTTP on a loopback address; on any other address HTTPS with Creds
	// for clients with a certificate from the deployment's CA only.
	StatusListener net.Listener
	// HealthInterval is how often the committee members are asked for their
	// status, for the status page and the metrics (default 10 s).
	HealthInterval time.Duration
	// ProgressInterval is the grid of public instants (from each job's
	// creation) at which users and owners learn a running job's progress,
	// and at which a job whose owners have all answered is sealed (default
	// DefaultProgressInterval, 2 s; see progress.go): the time an owner's
	// share takes, which grows with its rows, shows to no one but the proxy
	// while it is shorter than this.
	ProgressInterval time.Duration
	// UnknownOwnerGrace is how long an open job waits for an owner that
	// has never called this proxy (a typo in the user's --owners, or an
	// owner never deployed) before it fails, naming it, so that the other
	// owners' reservations are released (default DefaultUnknownOwnerGrace).
	UnknownOwnerGrace time.Duration
	Params            *he.Params
	// ServerOptions are added to the gRPC server's (tests: an interceptor
	// that makes this proxy deviate from the protocol, to show that the
	// honest parties detect it).
	ServerOptions []grpc.ServerOption
}

// Proxy is the proxy daemon. Its methods are safe for concurrent use.
type Proxy struct {
	fedpcav1.UnimplementedProxyServiceServer
	cfg       Config
	log       hclog.Logger
	params    he.Params
	committee he.Committee
	store     *store
	hs        *health.Server
	admit     *admission                            // room to receive uploads
	received  *transport.FreeList[*rlwe.Ciphertext] // uploads' decoded ciphertexts, kept once folded for the next
	hub       *watchHub                             // numbers the jobs' changes, feeds owners' watches
	large     chan struct{}                         // semaphore of results being sent
	m         *metrics

	mu        sync.Mutex
	cmt       *committeeRecord // nil until the ceremony is done
	zkKey     *zk.Key          // the upload proofs' key under cmt (committeeKeys), made once
	zkPK      *rlwe.PublicKey  // cmt's public key, decoded with zkKey
	jobs      map[string]*jobState
	members   map[string]*memberConn
	health    map[string]memberHealth        // by member ID
	cmtResp   *fedpcav1.GetCommitteeResponse // shared, rebuilt every few seconds
	cmtRespAt time.Time                      // when it was built

	cmtRefresh sync.Mutex // held while rebuilding cmtResp

	contactMu sync.Mutex
	contacts  map[string]bool // the owners that ever called this proxy

	ctx   context.Context // the Run context, for job drivers
	wg    sync.WaitGroup
	ready chan struct{} // closed when Run has started the drivers
}

// Domain errors, mapped to status codes in one table (toStatus).
var (
	ErrUnknownJob        = errors.New("no such job")
	ErrNotYours          = errors.New("not a party to this job")
	ErrJobClosed         = errors.New("job is no longer accepting uploads")
	ErrDuplicateUpload   = errors.New("a different upload from this owner is already included")
	ErrCommitteeNotReady = errors.New("the committee key ceremony has not finished")
	ErrNotDone           = errors.New("the job has no result yet")
	ErrBadRequest        = errors.New("invalid request")
	ErrBusy              = errors.New("the proxy is busy receiving other uploads; retry later")
	ErrForbidden         = errors.New("not allowed")
	ErrDiskFull          = errors.New("the proxy's disk is full: nothing was stored, retry later (its operator must free space in the state directory)")
)

var statusOf = transport.ErrorTable{
	{Err: ErrUnknownJob, Code: codes.NotFound},
	{Err: ErrNotYours, Code: codes.PermissionDenied},
	{Err: ErrForbidden, Code: codes.PermissionDenied},
	{Err: ErrJobClosed, Code: codes.FailedPrecondition},
	{Err: ErrDuplicateUpload, Code: codes.AlreadyExists},
	{Err: ErrCommitteeNotReady, Code: codes.Unavailable},
	{Err: ErrNotDone, Code: codes.FailedPrecondition},
	{Err: ErrBadRequest, Code: codes.InvalidArgument},
	{Err: ErrBusy, Code: codes.ResourceExhausted},
	{Err: ErrDiskFull, Code: codes.ResourceExhausted},
	{Err: dp.ErrPlanInfeasible, Code: codes.FailedPrecondition},
}

// toStatus turns a handler's error into a gRPC status error (statusOf; a
// busy refusal carries its retry hint); internal errors are logged here and
// reach the caller without their text.
func (p *Proxy) toStatus(err error) error { return toStatus(p.log, err) }

func toStatus(log hclog.Logger, err error) error {
	err = diskFull(err)
	st := status.Convert(statusOf.Status(log, err))
	var busy busyError
	if errors.As(err, &busy) {
		st = transport.WithRetryDelay(st, busy.after)
	}
	return st.Err()
}

// diskFull marks a store error caused by a full disk (or quota) as
// ErrDiskFull: the transaction was rolled back, nothing changed, and the
// caller may retry once there is space.
func diskFull(err error) error {
	if err != nil && !errors.Is(err, ErrDiskFull) && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		return fmt.Errorf("%w (%v)", ErrDiskFull, err)
	}
	return err
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// New validates the configuration and opens the store; it starts nothing.
func New(cfg Config) (*Proxy, error) {
	if cfg.Listener == nil {
		return nil, errors.New("proxy: no listener")
	}
	if cfg.Creds == nil && !cfg.Insecure {
		return nil, errors.New("proxy: no TLS credentials (use --insecure only for local tests)")
	}
	if cfg.Creds != nil && cfg.Creds.Identity.Role != transport.RoleProxy {
		return nil, fmt.Errorf("proxy: certificate is for %s, not the proxy", cfg.Creds.Identity.Short())
	}
	if cfg.ID == "" {
		cfg.ID = "proxy"
		if cfg.Creds != nil {
			cfg.ID = cfg.Creds.Identity.ID
		}
	}
	if cfg.Dialer.Creds == nil && !cfg.Dialer.Insecure {
		cfg.Dialer.Creds, cfg.Dialer.Insecure = cfg.Creds, cfg.Insecure
		cfg.Dialer.Self = transport.Identity{Role: transport.RoleProxy, ID: cfg.ID}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = transport.NewMetrics()
	}
	if cfg.Dialer.Metrics == nil {
		cfg.Dialer.Metrics = cfg.Metrics
	}
	// A member whose host vanishes mid-computation (no reset: a cable cut)
	// is noticed within about 40 s, as owners notice the proxy, so that
	// the computation goes on with another active set (solve.go).
	cfg.Dialer.Options = append(slices.Clone(cfg.Dialer.Options), transport.WatchKeepalive())
	committee := he.Committee{N: len(cfg.Committee), Threshold: cfg.Threshold}
	if err := committee.Validate(); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	seen := map[string]bool{}
	for _, m := range cfg.Committee {
		if err := (transport.Identity{Role: transport.RoleCSP, ID: m.ID}).Validate(); err != nil || m.Addr == "" || seen[m.ID] {
			return nil, fmt.Errorf("proxy: committee member %q at %q: bad or repeated id, or no address", m.ID, m.Addr)
		}
		seen[m.ID] = true
	}
	if cfg.UploadMemory <= 0 {
		cfg.UploadMemory = 64 << 20
	}
	if cfg.MaxWaiting <= 0 {
		cfg.MaxWaiting = 1024
	}
	if cfg.MaxWatchers <= 0 {
		cfg.MaxWatchers = defaultWatchers(cfg.UploadMemory, debug.SetMemoryLimit(-1))
	}
	if cfg.MaxConnections > 0 {
		cfg.MaxWatchers = max(1, min(cfg.MaxWatchers, cfg.MaxConnections/2))
	}
	if cfg.SwitchTimeout <= 0 {
		cfg.SwitchTimeout = 24 * time.Hour
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 2 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = 10 * time.Second
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.UnknownOwnerGrace <= 0 {
		cfg.UnknownOwnerGrace = DefaultUnknownOwnerGrace
	}
	if l := cfg.StatusListener; l != nil {
		if err := transport.CheckOperatorListener(l, cfg.Creds); err != nil {
			return nil, fmt.Errorf("proxy: status page: %w", err)
		}
	}
	if l := cfg.MetricsListener; l != nil {
		if err := transport.CheckOperatorListener(l, cfg.Creds); err != nil {
			return nil, fmt.Errorf("proxy: metrics: %w", err)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	p := &Proxy{
		cfg: cfg, log: cfg.Logger, committee: committee, hs: health.NewServer(),
		large: make(chan struct{}, maxLargeResponses),
		jobs:  map[string]*jobState{}, members: map[string]*memberConn{}, health: map[string]memberHealth{},
		ready: make(chan struct{}), received: transport.NewFreeList[*rlwe.Ciphertext](receivedKept),
	}
	var err error
	if p.params, err = he.ParamsOr(cfg.Params); err != nil {
		return nil, err
	}
	p.admit = newAdmission(cfg.UploadMemory, cfg.MaxWaiting, uploadWeight(p.params))
	p.registerMetrics(cfg.Metrics.Registry)
	db, err := transport.OpenStore(cfg.Store, "proxy.db")
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if p.store, err = openStore(db); err != nil {
		db.Close()
		return nil, err
	}
	p.hub = newWatchHub(cfg.MaxWatchers, p.store.epoch)
	if need, limit := memoryNeed(cfg), debug.SetMemoryLimit(-1); need > limit {
		p.log.Warn("the memory limit (GOMEMLIMIT) is below what the configured watches and uploads may hold: "+
			"with that many owners connected the garbage collector would run without pause; raise GOMEMLIMIT or lower --max-watchers",
			"limit_mib", limit>>20, "need_mib", need>>20, "max_watchers", cfg.MaxWatchers, "upload_memory_mib", cfg.UploadMemory>>20)
	}
	if p.contacts, err = p.store.contacts(); err != nil {
		db.Close()
		return nil, fmt.Errorf("proxy: store: %w", err)
	}
	if err := p.load(); err != nil {
		db.Close()
		return nil, err
	}
	return p, nil
}

// DefaultUnknownOwnerGrace is Config.UnknownOwnerGrace's default: time for
// an owner started with the job to make its first call.
const DefaultUnknownOwnerGrace = 30 * time.Second

// contacted records that an owner called this proxy (once per owner).
func (p *Proxy) contacted(who transport.Identity) {
	if who.Role != transport.RoleOwner {
		return
	}
	p.contactMu.Lock()
	defer p.contactMu.Unlock()
	if p.contacts[who.ID] {
		return
	}
	if err := p.store.putContact(who.ID, time.Now()); err != nil {
		p.log.Warn("cannot record an owner's first call", "owner", who.ID, "error", err)
		return
	}
	p.contacts[who.ID] = true
}

// strangers returns the owners of a list that never called this proxy.
func (p *Proxy) strangers(owners []string) []string {
	p.contactMu.Lock()
	defer p.contactMu.Unlock()
	var out []string
	for _, o := range owners {
		if !p.contacts[o] {
			out = append(out, o)
		}
	}
	return out
}

// nearest returns, for each stranger, the known owner whose ID is at most
// two edits from it ("hosptial-b" -> "hospital-b"), as a hint; not one the
// job names already (hospital-b is no typo of hospital-a).
func (p *Proxy) nearest(strangers, named []string) map[string]string {
	p.contactMu.Lock()
	defer p.contactMu.Unlock()
	var known []string
	for k := range p.contacts {
		if !slices.Contains(named, k) {
			known = append(known, k)
		}
	}
	out := map[string]string{}
	for _, s := range strangers {
		if k := transport.Nearest(s, known); k != "" {
			out[s] = k
		}
	}
	return out
}

// load reads the committee and every job at start.
func (p *Proxy) load() error {
	v, err := p.store.committee()
	if err != nil {
		return fmt.Errorf("proxy: store: %w", err)
	}
	if v != nil {
		c, err := decodeCommittee(v, p.params)
		if err != nil {
			return err
		}
		if err := p.checkCommittee(c); err != nil {
			// Owners and users would refuse it: establish the key again
			// (adopt the members' attested key, or a new ceremony).
			p.log.Warn("the stored committee key is not attested by every member; it will be established again", "error", err)
		} else {
			p.cmt = c
		}
	}
	stored, err := p.store.jobs()
	if err != nil {
		return fmt.Errorf("proxy: store: %w", err)
	}
	for _, sj := range stored {
		j, err := decodeJob(sj, p.params.Chunks, p.store)
		if errors.Is(err, job.ErrSpecVersion) {
			return fmt.Errorf("%w; finish the store's jobs with the release that made them, or start this proxy on a new store (move the old one aside)", err)
		}
		if err != nil {
			return err
		}
		if ended(j.rec.State) && !j.archived() {
			p.archive(j) // ended before a crash, or stored by a proxy that kept ended jobs in memory
		}
		j.every = p.cfg.ProgressInterval
		p.jobs[j.id] = j
		p.hub.seq = max(p.hub.seq, j.rec.Seq)
	}
	p.dropEndedProofs()
	return nil
}

// archive moves an ended job's owner list and answers out of memory (see
// jobState): its owners are indexed in the store first. If that fails the
// job stays in memory, and is archived at the proxy's next start. j.mu
// must be held (or j not yet shared).
func (p *Proxy) archive(j *jobState) {
	owners := j.owners.Load()
	if owners == nil {
		return
	}
	p.dropProofs(j.id)
	if err := p.store.archiveJob(j.id, owners.Owners()); err != nil {
		p.log.Warn("cannot archive an ended job; it stays in memory until the next start", "job", j.id[:16], "error", err)
		return
	}
	j.uploads, j.declines, j.rec.Owners = nil, nil, nil
	j.owners.Store(nil)
}

// watchConnBytes is what a watching owner's connection holds in the proxy:
// 56 KiB of resident memory each at 10,000 watches (`go run ./bench -suite
// conns`, docs/SCALING.md): 28 KiB of heap (the TLS connection's record
// and handshake buffers, cipher state and the peer's parsed certificate,
// the HTTP/2 transport), 10 KiB of goroutine stacks, the rest freed memory
// the runtime keeps.
const watchConnBytes = 56 << 10

// baseBytes is a proxy's memory with no owner connected (measured: about
// 50 MiB with the committee's connections).
const baseBytes = 64 << 20

// defaultWatchers is the default MaxWatchers: 4,096, or as many as the
// memory limit (GOMEMLIMIT) leaves room for next to the uploads (at least
// 64): a limit below the live heap makes the collector run without pause
// (docs/SCALING.md).
func defaultWatchers(uploadMemory, limit int64) int {
	room := (limit - memoryNeed(Config{UploadMemory: uploadMemory})) / watchConnBytes
	return int(max(64, min(4096, room)))
}

// memoryNeed is what a proxy configured so may hold at its busiest: every
// watch open and every upload's memory in use.
func memoryNeed(cfg Config) int64 {
	return baseBytes + int64(cfg.MaxWatchers)*watchConnBytes + cfg.UploadMemory
}

// Run serves until ctx is done: it runs (or checks) the key ceremony,
// resumes every unfinished job, and stops gracefully.
func (p *Proxy) Run(ctx context.Context) error {
	srv := grpc.NewServer(append(transport.ServerOptions(p.cfg.Creds, p.cfg.Insecure, p.log, p.cfg.Metrics), p.cfg.ServerOptions...)...)
	fedpcav1.RegisterProxyServiceServer(srv, p)
	healthpb.RegisterHealthServer(srv, p.hs)
	p.hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis := p.cfg.Listener
	if p.cfg.MaxConnections > 0 {
		lis = netutil.LimitListener(lis, p.cfg.MaxConnections)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	p.log.Info("proxy serving", "addr", p.cfg.Listener.Addr().String(), "committee", len(p.cfg.Committee), "threshold", p.cfg.Threshold, "jobs", len(p.jobs), "insecure", p.cfg.Insecure)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if l := p.cfg.MetricsListener; l != nil {
		go func() {
			if err := transport.ServeMetrics(runCtx, l, p.cfg.Creds, p.cfg.Metrics, p.log.Named("metrics")); err != nil {
				p.log.Error("metrics server", "error", err)
			}
		}()
	}
	if l := p.cfg.StatusListener; l != nil {
		p.log.Info("status page", "addr", l.Addr().String(), "access", transport.OperatorAccess(l))
		go func() {
			if err := transport.ServeOperator(runCtx, l, p.cfg.Creds, p.StatusHandler(), p.log.Named("status")); err != nil {
				p.log.Error("status page server", "error", err)
			}
		}()
	}
	p.mu.Lock()
	p.ctx = runCtx
	for _, j := range p.jobs {
		p.startDriver(j)
	}
	p.mu.Unlock()
	close(p.ready)
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.runCeremony(runCtx) }()
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.watchCommittee(runCtx) }()

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("proxy: serve: %w", err)
	}
	cancel()
	p.hs.Shutdown()
	transport.StopGracefully(srv, 10*time.Second)
	p.wg.Wait()
	p.closeMembers()
	if cerr := p.store.db.Close(); err == nil {
		err = cerr
	}
	p.log.Info("proxy stopped")
	return err
}

// acquireLarge waits for room to send a result: many users asking at once
// must not each hold a copy in memory.
func (p *Proxy) acquireLarge(ctx context.Context) (func(), error) {
	select {
	case p.large <- struct{}{}:
		return func() { <-p.large }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
