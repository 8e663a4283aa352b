//go:build race

package chaos

import "time"

// Under the race detector an owner's proof takes 0.6 s instead of 30 ms
// (docs/BENCHMARKS.md, "Upload proofs"), so the suite's jobs get three
// times the time to upload, end and settle.
const raceSlowdown = 3

func init() {
	chaosDeadline *= raceSlowdown
	chaosSettleBound *= raceSlowdown
	chaosJobBound = chaosDeadline + chaosSwitchTimeout + 30*time.Second
}
