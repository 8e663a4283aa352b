// Package sim runs a whole fedpca deployment in one process: the real role
// packages (csp, proxy, owner, user) over in-memory gRPC (bufconn) or
// loopback TCP, with real mutual TLS from a freshly made CA. Tests, `fedpca
// simulate` and `fedpca demo` use it, so what they measure is what the
// daemons do.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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
	// CSV holds the owner's rows (with a header).
	CSV []byte
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
	// ProxyMaxConnections its --max-connections.
	ProxyMemoryLimit    string
	ProxyMaxConnections int
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
	c := &Cluster{cfg: cfg, log: cfg.Logger, creds: map[string]*transport.Credentials{}, listeners: map[string]*bufconn.Listener{},
		nodes: map[string]*node{}, Owners: map[string]*owner.Owner{}}
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

// listen returns a listener and the address to dial it.
func (c *Cluster) listen(name string) (net.Listener, string, error) {
	if c.cfg.TCP {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, "", err
		}
		return l, l.Addr().String(), nil
	}
	l := bufconn.Listen(4 << 20)
	c.mu.Lock()
	c.listeners[name] = l
	c.mu.Unlock()
	return l, "passthrough:///" + name, nil
}

// dialer returns the dialer of a node.
func (c *Cluster) dialer(id transport.Identity) transport.Dialer {
	d := transport.Dialer{Creds: c.creds[id.Short()], Insecure: c.cfg.Insecure, Self: id}
	if !c.cfg.TCP {
		d.Options = append(d.Options, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			name := strings.TrimPrefix(addr, "passthrough:///")
			c.mu.Lock()
			l := c.listeners[name]
			c.mu.Unlock()
			if l == nil {
				return nil, fmt.Errorf("sim: no node listening at %q", name)
			}
			return l.DialContext(ctx)
		}))
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

// stopNode stops a node gracefully and waits for it.
func (c *Cluster) stopNode(name string) error {
	c.mu.Lock()
	n := c.nodes[name]
	delete(c.nodes, name)
	c.mu.Unlock()
	if n == nil {
		return nil
	}
	n.cancel()
	return <-n.done
}

// StartCSP starts (or restarts) member i with its state directory.
func (c *Cluster) StartCSP(i int) error {
	id := transport.Identity{Role: transport.RoleCSP, ID: cspID(i)}
	l, addr, err := c.listen(id.ID)
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
	l, addr, err := c.listen("proxy")
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
		MaxConnections: c.cfg.ProxyMaxConnections})
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
	data := oc.CSV
	o, err := owner.New(owner.Config{ID: oc.ID, Dialer: c.dialer(id), ProxyAddr: c.ProxyAddr,
		Store: filepath.Join(c.cfg.Dir, "state", "owner-"+oc.ID), Policy: oc.Policy,
		Datasets: []*owner.Dataset{{Schema: oc.Schema, Epsilon: oc.Epsilon, Delta: oc.Delta,
			Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(data))), nil }}},
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
	if errors.Is(err, os.ErrNotExist) || (err != nil && strings.Contains(err.Error(), "keygen")) {
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
		conn, err := c.dialer(probe).Dial(c.ProxyAddr, transport.Identity{Role: transport.RoleProxy})
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
