//go:build amd64 && !purego

package tile

// The interpreter's float32 add, sub, mul and div on amd64 with AVX
// (vec_amd64.s): 8 lanes an instruction, the same IEEE single-precision
// results as Go's float32 arithmetic (one rounding per op).

//go:noescape
func vaddF32(d, a, b *float32, n int)

//go:noescape
func vsubF32(d, a, b *float32, n int)

//go:noescape
func vmulF32(d, a, b *float32, n int)

//go:noescape
func vdivF32(d, a, b *float32, n int)

// vecBinF32 is the vector form of op for float32 blocks, or nil.
func vecBinF32(op Op) func(d, a, b []float32) {
	if !hasAVX2FMA {
		return nil
	}
	var kern func(d, a, b *float32, n int)
	var tail func(x, y float32) float32
	switch op {
	case OpAdd:
		kern, tail = vaddF32, func(x, y float32) float32 { return x + y }
	case OpSub:
		kern, tail = vsubF32, func(x, y float32) float32 { return x - y }
	case OpMul:
		kern, tail = vmulF32, func(x, y float32) float32 { return x * y }
	case OpDiv:
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

//go:noescape
func vexpF32(d, a *float32, n int)

//go:noescape
func vtanhF32(d, a *float32, n int)

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

//go:noescape
func vsumF32(x *float32, n int) float32

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

//go:noescape
func vsplatF32(d *float32, s float32, n int)

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

//go:noescape
func vmaxF32(x *float32, n int) (m float32, nan bool)

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
