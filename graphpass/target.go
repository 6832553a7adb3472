package graphpass

import (
	"fmt"

	"github.com/tilefuse/tilefuse/tile"
)

// Target is the machine kernels are written for, as the backend knows it.
// Partition and Emit read it only through the heuristics in each group
// kind's file (tune), which choose every block size, chunk and warp count
// of a kernel as its meta-parameters (tile.Kernel.Meta: printed in the
// kernel's dump, and what Tune may change).
type Target struct {
	// A GPU: streaming multiprocessors, the most threads and the most
	// shared memory (bytes, with the opt-in above 48 KiB that the cuda
	// package makes for kernels that need it) of one program (CTA), and the
	// warps per program kernels are written for. SMs is 0 on a CPU.
	SMs, MaxThreads, SharedMemory, NumWarps int
	// L2 is a GPU's L2 cache in bytes (0: not known; the products' tile
	// order, groupTiles, then stays the default)
	L2 int
	// A CPU: the cores the interpreter runs programs on in parallel, and
	// whether kernels run as machine code where codegen/cpu/native
	// supports them (else on the executor): its products take larger
	// tiles.
	Cores  int
	Native bool
	// SplitReductions spreads a sum with few outputs over many elements
	// over more programs, which add their parts atomically into a zeroed
	// output: on a GPU it fills the SMs; on a CPU a few cores are busy
	// anyway, and the atomics would make float sums depend on the order
	// the programs finish in.
	SplitReductions bool
	// MaxGridYZ bounds a GPU launch's program axes 1 and 2 (0: 65535,
	// CUDA's gridDim.y and z); a kernel whose grid passes it runs
	// flattened onto axis 0 (Emit, tile.Kernel.FlattenGrid). Tests lower
	// it.
	MaxGridYZ int
	// Tune, if not nil, may change the meta-parameters the heuristics chose
	// for a group's kernel (an autotuner; a measurement of one choice);
	// it is called before the kernel is written.
	Tune func(grp *Group, meta tile.Meta)
}

// CPU is the target of the CPU backend with cores cores, its kernels on
// the executor (Native false).
func CPU(cores int) Target { return Target{Cores: max(1, cores)} }

// GPU is the target of a GPU with sms SMs, at most maxThreads threads and
// sharedMemory bytes of shared memory per program. Kernels use 4 warps (8
// measured equal or slower on the H200 for matmul and attention).
func GPU(sms, maxThreads, sharedMemory int) Target {
	return Target{SMs: sms, MaxThreads: maxThreads, SharedMemory: sharedMemory, NumWarps: 4, SplitReductions: true}
}

// H200 is an NVIDIA H200's target (132 SMs, 1024 threads and 227 KiB of
// shared memory per program, opted into above the 48 KiB default, 60 MiB
// of L2): the GPU the heuristics were measured on, for writing its kernels
// where there is none.
var H200 = func() Target {
	t := GPU(132, 1024, 227<<10)
	t.L2 = 60 << 20
	return t
}()

// GPU reports whether t is a GPU.
func (t Target) GPU() bool { return t.SMs > 0 }

func (t Target) String() string {
	if t.GPU() {
		return fmt.Sprintf("gpu (%d SMs, %d warps)", t.SMs, t.NumWarps)
	}
	if t.Native {
		return fmt.Sprintf("cpu (%d cores, native)", t.Cores)
	}
	return fmt.Sprintf("cpu (%d cores)", t.Cores)
}

// check reports a target no heuristic can tune for.
func (t Target) check() error {
	switch {
	case t.SMs < 0 || t.Cores < 0:
		return fmt.Errorf("graphpass: target %v: negative counts", t)
	case t.GPU() && (t.NumWarps < 1 || t.NumWarps > 32 || t.NumWarps&(t.NumWarps-1) != 0):
		return fmt.Errorf("graphpass: target %v: %d warps is not a power of two in 1..32", t, t.NumWarps)
	case t.GPU() && 32*t.NumWarps > t.MaxThreads:
		return fmt.Errorf("graphpass: target %v: %d warps exceed %d threads a program", t, t.NumWarps, t.MaxThreads)
	}
	return nil
}

// perThread is a block of n elements per thread of a GPU program; on a
// CPU, cpu: the block the heuristics were measured with there.
func (t Target) perThread(n, cpu int) int {
	if t.GPU() {
		return n * 32 * t.NumWarps
	}
	return cpu
}

// maxGridYZ is t's bound on program axes 1 and 2 (MaxGridYZ, else 65535).
func (t Target) maxGridYZ() int {
	if t.MaxGridYZ > 0 {
		return t.MaxGridYZ
	}
	return 65535
}
