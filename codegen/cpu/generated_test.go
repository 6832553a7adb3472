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
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestGeneratedKernelsNative runs every kernel the fusion pass generates
// for the bench workloads (size small, the CPU backend's defaults) that
// the native code generator supports, as machine code and on the
// reference interpreter, from the inputs it had in a fused run: bit for
// bit where the kernel has no inexact op (see inexactNative), else within
// 1e-5 + 1e-4·|x| (exp and tanh within 1 ulp, sums in another order);
// where the CPU has AVX-512, also against the kernel compiled for AVX2
// only, bit for bit. It reports how many kernels ran natively, and why the
// others did not.
func TestGeneratedKernelsNative(t *testing.T) {
	ran, total, isaSame := 0, 0, 0
	why := map[string]int{}
	worst, worstAt := 0.0, "" // the largest difference from the reference
	for _, wl := range bench.Workloads {
		t.Run(wl.Name, func(t *testing.T) {
			if wl.Name == "encoder_fwd_bwd" && testing.Short() {
				t.Skip("140-odd kernels on the reference interpreter: not with -short")
			}
			spec, err := wl.Build("small")
			if err != nil {
				t.Fatal(err)
			}
			generatedKernels(t, spec, why, &total, func(f *fusion.FusedOp, e *cpu.Exec, run func(launch func(args []any) error) []float32) {
				k := f.Kernel()
				got := run(func(args []any) error { return e.Launch(f.Grid(), args...) })
				want := run(func(args []any) error { return interp.Interpret(k, f.Grid(), args...) })
				if native.AVX512() {
					// the zmm code (the products' micro-kernel, the
					// phases' unmasked loops) against the ymm code: the
					// same operations in the same order, so bit for bit
					was := native.SetAVX512(false)
					e2, err := cpu.NewExec(k, cpu.WithNative(true))
					native.SetAVX512(was)
					if err != nil {
						t.Fatal(err)
					}
					if !e2.Native() {
						t.Fatalf("%s: not native with AVX2 only: %v", k.Name, e2.NativeErr())
					}
					ymm := run(func(args []any) error { return e2.Launch(f.Grid(), args...) })
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(ymm[i]) {
							t.Fatalf("%s: output[%d] = %v with AVX-512, %v with AVX2", k.Name, i, got[i], ymm[i])
						}
					}
					isaSame++
				}
				tol := tiletest.Tol{}
				k.Walk(func(v *tile.Value) {
					if inexactNative(v) && tol.Abs == 0 {
						tol = tiletest.Tol{Abs: 1e-5, Rel: 1e-4}
					}
					if v.Op == tile.OpDot {
						// fused multiply-adds in k order against separate roundings:
						// within 2K·2⁻²⁴·Σ|a·b| (TestDotNative), here at most K = 1024
						// terms of inputs of order one: 1e-4 + 1e-4·|x| (measured: under 1e-5)
						tol = tiletest.Tol{Abs: 1e-4, Rel: 1e-4}
					}
				})
				for i := range want {
					g, w := float64(got[i]), float64(want[i])
					if d := math.Abs(g - w); d > worst && !math.IsNaN(d) {
						worst, worstAt = d, k.Name
					}
					if !(g == w || math.IsNaN(g) && math.IsNaN(w) || math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w)) {
						t.Fatalf("%s: output[%d] = %v natively, %v on the reference (tolerance %+v)\n%v", k.Name, i, g, w, tol, k)
					}
				}
				ran++
			})
		})
	}
	var rs []string
	for s, n := range why {
		rs = append(rs, s+": "+itoa(n))
	}
	sort.Strings(rs)
	t.Logf("%d of %d generated kernels ran natively and agree with the reference (largest difference %.3g, %s; %d bit for bit the same with AVX-512 and AVX2); not supported:\n  %s", ran, total, worst, worstAt, isaSame, strings.Join(rs, "\n  "))
}

// inexactNative: the ops whose native results may differ from the
// reference's (the executor's inexact ops, but the dot, which native code
// does not run).
func inexactNative(v *tile.Value) bool {
	switch {
	case (v.Op == tile.OpExp || v.Op == tile.OpTanh || v.Op == tile.OpLog || v.Op == tile.OpSigmoid ||
		v.Op == tile.OpLog1p || v.Op == tile.OpExpm1 || v.Op == tile.OpErf || v.Op == tile.OpLog2 || v.Op == tile.OpExp2 ||
		v.Op == tile.OpSin || v.Op == tile.OpCos || v.Op == tile.OpPow) && v.Type.DType == tile.F32:
		return true
	case v.Op == tile.OpReduceSum && v.Aux == int64(v.Args[0].Type.Shape.Rank-1) && v.Type.DType.IsFloat():
		return true
	}
	return false
}

// generatedKernels builds spec's graph fused on the CPU, runs it, and calls
// each with every kernel it ran (views left out) that the native code
// generator compiles (e, native), and run: which launches the kernel by a
// launch function over copies of the inputs it had in that run and a fresh
// output, poisoned with NaN unless the kernel adds into it. Kernels the
// generator declines are counted in why by reason; total counts them all.
func generatedKernels[T float32 | float64](t *testing.T, spec bench.Spec, why map[string]int, total *int, each func(f *fusion.FusedOp, e *cpu.Exec, run func(launch func(args []any) error) []T)) {
	t.Helper()
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
		*total++
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
		var ins [][]T
		ch := cg.From(n.ID())
		for ch.Next() {
			switch v := ch.Node().(*G.Node).Value().Data().(type) {
			case []T:
				ins = append(ins, v)
			case T:
				ins = append(ins, []T{v})
			default:
				t.Fatalf("%s: input of type %T", k.Name, v)
			}
		}
		outLen := 1
		if s, ok := n.Value().Data().([]T); ok {
			outLen = len(s)
		}
		// a kernel of partial results (a column sum split over row chunks)
		// writes Parts times each output: its scratch (TestColumnPartsNative
		// runs the kernel that adds them)
		parts := max(1, f.Parts())
		run := func(launch func(args []any) error) []T {
			args := make([]any, 0, len(ins)+f.Outputs())
			for _, in := range ins {
				args = append(args, append([]T(nil), in...))
			}
			out := make([]T, parts*outLen)
			for i := range out {
				if !f.Accumulates() { // else zeros, which the kernel adds into
					out[i] = T(math.NaN())
				}
			}
			if f.OnePointer() { // the kernel finds each output at its offset
				args = append(args, out)
			} else {
				at := 0
				for _, n := range f.PartSizes() {
					args = append(args, out[at:at+parts*n])
					at += parts * n
				}
			}
			if err := launch(args); err != nil {
				t.Fatalf("%s: %v", k.Name, err)
			}
			return out
		}
		each(f, e, run)
	}
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}
