//go:build race

package eigen

// raceEnabled skips the whole encrypted iteration under the race detector
// (about 10x slower); TestSteps still runs every homomorphic step there.
const raceEnabled = true
