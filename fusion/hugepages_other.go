//go:build !linux

package fusion

import "unsafe"

// adviseHugePages does nothing outside Linux.
func adviseHugePages(unsafe.Pointer, uintptr) {}
