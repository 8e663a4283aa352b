package owner

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/transport"
)

// LedgerView is one privacy ledger as its owner's governance officer reads
// it (fedpca owner ledger): every job's entry, what it cost in epsilon at
// the budget's delta as well as in rho, and the totals. Nothing in it
// leaves the owner.
type LedgerView struct {
	// Ledger names the source of rows the ledger is kept for.
	Ledger string `json:"ledger"`
	// Datasets are the datasets that share it (known to a running owner;
	// offline, those its entries name).
	Datasets []string `json:"datasets"`
	// EpsilonBudget and Delta are the budget: the owner's, or as given to
	// an offline reading. Every epsilon here is at Delta.
	EpsilonBudget float64 `json:"epsilon_budget"`
	Delta         float64 `json:"delta"`
	// Spent is what the acknowledged uploads spent; SpentAndReserved adds
	// the reservations of jobs in progress (what the ledger admits a job
	// against). Remaining is the rho a further job may still cost, and
	// EpsilonRemaining the epsilon of a job of that rho.
	Spent            Amount      `json:"spent"`
	SpentAndReserved Amount      `json:"spent_and_reserved"`
	Remaining        float64     `json:"rho_remaining"`
	EpsilonRemaining float64     `json:"epsilon_remaining"`
	Jobs             []LedgerJob `json:"jobs"`
}

// Amount is a cost as rho (the Gaussian part, zCDP) and as epsilon at the
// ledger's delta (with the discrete corrections: dp.Cost.Epsilon).
type Amount struct {
	Rho     float64 `json:"rho"`
	Epsilon float64 `json:"epsilon"`
}

// LedgerJob is one job's entry: its state (reserved, committed: spent,
// released or refunded: nothing spent), what it cost, and the epsilon and
// delta the job asked for.
type LedgerJob struct {
	Job        string    `json:"job"`
	Dataset    string    `json:"dataset,omitempty"`
	State      string    `json:"state"`
	At         time.Time `json:"at"`
	Cost       Amount    `json:"cost"`
	JobEpsilon float64   `json:"job_epsilon"`
	JobDelta   float64   `json:"job_delta"`
	// Release is what a job without noise released (exact components:
	// which, of how many features); empty for a job with noise.
	Release string `json:"release,omitempty"`
}

// amount is a cost as Amount, at delta.
func amount(c dp.Cost, delta float64) Amount {
	return Amount{Rho: float64(c.Rho), Epsilon: c.Epsilon(delta)}
}

// views reads every ledger in the store, oldest entry first, with the
// totals the ledger admits jobs against; budget gives each ledger's
// budget.
func views(tx *bolt.Tx, budget func(key string) *ledgerBudget) ([]LedgerView, error) {
	root := tx.Bucket(bucketLedger)
	if root == nil {
		return nil, nil
	}
	var out []LedgerView
	err := root.ForEachBucket(func(k []byte) error {
		key := string(k)
		b := budget(key)
		v := LedgerView{Ledger: key, EpsilonBudget: b.Epsilon, Delta: b.Delta, Datasets: slices.Clone(b.Datasets)}
		t, err := totalsTx(tx, key)
		if err != nil {
			return err
		}
		err = root.Bucket(k).ForEach(func(_, raw []byte) error {
			e, err := decodeEntry(raw)
			if err != nil {
				return fmt.Errorf("ledger %s: %w", key, err)
			}
			v.Jobs = append(v.Jobs, LedgerJob{Job: e.Job, Dataset: e.Dataset, State: e.State, At: e.At, Cost: amount(e.cost(), b.Delta), JobEpsilon: e.Epsilon, JobDelta: e.Delta, Release: e.Release})
			if e.Dataset != "" && !slices.Contains(v.Datasets, e.Dataset) {
				v.Datasets = append(v.Datasets, e.Dataset)
			}
			return nil
		})
		if err != nil {
			return err
		}
		slices.SortStableFunc(v.Jobs, func(a, b LedgerJob) int { return a.At.Compare(b.At) })
		slices.Sort(v.Datasets)
		spent, both := t.Spent.cost(), t.Spent.cost().Plus(t.Reserved.cost())
		v.Spent, v.SpentAndReserved = amount(spent, b.Delta), amount(both, b.Delta)
		v.Remaining = both.Room(b.Epsilon, b.Delta)
		if b.Delta > 0 && b.Delta < 1 {
			v.EpsilonRemaining = dp.BudgetEpsilon(max(v.Remaining, 0), b.Delta)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// Ledgers returns the owner's ledgers with its budgets (for its operator,
// while it runs: see ReadLedgers for a stopped owner's).
func (o *Owner) Ledgers() ([]LedgerView, error) {
	var out []LedgerView
	err := o.db.View(func(tx *bolt.Tx) (err error) {
		out, err = views(tx, func(key string) *ledgerBudget {
			if b := o.ledger.budgets[key]; b != nil {
				return b
			}
			return &ledgerBudget{} // a source this owner no longer serves
		})
		return err
	})
	return out, err
}

// ReadLedgers reads the ledgers of a stopped owner's state directory
// (read-only; a running owner holds its store: transport.ErrStoreLocked),
// every epsilon at delta and the remaining budget out of (epsilon, delta):
// the budget is the owner's configuration, not stored, so the caller gives
// it. A directory without a store has no ledgers.
func ReadLedgers(store string, epsilon, delta float64) ([]LedgerView, error) {
	if _, err := dp.BudgetRho(epsilon, delta); err != nil {
		return nil, fmt.Errorf("budget: %w", err)
	}
	db, err := transport.ReadStore(store, dbFileName)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	defer db.Close()
	var out []LedgerView
	err = db.View(func(tx *bolt.Tx) (err error) {
		out, err = views(tx, func(string) *ledgerBudget { return &ledgerBudget{Epsilon: epsilon, Delta: delta} })
		return err
	})
	return out, err
}
