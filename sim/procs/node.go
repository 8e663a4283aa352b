package procs

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/proto"

	"github.com/fedpca/fedpca/owner"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/transport"
)

// RunNode runs a child's node until ctx is done, logging JSON lines to log:
// the child's side of Launcher (`fedpca simulate node`).
func RunNode(ctx context.Context, cfg NodeConfig, log io.Writer) error {
	ml, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return err
	}
	switch {
	case cfg.Proxy != nil && cfg.Farm == nil:
		return runProxy(ctx, *cfg.Proxy, ml, log)
	case cfg.Farm != nil && cfg.Proxy == nil:
		return runFarm(ctx, *cfg.Farm, ml, log)
	}
	ml.Close()
	return errors.New("procs: a node config names exactly one of proxy and farm")
}

func credentials(n sim.Node) (*transport.Credentials, error) {
	if n.Insecure {
		return nil, nil
	}
	return transport.LoadCredentials(n.Certs)
}

func runProxy(ctx context.Context, n sim.ProxyNode, ml net.Listener, log io.Writer) error {
	logger := hclog.New(&hclog.LoggerOptions{Name: "proxy", Level: hclog.Info, JSONFormat: true, Output: log})
	creds, err := credentials(n.Node)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", n.Listen)
	if err != nil {
		return err
	}
	p, err := proxy.New(proxy.Config{ID: n.ID, Listener: l, Creds: creds, Insecure: n.Insecure, Store: n.State, MetricsListener: ml,
		Committee: n.Committee, Threshold: n.Threshold, AllowNoNoise: n.AllowNoNoise, MaxConnections: n.MaxConnections,
		MaxWatchers: n.MaxWatchers, SwitchTimeout: n.SwitchTimeout, ProgressInterval: n.ProgressInterval, Logger: logger})
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// runFarm runs a farm's owners. Its /metrics serves every owner's fedpca_
// series with the label owner, and the process's own.
func runFarm(ctx context.Context, f sim.Farm, ml net.Listener, log io.Writer) error {
	logger := hclog.New(&hclog.LoggerOptions{Name: "farm", Level: hclog.Info, JSONFormat: true, Output: log})
	params, err := he.NewDefaultParams() // one parameter set for every owner of the farm
	if err != nil {
		return err
	}
	farm := farmGatherer{owners: map[string]prometheus.Gatherer{}, self: prometheus.NewRegistry()}
	farm.self.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// What is the same for every owner of the farm is held once: the HE
	// parameters, the parsed schemas, the committee key once one owner has
	// found it attested (owner.KeyCache); and the shares computed at once
	// are bounded (the farm's memory does not grow with its owners: a
	// farm's owners share its cores anyway).
	keys := &owner.KeyCache{}
	compute := semaphore.NewWeighted(int64(2 * runtime.GOMAXPROCS(0)))
	// Owners prepare their next share's encryptions of zero between jobs,
	// as each would on its own machine: up to 1 GiB of them per farm (2,730
	// at d <= 126: one for each of a farm's 2,500 owners).
	prepare := owner.NewPrepareBudget(max(160, (1<<30)/params.NewCiphertext().BinarySize()))
	schemas := map[string]*schema.Schema{}
	var owners []*owner.Owner
	var creds transport.Loader // the farm's owners share one parsed trust store
	for _, fo := range f.Owners {
		sch := schemas[fo.Schema]
		if sch == nil {
			b, err := os.ReadFile(fo.Schema)
			if err != nil {
				return err
			}
			if sch, err = schema.Parse(b); err != nil {
				return err
			}
			schemas[fo.Schema] = sch
		}
		id := transport.Identity{Role: transport.RoleOwner, ID: fo.ID}
		d := transport.Dialer{Insecure: f.Insecure, Self: id}
		if !f.Insecure {
			if d.Creds, err = creds.Credentials(filepath.Join(f.Certs, "owner-"+fo.ID)); err != nil {
				return err
			}
		}
		m := transport.NewEmbeddedMetrics()
		policy := sim.OwnerPolicy(fo.AllowNoNoise)
		policy.AllowExactComponents = fo.AllowExactComponents
		policy.Committee = f.Committee
		o, err := owner.New(owner.Config{ID: fo.ID, Dialer: d, ProxyAddr: f.Proxy, Store: filepath.Join(f.State, "owner-"+fo.ID),
			Datasets: []*owner.Dataset{{Schema: sch, CSV: fo.CSV, Epsilon: fo.Epsilon, Delta: fo.Delta}}, Metrics: m,
			Policy: policy, PollInterval: f.Poll, IdleTimeout: f.Idle, Logger: logger.With("id", fo.ID), Params: &params,
			Keys: keys, Compute: compute, Prepare: prepare})
		if err != nil {
			return err
		}
		farm.owners[fo.ID] = m.Registry
		owners = append(owners, o)
	}
	go func() {
		if err := transport.ServeGatherer(ctx, ml, nil, farm, logger.Named("metrics")); err != nil { // a loopback address
			logger.Error("metrics server", "error", err)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(owners))
	for _, o := range owners {
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

// farmGatherer gathers the farm process's own series and every owner's
// fedpca_ series, each labelled with its owner.
type farmGatherer struct {
	owners map[string]prometheus.Gatherer
	self   *prometheus.Registry
}

func (g farmGatherer) Gather() ([]*dto.MetricFamily, error) {
	out, err := g.self.Gather()
	if err != nil {
		return nil, err
	}
	byName := map[string]*dto.MetricFamily{}
	ids := make([]string, 0, len(g.owners))
	for id := range g.owners {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		mfs, err := g.owners[id].Gather()
		if err != nil {
			return nil, err
		}
		for _, mf := range mfs {
			if len(mf.GetName()) < 7 || mf.GetName()[:7] != "fedpca_" {
				continue
			}
			f := byName[mf.GetName()]
			if f == nil {
				f = &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type}
				byName[mf.GetName()] = f
				out = append(out, f)
			}
			for _, m := range mf.GetMetric() {
				m = proto.Clone(m).(*dto.Metric)
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("owner"), Value: proto.String(id)})
				f.Metric = append(f.Metric, m)
			}
		}
	}
	return out, nil
}
