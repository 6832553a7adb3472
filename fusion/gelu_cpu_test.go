package fusion_test

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
)

// TestGELUTanhFormOnCPU: GELU's tanh form written op by op (bench.GELU),
// ½·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³), and its gradient as Gorgonia
// takes it (of Σ GELU(x): ½·(1 + t) + ½·x·(1 − t·t)·u′, t = tanh u), in f32
// and f64 on the CPU backend (machine code where the CPU runs it, the
// executor otherwise), are kernels with no tanh (graphpass's tanhPlusOne:
// 1 + tanh(u) as 2/(1 + e^(−2u)); tanhSums: 1 + t and 1 − t·t from h =
// 1/(1 + e^(−2u)) as 2h and 4h(1 − h)), and each element is within a few
// units of its precision of the float64 function, relative to the value
// (the gradient: to the sum of its two terms' magnitudes, since it crosses
// zero near x = −0.75), over x in [−7, 4]: where u < 0 the sums as the
// graph writes them cancel (at x = −3 1 + t keeps 12 of f32's 24 bits; at
// x = −7 f32's tanh is −1, and both the value and the gradient are 0).
// The bound allows u's own rounding, which e^(−2u) carries relative to
// 2|u| (and in f64 the reference's rounding as much again). The value:
// NaN stays NaN, +Inf gives +Inf, and −Inf NaN (−Inf·0, as the graph's
// product). A count that is no multiple of the block; outputs poisoned by
// the run before it of other data.
func TestGELUTanhFormOnCPU(t *testing.T) {
	const n = 3*1024 + 37
	xs := make([]float64, n)
	for i := range n - 3 {
		xs[i] = -7 + 11*float64(i)/float64(n-4)
	}
	xs[n-3], xs[n-2], xs[n-1] = math.NaN(), math.Inf(1), math.Inf(-1)
	for _, tc := range []struct {
		name string
		dt   tensor.Dtype
		// the unit of the bound: f32's; twice f64's, where the float64
		// reference's own rounding is of the same size as the kernel's
		eps  float64
		grad bool // the gradient of Σ GELU(x), else GELU(x)
	}{
		{"f32", tensor.Float32, 0x1p-24, false},
		{"f64", tensor.Float64, 0x1p-52, false},
		{"f32 gradient", tensor.Float32, 0x1p-24, true},
		{"f64 gradient", tensor.Float64, 0x1p-52, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewVector(g, tc.dt, G.WithShape(n), G.WithName("x"))
			y := bench.GELU(x)
			if tc.grad {
				if _, err := G.Grad(G.Must(G.Sum(y)), x); err != nil {
					t.Fatal(err)
				}
			}
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU))
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			defer vm.Close()
			kernels, tanhs := 0, 0
			for _, nd := range vm.Compiled().Graph.AllNodes() {
				if fo, ok := nd.Op().(*fusion.FusedOp); ok {
					kernels++
					fo.Kernel().Walk(func(v *tile.Value) {
						if v.Op == tile.OpTanh {
							tanhs++
						}
					})
				}
			}
			if kernels == 0 || tanhs != 0 {
				t.Fatalf("%d kernels, %d tanh in them; want kernels, no tanh\n%v", kernels, tanhs, vm.Report())
			}
			set := func(v func(i int) float64) {
				var val tensor.Tensor
				if tc.dt == tensor.Float32 {
					b := make([]float32, n)
					for i := range b {
						b[i] = float32(v(i))
					}
					val = tensor.New(tensor.WithShape(n), tensor.WithBacking(b))
				} else {
					b := make([]float64, n)
					for i := range b {
						b[i] = v(i)
					}
					val = tensor.New(tensor.WithShape(n), tensor.WithBacking(b))
				}
				if err := G.Let(x, val); err != nil {
					t.Fatal(err)
				}
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
			}
			set(func(i int) float64 { return float64(i%7) + 100 }) // the run before: other values
			set(func(i int) float64 { return xs[i] })
			out := y.Value()
			if tc.grad {
				gv, err := x.Grad()
				if err != nil {
					t.Fatal(err)
				}
				out = gv
			}
			got := func(i int) float64 {
				if d, ok := out.Data().([]float32); ok {
					return float64(d[i])
				}
				return out.Data().([]float64)[i]
			}
			worst, at := 0.0, 0
			for i, xv := range xs {
				if tc.dt == tensor.Float32 {
					xv = float64(float32(xv))
				}
				g := got(i)
				if math.IsNaN(xv) || math.IsInf(xv, 0) {
					if !tc.grad && (math.IsInf(xv, 1) && !math.IsInf(g, 1) || !math.IsInf(xv, 1) && !math.IsNaN(g)) {
						t.Errorf("x = %v: %v, want %v", xv, g, map[bool]float64{true: math.Inf(1), false: math.NaN()}[math.IsInf(xv, 1)])
					}
					continue
				}
				u := math.Sqrt(2/math.Pi) * (xv + 0.044715*xv*xv*xv)
				e := math.Exp(-2 * u)
				half := 1 / (1 + e) // (1 + tanh u)/2, without its cancellation
				want, scale := xv*half, math.Abs(xv*half)
				if tc.grad {
					du := math.Sqrt(2/math.Pi) * (1 + 3*0.044715*xv*xv)
					a, b := half, 0.5*xv*4*e*half*half*du // ½(1 + t), ½·x·(1 − t²)·u′
					want, scale = a+b, math.Abs(a)+math.Abs(b)
				}
				tol := tc.eps * (8 + 8*math.Abs(u)) * scale
				if d := math.Abs(g - want); !(d <= tol) {
					t.Errorf("x = %v: %v, want %v (error %.3g of the scale, bound %.3g)", xv, g, want, d/scale, tol/scale)
				} else if r := d / tol; r > worst {
					worst, at = r, i
				}
			}
			t.Logf("largest error %.2f of the bound, at x = %v", worst, xs[at])
		})
	}
}
