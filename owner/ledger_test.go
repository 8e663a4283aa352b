package owner

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
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

// TestLedgerTotals: after every step of a random history (reservations of
// rhos of very different sizes, commits, releases, refunds, on two
// datasets), the balance is the exact sum of the entries (computed here from
// Entries as rationals and rounded once); so it is when the totals are
// missing (a ledger written before them) and after they are rebuilt.
func TestLedgerTotals(t *testing.T) {
	l := openLedger(t, 1e6)
	l.budgets["e"] = 1e6
	rng := rand.New(rand.NewPCG(1, 2))
	exact := func(dataset string) (reserved, spent float64) {
		entries, err := l.Entries(dataset)
		if err != nil {
			t.Fatal(err)
		}
		var r, s big.Rat
		for _, e := range entries {
			var x big.Rat
			x.SetFloat64(e.Rho)
			switch e.State {
			case Reserved:
				r.Add(&r, &x)
			case Committed:
				s.Add(&s, &x)
			}
		}
		reserved, _ = r.Float64()
		spent, _ = s.Float64()
		return reserved, spent
	}
	check := func(step string) {
		t.Helper()
		for _, ds := range []string{"d", "e"} {
			bal, err := l.Balance(ds)
			if err != nil {
				t.Fatal(err)
			}
			if r, s := exact(ds); bal.Reserved != r || bal.Spent != s {
				t.Fatalf("%s: dataset %s: balance reserved %v spent %v, entries sum to %v and %v", step, ds, bal.Reserved, bal.Spent, r, s)
			}
		}
	}
	type job struct{ dataset, id string }
	var reserved, committed []job
	for i := range 400 {
		switch op := rng.IntN(4); {
		case op == 0 || len(reserved) == 0:
			j := job{[]string{"d", "e"}[rng.IntN(2)], fmt.Sprintf("job-%03d", i)}
			rho := math.Ldexp(rng.Float64(), -rng.IntN(60)) // from about 1 down to 1e-18
			if _, err := l.Reserve(j.dataset, j.id, rho, 1, 1e-6); err != nil {
				t.Fatal(err)
			}
			reserved = append(reserved, j)
		case op == 1:
			j := reserved[len(reserved)-1]
			reserved = reserved[:len(reserved)-1]
			if err := l.Commit(j.dataset, j.id); err != nil {
				t.Fatal(err)
			}
			committed = append(committed, j)
		case op == 2:
			k := rng.IntN(len(reserved))
			j := reserved[k]
			reserved = append(reserved[:k], reserved[k+1:]...)
			if err := l.Release(j.dataset, j.id); err != nil {
				t.Fatal(err)
			}
		case len(committed) > 0:
			k := rng.IntN(len(committed))
			j := committed[k]
			committed = append(committed[:k], committed[k+1:]...)
			if err := l.Refund(j.dataset, j.id); err != nil {
				t.Fatal(err)
			}
		}
		check(fmt.Sprintf("step %d", i))
	}
	if err := l.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketTotals) }); err != nil {
		t.Fatal(err)
	}
	check("without stored totals")
	if err := l.rebuildTotals(); err != nil {
		t.Fatal(err)
	}
	check("rebuilt")
	// An edited total is replaced by the entries' sum at the next start.
	if err := l.db.Update(func(tx *bolt.Tx) error { return putTotals(tx, "d", &ledgerTotals{}) }); err != nil {
		t.Fatal(err)
	}
	if err := l.rebuildTotals(); err != nil {
		t.Fatal(err)
	}
	check("rebuilt after an edit")
}

// BenchmarkLedgerBalance: a balance (read before every reservation, in
// every budget report and metrics scrape) after 10,000 jobs.
func BenchmarkLedgerBalance(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "l.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucketLedger); return err }); err != nil {
		b.Fatal(err)
	}
	l := &ledger{db: db, budgets: map[string]float64{"d": 1e9}}
	for i := range 10000 {
		if _, err := l.Reserve("d", fmt.Sprintf("job-%05d", i), 1e-3, 1, 1e-6); err != nil {
			b.Fatal(err)
		}
		if err := l.Commit("d", fmt.Sprintf("job-%05d", i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := l.Balance("d"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLedgerBadEntryNamed: an entry that does not decode stops the rebuild
// of the totals (the owner's start) with an error naming its dataset and key.
func TestLedgerBadEntryNamed(t *testing.T) {
	l := openLedger(t, 1)
	if _, err := l.Reserve("d", "job-ok", 0.1, 1, 1e-6); err != nil {
		t.Fatal(err)
	}
	if err := l.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLedger).Bucket([]byte("d")).Put([]byte("job-torn"), []byte(`{"job":"job-torn","rho":`))
	}); err != nil {
		t.Fatal(err)
	}
	err := l.rebuildTotals()
	if err == nil || !strings.Contains(err.Error(), `dataset d, key "job-torn"`) {
		t.Fatalf("rebuild with a torn entry: %v", err)
	}
}
