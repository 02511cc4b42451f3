//go:build !race

package pqfile

const raceEnabled = false
