package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's own series (next to the gRPC ones).
type metrics struct {
	uploads     *prometheus.CounterVec
	proofs      *prometheus.CounterVec
	uploadBytes prometheus.Counter
	phases      *prometheus.HistogramVec
	asks        *prometheus.CounterVec
	watches     *prometheus.CounterVec
}

func (p *Proxy) registerMetrics(reg *prometheus.Registry) {
	p.m = &metrics{
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_proxy_uploads_total",
			Help: "Uploads: included, resent (acknowledged again) or refused."}, []string{"result"}),
		proofs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_proxy_upload_proofs_total",
			Help: "Proofs of uploaded ciphertexts (protocol/zk): verified or refused."}, []string{"result"}),
		uploadBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "fedpca_proxy_upload_bytes_total",
			Help: "Ciphertext and proof bytes of the uploads included in jobs' sums."}),
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fedpca_proxy_phase_seconds",
			Help:    "Job phases: verify (one upload's proofs), fold (one upload validated, folded and committed), seal, key_switch.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 11)}, []string{"phase"}),
		asks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_proxy_key_switch_requests_total",
			Help: "Key-switch requests to committee members, by member and outcome."}, []string{"member", "result"}),
		watches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_proxy_owner_watches_total",
			Help: "Owners' job watches: opened, refused (beyond the limit: the owner polls) and lagged (resynchronised after its queue filled)."}, []string{"event"}),
	}
	streams := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fedpca_proxy_owner_watch_streams",
		Help: "Owners' job watches open now."}, func() float64 { return float64(p.hub.streams()) })
	reg.MustRegister(p.m.uploads, p.m.proofs, p.m.uploadBytes, p.m.phases, p.m.asks, p.m.watches, streams, &stateCollector{p: p})
}

// stateCollector reports, at scrape time, jobs by state, the owners'
// budgets as they reported them and the members' health, from the status
// page's snapshot.
type stateCollector struct{ p *Proxy }

var (
	jobsDesc   = prometheus.NewDesc("fedpca_proxy_jobs", "Jobs by state.", []string{"state"}, nil)
	budgetDesc = prometheus.NewDesc("fedpca_proxy_owner_budget_rho", "Owners' privacy budgets (zCDP rho) as they reported them: budget, spent, reserved, remaining.",
		[]string{"owner", "dataset", "kind"}, nil)
	readyDesc  = prometheus.NewDesc("fedpca_proxy_committee_ready", "1 when the committee key is established.", nil, nil)
	memberDesc = prometheus.NewDesc("fedpca_proxy_committee_member_up", "1 when the member answered the last status check holding the committee key.",
		[]string{"member"}, nil)
)

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- budgetDesc
	ch <- readyDesc
	ch <- memberDesc
}

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := s.p.overview(false, "")
	counts := map[string]int{}
	for _, j := range st.Jobs {
		counts[j.State]++
	}
	for _, state := range []string{"open", "switching", "done", "failed"} {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[state]), state)
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, boolValue(st.Committee.Ready))
	for _, m := range st.Committee.Members {
		ch <- prometheus.MustNewConstMetric(memberDesc, prometheus.GaugeValue, boolValue(m.HoldsKey), m.ID)
	}
	// The reports as stored: the epsilons the status page adds are not
	// exported, and would cost three conversions per owner and scrape.
	for _, b := range s.p.budgets() {
		for kind, v := range map[string]float64{"budget": b.RhoBudget, "spent": b.RhoSpent, "reserved": b.RhoReserved, "remaining": b.remaining()} {
			ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, v, b.Owner, b.Dataset, kind)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// budgets returns the owners' budget reports.
func (p *Proxy) budgets() []budgetRecord { return p.store.budgets() }
