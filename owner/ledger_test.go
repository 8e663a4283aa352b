package owner

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/transport"
)

// openLedger opens a ledger for dataset "d" (and "e", its own ledger) with
// a budget of (epsilon, 1e-6), and returns it with the rho that budget
// holds for releases without correction, lowered by a relative 1e-9 (so
// that ten tenths of it fit).
func openLedger(t testing.TB, epsilon float64) (*ledger, float64) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "l.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucketLedger); return err }); err != nil {
		t.Fatal(err)
	}
	return newLedger(db, epsilon)
}

func newLedger(db *bolt.DB, epsilon float64) (*ledger, float64) {
	l := &ledger{db: db, keys: map[string]string{"d": "ledger:d", "e": "ledger:e"}, budgets: map[string]*ledgerBudget{
		"ledger:d": {Epsilon: epsilon, Delta: 1e-6, Datasets: []string{"d"}},
		"ledger:e": {Epsilon: epsilon, Delta: 1e-6, Datasets: []string{"e"}}}}
	return l, dp.Cost{}.Room(epsilon, 1e-6) * (1 - 1e-9)
}

func rho(r float64) dp.Cost { return dp.Cost{Rho: dp.Float(r)} }

// TestLedgerConcurrentNeverOverspends: 50 jobs reserve at once against a
// budget for 10; exactly 10 get it.
func TestLedgerConcurrentNeverOverspends(t *testing.T) {
	l, budget := openLedger(t, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Reserve("d", fmt.Sprintf("job-%02d", i), rho(budget/10), 1, 1e-6, "")
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
	if math.Abs(bal.Reserved/budget-1) > 1e-9 || bal.Remaining() < 0 || bal.EpsilonSpentAndReserved() > 1 {
		t.Fatalf("balance %+v", bal)
	}
}

func TestLedgerLifecycle(t *testing.T) {
	l, budget := openLedger(t, 1)
	for _, j := range []string{"a", "b", "c"} {
		if _, err := l.Reserve("d", j, rho(0.3*budget), 1, 1e-6, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Reserve("d", "d", rho(0.3*budget), 1, 1e-6, ""); !errors.Is(err, ErrBudget) {
		t.Fatalf("fourth job: %v", err)
	}
	// Reserving the same job again is a no-op.
	if st, err := l.Reserve("d", "a", rho(0.3*budget), 1, 1e-6, ""); err != nil || st != Reserved {
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
	if math.Abs(bal.Spent/budget-0.3) > 1e-12 || bal.Reserved != 0 {
		t.Fatalf("balance %+v", bal)
	}
	// The returned budget can be used again.
	if _, err := l.Reserve("d", "e", rho(0.7*budget), 1, 1e-6, ""); err != nil {
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
	l, budget := openLedger(t, 10)
	if _, err := l.Reserve("d", "job-1", rho(0.9*budget), 1, 1e-6, ""); err != nil {
		t.Fatal(err)
	}
	_, err := l.Reserve("d", "job-2", rho(0.5*budget), 1, 1e-6, "")
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("reserve beyond the budget: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"at delta 1e-06", "above its budget of epsilon 10", "the job costs epsilon ", "would certify epsilon "} {
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
	l, _ := openLedger(t, 1e6)
	rng := rand.New(rand.NewPCG(1, 2))
	exact := func(dataset string) (reserved, spent dp.Cost) {
		entries, err := l.Entries(dataset)
		if err != nil {
			t.Fatal(err)
		}
		var r, s [3]big.Rat
		for _, e := range entries {
			c := e.cost()
			for i, v := range []dp.Float{c.Rho, c.Eta, c.Tail} {
				var x big.Rat
				x.SetFloat64(float64(v))
				switch e.State {
				case Reserved:
					r[i].Add(&r[i], &x)
				case Committed:
					s[i].Add(&s[i], &x)
				}
			}
		}
		f := func(x *[3]big.Rat) dp.Cost {
			a, _ := x[0].Float64()
			b, _ := x[1].Float64()
			c, _ := x[2].Float64()
			return dp.Cost{Rho: dp.Float(a), Eta: dp.Float(b), Tail: dp.Float(c)}
		}
		return f(&r), f(&s)
	}
	check := func(step string) {
		t.Helper()
		for _, ds := range []string{"d", "e"} {
			bal, err := l.Balance(ds)
			if err != nil {
				t.Fatal(err)
			}
			if r, s := exact(ds); bal.ReservedCost != r || bal.SpentCost != s {
				t.Fatalf("%s: dataset %s: balance reserved %v spent %v, entries sum to %v and %v", step, ds, bal.ReservedCost, bal.SpentCost, r, s)
			}
		}
	}
	type job struct{ dataset, id string }
	var reserved, committed []job
	for i := range 400 {
		switch op := rng.IntN(4); {
		case op == 0 || len(reserved) == 0:
			j := job{[]string{"d", "e"}[rng.IntN(2)], fmt.Sprintf("job-%03d", i)}
			c := dp.Cost{Rho: dp.Float(math.Ldexp(rng.Float64(), -rng.IntN(60))), // from about 1 down to 1e-18
				Eta: dp.Float(math.Ldexp(rng.Float64(), -rng.IntN(60)-20)), Tail: dp.Float(math.Ldexp(rng.Float64(), -rng.IntN(40)-70))}
			if _, err := l.Reserve(j.dataset, j.id, c, 1, 1e-6, ""); err != nil {
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
	if err := l.db.Update(func(tx *bolt.Tx) error { return putTotals(tx, "ledger:d", &ledgerTotals{}) }); err != nil {
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
	l, _ := newLedger(db, 1e9)
	for i := range 10000 {
		if _, err := l.Reserve("d", fmt.Sprintf("job-%05d", i), dp.Cost{Rho: 1e-3, Eta: 1e-10, Tail: 1e-23}, 1, 1e-6, ""); err != nil {
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
	l, _ := openLedger(t, 1)
	if _, err := l.Reserve("d", "job-ok", rho(0.01), 1, 1e-6, ""); err != nil {
		t.Fatal(err)
	}
	if err := l.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLedger).Bucket([]byte("ledger:d")).Put([]byte("job-torn"), []byte(`{"job":"job-torn","rho":`))
	}); err != nil {
		t.Fatal(err)
	}
	err := l.rebuildTotals()
	if err == nil || !strings.Contains(err.Error(), `ledger ledger:d, key "job-torn"`) {
		t.Fatalf("rebuild with a torn entry: %v", err)
	}
}

// TestLedgerFillsBudgetAtLowBits: a budget of epsilon 1 at delta 1e-6 is
// filled with DCA jobs (d = 30, three classes, the servers plan with three
// members) at 4, 8 and 16 fractional bits, whose discrete corrections are
// large at 4 bits: after every job admitted, the certified total of the
// jobs (dp.Compose, corrections included) is within the budget, and the
// ledger refuses the job that would take it over. A job whose (epsilon,
// delta) is the whole budget is accepted by an empty ledger, at every
// number of bits.
func TestLedgerFillsBudgetAtLowBits(t *testing.T) {
	l3, err := stats.NewLayout(30, 3)
	if err != nil {
		t.Fatal(err)
	}
	plan := dp.Plan{Kind: dp.PlanServers, Owners: 5, CSPs: 3}
	sb, err := plan.ShareBound(5)
	if err != nil {
		t.Fatal(err)
	}
	calibrate := func(t *testing.T, eps float64, g uint) dp.Calibration {
		c, err := dp.CalibrateShares(eps, 1e-6, dp.DiscriminantSplit, l3, 1<<g, g, sb)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, g := range []uint{4, 8, 16} {
		t.Run(fmt.Sprintf("g%d", g), func(t *testing.T) {
			l, _ := openLedger(t, 1)
			var admitted []dp.Cost
			old := 0.0 // what the rho-only ledger counted
			jobs := 0
			for i := 0; ; i++ {
				eps := []float64{0.5, 0.2, 0.1, 0.05}[i%4]
				c := calibrate(t, eps, g)
				id := fmt.Sprintf("job-%03d", i)
				if _, err := l.Reserve("d", id, c.Cost, eps, 1e-6, ""); errors.Is(err, ErrBudget) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				if err := l.Commit("d", id); err != nil {
					t.Fatal(err)
				}
				admitted = append(admitted, c.Cost)
				old += float64(c.Cost.Rho)
				jobs++
				if total := dp.Compose(admitted...).Epsilon(1e-6); total > 1 {
					t.Fatalf("after %d jobs the certified total is epsilon %v > 1", jobs, total)
				}
			}
			total := dp.Compose(admitted...)
			bal, _ := l.Balance("d")
			if jobs == 0 || math.Abs(bal.EpsilonSpent()-total.Epsilon(1e-6)) > 1e-12 || bal.EpsilonSpent() > 1 {
				t.Fatalf("%d jobs, balance %v, total %v", jobs, bal.EpsilonSpent(), total.Epsilon(1e-6))
			}
			t.Logf("g = %d: %d jobs admitted, certified epsilon %.7f (correction %.3g); their rho alone reads epsilon %.7f",
				g, jobs, total.Epsilon(1e-6), 2*total.Eta, dp.BudgetEpsilon(old, 1e-6))
			// The exact budget.
			for _, eps := range []float64{0.5, 1} {
				l, _ := openLedger(t, eps)
				if _, err := l.Reserve("d", "exact", calibrate(t, eps, g).Cost, eps, 1e-6, ""); err != nil {
					t.Errorf("a job of epsilon %v against a budget of %v: %v", eps, eps, err)
				}
			}
		})
	}
}

// TestLegacyEntries: an entry written before costs were kept (rho, epsilon
// and delta only) counts LegacyFactor times its rho, with the correction
// its calibration could have set aside, in the totals and the checks.
func TestLegacyEntries(t *testing.T) {
	l, _ := openLedger(t, 5)
	old := entry{Job: "old-job", Rho: 0.02, Epsilon: 1, Delta: 1e-6, State: Committed}
	if err := l.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(bucketLedger).CreateBucketIfNotExists([]byte("ledger:d"))
		if err != nil {
			return err
		}
		return put(b, old)
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.rebuildTotals(); err != nil {
		t.Fatal(err)
	}
	bal, _ := l.Balance("d")
	if bal.Spent != dp.LegacyFactor*0.02 || !(bal.SpentCost.Eta > 0) {
		t.Fatalf("legacy entry counted %+v", bal.SpentCost)
	}
}

// TestTwoSchemasOneFileShareLedger: two datasets whose schemas read the same
// file (once by its path, once through a symbolic link) share one ledger,
// so a job on one spends the budget of both; a third dataset on another
// file has its own. A restart with a budget below what the ledger spent is
// refused with the amount spent; the same budget starts.
func TestTwoSchemasOneFileShareLedger(t *testing.T) {
	dir := t.TempDir()
	csv := "a,b,label\n1,2,x\n2,1,y\n3,3,x\n"
	path, other := filepath.Join(dir, "rows.csv"), filepath.Join(dir, "other.csv")
	for _, p := range []string{path, other} {
		if err := transport.WriteFileAtomic(p, []byte(csv)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(path, filepath.Join(dir, "link.csv")); err != nil {
		t.Fatal(err)
	}
	schemaOf := func(id string, bits uint) *schema.Schema {
		sch, err := schema.Infer(strings.NewReader(csv), id, "label")
		if err != nil {
			t.Fatal(err)
		}
		sch.Bits = bits
		return sch
	}
	start := func(eps float64) (*Owner, error) {
		return New(Config{Dialer: transport.Dialer{Insecure: true, Self: transport.Identity{Role: transport.RoleOwner, ID: "o1"}},
			ProxyAddr: "passthrough:///nowhere", Store: filepath.Join(dir, "state"),
			Datasets: []*Dataset{
				{Schema: schemaOf("first", 16), CSV: path, Epsilon: eps, Delta: 1e-6},
				{Schema: schemaOf("second", 8), CSV: filepath.Join(dir, "link.csv"), Epsilon: eps, Delta: 1e-6},
				{Schema: schemaOf("elsewhere", 16), CSV: other, Epsilon: eps, Delta: 1e-6},
			}, Policy: Policy{Committee: job.CommitteePolicy{AnyMembers: true}}})
	}
	o, err := start(2)
	if err != nil {
		t.Fatal(err)
	}
	c := dp.Cost{Rho: 0.05, Eta: 1e-9, Tail: 1e-23}
	if _, err := o.ledger.Reserve("first", strings.Repeat("ab", 32), c, 1, 1e-6, ""); err != nil {
		t.Fatal(err)
	}
	if err := o.ledger.Commit("first", strings.Repeat("ab", 32)); err != nil {
		t.Fatal(err)
	}
	a, _ := o.Balance("first")
	b, _ := o.Balance("second")
	e, _ := o.Balance("elsewhere")
	if a.Ledger != b.Ledger || a.Ledger == e.Ledger || b.SpentCost != c || e.Spent != 0 {
		t.Fatalf("balances: %+v\n%+v\n%+v", a, b, e)
	}
	spent := a.EpsilonSpent()
	o.db.Close()
	if _, err := start(1); err == nil || !strings.Contains(err.Error(), "has spent epsilon "+fmt.Sprintf("%.6g", spent)) ||
		!strings.Contains(err.Error(), "above the budget of epsilon 1") {
		t.Fatalf("restart with a budget below what was spent: %v", err)
	}
	o, err = start(2)
	if err != nil {
		t.Fatal(err)
	}
	o.db.Close()
}

// TestLedgersMovedToSources: an owner whose ledgers were kept by dataset
// (before ledgers were kept by source) finds its entries in the ledger of
// the dataset's source after a restart.
func TestLedgersMovedToSources(t *testing.T) {
	o := testOwner(t)
	dir := o.cfg.Store
	cfg := o.cfg
	old := entry{Job: strings.Repeat("cd", 32), Rho: 0.01, Epsilon: 1, Delta: 1e-6, State: Committed}
	if err := o.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketLedger).DeleteBucket([]byte(o.ledger.key("ds"))); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		b, err := tx.Bucket(bucketLedger).CreateBucket([]byte("ds"))
		if err != nil {
			return err
		}
		return put(b, old)
	}); err != nil {
		t.Fatal(err)
	}
	o.db.Close()
	cfg.Store, cfg.Metrics = dir, nil
	o2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer o2.db.Close()
	entries, _ := o2.Ledger("ds")
	bal, _ := o2.Balance("ds")
	if len(entries) != 1 || entries[0].Job != old.Job || entries[0].Dataset != "ds" || bal.Spent != dp.LegacyFactor*0.01 || !strings.HasPrefix(bal.Ledger, "file:") {
		t.Fatalf("after the move: %+v, balance %+v", entries, bal)
	}
}
