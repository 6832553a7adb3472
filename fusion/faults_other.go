//go:build !unix

package fusion

// minorFaults is not counted outside Unix: -1.
func minorFaults() int64 { return -1 }
