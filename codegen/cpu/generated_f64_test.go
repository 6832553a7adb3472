package cpu_test

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/fusion"
)

// TestGeneratedF64KernelsNative runs every kernel the fusion pass
// generates for the bench workloads built in float64 (bench.BuildFloat64,
// size small) that the native code generator supports, as machine code
// and on the executor, from the inputs it had in a fused run: within
// 1e-12 + 1e-12·|x| (products: fused multiply-adds in k order on both,
// blocked differently; every other op the executor's bit for bit, sums
// along the last axis in its four partial sums; measured: the largest
// difference is reported). It reports how many kernels ran natively and
// why the others did not: with AVX-512 (f64 vectors in zmm registers)
// and without (avx2: ymm pairs, where exp, tanh, log, sigmoid and products
// are declined).
func TestGeneratedF64KernelsNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	was := native.AVX512()
	defer native.SetAVX512(was)
	isas := []string{"avx2"}
	if jit.HasAVX512() {
		isas = append(isas, "avx512")
	}
	for _, isa := range isas {
		t.Run(isa, func(t *testing.T) {
			native.SetAVX512(isa == "avx512")
			testGeneratedF64Kernels(t)
		})
	}
}

func testGeneratedF64Kernels(t *testing.T) {
	ran, total := 0, 0
	why := map[string]int{}
	worst, worstAt := 0.0, ""
	for _, wl := range bench.Workloads {
		t.Run(wl.Name, func(t *testing.T) {
			spec, err := bench.BuildFloat64(wl, "small")
			if err != nil {
				t.Fatal(err)
			}
			vm := fusion.NewTapeMachine(spec.Graph)
			defer vm.Close()
			for n, v := range spec.Inputs {
				if err := G.Let(n, v); err != nil {
					t.Fatal(err)
				}
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			cg := vm.Compiled().Graph
			for _, n := range cg.AllNodes() {
				f, ok := n.Op().(*fusion.FusedOp)
				if !ok || n.Value() == nil || f.IsView() {
					continue
				}
				k := f.Kernel()
				total++
				e, err := cpu.NewExec(k, cpu.WithNative(true))
				if err != nil {
					t.Fatal(err)
				}
				if !e.Native() {
					if !errors.Is(e.NativeErr(), native.ErrUnsupported) {
						t.Fatalf("%s: %v", k.Name, e.NativeErr())
					}
					msg := e.NativeErr().Error()
					if i := strings.Index(msg, "): "); i >= 0 {
						msg = msg[i+3:]
					}
					why[strings.TrimSuffix(msg, ": "+native.ErrUnsupported.Error())]++
					if testing.Verbose() {
						t.Logf("%s: %v", k.Name, e.NativeErr())
					}
					continue
				}
				var ins [][]float64
				ch := cg.From(n.ID())
				for ch.Next() {
					switch v := ch.Node().(*G.Node).Value().Data().(type) {
					case []float64:
						ins = append(ins, v)
					case float64:
						ins = append(ins, []float64{v})
					default:
						t.Fatalf("%s: input of type %T", k.Name, v)
					}
				}
				outLen := 1
				if s, ok := n.Value().Data().([]float64); ok {
					outLen = len(s)
				}
				run := func(launch func(args []any) error) []float64 {
					args := make([]any, 0, len(ins)+f.Outputs())
					for _, in := range ins {
						args = append(args, append([]float64(nil), in...))
					}
					out := make([]float64, outLen)
					for i := range out {
						if !f.Accumulates() {
							out[i] = math.NaN()
						}
					}
					if f.OnePointer() {
						args = append(args, out)
					} else {
						at := 0
						for _, n := range f.PartSizes() {
							args = append(args, out[at:at+n])
							at += n
						}
					}
					if err := launch(args); err != nil {
						t.Fatalf("%s: %v", k.Name, err)
					}
					return out
				}
				ex, err := cpu.NewExec(k, cpu.WithNative(false))
				if err != nil {
					t.Fatal(err)
				}
				got := run(func(args []any) error { return e.Launch(f.Grid(), args...) })
				want := run(func(args []any) error { return ex.Launch(f.Grid(), args...) })
				for i := range want {
					g, w := got[i], want[i]
					if d := math.Abs(g - w); d > worst && !math.IsNaN(d) {
						worst, worstAt = d, k.Name
					}
					if !(g == w || math.IsNaN(g) && math.IsNaN(w) || math.Abs(g-w) <= 1e-12+1e-12*math.Abs(w)) {
						t.Fatalf("%s: output[%d] = %v natively, %v on the executor\n%v", k.Name, i, g, w, k)
					}
				}
				ran++
			}
		})
	}
	var rs []string
	for s, n := range why {
		rs = append(rs, s+": "+itoa(n))
	}
	sort.Strings(rs)
	t.Logf("%d of %d generated float64 kernels ran natively and agree with the executor (largest difference %.3g, %s); not supported:\n  %s",
		ran, total, worst, worstAt, strings.Join(rs, "\n  "))
}
