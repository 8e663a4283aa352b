package owner

import (
	"fmt"
	"testing"
	"time"
)

// The share times kept are those of the last sharesKept jobs, however many
// jobs the owner has done.
func TestRecentTimesBounded(t *testing.T) {
	var r recentTimes
	const jobs = 3 * sharesKept
	for i := range jobs {
		r.add(fmt.Sprint("job", i), time.Duration(i))
		r.add(fmt.Sprint("job", i), time.Duration(i)) // a repeat replaces, does not count twice
	}
	if len(r.times) != sharesKept || len(r.order) != sharesKept {
		t.Fatalf("kept %d times (%d in order), want %d", len(r.times), len(r.order), sharesKept)
	}
	for i := range jobs {
		d, ok := r.times[fmt.Sprint("job", i)]
		if want := i >= jobs-sharesKept; ok != want || (ok && d != time.Duration(i)) {
			t.Fatalf("job%d: kept %v (%v), want kept %v", i, ok, d, want)
		}
	}
}
