package procs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/transport"
)

// ConnsConfig describes a connection-memory measurement: Conns owners each
// open one mutual-TLS connection to a proxy process and, with Watch, hold a
// job watch (WatchOwnerJobs) on it; without, they make one call and leave
// the connection idle.
type ConnsConfig struct {
	Conns    int
	Watch    bool
	Launcher *Launcher
	// HeapProfile, if set, is where the proxy's heap profile is written
	// with every connection open.
	HeapProfile string
	Logger      hclog.Logger
}

// ProxyMemory is a proxy process's memory at one moment, after a garbage
// collection.
type ProxyMemory struct {
	HeapInuse  float64 `json:"heap_inuse_bytes"`
	StackInuse float64 `json:"stack_inuse_bytes"`
	RSS        float64 `json:"rss_bytes"`
	Goroutines float64 `json:"goroutines"`
}

// ConnsReport is what the proxy held with no owner connected and with
// every owner's connection open, and the difference per connection.
type ConnsReport struct {
	Conns    int         `json:"conns"`
	Watching bool        `json:"watching"`
	Base     ProxyMemory `json:"base"`
	Loaded   ProxyMemory `json:"loaded"`
	// PerConn is (Loaded - Base) / Conns.
	PerConn ProxyMemory `json:"per_conn"`
	// Open is the time to open every connection.
	Open float64 `json:"open_seconds"`
}

// RunConns starts a committee in this process and the proxy as a process,
// measures the proxy's memory, opens the connections (each owner with its
// own certificate) and measures it again.
func RunConns(ctx context.Context, cfg ConnsConfig) (*ConnsReport, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	dir, err := os.MkdirTemp("", "fedpca-conns-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	idents := make([]string, cfg.Conns)
	for i := range idents {
		idents[i] = fmt.Sprintf("owner/owner-%05d", i+1)
	}
	cl, err := sim.Start(ctx, sim.Config{Dir: dir, CSPs: 3, Threshold: 2, Identities: idents, TCP: true,
		Processes: cfg.Launcher, ProxyProcess: true, ProxyMaxWatchers: cfg.Conns + 1, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	if err := cl.WaitCommittee(ctx); err != nil {
		return nil, err
	}
	metrics := "http://" + cl.ProxyMetricsAddr()
	rep := &ConnsReport{Conns: cfg.Conns, Watching: cfg.Watch}
	if rep.Base, err = proxyMemory(ctx, metrics); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conns := make([]*grpc.ClientConn, cfg.Conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	start := time.Now()
	err = parallel(ctx, cfg.Conns, func(ctx context.Context, i int) error {
		d, err := cl.Dialer(idents[i])
		if err != nil {
			return err
		}
		if conns[i], err = d.Dial(cl.ProxyAddr(), transport.Identity{Role: transport.RoleProxy}); err != nil {
			return err
		}
		if !cfg.Watch {
			_, err := healthpb.NewHealthClient(conns[i]).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
			return err
		}
		// The stream stays open until ctx is cancelled at the end.
		w, err := fedpcav1.NewProxyServiceClient(conns[i]).WatchOwnerJobs(ctx, &fedpcav1.WatchOwnerJobsRequest{}, grpc.WaitForReady(true))
		if err != nil {
			return err
		}
		_, err = w.Recv() // the (empty) snapshot: the watch is up
		return err
	})
	if err != nil {
		return nil, err
	}
	rep.Open = time.Since(start).Seconds()
	time.Sleep(2 * time.Second) // let the connections settle (window updates, pings)
	if rep.Loaded, err = proxyMemory(ctx, metrics); err != nil {
		return nil, err
	}
	if cfg.HeapProfile != "" {
		if err := fetchTo(ctx, metrics+"/debug/pprof/heap", cfg.HeapProfile); err != nil {
			return nil, err
		}
	}
	n := float64(cfg.Conns)
	rep.PerConn = ProxyMemory{HeapInuse: (rep.Loaded.HeapInuse - rep.Base.HeapInuse) / n, StackInuse: (rep.Loaded.StackInuse - rep.Base.StackInuse) / n,
		RSS: (rep.Loaded.RSS - rep.Base.RSS) / n, Goroutines: (rep.Loaded.Goroutines - rep.Base.Goroutines) / n}
	return rep, nil
}

// proxyMemory collects the proxy's garbage (the heap profile endpoint with
// gc=1 runs a collection first) and reads its memory from /metrics.
func proxyMemory(ctx context.Context, metrics string) (ProxyMemory, error) {
	if err := fetchTo(ctx, metrics+"/debug/pprof/heap?gc=1", os.DevNull); err != nil {
		return ProxyMemory{}, err
	}
	mfs, err := sim.Scrape(metrics[len("http://"):])
	if err != nil {
		return ProxyMemory{}, err
	}
	value := func(name string) float64 {
		m := sim.Family(mfs, name)
		if len(m) != 1 {
			return 0
		}
		if g := m[0].GetGauge(); g != nil {
			return g.GetValue()
		}
		return m[0].GetUntyped().GetValue()
	}
	pm := ProxyMemory{HeapInuse: value("go_memstats_heap_inuse_bytes"), StackInuse: value("go_memstats_stack_inuse_bytes"),
		RSS: value("process_resident_memory_bytes"), Goroutines: value("go_goroutines")}
	if pm.RSS == 0 || pm.HeapInuse == 0 {
		return pm, errors.New("conns: the proxy's /metrics has no memory figures")
	}
	return pm, nil
}

func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
