package proxy

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkMetricsScrape: one scrape of the proxy's state metrics with
// 10,000 owners' budget reports stored.
func BenchmarkMetricsScrape(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer lis.Close()
	p, err := New(Config{Listener: lis, Insecure: true, Store: b.TempDir(), Committee: []Member{{ID: "csp-1", Addr: "127.0.0.1:1"}}, Threshold: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.store.db.Close()
	if err := p.store.db.Update(func(tx *bolt.Tx) error {
		for i := range 10000 {
			r := &budgetRecord{Owner: fmt.Sprintf("hospital-%05d", i), Dataset: "wdbc", RhoBudget: 1, RhoSpent: 0.1, RhoReserved: 0.05, Delta: 1e-6, At: time.Now()}
			if err := putBudget(tx, r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	c := &stateCollector{p: p}
	for b.Loop() {
		ch := make(chan prometheus.Metric, 1024)
		go func() { c.Collect(ch); close(ch) }()
		n := 0
		for range ch {
			n++
		}
		if n < 40000 {
			b.Fatalf("%d metrics", n)
		}
	}
}
