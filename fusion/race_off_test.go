//go:build !race

package fusion_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
