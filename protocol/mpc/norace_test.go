//go:build !race

package mpc

const raceEnabled = false
