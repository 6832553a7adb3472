//go:build amd64 && !purego

package tile

// The interpreter's dot on amd64: AVX2 and FMA kernels for 4×16 (float32)
// and 4×8 (float64) blocks of the result (dot_amd64.s), where the CPU has
// them.

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

func xgetbv0() (eax uint32)

//go:noescape
func dot4x16(d, a, b *float32, k, lda, ldb, ldd int)

//go:noescape
func dot4x8(d, a, b *float64, k, lda, ldb, ldd int)

// VectorDot reports whether the interpreter's dot runs vector instructions
// here (AVX2 and FMA); without them it is a scalar loop, a third of BLAS's
// speed or less.
func VectorDot() bool { return hasAVX2FMA }

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

// dotF32 is dotL for float32: d = acc + a·b, a [m,k], b [k,n]. Blocks of
// 4 rows by 16 columns go through dot4x16 (fused multiply-adds, in the
// order of k, as dotL adds); the edges through dotEdges.
func dotF32(d, a, b, acc []float32, m, k, n int) { dotBlocks(d, a, b, acc, m, k, n, 16, dot4x16) }

// dotF64 is dotF32 for float64, in blocks of 4 rows by 8 columns.
func dotF64(d, a, b, acc []float64, m, k, n int) { dotBlocks(d, a, b, acc, m, k, n, 8, dot4x8) }

// dotBlocks runs kern over the blocks of 4 rows by nb columns of d, then
// dotEdges over the rest; without AVX2 and FMA, or too small for one
// block, dotL does it all.
func dotBlocks[T float](d, a, b, acc []T, m, k, n, nb int, kern func(d, a, b *T, k, lda, ldb, ldd int)) {
	if !hasAVX2FMA || k == 0 || n < nb || m < 4 {
		dotL(d, a, b, acc, m, k, n)
		return
	}
	copy(d, acc[:m*n])
	_, _ = a[m*k-1], b[k*n-1] // the kernel reads within these
	m4, nv := m&^3, n-n%nb
	for i := 0; i < m4; i += 4 {
		for j := 0; j < nv; j += nb {
			kern(&d[i*n+j], &a[i*k], &b[j], k, k, n, n)
		}
	}
	dotEdges(d, a, b, m, k, n, m4, nv)
}

// dotEdges adds a·b into d where the vector kernel did not: rows from m4
// in full, and columns from nv in the rows above.
func dotEdges[T float](d, a, b []T, m, k, n, m4, nv int) {
	if m4 == m && nv == n {
		return
	}
	for i := 0; i < m; i++ {
		j0 := nv
		if i >= m4 {
			j0 = 0
		}
		drow := d[i*n+j0 : i*n+n]
		for kk, aik := range a[i*k : i*k+k] {
			brow := b[kk*n+j0 : kk*n+n]
			for j := range drow {
				drow[j] += aik * brow[j]
			}
		}
	}
}
