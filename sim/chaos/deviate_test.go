package chaos

import (
	"testing"
)

// TestDeviatingProxy runs one episode per deviation of the proxy's test
// double (two jobs each, the deviation in one): every deviation is either
// detected by the honest parties (the job fails with a stated reason: a
// sum that is not the named owners' proven uploads or a crafted upload is
// refused by the members, who make no share; a replay is refused or
// answered with the same shares) or bounded (a status lie yields no wrong
// release; a statistics result shifted by the proxy keeps the honest
// parties' noise). Every deviation's invariant must have been checked, with no
// violation of any invariant.
func TestDeviatingProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: skipped with -short")
	}
	n := len(AllDeviations)
	rep := runLogged(t, Config{Seed: 19, Jobs: 2 * n, JobsPerEpisode: 2, Parallel: 2, Deviations: AllDeviations})
	if !rep.OK() {
		t.Fatalf("%d violations", len(rep.Violations))
	}
	for _, inv := range rep.Invariants {
		switch inv.Name {
		case InvDevKey, InvDevSum, InvDevReplay, InvDevStatus, InvDevNoise, InvDevShift:
			if inv.Checks == 0 {
				t.Errorf("%q never checked", inv.Name)
			}
		}
	}
}
