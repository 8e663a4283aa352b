package owner

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/source"
	"github.com/fedpca/fedpca/transport"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// Dataset is one dataset an owner serves.
type Dataset struct {
	Schema *schema.Schema
	// Source names the rows (see package source): a CSV file, possibly
	// gzipped, or postgres://USER@HOST:PORT/DB?table=NAME. It may hold a
	// password: the owner logs it only through source.Redact.
	Source string
	// CSV is the path of a CSV file (the same as Source with a path).
	CSV string
	// Open, if set, returns CSV rows instead (tests).
	Open func() (io.ReadCloser, error)
	// Epsilon and Delta are the total privacy budget of the dataset's
	// ledger: the owner takes part in a job only while the cost of every
	// job the ledger has spent and reserved, with it, is within them
	// (dp.Cost.Within).
	Epsilon, Delta float64
	// Ledger, if set, names the privacy ledger the budget is kept in.
	// By default a ledger is kept per source of rows (source.Key: a file's
	// path, a database's host, database and query), so that datasets
	// reading the same rows under different schemas share one budget. Give
	// sources that overlap in other ways (two queries over one table, a
	// file and its copy) one name. Datasets sharing a ledger must have the
	// same budget.
	Ledger string
}

// ledgerKey names the dataset's privacy ledger (see Ledger).
func (d *Dataset) ledgerKey() (string, error) {
	switch {
	case d.Ledger != "":
		return "ledger:" + d.Ledger, nil
	case d.Open != nil && d.spec() == "":
		return "dataset:" + d.Schema.ID, nil
	}
	return source.Key(d.spec())
}

// Policy says which jobs an owner takes part in.
type Policy struct {
	// Users lists the users allowed to run jobs, each by key (a name
	// alone only in insecure mode, where nothing is signed); empty allows
	// every user this owner's trust store accepts.
	Users []transport.Peer
	// MaxEpsilon is the largest epsilon of one job (0: no limit besides the
	// budget); MaxDelta the largest delta (0: DefaultMaxDelta).
	MaxEpsilon float64
	MaxDelta   float64
	// Committee is the committee policy: the owner takes part only under a
	// key every member attested, of a committee of the pinned members (or,
	// with AnyMembers, of any of the deployment's CSPs: local tests), at
	// least the policy's size and threshold. New refuses a policy that pins
	// nothing without saying AnyMembers.
	Committee job.CommitteePolicy
	// AllowNoNoise accepts jobs without DP noise (tests and simulations).
	AllowNoNoise bool
	// AllowExactComponents accepts components jobs (job.ReleaseComponents)
	// without DP noise: the user learns the exact top-k components, their
	// eigenvalues and n of the rows, computed by the committee members in
	// secret-shared arithmetic, and nothing else (docs/PROTOCOL.md). Off by
	// default; a statistics job without noise still needs AllowNoNoise, and
	// a components job with noise is accepted as any DP job.
	AllowExactComponents bool
	// ExactMaxK is the most components an exact components job may
	// release (0: half the schema's features, at least 1; never more than
	// the spec allows, job.MaxExactK), and Exact how many such jobs each
	// source of rows takes part in per period (zero: DefaultExactJobs per
	// DefaultExactPeriod). Each is recorded in the ledger with what it
	// releases.
	ExactMaxK int
	Exact     ExactRule
	// AllowDealer accepts components jobs whose correlated randomness the
	// proxy deals (job.RandomnessDealer): the proxy with one computing
	// member could then learn the statistics, and wrong randomness would
	// go undetected. Off by default: such an owner takes part only in
	// components jobs whose three computing members make their own.
	AllowDealer bool
}

// check checks that the dataset names its rows (and that a file exists).
func (d *Dataset) check() error {
	if d.Open != nil {
		return nil
	}
	spec := d.spec()
	if spec == "" {
		return errors.New("no source of rows (a CSV file or a postgres:// URL)")
	}
	if source.Scheme(spec) == "file" {
		path, _, err := source.ParseCSVSpec(spec)
		if err != nil {
			return err
		}
		if _, err := os.Stat(path); err != nil {
			return err
		}
	}
	return nil
}

func (d *Dataset) spec() string {
	if d.Source != "" {
		return d.Source
	}
	return d.CSV
}

// Describe names the dataset's rows for a log, with any password redacted.
func (d *Dataset) Describe() string {
	if d.Open != nil && d.spec() == "" {
		return "(rows from a function)"
	}
	return source.Redact(d.spec())
}

// OpenRows opens the dataset's rows. Errors never quote a password.
func (d *Dataset) OpenRows(ctx context.Context) (source.Rows, error) {
	if d.Open != nil {
		rc, err := d.Open()
		if err != nil {
			return nil, err
		}
		r, err := source.NewCSV(rc, schema.CSVOptions{})
		if err != nil {
			rc.Close()
			return nil, err
		}
		return r, nil
	}
	return source.Open(ctx, d.spec())
}

// Check reads the dataset's whole source through its schema and returns
// the local report (for the owner's operator only: it describes private
// rows). An error means the source cannot be read or does not fit the
// schema (the error names the column and what differs).
func (d *Dataset) Check(ctx context.Context) (*schema.CheckReport, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	rows, err := d.OpenRows(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	rep, err := d.Schema.Check(rows)
	if err != nil {
		return nil, fmt.Errorf("%s does not fit schema %s: %w", d.Describe(), d.Schema.ID, err)
	}
	return rep, nil
}

// DefaultMaxDelta is an owner's per-job delta limit unless its policy sets
// one: the deployment-wide default delta (job.DefaultDelta).
const DefaultMaxDelta = job.DefaultDelta

// Config configures an owner.
type Config struct {
	ID string
	// Listener, if set, serves the gRPC health service.
	Listener net.Listener
	// Dialer reaches the proxy (credentials, or insecure with an identity).
	Dialer    transport.Dialer
	ProxyAddr string
	Store     string
	Datasets  []*Dataset
	Policy    Policy
	// Metrics is the owner's registry (default: a new one);
	// MetricsListener, if set, serves it over HTTP at /metrics.
	Metrics         *transport.Metrics
	MetricsListener net.Listener
	// IdleTimeout, if set, closes the connection to the proxy when it has
	// been idle that long (deployments with many owners and long poll
	// intervals, where connected owners would cost the proxy memory).
	IdleTimeout time.Duration
	// PollInterval is how often the owner asks for jobs when the proxy
	// serves it no watch, and how often it retries, from memory, what
	// failed about the jobs its watch told of (default 10 s: the watch
	// announces a job within milliseconds).
	PollInterval time.Duration
	Logger       hclog.Logger
	Params       *he.Params
	// Keys, if set, is shared by owners run in one process (a simulator's
	// owner farm) that trust the same CA: a committee key one of them has
	// fetched and found attested is used by the others without fetching
	// and checking it again, and held once.
	Keys *KeyCache
	// Compute, if set, bounds the shares computed at once by the owners
	// sharing it (a farm: its memory does not grow with its owners).
	Compute *semaphore.Weighted
	// Prepare bounds the encryptions of zero prepared between jobs by the
	// owners sharing it (default: 160 for all the owners of the process
	// given none).
	Prepare *PrepareBudget
	// UploadHold, if set, is how long after taking a job up the owner
	// waits before it sends its share: the time its share takes to compute,
	// which grows with its rows, is then hidden from the proxy too as long
	// as it is shorter (docs/BENCHMARKS.md, "Upload timing"). The proxy
	// shows users and owners only its progress ticks in any case.
	UploadHold time.Duration
}

// hold waits until UploadHold after taken; false if ctx ends first.
func (o *Owner) hold(ctx context.Context, taken time.Time) bool {
	wait := time.Until(taken.Add(o.cfg.UploadHold))
	if o.cfg.UploadHold <= 0 || wait <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// KeyCache holds committee keys found attested, by fingerprint, HE
// parameters and pinned committee, for owners sharing one process and CA
// (Config.Keys): one of them fetches and checks a key while the others
// wait for it. It also holds the encryptors lent under each key, so that
// the owners share them. Safe for concurrent use; a nil KeyCache shares
// nothing.
type KeyCache struct {
	mu    sync.Mutex
	keys  map[string]*rlwe.PublicKey
	encs  map[*rlwe.PublicKey]*encryptors
	fetch singleflight.Group
}

// encryptors returns the encryptors lent under pk, shared by the owners of
// the cache (made for each call without one).
func (c *KeyCache) encryptors(p he.Params, pk *rlwe.PublicKey) (*encryptors, error) {
	if c == nil {
		return newEncryptors(p, pk)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.encs[pk]; e != nil {
		return e, nil
	}
	e, err := newEncryptors(p, pk)
	if err != nil {
		return nil, err
	}
	if c.encs == nil {
		c.encs = map[*rlwe.PublicKey]*encryptors{}
	}
	c.encs[pk] = e
	return e, nil
}

// load returns the key cached under name, or fetches it (once for every
// owner asking at the same moment) and caches it if fetch succeeds.
func (c *KeyCache) load(name string, fetch func() (*rlwe.PublicKey, error)) (*rlwe.PublicKey, error) {
	if c == nil {
		return fetch()
	}
	v, err, _ := c.fetch.Do(name, func() (any, error) {
		c.mu.Lock()
		pk := c.keys[name]
		c.mu.Unlock()
		if pk != nil {
			return pk, nil
		}
		pk, err := fetch()
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.keys == nil {
			c.keys = map[string]*rlwe.PublicKey{}
		}
		c.keys[name] = pk
		return pk, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*rlwe.PublicKey), nil
}

// Owner is the owner daemon; safe for concurrent use.
type Owner struct {
	cfg    Config
	log    hclog.Logger
	params he.Params
	db     *bolt.DB
	ledger *ledger
	pend   struct { // pending's last answer, and the store's write count it was read at
		mu    sync.Mutex
		valid bool
		gen   int64
		ids   []string
	}
	datasets map[string]*Dataset
	health   *health.Server
	m        *metrics
	polled   bool // a poll has succeeded (only Run's goroutine uses it)
	watching *watchState

	mu    sync.Mutex
	conn  *grpc.ClientConn
	proxy fedpcav1.ProxyServiceClient
	busy  map[string]bool
	again map[string]func() // what to run once a busy job's handler returns
	cpk   *committeeEnc     // the committee key, cached by fingerprint
}

var bucketJobs = []byte("jobs") // job -> jobNote (JSON)

// callTimeout is the deadline of each call to the proxy but uploads (the
// poll is the retry of most of them; see also resume and reportDecline).
const callTimeout = 30 * time.Second

// dbFileName is the owner's store in its state directory.
const dbFileName = "owner.db"

// New validates the configuration and opens the owner's state.
func New(cfg Config) (*Owner, error) {
	self := cfg.Dialer.Identity()
	if self.Role != transport.RoleOwner {
		return nil, fmt.Errorf("owner: identity %s is not an owner", self.Short())
	}
	if cfg.ID == "" {
		cfg.ID = self.ID
	}
	if cfg.ID != self.ID {
		return nil, fmt.Errorf("owner: configured as %q but the certificate says %s", cfg.ID, self.Short())
	}
	if cfg.ProxyAddr == "" {
		return nil, errors.New("owner: no proxy address")
	}
	if len(cfg.Datasets) == 0 {
		return nil, errors.New("owner: no datasets")
	}
	if err := cfg.Policy.Committee.Validate(); err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 10 * time.Second
	}
	if cfg.Prepare == nil {
		cfg.Prepare = defaultPrepare
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = transport.NewMetrics()
	}
	if l := cfg.MetricsListener; l != nil {
		if err := transport.CheckOperatorListener(l, cfg.Dialer.Creds); err != nil {
			return nil, fmt.Errorf("owner: metrics: %w", err)
		}
	}
	if cfg.Dialer.Metrics == nil {
		cfg.Dialer.Metrics = cfg.Metrics
	}
	o := &Owner{cfg: cfg, log: cfg.Logger, datasets: map[string]*Dataset{}, busy: map[string]bool{}, again: map[string]func(){}, watching: newWatchState(), health: health.NewServer()}
	var err error
	if o.params, err = he.ParamsOr(cfg.Params); err != nil {
		return nil, err
	}
	keys, budgets := map[string]string{}, map[string]*ledgerBudget{}
	for _, d := range cfg.Datasets {
		if d.Schema == nil {
			return nil, errors.New("owner: a dataset has no schema")
		}
		if err := d.Schema.Validate(); err != nil {
			return nil, fmt.Errorf("owner: %w", err)
		}
		if _, dup := o.datasets[d.Schema.ID]; dup {
			return nil, fmt.Errorf("owner: dataset %s listed twice", d.Schema.ID)
		}
		if err := d.check(); err != nil {
			return nil, fmt.Errorf("owner: dataset %s: %w", d.Schema.ID, err)
		}
		if _, err := dp.BudgetRho(d.Epsilon, d.Delta); err != nil {
			return nil, fmt.Errorf("owner: dataset %s budget: %w", d.Schema.ID, err)
		}
		key, err := d.ledgerKey()
		if err != nil {
			return nil, fmt.Errorf("owner: dataset %s: its ledger: %w", d.Schema.ID, err)
		}
		if b := budgets[key]; b == nil {
			budgets[key] = &ledgerBudget{Epsilon: d.Epsilon, Delta: d.Delta, Datasets: []string{d.Schema.ID}}
		} else if b.Epsilon != d.Epsilon || b.Delta != d.Delta {
			return nil, fmt.Errorf("owner: datasets %s and %s read the same rows (%s) and share one privacy ledger, but their budgets differ: (epsilon %g, delta %g) and (epsilon %g, delta %g)",
				b.Datasets[0], d.Schema.ID, key, b.Epsilon, b.Delta, d.Epsilon, d.Delta)
		} else {
			b.Datasets = append(b.Datasets, d.Schema.ID)
		}
		keys[d.Schema.ID] = key
		o.datasets[d.Schema.ID] = d
	}
	db, err := transport.OpenStore(cfg.Store, dbFileName)
	if err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketLedger, bucketJobs, bucketUploads} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, err
	}
	o.db, o.ledger = db, &ledger{db: db, keys: keys, budgets: budgets, exact: cfg.Policy.Exact}
	moved, err := o.ledger.migrate()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("owner: ledger: %w", err)
	}
	if moved > 0 {
		o.log.Warn("privacy ledgers are now kept per source of rows: entries moved from the datasets' ledgers; entries from before costs were kept count dp.LegacyFactor times their rho",
			"entries", moved)
	}
	if err := o.ledger.rebuildTotals(); err != nil {
		db.Close()
		return nil, fmt.Errorf("owner: ledger: %w", err)
	}
	if err := o.ledger.checkBudgets(); err != nil {
		db.Close()
		return nil, fmt.Errorf("owner: %w", err)
	}
	if moved, err := o.ledger.elsewhere(); err == nil {
		for ds, keys := range moved {
			o.log.Warn("jobs of this dataset were charged to another source's ledger, which no longer counts against its budget: if the rows are the same (a renamed file, a reworded query), "+
				"point the dataset back at that source, or its budget is spent again", "dataset", ds, "ledgers", strings.Join(keys, ", "), "now", o.ledger.key(ds))
		}
	}
	o.registerMetrics(cfg.Metrics.Registry)
	return o, nil
}

// committeeKey returns the committee key the job names, asking the proxy
// only when it is not the cached one (nor in the shared Config.Keys). The
// key must be attested by every committee member (and be the committee the
// spec and the owner's policy name); otherwise the error wraps
// errWrongCommittee.
func (o *Owner) committeeKey(ctx context.Context, spec *job.Spec) (*committeeEnc, error) {
	o.mu.Lock()
	if o.cpk != nil && o.cpk.fp == spec.CommitteeKey {
		defer o.mu.Unlock()
		return o.cpk, nil
	}
	o.mu.Unlock()
	// What the key is checked against besides the CA, which the owners
	// sharing Keys have in common: the HE parameters, the committee policy.
	shared := spec.CommitteeKey + "/" + o.params.Fingerprint() + "/" + o.cfg.Policy.Committee.Key()
	pk, err := o.cfg.Keys.load(shared, func() (*rlwe.PublicKey, error) { return o.fetchCommitteeKey(ctx, spec) })
	if err != nil {
		return nil, err
	}
	encs, err := o.cfg.Keys.encryptors(o.params, pk)
	if err != nil {
		return nil, err
	}
	c := newCommitteeEnc(spec.CommitteeKey, encs, o.cfg.Prepare)
	o.mu.Lock()
	old := o.cpk
	o.cpk = c
	o.mu.Unlock()
	if old != nil {
		old.drop()
	}
	return c, nil
}

// fetchCommitteeKey asks the proxy for the committee key and checks its
// attestation against the job (see committeeKey).
func (o *Owner) fetchCommitteeKey(ctx context.Context, spec *job.Spec) (*rlwe.PublicKey, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cmt, err := o.proxy.GetCommittee(cctx, &fedpcav1.GetCommitteeRequest{})
	if err != nil {
		return nil, err
	}
	st, err := transport.VerifyCommittee(o.cfg.Dialer.Creds, cmt, o.cfg.Policy.Committee)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errWrongCommittee, err)
	}
	switch {
	case st.Key != spec.CommitteeKey:
		return nil, fmt.Errorf("%w: the job's committee key %s… is not the attested key %s…", errWrongCommittee, spec.CommitteeKey[:12], st.Key[:12])
	case len(st.Members) != spec.CommitteeN || st.Threshold != spec.CommitteeThreshold:
		return nil, fmt.Errorf("%w: the job's committee is %d-of-%d, the attested one %d-of-%d", errWrongCommittee, spec.CommitteeThreshold, spec.CommitteeN, st.Threshold, len(st.Members))
	case st.HEParams != o.params.Fingerprint():
		return nil, fmt.Errorf("%w: the key is attested for other HE parameters", errWrongCommittee)
	}
	pk, err := o.params.Codecs().PublicKey.Unmarshal(cmt.GetPublicKey())
	if err != nil {
		return nil, fmt.Errorf("%w: the committee key is malformed: %v", errWrongCommittee, err)
	}
	return pk, nil
}

// prepared is the number of encryptions of zero prepared for the next
// share.
func (o *Owner) prepared() float64 {
	o.mu.Lock()
	c := o.cpk
	o.mu.Unlock()
	if c == nil {
		return 0
	}
	return float64(c.ready())
}

// prepare makes encryptions of zero for the next share under the cached
// committee key (see committeeEnc), when a job has ended.
func (o *Owner) prepare(ctx context.Context) {
	o.mu.Lock()
	c := o.cpk
	o.mu.Unlock()
	if c == nil {
		return
	}
	if err := c.prepare(ctx); err != nil {
		o.log.Warn("cannot prepare encryptions for the next job", "error", err)
	}
}

var errWrongCommittee = errors.New("committee key refused")

// Pin checks: how often the owner asks for the committee until the proxy
// has one, then how often it looks again for a new committee (a new
// ceremony), besides the check of every job's committee.
var (
	pinRetry   = time.Second
	pinRecheck = 10 * time.Minute
)

// checkPin checks the owner's committee pin against the committee the proxy
// names as soon as the owner starts (once the proxy has a committee), and
// again whenever the attested committee changes: a pin that does not match
// is said at once, in the owner's own log, naming the keys pinned and
// attested, rather than at the first job (whose user would see only a
// decline). It sends nothing but the request for the committee (without
// the key's bytes) and changes nothing.
func (o *Owner) checkPin(ctx context.Context) {
	last := ""
	for {
		wait := pinRetry
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		cmt, err := o.proxy.GetCommittee(cctx, &fedpcav1.GetCommitteeRequest{WithoutKey: true})
		cancel()
		if err == nil {
			wait = pinRecheck
			if fp := cmt.GetPublicKeyFingerprint(); fp != last {
				last = fp
				_, err := transport.VerifyCommitteePin(o.cfg.Dialer.Creds, cmt, o.cfg.Policy.Committee)
				var pin *job.PinError
				switch {
				case errors.As(err, &pin):
					o.log.Error("THIS OWNER'S COMMITTEE PIN DOES NOT MATCH the committee the proxy names: it will decline every job under this committee (committee_pin) "+
						"until --committee names the members' key fingerprints (fedpca certs prints them; each member logs its own at start)", "error", err)
				case err != nil:
					o.log.Error("the committee the proxy names is not attested by its members: this owner will decline its jobs (committee_key)", "error", err)
				default:
					o.log.Info("committee pin checked: the proxy's committee is the pinned one", "committee_key", fp[:16], "members", len(cmt.GetAttestations()))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Balance returns a dataset's privacy budget balance.
func (o *Owner) Balance(dataset string) (Balance, error) { return o.ledger.Balance(dataset) }

// LedgerEntry is one job's line in a dataset's ledger.
type LedgerEntry = entry

// Ledger returns a dataset's ledger entries.
func (o *Owner) Ledger(dataset string) ([]LedgerEntry, error) { return o.ledger.Entries(dataset) }

// Run watches (or polls) the proxy and handles jobs until ctx is done.
func (o *Owner) Run(ctx context.Context) error {
	d := o.cfg.Dialer
	d.Options = append(slices.Clone(d.Options), transport.WatchKeepalive())
	if o.cfg.IdleTimeout > 0 {
		d.Options = append(d.Options, grpc.WithIdleTimeout(o.cfg.IdleTimeout))
	}
	conn, err := d.Dial(o.cfg.ProxyAddr, transport.Identity{Role: transport.RoleProxy})
	if err != nil {
		return errors.Join(fmt.Errorf("owner: %w", err), o.db.Close())
	}
	o.mu.Lock()
	o.conn, o.proxy = conn, fedpcav1.NewProxyServiceClient(conn)
	o.mu.Unlock()
	var srv *grpc.Server
	if o.cfg.Listener != nil {
		srv = grpc.NewServer(transport.ServerOptions(o.cfg.Dialer.Creds, o.cfg.Dialer.Insecure, o.log, o.cfg.Metrics)...)
		healthpb.RegisterHealthServer(srv, o.health)
		o.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		go srv.Serve(o.cfg.Listener)
	}
	var names []string
	for n := range o.datasets {
		names = append(names, n)
	}
	slices.Sort(names)
	o.log.Info("owner running", "proxy", o.cfg.ProxyAddr, "datasets", strings.Join(names, ","), "poll", o.cfg.PollInterval, "committee", o.cfg.Policy.Committee.String())
	if c := o.cfg.Dialer.Creds; c != nil {
		o.log.Info("this owner's identity", "spiffe_id", c.Identity.String(), "key", c.Key)
	}
	if o.cfg.Policy.Committee.AnyMembers {
		o.log.Warn("no committee pinned: any committee of the deployment's CSPs whose members attested the key is accepted, as the proxy names it (local tests only; pin it with --committee)")
	}
	if l := o.cfg.MetricsListener; l != nil {
		go func() {
			if err := transport.ServeMetrics(ctx, l, o.cfg.Dialer.Creds, o.cfg.Metrics, o.log.Named("metrics")); err != nil {
				o.log.Error("metrics server", "error", err)
			}
		}()
	}
	var wg sync.WaitGroup // the jobs being handled
	wctx, stopWatch := context.WithCancel(ctx)
	watched, pinned := make(chan struct{}), make(chan struct{})
	go func() { defer close(watched); o.watch(wctx, &wg) }()
	go func() { defer close(pinned); o.checkPin(wctx) }()
	stop := func() {
		stopWatch()
		<-watched
		<-pinned
		wg.Wait()
	}
	tick := time.NewTicker(o.cfg.PollInterval)
	defer tick.Stop()
	for {
		// While the watch is up, the open jobs it told of are gone over
		// again from memory; otherwise the owner polls.
		var err error
		if sts, ok := o.watching.jobs(); ok {
			o.dispatch(ctx, &wg, sts, true)
		} else {
			err = o.poll(ctx, &wg)
		}
		if err != nil {
			stop()
			if srv != nil {
				o.health.Shutdown()
				srv.Stop()
			}
			conn.Close()
			o.db.Close()
			return fmt.Errorf("owner: %w", err)
		}
		select {
		case <-ctx.Done():
			stop()
			if srv != nil {
				o.health.Shutdown()
				transport.StopGracefully(srv, 10*time.Second)
			}
			conn.Close()
			o.log.Info("owner stopped")
			return o.db.Close()
		case <-tick.C:
		case <-o.watching.kick:
		}
	}
}

// poll lists the open jobs that name this owner (brief statuses) and
// dispatches them.
func (o *Owner) poll(ctx context.Context, wg *sync.WaitGroup) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := o.proxy.ListJobs(cctx, &fedpcav1.ListJobsRequest{Brief: true})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if transport.IdentityError(err) && !o.polled {
			// At start: not the proxy at that address, or this owner is
			// not allowed; retrying cannot fix a configuration.
			return fmt.Errorf("list jobs on the proxy at %s: %s%s", o.cfg.ProxyAddr, transport.Message(err), transport.Advice(err))
		}
		o.log.Warn("cannot list jobs", "error", transport.Message(err))
		return nil
	}
	o.polled = true
	sts := make([]*fedpcav1.JobStatus, 0, len(resp.GetJobs()))
	for _, info := range resp.GetJobs() {
		sts = append(sts, info.GetStatus())
	}
	o.dispatch(ctx, wg, o.validJobs(sts), true)
	return nil
}

// spawn runs fn for a job in its own goroutine, one at a time per job: if
// the job is being handled, fn runs after (the latest such fn only), so
// that news of a job that arrives while it is handled is not lost.
func (o *Owner) spawn(ctx context.Context, wg *sync.WaitGroup, id string, fn func()) {
	o.mu.Lock()
	if o.busy[id] {
		o.again[id] = fn
		o.mu.Unlock()
		return
	}
	o.busy[id] = true
	o.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for fn != nil && ctx.Err() == nil {
			fn()
			o.mu.Lock()
			fn = o.again[id]
			delete(o.again, id)
			if fn == nil {
				delete(o.busy, id)
			}
			o.mu.Unlock()
		}
		if fn != nil {
			o.mu.Lock()
			delete(o.busy, id)
			o.mu.Unlock()
		}
	}()
}

// Budget report for the proxy's display.
func (o *Owner) budgetReport(dataset string) *fedpcav1.BudgetReport {
	bal, err := o.ledger.Balance(dataset)
	if err != nil {
		return nil
	}
	return &fedpcav1.BudgetReport{Dataset: dataset, RhoBudget: bal.Budget, RhoSpent: bal.Spent, RhoReserved: bal.Reserved, Delta: bal.Delta,
		EpsilonBudget: bal.Epsilon, EpsilonSpent: bal.EpsilonSpent(), EpsilonSpentAndReserved: bal.EpsilonSpentAndReserved(), RhoRemaining: bal.Remaining()}
}

// refusal is why this owner does not take part in a job: the public code it
// sends with what can be said of it without a row (public, a
// job.DeclineDetail of its configuration and the job's public spec), and
// the detail, which stays in its log and local status.
type refusal struct {
	code   job.Decline
	public job.DeclineDetail
	detail string
}

func refuse(code job.Decline, format string, args ...any) *refusal {
	return &refusal{code: code, detail: fmt.Sprintf(format, args...)}
}

// saying adds what the refusal says besides its code.
func (r *refusal) saying(d job.DeclineDetail) *refusal {
	r.public = d
	return r
}

// decline records that this owner does not take part in a job (final:
// the job is never reconsidered) and tells the proxy the code and its
// public detail.
func (o *Owner) decline(ctx context.Context, id, dataset string, r *refusal) {
	o.m.declines.Inc()
	o.log.Info("declining job", "job", id[:min(16, len(id))], "reason", r.code.String(), "detail", r.detail)
	note := jobNote{State: PartDeclined, Dataset: dataset, Code: r.code.String(), Reason: r.detail, Unreported: true}
	if !r.public.IsZero() {
		note.Public = &r.public
	}
	o.setNote(id, note)
	o.reportDecline(ctx, id, note)
}

// reportDecline tells the proxy about a decline noted as unreported
// (idempotent), retrying a few times; if the proxy stays unreachable, the
// next polls report it. The request carries the code, its public detail
// and the ledger balance for display, nothing else.
func (o *Owner) reportDecline(ctx context.Context, id string, note jobNote) {
	code, err := job.ParseDeclineName(note.Code)
	if err != nil {
		o.log.Error("a decline noted with an unknown code", "job", id[:min(16, len(id))], "error", err)
		return
	}
	req := &fedpcav1.DeclineRequest{JobId: id, Reason: fedpcav1.DeclineReason(code), Budget: o.budgetReport(note.Dataset)}
	if d := note.Public; d != nil {
		limit, value, field, feature := d.Wire()
		req.Detail = &fedpcav1.DeclineDetail{Limit: fedpcav1.PolicyLimit(limit), LimitValue: value, SchemaField: field, Feature: feature}
	}
	err = transport.Retry(ctx, transport.Call{What: "report the decline of job " + id[:min(16, len(id))], Timeout: callTimeout, Attempts: 3},
		func(ctx context.Context) error {
			_, err := o.proxy.Decline(ctx, req)
			return err
		})
	if err != nil {
		o.log.Warn("cannot report the decline; will retry at the next poll", "error", err)
		return
	}
	note.Unreported = false
	o.setNote(id, note)
}

// digest is the SHA-256 of an upload's ciphertext bytes, in order.
func digest(blobs [][]byte) []byte {
	h := sha256.New()
	for _, b := range blobs {
		h.Write(b)
	}
	return h.Sum(nil)
}

// retryable reports whether an upload error may go away.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Internal, codes.Unknown, codes.Canceled:
		return true
	}
	return false
}

// policyOK checks the job's privacy parameters against the policy; a
// refusal names the limit and its value, which no row changes.
func policyOK(p Policy, spec *job.Spec, d int) *refusal {
	if spec.Dealt() && !p.AllowDealer {
		return refuse(job.DeclinePolicy, "the job's randomness is dealt by the proxy (randomness %q), so the proxy with one computing member could learn the statistics; this owner's policy takes part only in components jobs whose members make their own (owner serve --allow-dealer-components)", spec.Randomness).
			saying(job.DeclineDetail{Limit: job.LimitComponentsDealer})
	}
	if spec.NoNoise {
		switch {
		case spec.Components() && !p.AllowExactComponents:
			return refuse(job.DeclinePolicy, "the job releases exact components (no DP noise) and this owner's policy refuses such jobs (owner serve --allow-exact-components)").
				saying(job.DeclineDetail{Limit: job.LimitExactComponents})
		case spec.Components() && spec.K > p.exactMaxK(d):
			return refuse(job.DeclinePolicy, "the job releases %d exact components of %d features, above this owner's limit of %d (owner serve --exact-components-max-k): "+
				"more of them come closer to the exact covariance", spec.K, d, p.exactMaxK(d)).
				saying(job.DeclineDetail{Limit: job.LimitExactMaxK, LimitValue: float64(p.exactMaxK(d))})
		case !spec.Components() && !p.AllowNoNoise:
			return refuse(job.DeclinePolicy, "the job has no DP noise and this owner's policy refuses such jobs").saying(job.DeclineDetail{Limit: job.LimitNoNoise})
		}
		return nil
	}
	if math.IsNaN(spec.Epsilon) || math.IsNaN(spec.Delta) {
		return refuse(job.DeclinePolicy, "epsilon or delta is NaN")
	}
	if p.MaxEpsilon > 0 && spec.Epsilon > p.MaxEpsilon*(1+1e-12) {
		return refuse(job.DeclinePolicy, "epsilon %g exceeds this owner's limit of %g per job", spec.Epsilon, p.MaxEpsilon).
			saying(job.DeclineDetail{Limit: job.LimitMaxEpsilon, LimitValue: p.MaxEpsilon})
	}
	maxDelta := p.MaxDelta
	if maxDelta == 0 {
		maxDelta = DefaultMaxDelta
	}
	if spec.Delta > maxDelta*(1+1e-12) {
		return refuse(job.DeclinePolicy, "delta %g exceeds this owner's limit of %g per job", spec.Delta, maxDelta).
			saying(job.DeclineDetail{Limit: job.LimitMaxDelta, LimitValue: maxDelta})
	}
	return nil
}

// exactMaxK is the most exact components the policy allows of d features.
func (p Policy) exactMaxK(d int) int {
	k := p.ExactMaxK
	if k == 0 {
		k = max(d/2, 1)
	}
	return min(k, job.MaxExactK(d))
}

// exactRelease says what a job without DP noise releases, for the ledger
// (empty for a job with noise).
func exactRelease(spec *job.Spec, sch *schema.Schema) string {
	if !spec.NoNoise || !spec.Components() {
		return ""
	}
	return fmt.Sprintf("exact %s components: top %d of %d features", spec.Analysis, spec.K, sch.D())
}

// exactJobsRefusal is the decline of an exact components job beyond the
// ledger's rule: code policy, the limit and its count.
func (o *Owner) exactJobsRefusal(err error) *refusal {
	jobs := o.cfg.Policy.Exact.Jobs
	if jobs == 0 {
		jobs = DefaultExactJobs
	}
	return refuse(job.DeclinePolicy, "%v", err).saying(job.DeclineDetail{Limit: job.LimitExactJobs, LimitValue: float64(jobs)})
}

// userOK checks the user that signed a job against the owner's list of
// allowed users: by key (a certificate with an allowed user's name and
// another key is not that user), by name only where the list has no key.
func userOK(p Policy, user transport.Peer) error {
	if len(p.Users) == 0 {
		return nil
	}
	for _, u := range p.Users {
		if u.Key != "" && u.Key == user.Key && (u.ID == "" || user.Matches(u.Identity)) {
			return nil
		}
		if u.Key == "" && user.Matches(u.Identity) {
			return nil
		}
	}
	return fmt.Errorf("user %s (key %s) is not in this owner's list of allowed users (--users)", user, user.Key)
}
