package fusion

import (
	"os"
	"unsafe"
)

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
//
// With TILEFUSE_HUGEPAGES=1 (a switch for measuring, read when the
// process starts) a buffer of hugePageBytes or more is advised to the
// kernel as transparent huge pages first (adviseHugePages, Linux): where
// the heap gives it pages the kernel has to fault in (memory the runtime
// had returned to it), they come 2 MiB at a time. On the 2-core VM
// (2026-12-04, LayerNorm large in a loop of 300 runs dropping its value,
// THP "madvise") 25–28 of 280 runs faulted their 16 MiB in 4 KiB pages,
// 4.4–4.7 ms each (medians of five loops) against 0.73–0.97 for the
// other runs in new memory; with the advice such runs took 1.8–3.9 ms in
// four loops and 7.4 in a fifth. Off by default: that spread, not
// measured on the 16-core host yet, and where the kernel's defrag is
// "madvise" a fault in such a region may compact memory synchronously
// (PyTorch's CPU allocator keeps its huge pages behind
// THP_MEM_ALLOC_ENABLE).
func uninitialized[T float32 | float64](n int) []T {
	if n == 0 {
		return []T{}
	}
	var t T
	size := uintptr(n) * unsafe.Sizeof(t)
	p := mallocgc(size, nil, false)
	if hugePages && size >= hugePageBytes {
		adviseHugePages(p, size)
	}
	return unsafe.Slice((*T)(p), n)
}

// hugePages: TILEFUSE_HUGEPAGES=1 (uninitialized).
var hugePages = os.Getenv("TILEFUSE_HUGEPAGES") == "1"

// hugePageBytes is the least buffer uninitialized advises as huge pages:
// two of them, so that at least one 2 MiB-aligned page lies inside.
const hugePageBytes = 4 << 20
