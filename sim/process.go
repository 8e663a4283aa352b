package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fedpca/fedpca/owner"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
)

// child is a node run as a separate process of the fedpca binary.
type child struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startChild runs the fedpca binary with args, its output going to a log
// file in the cluster's directory.
func (c *Cluster) startChild(name string, args ...string) (*child, error) {
	return c.startChildEnv(name, nil, args...)
}

func (c *Cluster) startChildEnv(name string, env []string, args ...string) (*child, error) {
	if c.cfg.Binary == "" {
		return nil, errors.New("sim: running nodes as processes needs Config.Binary")
	}
	logPath := filepath.Join(c.cfg.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	ch := &child{cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { ch.done <- cmd.Wait(); f.Close() }()
	return ch, nil
}

// stop sends SIGTERM and waits (SIGKILL after a timeout).
func (ch *child) stop() {
	if ch == nil {
		return
	}
	_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch.done:
	case <-time.After(20 * time.Second):
		_ = ch.cmd.Process.Kill()
		<-ch.done
	}
}

// kill sends SIGKILL and waits.
func (ch *child) kill() {
	_ = ch.cmd.Process.Kill()
	<-ch.done
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func (ch *child) peakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ch.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

func (c *Cluster) nodeArgs(id transport.Identity) []string {
	if c.cfg.Insecure {
		return []string{"--insecure", "--id", id.ID}
	}
	return []string{"--certs", filepath.Join(c.cfg.Dir, "certs", id.Role+"-"+id.ID)}
}

// startProxyProcess runs the proxy as a process of the fedpca binary (a
// restarted one at its former address). It reaches the committee members
// through bridges, so that the network can partition it from them.
func (c *Cluster) startProxyProcess() error {
	id := transport.Identity{Role: transport.RoleProxy, ID: "proxy"}
	c.mu.Lock()
	addr := c.addrs[id.Short()]
	c.mu.Unlock()
	if addr == "" {
		var err error
		if addr, err = freeAddr(); err != nil {
			return err
		}
	}
	if err := c.bridgeCommittee(id.Short()); err != nil {
		return err
	}
	args := append([]string{"proxy", "serve"}, c.nodeArgs(id)...)
	maddr, err := freeAddr()
	if err != nil {
		return err
	}
	args = append(args, "--state", filepath.Join(c.cfg.Dir, "state", "proxy"), "--listen", addr, "--threshold", strconv.Itoa(c.cfg.Threshold),
		"--metrics-listen", maddr, "--log-json")
	if c.cfg.AllowNoNoise {
		args = append(args, "--allow-no-noise")
	}
	if c.cfg.ProxyMaxConnections > 0 {
		args = append(args, "--max-connections", strconv.Itoa(c.cfg.ProxyMaxConnections))
	}
	if c.cfg.ProxyMaxWatchers > 0 {
		args = append(args, "--max-watchers", strconv.Itoa(c.cfg.ProxyMaxWatchers))
	}
	c.mu.Lock()
	for i, b := range c.bridges {
		args = append(args, "--csp", CSPID(i)+"="+b.Addr())
	}
	c.mu.Unlock()
	if c.cfg.SwitchTimeout > 0 {
		args = append(args, "--switch-timeout", c.cfg.SwitchTimeout.String())
	}
	var env []string
	if c.cfg.ProxyMemoryLimit != "" {
		env = []string{"GOMEMLIMIT=" + c.cfg.ProxyMemoryLimit}
	}
	ch, err := c.startChildEnv("proxy", env, args...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.proxyProc, c.ProxyAddr, c.proxyMetricsAddr = ch, addr, maddr
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
	if len(c.bridges) > 0 {
		return nil
	}
	for i := range c.CSPAddrs {
		b, err := c.net.NewBridge(from, "csp/"+CSPID(i), func() string {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.CSPAddrs[i]
		})
		if err != nil {
			return err
		}
		c.bridges = append(c.bridges, b)
	}
	return nil
}

// ProxyTraffic returns the payload bytes each role sent and received, as
// the proxy counted them: every byte of the protocol passes through it
// (owners and users talk only to the proxy, and so do CSP members).
func (c *Cluster) ProxyTraffic() (map[string]Traffic, error) {
	c.mu.Lock()
	m, addr := c.proxyMetrics, c.proxyMetricsAddr
	c.mu.Unlock()
	var samples map[string]float64
	var err error
	if m != nil {
		samples, err = transport.Scrape(m.Registry, "fedpca_grpc_payload_bytes_total")
	} else {
		samples, err = scrapeHTTP("http://"+addr+"/metrics", "fedpca_grpc_payload_bytes_total")
	}
	if err != nil {
		return nil, err
	}
	out := map[string]Traffic{}
	var proxy Traffic
	for labels, v := range samples {
		var dir, role string
		for _, kv := range strings.Split(labels, ",") {
			k, val, _ := strings.Cut(kv, "=")
			switch k {
			case "direction":
				dir = val
			case "peer_role":
				role = val
			}
		}
		t := out[role]
		// The proxy's received bytes are what the peer sent, and the
		// other way round.
		if dir == "received" {
			t.Sent += int64(v)
			proxy.Received += int64(v)
		} else {
			t.Received += int64(v)
			proxy.Sent += int64(v)
		}
		out[role] = t
	}
	out[transport.RoleProxy] = proxy
	return out, nil
}

// ProxyMetricsAddr returns the /metrics address of a proxy process.
func (c *Cluster) ProxyMetricsAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxyMetricsAddr
}

// scrapeHTTP reads one metric family from a /metrics endpoint.
func scrapeHTTP(url, name string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	if mf, ok := mfs[name]; ok {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(labels, ",")] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out, nil
}

// ProxyPeakRSS returns the peak resident memory of the proxy process (only
// when it runs as a process).
func (c *Cluster) ProxyPeakRSS() (int64, error) {
	c.mu.Lock()
	ch := c.proxyProc
	c.mu.Unlock()
	if ch == nil {
		return 0, errors.New("the proxy does not run as a separate process")
	}
	return ch.peakRSS()
}

// ProxyCPUSeconds returns the CPU time the proxy process has used
// (process_cpu_seconds_total of its metrics).
func (c *Cluster) ProxyCPUSeconds() (float64, error) {
	addr := c.ProxyMetricsAddr()
	if addr == "" {
		return 0, errors.New("the proxy does not run as a separate process")
	}
	m, err := scrapeHTTP("http://"+addr+"/metrics", "process_cpu_seconds_total")
	if err != nil {
		return 0, err
	}
	return m[""], nil
}

// KillProxy kills a proxy process with SIGKILL.
func (c *Cluster) KillProxy() error {
	c.mu.Lock()
	ch := c.proxyProc
	c.proxyProc = nil
	c.mu.Unlock()
	if ch == nil {
		return errors.New("the proxy does not run as a separate process")
	}
	ch.kill()
	return nil
}

// FarmConfig is the configuration of an owner farm: many owners run in one
// process (the benchmarks' way around per-process file descriptor limits).
type FarmConfig struct {
	Proxy    string        `json:"proxy"`
	Insecure bool          `json:"insecure"`
	Poll     time.Duration `json:"poll"`
	Idle     time.Duration `json:"idle_timeout"`
	Certs    string        `json:"certs"`
	State    string        `json:"state"`
	Owners   []FarmOwner   `json:"owners"`
}

// FarmOwner is one owner of a farm.
type FarmOwner struct {
	ID           string  `json:"id"`
	Schema       string  `json:"schema"`
	CSV          string  `json:"csv"`
	Epsilon      float64 `json:"epsilon"`
	Delta        float64 `json:"delta"`
	AllowNoNoise bool    `json:"allow_no_noise"`
}

// RunFarm runs a farm's owners until ctx is done, logging JSON lines to log.
func RunFarm(ctx context.Context, cfg FarmConfig, log io.Writer) error {
	logger := hclog.New(&hclog.LoggerOptions{Name: "farm", Level: hclog.Info, JSONFormat: true, Output: log})
	params, err := he.NewDefaultParams() // one parameter set for every owner of the farm
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(cfg.Owners))
	for _, fo := range cfg.Owners {
		b, err := os.ReadFile(fo.Schema)
		if err != nil {
			return err
		}
		sch, err := schema.Parse(b)
		if err != nil {
			return err
		}
		id := transport.Identity{Role: transport.RoleOwner, ID: fo.ID}
		d := transport.Dialer{Insecure: cfg.Insecure, Self: id}
		if !cfg.Insecure {
			if d.Creds, err = transport.LoadCredentials(filepath.Join(cfg.Certs, "owner-"+fo.ID)); err != nil {
				return err
			}
		}
		o, err := owner.New(owner.Config{ID: fo.ID, Dialer: d, ProxyAddr: cfg.Proxy, Store: filepath.Join(cfg.State, "owner-"+fo.ID),
			Datasets: []*owner.Dataset{{Schema: sch, CSV: fo.CSV, Epsilon: fo.Epsilon, Delta: fo.Delta}},
			Policy:   OwnerPolicy(fo.AllowNoNoise), PollInterval: cfg.Poll, IdleTimeout: cfg.Idle, Logger: logger.With("id", fo.ID), Params: &params})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs <- o.Run(ctx) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return nil
}

// startFarms writes the owners' data and runs them in OwnerFarms processes.
func (c *Cluster) startFarms(owners []OwnerConfig) error {
	n := c.cfg.OwnerFarms
	data := filepath.Join(c.cfg.Dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	schemas := map[*schema.Schema]string{}
	farms := make([]FarmConfig, n)
	for i := range farms {
		farms[i] = FarmConfig{Proxy: c.ProxyAddr, Insecure: c.cfg.Insecure, Poll: c.cfg.PollInterval, Idle: c.cfg.IdleTimeout,
			Certs: filepath.Join(c.cfg.Dir, "certs"), State: filepath.Join(c.cfg.Dir, "state")}
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
		eps, delta := oc.Epsilon, oc.Delta
		if eps == 0 {
			eps, delta = 100, 1e-6
		}
		farms[i%n].Owners = append(farms[i%n].Owners, FarmOwner{ID: oc.ID, Schema: sp, CSV: csv, Epsilon: eps, Delta: delta, AllowNoNoise: oc.Policy.AllowNoNoise})
	}
	for i, fc := range farms {
		path := filepath.Join(c.cfg.Dir, fmt.Sprintf("farm-%d.json", i))
		b, err := json.Marshal(fc)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return err
		}
		ch, err := c.startChild(fmt.Sprintf("farm-%d", i), "simulate", "farm", "--config", path)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.farms = append(c.farms, ch)
		c.mu.Unlock()
	}
	return nil
}

// ShareTimes returns the owners' share computation times for a job: from
// the in-process owners, or from the farms' logs.
func (c *Cluster) ShareTimes(jobID string) []time.Duration {
	var out []time.Duration
	c.mu.Lock()
	owners := make([]*owner.Owner, 0, len(c.Owners))
	for _, o := range c.Owners {
		owners = append(owners, o)
	}
	c.mu.Unlock()
	for _, o := range owners {
		if d, ok := o.ShareTime(jobID); ok {
			out = append(out, d)
		}
	}
	for _, r := range c.farmLog(jobID, "share computed") {
		out = append(out, time.Duration(r.MS*float64(time.Millisecond)))
	}
	return out
}

// farmRecord is a log line of an owner in a farm about a job; MS is the
// share's computation time in a "share computed" line.
type farmRecord struct {
	Msg string  `json:"@message"`
	Job string  `json:"job"`
	MS  float64 `json:"ms"`
}

// farmLog returns the farms' log lines with this message about a job.
func (c *Cluster) farmLog(jobID, msg string) []farmRecord {
	c.mu.Lock()
	farms := append([]*child(nil), c.farms...)
	c.mu.Unlock()
	prefix := jobID[:16]
	var out []farmRecord
	for _, f := range farms {
		fh, err := os.Open(f.log)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r farmRecord
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Msg == msg && r.Job == prefix {
				out = append(out, r)
			}
		}
		fh.Close()
	}
	return out
}
