package owner

import (
	"errors"
	"fmt"
	"slices"
)

// Part is what this owner did about a job: the state of its job record.
type Part string

// Parts (JobRecord.State).
const (
	PartDeclined  Part = "declined"
	PartUploading Part = "uploading" // reserved, upload stored, not acknowledged yet
	PartUploaded  Part = "uploaded"  // acknowledged, budget committed
	PartReleased  Part = "released"  // reservation returned, nothing included
	PartRefunded  Part = "refunded"  // included, but the job failed before any key switch
	PartSkipped   Part = "skipped"   // the job had ended before this owner saw it
	PartCompleted Part = "completed" // included, and the job ended (budget spent)
)

// partSteps are the parts a part may become in one step; "" is a job the
// owner has no record of. A part may also be written again as itself (a
// decline reported, an acknowledgement received twice). The parts that are
// not keys are final.
var partSteps = map[Part][]Part{
	"":            {PartDeclined, PartUploading, PartSkipped},
	PartUploading: {PartUploaded, PartReleased},
	PartUploaded:  {PartCompleted, PartRefunded},
}

// Known reports whether p is one of the parts.
func (p Part) Known() bool {
	switch p {
	case PartDeclined, PartUploading, PartUploaded, PartReleased, PartRefunded, PartSkipped, PartCompleted:
		return true
	}
	return false
}

// Final reports whether a record in part p never changes.
func (p Part) Final() bool { return len(partSteps[p]) == 0 }

// CanBecome reports whether a record in part p may be written as part to in
// one step: the transitions the owner's store allows.
func (p Part) CanBecome(to Part) bool {
	return to.Known() && (p == to || slices.Contains(partSteps[p], to))
}

// Reaches reports whether a record in part p may be in part to after any
// number of steps (p itself included): what a record read before a crash may
// be after the restart.
func (p Part) Reaches(to Part) bool {
	return stepsReach(partSteps, p, to)
}

// errPartTransition refuses a write of a job record that its part does not
// allow (partSteps).
var errPartTransition = errors.New("not allowed from its part")

// checkPart refuses the transition of a job record from part `from` (""
// when there is none) to part `to`.
func checkPart(id string, from, to Part) error {
	if !from.CanBecome(to) {
		return fmt.Errorf("job %s: its record is %q, cannot become %q: %w", id, from, to, errPartTransition)
	}
	return nil
}

// Ledger entry states (PROTOCOL.md section 8).
const (
	// Reserved: the job's rho is set aside before the owner computes its
	// share; it counts against the budget.
	Reserved = "reserved"
	// Committed: the upload was acknowledged; the rho is spent.
	Committed = "committed"
	// Released: the reservation was returned (nothing was uploaded).
	Released = "released"
	// Refunded: the job failed before any key switch, so nothing was ever
	// released from the data.
	Refunded = "refunded"
)

// ledgerSteps are the states a ledger entry may take in one step (Reserve
// creates an entry as Reserved); the others are final.
var ledgerSteps = map[string][]string{
	Reserved:  {Committed, Released, Refunded},
	Committed: {Refunded},
}

// LedgerReaches reports whether a ledger entry in state from may be in state
// to after any number of steps (from itself included).
func LedgerReaches(from, to string) bool { return stepsReach(ledgerSteps, from, to) }

// stepsReach reports whether to is reachable from `from` in the transition
// table steps (reflexively).
func stepsReach[S comparable](steps map[S][]S, from, to S) bool {
	seen := map[S]bool{from: true}
	for todo := []S{from}; len(todo) > 0; todo = todo[1:] {
		if todo[0] == to {
			return true
		}
		for _, n := range steps[todo[0]] {
			if !seen[n] {
				seen[n] = true
				todo = append(todo, n)
			}
		}
	}
	return false
}
