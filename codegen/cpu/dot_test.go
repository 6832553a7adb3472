package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestDotF32: the interpreter's float32 and float64 dots against a float64 reference, on
// shapes that fill the 4×16 kernel exactly, leave edges of rows and
// columns, or are too small for it (outputs poisoned; error within k f32
// roundings of the terms' magnitudes).
func TestDotF32(t *testing.T) {
	shapes := [][3]int{{4, 1, 16}, {4, 8, 16}, {4, 3, 8}, {8, 5, 24}, {16, 16, 16}, {32, 32, 32}, {64, 32, 64}, {64, 64, 128},
		{5, 7, 17}, {6, 3, 33}, {3, 5, 15}, {1, 1, 1}, {7, 0, 20}, {12, 9, 40}, {4, 100, 48}}
	rng := rand.New(rand.NewPCG(3, 9))
	for _, sh := range shapes {
		m, k, n := sh[0], sh[1], sh[2]
		t.Run(fmt.Sprintf("%dx%dx%d", m, k, n), func(t *testing.T) {
			a, b, acc := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
			for _, s := range [][]float32{a, b, acc} {
				for i := range s {
					s[i] = float32(rng.Float64()*2 - 1)
				}
			}
			d := make([]float32, m*n)
			for i := range d {
				d[i] = float32(math.NaN())
			}
			dotF32(d, a, b, acc, m, k, n)
			a64, b64, acc64 := widen(a), widen(b), widen(acc)
			d64 := make([]float64, m*n)
			for i := range d64 {
				d64[i] = math.NaN()
			}
			dotF64(d64, a64, b64, acc64, m, k, n)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					want, mag := float64(acc[i*n+j]), math.Abs(float64(acc[i*n+j]))
					for kk := 0; kk < k; kk++ {
						p := float64(a[i*k+kk]) * float64(b[kk*n+j])
						want += p
						mag += math.Abs(p)
					}
					got := float64(d[i*n+j])
					if !(math.Abs(got-want) <= float64(k+1)*6e-8*mag) {
						t.Fatalf("float32: d[%d,%d] = %v, want %v", i, j, got, want)
					}
					if got := d64[i*n+j]; !(math.Abs(got-want) <= float64(k+1)*1.2e-16*mag) {
						t.Fatalf("float64: d[%d,%d] = %v, want %v", i, j, got, want)
					}
				}
			}
		})
	}
}

func BenchmarkDot(b *testing.B) {
	for _, sh := range [][3]int{{32, 32, 32}, {64, 32, 64}, {64, 64, 64}} {
		m, k, n := sh[0], sh[1], sh[2]
		x, y, acc, d := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n), make([]float32, m*n)
		for i := range x {
			x[i] = float32(i%7) / 7
		}
		for i := range y {
			y[i] = float32(i%5) / 5
		}
		for _, v := range []struct {
			name string
			f    func(d, a, b, acc []float32, m, k, n int)
		}{{"loop", dotL[float32]}, {"dotF32", dotF32}} {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", v.name, m, k, n), func(b *testing.B) {
				for b.Loop() {
					v.f(d, x, y, acc, m, k, n)
				}
				b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestVecBinF32: the vector float32 add, sub, mul and div give exactly Go's
// float32 results, on every length up to 40 (vector body and scalar tail)
// and on the special values (±0, ±Inf, NaN, subnormals, overflow).
func TestVecBinF32(t *testing.T) {
	specials := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 1e-45, -3e-39, 3.4e38, -3.4e38, 1.5, 7}
	rng := rand.New(rand.NewPCG(8, 8))
	ops := []struct {
		op tile.Op
		f  func(x, y float32) float32
	}{{tile.OpAdd, func(x, y float32) float32 { return x + y }}, {tile.OpSub, func(x, y float32) float32 { return x - y }},
		{tile.OpMul, func(x, y float32) float32 { return x * y }}, {tile.OpDiv, func(x, y float32) float32 { return x / y }}}
	for _, o := range ops {
		fn := vecBinF32(o.op)
		if fn == nil {
			t.Skipf("no vector path on this CPU (VectorDot %v)", VectorDot())
		}
		for n := 0; n <= 40; n++ {
			a, b, d := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range a {
				a[i], b[i] = specials[rng.IntN(len(specials))], specials[rng.IntN(len(specials))]
				if rng.IntN(2) == 0 {
					a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
			}
			fn(d, a, b)
			for i := range d {
				want := o.f(a[i], b[i])
				if math.Float32bits(d[i]) != math.Float32bits(want) && !(d[i] != d[i] && want != want) {
					t.Fatalf("%v, n=%d, [%d]: %v op %v = %v, want %v", o.op, n, i, a[i], b[i], d[i], want)
				}
			}
		}
	}
}

// TestVecExpTanhF32: the vector exp and tanh give exactly the scalar expf
// and tanhf results (which TestExpfAccuracy and TestTanhfAccuracy hold to
// 1 ulp), over the whole useful range, the edges and the special values, in
// the vector body and the tail.
func TestVecExpTanhF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	xs := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		88.72283, 88.72284, 88.7229, 89, 89.5, -103.97207, -103.97208, -104, -150, -87.33, 1e-45, -1e-45,
		1.0 / 256, -1.0 / 256, 0.0039062498, 0.0039062502, 9.1, -9.1, 9.2, -9.2, 20, -20, 0.625, -0.625}
	for i := 0; i < 100000; i++ {
		xs = append(xs, float32(rng.Float64()*200-105), float32(rng.Float64()*24-12), float32(rng.Float64()*0.02-0.01))
	}
	for len(xs)%4 != 3 { // a tail as well
		xs = append(xs, float32(rng.NormFloat64()))
	}
	for _, f := range []struct {
		name   string
		slice  func(d, a []float32)
		scalar func(float32) float32
	}{{"exp", expSlice32, expf}, {"tanh", tanhSlice32, tanhf}} {
		d := make([]float32, len(xs))
		f.slice(d, xs)
		for i, x := range xs {
			want := f.scalar(x)
			if math.Float32bits(d[i]) != math.Float32bits(want) && !(d[i] != d[i] && want != want) {
				t.Fatalf("%s(%g) = %g (%#x), the scalar form %g (%#x)", f.name, x, d[i], math.Float32bits(d[i]), want, math.Float32bits(want))
			}
		}
	}
}

// TestSumRow32: a float32 row's sum is the same bit for bit through the
// vector kernel and sum16, on every length up to 70; and it is the sum to
// within the rounding of its terms.
func TestSumRow32(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for n := 0; n <= 70; n++ {
		x := make([]float32, n)
		want, mag := 0.0, 0.0
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 100)
			want += float64(x[i])
			mag += math.Abs(float64(x[i]))
		}
		got := sumRow32(x)
		m := n &^ 15
		ref := float32(0)
		if m > 0 {
			ref = sum16(x[:m])
		}
		for _, v := range x[m:] {
			ref += v
		}
		if math.Float32bits(got) != math.Float32bits(ref) {
			t.Fatalf("n=%d: %v, sum16 and the tail give %v", n, got, ref)
		}
		if math.Abs(float64(got)-want) > float64(n+1)*6e-8*mag {
			t.Fatalf("n=%d: %v, want %v", n, got, want)
		}
	}
}

// TestSplat32: every element of every length up to 40, NaN's bits kept.
func TestSplat32(t *testing.T) {
	for _, s := range []float32{1.5, float32(math.Copysign(0, -1)), math.Float32frombits(0x7fc00123)} {
		for n := 0; n <= 40; n++ {
			d := make([]float32, n+1)
			d[n] = 7 // past the end: untouched
			splat32(d[:n], s)
			for i := range n {
				if math.Float32bits(d[i]) != math.Float32bits(s) {
					t.Fatalf("n=%d: d[%d] = %#x, want %#x", n, i, math.Float32bits(d[i]), math.Float32bits(s))
				}
			}
			if d[n] != 7 {
				t.Fatalf("n=%d: wrote past the end", n)
			}
		}
	}
}

// TestMaxRow32: reduceRow's float32 maximum is the scalar loop's, bit for
// bit, with the vector path or without: rows with NaNs, with ±0 as the
// maximum, with the maximum in the tail, of every length up to 40.
func TestMaxRow32(t *testing.T) {
	loop := func(row []float32) float32 {
		r := row[0]
		for _, p := range row[1:] {
			if p > r || p != p {
				r = p
			}
		}
		return r
	}
	rng := rand.New(rand.NewPCG(11, 11))
	negz := float32(math.Copysign(0, -1))
	vector := 0
	for trial := 0; trial < 3000; trial++ {
		n := 1 + rng.IntN(40)
		row := make([]float32, n)
		for i := range row {
			switch rng.IntN(12) {
			case 0:
				row[i] = float32(math.NaN())
			case 1:
				row[i] = negz
			case 2:
				row[i] = 0
			default:
				row[i] = float32(rng.NormFloat64())
				if trial%3 == 0 {
					row[i] = -float32(math.Abs(rng.NormFloat64())) // all negative: zeros may win
				}
			}
		}
		got, want := reduceRow(tile.OpReduceMax, row), loop(row)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("%v: %v (%#x), the loop %v (%#x)", row, got, math.Float32bits(got), want, math.Float32bits(want))
		}
		if _, ok := maxRow32(row); ok {
			vector++
		}
	}
	if VectorDot() && vector == 0 {
		t.Fatal("no row took the vector path")
	}
}
