//go:build race

package fusion

// raceOn: the race detector's instrumentation allocates (internal tests).
const raceOn = true
