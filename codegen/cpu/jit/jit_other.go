//go:build !(amd64 && (linux || darwin || freebsd || netbsd || openbsd)) || purego

package jit

import (
	"fmt"
	"unsafe"
)

// Code is machine code in executable memory; this build has none.
type Code struct{}

// Supported reports false: this build cannot run generated code (not
// amd64, another OS, or -tags purego).
func Supported() bool { return false }

// HasAVX512 reports false: no generated code in this build.
func HasAVX512() bool { return false }

// Intel is false: this build runs no generated code.
func Intel() bool { return false }

// HasAVX512DQ is false: this build runs no generated code.
func HasAVX512DQ() bool { return false }

// New returns an error: this build cannot run generated code.
func New(code []byte) (*Code, error) {
	return nil, fmt.Errorf("jit: generated code cannot run in this build (not amd64, or -tags purego)")
}

// Call is never reached: New returns no Code here.
func (c *Code) Call(arg unsafe.Pointer) (uint64, bool) { return 0, false }

// Entry is 0.
func (c *Code) Entry() uintptr { return 0 }

// Free has nothing to free.
func (c *Code) Free() error { return fmt.Errorf("jit: no code in this build") }
