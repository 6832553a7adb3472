//go:build unix

package fusion

import "syscall"

// minorFaults is the process's minor page faults so far (getrusage): a
// page of new memory faulted in on its first touch counts one. -1 where
// the call fails.
func minorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return int64(ru.Minflt)
}
