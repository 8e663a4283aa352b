package sim

import (
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fedpca/fedpca/transport"
)

// The cluster measures its nodes from their Prometheus registries (in this
// process) or their /metrics (processes), never from their logs.

// Scrape reads every metric family a /metrics endpoint (host:port) serves.
func Scrape(addr string) ([]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(mfs))
	for _, mf := range mfs {
		out = append(out, mf)
	}
	return out, nil
}

// Family returns the metrics of one family.
func Family(mfs []*dto.MetricFamily, name string) []*dto.Metric {
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// Label returns the value of a metric's label.
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// proxyFamilies reads the proxy's metrics: its registry, or the /metrics of
// its process.
func (c *Cluster) proxyFamilies() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	m, ext := c.proxyMetrics, c.ext.proxy
	c.mu.Unlock()
	if ext != nil {
		return Scrape(ext.MetricsAddr())
	}
	if m == nil {
		return nil, fmt.Errorf("sim: no proxy")
	}
	return m.Registry.Gather()
}

// ProxyTraffic returns the payload bytes each role sent and received, as
// the proxy counted them: every byte of the protocol passes through it
// (owners and users talk only to the proxy, and so do CSP members).
func (c *Cluster) ProxyTraffic() (map[string]Traffic, error) {
	mfs, err := c.proxyFamilies()
	if err != nil {
		return nil, err
	}
	out := map[string]Traffic{}
	var proxy Traffic
	for _, m := range Family(mfs, "fedpca_grpc_payload_bytes_total") {
		v := int64(m.GetCounter().GetValue())
		role := Label(m, "peer_role")
		t := out[role]
		// The proxy's received bytes are what the peer sent, and the
		// other way round.
		if Label(m, "direction") == "received" {
			t.Sent += v
			proxy.Received += v
		} else {
			t.Received += v
			proxy.Sent += v
		}
		out[role] = t
	}
	out[transport.RoleProxy] = proxy
	return out, nil
}

// ProxyMetricsAddr returns the /metrics address of a proxy process ("" when
// the proxy runs in this process).
func (c *Cluster) ProxyMetricsAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ext.proxy == nil {
		return ""
	}
	return c.ext.proxy.MetricsAddr()
}

// Shares is the fedpca_owner_share_seconds histogram of each owner (by
// ID): how many shares it computed and encrypted, and the seconds they
// took in all.
type Shares map[string]struct {
	Count uint64
	Sum   float64
}

// OwnerShares reads every owner's share histogram: the in-process owners'
// registries and the farms' /metrics (where each owner's series carry its
// ID in the label owner).
func (c *Cluster) OwnerShares() (Shares, error) {
	out := Shares{}
	err := c.eachOwnerSeries("fedpca_owner_share_seconds", func(id string, m *dto.Metric) {
		h := m.GetHistogram()
		s := out[id]
		s.Count += h.GetSampleCount()
		s.Sum += h.GetSampleSum()
		out[id] = s
	})
	return out, err
}

// OwnersPrepared is the number of encryptions of zero the owners hold
// prepared for their next shares.
func (c *Cluster) OwnersPrepared() (int, error) {
	n := 0.0
	err := c.eachOwnerSeries("fedpca_owner_encryptions_prepared", func(_ string, m *dto.Metric) { n += m.GetGauge().GetValue() })
	return int(n), err
}

// eachOwnerSeries calls fn with every owner's series of the family name,
// owners in this process and in farms alike.
func (c *Cluster) eachOwnerSeries(name string, fn func(owner string, m *dto.Metric)) error {
	c.mu.Lock()
	regs := make(map[string]*transport.Metrics, len(c.ownerMetrics))
	for id, m := range c.ownerMetrics {
		regs[id] = m
	}
	farms := append([]Process(nil), c.ext.farms...)
	c.mu.Unlock()
	for id, m := range regs {
		mfs, err := m.Registry.Gather()
		if err != nil {
			return err
		}
		for _, s := range Family(mfs, name) {
			fn(id, s)
		}
	}
	for _, f := range farms {
		mfs, err := Scrape(f.MetricsAddr())
		if err != nil {
			return err
		}
		for _, s := range Family(mfs, name) {
			fn(Label(s, "owner"), s)
		}
	}
	return nil
}

// Since returns the time of each share computed between before and s, for
// the owners that computed exactly one (one job's).
func (s Shares) Since(before Shares) []float64 {
	var out []float64
	for id, a := range s {
		b := before[id]
		if a.Count == b.Count+1 {
			out = append(out, a.Sum-b.Sum)
		}
	}
	return out
}
