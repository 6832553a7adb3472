//go:build !race

package fusion

// raceOn: see race_on_internal_test.go.
const raceOn = false
