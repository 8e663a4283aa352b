package owner

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/fedpca/fedpca/protocol/dp"
)

func openLedger(t *testing.T, budget float64) *ledger {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "l.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucketLedger); return err }); err != nil {
		t.Fatal(err)
	}
	return &ledger{db: db, budgets: map[string]float64{"d": budget}}
}

// TestLedgerConcurrentNeverOverspends: 50 jobs reserve at once against a
// budget for 10; exactly 10 get it.
func TestLedgerConcurrentNeverOverspends(t *testing.T) {
	l := openLedger(t, 1.0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Reserve("d", fmt.Sprintf("job-%02d", i), 0.1, 1, 1e-6)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrBudget):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != 10 || refused != 40 {
		t.Fatalf("%d reservations, %d refused; want 10 and 40", ok, refused)
	}
	bal, _ := l.Balance("d")
	if math.Abs(bal.Reserved-1) > 1e-9 || bal.Remaining() < -1e-9 {
		t.Fatalf("balance %+v", bal)
	}
}

func TestLedgerLifecycle(t *testing.T) {
	l := openLedger(t, 1.0)
	for _, j := range []string{"a", "b", "c"} {
		if _, err := l.Reserve("d", j, 0.3, 1, 1e-6); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Reserve("d", "d", 0.3, 1, 1e-6); !errors.Is(err, ErrBudget) {
		t.Fatalf("fourth job: %v", err)
	}
	// Reserving the same job again is a no-op.
	if st, err := l.Reserve("d", "a", 0.3, 1, 1e-6); err != nil || st != Reserved {
		t.Fatalf("re-reserve: %s %v", st, err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Commit("d", "a"))
	must(l.Release("d", "b"))
	must(l.Commit("d", "c"))
	must(l.Refund("d", "c")) // failed before any key switch
	if err := l.Release("d", "a"); err == nil {
		t.Error("released a committed job")
	}
	bal, _ := l.Balance("d")
	if math.Abs(bal.Spent-0.3) > 1e-12 || bal.Reserved != 0 {
		t.Fatalf("balance %+v", bal)
	}
	// The returned budget can be used again.
	if _, err := l.Reserve("d", "e", 0.7, 1, 1e-6); err != nil {
		t.Fatalf("after refunds: %v", err)
	}
	entries, _ := l.Entries("d")
	if len(entries) != 4 {
		t.Fatalf("%d entries", len(entries))
	}
}

// TestLedgerRefusalInEpsilon: a refusal states the amounts as epsilon at
// the budget's delta, the unit the operator set (--budget-epsilon), next
// to the rho the ledger counts in.
func TestLedgerRefusalInEpsilon(t *testing.T) {
	rho, err := dp.BudgetRho(10, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	l := openLedger(t, rho)
	l.deltas = map[string]float64{"d": 1e-6}
	if _, err := l.Reserve("d", "job-1", 0.9*rho, 1, 1e-6); err != nil {
		t.Fatal(err)
	}
	_, err = l.Reserve("d", "job-2", 0.5*rho, 1, 1e-6)
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("reserve beyond the budget: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"at delta 1e-06", "of epsilon 10 (rho ", "the job needs epsilon "} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q lacks %q", msg, want)
		}
	}
	t.Log(msg)
}
