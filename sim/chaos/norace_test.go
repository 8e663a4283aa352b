//go:build !race

package chaos

const raceSlowdown = 1
