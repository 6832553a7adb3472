package native

import (
	"os"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/tile"
)

// useAVX512 says whether Compile emits AVX-512 (zmm) code where it has
// it (the products' micro-kernel, the unmasked loops of phases: fast.go):
// where the CPU and the OS support AVX-512F, unless
// TILEFUSE_NATIVE_AVX512=0 at start-up or SetAVX512(false).
var useAVX512 atomic.Bool

func init() { useAVX512.Store(jit.HasAVX512() && os.Getenv("TILEFUSE_NATIVE_AVX512") != "0") }

// AVX512 reports whether kernels compiled now use AVX-512 (zmm) code.
func AVX512() bool { return useAVX512.Load() }

// SetAVX512 makes kernels compiled from now on use AVX-512 (on, where the
// CPU and OS support it) or AVX2 only (off), and returns the previous
// setting. Kernels already compiled keep their code. For measuring one
// against the other and testing both; the environment's
// TILEFUSE_NATIVE_AVX512=0 turns it off at start-up.
func SetAVX512(on bool) (was bool) { return useAVX512.Swap(on && jit.HasAVX512()) }

// useRangeClamp says whether exp's zmm code clamps its argument by one
// VRANGEPS (AVX512DQ) instead of VMAXPS and VMINPS (ops.go: expCore32):
// where the CPU has AVX512DQ; SetRangeClamp (tests) turns it off.
var useRangeClamp atomic.Bool

func init() { useRangeClamp.Store(jit.HasAVX512DQ()) }

// useDivFMA (TILEFUSE_NATIVE_DIVFMA=1 at start-up; SetDivFMA in tests), off
// by default: in zmm loops, an f32 division by a uniform (softmax's e/Σe)
// is a product by the reciprocal and two corrections by fused
// multiply-adds (ops.go: divFMA) instead of VDIVPS: the same bits, for
// hosts whose divider is slow (Intel's VDIVPS zmm: about one in 10 cycles;
// on the 2-core VM's Zen 5 it is one in 2.6 and the corrections are slower).
var useDivFMA atomic.Bool

func init() { useDivFMA.Store(os.Getenv("TILEFUSE_NATIVE_DIVFMA") == "1") }

// divNewtonMode: where a zmm loop's f32 division of two vectors (GELU's
// 2/(1 + e^-2u)) is the reciprocal's estimate, two Newton steps and two
// FMA corrections (ops.go: divNewton) instead of VDIVPS, the same bits:
// newtonOff nowhere, newtonProducts in kernels with a product (dot), the
// default on Intel CPUs, newtonAll everywhere. TILEFUSE_NATIVE_DIVNEWTON
// (read at start-up) = 0, products or 1 (all) sets it for measuring;
// SetDivNewton in tests. On the H200 machine's 16-core Intel host (r49b,
// 2026-12-06) Newton's steps made the GELU epilogue of FF1's product
// 4-12% faster (BenchmarkProductEpilogue, bias-gelu-exp: 583, 699 → 537,
// 630 µs), the encoder's and linear_gelu's steps 5-9%, and the chain's
// elementwise GELU 1.6× slower (0.23 → 0.38 ms); on a 105 MiB-L3 host
// (r49c) products' kernels with them ran level. Presumably a product's
// epilogue waits on the divider (VDIVPS zmm issues about one in 10 cycles
// on Intel's cores by the published tables), while an elementwise
// kernel's divisions overlap its memory traffic and Newton's ~25
// instructions a vector take the vector ports it needs. On the 2-core
// VM's Zen 5 (VDIVPS zmm one in 2.6 cycles) they are slower everywhere.
var divNewtonMode atomic.Int32

const (
	newtonOff int32 = iota
	newtonProducts
	newtonAll
)

func init() { divNewtonMode.Store(divNewtonFrom(os.Getenv("TILEFUSE_NATIVE_DIVNEWTON"), jit.Intel())) }

// divNewtonFrom is the mode TILEFUSE_NATIVE_DIVNEWTON's value env asks for
// on a CPU that is Intel's or not: the default (products on Intel, else
// off) where env is none of 0, products and 1.
func divNewtonFrom(env string, intel bool) int32 {
	switch env {
	case "0":
		return newtonOff
	case "products":
		return newtonProducts
	case "1":
		return newtonAll
	}
	if intel {
		return newtonProducts
	}
	return newtonOff
}

// newtonFor reports whether kernel k's divisions of vectors take Newton's
// steps in zmm loops (divNewtonMode).
func newtonFor(k *tile.Kernel) bool {
	switch divNewtonMode.Load() {
	case newtonAll:
		return true
	case newtonProducts:
		dot := false
		k.Walk(func(v *tile.Value) { dot = dot || v.Op == tile.OpDot })
		return dot
	}
	return false
}
