package native

import (
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/tile"
)

// FastPhases is the number of nk's phases with an unmasked row loop
// (fast.go).
func FastPhases(nk *Kernel) int { return nk.fast }

// SetFastRows makes kernels compiled from now on have unmasked row loops
// (on, the default) or not, and returns the previous setting.
func SetFastRows(on bool) (was bool) { return !noFastRows.Swap(!on) }

// ZmmPhases is the number of nk's phases whose unmasked row loop computes
// in zmm registers (fast.go: zmmOK).
func ZmmPhases(nk *Kernel) int { return nk.zmm }

// RunRanges runs a launch of nk over grid as the pool would give it to
// workers in ranges (each {worker, first program, end}), one Run after
// another on this goroutine, after binding args as Launch does; native
// calls of chunk programs at most.
func RunRanges(nk *Kernel, grid tile.Grid, chunk int, ranges [][3]int, args ...any) error {
	g, err := grid.Norm()
	if err != nil {
		return err
	}
	t := nk.tasks.get()
	defer nk.tasks.put(t)
	t.args = append(t.args[:0], args...) // as Launch: no argument on the stack
	defer func() { clear(t.args); t.args = t.args[:0] }()
	if !t.bind(args) {
		return ErrFallback
	}
	t.prepare([3]int{g[0], g[1], g[2]}, chunk)
	for _, r := range ranges {
		t.Run(r[0], r[1], r[2])
	}
	if t.fail.Load() {
		return ErrFallback
	}
	return nil
}

// LaunchChunks is the programs of a native call and of the pool's chunks
// for a launch of total programs of work estimated nanoseconds each on
// workers workers.
var LaunchChunks = launchChunks

// SetZmmPairs makes kernels compiled from now on emit the zmm loop's two
// vectors as one paired body (on, the default) or as two bodies, and
// returns the previous setting.
func SetZmmPairs(on bool) (was bool) { return !noZmmPairs.Swap(!on) }

// PairLoops is the number of nk's zmm loops whose two vectors are emitted
// in pairs (fast.go: pairOK).
func PairLoops(nk *Kernel) int { return nk.pairs }

// LaunchWorkers is how many workers a launch of work estimated
// nanoseconds asks of a pool of n.
var LaunchWorkers = launchWorkers

// Work is nk's estimated work per program, in nanoseconds.
func Work(nk *Kernel) float64 { return nk.work }

// SetRunHook makes f be called as each of a launch's Run calls starts
// (nil: none), with the worker it runs as.
func SetRunHook(f func(w int)) { runHook = f }

// SetChunkHook sets the hook called before each native call with the
// programs it runs (nil: none).
func SetChunkHook(f func(lo, hi int64)) { chunkHook = f }

// KeptFrames is the number of frames the tasks on nk's free list keep.
func KeptFrames(nk *Kernel) int {
	nk.tasks.mu.Lock()
	defer nk.tasks.mu.Unlock()
	n := 0
	for _, t := range nk.tasks.free {
		for _, f := range t.frames {
			if f != nil {
				n++
			}
		}
	}
	return n
}

// PrefixRows is the number of nk's phases whose unmasked rows cover a
// prefix of their lanes (fast.go).
func PrefixRows(nk *Kernel) int { return nk.prefixRows }

// RowChecked is the number of masked accesses nk's unmasked loops keep
// masked with their row's range checked once (fast.go: rowChecked).
func RowChecked(nk *Kernel) int { return nk.rowChecked }

// TransLoads is the number of transposed loads in nk's code, packed and
// turned back in the frame (trans.go).
func TransLoads(nk *Kernel) int { return nk.transLoads }

// PrefetchesL2 is the number of prefetcht1 hints of strided rows in nk's
// code (body.go: prefetch).
func PrefetchesL2(nk *Kernel) int { return nk.prefetchesL2 }

// Direct is how many products' a and b operands the kernel reads where
// they lie when their blocks are in bounds (dot.go: directOps).
func Direct(nk *Kernel) (a, b int) { return nk.directA, nk.directB }

// SetDirect turns the direct reads of products' a and b operands on or
// off (for comparing them with packed ones); it returns the previous
// settings.
func SetDirect(a, b bool) (wasA, wasB bool) {
	return !noDirectA.Swap(!a), !noDirectB.Swap(!b)
}

// PrefetchesW is the number of prefetchw hints of stores in nk's code
// (body.go: prefetchStore).
func PrefetchesW(nk *Kernel) int { return nk.prefetchesW }
func NTStores(nk *Kernel) int    { return nk.ntStores }

// SetStoreHints makes kernels compiled from now on hint their row stores
// one row on (on, the default) or not, and returns the previous setting.
func SetStoreHints(on bool) (was bool) { return !noStoreHints.Swap(!on) }

// Folds is the number of values nk's unmasked loops read as another's: a
// select as its first value, its condition proven true over the row, and
// an And as its other side where one is (fast.go: fold).
func Folds(nk *Kernel) int { return nk.folds }

// SetRangeClamp makes kernels compiled from now on clamp exp's argument
// in zmm code by VRANGEPS (on, where the CPU has AVX512DQ) or by VMAXPS
// and VMINPS (off), and returns the previous setting.
func SetRangeClamp(on bool) (was bool) { return useRangeClamp.Swap(on && jit.HasAVX512DQ()) }

// SetSum32 makes kernels compiled from now on sum rows in paired zmm loops
// in 32 partial sums (on; fast.go: useSum32) or sixteen (off, the
// default), and returns the previous setting.
func SetSum32(on bool) (was bool) { return useSum32.Swap(on) }

// Sum32Loops is the number of nk's paired zmm loops summing in 32 partial
// sums.
func Sum32Loops(nk *Kernel) int { return nk.sum32 }

// SetNaNDetect makes kernels compiled from now on run paired zmm max/min
// loops detecting NaNs first (on, the default; fast.go: nanDetectOK) or
// tracking them throughout (off), and returns the previous setting.
func SetNaNDetect(on bool) (was bool) { return !noNaNDetect.Swap(!on) }

// NaNDetects is the number of nk's paired zmm max/min loops that detect
// NaNs first.
func NaNDetects(nk *Kernel) int { return nk.nanDetects }

// SetDivFMA makes kernels compiled from now on divide by a uniform in zmm
// loops by FMA corrections (on; ops.go: divFMA) or VDIVPS (off, the
// default), and returns the previous setting.
func SetDivFMA(on bool) (was bool) { return useDivFMA.Swap(on) }

// SetDivNewton makes kernels compiled from now on divide vectors in zmm
// loops by Newton's steps everywhere (on; ops.go: divNewton) or nowhere
// (off), and returns whether it was everywhere.
func SetDivNewton(on bool) (wasAll bool) {
	m := newtonOff
	if on {
		m = newtonAll
	}
	return divNewtonMode.Swap(m) == newtonAll
}

// DivNewtonMode is the mode (0 nowhere, 1 in kernels with a product, 2
// everywhere); SetDivNewtonMode sets it and returns the previous one.
func DivNewtonMode() int32           { return divNewtonMode.Load() }
func SetDivNewtonMode(m int32) int32 { return divNewtonMode.Swap(m) }

// DivNewtonFrom is divNewtonFrom (isa.go).
func DivNewtonFrom(env string, intel bool) int32 { return divNewtonFrom(env, intel) }

// SetDivNewtonProbe makes divNewton's fast vectors give the reciprocal
// instead of the quotient in kernels compiled from now on.
func SetDivNewtonProbe(on bool) (was bool) { return divNewtonProbe.Swap(on) }

// DivNewtons is the number of nk's divisions of vectors by Newton's steps.
func DivNewtons(nk *Kernel) int { return nk.divNewtons }

// DivFMAs is the number of nk's divisions by a uniform by FMA corrections.
func DivFMAs(nk *Kernel) int { return nk.divFMAs }

// SetDivSlowPoison makes kernels compiled from now on give DivPoison where
// divFMA would divide by VDIVPS (a vector with a lane out of the
// corrections' range), and returns the previous setting.
func SetDivSlowPoison(on bool) (was bool) { return divSlowPoison.Swap(on) }

// DivPoison is what SetDivSlowPoison's vectors hold.
const DivPoison = divPoison

// SetColLoops makes kernels compiled from now on sum column loops' carried
// blocks in registers (on, the default; colloop.go) or through the frame
// (off), and returns the previous setting.
func SetColLoops(on bool) (was bool) { return !noColLoops.Swap(!on) }

// ColLoops is the number of nk's carried blocks summed in registers
// (colloop.go).
func ColLoops(nk *Kernel) int { return nk.colLoops }

// SetPinUniforms makes kernels compiled from now on keep uniforms of zmm
// loops in registers (on, the default; pin.go) or read them from memory
// (off), and returns the previous setting.
func SetPinUniforms(on bool) (was bool) { return !noPinUniforms.Swap(!on) }

// Pins is the number of uniforms nk's zmm loops keep in registers.
func Pins(nk *Kernel) int { return nk.pins }

// SetParallelNs sets the estimated work below which a launch runs on the
// caller alone, and returns the previous setting.
func SetParallelNs(ns float64) (was float64) {
	was, parallelNs = parallelNs, ns
	return was
}

// UnitParams are the numbers of nk's integer parameters that its code
// takes as 1 (strides between lanes: a launch with another value falls
// back).
func UnitParams(nk *Kernel) []int {
	var u []int
	for i, b := range nk.unit {
		if b {
			u = append(u, i)
		}
	}
	return u
}

// StrideFallback reports whether a launch of nk with args falls back
// because a parameter its code takes as 1 is not 1.
func StrideFallback(nk *Kernel, args []any) bool {
	for _, i := range UnitParams(nk) {
		if v, ok := scalarBits(args[i], nk.k.Params[i].Type.DType); ok && v != 1 {
			return true
		}
	}
	return false
}

// Specials is how many specialized copies of nk have been made
// (special.go), compiled or not.
func Specials(nk *Kernel) int {
	nk.specials.mu.Lock()
	defer nk.specials.mu.Unlock()
	return len(nk.specials.m)
}

// MaxPeriod is remconst.go's largest divisor.
const MaxPeriod = maxPeriod
