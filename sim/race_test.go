//go:build race

package sim

// raceEnabled: the tests run under the race detector, where proving and
// verifying uploads is twenty times slower and timings stretch.
const raceEnabled = true
