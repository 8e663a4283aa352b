package sim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/fedpca/fedpca/csp"
	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/sim/faultnet"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// OwnerConfig is one simulated owner.
type OwnerConfig struct {
	ID     string
	Schema *schema.Schema
	// CSV holds the owner's rows (with a header); Open, if set, opens
	// them instead (a test's data source that fails, say).
	CSV  []byte
	Open func() (io.ReadCloser, error)
	// Source, if set, names the rows instead (see package source): a CSV
	// file or a postgres:// URL.
	Source string
	// Epsilon and Delta are its budget for the dataset (default 100, 1e-6).
	Epsilon, Delta float64
	Policy         owner.Policy
	// UploadHold is the owner's (see owner.Config).
	UploadHold time.Duration
}

// budget is the owner's budget, 100 and 1e-6 unless set.
func (oc OwnerConfig) budget() (float64, float64) {
	if oc.Epsilon == 0 {
		return 100, 1e-6
	}
	return oc.Epsilon, oc.Delta
}

// Config configures a cluster.
type Config struct {
	// Dir holds the certificates and every node's state.
	Dir string
	// CSPs is the committee's size (default 3) and Threshold the members a
	// key switch needs (default: 2 for the default committee, else all).
	CSPs      int
	Threshold int
	// CommitteePolicy is the committee policy of the cluster's owners and
	// users (see job.CommitteePolicy). Nil: they pin the cluster's members
	// and accept its size and threshold, whatever they are (a test's
	// committee is the test's choice; the default one meets the default
	// policy).
	CommitteePolicy *job.CommitteePolicy
	Owners          []OwnerConfig
	Users           []string
	// Identities are further "role/id" certificates to make, for nodes a
	// test drives by hand.
	Identities []string
	// Federation gives every node an organisation of its own (its own CA
	// and trust domain, DomainOf) that imports every other's bundle for the
	// roles of its nodes, as fedpca certs init, issue, export and import do;
	// otherwise one CA issues every node (fedpca certs --out).
	Federation bool
	// TCP serves on loopback TCP ports instead of bufconn.
	TCP bool
	// Insecure runs without TLS (faster; never in production).
	Insecure     bool
	AllowNoNoise bool
	// Intervals (defaults suit tests: 100 ms polling and retries);
	// IdleTimeout closes owners' idle connections (see owner.Config).
	PollInterval  time.Duration
	RetryInterval time.Duration
	IdleTimeout   time.Duration
	Logger        hclog.Logger
	Params        *he.Params
	// ProxyProcess runs the proxy as a separate process (its peak memory is
	// then measurable) and OwnerFarms > 0 runs the owners in that many
	// farms, each a process: Processes starts them (package sim/procs).
	// Both need TCP.
	Processes    Launcher
	ProxyProcess bool
	OwnerFarms   int
	// ProxyMaxConnections and ProxyMaxWatchers are the proxy's limits (see
	// proxy.Config; 0: its defaults).
	ProxyMaxConnections int
	ProxyMaxWatchers    int
	// Network carries every connection of the in-process nodes (default:
	// one without faults); the chaos driver injects faults through it.
	Network *faultnet.Network
	// SwitchTimeout is the proxy's (see proxy.Config; default 24 h).
	SwitchTimeout time.Duration
	// ProxyStatusListener and ProxyMetricsListener, if set, serve the
	// in-process proxy's status page and metrics (see proxy.Config).
	ProxyStatusListener, ProxyMetricsListener net.Listener
	// ProgressInterval is the proxy's (see proxy.Config): default 100 ms
	// here, where jobs run back to back on one machine, not the
	// deployment's 5 s.
	ProgressInterval time.Duration
	// ProxyServerOptions are added to the in-process proxy's gRPC server
	// (a deviating proxy's interceptor).
	ProxyServerOptions []grpc.ServerOption
	// ProxyDialOptions are added to the in-process proxy's connections to
	// the members (a deviating proxy's client interceptor).
	ProxyDialOptions []grpc.DialOption
}

// Cluster is a running deployment.
type Cluster struct {
	cfg    Config
	params he.Params
	log    hclog.Logger
	creds  map[string]*transport.Credentials // by "role/id"
	// orgs are the organisations that issued them: one (the single CA's
	// directory) unless Federation, by "role/id" (nil: insecure).
	orgs map[string]*transport.Org

	// Everything below is written under mu and read through the accessors
	// (Proxy, ProxyAddr, CSP, CSPAddr, Owner), which take it.
	mu        sync.Mutex
	listeners map[string]*bufconn.Listener // bufconn address -> listener
	nodes     map[string]*node
	owners    map[string]*owner.Owner
	proxy     *proxy.Proxy
	csps      []*csp.CSP
	proxyAddr string
	cspAddrs  []string
	ext       external
	net       *faultnet.Network
	addrs     map[string]string // node -> TCP address, kept across restarts
	ownerCfg  map[string]OwnerConfig
	// proxyMetrics is the in-process proxy's registry, ownerMetrics the
	// in-process owners'.
	proxyMetrics *transport.Metrics
	ownerMetrics map[string]*transport.Metrics
}

type node struct {
	cancel context.CancelFunc
	done   chan error
}

// Start makes the certificates, starts the CSP members, the proxy (which
// runs the key ceremony) and the owners, and waits until the committee key
// is ready.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.CSPs < 1 {
		cfg.CSPs, cfg.Threshold = job.DefaultMinCommitteeMembers, job.DefaultMinCommitteeThreshold
	}
	if cfg.Threshold < 1 {
		cfg.Threshold = cfg.CSPs
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 100 * time.Millisecond
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Network == nil {
		cfg.Network = faultnet.NewNetwork(0)
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, creds: map[string]*transport.Credentials{}, listeners: map[string]*bufconn.Listener{},
		nodes: map[string]*node{}, owners: map[string]*owner.Owner{}, ownerMetrics: map[string]*transport.Metrics{}, net: cfg.Network, addrs: map[string]string{}, ownerCfg: map[string]OwnerConfig{}}
	var err error
	if c.params, err = he.ParamsOr(cfg.Params); err != nil {
		return nil, err
	}
	if err := c.makeCerts(); err != nil {
		return nil, err
	}
	for i := range cfg.CSPs {
		c.cspAddrs = append(c.cspAddrs, "")
		c.csps = append(c.csps, nil)
		if err := c.StartCSP(i); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if (cfg.ProxyProcess || cfg.OwnerFarms > 0) && !cfg.TCP {
		c.Stop()
		return nil, errors.New("sim: nodes in separate processes need the TCP transport")
	}
	startProxy := c.StartProxy
	if cfg.ProxyProcess {
		startProxy = c.startProxyProcess
	}
	if err := startProxy(); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.WaitCommittee(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	if cfg.OwnerFarms > 0 {
		if err := c.startFarms(cfg.Owners); err != nil {
			c.Stop()
			return nil, err
		}
		return c, nil
	}
	for _, o := range cfg.Owners {
		if err := c.StartOwner(o); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// Params returns the HE parameters.
func (c *Cluster) Params() he.Params { return c.params }

func CSPID(i int) string { return fmt.Sprintf("csp-%d", i+1) }

func (c *Cluster) makeCerts() error {
	if c.cfg.Insecure {
		return nil
	}
	ids := []transport.Identity{{Role: transport.RoleProxy, ID: "proxy"}, probe}
	for i := range c.cfg.CSPs {
		ids = append(ids, transport.Identity{Role: transport.RoleCSP, ID: CSPID(i)})
	}
	for _, o := range c.cfg.Owners {
		ids = append(ids, transport.Identity{Role: transport.RoleOwner, ID: o.ID})
	}
	for _, u := range c.cfg.Users {
		ids = append(ids, transport.Identity{Role: transport.RoleUser, ID: u})
	}
	for _, s := range c.cfg.Identities {
		id, err := transport.ParseIdentity(s)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	c.orgs = map[string]*transport.Org{}
	dirs := map[string]string{}
	if c.cfg.Federation {
		if err := c.federate(ids, dirs); err != nil {
			return err
		}
	} else {
		dir := filepath.Join(c.cfg.Dir, "certs")
		ca, err := transport.NewCA("fedpca simulation CA", 24*time.Hour)
		if err != nil {
			return err
		}
		if err := ca.Save(filepath.Join(dir, "ca")); err != nil {
			return err
		}
		if _, err := ca.WriteDeployment(dir, ids, transport.NodeOptions{Validity: 24 * time.Hour, LinkTrust: true}); err != nil {
			return err
		}
		org := &transport.Org{Dir: dir, Domain: ca.Domain}
		for _, id := range ids {
			c.orgs[id.Short()], dirs[id.Short()] = org, filepath.Join(dir, id.Role+"-"+id.ID)
		}
	}
	var load transport.Loader // the nodes share each parsed trust store
	for _, id := range ids {
		cr, err := load.Credentials(dirs[id.Short()])
		if err != nil {
			return err
		}
		c.creds[id.Short()] = cr
	}
	return nil
}

// DomainOf is the trust domain of a node's organisation in a federated
// cluster: "ROLE.ID", lower case.
func DomainOf(id transport.Identity) string { return strings.ToLower(id.Role + "." + id.ID) }

// federate makes one organisation per node (its CA, its node) and has
// every organisation import every other's bundle for the roles of its
// nodes; dirs gets each node's credentials directory.
func (c *Cluster) federate(ids []transport.Identity, dirs map[string]string) error {
	var bundles []transport.Bundle
	for _, id := range ids {
		dir := filepath.Join(c.cfg.Dir, "orgs", DomainOf(id))
		org, err := transport.InitOrg(dir, DomainOf(id), 24*time.Hour)
		if err != nil {
			return err
		}
		if _, err := org.Issue([]transport.Identity{id}, transport.NodeOptions{Validity: 24 * time.Hour}); err != nil {
			return err
		}
		b, err := org.Bundle()
		if err != nil {
			return err
		}
		bundles = append(bundles, b)
		c.orgs[id.Short()], dirs[id.Short()] = org, filepath.Join(dir, id.Role+"-"+id.ID)
	}
	for _, id := range ids {
		for _, b := range bundles {
			if _, err := c.orgs[id.Short()].Import(b, nil); err != nil && !errors.Is(err, transport.ErrOwnBundle) {
				return err
			}
		}
	}
	return nil
}

// listen returns a node's listener (through the network) and the address
// to dial it. A restarted node listens at its former address.
func (c *Cluster) listen(id transport.Identity) (net.Listener, string, error) {
	node := id.Short()
	var l net.Listener
	var addr string
	if c.cfg.TCP {
		c.mu.Lock()
		addr = c.addrs[node]
		c.mu.Unlock()
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		tl, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, "", fmt.Errorf("sim: %s listen at %s: %w", node, addr, err)
		}
		l, addr = tl, tl.Addr().String()
		c.mu.Lock()
		c.addrs[node] = addr
		c.mu.Unlock()
	} else {
		bl := bufconn.Listen(4 << 20)
		c.mu.Lock()
		c.listeners[id.ID] = bl
		c.mu.Unlock()
		l, addr = bl, "passthrough:///"+id.ID
	}
	c.net.Register(addr, node)
	return c.net.Listen(node, l), addr, nil
}

// dialer returns the dialer of a node: its connections go through the
// network, with its faults.
func (c *Cluster) dialer(id transport.Identity) transport.Dialer {
	return c.DialerAs(id, id.Short(), true)
}

// DialerAs returns a dialer with a node's credentials whose connections
// count as those of the named node, with or without message faults.
func (c *Cluster) DialerAs(id transport.Identity, node string, faults bool) transport.Dialer {
	d := transport.Dialer{Creds: c.creds[id.Short()], Insecure: c.cfg.Insecure, Self: id}
	raw := func(ctx context.Context, addr string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "tcp", addr)
	}
	if !c.cfg.TCP {
		raw = func(ctx context.Context, addr string) (net.Conn, error) {
			name := strings.TrimPrefix(addr, "passthrough:///")
			c.mu.Lock()
			l := c.listeners[name]
			c.mu.Unlock()
			if l == nil {
				return nil, fmt.Errorf("sim: no node listening at %q", name)
			}
			return l.DialContext(ctx)
		}
	}
	d.Options = append(d.Options, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return c.net.Dial(ctx, node, addr, raw)
	}))
	if faults {
		d.Options = append(d.Options, c.net.DialOptions(node)...)
	}
	return d
}

// CSP returns member i (the running instance).
func (c *Cluster) CSP(i int) *csp.CSP {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.csps[i]
}

// CSPAddr returns the address of member i.
func (c *Cluster) CSPAddr(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cspAddrs[i]
}

// Proxy returns the in-process proxy (nil when it runs as a process).
func (c *Cluster) Proxy() *proxy.Proxy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxy
}

// ProxyAddr returns the proxy's address.
func (c *Cluster) ProxyAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxyAddr
}

// Owner returns an owner (the running instance, or the last one).
func (c *Cluster) Owner(id string) *owner.Owner {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owners[id]
}

// Network returns the network the nodes talk through.
func (c *Cluster) Network() *faultnet.Network { return c.net }

// User returns a client for a user (its HE keys are made in its directory
// on first use).
func (c *Cluster) User(id string) (*user.Client, error) {
	uid := transport.Identity{Role: transport.RoleUser, ID: id}
	dir := filepath.Join(c.cfg.Dir, "state", "user-"+id)
	kp, err := user.LoadKeys(dir, c.params)
	if errors.Is(err, user.ErrNoKeys) {
		kp, err = user.GenerateKeys(dir, c.params)
	}
	if err != nil {
		return nil, err
	}
	rk, err := user.LoadResultKey(dir)
	if err != nil {
		return nil, err
	}
	return user.NewClient(user.Config{Dialer: c.dialer(uid), ProxyAddr: c.ProxyAddr(), Keys: kp, ResultKey: rk, Committee: c.Policy(), Logger: c.log.Named("user"), Params: &c.params})
}

// Policy is the committee policy of the cluster's owners and users
// (Config.CommitteePolicy).
func (c *Cluster) Policy() job.CommitteePolicy {
	if p := c.cfg.CommitteePolicy; p != nil {
		q := *p
		if len(q.Members) == 0 && !q.AnyMembers {
			q.Members = c.Pins() // its minimums, the cluster's members
		}
		return q
	}
	return job.CommitteePolicy{Members: c.Pins(), MinMembers: c.cfg.CSPs, MinThreshold: c.cfg.Threshold}
}

// OwnerRefs names owners as a job's owner list does: by ID and the key of
// the cluster's certificate of each (in insecure mode, none), or, for an
// owner the cluster issued no certificate, a stand-in key.
func (c *Cluster) OwnerRefs(ids ...string) []*fedpcav1.OwnerRef {
	var out []job.Owner
	for _, id := range ids {
		o := job.Owner{ID: id}
		if !c.cfg.Insecure {
			o.Key = job.Fingerprint([]byte(id))
			if cr := c.creds["owner/"+id]; cr != nil {
				o.Key = cr.Key
			}
		}
		out = append(out, o)
	}
	return transport.OwnerRefs(out)
}

// ForgeCredentials is what whoever holds a CA of the cluster can make:
// the CA of holder's organisation ("role/id": in a single-CA cluster the
// one CA, whatever the holder) issues a certificate naming the identity
// (in that organisation's domain) for a fresh key. The credentials trust
// what the holder's organisation trusts, without the roster (which names
// the real keys). For tests of deviating CA holders.
func (c *Cluster) ForgeCredentials(holder string, id transport.Identity) (*transport.Credentials, error) {
	org := c.orgs[holder]
	if org == nil {
		return nil, fmt.Errorf("sim: no organisation issued %s (an insecure cluster has none)", holder)
	}
	ca, err := transport.LoadCA(filepath.Join(org.Dir, "ca"))
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue(id, nil, nil, nil, time.Hour)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	trust, err := org.Trust()
	if err != nil {
		return nil, err
	}
	var domains []transport.Domain
	for _, d := range trust.Domains {
		d.Nodes = nil
		domains = append(domains, d)
	}
	if trust, err = transport.NewTrust(domains...); err != nil {
		return nil, err
	}
	return transport.NewCredentialsTrust(trust, pair)
}

// Pins are the cluster's committee members by key (by name in insecure
// mode).
func (c *Cluster) Pins() []job.MemberPin {
	pins := make([]job.MemberPin, c.cfg.CSPs)
	for i := range pins {
		pins[i].ID = CSPID(i)
		if cr := c.creds["csp/"+CSPID(i)]; cr != nil {
			pins[i].Key = cr.Key
		}
	}
	return pins
}

// probe is the identity the cluster uses to ask a proxy process whether the
// committee key is ready.
var probe = transport.Identity{Role: transport.RoleUser, ID: "sim-probe"}

// WaitCommittee waits until the proxy publishes the committee key.
func (c *Cluster) WaitCommittee(ctx context.Context) error {
	var client fedpcav1.ProxyServiceClient
	p := c.Proxy()
	if p == nil {
		conn, err := c.DialerAs(probe, probe.Short(), false).Dial(c.ProxyAddr(), transport.Identity{Role: transport.RoleProxy})
		if err != nil {
			return err
		}
		defer conn.Close()
		client = fedpcav1.NewProxyServiceClient(conn)
	}
	for {
		if p != nil && p.CommitteeReady() {
			return nil
		}
		if client != nil {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := client.GetCommittee(cctx, &fedpcav1.GetCommitteeRequest{})
			cancel()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("committee key not ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop stops every node.
func (c *Cluster) Stop() {
	c.stopExternal()
	c.mu.Lock()
	var names []string
	for n := range c.nodes {
		names = append(names, n)
	}
	c.mu.Unlock()
	// Owners first, the committee last.
	order := func(n string) int {
		switch {
		case strings.HasPrefix(n, "owner/"):
			return 0
		case strings.HasPrefix(n, "proxy/"):
			return 1
		}
		return 2
	}
	for pass := range 3 {
		for _, n := range names {
			if order(n) == pass {
				_ = c.stopNode(n)
			}
		}
	}
}

// Creds returns a node's credentials ("role/id").
func (c *Cluster) Creds(id string) *transport.Credentials { return c.creds[id] }

// Dialer returns a node's dialer ("role/id"), for tests that call services
// directly.
func (c *Cluster) Dialer(id string) (transport.Dialer, error) {
	in, err := transport.ParseIdentity(id)
	if err != nil {
		return transport.Dialer{}, err
	}
	return c.dialer(in), nil
}

// DialProxy connects to the proxy as node id (for example
// "owner/hospital-z", an identity the cluster made) and returns the
// connection, which the caller closes, and the node's dialer.
func (c *Cluster) DialProxy(id string) (*grpc.ClientConn, transport.Dialer, error) {
	d, err := c.Dialer(id)
	if err != nil {
		return nil, d, err
	}
	conn, err := d.Dial(c.ProxyAddr(), transport.Identity{Role: transport.RoleProxy})
	return conn, d, err
}

// OwnerPolicy is the policy of simulated owners: any user, no per-job limit,
// and jobs without noise only when asked; the cluster sets its committee
// policy (Cluster.Policy). Exact components jobs, when a simulation allows
// them, are not counted (a simulator runs them back to back, as it gives
// its owners budgets no deployment would), but their k is the owners'
// default cap, half the features.
func OwnerPolicy(allowNoNoise bool) owner.Policy {
	return owner.Policy{AllowNoNoise: allowNoNoise, Exact: owner.ExactRule{Jobs: 1 << 30, Period: owner.DefaultExactPeriod}, AllowDealer: true}
}
