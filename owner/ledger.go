package owner

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fedpca/fedpca/protocol/dp"
)

// ErrBudget reports a job that the ledger's remaining budget cannot pay.
var ErrBudget = errors.New("privacy budget exhausted")

var (
	errNoEntry    = errors.New("no ledger entry")
	errTransition = errors.New("not allowed from its state")
)

// entry is one job's line in a ledger.
type entry struct {
	Job     string `json:"job"`
	Dataset string `json:"dataset,omitempty"`
	// Cost is what the job costs (the calibration's, dp.Calibration.Cost);
	// nil in an entry written before costs were kept, which is charged
	// dp.LegacyCost of its Rho, Epsilon and Delta. Rho is Cost.Rho.
	Cost    *dp.Cost  `json:"cost,omitempty"`
	Rho     float64   `json:"rho"`
	Epsilon float64   `json:"epsilon"`
	Delta   float64   `json:"delta"`
	State   string    `json:"state"`
	At      time.Time `json:"at"`
	// Release says what a job without DP noise releases (an exact
	// components job: "exact components: top K of D features"); empty
	// for a job whose noise its cost accounts for. Such jobs cost no
	// budget, and the ledger counts them (ExactRule).
	Release string `json:"release,omitempty"`
}

// ExactRule bounds the exact components jobs one source of rows takes part
// in: at most Jobs in any Period (the ones reserved or committed; a job
// that released nothing does not count).
type ExactRule struct {
	Jobs   int
	Period time.Duration
}

// The exact components rule by default: four jobs in thirty days.
const (
	DefaultExactJobs   = 4
	DefaultExactPeriod = 30 * 24 * time.Hour
)

// ErrExactJobs reports an exact components job beyond the ledger's rule.
var ErrExactJobs = errors.New("exact components jobs over this owner's limit")

// cost returns what the entry counts for.
func (e entry) cost() dp.Cost {
	if e.Cost != nil {
		return *e.Cost
	}
	return dp.LegacyCost(e.Rho, e.Epsilon, e.Delta)
}

// Balance is a ledger's budget and what it has spent and reserved, for one
// of the datasets that share it.
type Balance struct {
	Dataset string `json:"dataset"`
	// Ledger names the ledger: the source of the rows (see Dataset.Ledger).
	Ledger string `json:"ledger"`
	// Epsilon and Delta are the budget; the ledger admits a job when the
	// cost of every job spent and reserved, with it, is within them
	// (dp.Cost.Within).
	Epsilon float64 `json:"epsilon_budget"`
	Delta   float64 `json:"delta"`
	// SpentCost and ReservedCost are the sums of the entries' costs.
	SpentCost    dp.Cost `json:"spent"`
	ReservedCost dp.Cost `json:"reserved"`
	// Budget, Spent and Reserved are in zCDP rho, for people and metrics:
	// the rho of the budget for releases without correction
	// (dp.BudgetRho), and the rho parts of the costs.
	Budget   float64 `json:"rho_budget"`
	Spent    float64 `json:"rho_spent"`
	Reserved float64 `json:"rho_reserved"`
}

// Remaining is the rho still available for new jobs (dp.Cost.Room of what
// is spent and reserved); negative when they are over the budget.
func (b Balance) Remaining() float64 {
	return b.SpentCost.Plus(b.ReservedCost).Room(b.Epsilon, b.Delta)
}

// EpsilonSpent is the epsilon at the budget's delta of what is spent.
func (b Balance) EpsilonSpent() float64 { return b.SpentCost.Epsilon(b.Delta) }

// EpsilonSpentAndReserved is the epsilon at the budget's delta of what is
// spent and reserved together (what the ledger admits a further job
// against).
func (b Balance) EpsilonSpentAndReserved() float64 {
	return b.SpentCost.Plus(b.ReservedCost).Epsilon(b.Delta)
}

var (
	bucketLedger = []byte("ledger")
	// bucketTotals holds each ledger's totals (ledgerTotals), so that a
	// balance does not read every entry the ledger ever had.
	bucketTotals = []byte("ledger-totals")
)

// ledgerBudget is one ledger's budget.
type ledgerBudget struct {
	Epsilon, Delta float64
	Datasets       []string
}

// ledger is an owner's privacy-budget ledgers: one per source of rows
// (Dataset.Ledger), so that datasets reading the same rows (two schemas
// over one file) share one budget; each a bbolt bucket with one entry per
// job. Every change is one transaction (fsynced by bbolt), so entries
// survive restarts and concurrent jobs never overspend: a reservation
// checks the balance and writes the entry atomically. Its methods take a
// dataset and work on that dataset's ledger.
type ledger struct {
	db      *bolt.DB
	keys    map[string]string        // dataset -> ledger
	budgets map[string]*ledgerBudget // ledger -> budget
	exact   ExactRule                // the exact components jobs each ledger admits
}

// key returns the dataset's ledger; a dataset this owner no longer serves
// keeps the bucket it had before ledgers were kept by source: its ID.
func (l *ledger) key(dataset string) string {
	if k, ok := l.keys[dataset]; ok {
		return k
	}
	return dataset
}

// describe writes a cost as operators set budgets: epsilon at the budget's
// delta, with the rho the Gaussian part counts (display only; the ledger
// decides with dp.Cost.Within).
func describe(c dp.Cost, delta float64) string {
	if !(delta > 0 && delta < 1) {
		return fmt.Sprintf("rho %.6g", float64(c.Rho))
	}
	return fmt.Sprintf("epsilon %.6g (rho %.6g)", c.Epsilon(delta), float64(c.Rho))
}

func (l *ledger) balanceTx(tx *bolt.Tx, dataset string) (Balance, error) {
	key := l.key(dataset)
	t, err := totalsTx(tx, key)
	if err != nil {
		return Balance{}, err
	}
	bal := Balance{Dataset: dataset, Ledger: key, SpentCost: t.Spent.cost(), ReservedCost: t.Reserved.cost()}
	if b := l.budgets[key]; b != nil {
		bal.Epsilon, bal.Delta = b.Epsilon, b.Delta
		bal.Budget = dp.Cost{}.Room(b.Epsilon, b.Delta)
	}
	bal.Spent, bal.Reserved = float64(bal.SpentCost.Rho), float64(bal.ReservedCost.Rho)
	return bal, nil
}

// costSum is a sum of costs, kept exactly (as rationals: a float64 is one).
type costSum struct {
	Rho, Eta, Tail big.Rat
}

func (s *costSum) add(c dp.Cost, sign int) {
	for _, p := range []struct {
		to *big.Rat
		v  dp.Float
	}{{&s.Rho, c.Rho}, {&s.Eta, c.Eta}, {&s.Tail, c.Tail}} {
		var r big.Rat
		r.SetFloat64(float64(p.v)) // finite: decodeEntry and the calibration check it
		if sign < 0 {
			r.Neg(&r)
		}
		p.to.Add(p.to, &r)
	}
}

func (s *costSum) cost() dp.Cost {
	rho, _ := s.Rho.Float64()
	eta, _ := s.Eta.Float64()
	tail, _ := s.Tail.Float64()
	return dp.Cost{Rho: dp.Float(rho), Eta: dp.Float(eta), Tail: dp.Float(tail)}
}

// ledgerTotals are a ledger's costs reserved and spent: the sums over its
// entries, kept exactly and updated in the transaction that changes an
// entry, so that a balance costs the same after ten thousand jobs as after
// one, is the same whatever the order the jobs came in, and a release takes
// back exactly what its reservation set aside. They are a copy of what the
// entries say: rebuilt from them at every start (ledger.rebuildTotals) and
// when missing.
type ledgerTotals struct {
	Reserved, Spent costSum
}

// count adds (sign +1) or takes back (-1) an entry's cost in the total of
// its state; released and refunded entries count in neither.
func (t *ledgerTotals) count(state string, c dp.Cost, sign int) {
	switch state {
	case Reserved:
		t.Reserved.add(c, sign)
	case Committed:
		t.Spent.add(c, sign)
	}
}

// scanTotals sums a ledger's entries.
func scanTotals(tx *bolt.Tx, key string) (*ledgerTotals, error) {
	t := &ledgerTotals{}
	b := tx.Bucket(bucketLedger).Bucket([]byte(key))
	if b == nil {
		return t, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		e, err := decodeEntry(v)
		if err != nil {
			return fmt.Errorf("ledger %s, key %.80q: %w", key, k, err)
		}
		t.count(e.State, e.cost(), +1)
		return nil
	})
	return t, err
}

// totalsTx returns a ledger's totals: the stored ones, or the sum of its
// entries when none are stored.
func totalsTx(tx *bolt.Tx, key string) (*ledgerTotals, error) {
	if b := tx.Bucket(bucketTotals); b != nil {
		if v := b.Get([]byte(key)); v != nil {
			t, err := decodeTotals(v)
			if err != nil {
				return nil, fmt.Errorf("ledger totals of %s: %w", key, err)
			}
			return t, nil
		}
	}
	return scanTotals(tx, key)
}

// ratText is how big.Rat writes a rational: an integer or a fraction, in
// decimal digits, possibly negative (a sum taken back to zero passes
// through none, but rounding never makes one: the sums are exact).
// Anything else (an exponent could ask for a number of a billion digits),
// or more than 5,001 characters, is refused before big.Rat parses it: an
// exact sum of float64 values needs under 700 digits above the bar and 330
// below it.
var ratText = regexp.MustCompile(`^[0-9]+(/[0-9]+)?$`)

// totalsJSON is how ledgerTotals are stored.
type totalsJSON struct {
	Reserved, Spent         string
	ReservedEta, SpentEta   string
	ReservedTail, SpentTail string
	// Format marks totals of costs (older totals, of rho alone, are
	// rebuilt from the entries).
	Format int
}

const totalsFormat = 2

// decodeTotals decodes stored totals and checks them: rationals, not
// negative, in the form ledgerTotals is written in.
func decodeTotals(v []byte) (*ledgerTotals, error) {
	var raw totalsJSON
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, err
	}
	if raw.Format != totalsFormat {
		return nil, fmt.Errorf("totals of format %d, want %d", raw.Format, totalsFormat)
	}
	t := &ledgerTotals{}
	for _, f := range []struct {
		text string
		to   *big.Rat
	}{{raw.Reserved, &t.Reserved.Rho}, {raw.Spent, &t.Spent.Rho}, {raw.ReservedEta, &t.Reserved.Eta}, {raw.SpentEta, &t.Spent.Eta},
		{raw.ReservedTail, &t.Reserved.Tail}, {raw.SpentTail, &t.Spent.Tail}} {
		if len(f.text) > 5001 || !ratText.MatchString(f.text) {
			return nil, fmt.Errorf("%.40q is not a sum >= 0", f.text)
		}
		if _, ok := f.to.SetString(f.text); !ok {
			return nil, fmt.Errorf("%.40q is not a rational", f.text)
		}
	}
	return t, nil
}

// encodeTotals encodes totals as decodeTotals reads them.
func encodeTotals(t *ledgerTotals) ([]byte, error) {
	return json.Marshal(totalsJSON{Reserved: t.Reserved.Rho.RatString(), Spent: t.Spent.Rho.RatString(),
		ReservedEta: t.Reserved.Eta.RatString(), SpentEta: t.Spent.Eta.RatString(),
		ReservedTail: t.Reserved.Tail.RatString(), SpentTail: t.Spent.Tail.RatString(), Format: totalsFormat})
}

func putTotals(tx *bolt.Tx, key string, t *ledgerTotals) error {
	b, err := tx.CreateBucketIfNotExists(bucketTotals)
	if err != nil {
		return err
	}
	v, err := encodeTotals(t)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), v)
}

// recount moves an entry's cost from the total of state from ("" for a new
// entry) to that of state to, in the transaction that changes the entry and
// before it does (totals missing are summed from the entries as they were).
func recount(tx *bolt.Tx, key string, c dp.Cost, from, to string) error {
	t, err := totalsTx(tx, key)
	if err != nil {
		return err
	}
	t.count(from, c, -1)
	t.count(to, c, +1)
	return putTotals(tx, key, t)
}

// rebuildTotals sets every ledger's totals to the sums of its entries: the
// entries are what counts, the totals only spare reading them all. Run at
// start (reading every entry once).
func (l *ledger) rebuildTotals() error {
	return l.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketTotals); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		return tx.Bucket(bucketLedger).ForEachBucket(func(k []byte) error {
			t, err := scanTotals(tx, string(k))
			if err != nil {
				return err
			}
			return putTotals(tx, string(k), t)
		})
	})
}

// migrate moves the entries of ledgers kept by dataset (before ledgers were
// kept by source) into the ledger of the dataset's source, merging the
// datasets that read one source. Run at start, before rebuildTotals.
func (l *ledger) migrate() (moved int, err error) {
	err = l.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketLedger)
		for _, ds := range slices.Sorted(maps.Keys(l.keys)) {
			key := l.keys[ds]
			old := root.Bucket([]byte(ds))
			if key == ds || old == nil {
				continue
			}
			to, err := root.CreateBucketIfNotExists([]byte(key))
			if err != nil {
				return err
			}
			if err := old.ForEach(func(k, v []byte) error {
				if to.Get(k) != nil {
					return fmt.Errorf("ledger of dataset %s: job %.80q is in the ledger of %s already", ds, k, key)
				}
				var e map[string]any
				if err := json.Unmarshal(v, &e); err == nil && e["dataset"] == nil {
					e["dataset"] = ds
					if b, err := json.Marshal(e); err == nil {
						v = b
					}
				}
				moved++
				return to.Put(k, v)
			}); err != nil {
				return err
			}
			if err := root.DeleteBucket([]byte(ds)); err != nil {
				return err
			}
		}
		return nil
	})
	return moved, err
}

// elsewhere returns, for each dataset this owner serves, the other ledgers
// that hold spent or reserved jobs of it (its source moved: a file renamed,
// a query changed): their budget is not the dataset's any more.
func (l *ledger) elsewhere() (map[string][]string, error) {
	out := map[string][]string{}
	err := l.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketLedger)
		return root.ForEachBucket(func(k []byte) error {
			seen := map[string]bool{}
			return root.Bucket(k).ForEach(func(_, v []byte) error {
				e, err := decodeEntry(v)
				if err != nil {
					return err
				}
				key, served := l.keys[e.Dataset]
				if served && key != string(k) && !seen[e.Dataset] && (e.State == Committed || e.State == Reserved) {
					seen[e.Dataset] = true
					out[e.Dataset] = append(out[e.Dataset], string(k))
				}
				return nil
			})
		})
	})
	return out, err
}

// checkBudgets refuses a ledger that has spent and reserved more than its
// budget (an owner restarted with a smaller budget): it says how much.
func (l *ledger) checkBudgets() error {
	var problems []string
	err := l.db.View(func(tx *bolt.Tx) error {
		for _, key := range slices.Sorted(maps.Keys(l.budgets)) {
			b := l.budgets[key]
			bal, err := l.balanceTx(tx, b.Datasets[0])
			if err != nil {
				return err
			}
			total := bal.SpentCost.Plus(bal.ReservedCost)
			if total.Within(b.Epsilon, b.Delta) {
				continue
			}
			n, err := countEntries(tx, key)
			if err != nil {
				return err
			}
			problems = append(problems, fmt.Sprintf("the ledger of %s (dataset %s) has spent %s and reserved %s in %d jobs: %s together at delta %g, above the budget of epsilon %g; "+
				"start with a budget of at least epsilon %.6g", key, strings.Join(b.Datasets, ", "), describe(bal.SpentCost, b.Delta), describe(bal.ReservedCost, b.Delta), n,
				describe(total, b.Delta), b.Delta, b.Epsilon, total.Epsilon(b.Delta)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func countEntries(tx *bolt.Tx, key string) (int, error) {
	n := 0
	if b := tx.Bucket(bucketLedger).Bucket([]byte(key)); b != nil {
		err := b.ForEach(func(_, v []byte) error {
			e, err := decodeEntry(v)
			if err == nil && (e.State == Committed || e.State == Reserved) {
				n++
			}
			return err
		})
		return n, err
	}
	return 0, nil
}

// Balance returns a dataset's balance (its ledger's).
func (l *ledger) Balance(dataset string) (Balance, error) {
	var bal Balance
	err := l.db.View(func(tx *bolt.Tx) (err error) {
		bal, err = l.balanceTx(tx, dataset)
		return err
	})
	return bal, err
}

// Reserve sets a job's cost aside, or fails with ErrBudget. Reserving a job
// that already has an entry is a no-op returning that entry's state.
func (l *ledger) Reserve(dataset, jobID string, cost dp.Cost, eps, delta float64, release string) (state string, err error) {
	err = l.db.Update(func(tx *bolt.Tx) error {
		state, err = l.reserveTx(tx, dataset, jobID, cost, eps, delta, release)
		return err
	})
	return state, err
}

// reserveTx is Reserve within a transaction (the owner reserves in the
// transaction that stores its upload).
func (l *ledger) reserveTx(tx *bolt.Tx, dataset, jobID string, cost dp.Cost, eps, delta float64, release string) (string, error) {
	state, err := l.admit(tx, dataset, jobID, cost, release)
	if err != nil || state != "" {
		return state, err
	}
	key := l.key(dataset)
	b, err := tx.Bucket(bucketLedger).CreateBucketIfNotExists([]byte(key))
	if err != nil {
		return "", err
	}
	if err := recount(tx, key, cost, "", Reserved); err != nil {
		return "", err
	}
	c := cost
	return Reserved, put(b, entry{Job: jobID, Dataset: dataset, Cost: &c, Rho: float64(cost.Rho), Epsilon: eps, Delta: delta, State: Reserved, At: time.Now().UTC(), Release: release})
}

// CanReserve reports what Reserve would do, writing nothing: the state of
// the job's entry if it has one, "" if the cost fits the balance, or
// ErrBudget.
func (l *ledger) CanReserve(dataset, jobID string, cost dp.Cost, release string) (state string, err error) {
	err = l.db.View(func(tx *bolt.Tx) error {
		state, err = l.admit(tx, dataset, jobID, cost, release)
		return err
	})
	return state, err
}

// admit returns the state of the job's entry, or "" when it has none and
// the cost fits the balance, or ErrBudget: the cost of every job spent and
// reserved, with this one, must be within the budget (dp.Cost.Within, the
// one account: a job whose (epsilon, delta) is the whole budget fits an
// empty ledger). A job that releases exact components (release not empty)
// must also fit the ledger's ExactRule, else ErrExactJobs.
func (l *ledger) admit(tx *bolt.Tx, dataset, jobID string, cost dp.Cost, release string) (string, error) {
	if _, e, err := findEntry(tx, l.key(dataset), jobID); err != nil && !errors.Is(err, errNoEntry) {
		return "", err
	} else if err == nil {
		return e.State, nil
	}
	if !cost.Valid() || math.IsNaN(float64(cost.Rho)) {
		return "", fmt.Errorf("ledger %s: job %s: invalid cost %+v", l.key(dataset), jobID, cost)
	}
	bal, err := l.balanceTx(tx, dataset)
	if err != nil {
		return "", err
	}
	if release != "" {
		if err := l.admitExact(tx, l.key(dataset)); err != nil {
			return "", err
		}
	}
	if bal.Delta == 0 {
		return "", fmt.Errorf("ledger %s: no budget for dataset %s", bal.Ledger, dataset)
	}
	total := bal.SpentCost.Plus(bal.ReservedCost).Plus(cost)
	if !total.Within(bal.Epsilon, bal.Delta) {
		return "", fmt.Errorf("%w for dataset %s (ledger of %s), at delta %g: the job costs %s alone; with what is spent (%s) and reserved (%s) the ledger would certify %s, above its budget of epsilon %g (rho left %.6g)",
			ErrBudget, dataset, bal.Ledger, bal.Delta, describe(cost, bal.Delta), describe(bal.SpentCost, bal.Delta), describe(bal.ReservedCost, bal.Delta),
			describe(total, bal.Delta), bal.Epsilon, max(bal.Remaining(), 0))
	}
	return "", nil
}

// admitExact checks a ledger's exact components jobs of the rule's period
// against the rule.
func (l *ledger) admitExact(tx *bolt.Tx, key string) error {
	rule := l.exact
	if rule.Jobs == 0 {
		rule = ExactRule{Jobs: DefaultExactJobs, Period: DefaultExactPeriod}
	}
	b := tx.Bucket(bucketLedger).Bucket([]byte(key))
	if b == nil {
		return nil
	}
	since, n := time.Now().Add(-rule.Period), 0
	err := b.ForEach(func(_, v []byte) error {
		e, err := decodeEntry(v)
		if err == nil && e.Release != "" && (e.State == Reserved || e.State == Committed) && e.At.After(since) {
			n++
		}
		return err
	})
	if err != nil {
		return err
	}
	if n >= rule.Jobs {
		return fmt.Errorf("%w: ledger %s has taken part in %d exact components jobs in the last %s, its limit (owner serve --exact-components-jobs, --exact-components-period): each further one releases more of the exact covariance",
			ErrExactJobs, key, n, rule.Period)
	}
	return nil
}

// findEntry returns the ledger holding a job's entry and the entry: the
// ledger named key, or any other (a job whose dataset moved to another
// ledger).
func findEntry(tx *bolt.Tx, key, jobID string) (string, entry, error) {
	root := tx.Bucket(bucketLedger)
	try := func(k string) (entry, bool, error) {
		b := root.Bucket([]byte(k))
		if b == nil {
			return entry{}, false, nil
		}
		v := b.Get([]byte(jobID))
		if v == nil {
			return entry{}, false, nil
		}
		e, err := decodeEntry(v)
		return e, true, err
	}
	if e, ok, err := try(key); ok || err != nil {
		return key, e, err
	}
	found, fe := "", entry{}
	err := root.ForEachBucket(func(k []byte) error {
		if found != "" || string(k) == key {
			return nil
		}
		e, ok, err := try(string(k))
		if ok {
			found, fe = string(k), e
		}
		return err
	})
	if err != nil {
		return "", entry{}, err
	}
	if found == "" {
		return "", entry{}, fmt.Errorf("ledger %s: job %s: %w", key, jobID, errNoEntry)
	}
	return found, fe, nil
}

// decodeEntry decodes a ledger entry read back from the store and checks
// it: a job, a known state, a finite rho and cost that are not negative (a
// torn or edited entry must not make budget appear).
func decodeEntry(v []byte) (entry, error) {
	var e entry
	if err := json.Unmarshal(v, &e); err != nil {
		return entry{}, fmt.Errorf("ledger entry: %w", err)
	}
	switch e.State {
	case Reserved, Committed, Released, Refunded:
	default:
		return entry{}, fmt.Errorf("ledger entry of job %q: unknown state %q", e.Job, e.State)
	}
	if e.Job == "" || !(e.Rho >= 0) || math.IsInf(e.Rho, 0) {
		return entry{}, fmt.Errorf("ledger entry of job %q: rho %v", e.Job, e.Rho)
	}
	if c := e.Cost; c != nil {
		for _, x := range []dp.Float{c.Rho, c.Eta, c.Tail} {
			if !(x >= 0) || math.IsInf(float64(x), 0) {
				return entry{}, fmt.Errorf("ledger entry of job %q: cost %+v", e.Job, *c)
			}
		}
	}
	return e, nil
}

func put(b *bolt.Bucket, e entry) error {
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return b.Put([]byte(e.Job), v)
}

// transition moves a job's entry to another state, if its state allows it
// (ledgerSteps); an entry already there is left alone.
func (l *ledger) transition(dataset, jobID, to string) error {
	return l.db.Update(func(tx *bolt.Tx) error { return l.transitionTx(tx, dataset, jobID, to) })
}

// transitionTx is transition within a transaction.
func (l *ledger) transitionTx(tx *bolt.Tx, dataset, jobID, to string) error {
	key, e, err := findEntry(tx, l.key(dataset), jobID)
	if err != nil {
		return err
	}
	if e.State == to {
		return nil
	}
	if !slices.Contains(ledgerSteps[e.State], to) {
		return fmt.Errorf("ledger %s: job %s is %s, cannot become %s: %w", key, jobID, e.State, to, errTransition)
	}
	if err := recount(tx, key, e.cost(), e.State, to); err != nil {
		return err
	}
	e.State, e.At = to, time.Now().UTC()
	return put(tx.Bucket(bucketLedger).Bucket([]byte(key)), e)
}

// Commit marks a reservation spent (the upload was acknowledged).
func (l *ledger) Commit(dataset, jobID string) error {
	return l.transition(dataset, jobID, Committed)
}

// Release returns a reservation that was never uploaded.
func (l *ledger) Release(dataset, jobID string) error {
	return l.transition(dataset, jobID, Released)
}

// ReleaseIfReserved releases a job's reservation if it has one (no entry,
// or an entry in another state, is left alone) and says whether it did.
func (l *ledger) ReleaseIfReserved(dataset, jobID string) (bool, error) {
	err := l.transition(dataset, jobID, Released)
	if errors.Is(err, errNoEntry) || errors.Is(err, errTransition) {
		return false, nil
	}
	return err == nil, err
}

// Refund returns a committed job that failed before any key switch.
func (l *ledger) Refund(dataset, jobID string) error {
	return l.transition(dataset, jobID, Refunded)
}

// Entries returns the entries of a dataset's ledger (of every dataset that
// shares it).
func (l *ledger) Entries(dataset string) ([]entry, error) {
	var out []entry
	err := l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLedger).Bucket([]byte(l.key(dataset)))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			e, err := decodeEntry(v)
			if err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// stateTx returns the state of a job's entry, "" when it has none.
func (l *ledger) stateTx(tx *bolt.Tx, dataset, jobID string) (string, error) {
	_, e, err := findEntry(tx, l.key(dataset), jobID)
	if errors.Is(err, errNoEntry) {
		return "", nil
	}
	return e.State, err
}
