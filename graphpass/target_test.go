package graphpass_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestReductionsByTarget: the target decides whether a sum with few
// outputs is split over programs that add atomically. On a CPU target no
// kernel adds atomically, and the sums are bit-identical run after run; the
// H200 target splits where it always did. Both agree with float64 sums.
func TestReductionsByTarget(t *testing.T) {
	must := G.Must
	cases := []struct {
		name     string
		shape    []int
		build    func(x *G.Node) *G.Node
		gpuSplit bool // split on the H200
	}{
		{"full sum", []int{64, 512}, func(x *G.Node) *G.Node { return must(G.Sum(x)) }, true},
		{"full sum of squares with a tail", []int{301, 777}, func(x *G.Node) *G.Node { return must(G.Sum(must(G.Square(x)))) }, true},
		{"column sums", []int{9000, 3}, func(x *G.Node) *G.Node { return must(G.Sum(x, 0)) }, true},
		{"row sums of many short rows", []int{5000, 64}, func(x *G.Node) *G.Node { return must(G.Sum(x, 1)) }, false},
		{"maximum over all", []int{300, 777}, func(x *G.Node) *G.Node { return must(G.Max(x, 0, 1)) }, false},
	}
	targets := []struct {
		name string
		t    Target
	}{{"cpu, 2 cores", CPU(2)}, {"cpu, 64 cores", CPU(64)}, {"h200", H200}}
	for _, c := range cases {
		for _, tg := range targets {
			t.Run(c.name+"/"+tg.name, func(t *testing.T) {
				g := G.NewGraph()
				x := G.NewTensor(g, tensor.Float32, len(c.shape), G.WithShape(c.shape...), G.WithName("x"))
				c.build(x)
				k := emitOne(t, g, tg.t)
				atomics := 0
				k.Tile.Walk(func(v *tile.Value) {
					if v.Op == tile.OpAtomicAdd {
						atomics++
					}
				})
				split := tg.t.GPU() && c.gpuSplit
				if (atomics > 0) != split || k.Accumulates != split || (k.Grid[1] > 1) != split {
					t.Fatalf("%d atomic adds, accumulates %v, grid %v; want split %v:\n%s", atomics, k.Accumulates, k.Grid, split, k.Tile)
				}
				agrees(t, k, [][]int{c.shape}, func(xs []*G.Node) *G.Node { return c.build(xs[0]) })
				if split {
					return
				}
				// the same bits, run after run
				n := 1
				for _, d := range c.shape {
					n *= d
				}
				in := make([]float32, n)
				rng := rand.New(rand.NewPCG(9, uint64(n)))
				for i := range in {
					in[i] = float32(rng.Float64()*200 - 100)
				}
				var first []float32
				for run := range 4 {
					out := make([]float32, numel(k.Out))
					for i := range out {
						out[i] = float32(math.NaN())
					}
					if err := interp.Interpret(k.Tile, k.Grid, in, out); err != nil {
						t.Fatal(err)
					}
					if run == 0 {
						first = out
						continue
					}
					for i := range out {
						if math.Float32bits(out[i]) != math.Float32bits(first[i]) {
							t.Fatalf("run %d: [%d] = %v, run 0 gave %v", run, i, out[i], first[i])
						}
					}
				}
			})
		}
	}
}

func numel(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// TestMetaParameters: every kernel carries the meta-parameters its kind's
// heuristic chose for the target, in its dump; a GPU's kernels say their
// warps; a Target.Tune's choice is the kernel's; the heuristics follow the
// target's numbers.
func TestMetaParameters(t *testing.T) {
	must := G.Must
	type graph func(g *G.ExprGraph) *G.Node
	in := func(g *G.ExprGraph, name string, shape ...int) *G.Node {
		return G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name))
	}
	matmul := func(m, k, n int) graph {
		return func(g *G.ExprGraph) *G.Node {
			return must(G.Tanh(must(G.Mul(in(g, "a", m, k), in(g, "b", k, n)))))
		}
	}
	// attention is softmax(q·kᵀ)·v over b batches of sq queries and sk keys
	attention := func(b, sq, sk, dk, dv int) graph {
		return func(g *G.ExprGraph) *G.Node {
			q, k, v := in(g, "q", b, sq, dk), in(g, "k", b, sk, dk), in(g, "v", b, sk, dv)
			return must(G.BatchedMatMul(must(G.SoftMax(must(G.BatchedMatMul(q, k, false, true)))), v, false, false))
		}
	}
	gpu8 := GPU(8, 1024, 48<<10)
	gpu8.NumWarps = 8
	smallSmem := GPU(132, 1024, 40<<10)
	native := func(cores int) Target { t := CPU(cores); t.Native = true; return t }
	l2 := func(bytes int) Target { t := H200; t.L2 = bytes; return t }
	cases := []struct {
		name   string
		build  graph
		target Target
		want   tile.Meta
		prec   tile.Precision
	}{
		{"elementwise, cpu", func(g *G.ExprGraph) *G.Node { return must(G.Exp(in(g, "x", 3, 1000))) }, CPU(2),
			tile.Meta{"BLOCK": 1024}, 0},
		{"elementwise, small", func(g *G.ExprGraph) *G.Node { return must(G.Exp(in(g, "x", 3, 10))) }, H200,
			tile.Meta{"BLOCK": 32, "num_warps": 4}, 0},
		{"elementwise, 8 warps: 8 elements a thread", func(g *G.ExprGraph) *G.Node { return must(G.Exp(in(g, "x", 3, 1000))) }, gpu8,
			tile.Meta{"BLOCK": 2048, "num_warps": 8}, 0},
		{"reduction, cpu: the whole range", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 9000, 3), 0)) }, CPU(2),
			tile.Meta{"BLOCK_O": 4, "BLOCK_R": 1024, "CHUNK": 9000, "COLUMNS": 1}, 0},
		{"reduction, h200: split", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 9000, 3), 0)) }, H200,
			tile.Meta{"BLOCK_O": 4, "BLOCK_R": 1024, "CHUNK": 2048, "COLUMNS": 1, "num_warps": 4}, 0},
		{"reduction, h200: 147 parts", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 300000, 3), 0)) }, H200,
			tile.Meta{"BLOCK_O": 4, "BLOCK_R": 1024, "CHUNK": 2048, "COLUMNS": 1, "num_warps": 4}, 0},
		{"reduction, 8 SMs: 30 parts", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 300000, 3), 0)) }, GPU(8, 1024, 48<<10),
			tile.Meta{"BLOCK_O": 4, "BLOCK_R": 1024, "CHUNK": 10240, "COLUMNS": 1, "num_warps": 4}, 0},
		{"column sums 4096×3072 (a bias gradient), h200: 128 columns × 32 rows, 22 parts of 192 rows", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 4096, 3072), 0)) }, H200,
			tile.Meta{"BLOCK_O": 128, "BLOCK_R": 32, "CHUNK": 192, "COLUMNS": 1, "num_warps": 4}, 0},
		{"column sums 4096×768, h200: 64 parts of 64 rows", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 4096, 768), 0)) }, H200,
			tile.Meta{"BLOCK_O": 128, "BLOCK_R": 32, "CHUNK": 64, "COLUMNS": 1, "num_warps": 4}, 0},
		{"column maxima 4096×768, h200: the column form, not split", func(g *G.ExprGraph) *G.Node { return must(G.Max(in(g, "x", 4096, 768), 0)) }, H200,
			tile.Meta{"BLOCK_O": 128, "BLOCK_R": 32, "CHUNK": 4096, "COLUMNS": 1, "num_warps": 4}, 0},
		{"column sums 4096×768, cpu: whole columns, 6 programs for 2 cores", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 4096, 768), 0)) }, CPU(2),
			tile.Meta{"BLOCK_O": 128, "BLOCK_R": 32, "CHUNK": 4096, "COLUMNS": 1}, 0},
		{"column sums 4096×768, 64 cores: 32 columns (no fewer), 24 programs", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 4096, 768), 0)) }, CPU(64),
			tile.Meta{"BLOCK_O": 32, "BLOCK_R": 128, "CHUNK": 4096, "COLUMNS": 1}, 0},
		{"column sums 1000×777 (colsum small), 16 cores: 32 columns, 25 programs", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 1000, 777), 0)) }, CPU(16),
			tile.Meta{"BLOCK_O": 32, "BLOCK_R": 128, "CHUNK": 1000, "COLUMNS": 1}, 0},
		{"a sum over the middle axis of 30×40×50: the reduced axis last, not the column form", func(g *G.ExprGraph) *G.Node { return must(G.Sum(in(g, "x", 30, 40, 50), 1)) }, H200,
			tile.Meta{"BLOCK_O": 64, "BLOCK_R": 64, "CHUNK": 40, "num_warps": 4}, 0},
		{"row", func(g *G.ExprGraph) *G.Node { return must(G.SoftMax(in(g, "x", 4, 1000))) }, H200,
			tile.Meta{"BLOCK": 1024, "num_warps": 4}, 0},
		{"row, looped", func(g *G.ExprGraph) *G.Node { return must(G.SoftMax(in(g, "x", 4, 10000))) }, CPU(2),
			tile.Meta{"CHUNK": 2048}, 0},
		{"row of 10000 held in one block at 16 warps", func(g *G.ExprGraph) *G.Node { return must(G.SoftMax(in(g, "x", 4, 10000))) }, gpu8,
			tile.Meta{"BLOCK": 16384, "num_warps": 16}, 0},
		{"a softmax's row of 4096: 16 warps, 8 elements a thread (rowWarps8)", func(g *G.ExprGraph) *G.Node { return must(G.SoftMax(in(g, "x", 8192, 4096))) }, H200,
			tile.Meta{"BLOCK": 4096, "num_warps": 16}, 0},
		{"row of 8192: 8 warps", func(g *G.ExprGraph) *G.Node { return must(G.SoftMax(in(g, "x", 1151, 8192))) }, H200,
			tile.Meta{"BLOCK": 8192, "num_warps": 8}, 0},
		{"a LayerNorm-like row of 8192 held at 8 warps, its gain loaded late and kept in the caches (walked at 4 warps: slower)", func(g *G.ExprGraph) *G.Node {
			x, w := in(g, "x", 1151, 8192), in(g, "w", 8192)
			return must(G.BroadcastHadamardProd(must(G.SoftMax(x)), w, nil, []byte{0}))
		}, H200, tile.Meta{"BLOCK": 8192, "KEEP": 1, "late_loads": 2, "num_warps": 8}, 0},
		{"a LayerNorm-like row of 32768 in one block at 16 warps, its gain a group ahead, streamed (its input is larger than the L2)", func(g *G.ExprGraph) *G.Node {
			x, w := in(g, "x", 4096, 32768), in(g, "w", 32768)
			return must(G.BroadcastHadamardProd(must(G.SoftMax(x)), w, nil, []byte{0}))
		}, H200, tile.Meta{"BLOCK": 32768, "STREAM": 1, "late_loads": 1, "num_warps": 16}, 0},
		{"a LayerNorm-like row of 4096 in one block at 8 warps, its gain loaded late and kept in the caches", func(g *G.ExprGraph) *G.Node {
			x, w := in(g, "x", 64, 4000), in(g, "w", 4000)
			return must(G.BroadcastHadamardProd(must(G.SoftMax(x)), w, nil, []byte{0}))
		}, H200, tile.Meta{"BLOCK": 4096, "KEEP": 1, "late_loads": 2, "num_warps": 8}, 0},
		{"a LayerNorm-like row of 781 (not 16-byte aligned) at 4 warps, its gain loaded whole and kept (the H200, r29c: 0.0068 ms against 0.0086 late)", func(g *G.ExprGraph) *G.Node {
			x, w := in(g, "x", 1823, 781), in(g, "w", 781)
			return must(G.BroadcastHadamardProd(must(G.SoftMax(x)), w, nil, []byte{0}))
		}, H200, tile.Meta{"BLOCK": 1024, "KEEP": 1, "num_warps": 4}, 0},
		{"rows of 100: 8 a program", func(g *G.ExprGraph) *G.Node { return must(G.SoftMax(in(g, "x", 8192, 100))) }, H200,
			tile.Meta{"BLOCK": 128, "BLOCK_M": 8, "num_warps": 4}, 0},
		{"rows of 100, 600 of them: 4 a program (150 programs for 132 SMs)", func(g *G.ExprGraph) *G.Node { return must(G.SoftMax(in(g, "x", 600, 100))) }, H200,
			tile.Meta{"BLOCK": 128, "BLOCK_M": 4, "num_warps": 4}, 0},
		{"a softmax row of 32768 in one block at 16 warps", func(g *G.ExprGraph) *G.Node { return must(G.SoftMax(in(g, "x", 4096, 32768))) }, H200,
			tile.Meta{"BLOCK": 32768, "num_warps": 16}, 0},
		{"a LayerNorm-like row of 32768 in one block at 16 warps, its gain loaded late one group ahead", func(g *G.ExprGraph) *G.Node {
			x, w := in(g, "x", 64, 32768), in(g, "w", 32768)
			return must(G.BroadcastHadamardProd(must(G.SoftMax(x)), w, nil, []byte{0}))
		}, H200, tile.Meta{"BLOCK": 32768, "late_loads": 1, "num_warps": 16}, 0},
		{"a float64 LayerNorm-like row of 32768 looped at 16 warps (64 a thread would take 128 registers for the row)", func(g *G.ExprGraph) *G.Node {
			x := G.NewTensor(g, tensor.Float64, 2, G.WithShape(64, 32768), G.WithName("x"))
			w := G.NewTensor(g, tensor.Float64, 1, G.WithShape(32768), G.WithName("w"))
			return must(G.BroadcastHadamardProd(must(G.SoftMax(x)), w, nil, []byte{0}))
		}, H200, tile.Meta{"CHUNK": 8192, "num_warps": 16}, 0},
		{"a LayerNorm-like row of 40000 looped at 16 warps", func(g *G.ExprGraph) *G.Node {
			x, w := in(g, "x", 64, 40000), in(g, "w", 40000)
			return must(G.BroadcastHadamardProd(must(G.SoftMax(x)), w, nil, []byte{0}))
		}, H200, tile.Meta{"CHUNK": 8192, "num_warps": 16}, 0},
		{"matmul, few tiles", matmul(256, 64, 256), H200,
			tile.Meta{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4}, 0},
		{"matmul, enough 64×64 tiles for 8 SMs", matmul(256, 64, 256), GPU(8, 1024, 48<<10),
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4}, 0},
		{"matmul on 2 cores: 64×64 tiles (four of 128×128, fewer than four a core), K in steps of 64", matmul(256, 64, 256), native(2),
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, 0},
		{"matmul 1024³ on 16 cores: 128×128 tiles, four a core", matmul(1024, 1024, 1024), native(16),
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, 0},
		{"matmul 1024³ on 64 cores: 64×64 tiles", matmul(1024, 1024, 1024), native(64),
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, 0},
		{"matmul 1024×32 on 2 cores: 128×32 tiles, no wider than the product", matmul(1024, 256, 32), native(2),
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 64}, 0},
		{"matmul 512×16 over K 1024 on 2 cores: 64×16 tiles, no wider than the product (32 would compute twice its columns)", matmul(512, 1024, 16), native(2),
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 16, "BLOCK_K": 64}, 0},
		{"matmul 100×70 on 2 cores: 32×32 tiles, the smallest; K 50 in steps of 32 (then one of 32, masked)", matmul(100, 50, 70), native(2),
			tile.Meta{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, 0},
		{"matmul over K 16 on 2 cores: one step of 16", matmul(512, 16, 1024), native(2),
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16}, 0},
		{"matmul 784×1024 on 2 cores: 64-row tiles (128 would pad 784 rows to 896)", matmul(784, 512, 1024), native(2),
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}, 0},
		{"matmul 1000×1000 on 2 cores: 128×128 (1024, under an eighth more)", matmul(1000, 100, 1000), native(2),
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, 0},
		{"matmul tf32, 4096³: 256×128 tiles on swapped wgmma, 4 stages, 8 warps, in groups of 8 rows of tiles (a wave's panels 86 MB)", matmul(4096, 4096, 4096), H200,
			tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2, "GROUP_M": 8}, tile.PrecTF32},
		{"matmul tf32, 4096³ on a GPU whose L2 is not known: the default tile order", matmul(4096, 4096, 4096), GPU(132, 1024, 227<<10),
			tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}, tile.PrecTF32},
		{"matmul tf32, 4096³ on a GPU with a 128 MiB L2: a wave's panels fit, the default order", matmul(4096, 4096, 4096), l2(128 << 20),
			tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}, tile.PrecTF32},
		// (the transposing wgmma's 128×256 before 2026-12-03's refit: at
		// 4096³ the swapped form's 128×128 ran 238 TFLOP/s against its 226)
		{"matmul tf32, 128×4096×65536: no 256-row tiles, 128×128 on the swapped wgmma", matmul(128, 4096, 16384*4), H200,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}, tile.PrecTF32},
		{"matmul tf32x3, 4096³: 128×128 tiles on swapped wgmma, 4 stages, in groups of 8 rows", matmul(4096, 4096, 4096), H200,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2, "GROUP_M": 8}, tile.PrecTF32x3},
		{"matmul tf32x3, 4096×3072×768: 5.8 waves of 128×128 tiles, 128×128", matmul(4096, 768, 3072), H200,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}, tile.PrecTF32x3},
		{"matmul tf32x3, 4096×768×3072: 1.45 waves of 128×128 tiles, 64×128 (2.9 waves), 6 stages; a wave's panels (all of A and 3 of B's, 52.5 MiB) fit the H200's 60 MiB L2: the default order", matmul(4096, 3072, 768), H200,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 6, "num_warps": 8, "wgmma": 2}, tile.PrecTF32x3},
		{"matmul tf32x3, 4096×768×3072 with a 50 MiB L2: in groups of 8 rows", matmul(4096, 3072, 768), l2(50 << 20),
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 6, "num_warps": 8, "wgmma": 2, "GROUP_M": 8}, tile.PrecTF32x3},
		{"matmul tf32x3, 1024³: no wave of 128×128 tiles, 64×128, 6 stages", matmul(1024, 1024, 1024), H200,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 6, "num_warps": 8, "wgmma": 2}, tile.PrecTF32x3},
		{"matmul tf32x3, 100 columns: 64×64 tiles, 4 warps", matmul(1000, 512, 100), H200,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 6, "num_warps": 4, "wgmma": 2}, tile.PrecTF32x3},
		{"matmul bf16, 4096³: 256×128 tiles on swapped wgmma, 3 stages (each with its bf16 tile), 8 warps, in groups of 8 rows", matmul(4096, 4096, 4096), H200,
			tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3, "num_warps": 8, "wgmma": 2, "GROUP_M": 8}, tile.PrecBF16},
		{"matmul bf16, 4096³, 200 KiB of shared memory: no room for the bf16 tile, 128×128 on mma.sync", matmul(4096, 4096, 4096), GPU(132, 1024, 200<<10),
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3, "num_warps": 8}, tile.PrecBF16},
		{"matmul bf16, 1024³: fewer 128×128 tiles than SMs, the wave model's 64×128 on swapped wgmma (fewTiles)", matmul(1024, 1024, 1024), H200,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}, tile.PrecBF16},
		{"matmul bf16, 512³: 16 tiles of 128×128, mma.sync", matmul(512, 512, 512), H200,
			tile.Meta{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4}, tile.PrecBF16},
		{"matmul tf32, 768×3072 over K 4096: the wave model's 96 tiles of 192×128 on swapped wgmma", matmul(768, 4096, 3072), H200,
			tile.Meta{"BLOCK_M": 192, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}, tile.PrecTF32},
		{"matmul tf32, 4096×768 over K 3072: the wave model's 132 tiles of 192×128, not 192 of 128×128 on mma.sync", matmul(4096, 3072, 768), H200,
			tile.Meta{"BLOCK_M": 192, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}, tile.PrecTF32},
		{"matmul tf32, 1024³: the wave model's 128×64 on swapped wgmma at 4 warps (fewTiles)", matmul(1024, 1024, 1024), H200,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4, "wgmma": 2}, tile.PrecTF32},
		{"matmul tf32, 768×1024 over K 1024: 48 tiles of 128×128, at least a quarter wave: the wave model", matmul(768, 1024, 1024), H200,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4, "wgmma": 2}, tile.PrecTF32},
		{"matmul tf32, 512×1024 over K 1024: 32 tiles of 128×128, under a quarter wave (an eighth at TF32): the wave model's 64×64 at 4 warps", matmul(512, 1024, 1024), H200,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "wgmma": 2, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4}, tile.PrecTF32},
		{"matmul tf32, 4096×4096×32: tiles no wider than the product", matmul(65536, 4096, 32), H200,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4}, tile.PrecTF32},
		{"matmul tf32, 40 KiB of shared memory: 2 stages", matmul(4096, 4096, 4096), smallSmem,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 2, "num_warps": 8}, tile.PrecTF32},
		{"matmul 1024³ on the executor, 16 cores: the h200's rule, 64×64", matmul(1024, 1024, 1024), CPU(16),
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, 0},
		{"matmul 256×256 on the executor, 2 cores: the h200's rule, 32×32", matmul(256, 64, 256), CPU(2),
			tile.Meta{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, 0},
		{"matmul tf32, native cpu (the executor's product): the h200's ieee rule", matmul(256, 64, 256), native(2),
			tile.Meta{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, tile.PrecTF32},
		{"matmul, tuned", matmul(70, 33, 90), Target{Cores: 2, Tune: func(grp *Group, m tile.Meta) {
			if grp.Kind == MatMulGroup {
				m["BLOCK_M"], m["BLOCK_N"] = 64, 16
			}
		}}, tile.Meta{"BLOCK_M": 64, "BLOCK_N": 16, "BLOCK_K": 32}, 0},
		{"attention", attention(2, 40, 50, 16, 8), H200, tile.Meta{"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4}, 0},
		{"attention on 2 cores as machine code, B·H 32 S 512 D64: 128×128", attention(32, 512, 512, 64, 64), native(2), tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128}, 0},
		{"attention on 64 cores as machine code, B·H 32 S 512: 64×64 (four programs a core)", attention(32, 512, 512, 64, 64), native(64), tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64}, 0},
		{"attention on 2 cores as machine code, 40 queries, 50 keys: 64×64, no larger than the sequences", attention(8, 40, 50, 16, 8), native(2), tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64}, 0},
		{"attention on 2 cores as machine code, B·H 2, 40 queries: too few programs for more than 32×32", attention(2, 40, 50, 16, 8), native(2), tile.Meta{"BLOCK_M": 32, "BLOCK_N": 32}, 0},
		{"attention on 2 cores as machine code, head dim 256: 64×64", attention(8, 512, 512, 256, 256), native(2), tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64}, 0},
		{"attention on the executor, 2 cores: 32×32", attention(32, 512, 512, 64, 64), CPU(2), tile.Meta{"BLOCK_M": 32, "BLOCK_N": 32}, 0},
		{"attention tf32, B4 H16 S2048 D64: 128×32 at 8 warps on wgmma, 3 stages", attention(64, 2048, 2048, 64, 64), H200, tile.Meta{"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 3, "num_warps": 8, "wgmma": 1}, tile.PrecTF32},
		{"attention tf32, B4 H16 S2048 D64, 160 KiB of shared memory: 128×32 at 4 warps, 3 stages", attention(64, 2048, 2048, 64, 64), GPU(132, 1024, 160<<10), tile.Meta{"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 3, "num_warps": 4}, tile.PrecTF32},
		{"attention tf32, B2 H16 S4096 D128: 128×64 at 8 warps on wgmma", attention(32, 4096, 4096, 128, 128), H200, tile.Meta{"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "wgmma": 1}, tile.PrecTF32},
		{"attention 3xTF32, B2 H16 S4096 D128: 128×32 at 8 warps on wgmma", attention(32, 4096, 4096, 128, 128), H200, tile.Meta{"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 8, "wgmma": 1}, tile.PrecTF32x3},
		{"attention 3xTF32, B2 H16 S4096 D128, 160 KiB of shared memory: not on wgmma", attention(32, 4096, 4096, 128, 128), GPU(132, 1024, 160<<10), tile.Meta{"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4}, tile.PrecTF32x3},
		{"attention tf32, B2 H16 S4096 D128, 160 KiB of shared memory: 128×32 at 8 warps, 3 stages", attention(32, 4096, 4096, 128, 128), GPU(132, 1024, 160<<10), tile.Meta{"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 3, "num_warps": 8}, tile.PrecTF32},
		{"attention tf32, 40 blocks of 128 queries for 132 SMs: the smaller blocks", attention(10, 512, 512, 64, 64), H200, tile.Meta{"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 2}, tile.PrecTF32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			grp := onlyGroup(t, func(g *G.ExprGraph) { c.build(g) }, c.target)
			k, err := Emit(grp, c.target, c.prec)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.Tile.Meta.String(); got != c.want.String() {
				t.Fatalf("meta %s, want %s", got, c.want)
			}
			header, _, _ := strings.Cut(k.Tile.String(), "\n")
			if !strings.Contains(header, "meta "+c.want.String()) {
				t.Fatalf("the dump does not show the meta-parameters: %s", header)
			}
			if bm := c.want["BLOCK_M"]; bm > 0 && grp.Kind == MatMulGroup {
				m, n := grp.MatMul.Info.Shape[0], grp.MatMul.Info.Shape[1]
				want := tile.Grid{tile.CDiv(m, bm), tile.CDiv(n, c.want["BLOCK_N"])}
				if c.want["GROUP_M"] > 1 { // one axis in groups of rows of tiles
					want = tile.Grid{want[0] * want[1], 1}
				}
				if k.Grid != want {
					t.Fatalf("grid %v for %d×%d tiles of %d×%d, want %v", k.Grid, m, n, bm, c.want["BLOCK_N"], want)
				}
			}
		})
	}
}

// TestTargetErrors: a target or a tuned choice no kernel can be written
// for is an error of Emit, with the group in it, not a panic or a wrong
// kernel.
func TestTargetErrors(t *testing.T) {
	must := G.Must
	cases := []struct {
		name   string
		shape  []int
		build  func(x *G.Node) *G.Node
		target Target
		want   string
	}{
		{"warps not a power of two", []int{4, 100}, func(x *G.Node) *G.Node { return must(G.Exp(x)) },
			Target{SMs: 1, MaxThreads: 1024, NumWarps: 3}, "power of two"},
		{"more warps than threads", []int{4, 100}, func(x *G.Node) *G.Node { return must(G.Exp(x)) },
			Target{SMs: 1, MaxThreads: 64, NumWarps: 4}, "exceed"},
		{"a block that is not a power of two", []int{4, 100}, func(x *G.Node) *G.Node { return must(G.Exp(x)) },
			Target{Tune: func(_ *Group, m tile.Meta) { m["BLOCK"] = 100 }}, "not a power of two"},
		{"a meta-parameter taken away", []int{4, 100}, func(x *G.Node) *G.Node { return must(G.Exp(x)) },
			Target{Tune: func(_ *Group, m tile.Meta) { delete(m, "BLOCK") }}, "BLOCK is not set"},
		{"a row block shorter than the row", []int{4, 100}, func(x *G.Node) *G.Node { return must(G.SoftMax(x)) },
			Target{Tune: func(_ *Group, m tile.Meta) { m["BLOCK"] = 64 }}, "holds no row"},
		{"a split maximum", []int{300, 777}, func(x *G.Node) *G.Node { return must(G.Max(x, 0, 1)) },
			Target{Tune: func(_ *Group, m tile.Meta) { m["CHUNK"] = 1024 }}, "splits a"},
		{"a split off the reduction's blocks", []int{300, 777}, func(x *G.Node) *G.Node { return must(G.Sum(x)) },
			Target{Tune: func(_ *Group, m tile.Meta) { m["CHUNK"] = 1000 }}, "not a multiple"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewTensor(g, tensor.Float32, len(c.shape), G.WithShape(c.shape...), G.WithName("x"))
			c.build(x)
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: c.target})
			k, err := Emit(groups[0], c.target, tile.PrecIEEE)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("kernel %v, error %v; want an error saying %q", k != nil, err, c.want)
			}
		})
	}
}
