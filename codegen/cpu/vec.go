package cpu

import "github.com/tilefuse/tilefuse/tile"

// The interpreter's hot loops over float32 (and float64) blocks: the dot,
// add/sub/mul/div, exp, tanh, row sums and maxima, splats. Each runs an
// AVX2/FMA kernel where hasAVX2FMA (vec_amd64.go, .s) and the Go loop it
// matches elsewhere (vec_other.go: -tags purego, or not amd64). Results
// are bit for bit the Go forms' but for the dot's fused multiply-adds.

// VectorDot reports whether the interpreter's dot runs vector instructions
// here (AVX2 and FMA); without them it is a scalar loop, a third of BLAS's
// speed or less.
func VectorDot() bool { return hasAVX2FMA }

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

// vecBinF32 is the vector form of op for float32 blocks, or nil: add, sub,
// mul and div over 8 lanes an instruction (vec_amd64.s), the same IEEE
// single-precision results as Go's float32 arithmetic.
func vecBinF32(op tile.Op) func(d, a, b []float32) {
	if !hasAVX2FMA {
		return nil
	}
	var kern func(d, a, b *float32, n int)
	var tail func(x, y float32) float32
	switch op {
	case tile.OpAdd:
		kern, tail = vaddF32, func(x, y float32) float32 { return x + y }
	case tile.OpSub:
		kern, tail = vsubF32, func(x, y float32) float32 { return x - y }
	case tile.OpMul:
		kern, tail = vmulF32, func(x, y float32) float32 { return x * y }
	case tile.OpDiv:
		kern, tail = vdivF32, func(x, y float32) float32 { return x / y }
	default:
		return nil
	}
	return func(d, a, b []float32) {
		a, b = a[:len(d)], b[:len(d)]
		n := len(d) &^ 7
		if n > 0 {
			kern(&d[0], &a[0], &b[0], n)
		}
		for i := n; i < len(d); i++ {
			d[i] = tail(a[i], b[i])
		}
	}
}

// expSlice32 and tanhSlice32: the vector kernels over whole groups of 4
// lanes, then the scalar functions they match bit for bit.
func expSlice32(d, a []float32)  { mapF32(d, a, vexpF32, expf) }
func tanhSlice32(d, a []float32) { mapF32(d, a, vtanhF32, tanhf) }

func mapF32(d, a []float32, kern func(d, a *float32, n int), scalar func(float32) float32) {
	a = a[:len(d)]
	n := 0
	if hasAVX2FMA {
		if n = len(d) &^ 3; n > 0 {
			kern(&d[0], &a[0], n)
		}
	}
	for i := n; i < len(d); i++ {
		d[i] = scalar(a[i])
	}
}

// sumRow32 is a float32 row's sum: whole groups of 16 in sixteen partial
// sums (vsumF32 or sum16, which agree bit for bit), then the rest in order.
func sumRow32(row []float32) float32 {
	n := len(row) &^ 15
	var r float32
	switch {
	case n > 0 && hasAVX2FMA:
		r = vsumF32(&row[0], n)
	case n > 0:
		r = sum16(row[:n])
	}
	for _, x := range row[n:] {
		r += x
	}
	return r
}

// splat32 fills d with s.
func splat32(d []float32, s float32) {
	n := 0
	if hasAVX2FMA {
		if n = len(d) &^ 7; n > 0 {
			vsplatF32(&d[0], s, n)
		}
	}
	for i := n; i < len(d); i++ {
		d[i] = s
	}
}

// maxRow32 is a float32 row's maximum as the scalar loop of reduceRow
// finds it, through vmaxF32 when the answer cannot differ: no NaN (the loop
// keeps the last one) and not zero (the loop keeps the first of ±0).
func maxRow32(row []float32) (float32, bool) {
	n := len(row) &^ 7
	if !hasAVX2FMA || n == 0 {
		return 0, false
	}
	m, nan := vmaxF32(&row[0], n)
	if nan || m == 0 {
		return 0, false
	}
	for _, p := range row[n:] {
		if p > m || p != p {
			return 0, false // a NaN or the largest in the tail: the loop decides
		}
	}
	return m, true
}
