package chaos

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestDeviatingProxy runs one episode per deviation of the proxy's test
// double (two jobs each, the deviation in one): every deviation is either
// detected by the honest parties (the job fails with a stated reason, a
// replay is refused or answered with the same shares) or its release is
// exactly what the deviation made of the sum, with the honest parties'
// noise. Every deviation's invariant must have been checked, with no
// violation of any invariant.
func TestDeviatingProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	n := len(AllDeviations)
	rep, err := Run(ctx, Config{Seed: 19, Jobs: 2 * n, JobsPerEpisode: 2, Parallel: 2, Deviations: AllDeviations, Dir: t.TempDir(),
		Progress: &progress, Logger: testLogger(t)})
	t.Log("\n" + progress.String())
	if rep != nil {
		var out bytes.Buffer
		rep.WriteText(&out)
		t.Log("\n" + out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%d violations", len(rep.Violations))
	}
	for _, inv := range rep.Invariants {
		switch inv.Name {
		case InvDevKey, InvDevSum, InvDevReplay, InvDevStatus:
			if inv.Checks == 0 {
				t.Errorf("%q never checked", inv.Name)
			}
		}
	}
}
