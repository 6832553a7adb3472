//go:build !amd64 || purego

package tile

func dotF32(d, a, b, acc []float32, m, k, n int) { dotL(d, a, b, acc, m, k, n) }

func dotF64(d, a, b, acc []float64, m, k, n int) { dotL(d, a, b, acc, m, k, n) }

// VectorDot reports whether the interpreter's float32 dot runs vector
// instructions here: not in this build (amd64 with AVX2 and FMA only).
func VectorDot() bool { return false }

func vecBinF32(op Op) func(d, a, b []float32) { return nil }

func expSlice32(d, a []float32) {
	a = a[:len(d)]
	for i, x := range a {
		d[i] = expf(x)
	}
}

func tanhSlice32(d, a []float32) {
	a = a[:len(d)]
	for i, x := range a {
		d[i] = tanhf(x)
	}
}

func sumRow32(row []float32) float32 {
	n := len(row) &^ 15
	var r float32
	if n > 0 {
		r = sum16(row[:n])
	}
	for _, x := range row[n:] {
		r += x
	}
	return r
}

func splat32(d []float32, s float32) {
	for i := range d {
		d[i] = s
	}
}

func maxRow32(row []float32) (float32, bool) { return 0, false }
