//go:build race

package native_test

// raceEnabled: the race detector's instrumentation allocates, so
// allocation counts are not asserted under it.
const raceEnabled = true
