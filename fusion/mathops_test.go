package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// mathGraphs are graphs of Gorgonia's math ops that the CPU's machine code
// computes since 2026-12-04 (sigmoid, softplus's log1p, expm1, sign, log2,
// sin, cos and pow; they
// ran on the executor before), each with its float64 function and the
// relative error it is checked to: SiLU x·σ(x), an LSTM-like gate
// σ(x)·tanh(x), softplus log(1+e^x) (Gorgonia's op: graphpass writes it
// as max(x,0) + log1p(e^-|x|)), log1p(|x|), expm1(x), sign(x)·x²,
// log₂|x|, sin x·cos x and |x|^1.5 (pow).
var mathGraphs = []struct {
	name  string
	build func(x *G.Node) *G.Node
	f64   func(x float64) float64
	tol   float64
}{
	{"silu", func(x *G.Node) *G.Node { return G.Must(G.HadamardProd(x, G.Must(G.Sigmoid(x)))) },
		func(x float64) float64 { return x / (1 + math.Exp(-x)) }, 4e-7},
	{"gate", func(x *G.Node) *G.Node { return G.Must(G.HadamardProd(G.Must(G.Sigmoid(x)), G.Must(G.Tanh(x)))) },
		func(x float64) float64 { return math.Tanh(x) / (1 + math.Exp(-x)) }, 6e-7},
	{"softplus", func(x *G.Node) *G.Node { return G.Must(G.Softplus(x)) },
		func(x float64) float64 { return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) }, 6e-7},
	{"log1p", func(x *G.Node) *G.Node { return G.Must(G.Log1p(G.Must(G.Abs(x)))) },
		func(x float64) float64 { return math.Log1p(math.Abs(x)) }, 4e-7},
	{"expm1", func(x *G.Node) *G.Node { return G.Must(G.Expm1(x)) }, math.Expm1, 4e-7},
	{"sign", func(x *G.Node) *G.Node { return G.Must(G.HadamardProd(G.Must(G.Sign(x)), G.Must(G.Square(x)))) },
		func(x float64) float64 { return math.Copysign(x*x, x) }, 1.2e-7},
	{"log2", func(x *G.Node) *G.Node { return G.Must(G.Log2(G.Must(G.Abs(x)))) },
		func(x float64) float64 { return math.Log2(math.Abs(x)) }, 2.4e-7},
	{"sin·cos", func(x *G.Node) *G.Node { return G.Must(G.HadamardProd(G.Must(G.Sin(x)), G.Must(G.Cos(x)))) },
		func(x float64) float64 { return math.Sin(x) * math.Cos(x) }, 4e-7},
	{"|x|^1.5", func(x *G.Node) *G.Node { return G.Must(G.Pow(G.Must(G.Abs(x)), G.NewConstant(float32(1.5)))) },
		func(x float64) float64 { return math.Pow(math.Abs(x), 1.5) }, 2.4e-7},
}

// mathGraph builds one of mathGraphs over rows×cols seeded values in ±6
// (ten exact zeros among them, for sign and the edges).
func mathGraph(t testing.TB, i, rows, cols int, opts ...fusion.Option) (*fusion.Machine, *G.Node, []float32) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("x"))
	y := mathGraphs[i].build(x)
	d := make([]float32, rows*cols)
	rng := rand.New(rand.NewPCG(uint64(i), 2026))
	for j := range d {
		d[j] = float32(rng.Float64()*12 - 6)
	}
	for j := 0; j < 10 && j < len(d); j++ {
		d[j*len(d)/10] = 0
	}
	if err := G.Let(x, tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(d))); err != nil {
		t.Fatal(err)
	}
	vm := fusion.NewTapeMachine(g, opts...)
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	return vm, y, d
}

// TestMathGraphsNative: each graph is one kernel, compiled to machine code
// (none declined), and its fused result agrees with float64 within the
// graph's tolerance (a tail of 37 columns not a multiple of any vector).
func TestMathGraphsNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
	for i, c := range mathGraphs {
		t.Run(c.name, func(t *testing.T) {
			vm, y, d := mathGraph(t, i, 13, 101)
			defer vm.Close()
			allNative(t, vm)
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			got := y.Value().Data().([]float32)
			worst := 0.0
			for j, x := range d {
				want := c.f64(float64(x))
				e := math.Abs(float64(got[j])-want) / math.Max(math.Abs(want), 1e-30)
				switch {
				case float64(got[j]) == want: // ±∞ too
					e = 0
				case want == 0:
					e = math.Abs(float64(got[j]))
				}
				if !(e <= c.tol) {
					t.Fatalf("x = %v: got %v, want %v (relative error %.3g, tolerance %.3g)", x, got[j], want, e, c.tol)
				}
				worst = max(worst, e)
			}
			t.Logf("largest relative error %.3g", worst)
		})
	}
}

// BenchmarkMathGraphs runs mathGraphs over 1024×1024 values, the kernel on
// the executor and as machine code side by side (outputs reused).
func BenchmarkMathGraphs(b *testing.B) {
	for i, c := range mathGraphs {
		for _, native := range []bool{false, true} {
			mode := "executor"
			if native {
				mode = "native"
			}
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				vm, _, _ := mathGraph(b, i, 1024, 1024, fusion.WithReuseOutputs(true), fusion.WithNativeCPU(native))
				defer vm.Close()
				b.SetBytes(8 << 20) // one read and one write of the data
				for b.Loop() {
					if err := vm.RunAll(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestPowByConstant: Gorgonia's Pow of f32 by the constants 2, 1 and −1
// is computed as x·x, x and 1/x (ops: powByConst), bit for bit the
// reference's float32(math.Pow) at every special value (±0, ±∞, NaN, 1,
// overflow, underflow, subnormals, negatives), and its kernel runs as
// machine code; 3 and ½ (no exact form) keep pow (within 2 ulp as
// machine code: native's powf32; its special cases exact).
// The gradient of Σx² is all native too (Gorgonia's x^(2−1)·2, the
// exponent folded to 1).
func TestPowByConstant(t *testing.T) {
	xs := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		1, -1, 2, -3, 0.5, 1e20, -1e20, 1e-25, 1e-40, -1e-40, 3e38, 7.25, -0.1, 1e-38}
	for _, c := range []struct {
		y      float32
		native bool // the kernel is machine code (pow rewritten)
	}{{2, true}, {1, true}, {-1, true}, {3, false}, {0.5, false}} {
		t.Run(fmt.Sprint(c.y), func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewVector(g, tensor.Float32, G.WithShape(len(xs)), G.WithName("x"))
			p := G.Must(G.Pow(x, G.NewConstant(c.y)))
			if err := G.Let(x, tensor.New(tensor.WithShape(len(xs)), tensor.WithBacking(append([]float32(nil), xs...)))); err != nil {
				t.Fatal(err)
			}
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			hasPow := false
			for _, n := range vm.Compiled().Graph.AllNodes() {
				if f, ok := n.Op().(*fusion.FusedOp); ok && !f.IsView() {
					f.Kernel().Walk(func(v *tile.Value) { hasPow = hasPow || v.Op == tile.OpPow })
				}
			}
			if hasPow == c.native {
				t.Fatalf("y = %v: pow in the kernel %v", c.y, hasPow)
			}
			if c.native && jit.Supported() {
				allNative(t, vm)
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			got := p.Value().Data().([]float32)
			for i, x := range xs {
				want := float32(math.Pow(float64(x), float64(c.y)))
				if math.Float32bits(got[i]) == math.Float32bits(want) || got[i] != got[i] && want != want {
					continue
				}
				// pow itself (3, ½): within 2 ulp where the result is finite and
				// nonzero, else exact (its special cases are Go's)
				if w := float64(want); c.native || w == 0 || math.IsInf(w, 0) || w != w ||
					math.Abs(float64(got[i])-w) > 2*math.Abs(w)*0x1p-23 {
					t.Errorf("%v^%v = %v (%#x), want %v (%#x)", x, c.y, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
			}
		})
	}
	t.Run("gradient of Σx²", func(t *testing.T) {
		if !jit.Supported() {
			t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
		}
		g := G.NewGraph()
		x := G.NewVector(g, tensor.Float32, G.WithShape(100), G.WithName("x"))
		cost := G.Must(G.Sum(G.Must(G.Pow(x, G.NewConstant(float32(2))))))
		if _, err := G.Grad(cost, x); err != nil {
			t.Fatal(err)
		}
		d := make([]float32, 100)
		for i := range d {
			d[i] = float32(i) - 50.5
		}
		if err := G.Let(x, tensor.New(tensor.WithShape(100), tensor.WithBacking(d))); err != nil {
			t.Fatal(err)
		}
		vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU))
		defer vm.Close()
		if err := vm.Err(); err != nil {
			t.Fatal(err)
		}
		allNative(t, vm)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		dx, err := x.Grad()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range dx.Data().([]float32) {
			if want := 2 * d[i]; v != want {
				t.Fatalf("dΣx²/dx[%d] = %v, want %v", i, v, want)
			}
		}
	})
}

// TestSinLargeArgumentsFallBack: f32 sin and cos of arguments beyond the
// machine code's bound (2^17; ∞) run on the executor, program by program
// (the machine code bails out: native.Partial): the reference's float32(math.Sin) bit for
// bit there and everywhere else in the same launch; and those below the
// bound within 1.5 ulp as machine code.
func TestSinLargeArgumentsFallBack(t *testing.T) {
	xs := []float32{0.5, -3, 1 << 17, 131073, 1e6, -3e38, float32(math.Inf(1)), 2023.1857, float32(math.NaN())}
	for _, op := range []struct {
		name string
		f    func(*G.Node) (*G.Node, error)
		f64  func(float64) float64
	}{{"sin", G.Sin, math.Sin}, {"cos", G.Cos, math.Cos}} {
		t.Run(op.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewVector(g, tensor.Float32, G.WithShape(len(xs)), G.WithName("x"))
			y := G.Must(op.f(x))
			if err := G.Let(x, tensor.New(tensor.WithShape(len(xs)), tensor.WithBacking(append([]float32(nil), xs...)))); err != nil {
				t.Fatal(err)
			}
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU))
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			for i, v := range y.Value().Data().([]float32) {
				want := float32(op.f64(float64(xs[i])))
				if math.Float32bits(v) != math.Float32bits(want) && !(v != v && want != want) {
					t.Errorf("%s(%v) = %v, want %v (the launch falls back to the executor)", op.name, xs[i], v, want)
				}
			}
		})
	}
}

// TestF64MathGraphsNative: Gorgonia's Softplus, Log1p, Expm1, Sin, Cos,
// Log2 and Pow over float64 (its default dtype) run as machine code, the
// reference's (Go's math.Log1p, math.Expm1, math.Sin, math.Cos, math.Pow;
// interp.Log2_64) bit for bit: in zmm registers where the CPU has AVX-512,
// and in ymm pairs (both, where it has).
func TestF64MathGraphsNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
	t.Run("ymm pairs", func(t *testing.T) {
		was := native.SetAVX512(false)
		defer native.SetAVX512(was)
		f64MathGraphs(t)
	})
	if jit.HasAVX512() {
		t.Run("zmm", f64MathGraphs)
	}
}

func f64MathGraphs(t *testing.T) {
	g := G.NewGraph()
	x := G.NewVector(g, tensor.Float64, G.WithShape(1000), G.WithName("x"))
	sp := G.Must(G.Softplus(x))
	lp := G.Must(G.Log1p(G.Must(G.Abs(x))))
	sn, cs := G.Must(G.Sin(x)), G.Must(G.Cos(x))
	l2 := G.Must(G.Log2(G.Must(G.Abs(x))))
	p15 := G.Must(G.Pow(G.Must(G.Abs(x)), G.NewConstant(1.5)))
	sq := G.Must(G.Pow(x, G.NewConstant(2.0)))
	em := G.Must(G.Expm1(x))
	d := make([]float64, 1000)
	rng := rand.New(rand.NewPCG(64, 1))
	for i := range d {
		d[i] = (rng.Float64() - 0.5) * 40
	}
	if err := G.Let(x, tensor.New(tensor.WithShape(1000), tensor.WithBacking(d))); err != nil {
		t.Fatal(err)
	}
	vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU))
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	allNative(t, vm)
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	for i, v := range lp.Value().Data().([]float64) {
		if w := math.Log1p(math.Abs(d[i])); v != w {
			t.Fatalf("log1p(|%v|) = %v, want %v", d[i], v, w)
		}
	}
	for i, v := range l2.Value().Data().([]float64) {
		if w := interp.Log2_64(math.Abs(d[i])); v != w {
			t.Fatalf("log2(|%v|) = %v, want %v", d[i], v, w)
		}
	}
	for i, v := range sn.Value().Data().([]float64) {
		if w, c := math.Sin(d[i]), cs.Value().Data().([]float64)[i]; v != w || c != math.Cos(d[i]) {
			t.Fatalf("sin, cos(%v) = %v, %v, want %v, %v", d[i], v, c, w, math.Cos(d[i]))
		}
	}
	for i, v := range em.Value().Data().([]float64) {
		if w := math.Expm1(d[i]); v != w {
			t.Fatalf("expm1(%v) = %v, want %v", d[i], v, w)
		}
	}
	for i, v := range p15.Value().Data().([]float64) {
		// math.Pow where x is not subnormal, as here
		if w, s := math.Pow(math.Abs(d[i]), 1.5), sq.Value().Data().([]float64)[i]; v != w || s != math.Pow(d[i], 2) {
			t.Fatalf("|x|^1.5, x^2 (x = %v) = %v, %v, want %v, %v", d[i], v, s, w, math.Pow(d[i], 2))
		}
	}
	for i, v := range sp.Value().Data().([]float64) {
		w := math.Max(d[i], 0) + math.Log1p(math.Exp(-math.Abs(d[i])))
		if math.Abs(v-w) > 4e-16*math.Abs(w) {
			t.Fatalf("softplus(%v) = %v, want %v", d[i], v, w)
		}
	}
}

// BenchmarkF64MathGraphs: Gorgonia graphs over 1024×1024 float64 (its
// default dtype) with math functions the machine code computes as Go
// does, on the executor and as machine code (outputs reused).
func BenchmarkF64MathGraphs(b *testing.B) {
	for _, c := range []struct {
		name  string
		build func(x *G.Node) *G.Node
	}{
		{"softplus", func(x *G.Node) *G.Node { return G.Must(G.Softplus(x)) }},
		{"expm1", func(x *G.Node) *G.Node { return G.Must(G.Expm1(x)) }},
		{"sin·cos", func(x *G.Node) *G.Node { return G.Must(G.HadamardProd(G.Must(G.Sin(x)), G.Must(G.Cos(x)))) }},
		{"|x|^1.5", func(x *G.Node) *G.Node { return G.Must(G.Pow(G.Must(G.Abs(x)), G.NewConstant(1.5))) }},
		{"x^2", func(x *G.Node) *G.Node { return G.Must(G.Pow(x, G.NewConstant(2.0))) }},
	} {
		for _, native := range []bool{false, true} {
			mode := "executor"
			if native {
				mode = "native"
			}
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				g := G.NewGraph()
				x := G.NewMatrix(g, tensor.Float64, G.WithShape(1024, 1024), G.WithName("x"))
				c.build(x)
				d := make([]float64, 1024*1024)
				rng := rand.New(rand.NewPCG(3, 2026))
				for j := range d {
					d[j] = rng.Float64()*12 - 6
				}
				if err := G.Let(x, tensor.New(tensor.WithShape(1024, 1024), tensor.WithBacking(d))); err != nil {
					b.Fatal(err)
				}
				vm := fusion.NewTapeMachine(g, fusion.WithReuseOutputs(true), fusion.WithNativeCPU(native))
				defer vm.Close()
				if err := vm.Err(); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(16 << 20) // one read and one write of the data
				for b.Loop() {
					if err := vm.RunAll(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
