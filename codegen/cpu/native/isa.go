package native

import (
	"os"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
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
