package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestOversizedLeftToGorgonia: on a CPU whose kernels run on the executor
// (WithNativeCPU(false), as on CPUs without AVX2 and FMA), nodes that read
// or write a tensor of more elements than kernels index in 32 bits
// (graphpass.MaxElements, lowered here to 5000 so that the tensors stay
// small) run as Gorgonia runs them, beside the kernels of the rest of the
// graph, and every value is right: out = Σ_j exp(x)ᵢⱼ + Σ_k tanh(y)ᵢₖ with
// x 64×100 (6400 elements: exp and its sum left to Gorgonia), y 64×10
// (fused), and p = x·w (a product reading x: left to Gorgonia too). The
// report names each such node and says why. Where the CPU's kernels run
// as machine code (since the fifty-eighth session, 2026-12-07), and on the
// GPU (where this build has it; else skipped, saying so), they are fused,
// in 64-bit kernels, every kernel machine code on the CPU, and the values
// the same.
func TestOversizedLeftToGorgonia(t *testing.T) {
	const r, c, cy, cw, limit = 64, 100, 10, 7, 5000
	rng := rand.New(rand.NewPCG(40, 1))
	xv, yv, wv := randMatrix(rng, r, c, 1), randMatrix(rng, r, cy, 2), randMatrix(rng, c, cw, 1)
	xs, ys, ws := xv.Data().([]float64), yv.Data().([]float64), wv.Data().([]float64)
	want, wantP := make([]float64, r), make([]float64, r*cw)
	for i := range r {
		for j := range c {
			want[i] += math.Exp(xs[i*c+j])
			for k := range cw {
				wantP[i*cw+k] += xs[i*c+j] * ws[j*cw+k]
			}
		}
		for k := range cy {
			want[i] += math.Tanh(ys[i*cy+k])
		}
	}
	for _, tc := range []struct {
		name   string
		b      fusion.Backend
		native bool // the CPU's kernels as machine code
	}{{"cpu executor", fusion.CPU, false}, {"cpu machine code", fusion.CPU, true}, {"cuda", fusion.CUDA, false}} {
		b, native, name := tc.b, tc.native, tc.name
		t.Run(name, func(t *testing.T) {
			if err := fusion.Available(b); err != nil {
				t.Skipf("backend %v is not here: %v", b, err)
			}
			if native && !jit.Supported() {
				t.Skip("no machine code here: needs amd64 with AVX2 and FMA")
			}
			left2G := b == fusion.CPU && !native
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(r, c), G.WithName("x"))
			y := G.NewMatrix(g, tensor.Float64, G.WithShape(r, cy), G.WithName("y"))
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(c, cw), G.WithName("w"))
			out := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Exp(x)), 1)), G.Must(G.Sum(G.Must(G.Tanh(y)), 1))))
			p := G.Must(G.Mul(x, w))
			G.Let(x, xv)
			G.Let(y, yv)
			G.Let(w, wv)
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(b), fusion.WithMatMulFusion(true), fusion.WithMaxElements(limit), fusion.WithNativeCPU(native))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			rep := vm.Report()
			left := map[string]string{}
			for _, u := range rep.Unfused {
				left[u.Op] = u.Why
			}
			for _, op := range []string{"Exp", "Σ[1]", "MatMul"} {
				why, ok := "", false
				for o, w := range left {
					if strings.HasPrefix(o, op) {
						why, ok = w, true
					}
				}
				switch {
				case left2G && (!ok || !strings.Contains(why, "6400 elements") || !strings.Contains(why, "32-bit offsets")):
					t.Errorf("%s: left to Gorgonia %v, why %q (unfused: %v)", op, ok, why, rep.Unfused)
				case !left2G && ok:
					t.Errorf("%s left to Gorgonia on %s: %q", op, name, why)
				}
			}
			if rep.Kernels() == 0 {
				t.Fatalf("no kernel: the small part of the graph is not fused\n%v", rep)
			}
			if native && rep.OnExecutor() > 0 {
				t.Fatalf("%d kernels on the executor, want every one machine code\n%v", rep.OnExecutor(), rep)
			}
			if !left2G {
				wide := 0
				for _, node := range vm.Compiled().Graph.AllNodes() {
					if f, ok := node.Op().(*fusion.FusedOp); ok && strings.Contains(f.Kernel().String(), "-> i64") {
						wide++
					}
				}
				if wide == 0 {
					t.Fatalf("no kernel indexes in 64 bits\n%v", rep)
				}
			}
			for run := range 2 {
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				closeTo(t, fmt.Sprintf("run %d: out", run), out.Value().Data().([]float64), want, 1e-12)
				closeTo(t, fmt.Sprintf("run %d: x·w", run), p.Value().Data().([]float64), wantP, 1e-12)
			}
			if n := vm.Stats().ExecutorLaunches; native && n > 0 {
				t.Fatalf("%d launches handed to the executor at run time, want none", n)
			}
		})
	}
}

// TestOversizedAttentionMask: attention whose additive mask has more
// elements than kernels index (the bound lowered to 4096; the mask and the
// scores 8192) is not one flash kernel: on a CPU whose kernels run on the
// executor its products, softmax and mask run as Gorgonia runs them, the
// rest fused; where they run as machine code they are fused in 64-bit
// kernels, every one machine code (since the fifty-eighth session); either
// way the output and the gradients of q, k and v are those of the machine
// with the bound at its default (one flash kernel forward, two backward),
// within 1e-12.
func TestOversizedAttentionMask(t *testing.T) {
	const b, s, d = 2, 64, 8
	rng := rand.New(rand.NewPCG(40, 2))
	vals := map[string]*tensor.Dense{}
	for _, n := range []string{"q", "k", "v"} {
		vals[n] = tensor.New(tensor.WithShape(b, s, d), tensor.WithBacking(randMatrix(rng, b*s, d, 1).Data()))
	}
	vals["mask"] = tensor.New(tensor.WithShape(b, s, s), tensor.WithBacking(randMatrix(rng, b*s, s, 2).Data()))
	run := func(opts ...fusion.Option) (*fusion.Report, [][]float64) {
		g := G.NewGraph()
		in := map[string]*G.Node{}
		for _, n := range []string{"q", "k", "v", "mask"} {
			in[n] = G.NewTensor(g, tensor.Float64, 3, G.WithShape(vals[n].Shape()...), G.WithName(n))
			G.Let(in[n], vals[n].Clone().(*tensor.Dense))
		}
		sc := G.Must(G.Add(G.Must(G.Mul(G.Must(G.BatchedMatMul(in["q"], in["k"], false, true)), G.NewConstant(0.35))), in["mask"]))
		out := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), in["v"], false, false))
		grads, err := G.Grad(G.Must(G.Sum(G.Must(G.Square(out)))), in["q"], in["k"], in["v"])
		if err != nil {
			t.Fatal(err)
		}
		vm := fusion.NewTapeMachine(g, append([]fusion.Option{fusion.WithMatMulFusion(true)}, opts...)...)
		defer vm.Close()
		if err := vm.Err(); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		var got [][]float64
		for _, n := range append(G.Nodes{out}, grads...) {
			got = append(got, append([]float64(nil), n.Value().Data().([]float64)...))
		}
		return vm.Report(), got
	}
	repDef, want := run()
	repLow, got := run(fusion.WithMaxElements(4096), fusion.WithNativeCPU(false))
	if !strings.Contains(repDef.String(), "attention") {
		t.Fatalf("at the default bound no attention kernel:\n%v", repDef)
	}
	if strings.Contains(repLow.String(), "attention") {
		t.Fatalf("at 4096 an attention kernel reads the 8192-element mask:\n%v", repLow)
	}
	over := 0
	for _, u := range repLow.Unfused {
		if strings.Contains(u.Why, "32-bit offsets") {
			over++
		}
	}
	if over == 0 || repLow.Kernels() == 0 {
		t.Fatalf("at 4096: %d ops left to Gorgonia for their size, %d kernels\n%v", over, repLow.Kernels(), repLow)
	}
	closeValues(t, "at 4096 against the default", got, want, 1e-12)
	if !jit.Supported() {
		t.Log("no machine code here (needs amd64 with AVX2 and FMA): its 64-bit kernels not run")
		return
	}
	repNat, gotNat := run(fusion.WithMaxElements(4096))
	if len(repNat.Unfused) != 0 || repNat.OnExecutor() != 0 || strings.Contains(repNat.String(), "attention") {
		t.Fatalf("at 4096 as machine code: %d ops left to Gorgonia, %d kernels on the executor, want none and no attention kernel\n%v", len(repNat.Unfused), repNat.OnExecutor(), repNat)
	}
	closeValues(t, "at 4096 as machine code against the default", gotNat, want, 1e-12)
}

// TestIndex64Kernels: for a GPU (the H200's kernels, run here on the CPU
// and in the PTX simulator) a group that reads or writes a tensor of more
// elements than 32-bit offsets reach (the bound lowered to 1000) is fused
// all the same, its kernel indexing in 64 bits: a chain, a softmax, column
// sums and a product with its bias over x of 48×100 each cast their
// program ids and aranges to i64, a small tanh does not; every value is
// the 32-bit kernels' (the bound at its default) within 1e-12, and every
// kernel computes in the simulator what it computed on the CPU.
func TestIndex64Kernels(t *testing.T) {
	index64KernelsAgree(t, &ptxsim.Launcher{Arch: 90, NumWarps: 4})
}

// index64KernelsAgree is TestIndex64Kernels with its kernels run again on
// gpu (the PTX simulator, or a GPU: TestIndex64KernelsOnGPU).
func index64KernelsAgree(t *testing.T, gpu tiletest.Launcher) {
	const r, c, n, limit = 48, 100, 30, 1000
	rng := rand.New(rand.NewPCG(40, 3))
	xv, wv, bv, sv := randMatrix(rng, r, c, 2), randMatrix(rng, c, n, 1), randMatrix(rng, 1, n, 1), randMatrix(rng, 10, 10, 2)
	run := func(opts ...fusion.Option) (*fusion.Machine, [][]float64) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(r, c), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(c, n), G.WithName("w"))
		b := G.NewVector(g, tensor.Float64, G.WithShape(n), G.WithName("b"))
		s := G.NewMatrix(g, tensor.Float64, G.WithShape(10, 10), G.WithName("s"))
		G.Let(x, xv.Clone().(*tensor.Dense))
		G.Let(w, wv.Clone().(*tensor.Dense))
		G.Let(b, tensor.New(tensor.WithShape(n), tensor.WithBacking(append([]float64(nil), bv.Data().([]float64)...))))
		G.Let(s, sv.Clone().(*tensor.Dense))
		outs := G.Nodes{
			G.Must(G.Add(G.Must(G.Tanh(G.Must(G.Mul(x, G.NewConstant(0.5))))), G.NewConstant(1.0))),
			G.Must(G.SoftMax(x)),
			G.Must(G.Sum(x, 0)),
			G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0})),
			G.Must(G.Tanh(s)),
		}
		vm := fusion.NewTapeMachine(g, append([]fusion.Option{fusion.WithTarget(graphpass.H200), fusion.WithMatMulFusion(true)}, opts...)...)
		if err := vm.Err(); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		var vals [][]float64
		for _, o := range outs {
			vals = append(vals, append([]float64(nil), o.Value().Data().([]float64)...))
		}
		return vm, vals
	}
	ref, want := run()
	defer ref.Close()
	vm, got := run(fusion.WithMaxElements(limit))
	defer vm.Close()
	if rep := vm.Report(); len(rep.Unfused) != 0 {
		t.Fatalf("left to Gorgonia for a GPU: %v", rep.Unfused)
	}
	wide, narrow := 0, 0
	for _, node := range vm.Compiled().Graph.AllNodes() {
		f, ok := node.Op().(*fusion.FusedOp)
		if !ok {
			continue
		}
		k := f.Kernel()
		casts := strings.Count(k.String(), "-> i64")
		big := false
		for _, sz := range f.PartSizes() {
			big = big || sz > limit
		}
		ch := vm.Compiled().Graph.From(node.ID())
		for ch.Next() {
			big = big || ch.Node().(*G.Node).Shape().TotalSize() > limit
		}
		if big != (casts > 0) {
			t.Fatalf("%s (a tensor past %d elements: %v): %d casts to i64\n%v", k.Name, limit, big, casts, k)
		}
		if big {
			wide++
		} else {
			narrow++
		}
	}
	if wide < 4 || narrow < 1 {
		t.Fatalf("%d kernels in 64 bits, %d in 32: want the chain, softmax, column sums and product in 64, the small tanh in 32", wide, narrow)
	}
	closeValues(t, "64-bit kernels against 32-bit ones", got, want, 1e-12)
	k, _ := kernelsAgree(t, vm, gpu, "64-bit kernels")
	if k < wide+narrow {
		t.Fatalf("%d kernels compared on %s, want %d", k, gpu.Name(), wide+narrow)
	}
	t.Logf("%d kernels in 64 bits and %d in 32 agree with the 32-bit ones and on %s", wide, narrow, gpu.Name())
}

// TestFlattenedGrids: a GPU launch holds at most 65535 programs on its
// second and third axes; kernels whose batch (a batched product's, or
// attention's batch × heads) passes that run flattened onto the first
// axis. Here the bound is lowered to 4 (graphpass.Target.MaxGridYZ) for
// the H200's kernels, run on the CPU and in the PTX simulator: attention
// forward and backward over a batch of 6 and a batched product over 9
// give the values of the unflattened kernels within 1e-12, each kernel
// whose grid passed the bound has one program axis.
func TestFlattenedGrids(t *testing.T) {
	flattenedGridsAgree(t, &ptxsim.Launcher{Arch: 90, NumWarps: 4})
}

// flattenedGridsAgree is TestFlattenedGrids with the kernels run again on
// gpu (the PTX simulator, or a GPU: TestFlattenedGridsOnGPU).
func flattenedGridsAgree(t *testing.T, gpu tiletest.Launcher) {
	const nb, s, d = 6, 16, 8
	rng := rand.New(rand.NewPCG(40, 5))
	vals := map[string]*tensor.Dense{}
	for _, name := range []string{"q", "k", "v"} {
		vals[name] = tensor.New(tensor.WithShape(nb, s, d), tensor.WithBacking(randMatrix(rng, nb*s, d, 1).Data()))
	}
	vals["a"] = tensor.New(tensor.WithShape(9, 5, 7), tensor.WithBacking(randMatrix(rng, 45, 7, 1).Data()))
	vals["b"] = tensor.New(tensor.WithShape(9, 7, 6), tensor.WithBacking(randMatrix(rng, 63, 6, 1).Data()))
	run := func(tg graphpass.Target) (*fusion.Machine, [][]float64) {
		g := G.NewGraph()
		in := map[string]*G.Node{}
		for _, name := range []string{"q", "k", "v", "a", "b"} { // in one order: the same graph every time
			v := vals[name]
			in[name] = G.NewTensor(g, tensor.Float64, 3, G.WithShape(v.Shape()...), G.WithName(name))
			G.Let(in[name], v.Clone().(*tensor.Dense))
		}
		sc := G.Must(G.Mul(G.Must(G.BatchedMatMul(in["q"], in["k"], false, true)), G.NewConstant(0.35)))
		out := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), in["v"], false, false))
		prod := G.Must(G.BatchedMatMul(in["a"], in["b"], false, false))
		grads, err := G.Grad(G.Must(G.Add(G.Must(G.Sum(G.Must(G.Square(out)))), G.Must(G.Sum(G.Must(G.Tanh(prod)))))), in["q"], in["k"], in["v"], in["a"])
		if err != nil {
			t.Fatal(err)
		}
		vm := fusion.NewTapeMachine(g, fusion.WithTarget(tg), fusion.WithMatMulFusion(true), fusion.WithKeep(out, prod))
		if err := vm.Err(); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		var got [][]float64
		for _, n := range append(G.Nodes{out, prod}, grads...) {
			got = append(got, append([]float64(nil), n.Value().Data().([]float64)...))
		}
		return vm, got
	}
	ref, want := run(graphpass.H200)
	defer ref.Close()
	low := graphpass.H200
	low.MaxGridYZ = 4
	vm, got := run(low)
	defer vm.Close()
	flat, attention := 0, 0
	for _, node := range vm.Compiled().Graph.AllNodes() {
		f, ok := node.Op().(*fusion.FusedOp)
		if !ok {
			continue
		}
		k := f.Kernel()
		if strings.Contains(k.Name, "attention") {
			attention++
		}
		if g := f.Grid(); g[1] > 4 || g[2] > 4 {
			t.Fatalf("%s runs over %v, past the bound of 4", k.Name, g)
		}
		if strings.Count(k.String(), "get_program_id") == 1 && strings.Contains(k.String(), "rem %") && f.Grid()[0] >= 6 {
			flat++
		}
	}
	if attention < 3 || flat < 4 {
		t.Fatalf("%d attention kernels, %d flattened: want the forward, its two backward kernels and the batched product's flattened", attention, flat)
	}
	closeValues(t, "flattened against not", got, want, 1e-12)
	k, _ := kernelsAgree(t, vm, gpu, "flattened grids")
	if k == 0 {
		t.Fatalf("no kernel compared on %s", gpu.Name())
	}
	t.Logf("%d kernels flattened (%d attention kernels), %d compared on %s", flat, attention, k, gpu.Name())
}

// TestLeftForSizeReplayed: on a CPU whose kernels run on the executor, ops
// left to Gorgonia for their size (the bound lowered to 32 elements) run
// as Gorgonia runs them, on the operands the user gave them: a row
// broadcast added to a matrix (Gorgonia's Repeat by a SizeOf, which the
// replay makes a constant: its shape inference had made the repeat 0
// long, and the compile failed), x·Transpose(w) with w square and not
// (its operand had been folded into the product, which Gorgonia then ran
// as x·w: wrong values where w is square, a shape error where it is not),
// and the gradient of such a product (Gorgonia's Transpose(xᵀ·dy), which
// had been folded into a swapped product). Every value, the gradients
// too, is the unfused machine's within 1e-12.
func TestLeftForSizeReplayed(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(g *G.ExprGraph, rng *rand.Rand) (out *G.Node, wrt G.Nodes)
	}{
		{"a row broadcast added to a matrix", func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(13, 24), G.WithName("x"), G.WithValue(randMatrix(rng, 13, 24, 1)))
			b := G.NewVector(g, tensor.Float64, G.WithShape(24), G.WithName("b"), G.WithValue(tensor.New(tensor.WithShape(24), tensor.WithBacking(randMatrix(rng, 1, 24, 1).Data()))))
			return G.Must(G.BroadcastAdd(x, b, nil, []byte{0})), G.Nodes{x, b}
		}},
		{"x·Transpose(w), w square", func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(10, 12), G.WithName("x"), G.WithValue(randMatrix(rng, 10, 12, 1)))
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(12, 12), G.WithName("w"), G.WithValue(randMatrix(rng, 12, 12, 1)))
			return G.Must(G.Mul(x, G.Must(G.Transpose(w)))), G.Nodes{x, w}
		}},
		{"x·Transpose(w), w not square", func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(10, 12), G.WithName("x"), G.WithValue(randMatrix(rng, 10, 12, 1)))
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(7, 12), G.WithName("w"), G.WithValue(randMatrix(rng, 7, 12, 1)))
			return G.Must(G.Mul(x, G.Must(G.Transpose(w)))), G.Nodes{x, w}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(opts ...fusion.Option) [][]float64 {
				g := G.NewGraph()
				out, wrt := c.build(g, rand.New(rand.NewPCG(58, 1))) // the same values each run
				loss := G.Must(G.Sum(G.Must(G.Square(out))))
				grads, err := G.Grad(loss, wrt...)
				if err != nil {
					t.Fatal(err)
				}
				vm := fusion.NewTapeMachine(g, append([]fusion.Option{fusion.WithMatMulFusion(true), fusion.WithNativeCPU(false)}, opts...)...)
				defer vm.Close()
				if err := vm.Err(); err != nil {
					t.Fatal(err)
				}
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				vals := [][]float64{append([]float64(nil), out.Value().Data().([]float64)...)}
				for _, gr := range grads {
					vals = append(vals, append([]float64(nil), gr.Value().Data().([]float64)...))
				}
				if len(opts) > 1 && len(vm.Report().Unfused) == 0 {
					t.Fatalf("nothing left to Gorgonia for its size\n%v", vm.Report())
				}
				return vals
			}
			want := run(fusion.WithFusion(false))
			got := run(fusion.WithFusion(true), fusion.WithMaxElements(32))
			closeValues(t, "left to Gorgonia for size against unfused", got, want, 1e-12)
		})
	}
}
