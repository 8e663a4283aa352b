package owner

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the owner's own series (next to the gRPC ones).
type metrics struct {
	shares        prometheus.Histogram
	uploads       *prometheus.CounterVec
	uploadBytes   prometheus.Counter
	uploadSeconds prometheus.Histogram
	declines      prometheus.Counter
	watching      prometheus.Gauge
}

func (o *Owner) registerMetrics(reg *prometheus.Registry) {
	o.m = &metrics{
		shares: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedpca_owner_share_seconds",
			Help: "Time to read the rows, compute, noise and encrypt a job's share.", Buckets: prometheus.ExponentialBuckets(0.001, 3, 12)}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_owner_uploads_total",
			Help: "Upload attempts: acknowledged, retried or refused."}, []string{"result"}),
		uploadBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "fedpca_owner_upload_bytes_total",
			Help: "Ciphertext bytes of the acknowledged uploads."}),
		uploadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedpca_owner_upload_seconds",
			Help: "Time of an acknowledged upload, from its header to the acknowledgement (admission wait included).", Buckets: prometheus.ExponentialBuckets(0.001, 3, 12)}),
		declines: prometheus.NewCounter(prometheus.CounterOpts{Name: "fedpca_owner_jobs_declined_total",
			Help: "Jobs this owner declined (policy, schema, budget)."}),
		watching: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fedpca_owner_watching",
			Help: "1 while the proxy's watch of this owner's jobs is up; 0 while the owner polls."}),
	}
	prepared := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fedpca_owner_encryptions_prepared",
		Help: "Encryptions of zero prepared between jobs for the next share (each masks one ciphertext)."}, o.prepared)
	reg.MustRegister(o.m.shares, o.m.uploads, o.m.uploadBytes, o.m.uploadSeconds, o.m.declines, o.m.watching, prepared, &budgetCollector{o: o})
}

var budgetDesc = prometheus.NewDesc("fedpca_owner_budget_rho", "Privacy budget of each dataset (zCDP rho): budget, spent, reserved, remaining.",
	[]string{"dataset", "kind"}, nil)

// budgetCollector reads the ledger at scrape time.
type budgetCollector struct{ o *Owner }

func (b *budgetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- budgetDesc }

func (b *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	for name := range b.o.datasets {
		bal, err := b.o.ledger.Balance(name)
		if err != nil {
			continue
		}
		for kind, v := range map[string]float64{"budget": bal.Budget, "spent": bal.Spent, "reserved": bal.Reserved, "remaining": bal.Remaining()} {
			ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, v, name, kind)
		}
	}
}
