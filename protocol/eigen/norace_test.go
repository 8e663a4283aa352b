//go:build !race

package eigen

const raceEnabled = false
