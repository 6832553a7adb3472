//go:build amd64 && !purego

package cpu

// The kernels in dot_amd64.s, vec_amd64.s and vmath_amd64.s, and the CPU
// check that guards them.

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

func xgetbv0() (eax uint32)

//go:noescape
func dot4x16(d, a, b *float32, k, lda, ldb, ldd int)

//go:noescape
func dot4x8(d, a, b *float64, k, lda, ldb, ldd int)

//go:noescape
func vaddF32(d, a, b *float32, n int)

//go:noescape
func vsubF32(d, a, b *float32, n int)

//go:noescape
func vmulF32(d, a, b *float32, n int)

//go:noescape
func vdivF32(d, a, b *float32, n int)

//go:noescape
func vexpF32(d, a *float32, n int)

//go:noescape
func vtanhF32(d, a *float32, n int)

//go:noescape
func vsumF32(x *float32, n int) float32

//go:noescape
func vsplatF32(d *float32, s float32, n int)

//go:noescape
func vmaxF32(x *float32, n int) (m float32, nan bool)

// hasAVX2FMA: the CPU has AVX2 and FMA and the OS saves the ymm registers.
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
