//go:build race

package fusion_test

// raceEnabled: the race detector's instrumentation allocates (one
// allocation a RunAll in TestRunAllAllocs), so allocation counts are not
// asserted under it.
const raceEnabled = true
