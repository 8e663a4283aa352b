//go:build race

package mpc

// raceEnabled keeps the larger SymEig cases out of runs under the race
// detector (about 10x slower).
const raceEnabled = true
