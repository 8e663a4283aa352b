package chaos

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestChaosShort is a short run of the chaos suite (make chaos runs 200
// jobs): 12 jobs on two deployments with random faults from a fixed seed,
// every invariant checked after every job, zero violations.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: skipped with -short")
	}
	rep := runLogged(t, Config{Seed: 20261123, Jobs: 12, JobsPerEpisode: 6, Parallel: 2})
	if rep.Jobs != 12 || !rep.OK() {
		t.Fatalf("%d jobs, %d violations", rep.Jobs, len(rep.Violations))
	}
	var faults int64
	for _, n := range rep.Faults {
		faults += n
	}
	if faults == 0 {
		t.Fatal("no faults injected")
	}
}

// runLogged runs the suite with cfg in a fresh directory, logs its progress
// and report, and fails the test if it could not run.
func runLogged(t *testing.T, cfg Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	cfg.Dir, cfg.Progress, cfg.Logger = t.TempDir(), &progress, testLogger(t)
	rep, err := Run(ctx, cfg)
	t.Log("\n" + progress.String())
	if rep != nil {
		var out bytes.Buffer
		rep.WriteText(&out)
		t.Log("\n" + out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
