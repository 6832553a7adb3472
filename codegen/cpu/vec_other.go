//go:build !amd64 || purego

package cpu

// Without the assembly: hasAVX2FMA is false, so vec.go runs the Go loops
// and never calls these.

const hasAVX2FMA = false

func noKernel() { panic("cpu: no vector kernels in this build") }

func dot4x16(d, a, b *float32, k, lda, ldb, ldd int)  { noKernel() }
func dot4x8(d, a, b *float64, k, lda, ldb, ldd int)   { noKernel() }
func vaddF32(d, a, b *float32, n int)                 { noKernel() }
func vsubF32(d, a, b *float32, n int)                 { noKernel() }
func vmulF32(d, a, b *float32, n int)                 { noKernel() }
func vdivF32(d, a, b *float32, n int)                 { noKernel() }
func vexpF32(d, a *float32, n int)                    { noKernel() }
func vtanhF32(d, a *float32, n int)                   { noKernel() }
func vsumF32(x *float32, n int) float32               { noKernel(); return 0 }
func vsplatF32(d *float32, s float32, n int)          { noKernel() }
func vmaxF32(x *float32, n int) (m float32, nan bool) { noKernel(); return 0, false }
