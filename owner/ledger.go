package owner

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fedpca/fedpca/protocol/dp"
)

// ErrBudget reports a job that the dataset's remaining budget cannot pay.
var ErrBudget = errors.New("privacy budget exhausted")

var (
	errNoEntry    = errors.New("no ledger entry")
	errTransition = errors.New("not allowed from its state")
)

// entry is one job's line in a dataset's ledger.
type entry struct {
	Job     string    `json:"job"`
	Rho     float64   `json:"rho"`
	Epsilon float64   `json:"epsilon"`
	Delta   float64   `json:"delta"`
	State   string    `json:"state"`
	At      time.Time `json:"at"`
}

// Balance is a dataset's budget in zCDP rho.
type Balance struct {
	Dataset  string  `json:"dataset"`
	Budget   float64 `json:"rho_budget"`
	Spent    float64 `json:"rho_spent"`
	Reserved float64 `json:"rho_reserved"`
}

// Remaining is the budget left for new jobs.
func (b Balance) Remaining() float64 { return b.Budget - b.Spent - b.Reserved }

var (
	bucketLedger = []byte("ledger")
	// bucketTotals holds each dataset's totals (ledgerTotals), so that a
	// balance does not read every entry the dataset ever had.
	bucketTotals = []byte("ledger-totals")
)

// ledger is an owner's privacy-budget ledger: one bbolt bucket per dataset,
// one entry per job. Every change is one transaction (fsynced by bbolt), so
// entries survive restarts and concurrent jobs never overspend: a
// reservation checks the balance and writes the entry atomically.
type ledger struct {
	db      *bolt.DB
	budgets map[string]float64 // dataset -> rho budget
	deltas  map[string]float64 // dataset -> the budget's delta (for people)
}

// eps writes a rho as operators set budgets: epsilon at the budget's delta,
// with the rho the ledger counts in (display only; the ledger decides in rho).
func (l *ledger) eps(dataset string, rho float64) string {
	delta := l.deltas[dataset]
	if delta <= 0 || delta >= 1 {
		return fmt.Sprintf("rho %.6g", rho)
	}
	return fmt.Sprintf("epsilon %.4g (rho %.6g)", dp.BudgetEpsilon(max(rho, 0), delta), rho)
}

func (l *ledger) balanceTx(tx *bolt.Tx, dataset string) (Balance, error) {
	t, err := totalsTx(tx, dataset)
	if err != nil {
		return Balance{}, err
	}
	bal := Balance{Dataset: dataset, Budget: l.budgets[dataset]}
	bal.Reserved, _ = t.Reserved.Float64()
	bal.Spent, _ = t.Spent.Float64()
	return bal, nil
}

// ledgerTotals are a dataset's rho reserved and spent: the sums over its
// entries, kept exactly (as rationals: a float64 is one) and updated in the
// transaction that changes an entry, so that a balance costs the same
// after ten thousand jobs as after one, is the same whatever the order the
// jobs came in, and a release takes back exactly what its reservation set
// aside. They are a copy of what the entries say: rebuilt from them at
// every start (ledger.rebuildTotals) and when missing.
type ledgerTotals struct {
	Reserved big.Rat `json:"reserved"`
	Spent    big.Rat `json:"spent"`
}

// count adds (sign +1) or takes back (-1) an entry's rho in the total of
// its state; released and refunded entries count in neither.
func (t *ledgerTotals) count(state string, rho float64, sign int) {
	var r big.Rat
	r.SetFloat64(rho) // finite: decodeEntry and the calibration check it
	if sign < 0 {
		r.Neg(&r)
	}
	switch state {
	case Reserved:
		t.Reserved.Add(&t.Reserved, &r)
	case Committed:
		t.Spent.Add(&t.Spent, &r)
	}
}

// scanTotals sums a dataset's entries.
func scanTotals(tx *bolt.Tx, dataset string) (*ledgerTotals, error) {
	t := &ledgerTotals{}
	b := tx.Bucket(bucketLedger).Bucket([]byte(dataset))
	if b == nil {
		return t, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		e, err := decodeEntry(v)
		if err != nil {
			return fmt.Errorf("dataset %s, key %.80q: %w", dataset, k, err)
		}
		t.count(e.State, e.Rho, +1)
		return nil
	})
	return t, err
}

// totalsTx returns a dataset's totals: the stored ones, or the sum of its
// entries when none are stored.
func totalsTx(tx *bolt.Tx, dataset string) (*ledgerTotals, error) {
	if b := tx.Bucket(bucketTotals); b != nil {
		if v := b.Get([]byte(dataset)); v != nil {
			t, err := decodeTotals(v)
			if err != nil {
				return nil, fmt.Errorf("ledger totals of dataset %s: %w", dataset, err)
			}
			return t, nil
		}
	}
	return scanTotals(tx, dataset)
}

// ratText is how big.Rat writes a rational: an integer or a fraction, in
// decimal digits. Anything else (an exponent could ask for a number of a
// billion digits), or more than 5,001 characters, is refused before big.Rat
// parses it: an exact sum of float64 rhos needs under 700 digits above the
// bar and 330 below it.
var ratText = regexp.MustCompile(`^[0-9]+(/[0-9]+)?$`)

// decodeTotals decodes stored totals and checks them: two rationals, not
// negative, in the form ledgerTotals is written in.
func decodeTotals(v []byte) (*ledgerTotals, error) {
	var raw struct{ Reserved, Spent string }
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, err
	}
	t := &ledgerTotals{}
	for _, f := range []struct {
		text string
		to   *big.Rat
	}{{raw.Reserved, &t.Reserved}, {raw.Spent, &t.Spent}} {
		if len(f.text) > 5001 || !ratText.MatchString(f.text) {
			return nil, fmt.Errorf("%.40q is not a rho sum >= 0", f.text)
		}
		if _, ok := f.to.SetString(f.text); !ok {
			return nil, fmt.Errorf("%.40q is not a rational", f.text)
		}
	}
	return t, nil
}

func putTotals(tx *bolt.Tx, dataset string, t *ledgerTotals) error {
	b, err := tx.CreateBucketIfNotExists(bucketTotals)
	if err != nil {
		return err
	}
	v, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return b.Put([]byte(dataset), v)
}

// recount moves an entry's rho from the total of state from ("" for a new
// entry) to that of state to, in the transaction that changes the entry and
// before it does (totals missing are summed from the entries as they were).
func recount(tx *bolt.Tx, dataset string, rho float64, from, to string) error {
	t, err := totalsTx(tx, dataset)
	if err != nil {
		return err
	}
	t.count(from, rho, -1)
	t.count(to, rho, +1)
	return putTotals(tx, dataset, t)
}

// rebuildTotals sets every dataset's totals to the sums of its entries:
// the entries are what counts, the totals only spare reading them all.
// Run at start (reading every entry once).
func (l *ledger) rebuildTotals() error {
	return l.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketTotals); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		return tx.Bucket(bucketLedger).ForEachBucket(func(ds []byte) error {
			t, err := scanTotals(tx, string(ds))
			if err != nil {
				return err
			}
			return putTotals(tx, string(ds), t)
		})
	})
}

// Balance returns a dataset's balance.
func (l *ledger) Balance(dataset string) (Balance, error) {
	var bal Balance
	err := l.db.View(func(tx *bolt.Tx) (err error) {
		bal, err = l.balanceTx(tx, dataset)
		return err
	})
	return bal, err
}

// Reserve sets a job's rho aside, or fails with ErrBudget. Reserving a job
// that already has an entry is a no-op returning that entry's state.
func (l *ledger) Reserve(dataset, jobID string, rho, eps, delta float64) (state string, err error) {
	err = l.db.Update(func(tx *bolt.Tx) error {
		state, err = l.reserveTx(tx, dataset, jobID, rho, eps, delta)
		return err
	})
	return state, err
}

// reserveTx is Reserve within a transaction (the owner reserves in the
// transaction that stores its upload).
func (l *ledger) reserveTx(tx *bolt.Tx, dataset, jobID string, rho, eps, delta float64) (string, error) {
	state, err := l.admit(tx, dataset, jobID, rho)
	if err != nil || state != "" {
		return state, err
	}
	b, err := tx.Bucket(bucketLedger).CreateBucketIfNotExists([]byte(dataset))
	if err != nil {
		return "", err
	}
	if err := recount(tx, dataset, rho, "", Reserved); err != nil {
		return "", err
	}
	return Reserved, put(b, entry{Job: jobID, Rho: rho, Epsilon: eps, Delta: delta, State: Reserved, At: time.Now().UTC()})
}

// CanReserve reports what Reserve would do, writing nothing: the state of
// the job's entry if it has one, "" if rho fits the balance, or ErrBudget.
func (l *ledger) CanReserve(dataset, jobID string, rho float64) (state string, err error) {
	err = l.db.View(func(tx *bolt.Tx) error {
		state, err = l.admit(tx, dataset, jobID, rho)
		return err
	})
	return state, err
}

// admit returns the state of the job's entry, or "" when it has none and
// rho fits the balance, or ErrBudget.
func (l *ledger) admit(tx *bolt.Tx, dataset, jobID string, rho float64) (string, error) {
	if b := tx.Bucket(bucketLedger).Bucket([]byte(dataset)); b != nil {
		if v := b.Get([]byte(jobID)); v != nil {
			e, err := decodeEntry(v)
			if err != nil {
				return "", err
			}
			return e.State, nil
		}
	}
	bal, err := l.balanceTx(tx, dataset)
	if err != nil {
		return "", err
	}
	if rho > bal.Remaining()*(1+1e-12) {
		return "", fmt.Errorf("%w for dataset %s, at delta %g: the job needs %s; %s of %s is left (spent %s, reserved %s)",
			ErrBudget, dataset, l.deltas[dataset], l.eps(dataset, rho), l.eps(dataset, max(bal.Remaining(), 0)), l.eps(dataset, bal.Budget),
			l.eps(dataset, bal.Spent), l.eps(dataset, bal.Reserved))
	}
	return "", nil
}

// decodeEntry decodes a ledger entry read back from the store and checks
// it: a job, a known state, a finite rho that is not negative (a torn or
// edited entry must not make budget appear).
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
	return l.db.Update(func(tx *bolt.Tx) error { return transitionTx(tx, dataset, jobID, to) })
}

// transitionTx is transition within a transaction.
func transitionTx(tx *bolt.Tx, dataset, jobID, to string) error {
	b := tx.Bucket(bucketLedger).Bucket([]byte(dataset))
	if b == nil {
		return fmt.Errorf("ledger %s: job %s: %w", dataset, jobID, errNoEntry)
	}
	v := b.Get([]byte(jobID))
	if v == nil {
		return fmt.Errorf("ledger %s: job %s: %w", dataset, jobID, errNoEntry)
	}
	e, err := decodeEntry(v)
	if err != nil {
		return err
	}
	if e.State == to {
		return nil
	}
	if !slices.Contains(ledgerSteps[e.State], to) {
		return fmt.Errorf("ledger %s: job %s is %s, cannot become %s: %w", dataset, jobID, e.State, to, errTransition)
	}
	if err := recount(tx, dataset, e.Rho, e.State, to); err != nil {
		return err
	}
	e.State, e.At = to, time.Now().UTC()
	return put(b, e)
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
// or an entry in another state, is left alone).
func (l *ledger) ReleaseIfReserved(dataset, jobID string) error {
	err := l.transition(dataset, jobID, Released)
	if errors.Is(err, errNoEntry) || errors.Is(err, errTransition) {
		return nil
	}
	return err
}

// Refund returns a committed job that failed before any key switch.
func (l *ledger) Refund(dataset, jobID string) error {
	return l.transition(dataset, jobID, Refunded)
}

// Entries returns a dataset's entries.
func (l *ledger) Entries(dataset string) ([]entry, error) {
	var out []entry
	err := l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLedger).Bucket([]byte(dataset))
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
