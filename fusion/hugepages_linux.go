//go:build linux

package fusion

import (
	"syscall"
	"unsafe"
)

// madvHugePage is Linux's MADV_HUGEPAGE (the same number on every
// architecture).
const madvHugePage = 14

// adviseHugePages asks the kernel to back [p, p+size) with transparent
// huge pages where its policy allows (THP "always" or "madvise"): a new
// buffer then faults in 2 MiB at a time instead of 4 KiB. An error (no THP
// in the kernel) leaves the memory as it was.
func adviseHugePages(p unsafe.Pointer, size uintptr) {
	_ = syscall.Madvise(unsafe.Slice((*byte)(p), size), madvHugePage)
}
