package fusion

import "unsafe"

// mallocgc is the Go runtime's allocator. Its signature is kept for the
// packages that link to it (runtime/malloc.go: "Do not remove or change
// the type signature", go.dev/issue/67401); typ nil allocates memory
// without pointers, and needzero false leaves it as the heap gives it.
//
//go:linkname mallocgc runtime.mallocgc
func mallocgc(size uintptr, typ unsafe.Pointer, needzero bool) unsafe.Pointer

// uninitialized is n elements of new memory that Go has not zeroed (what
// an earlier, dead allocation left there, or the kernel's zero pages), for
// a value whose kernel writes every element, as a recycled buffer is: a
// readable value of 16 MiB made anew cost its run 2.2 ms on the H200's
// 16-core host where the run itself took 0.23 (LayerNorm large), most of
// it Go zeroing the memory on one core.
func uninitialized[T float32 | float64](n int) []T {
	if n == 0 {
		return []T{}
	}
	var t T
	return unsafe.Slice((*T)(mallocgc(uintptr(n)*unsafe.Sizeof(t), nil, false)), n)
}
