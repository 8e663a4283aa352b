package proxy

import (
	"encoding/json"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// metrics are the proxy's own series (next to the gRPC ones).
type metrics struct {
	uploads *prometheus.CounterVec
	phases  *prometheus.HistogramVec
	asks    *prometheus.CounterVec
}

func (p *Proxy) registerMetrics(reg *prometheus.Registry) {
	p.m = &metrics{
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_proxy_uploads_total",
			Help: "Uploads: included, resent (acknowledged again) or refused."}, []string{"result"}),
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fedpca_proxy_phase_seconds",
			Help:    "Job phases: fold (one upload validated, folded and committed), seal, key_switch.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 11)}, []string{"phase"}),
		asks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedpca_proxy_key_switch_requests_total",
			Help: "Key-switch requests to committee members, by member and outcome."}, []string{"member", "result"}),
	}
	reg.MustRegister(p.m.uploads, p.m.phases, p.m.asks, &stateCollector{p: p})
}

// stateCollector reports jobs by state, and the owners' budgets as they
// reported them, at scrape time.
type stateCollector struct{ p *Proxy }

var (
	jobsDesc   = prometheus.NewDesc("fedpca_proxy_jobs", "Jobs by state.", []string{"state"}, nil)
	budgetDesc = prometheus.NewDesc("fedpca_proxy_owner_budget_rho", "Owners' privacy budgets (zCDP rho) as they reported them.",
		[]string{"owner", "dataset", "kind"}, nil)
	readyDesc = prometheus.NewDesc("fedpca_proxy_committee_ready", "1 when the committee key is established.", nil, nil)
)

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- budgetDesc
	ch <- readyDesc
}

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	p := s.p
	counts := map[fedpcav1.JobState]int{}
	p.mu.Lock()
	jobs := make([]*jobState, 0, len(p.jobs))
	for _, j := range p.jobs {
		jobs = append(jobs, j)
	}
	ready := 0.0
	if p.cmt != nil {
		ready = 1
	}
	p.mu.Unlock()
	for _, j := range jobs {
		j.mu.Lock()
		counts[j.rec.State]++
		j.mu.Unlock()
	}
	for _, st := range []fedpcav1.JobState{fedpcav1.JobState_JOB_STATE_OPEN, fedpcav1.JobState_JOB_STATE_SWITCHING, fedpcav1.JobState_JOB_STATE_DONE, fedpcav1.JobState_JOB_STATE_FAILED} {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[st]), strings.ToLower(strings.TrimPrefix(st.String(), "JOB_STATE_")))
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
	for _, b := range p.budgets() {
		for kind, v := range map[string]float64{"budget": b.RhoBudget, "spent": b.RhoSpent, "reserved": b.RhoReserved} {
			ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, v, b.Owner, b.Dataset, kind)
		}
	}
}

// budgets returns the owners' budget reports.
func (p *Proxy) budgets() []budgetRecord {
	var out []budgetRecord
	_ = p.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBudgets).ForEach(func(_, v []byte) error {
			var b budgetRecord
			if json.Unmarshal(v, &b) == nil {
				out = append(out, b)
			}
			return nil
		})
	})
	return out
}
