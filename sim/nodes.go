package sim

// Starting, stopping, crashing and restarting the nodes that run in this
// process.

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/fedpca/fedpca/csp"
	"github.com/fedpca/fedpca/owner"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/transport"
)

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
	proc := c.ext.proxy
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
func (c *Cluster) CrashCSP(i int) error { return c.crash("csp/" + CSPID(i)) }

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

// StartCSP starts (or restarts) member i with its state directory.
func (c *Cluster) StartCSP(i int) error {
	id := transport.Identity{Role: transport.RoleCSP, ID: CSPID(i)}
	l, addr, err := c.listen(id)
	if err != nil {
		return err
	}
	m, err := csp.New(csp.Config{ID: id.ID, Listener: l, Creds: c.creds[id.Short()], Insecure: c.cfg.Insecure,
		Store: filepath.Join(c.cfg.Dir, "state", id.ID), AllowNoNoise: c.cfg.AllowNoNoise,
		Logger: c.log.Named("csp").With("id", id.ID), Params: &c.params})
	if err != nil {
		l.Close()
		return err
	}
	c.mu.Lock()
	c.csps[i], c.cspAddrs[i] = m, addr
	c.mu.Unlock()
	c.run(id.Short(), m.Run)
	return nil
}

// StopCSP stops member i.
func (c *Cluster) StopCSP(i int) error { return c.stopNode("csp/" + CSPID(i)) }

// StartProxy starts (or restarts) the proxy with its state directory.
func (c *Cluster) StartProxy() error {
	id := transport.Identity{Role: transport.RoleProxy, ID: "proxy"}
	l, addr, err := c.listen(id)
	if err != nil {
		return err
	}
	members := make([]proxy.Member, c.cfg.CSPs)
	for i := range members {
		members[i] = proxy.Member{ID: CSPID(i), Addr: c.CSPAddr(i)}
	}
	m := transport.NewMetrics()
	d := c.dialer(id)
	d.Options = append(d.Options, c.cfg.ProxyDialOptions...)
	p, err := proxy.New(proxy.Config{ID: id.ID, Listener: l, Creds: c.creds[id.Short()], Insecure: c.cfg.Insecure, Metrics: m,
		Dialer: d, Store: filepath.Join(c.cfg.Dir, "state", "proxy"), Committee: members, Threshold: c.cfg.Threshold,
		AllowNoNoise: c.cfg.AllowNoNoise, RetryInterval: c.cfg.RetryInterval, Logger: c.log.Named("proxy"), Params: &c.params,
		MaxConnections: c.cfg.ProxyMaxConnections, MaxWatchers: c.cfg.ProxyMaxWatchers, SwitchTimeout: c.cfg.SwitchTimeout, ProgressInterval: c.cfg.ProgressInterval, ServerOptions: c.cfg.ProxyServerOptions,
		StatusListener: c.cfg.ProxyStatusListener, MetricsListener: c.cfg.ProxyMetricsListener})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.proxy, c.proxyAddr, c.proxyMetrics = p, addr, m
	c.mu.Unlock()
	c.run("proxy/proxy", p.Run)
	return nil
}

// StopProxy stops the proxy gracefully.
func (c *Cluster) StopProxy() error { return c.stopNode("proxy/proxy") }

// StartOwner starts (or restarts) an owner.
func (c *Cluster) StartOwner(oc OwnerConfig) error {
	id := transport.Identity{Role: transport.RoleOwner, ID: oc.ID}
	oc.Epsilon, oc.Delta = oc.budget()
	data, open := oc.CSV, oc.Open
	if open == nil && oc.Source == "" {
		open = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(data))), nil }
	}
	if isZero(oc.Policy.Committee) {
		oc.Policy.Committee = c.Policy()
	}
	c.mu.Lock()
	c.ownerCfg[oc.ID] = oc
	c.mu.Unlock()
	c.net.Up(id.Short())
	m := transport.NewMetrics()
	o, err := owner.New(owner.Config{ID: oc.ID, Dialer: c.dialer(id), ProxyAddr: c.ProxyAddr(), Metrics: m,
		Store: filepath.Join(c.cfg.Dir, "state", "owner-"+oc.ID), Policy: oc.Policy,
		Datasets: []*owner.Dataset{{Schema: oc.Schema, Epsilon: oc.Epsilon, Delta: oc.Delta,
			Open: open, Source: oc.Source}},
		PollInterval: c.cfg.PollInterval, IdleTimeout: c.cfg.IdleTimeout, Logger: c.log.Named("owner").With("id", oc.ID), Params: &c.params,
		UploadHold: oc.UploadHold})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.owners[oc.ID], c.ownerMetrics[oc.ID] = o, m
	c.mu.Unlock()
	c.run(id.Short(), o.Run)
	return nil
}

// StopOwner stops an owner.
func (c *Cluster) StopOwner(id string) error { return c.stopNode("owner/" + id) }

// isZero reports an unset committee policy.
func isZero(p job.CommitteePolicy) bool {
	return len(p.Members) == 0 && !p.AnyMembers && p.MinMembers == 0 && p.MinThreshold == 0
}
