package procs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fedpca/fedpca/sim"
)

// NodeConfig is the one typed configuration a child process runs from
// (`fedpca simulate node --config FILE`): exactly one of Proxy and Farm.
type NodeConfig struct {
	Proxy *sim.ProxyNode `json:"proxy,omitempty"`
	Farm  *sim.Farm      `json:"farm,omitempty"`
	// MetricsListen is where the child serves its /metrics.
	MetricsListen string `json:"metrics_listen"`
}

// Launcher runs the nodes of a cluster as processes of the fedpca binary
// (sim.Launcher). Each child is started from a NodeConfig written as JSON
// next to its log in the cluster's directory, and measured through its
// /metrics and /proc. Safe for concurrent use.
type Launcher struct {
	// Binary is the fedpca executable.
	Binary string
	// ProxyMemoryLimit is the proxy process's GOMEMLIMIT ("" for none).
	ProxyMemoryLimit string

	mu    sync.Mutex
	proxy *Child   // the latest proxy process
	farms []*Child // every farm started
}

// Proxy starts the proxy as a process.
func (l *Launcher) Proxy(n sim.ProxyNode) (sim.Process, error) {
	var env []string
	if l.ProxyMemoryLimit != "" {
		env = []string{"GOMEMLIMIT=" + l.ProxyMemoryLimit}
	}
	ch, err := l.start(n.Dir, n.Name, NodeConfig{Proxy: &n}, env)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.proxy = ch
	l.mu.Unlock()
	return ch, nil
}

// Owners starts a farm of owners as a process.
func (l *Launcher) Owners(f sim.Farm) (sim.Process, error) {
	ch, err := l.start(f.Dir, f.Name, NodeConfig{Farm: &f}, nil)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.farms = append(l.farms, ch)
	l.mu.Unlock()
	return ch, nil
}

// FarmsPeakRSS returns the largest peak resident memory of the farms
// still running, and their number.
func (l *Launcher) FarmsPeakRSS() (peak int64, farms int, err error) {
	l.mu.Lock()
	chs := slices.Clone(l.farms)
	l.mu.Unlock()
	for _, ch := range chs {
		rss, err := ch.PeakRSS()
		if err != nil {
			continue // stopped
		}
		peak, farms = max(peak, rss), farms+1
	}
	if farms == 0 {
		return 0, 0, errors.New("procs: no farm running")
	}
	return peak, farms, nil
}

// start writes a child's config and runs `fedpca simulate node` on it, its
// output going to NAME.log in dir.
func (l *Launcher) start(dir, name string, cfg NodeConfig, env []string) (*Child, error) {
	if l.Binary == "" {
		return nil, errors.New("procs: no fedpca binary")
	}
	var err error
	if cfg.MetricsListen, err = sim.FreeAddr(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(l.Binary, "simulate", "node", "--config", path)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	ch := &Child{cmd: cmd, metrics: cfg.MetricsListen, done: make(chan error, 1)}
	go func() { ch.done <- cmd.Wait(); f.Close() }()
	if err := ch.waitListening(time.Minute); err != nil {
		ch.Kill()
		return nil, fmt.Errorf("procs: %s: %w (its log: %s)", name, err, f.Name())
	}
	return ch, nil
}

// waitListening waits until the child accepts connections on its metrics
// address (it opens it first thing), so that whoever scrapes it next does
// not race the process's start.
func (ch *Child) waitListening(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", ch.metrics, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case werr := <-ch.done:
			ch.done <- werr // for Stop and Kill
			return fmt.Errorf("exited at start: %v", werr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v: %w", ch.metrics, timeout, err)
		}
	}
}

// ProxyPeakRSS returns the peak resident memory of the latest proxy
// process.
func (l *Launcher) ProxyPeakRSS() (int64, error) {
	l.mu.Lock()
	ch := l.proxy
	l.mu.Unlock()
	if ch == nil {
		return 0, errors.New("procs: no proxy process")
	}
	return ch.PeakRSS()
}

// ProxyCPUSeconds returns the CPU time the latest proxy process has used
// (process_cpu_seconds_total of its /metrics).
func (l *Launcher) ProxyCPUSeconds() (float64, error) {
	l.mu.Lock()
	ch := l.proxy
	l.mu.Unlock()
	if ch == nil {
		return 0, errors.New("procs: no proxy process")
	}
	mfs, err := sim.Scrape(ch.MetricsAddr())
	if err != nil {
		return 0, err
	}
	m := sim.Family(mfs, "process_cpu_seconds_total")
	if len(m) != 1 {
		return 0, errors.New("procs: no process_cpu_seconds_total")
	}
	return m[0].GetCounter().GetValue(), nil
}

// Child is a node run as a process (sim.Process).
type Child struct {
	cmd     *exec.Cmd
	metrics string
	done    chan error
}

// MetricsAddr is the host:port of its /metrics.
func (ch *Child) MetricsAddr() string { return ch.metrics }

// Stop sends SIGTERM and waits (SIGKILL after 20 s).
func (ch *Child) Stop() {
	_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch.done:
	case <-time.After(20 * time.Second):
		ch.Kill()
	}
}

// Kill sends SIGKILL and waits.
func (ch *Child) Kill() {
	_ = ch.cmd.Process.Kill()
	<-ch.done
}

// PeakRSS is the process's peak resident set (VmHWM), in bytes.
func (ch *Child) PeakRSS() (int64, error) {
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
