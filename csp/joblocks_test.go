package csp

import (
	"fmt"
	"sync"
	"testing"
)

// Switches of one job run one at a time, of different jobs side by side, and
// no lock outlives the switches of its job.
func TestJobLocks(t *testing.T) {
	var l jobLocks
	var wg sync.WaitGroup
	inside := make([]int, 4) // switches inside each job's lock; guarded by that lock
	var bad sync.Map
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := i % len(inside)
			defer l.lock(fmt.Sprint("job", j))()
			if inside[j]++; inside[j] != 1 {
				bad.Store(j, inside[j])
			}
			inside[j]--
		}()
	}
	wg.Wait()
	bad.Range(func(k, v any) bool {
		t.Errorf("job%v: %v switches at once", k, v)
		return true
	})
	if n := l.len(); n != 0 {
		t.Fatalf("%d job locks left after every switch ended, want 0", n)
	}
}
