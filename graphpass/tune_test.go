package graphpass_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestCandidates: every candidate a kind offers an autotuner writes a
// kernel (Emit with TuneTo) that computes what the heuristic's kernel
// computes (the reference interpreter, seeded inputs, outputs poisoned);
// the first candidate is the heuristic's own, and the others differ from
// it and from each other. Row, reduction, elementwise and attention groups
// (a causal mask: key blocks skipped at every tile shape) on the H200's
// target and the CPU's, at shapes that take each form.
func TestCandidates(t *testing.T) {
	must := G.Must
	in := func(g *G.ExprGraph, name string, shape ...int) *G.Node {
		return G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name))
	}
	cases := []struct {
		name   string
		build  func(g *G.ExprGraph)
		target Target
		min    int      // candidates at least (with the default)
		want   []string // candidates there must be, if any
		prec   tile.Precision
	}{
		{"elementwise", func(g *G.ExprGraph) { must(G.Tanh(in(g, "x", 3, 1000))) }, H200, 3, nil, tile.PrecIEEE},
		{"elementwise, cpu", func(g *G.ExprGraph) { must(G.Tanh(in(g, "x", 9, 1000))) }, CPU(2), 3, nil, tile.PrecIEEE},
		{"column sums, split", func(g *G.ExprGraph) { must(G.Sum(in(g, "x", 9000, 3), 0)) }, H200, 3, nil, tile.PrecIEEE},
		{name: "column sums 1000×777: the split's CHUNK halved and doubled, 256 columns, warps", build: func(g *G.ExprGraph) { must(G.Sum(in(g, "x", 1000, 777), 0)) }, target: H200, min: 6,
			want: []string{"{BLOCK_O = 128, BLOCK_R = 32, CHUNK = 32, COLUMNS = 1, num_warps = 4}", "{BLOCK_O = 128, BLOCK_R = 32, CHUNK = 128, COLUMNS = 1, num_warps = 4}", "{BLOCK_O = 256, BLOCK_R = 16, CHUNK = 64, COLUMNS = 1, num_warps = 4}"}},
		{"column sums 1000×777, cpu", func(g *G.ExprGraph) { must(G.Sum(in(g, "x", 1000, 777), 0)) }, CPU(2), 3, nil, tile.PrecIEEE},
		{name: "column sums 1000×777, cpu as machine code: block and tail (the default), its chunks halved and doubled, and the blocks without a tail", build: func(g *G.ExprGraph) { must(G.Sum(in(g, "x", 1000, 777), 0)) }, target: Target{Cores: 2, Native: true}, min: 4,
			want: []string{"{BLOCK_O = 768, BLOCK_R = 2, CHUNK = 42, COLUMNS = 1, TAIL = 16}", "{BLOCK_O = 768, BLOCK_R = 2, CHUNK = 168, COLUMNS = 1, TAIL = 16}", "{BLOCK_O = 512, BLOCK_R = 4, CHUNK = 84, COLUMNS = 1}"}},
		{"row sums", func(g *G.ExprGraph) { must(G.Sum(in(g, "x", 300, 777), 1)) }, CPU(2), 2, nil, tile.PrecIEEE},
		{name: "sums over N, H and W as machine code: the last axis whole (INNER), BLOCK_O halved (all 20 channels in the default's 32)", build: func(g *G.ExprGraph) { must(G.Sum(in(g, "x", 6, 20, 7, 9), 0, 2, 3)) }, target: Target{Cores: 2, Native: true}, min: 2,
			want: []string{"{BLOCK_O = 32, BLOCK_R = 64, CHUNK = 378, INNER = 64}", "{BLOCK_O = 16, BLOCK_R = 64, CHUNK = 378, INNER = 64}"}},
		{name: "sums over N, H and W of 64 channels of 28×28: INNER 1024, BLOCK_O 4 halved and doubled", build: func(g *G.ExprGraph) { must(G.Sum(in(g, "x", 2, 64, 28, 28), 0, 2, 3)) }, target: Target{Cores: 2, Native: true}, min: 3,
			want: []string{"{BLOCK_O = 4, BLOCK_R = 1024, CHUNK = 1568, INNER = 1024}", "{BLOCK_O = 2, BLOCK_R = 1024, CHUNK = 1568, INNER = 1024}", "{BLOCK_O = 8, BLOCK_R = 1024, CHUNK = 1568, INNER = 1024}"}},
		{"softmax of short rows", func(g *G.ExprGraph) { opSoftmax(in(g, "x", 2048, 100)) }, H200, 4, nil, tile.PrecIEEE},
		{"softmax rows of 1000", func(g *G.ExprGraph) { must(G.SoftMax(in(g, "x", 37, 1000))) }, H200, 3, nil, tile.PrecIEEE},
		{"softmax rows of 20000", func(g *G.ExprGraph) { opSoftmax(in(g, "x", 3, 20000)) }, H200, 2, nil, tile.PrecIEEE},
		{"layernorm rows of 20000, in one block", func(g *G.ExprGraph) { opLayerNorm(in(g, "x", 3, 20000)) }, H200, 7, nil, tile.PrecIEEE},
		{"layernorm rows of 40000, walked", func(g *G.ExprGraph) { opLayerNorm(in(g, "x", 3, 40000)) }, H200, 5, nil, tile.PrecIEEE},
		{name: "layernorm rows of 8192: held at 8 warps with γ 2 groups ahead and kept (the default), at 4, 16 and 32, γ whole or 1 or 4 ahead, not kept, kept with the row streamed, walked at 4 and 8 warps", build: func(g *G.ExprGraph) { opLayerNorm(in(g, "x", 3, 8192)) }, target: H200, min: 10,
			want: []string{"{CHUNK = 2048, num_warps = 4}", "{CHUNK = 4096, num_warps = 8}", "{BLOCK = 8192, KEEP = 1, num_warps = 8}",
				"{BLOCK = 8192, KEEP = 1, late_loads = 1, num_warps = 8}", "{BLOCK = 8192, KEEP = 1, late_loads = 4, num_warps = 8}", "{BLOCK = 8192, KEEP = 1, late_loads = 2, num_warps = 16}", "{BLOCK = 8192, KEEP = 1, late_loads = 2, num_warps = 32}", "{BLOCK = 8192, KEEP = 1, late_loads = 2, num_warps = 4}",
				"{BLOCK = 8192, late_loads = 2, num_warps = 8}", "{BLOCK = 8192, KEEP = 1, STREAM = 2, late_loads = 2, num_warps = 8}"}},
		{name: "layernorm rows of 4096: the former default (4 warps, γ whole) and late loads at 4, 8 and 16 warps, γ not kept", build: func(g *G.ExprGraph) { opLayerNorm(in(g, "x", 300, 4096)) }, target: H200, min: 7,
			want: []string{"{BLOCK = 4096, KEEP = 1, num_warps = 4}", "{BLOCK = 4096, KEEP = 1, late_loads = 2, num_warps = 4}", "{BLOCK = 4096, KEEP = 1, late_loads = 2, num_warps = 16}", "{BLOCK = 4096, KEEP = 1, late_loads = 1, num_warps = 8}", "{BLOCK = 4096, KEEP = 1, late_loads = 4, num_warps = 8}", "{BLOCK = 4096, late_loads = 2, num_warps = 8}"}},
		{name: "softmax rows of 4096: 16 warps (the default, 8 elements a thread), 8, and 4 (32 a thread)", build: func(g *G.ExprGraph) { opSoftmax(in(g, "x", 300, 4096)) }, target: H200, min: 4,
			want: []string{"{BLOCK = 4096, num_warps = 16}", "{BLOCK = 4096, num_warps = 8}", "{BLOCK = 4096, num_warps = 4}"}},
		{name: "softmax rows of 2048: 4 warps (the default), 2, and 8 (8 elements a thread)", build: func(g *G.ExprGraph) { opSoftmax(in(g, "x", 300, 2048)) }, target: H200, min: 4,
			want: []string{"{BLOCK = 2048, num_warps = 2}", "{BLOCK = 2048, num_warps = 8}"}},
		{name: "softmax rows of 32768: 32 warps, walked at 4, 8, 16 and 32", build: func(g *G.ExprGraph) { opSoftmax(in(g, "x", 2, 32768)) }, target: H200, min: 6,
			want: []string{"{BLOCK = 32768, num_warps = 32}", "{CHUNK = 2048, num_warps = 4}", "{CHUNK = 4096, num_warps = 8}", "{CHUNK = 8192, num_warps = 16}", "{CHUNK = 16384, num_warps = 32}"}},
		{name: "layernorm rows of 32768: walked at 8 and 16 warps, one block at 16 and 32, γ whole or late", build: func(g *G.ExprGraph) { opLayerNorm(in(g, "x", 2, 32768)) }, target: H200, min: 8,
			want: []string{"{CHUNK = 4096, num_warps = 8}", "{CHUNK = 8192, num_warps = 16}", "{BLOCK = 32768, num_warps = 16}", "{BLOCK = 32768, late_loads = 2, num_warps = 16}", "{BLOCK = 32768, late_loads = 1, num_warps = 32}"}},
		{"softmax of short rows, cpu", func(g *G.ExprGraph) { opSoftmax(in(g, "x", 64, 100)) }, CPU(2), 3, nil, tile.PrecIEEE},
		{"softmax rows of 10000, cpu", func(g *G.ExprGraph) { must(G.SoftMax(in(g, "x", 3, 10000))) }, CPU(2), 3, nil, tile.PrecIEEE},
		{name: "product, cpu as machine code: tiles of 64–256, K steps of 32–128", build: func(g *G.ExprGraph) { must(G.Tanh(must(G.Mul(in(g, "x", 300, 200), in(g, "w", 200, 150))))) }, target: Target{Cores: 2, Native: true}, min: 10,
			want: []string{"{BLOCK_K = 64, BLOCK_M = 64, BLOCK_N = 64}", "{BLOCK_K = 128, BLOCK_M = 256, BLOCK_N = 256}", "{BLOCK_K = 32, BLOCK_M = 256, BLOCK_N = 128}"}},
		{name: "a transpose, cpu as machine code: 16 rows of 32 lanes (the default), 8 and 32 rows", build: func(g *G.ExprGraph) { must(G.Rectify(must(G.Transpose(in(g, "x", 2, 9, 28, 32), 0, 3, 1, 2)))) }, target: Target{Cores: 2, Native: true}, min: 3,
			want: []string{"{BLOCK_L = 32, BLOCK_R = 8}", "{BLOCK_L = 32, BLOCK_R = 32}"}},
		{name: "a max pool, cpu as machine code: its block of 8 rows (every row) halved", build: func(g *G.ExprGraph) {
			must(G.MaxPool2D(in(g, "x", 2, 3, 12, 10), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		}, target: Target{Cores: 2, Native: true}, min: 2, want: []string{"{BLOCK_L = 8, BLOCK_R = 4}"}},
		{name: "a max pool of ReLU(NHWC → NCHW), cpu as machine code: lanes along the 24 channels (32), rows along the 5 columns (8), halved", build: func(g *G.ExprGraph) {
			must(G.MaxPool2D(must(G.Rectify(must(G.Transpose(in(g, "x", 2, 12, 10, 24), 0, 3, 1, 2)))), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		}, target: Target{Cores: 2, Native: true}, min: 2, want: []string{"{BLOCK_L = 32, BLOCK_R = 8}", "{BLOCK_L = 32, BLOCK_R = 4}"}},
		{"product, cpu on the executor", func(g *G.ExprGraph) { must(G.Mul(in(g, "x", 300, 200), in(g, "w", 200, 150))) }, CPU(2), 1, nil, tile.PrecIEEE},
		{"product of few tiles, long K", func(g *G.ExprGraph) { must(G.Mul(in(g, "x", 70, 600), in(g, "w", 600, 50))) }, H200, 3, nil, tile.PrecIEEE},
		// the wave model's tilings (waves.go): 192 rows, split K, tails
		{name: "bare product, K 2048, tf32: the wave model's", build: func(g *G.ExprGraph) { must(G.Mul(in(g, "x", 200, 2048), in(g, "w", 2048, 136))) }, target: H200, min: 8, prec: tile.PrecTF32,
			want: []string{"{BLOCK_K = 32, BLOCK_M = 192, BLOCK_N = 128, num_stages = 4, num_warps = 8, wgmma = 2}",
				"{BLOCK_K = 32, BLOCK_M = 64, BLOCK_N = 128, SPLIT_K = 4, num_stages = 4, num_warps = 8, wgmma = 2}"}},
		{"causal attention", func(g *G.ExprGraph) { opCausalAttention(g, in) }, H200, 5, nil, tile.PrecIEEE},
		{"causal attention, cpu", func(g *G.ExprGraph) { opCausalAttention(g, in) }, CPU(2), 4, nil, tile.PrecIEEE},
		// the tensor cores' tiles: 64 or 128 rows at 16 or 32 a warp, 32 or
		// 64 keys, 3 stages, the 168-register cap; at 16 rows a warp also
		// on wgmma (codegen's MMA loops with wgmma = 1)
		{name: "causal attention, tf32", build: func(g *G.ExprGraph) { opCausalAttention(g, in) }, target: H200, min: 20, prec: tile.PrecTF32,
			want: []string{"{BLOCK_M = 128, BLOCK_N = 32, num_warps = 4}", "{BLOCK_M = 128, BLOCK_N = 64, num_stages = 3, num_warps = 8}", "{BLOCK_M = 64, BLOCK_N = 64, max_registers = 168, num_warps = 4}",
				"{BLOCK_M = 64, BLOCK_N = 32, num_warps = 4, wgmma = 1}", "{BLOCK_M = 128, BLOCK_N = 64, num_stages = 3, num_warps = 8, wgmma = 1}"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			grp := onlyGroup(t, c.build, c.target)
			if want := strings.HasPrefix(c.name, "causal attention"); want != (grp.Kind == AttentionGroup) {
				t.Fatalf("a %v group", grp.Kind)
			}
			cands := Candidates(grp, c.target, c.prec)
			if len(cands) < c.min {
				t.Fatalf("%d candidates, want at least %d: %v", len(cands), c.min, cands)
			}
			for _, w := range c.want {
				if !slices.ContainsFunc(cands, func(m tile.Meta) bool { return m.String() == w }) {
					t.Fatalf("no candidate %s: %v", w, cands)
				}
			}
			def, err := Emit(grp, c.target, c.prec)
			if err != nil {
				t.Fatal(err)
			}
			if got := cands[0].String(); got != def.Tile.Meta.String() {
				t.Fatalf("the first candidate %s is not the heuristic's %s", got, def.Tile.Meta)
			}
			if grp.Kind == AttentionGroup && def.Tile.Meta["wgmma"] != 0 {
				t.Fatalf("the heuristic chose %s: attention on wgmma is not measured yet", def.Tile.Meta)
			}
			seen := map[string]bool{}
			var want []float32
			for i, m := range cands {
				if seen[m.String()] {
					t.Fatalf("candidate %s twice", m)
				}
				seen[m.String()] = true
				k, err := Emit(grp, TuneTo(c.target, m), c.prec)
				if err != nil {
					t.Fatalf("candidate %s: %v", m, err)
				}
				if k.Tile.Meta.String() != m.String() {
					t.Fatalf("kernel meta %s, candidate %s", k.Tile.Meta, m)
				}
				out := runOnInterp(t, grp, k)
				if i == 0 {
					want = out
					continue
				}
				if grp.Kind == AttentionGroup && c.prec != tile.PrecIEEE && m["BLOCK_M"]%(16*m["num_warps"]) != 0 && m["BLOCK_M"] > def.Tile.Meta["BLOCK_M"] {
					t.Fatalf("candidate %s: more resident rows than its warps hold in whole m16 tiles", m)
				}
				// sums in another order: within 1e-5 of the magnitude,
				// growing with the square root of the terms summed (TF32:
				// P rounds to 11 bits after a maximum that depends on the
				// key blocks)
				tol := 1e-5
				if c.prec == tile.PrecTF32 {
					tol = 1e-3
				}
				terms := 1
				for _, in := range grp.Inputs {
					n := 1
					for _, d := range in.Info.Shape {
						n *= d
					}
					terms = max(terms, n/len(want))
				}
				for j := range want {
					if d := math.Abs(float64(out[j] - want[j])); !(d <= tol*(1+math.Abs(float64(want[j])))*math.Sqrt(float64(terms))) {
						t.Fatalf("candidate %s: output[%d] = %v, the default's %v", m, j, out[j], want[j])
					}
				}
			}
			t.Logf("%d candidates: %v", len(cands), cands)
		})
	}
}

// opCausalAttention is softmax(q·kᵀ/8 + a causal mask of −∞)·v, 70
// queries and keys, head dims 20 and 12.
func opCausalAttention(g *G.ExprGraph, in func(*G.ExprGraph, string, ...int) *G.Node) {
	const b, s = 2, 70
	q, k, v := in(g, "q", b, s, 20), in(g, "k", b, s, 20), in(g, "v", b, s, 12)
	m := make([]float32, s*s)
	for i := range s {
		for j := i + 1; j < s; j++ {
			m[i*s+j] = float32(math.Inf(-1))
		}
	}
	c := G.NewConstant(tensor.New(tensor.WithShape(s, s), tensor.WithBacking(m)), G.In(g))
	sc := G.Must(G.BroadcastAdd(G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(float32(0.125)))), c, nil, []byte{0}))
	G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
}

// runOnInterp runs k on seeded inputs of grp's inputs' shapes and returns
// its output (poisoned with NaN first, zeros where it accumulates).
func runOnInterp(t *testing.T, grp *Group, k *Kernel) []float32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	var args []any
	for _, in := range grp.Inputs {
		n := 1
		for _, d := range in.Info.Shape {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.Float64()*4 - 2)
		}
		args = append(args, x)
	}
	n := 1
	for _, d := range k.Out {
		n *= d
	}
	out := make([]float32, n)
	for i := range out {
		if !k.Accumulates {
			out[i] = float32(math.NaN())
		}
	}
	if k.Parts > 1 { // partial sums in a scratch, then added in order (one output)
		scratch := make([]float32, k.Parts*n)
		for i := range scratch {
			scratch[i] = float32(math.NaN())
		}
		if err := interp.Interpret(k.Tile, k.Grid, append(args, scratch)...); err != nil {
			t.Fatal(fmt.Errorf("%s: %w", k.Tile.Meta, err))
		}
		if err := interp.Interpret(k.Combine, k.CombineGrid, scratch, out); err != nil {
			t.Fatal(fmt.Errorf("%s, combining: %w", k.Tile.Meta, err))
		}
		return out
	}
	if err := interp.Interpret(k.Tile, k.Grid, append(args, out)...); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", k.Tile.Meta, err))
	}
	return out
}

// TestNarrower: a reduction whose kernel divides its rows (a transpose
// merged with the rows by a reshape) has narrower forms on a CPU, its
// block of outputs at each power of two that divides the divisors (4: 32
// down to 1 but those dividing 4; 6: 2 and 1; 3: 1); none for a plain row
// sum, a column sum, another kind, or a GPU.
func TestNarrower(t *testing.T) {
	cpu := Target{Cores: 2, Native: true}
	through := func(d int) func(g *G.ExprGraph) {
		return func(g *G.ExprGraph) {
			x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(17, 61, d), G.WithName("x"))
			G.Must(G.Sum(G.Must(G.Reshape(G.Must(G.Transpose(x, 0, 2, 1)), tensor.Shape{17 * d, 61})), 1))
		}
	}
	plain := func(axis int) func(g *G.ExprGraph) {
		return func(g *G.ExprGraph) {
			G.Must(G.Sum(G.NewMatrix(g, tensor.Float32, G.WithShape(300, 77), G.WithName("x")), axis))
		}
	}
	for _, c := range []struct {
		name   string
		build  func(g *G.ExprGraph)
		target Target
		want   []int // BLOCK_O of each form, in order
	}{
		{"rows of a transpose, divisor 4", through(4), cpu, []int{4, 2, 1}},
		{"rows of a transpose, divisor 6", through(6), cpu, []int{2, 1}},
		{"rows of a transpose, divisor 3", through(3), cpu, []int{1}},
		{"rows of a transpose, on a GPU", through(4), H200, nil},
		{"plain row sums", plain(1), cpu, nil},
		{"column sums", plain(0), cpu, nil},
		{"elementwise", func(g *G.ExprGraph) {
			G.Must(G.Tanh(G.NewMatrix(g, tensor.Float32, G.WithShape(30, 7), G.WithName("x"))))
		}, cpu, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			grp := onlyGroup(t, c.build, c.target)
			var got []int
			for _, m := range Narrower(grp, c.target, tile.PrecIEEE) {
				got = append(got, m["BLOCK_O"])
				if _, err := Emit(grp, TuneTo(c.target, m), tile.PrecIEEE); err != nil {
					t.Fatalf("%v: %v", m, err)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("BLOCK_O %v, want %v", got, c.want)
			}
		})
	}
}

// onlyGroup is the one group Partition makes of the graph build writes,
// for target t (products fused); it fails t where there are more or none.
func onlyGroup(t *testing.T, build func(g *G.ExprGraph), target Target) *Group {
	t.Helper()
	g := G.NewGraph()
	build(g)
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	groups := Partition(gr, Options{Target: target, MatMul: true})
	if len(groups) != 1 {
		t.Fatalf("%d groups, want 1", len(groups))
	}
	return groups[0]
}
