package sim

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/sim/faultnet"
	"github.com/fedpca/fedpca/transport"
)

// Launcher runs nodes as separate processes (package sim/procs has the one
// that runs the fedpca binary). The cluster asks it for the proxy when
// Config.ProxyProcess is set and for the owners when Config.OwnerFarms > 0;
// it hands it typed node specs and never builds a command line.
type Launcher interface {
	// Proxy starts the proxy.
	Proxy(ProxyNode) (Process, error)
	// Owners starts a farm: owners run together in one process.
	Owners(Farm) (Process, error)
}

// Process is a node (or farm) run as a separate process.
type Process interface {
	// MetricsAddr is the host:port of its Prometheus /metrics.
	MetricsAddr() string
	// Stop stops it gracefully and waits; Kill kills it (SIGKILL) and
	// waits.
	Stop()
	Kill()
}

// Node is what every node run as a process needs: its name in the
// cluster's directory, its identity and its credentials, its state and its
// HE parameters.
type Node struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	Certs    string `json:"certs,omitempty"` // directory of its certificate (empty with Insecure)
	Insecure bool   `json:"insecure,omitempty"`
	State    string `json:"state"`
	Dir      string `json:"dir"` // the cluster's directory: logs and configs go there
}

// ProxyNode is the proxy run as a process.
type ProxyNode struct {
	Node
	Listen         string         `json:"listen"`
	Committee      []proxy.Member `json:"committee"`
	Threshold      int            `json:"threshold"`
	AllowNoNoise   bool           `json:"allow_no_noise,omitempty"`
	MaxConnections int            `json:"max_connections,omitempty"`
	MaxWatchers    int            `json:"max_watchers,omitempty"`
	SwitchTimeout  time.Duration  `json:"switch_timeout,omitempty"`
	// ProgressInterval is the proxy's (see proxy.Config).
	ProgressInterval time.Duration `json:"progress_interval,omitempty"`
}

// Farm is owners run in one process (the benchmarks' way around
// per-process file descriptor limits). Each owner's series on the farm's
// /metrics carry its ID in the label owner.
type Farm struct {
	Name     string        `json:"name"`
	Dir      string        `json:"dir"`
	Proxy    string        `json:"proxy"`
	Insecure bool          `json:"insecure,omitempty"`
	Poll     time.Duration `json:"poll"`
	Idle     time.Duration `json:"idle_timeout"`
	Certs    string        `json:"certs"` // directory of the owner-ID certificate directories
	State    string        `json:"state"` // directory of the owner-ID state directories
	Owners   []FarmOwner   `json:"owners"`
	// Committee is the owners' committee policy.
	Committee job.CommitteePolicy `json:"committee"`
}

// FarmOwner is one owner of a farm: its rows and schema as files.
type FarmOwner struct {
	ID           string  `json:"id"`
	Schema       string  `json:"schema"`
	CSV          string  `json:"csv"`
	Epsilon      float64 `json:"epsilon"`
	Delta        float64 `json:"delta"`
	AllowNoNoise bool    `json:"allow_no_noise"`
	// AllowExactComponents is the owner's (owner.Policy).
	AllowExactComponents bool `json:"allow_exact_components,omitempty"`
}

// external are the cluster's nodes run as processes.
type external struct {
	proxy   Process
	farms   []Process
	bridges []*faultnet.Bridge // proxy process -> committee members
}

func (c *Cluster) certsDir(id transport.Identity) string {
	if c.cfg.Insecure {
		return ""
	}
	return filepath.Join(c.cfg.Dir, "certs", id.Role+"-"+id.ID)
}

// startProxyProcess runs the proxy as a process (a restarted one at its
// former address). It reaches the committee members through bridges, so
// that the network can partition it from them.
func (c *Cluster) startProxyProcess() error {
	if c.cfg.Processes == nil {
		return errors.New("sim: running the proxy as a process needs Config.Processes")
	}
	id := transport.Identity{Role: transport.RoleProxy, ID: "proxy"}
	c.mu.Lock()
	addr := c.addrs[id.Short()]
	c.mu.Unlock()
	if addr == "" {
		var err error
		if addr, err = FreeAddr(); err != nil {
			return err
		}
	}
	if err := c.bridgeCommittee(id.Short()); err != nil {
		return err
	}
	spec := ProxyNode{Node: Node{Name: "proxy", ID: id.ID, Certs: c.certsDir(id), Insecure: c.cfg.Insecure,
		State: filepath.Join(c.cfg.Dir, "state", "proxy"), Dir: c.cfg.Dir},
		Listen: addr, Threshold: c.cfg.Threshold, AllowNoNoise: c.cfg.AllowNoNoise,
		MaxConnections: c.cfg.ProxyMaxConnections, MaxWatchers: c.cfg.ProxyMaxWatchers, SwitchTimeout: c.cfg.SwitchTimeout,
		ProgressInterval: c.cfg.ProgressInterval}
	c.mu.Lock()
	for i, b := range c.ext.bridges {
		spec.Committee = append(spec.Committee, proxy.Member{ID: CSPID(i), Addr: b.Addr()})
	}
	c.mu.Unlock()
	p, err := c.cfg.Processes.Proxy(spec)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.ext.proxy, c.proxyAddr = p, addr
	c.addrs[id.Short()] = addr
	c.mu.Unlock()
	c.net.Register(addr, id.Short())
	return nil
}

// bridgeCommittee makes (once) a bridge from the proxy process to each
// member, following the member's address across its restarts.
func (c *Cluster) bridgeCommittee(from string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ext.bridges) > 0 {
		return nil
	}
	for i := range c.cspAddrs {
		b, err := c.net.NewBridge(from, "csp/"+CSPID(i), func() string {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.cspAddrs[i]
		})
		if err != nil {
			return err
		}
		c.ext.bridges = append(c.ext.bridges, b)
	}
	return nil
}

// KillProxy kills a proxy process with SIGKILL.
func (c *Cluster) KillProxy() error {
	c.mu.Lock()
	p := c.ext.proxy
	c.ext.proxy = nil
	c.mu.Unlock()
	if p == nil {
		return errors.New("the proxy does not run as a separate process")
	}
	p.Kill()
	return nil
}

// stopExternal stops the processes and the bridges.
func (c *Cluster) stopExternal() {
	c.mu.Lock()
	ext := c.ext
	c.ext = external{}
	c.mu.Unlock()
	for _, f := range ext.farms {
		f.Stop()
	}
	if ext.proxy != nil {
		ext.proxy.Stop()
	}
	for _, b := range ext.bridges {
		b.Close()
	}
}

// startFarms writes the owners' data and runs them in OwnerFarms farms.
func (c *Cluster) startFarms(owners []OwnerConfig) error {
	if c.cfg.Processes == nil {
		return errors.New("sim: owner farms need Config.Processes")
	}
	n := c.cfg.OwnerFarms
	data := filepath.Join(c.cfg.Dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	schemas := map[any]string{}
	farms := make([]Farm, n)
	for i := range farms {
		farms[i] = Farm{Name: fmt.Sprintf("farm-%d", i), Dir: c.cfg.Dir, Proxy: c.ProxyAddr(), Insecure: c.cfg.Insecure, Poll: c.cfg.PollInterval,
			Idle: c.cfg.IdleTimeout, Certs: filepath.Join(c.cfg.Dir, "certs"), State: filepath.Join(c.cfg.Dir, "state"), Committee: c.Policy()}
	}
	for i, oc := range owners {
		sp, ok := schemas[oc.Schema]
		if !ok {
			sp = filepath.Join(data, fmt.Sprintf("schema-%d.json", len(schemas)))
			if err := os.WriteFile(sp, oc.Schema.Canonical(), 0o600); err != nil {
				return err
			}
			schemas[oc.Schema] = sp
		}
		csv := filepath.Join(data, oc.ID+".csv")
		if err := os.WriteFile(csv, oc.CSV, 0o600); err != nil {
			return err
		}
		eps, delta := oc.budget()
		farms[i%n].Owners = append(farms[i%n].Owners, FarmOwner{ID: oc.ID, Schema: sp, CSV: csv, Epsilon: eps, Delta: delta, AllowNoNoise: oc.Policy.AllowNoNoise,
			AllowExactComponents: oc.Policy.AllowExactComponents})
	}
	var started []Process
	for _, f := range farms {
		p, err := c.cfg.Processes.Owners(f)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.ext.farms = append(c.ext.farms, p)
		c.mu.Unlock()
		started = append(started, p)
	}
	// A farm is up once it serves its /metrics (read by every job's
	// report): a job run before could not read its owners' share times.
	for _, p := range started {
		if err := waitListening(p.MetricsAddr(), time.Minute); err != nil {
			return fmt.Errorf("owner farm: %w", err)
		}
	}
	return nil
}

// waitListening waits until addr accepts TCP connections, or for at most
// limit.
func waitListening(addr string, limit time.Duration) error {
	end := time.Now().Add(limit)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(end) {
			return fmt.Errorf("nothing listens at %s after %s: %w", addr, limit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FreeAddr returns a loopback address free at the time of the call.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
