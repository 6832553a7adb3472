package ptxsim_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestGeneratedKernels runs the kernels the fusion pass generates for the
// bench workloads at size small (matrix products fused, as on the GPU),
// each on the simulator from the inputs it had in a fused CPU run, and
// compares its outputs with that run's (outputs poisoned with NaN first;
// sm_80 and sm_90 alternate). Tolerances: summation orders and the GPU's
// f32 math differ from the CPU's by a few ulp; with TF32 products an
// operand that rounds the other way moves a product by 2⁻¹¹.
func TestGeneratedKernels(t *testing.T) {
	tols := map[tile.Precision]tiletest.Tol{tile.PrecIEEE: {Abs: 1e-5, Rel: 1e-4}, tile.PrecTF32: {Abs: 1e-3, Rel: 1e-2}}
	total := 0
	for _, wl := range bench.Workloads {
		for _, prec := range []tile.Precision{tile.PrecIEEE, tile.PrecTF32} {
			t.Run(wl.Name+"/"+prec.String(), func(t *testing.T) {
				if wl.Name == "encoder_fwd_bwd" && (testing.Short() || prec == tile.PrecIEEE) {
					// its ieee kernels differ from the tf32 ones only in the
					// FMA dots, which encoder_fwd and the MLPs cover
					t.Skip("the backward pass's 140-odd kernels take a while in the simulator: tf32 only, and not with -short")
				}
				n := runGenerated(t, wl, prec, tols[prec])
				if n == 0 {
					t.Fatal("no generated kernel ran")
				}
				total += n
			})
		}
	}
	t.Logf("%d generated kernels agree with the fused CPU run", total)
}

func runGenerated(t *testing.T, wl bench.Workload, prec tile.Precision, tol tiletest.Tol, opts ...fusion.Option) int {
	return runGeneratedOn(t, wl, prec, tol, 0, nil, opts...)
}

// runGeneratedOn is runGenerated on sm_<arch> (0: sm_80 and sm_90 in
// turn), calling check (if not nil) with each kernel before it runs.
func runGeneratedOn(t *testing.T, wl bench.Workload, prec tile.Precision, tol tiletest.Tol, arch int, check func(*tile.Kernel), opts ...fusion.Option) int {
	spec, err := wl.Build("small")
	if err != nil {
		t.Fatal(err)
	}
	vm := fusion.NewTapeMachine(spec.Graph, append([]fusion.Option{fusion.WithMatMulFusion(true), fusion.WithPrecision(prec)}, opts...)...)
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
	kernels := 0
	for _, n := range cg.AllNodes() {
		f, ok := n.Op().(*fusion.FusedOp)
		if !ok || n.Value() == nil || f.IsView() {
			continue
		}
		var args []any
		ch := cg.From(n.ID())
		for ch.Next() {
			switch v := ch.Node().(*G.Node).Value().Data().(type) {
			case []float32:
				args = append(args, append([]float32(nil), v...))
			case float32:
				args = append(args, []float32{v})
			default:
				t.Fatalf("%s: input of type %T", f.Kernel().Name, v)
			}
		}
		var want []float32
		switch v := n.Value().Data().(type) {
		case []float32:
			want = v
		case float32:
			want = []float32{v}
		default:
			t.Fatalf("%s: output of type %T", f.Kernel().Name, v)
		}
		out := make([]float32, len(want))
		for i := range out {
			if !f.Accumulates() { // else zeros, which the kernel adds into
				out[i] = float32(math.NaN())
			}
		}
		var outs []any
		at := 0 // a multi-output kernel writes each output through its own pointer
		for _, size := range f.PartSizes() {
			outs = append(outs, out[at:at+size])
			at += size
		}
		if f.OnePointer() { // or finds each at its offset
			outs = []any{out}
		}
		// a CPU kernel of partial results (a column sum split over row
		// chunks) writes them into scratch, poisoned too; its Combine adds
		// them into the outputs
		var scratch []any
		for _, size := range f.PartSizes() {
			if f.Parts() > 1 {
				s := make([]float32, f.Parts()*size)
				for i := range s {
					s[i] = float32(math.NaN())
				}
				scratch = append(scratch, s)
			}
		}
		if scratch != nil {
			args = append(args, scratch...)
		} else {
			args = append(args, outs...)
		}
		k := f.Kernel()
		if check != nil {
			check(k)
		}
		a := arch
		if a == 0 {
			a = 80 + 10*(kernels%2)
		}
		sim := &ptxsim.Launcher{Arch: a, Racecheck: true, Initcheck: true, NumWarps: k.Meta["num_warps"]}
		if err := sim.Launch(k, f.Grid(), args...); err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		if comb, grid := f.Combine(); scratch != nil {
			if comb == nil {
				t.Fatalf("%s: %d parts and no combining kernel", k.Name, f.Parts())
			}
			sim := &ptxsim.Launcher{Arch: a, Racecheck: true, Initcheck: true, NumWarps: comb.Meta["num_warps"]}
			if err := sim.Launch(comb, grid, append(scratch, outs...)...); err != nil {
				t.Fatalf("%s: %v", comb.Name, err)
			}
		}
		for i := range want {
			g, w := float64(out[i]), float64(want[i])
			if !(math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w)) && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Fatalf("%s (%s): output[%d] = %v in the simulator, %v on the CPU (tolerance %+v)\n%v", k.Name, sim.Name(), i, g, w, tol, k)
			}
		}
		kernels++
	}
	return kernels
}

// TestAttentionKernels runs the flash attention kernels of training graphs
// at shapes the bench workloads do not have (sequence lengths and head dims
// that are not multiples of the blocks, head dims 32, 64, 128 and 96 padded
// to 128, additive and causal masks, a scale by division; heads by
// projections and a concat: the weights' stack, the projections' and the
// weights' gradients' batched products, attention over the heads) in the
// simulator, from the inputs of a fused CPU run, against that run's
// outputs; in every precision (ieee on FMAs; tf32, bf16 and 3xTF32 in
// codegen's MMA loops: scores, probabilities and accumulators in mma
// fragments, K and V through cp.async stages); the kernels written for the
// H200 (where these small grids take 32-row blocks and 2 warps) and for a
// one-SM GPU (64×64 and 64×32 score tiles, 4 warps). The tolerances are
// the fused CPU run's distance: the same roundings, other summation orders
// and f32 math; bf16 rounds the probabilities too, where an exp one ulp
// apart on the GPU can round the other way (2⁻⁸); the dQ kernel's row sums
// for the gradient of the constant scale (Σ dS∘S, a cancellation) come out
// 1.3e-4 from the ieee run's in the CPU's own 3xTF32 at head dim 128.
func TestAttentionKernels(t *testing.T) {
	tols := map[tile.Precision]tiletest.Tol{
		tile.PrecIEEE: {Abs: 1e-5, Rel: 1e-4}, tile.PrecTF32: {Abs: 1e-3, Rel: 1e-2},
		tile.PrecBF16: {Abs: 1e-2, Rel: 5e-2}, tile.PrecTF32x3: {Abs: 2e-4, Rel: 1e-4},
	}
	for _, c := range []struct {
		name              string
		b, sq, sk, dk, dv int
		mask              string
	}{
		{"odd lengths, causal −∞", 2, 37, 45, 20, 12, "causal"},
		{"additive mask input, scale by division", 1, 33, 19, 24, 40, "input"},
		{"head dim 96", 1, 21, 30, 96, 96, ""},
		{"3 heads of 64 by projections and a concat, causal", 2, 37, 37, 64, 64, "heads"},
		{"head dim 32, causal", 1, 70, 70, 32, 32, "causal"},
		{"head dim 64", 1, 75, 66, 64, 64, ""},
		{"head dim 128, causal", 1, 40, 40, 128, 128, "causal"},
	} {
		for _, prec := range tile.Precisions {
			for _, target := range []struct {
				name string
				t    graphpass.Target
			}{{"h200", graphpass.H200}, {"one SM", graphpass.GPU(1, 1024, 227<<10)}} {
				t.Run(c.name+"/"+prec.String()+"/"+target.name, func(t *testing.T) {
					if testing.Short() && (prec == tile.PrecIEEE || prec == tile.PrecTF32x3) && c.dk >= 64 {
						t.Skip("-short: the large head dims in tf32 and bf16 only (ieee's FMA dots and 3xTF32's MMA loops are covered at the small ones)")
					}
					wl := bench.Workload{Name: c.name, Build: func(string) (bench.Spec, error) {
						if c.mask == "heads" {
							return headsSpec(c.b, c.sq, 3, c.dk)
						}
						return attentionSpec(c.b, c.sq, c.sk, c.dk, c.dv, c.mask)
					}}
					if n := runGenerated(t, wl, prec, tols[prec], fusion.WithTarget(target.t)); n < 3 {
						t.Fatalf("%d kernels ran, want at least the three of attention", n)
					}
				})
			}
		}
	}
}

// headsSpec is h heads of dh columns as Gorgonia users write them: per-head
// projections of x, causal attention, a Concat; a loss Σ(Concat²) and the
// projections' weights' gradients (float32).
func headsSpec(b, s, h, dh int) (bench.Spec, error) {
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(uint64(s), uint64(h)))
	inputs := map[*G.Node]tensor.Tensor{}
	input := func(name string, scale float64, shape ...int) *G.Node {
		d := make([]float32, shape[0]*shape[1])
		for i := range d {
			d[i] = float32((rng.Float64()*2 - 1) * scale)
		}
		node := G.NewMatrix(g, tensor.Float32, G.WithShape(shape...), G.WithName(name))
		inputs[node] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
		return node
	}
	d := h * dh
	x := input("x", 1, b*s, d)
	m := make([]float32, s*s)
	for i := range s {
		for j := i + 1; j < s; j++ {
			m[i*s+j] = float32(math.Inf(-1))
		}
	}
	causal := G.NewConstant(tensor.New(tensor.WithShape(s, s), tensor.WithBacking(m)), G.In(g))
	var outs, ws G.Nodes
	for i := range h {
		proj := func(name string) *G.Node {
			w := input(name+string(rune('0'+i)), 1/math.Sqrt(float64(d)), d, dh)
			ws = append(ws, w)
			return G.Must(G.Reshape(G.Must(G.Mul(x, w)), tensor.Shape{b, s, dh}))
		}
		q, k, v := proj("wq"), proj("wk"), proj("wv")
		sc := G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(float32(1/math.Sqrt(float64(dh))))))
		sc = G.Must(G.BroadcastAdd(sc, causal, nil, []byte{0}))
		o := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
		outs = append(outs, G.Must(G.Reshape(o, tensor.Shape{b * s, dh})))
	}
	loss := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Concat(1, outs...))))))
	grads, err := G.Grad(loss, ws...)
	if err != nil {
		return bench.Spec{}, err
	}
	return bench.Spec{Name: "heads", Graph: g, Inputs: inputs, Outputs: append(G.Nodes{loss}, grads...)}, nil
}

// attentionSpec is softmax(f(q·kᵀ))·v, a loss Σ(out²) and the gradients of
// q, k and v (float32).
func attentionSpec(b, sq, sk, dk, dv int, mask string) (bench.Spec, error) {
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(uint64(sq), uint64(sk)))
	inputs := map[*G.Node]tensor.Tensor{}
	input := func(name string, shape ...int) *G.Node {
		n := 1
		for _, s := range shape {
			n *= s
		}
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(rng.Float64()*2 - 1)
		}
		node := G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name))
		inputs[node] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
		return node
	}
	q, k, v := input("q", b, sq, dk), input("k", b, sk, dk), input("v", b, sk, dv)
	sc := G.Must(G.BatchedMatMul(q, k, false, true))
	switch mask {
	case "causal":
		m := make([]float32, sq*sk)
		for i := range sq {
			for j := i + 1; j < sk; j++ {
				m[i*sk+j] = float32(math.Inf(-1))
			}
		}
		sc = G.Must(G.Mul(sc, G.NewConstant(float32(1/math.Sqrt(float64(dk))))))
		c := G.NewConstant(tensor.New(tensor.WithShape(sq, sk), tensor.WithBacking(m)), G.In(g))
		sc = G.Must(G.BroadcastAdd(sc, c, nil, []byte{0}))
	case "input":
		sc = G.Must(G.Add(G.Must(G.Div(sc, G.NewConstant(float32(math.Sqrt(float64(dk)))))), input("mask", b, sq, sk)))
	default:
		sc = G.Must(G.Mul(sc, G.NewConstant(float32(1/math.Sqrt(float64(dk))))))
	}
	out := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
	loss := G.Must(G.Sum(G.Must(G.Square(out))))
	grads, err := G.Grad(loss, q, k, v)
	if err != nil {
		return bench.Spec{}, err
	}
	return bench.Spec{Name: "attention", Graph: g, Inputs: inputs, Outputs: append(G.Nodes{loss}, grads...)}, nil
}
