package transport

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// Metrics are a node's Prometheus metrics: its own registry (several nodes
// can share a process in simulations), the gRPC-level series every daemon
// has, and whatever the role registers on Registry. Safe for concurrent use.
type Metrics struct {
	Registry *prometheus.Registry
	bytes    *prometheus.CounterVec
	rpcs     *prometheus.CounterVec
	calls    *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

// NewMetrics makes a registry with the Go runtime and process collectors and
// the gRPC series:
//
//	fedpca_grpc_payload_bytes_total{direction, peer_role}
//	fedpca_rpc_requests_total{method, code}          RPCs served
//	fedpca_rpc_duration_seconds{method}
//	fedpca_rpc_client_requests_total{method, code}   RPCs made (Dialer.Metrics)
func NewMetrics() *Metrics {
	m := NewEmbeddedMetrics()
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// NewEmbeddedMetrics is NewMetrics without the Go runtime's and the
// process's series: for a node run with many others in one process (an
// owner farm), whose runtime series are the process's own.
func NewEmbeddedMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_grpc_payload_bytes_total",
			Help: "gRPC payload bytes sent and received, by the role of the node at the other end."}, []string{"direction", "peer_role"}),
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_rpc_requests_total",
			Help: "RPCs served, by method and status code."}, []string{"method", "code"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_rpc_client_requests_total",
			Help: "RPCs this node made as a client, by method and status code."}, []string{"method", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fedpca_rpc_duration_seconds",
			Help: "Time to serve an RPC, by method.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"method"}),
	}
	reg.MustRegister(m.bytes, m.rpcs, m.calls, m.seconds)
	return m
}

func (m *Metrics) observeRPC(method string, err error, d time.Duration) {
	if m == nil {
		return
	}
	name := shortMethod(method)
	m.rpcs.WithLabelValues(name, status.Code(err).String()).Inc()
	m.seconds.WithLabelValues(name).Observe(d.Seconds())
}

// byteStats counts payload bytes, and a client's calls by status code; for a
// server the peer's role comes from its certificate, for a client it is the
// server's expected role.
type byteStats struct {
	m    *Metrics
	role string // fixed peer role (clients); "" to read it from the peer
}

type rpcKey struct{}

// rpcTag is what TagRPC records for HandleRPC.
type rpcTag struct{ role, method string }

func (b byteStats) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	role := b.role
	if role == "" {
		role = "unknown"
		if p, ok := peer.FromContext(ctx); ok {
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
				if id, err := IdentityOf(ti.State.PeerCertificates[0]); err == nil {
					role = id.Role
				}
			}
		}
	}
	return context.WithValue(ctx, rpcKey{}, rpcTag{role: role, method: info.FullMethodName})
}

func (b byteStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	tag, _ := ctx.Value(rpcKey{}).(rpcTag)
	switch p := s.(type) {
	case *stats.InPayload:
		b.m.bytes.WithLabelValues("received", tag.role).Add(float64(p.WireLength))
	case *stats.OutPayload:
		b.m.bytes.WithLabelValues("sent", tag.role).Add(float64(p.WireLength))
	case *stats.End:
		if p.Client {
			b.m.calls.WithLabelValues(shortMethod(tag.method), status.Code(p.Error).String()).Inc()
		}
	}
}

func (byteStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (byteStats) HandleConn(context.Context, stats.ConnStats)                       {}

// ServerStats returns the stats handler of a server.
func (m *Metrics) ServerStats() stats.Handler { return byteStats{m: m} }

// ClientStats returns the stats handler of a client of a server of the
// given role.
func (m *Metrics) ClientStats(serverRole string) stats.Handler {
	return byteStats{m: m, role: serverRole}
}

// ServeMetrics serves /metrics, /healthz and the Go profiler
// (/debug/pprof/) on l until ctx is done, for operators only (ServeOperator:
// plain HTTP on a loopback address, HTTPS with an operator certificate on
// any other; creds may be nil on a loopback address).
func ServeMetrics(ctx context.Context, l net.Listener, creds *Credentials, m *Metrics, log hclog.Logger) error {
	return ServeGatherer(ctx, l, creds, m.Registry, log)
}

// ServeGatherer is ServeMetrics for any gatherer (an owner farm's, which
// gathers many owners' registries).
func ServeGatherer(ctx context.Context, l net.Listener, creds *Credentials, g prometheus.Gatherer, log hclog.Logger) error {
	mux := http.NewServeMux()
	var reg prometheus.Registerer
	if r, ok := g.(*prometheus.Registry); ok {
		reg = r
	}
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return ServeOperator(ctx, l, creds, mux, log)
}

// Scrape reads the value of every sample of a metric family from a registry
// (for tests and the simulator), keyed by its labels ("k=v,k=v").
func Scrape(reg prometheus.Gatherer, name string) (map[string]float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := 0.0
			switch {
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Histogram != nil:
				v = m.GetHistogram().GetSampleSum()
			}
			out[strings.Join(labels, ",")] = v
		}
	}
	return out, nil
}
