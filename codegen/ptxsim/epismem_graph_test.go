package ptxsim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestEpiSmemTrainingKernels: every product kernel of a training step of
// gelu(x·W1 + b1)·W2 (the forward's gelu(x·W+b) with its kept
// intermediates, dH = dO·W2ᵀ with the GELU's backward in its epilogue
// reading the pre-activation, the weight gradients Aᵀ·B), as graphpass
// emits it at TF32 for the H200 forced onto the swapped form (BLOCK_M 256
// or 192, 128 columns, 8 warps) with the epilogue through shared memory
// (epi_smem = 1), with the epilogue's loads late (late_loads = 2: each
// slot's load issued two groups ahead of its use in the store, not all of
// them before the epilogue), and both, agrees in the simulator (racecheck, initcheck, the
// wgmma checks) with the interpreter running the same kernel: seeded
// inputs, outputs poisoned, sizes no multiple of the tile (300 rows, 200
// hidden, 136 outputs, 96 inputs); and dO·W3ᵀ ⊙ (1 − tanh(u)²), a backward
// product whose epilogue reads a value u of its output's shape.
func TestEpiSmemTrainingKernels(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a dozen product kernels in the simulator")
	}
	const n, in, hid, out = 300, 96, 200, 136
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(n, in), G.WithName("x"))
	w1 := G.NewMatrix(g, tensor.Float32, G.WithShape(in, hid), G.WithName("w1"))
	w2 := G.NewMatrix(g, tensor.Float32, G.WithShape(hid, out), G.WithName("w2"))
	b1 := G.NewVector(g, tensor.Float32, G.WithShape(hid), G.WithName("b1"))
	k := func(v float64) *G.Node { return G.NewConstant(float32(v)) }
	z := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0}))
	inner := G.Must(G.Mul(G.Must(G.Add(z, G.Must(G.Mul(G.Must(G.Cube(z)), k(0.044715))))), k(math.Sqrt(2/math.Pi))))
	h := G.Must(G.Mul(G.Must(G.HadamardProd(z, G.Must(G.Add(G.Must(G.Tanh(inner)), k(1))))), k(0.5)))
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Mul(h, w2))))))
	if _, err := G.Grad(loss, w1, w2, b1); err != nil {
		t.Fatal(err)
	}
	// and a backward product with the activation's derivative in its
	// epilogue, as the encoder's dH = dO·W2ᵀ ⊙ gelu'(z) (here tanh's,
	// 1 − tanh(u)², u a value of the output's shape)
	do := G.NewMatrix(g, tensor.Float32, G.WithShape(n, out), G.WithName("do"))
	u := G.NewMatrix(g, tensor.Float32, G.WithShape(n, hid), G.WithName("u"))
	w3 := G.NewMatrix(g, tensor.Float32, G.WithShape(hid, out), G.WithName("w3"))
	th := G.Must(G.Tanh(u))
	G.Must(G.HadamardProd(G.Must(G.Mul(do, G.Must(G.Transpose(w3)))), G.Must(G.Sub(k(1), G.Must(G.HadamardProd(th, th))))))
	gr, err := graphpass.Import(g)
	if err != nil {
		t.Fatal(err)
	}
	t0 := graphpass.H200
	rng := rand.New(rand.NewPCG(17, 19))
	products := 0
	var epilogueInputs bool // dO·W3ᵀ's kernel reads u in its epilogue
	for _, grp := range graphpass.Partition(gr, graphpass.Options{Target: t0, MatMul: true}) {
		if grp.Kind != graphpass.MatMulGroup {
			continue
		}
		products++
		for _, form := range []struct {
			name      string
			epi, late int
		}{{"epi_smem", 1, 0}, {"late_loads", 0, 2}, {"epi_smem late_loads", 1, 2}} {
			for _, bm := range []int{256, 192} {
				meta := tile.Meta{"wgmma": 2, "BLOCK_M": bm, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 4}
				if form.epi > 0 {
					meta["epi_smem"] = form.epi
				}
				if form.late > 0 {
					meta["late_loads"] = form.late
				}
				t.Run(fmt.Sprintf("group %d %v %d rows %s", grp.ID, grp.Root.Info.Shape, bm, form.name), func(t *testing.T) {
					kern, err := graphpass.Emit(grp, graphpass.TuneTo(t0, meta), tile.PrecTF32)
					if err != nil {
						t.Fatal(err)
					}
					for _, x := range grp.Inputs {
						if x.G != nil && x.G.Name() == "u" {
							epilogueInputs = true
						}
					}
					sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: 8}
					simAgainstInterp(t, grp, kern, rng, sim)
					t.Logf("%d inputs, %d outputs, %d members", len(grp.Inputs), kern.Outs, len(grp.Members))
					ptx := sim.Last.PTX
					if !strings.Contains(ptx, "wgmma.mma_async") || form.epi > 0 && !strings.Contains(ptx, "ld.shared.v4.f32") {
						t.Fatalf("not the swapped form with the epilogue through shared memory (%v)", kern.Tile.Meta)
					}
					ok, _ := lateInEpilogue(ptx)
					if form.late > 0 && kern.Outs == 1 && !ok {
						t.Fatalf("the epilogue's loads are not late: every scalar ld.global.f32 after the K loop comes before its first ex2 (%v)", kern.Tile.Meta)
					}
				})
			}
		}
	}
	if products < 4 || !epilogueInputs {
		t.Errorf("%d product kernels; one reads u: %v", products, epilogueInputs)
	}
}

// lateInEpilogue reports whether a kernel's epilogue (after its last
// wgmma.wait_group) loads in the accumulator's layout (scalar
// ld.global.f32, predicated or not) after it computed an ex2 there (late:
// those loads interleaved with its arithmetic, not all issued before it),
// and whether it has both such loads and an ex2 (ok is true without them:
// a load in another layout, vectorised and converted, is loaded whole).
func lateInEpilogue(ptx string) (ok, late bool) {
	epi := ptx[strings.LastIndex(ptx, "wgmma.wait_group"):]
	first := strings.Index(epi, "ex2.approx")
	last := strings.LastIndex(epi, "ld.global.f32 ")
	if last < 0 || first < 0 {
		return true, false
	}
	return last > first, last > first
}

// TestEpiLateLoadsEncoder: the encoder block's (bench's encoder_fwd_bwd,
// small, compiled by package fusion for the H200 at TF32) backward
// product dH = dO·W2ᵀ ⊙ gelu'(z), whose epilogue reads z of its output's
// shape in the accumulator's layout, forced onto the swapped form with
// late_loads = 2 and without, at 128 and 64 rows (and warp-specialised,
// ws = 1, at 128): in the simulator
// (racecheck, initcheck) it agrees with the interpreter (seeded inputs,
// outputs poisoned, 128 tokens over a hidden layer of 256), and with
// late_loads its loads of z come inside the epilogue's arithmetic, not all
// before it (the BERT layer's kernel held 128 accumulators and 128 loaded
// values a thread at 256 rows: 0.265 ms on the H200 against 0.168 at 64).
func TestEpiLateLoadsEncoder(t *testing.T) {
	wl, ok := bench.Lookup("encoder_fwd_bwd")
	if !ok {
		t.Fatal("no encoder_fwd_bwd workload")
	}
	rng := rand.New(rand.NewPCG(23, 29))
	found := 0
	// late_loads, rows, ws: warp-specialised at 128 rows, late and not
	for _, cfg := range [][3]int{{0, 128, 0}, {0, 64, 0}, {2, 128, 0}, {2, 64, 0}, {0, 128, 1}, {2, 128, 1}} {
		late, bm, ws := cfg[0], cfg[1], cfg[2]
		s, err := wl.Build("small")
		if err != nil {
			t.Fatal(err)
		}
		target := graphpass.H200
		target.Tune = func(grp *graphpass.Group, m tile.Meta) {
			if grp.Kind == graphpass.MatMulGroup && grp.MatMul.Info.TransB && len(grp.MatMul.Info.Shape) == 2 {
				m["wgmma"], m["BLOCK_M"], m["BLOCK_N"], m["BLOCK_K"], m["num_warps"], m["num_stages"] = 2, bm, 128, 32, 8, 4
				if late > 0 {
					m["late_loads"] = late
				}
				if ws > 0 {
					m["ws"] = ws
				}
			}
		}
		c, err := fusion.Compile(s.Graph, fusion.WithTarget(target), fusion.WithMatMulFusion(true), fusion.WithPrecision(tile.PrecTF32))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Graph.AllNodes() {
			op, ok := n.Op().(*fusion.FusedOp)
			if !ok || op.Kernel().Meta["wgmma"] != 2 || op.Outputs() != 1 || op.Accumulates() {
				continue
			}
			out := n.Shape()
			var sizes []int
			reads := 0                                   // inputs of the output's shape
			for ch := c.Graph.From(n.ID()); ch.Next(); { // the children in order
				x := ch.Node().(*G.Node)
				sizes = append(sizes, x.Shape().TotalSize())
				if x.Shape().Eq(out) {
					reads++
				}
			}
			if reads == 0 || op.Kernel().Count(tile.OpTanh)+op.Kernel().Count(tile.OpExp2) == 0 {
				continue // not an epilogue reading a value of the output's shape through a GELU (its tanh, at TF32 by exp2: graphpass's tanhSums)
			}
			found++
			kern := op.Kernel()
			t.Run(fmt.Sprintf("%s %v %d rows late_loads %d ws %d", kern.Name, out, bm, late, ws), func(t *testing.T) {
				var args []any
				for _, size := range sizes {
					d := make([]float32, size)
					for i := range d {
						d[i] = float32(rng.Float64()*2 - 1)
					}
					args = append(args, d)
				}
				poisoned := func() []float32 {
					o := make([]float32, out.TotalSize())
					for i := range o {
						o[i] = float32(math.NaN())
					}
					return o
				}
				want, got := poisoned(), poisoned()
				if err := interp.Interpret(kern, op.Grid(), append(args, want)...); err != nil {
					t.Fatal(err)
				}
				sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: 8}
				if err := sim.Launch(kern, op.Grid(), append(args, got)...); err != nil {
					t.Fatal(err)
				}
				ptx := sim.Last.PTX
				if !strings.Contains(ptx, "wgmma.mma_async") {
					t.Fatalf("not the swapped form (%v)", kern.Meta)
				}
				if (sim.Last.ProducerWarps > 0) != (ws > 0) {
					t.Fatalf("ws %d: %d producer warps", ws, sim.Last.ProducerWarps)
				}
				if _, isLate := lateInEpilogue(ptx); isLate != (late > 0) {
					t.Fatalf("late_loads %d: the epilogue's loads late: %v", late, isLate)
				}
				for i := range want {
					g, w := float64(got[i]), float64(want[i])
					if !(math.Abs(g-w) <= 1e-5*max(1, math.Abs(w))) {
						t.Fatalf("[%d]: %v in the simulator, %v in the interpreter", i, g, w)
					}
				}
			})
		}
	}
	if found == 0 {
		t.Fatal("no product of the encoder reads a value of its output's shape through a GELU in its epilogue")
	}
}
