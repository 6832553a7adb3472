package ptxsim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestEpiSmemTrainingKernels: every product kernel of a training step of
// gelu(x·W1 + b1)·W2 (the forward's gelu(x·W+b) with its kept
// intermediates, dH = dO·W2ᵀ with the GELU's backward in its epilogue
// reading the pre-activation, the weight gradients Aᵀ·B), as graphpass
// emits it at TF32 for the H200 forced onto the swapped form with the
// epilogue through shared memory (BLOCK_M 256 or 192, 128 columns, 8
// warps, epi_smem = 1), agrees in the simulator (racecheck, initcheck, the
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
		for _, bm := range []int{256, 192} {
			meta := tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": bm, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 4}
			t.Run(fmt.Sprintf("group %d %v %d rows", grp.ID, grp.Root.Info.Shape, bm), func(t *testing.T) {
				kern, err := graphpass.Emit(grp, graphpass.TuneTo(t0, meta), tile.PrecTF32)
				if err != nil {
					t.Fatal(err)
				}
				var args []any
				for _, x := range grp.Inputs {
					size := 1
					for _, d := range x.Info.Shape {
						size *= d
					}
					if x.G != nil && x.G.Name() == "u" {
						epilogueInputs = true
					}
					d := make([]float32, size)
					for i := range d {
						d[i] = float32(rng.Float64()*2 - 1)
					}
					args = append(args, d)
				}
				size := 1
				for _, d := range kern.Out {
					size *= d
				}
				outs := func() ([]any, [][]float32) {
					var as []any
					var fs [][]float32
					for range kern.Outs {
						o := make([]float32, size)
						for i := range o {
							o[i] = float32(math.NaN())
							if kern.Accumulates {
								o[i] = 0
							}
						}
						as, fs = append(as, o), append(fs, o)
					}
					return as, fs
				}
				wantArgs, want := outs()
				if err := interp.Interpret(kern.Tile, kern.Grid, append(args, wantArgs...)...); err != nil {
					t.Fatal(err)
				}
				gotArgs, got := outs()
				sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: 8}
				if err := sim.Launch(kern.Tile, kern.Grid, append(args, gotArgs...)...); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d inputs, %d outputs, %d members", len(grp.Inputs), kern.Outs, len(grp.Members))
				if !strings.Contains(sim.Last.PTX, "wgmma.mma_async") || !strings.Contains(sim.Last.PTX, "ld.shared.v4.f32") {
					t.Fatalf("not the swapped form with the epilogue through shared memory (%v)", kern.Tile.Meta)
				}
				for o := range want {
					for i := range want[o] {
						g, w := float64(got[o][i]), float64(want[o][i])
						if !(math.Abs(g-w) <= 1e-5*max(1, math.Abs(w))) {
							t.Fatalf("output %d [%d]: %v in the simulator, %v in the interpreter", o, i, g, w)
						}
					}
				}
			})
		}
	}
	if products < 4 || !epilogueInputs {
		t.Errorf("%d product kernels; one reads u: %v", products, epilogueInputs)
	}
}
