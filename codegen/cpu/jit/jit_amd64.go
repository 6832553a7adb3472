//go:build amd64 && (linux || darwin || freebsd || netbsd || openbsd) && !purego

package jit

import (
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// call enters generated code at fn with RDI = arg and returns its RAX
// (call_amd64.s).
//
//go:noescape
func call(fn uintptr, arg unsafe.Pointer) uint64

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

func xgetbv0() (eax uint32)

// Code is machine code in executable memory.
type Code struct {
	mu    sync.Mutex
	mem   []byte // nil once freed
	entry uintptr
	clean runtime.Cleanup
}

// Supported reports whether generated code can run here: this build has
// the trampoline, and the CPU has AVX2 and FMA with the ymm state enabled
// by the OS (the generated code uses them).
func Supported() bool { return hasAVX2FMA }

var hasAVX2FMA = func() bool {
	max, _, _, _ := cpuid(0, 0)
	if max < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if c1&fma == 0 || c1&osxsave == 0 || c1&avx == 0 {
		return false
	}
	if xgetbv0()&6 != 6 { // xmm and ymm state enabled
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	return b7&(1<<5) != 0 // AVX2
}()

// HasAVX512 reports whether generated code may use AVX-512F (EVEX, zmm
// registers, Z0–Z31): Supported, the CPU has AVX512F, and the OS saves the
// opmask and zmm state (XCR0 bits 5–7).
func HasAVX512() bool { return hasAVX512 }

var hasAVX512 = func() bool {
	if !hasAVX2FMA {
		return false
	}
	if xgetbv0()&0xe6 != 0xe6 { // xmm, ymm, opmask, zmm0–15 upper halves, zmm16–31
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	return b7&(1<<16) != 0 // AVX512F
}()

// Intel reports whether the CPU is Intel's (CPUID's vendor GenuineIntel):
// the native code generator's choices that measured differently on Intel's
// cores and AMD's read it.
func Intel() bool { return intel }

var intel = func() bool {
	_, b, c, d := cpuid(0, 0)
	return b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e // "Genu" "ineI" "ntel"
}()

// HasAVX512DQ reports whether AVX512DQ's instructions (VRANGEPS, …) are
// usable: AVX-512F's conditions and the CPU's DQ bit.
func HasAVX512DQ() bool { return hasAVX512DQ }

var hasAVX512DQ = func() bool {
	if !hasAVX512 {
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	return b7&(1<<17) != 0 // AVX512DQ
}()

// New copies code into fresh executable memory (mapped read+write,
// written, then made read+execute) whose first byte is the entry point.
func New(code []byte) (*Code, error) {
	if len(code) == 0 {
		return nil, fmt.Errorf("jit: no code")
	}
	page := syscall.Getpagesize()
	size := (len(code) + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("jit: mmap of %d bytes: %w", size, err)
	}
	copy(mem, code)
	for i := len(code); i < size; i++ {
		mem[i] = 0xcc // int3
	}
	if err := syscall.Mprotect(mem, syscall.PROT_READ|syscall.PROT_EXEC); err != nil {
		syscall.Munmap(mem)
		return nil, fmt.Errorf("jit: mprotect read+exec: %w", err)
	}
	c := &Code{mem: mem, entry: uintptr(unsafe.Pointer(&mem[0]))}
	c.clean = runtime.AddCleanup(c, func(m []byte) { syscall.Munmap(m) }, mem)
	return c, nil
}

// Call runs the code with arg in RDI and returns what it left in RAX. The
// caller keeps whatever arg points to, and all memory the code touches,
// alive until Call returns. Call on freed code is an error, returned as
// ok = false.
func (c *Code) Call(arg unsafe.Pointer) (r uint64, ok bool) {
	if c.entry == 0 {
		return 0, false
	}
	r = call(c.entry, arg)
	runtime.KeepAlive(c) // the memory must stay mapped until the call returns
	return r, true
}

// Entry is the address of the code's first byte (for tests and dumps).
func (c *Code) Entry() uintptr { return c.entry }

// Free unmaps the code now. No call may be in flight or follow.
func (c *Code) Free() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem == nil {
		return fmt.Errorf("jit: code freed twice")
	}
	c.clean.Stop()
	err := syscall.Munmap(c.mem)
	c.mem, c.entry = nil, 0
	if err != nil {
		return fmt.Errorf("jit: munmap: %w", err)
	}
	return nil
}
