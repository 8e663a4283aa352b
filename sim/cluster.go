// Package sim runs a whole fedpca deployment in one process: the real role
// packages (csp, proxy, owner, user) over in-memory gRPC (bufconn) or
// loopback TCP, with real mutual TLS from a freshly made CA. Tests, `fedpca
// simulate` and `fedpca demo` use it, so what they measure is what the
// daemons do.
//
// Every connection goes through a Network, a seeded fault injector (drop,
// delay and duplicate messages, partition nodes, crash them); RunChaos
// (`fedpca simulate chaos`, `make chaos`) runs many jobs under random faults
// from a seed and checks the system's invariants after every one.
package sim

import (
	"context"
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
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/proxy"
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
}

// Config configures a cluster.
type Config struct {
	// Dir holds the certificates and every node's state.
	Dir       string
	CSPs      int
	Threshold int
	Owners    []OwnerConfig
	Users     []string
	// Identities are further "role/id" certificates to make, for nodes a
	// test drives by hand.
	Identities []string
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
	// Binary is the fedpca executable, for nodes run as processes:
	// ProxyProcess runs the proxy as a separate process (its peak memory is
	// then measurable) and OwnerFarms > 0 runs the owners in that many child
	// processes. Both need TCP.
	Binary       string
	ProxyProcess bool
	OwnerFarms   int
	// ProxyMemoryLimit, if set, is the proxy process's GOMEMLIMIT;
	// ProxyMaxConnections its --max-connections and ProxyMaxWatchers its
	// --max-watchers (0: the proxy's defaults).
	ProxyMemoryLimit    string
	ProxyMaxConnections int
	ProxyMaxWatchers    int
	// Network carries every connection of the in-process nodes (default:
	// one without faults); the chaos driver injects faults through it.
	Network *Network
	// SwitchTimeout is the proxy's (see proxy.Config; default 24 h).
	SwitchTimeout time.Duration
	// ProxyServerOptions are added to the in-process proxy's gRPC server
	// (a deviating proxy's interceptor).
	ProxyServerOptions []grpc.ServerOption
}

// Cluster is a running deployment.
type Cluster struct {
	cfg    Config
	params he.Params
	log    hclog.Logger
	creds  map[string]*transport.Credentials // by "role/id"

	mu        sync.Mutex
	listeners map[string]*bufconn.Listener // bufconn address -> listener
	nodes     map[string]*node
	Owners    map[string]*owner.Owner
	Proxy     *proxy.Proxy
	CSPs      []*csp.CSP
	ProxyAddr string
	CSPAddrs  []string
	proxyProc *child
	farms     []*child
	net       *Network
	addrs     map[string]string // node -> TCP address, kept across restarts
	ownerCfg  map[string]OwnerConfig
	bridges   []*bridge // proxy process -> committee members
	// proxyMetrics is the in-process proxy's registry; proxyMetricsAddr
	// the /metrics address of a proxy process.
	proxyMetrics     *transport.Metrics
	proxyMetricsAddr string
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
		cfg.CSPs = 1
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
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Network == nil {
		cfg.Network = NewNetwork(0)
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, creds: map[string]*transport.Credentials{}, listeners: map[string]*bufconn.Listener{},
		nodes: map[string]*node{}, Owners: map[string]*owner.Owner{}, net: cfg.Network, addrs: map[string]string{}, ownerCfg: map[string]OwnerConfig{}}
	var err error
	if c.params, err = he.ParamsOr(cfg.Params); err != nil {
		return nil, err
	}
	if err := c.makeCerts(); err != nil {
		return nil, err
	}
	for i := range cfg.CSPs {
		c.CSPAddrs = append(c.CSPAddrs, "")
		c.CSPs = append(c.CSPs, nil)
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

func cspID(i int) string { return fmt.Sprintf("csp-%d", i+1) }

func (c *Cluster) makeCerts() error {
	if c.cfg.Insecure {
		return nil
	}
	ca, err := transport.NewCA("fedpca simulation CA", 24*time.Hour)
	if err != nil {
		return err
	}
	ids := []transport.Identity{{Role: transport.RoleProxy, ID: "proxy"}, probe}
	for i := range c.cfg.CSPs {
		ids = append(ids, transport.Identity{Role: transport.RoleCSP, ID: cspID(i)})
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
	for _, id := range ids {
		dir := filepath.Join(c.cfg.Dir, "certs", id.Role+"-"+id.ID)
		if err := ca.WriteNode(dir, id, nil, nil, nil, 24*time.Hour); err != nil {
			return err
		}
		cr, err := transport.LoadCredentials(dir)
		if err != nil {
			return err
		}
		c.creds[id.Short()] = cr
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
	c.net.register(addr, node)
	return c.net.Listen(node, l), addr, nil
}

// dialer returns the dialer of a node: its connections go through the
// network, with its faults.
func (c *Cluster) dialer(id transport.Identity) transport.Dialer {
	return c.dialerAs(id, id.Short(), true)
}

// dialerAs returns a dialer with a node's credentials whose connections
// count as those of the named node, with or without message faults.
func (c *Cluster) dialerAs(id transport.Identity, node string, faults bool) transport.Dialer {
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

// run starts a role's Run in a goroutine under its own cancel function.
func (c *Cluster) run(name string, fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{cancel: cancel, done: make(chan error, 1)}
	c.mu.Lock()
	c.nodes[name] = n
	c.mu.Unlock()
	go func() { n.done <- fn(ctx) }()
}

// take removes a node from the running ones (nil if it is not running).
func (c *Cluster) take(name string) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	delete(c.nodes, name)
	return n
}

// stopNode stops a node gracefully and waits for it.
func (c *Cluster) stopNode(name string) error {
	n := c.take(name)
	if n == nil {
		return nil
	}
	n.cancel()
	return <-n.done
}

// crash stops an in-process node as abruptly as one process allows: its
// listener and every connection it holds are closed at once, so nothing it
// does from then on reaches anyone (responses in flight are lost); then its
// Run is cancelled without waiting for anything to drain, and awaited only
// because its state files must be closed before a restart opens them. A
// transaction already running may still commit, as it would have had the
// crash come a moment later; none can be acknowledged.
func (c *Cluster) crash(name string) error {
	c.net.Crash(name)
	n := c.take(name)
	if n == nil {
		return nil
	}
	n.cancel()
	select {
	case <-n.done:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("sim: %s did not stop within a minute of its crash", name)
	}
}

// CrashProxy crashes the proxy: SIGKILL when it runs as a process.
func (c *Cluster) CrashProxy() error {
	c.mu.Lock()
	proc := c.proxyProc
	c.mu.Unlock()
	if proc != nil {
		return c.KillProxy()
	}
	return c.crash("proxy/proxy")
}

// RestartProxy starts the proxy again (as a process if it ran as one), at
// its former address and with its state.
func (c *Cluster) RestartProxy() error {
	if c.cfg.ProxyProcess {
		return c.startProxyProcess()
	}
	return c.StartProxy()
}

// CrashCSP crashes member i.
func (c *Cluster) CrashCSP(i int) error { return c.crash("csp/" + cspID(i)) }

// CrashOwner crashes an owner.
func (c *Cluster) CrashOwner(id string) error { return c.crash("owner/" + id) }

// RestartOwner starts a stopped or crashed owner again with its state.
func (c *Cluster) RestartOwner(id string) error {
	c.mu.Lock()
	oc, ok := c.ownerCfg[id]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("sim: no owner %q", id)
	}
	return c.StartOwner(oc)
}

// CSP returns member i (the running instance).
func (c *Cluster) CSP(i int) *csp.CSP {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.CSPs[i]
}

// Owner returns an owner (the running instance, or the last one).
func (c *Cluster) Owner(id string) *owner.Owner {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Owners[id]
}

// Network returns the network the nodes talk through.
func (c *Cluster) Network() *Network { return c.net }

// StartCSP starts (or restarts) member i with its state directory.
func (c *Cluster) StartCSP(i int) error {
	id := transport.Identity{Role: transport.RoleCSP, ID: cspID(i)}
	l, addr, err := c.listen(id)
	if err != nil {
		return err
	}
	m, err := csp.New(csp.Config{ID: id.ID, Listener: l, Creds: c.creds[id.Short()], Insecure: c.cfg.Insecure,
		Store: filepath.Join(c.cfg.Dir, "state", id.ID), AllowNoNoise: c.cfg.AllowNoNoise,
		Logger: c.log.Named("csp").With("id", id.ID), Params: &c.params})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.CSPs[i], c.CSPAddrs[i] = m, addr
	c.mu.Unlock()
	c.run(id.Short(), m.Run)
	return nil
}

// StopCSP stops member i.
func (c *Cluster) StopCSP(i int) error { return c.stopNode("csp/" + cspID(i)) }

// StartProxy starts (or restarts) the proxy with its state directory.
func (c *Cluster) StartProxy() error {
	id := transport.Identity{Role: transport.RoleProxy, ID: "proxy"}
	l, addr, err := c.listen(id)
	if err != nil {
		return err
	}
	members := make([]proxy.Member, c.cfg.CSPs)
	for i := range members {
		members[i] = proxy.Member{ID: cspID(i), Addr: c.CSPAddrs[i]}
	}
	m := transport.NewMetrics()
	p, err := proxy.New(proxy.Config{ID: id.ID, Listener: l, Creds: c.creds[id.Short()], Insecure: c.cfg.Insecure, Metrics: m,
		Dialer: c.dialer(id), Store: filepath.Join(c.cfg.Dir, "state", "proxy"), Committee: members, Threshold: c.cfg.Threshold,
		AllowNoNoise: c.cfg.AllowNoNoise, RetryInterval: c.cfg.RetryInterval, Logger: c.log.Named("proxy"), Params: &c.params,
		MaxConnections: c.cfg.ProxyMaxConnections, MaxWatchers: c.cfg.ProxyMaxWatchers, SwitchTimeout: c.cfg.SwitchTimeout, ServerOptions: c.cfg.ProxyServerOptions})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.Proxy, c.ProxyAddr, c.proxyMetrics = p, addr, m
	c.mu.Unlock()
	c.run("proxy/proxy", p.Run)
	return nil
}

// StopProxy stops the proxy gracefully.
func (c *Cluster) StopProxy() error { return c.stopNode("proxy/proxy") }

// StartOwner starts (or restarts) an owner.
func (c *Cluster) StartOwner(oc OwnerConfig) error {
	id := transport.Identity{Role: transport.RoleOwner, ID: oc.ID}
	if oc.Epsilon == 0 {
		oc.Epsilon, oc.Delta = 100, 1e-6
	}
	data, open := oc.CSV, oc.Open
	if open == nil && oc.Source == "" {
		open = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(data))), nil }
	}
	c.mu.Lock()
	c.ownerCfg[oc.ID] = oc
	c.mu.Unlock()
	c.net.Up(id.Short())
	o, err := owner.New(owner.Config{ID: oc.ID, Dialer: c.dialer(id), ProxyAddr: c.ProxyAddr,
		Store: filepath.Join(c.cfg.Dir, "state", "owner-"+oc.ID), Policy: oc.Policy,
		Datasets: []*owner.Dataset{{Schema: oc.Schema, Epsilon: oc.Epsilon, Delta: oc.Delta,
			Open: open, Source: oc.Source}},
		PollInterval: c.cfg.PollInterval, IdleTimeout: c.cfg.IdleTimeout, Logger: c.log.Named("owner").With("id", oc.ID), Params: &c.params})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.Owners[oc.ID] = o
	c.mu.Unlock()
	c.run(id.Short(), o.Run)
	return nil
}

// StopOwner stops an owner.
func (c *Cluster) StopOwner(id string) error { return c.stopNode("owner/" + id) }

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
	return user.NewClient(user.Config{Dialer: c.dialer(uid), ProxyAddr: c.ProxyAddr, Keys: kp, Logger: c.log.Named("user"), Params: &c.params})
}

// probe is the identity the cluster uses to ask a proxy process whether the
// committee key is ready.
var probe = transport.Identity{Role: transport.RoleUser, ID: "sim-probe"}

// WaitCommittee waits until the proxy publishes the committee key.
func (c *Cluster) WaitCommittee(ctx context.Context) error {
	var client fedpcav1.ProxyServiceClient
	if c.Proxy == nil {
		conn, err := c.dialerAs(probe, probe.Short(), false).Dial(c.ProxyAddr, transport.Identity{Role: transport.RoleProxy})
		if err != nil {
			return err
		}
		defer conn.Close()
		client = fedpcav1.NewProxyServiceClient(conn)
	}
	for {
		if c.Proxy != nil && c.Proxy.CommitteeReady() {
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
	c.mu.Lock()
	farms, proc := c.farms, c.proxyProc
	c.farms, c.proxyProc = nil, nil
	c.mu.Unlock()
	for _, f := range farms {
		f.stop()
	}
	proc.stop()
	c.mu.Lock()
	bridges := c.bridges
	c.bridges = nil
	c.mu.Unlock()
	for _, b := range bridges {
		b.close()
	}
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

// OwnerPolicy is the policy of simulated owners: any user, no per-job limit,
// and jobs without noise only when asked.
func OwnerPolicy(allowNoNoise bool) owner.Policy { return owner.Policy{AllowNoNoise: allowNoNoise} }
