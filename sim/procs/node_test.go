package procs

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedpca/fedpca/sim"
)

// A farm's /metrics carries each owner's fedpca_ series once, labelled
// with its owner, next to the process's own series.
func TestFarmGathererLabelsOwners(t *testing.T) {
	g := farmGatherer{owners: map[string]prometheus.Gatherer{}, self: prometheus.NewRegistry()}
	g.self.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "process_test_total", Help: "h"}))
	for i, id := range []string{"owner-b", "owner-a"} {
		reg := prometheus.NewRegistry()
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedpca_owner_share_seconds", Help: "h"})
		reg.MustRegister(h, prometheus.NewCounter(prometheus.CounterOpts{Name: "go_other_total", Help: "h"}))
		h.Observe(float64(i + 1))
		g.owners[id] = reg
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(sim.Family(mfs, "go_other_total")) != 0 || len(sim.Family(mfs, "process_test_total")) != 1 {
		t.Fatalf("families: %v", mfs)
	}
	got := map[string]float64{}
	for _, m := range sim.Family(mfs, "fedpca_owner_share_seconds") {
		got[sim.Label(m, "owner")] = m.GetHistogram().GetSampleSum()
	}
	if len(got) != 2 || got["owner-b"] != 1 || got["owner-a"] != 2 {
		t.Fatalf("share sums by owner: %v", got)
	}
}
