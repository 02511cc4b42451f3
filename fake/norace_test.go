//go:build !race

package fake_test

const raceEnabled = false
