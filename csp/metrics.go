package csp

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the member's own series (next to the gRPC ones).
type metrics struct {
	switches *prometheus.CounterVec
	seconds  prometheus.Histogram
	verify   prometheus.Histogram
}

func (c *CSP) registerMetrics(reg *prometheus.Registry) {
	c.m = &metrics{
		switches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_csp_key_switches_total",
			Help: "Key-switch requests: switched (new shares), replayed (the same request again), refused."}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedpca_csp_key_switch_seconds",
			Help: "Time to compute a job's key-switch shares.", Buckets: prometheus.ExponentialBuckets(0.002, 3, 10)}),
		verify: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedpca_csp_upload_verify_seconds",
			Help: "Time to receive and verify a job's uploads (every owner's signature and proofs, the sum) before a key switch.", Buckets: prometheus.ExponentialBuckets(0.01, 3, 12)}),
	}
	reg.MustRegister(c.m.switches, c.m.seconds, c.m.verify, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fedpca_csp_ready",
		Help: "1 when the member holds a committee key."}, func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.state != nil {
			return 1
		}
		return 0
	}))
}
