package graphpass_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestColumnReductions: a reduction over the leading axes of its input
// (column sums: a bias's gradient; column maxima) takes the column form
// (COLUMNS = 1: a [BLOCK_R, BLOCK_O] tile with the outputs along its
// contiguous axis, reduced across its rows once at the end; on a GPU a sum
// with few column blocks also split over row chunks, program axis 1,
// added atomically into the zeroed output; never on a CPU). Every kernel, run on the reference interpreter with its
// output poisoned (NaN; zeros where it accumulates), agrees with a float64
// reduction of the same float32 inputs within 1e-5·Σ|terms| per output
// (f32 sums of up to 5000 terms of ±2 in any order: their rounding is
// under 1e-6 of Σ|terms| here, and one term left out or counted twice is
// far over it); a maximum is exact. Shapes off every block: rows and
// columns that are not multiples of BLOCK_R, BLOCK_O or CHUNK, one row,
// one column.
func TestColumnReductions(t *testing.T) {
	must := G.Must
	type build func(xs []*G.Node) *G.Node
	sum0 := func(xs []*G.Node) *G.Node { return must(G.Sum(xs[0], 0)) }
	cases := []struct {
		name    string
		shapes  [][]int
		build   build
		ref     func(in [][]float64, r, c int) []float64 // in read as [r, c], reduced over r
		max     bool
		columns bool // the column form
	}{
		{"Σ[0] 1000×777", [][]int{{1000, 777}}, sum0, nil, false, true},
		{"Σ[0] 4095×33", [][]int{{4095, 33}}, sum0, nil, false, true},
		{"Σ[0] 4096×768", [][]int{{4096, 768}}, sum0, nil, false, true},
		{"Σ[0] 1×5000: one row, a copy", [][]int{{1, 5000}}, sum0, nil, false, false},
		{"Σ[0] 5000×1: one column, a full sum", [][]int{{5000, 1}}, sum0, nil, false, false},
		{"Σ[0] 3×4097: few rows", [][]int{{3, 4097}}, sum0, nil, false, true},
		{"Σ[0,1] of 30×40×130: leading axes merged", [][]int{{30, 40, 130}}, func(xs []*G.Node) *G.Node { return must(G.Sum(xs[0], 0, 1)) }, nil, false, true},
		{"Reshape(Σ[0](dy ⊙ x̂)): a gain's gradient", [][]int{{1000, 777}, {1000, 777}}, func(xs []*G.Node) *G.Node {
			return must(G.Reshape(must(G.Sum(must(G.HadamardProd(xs[0], xs[1])), 0)), tensor.Shape{777}))
		}, func(in [][]float64, r, c int) []float64 {
			s := make([]float64, c)
			for i := range in[0] {
				s[i%c] += in[0][i] * in[1][i]
			}
			return s
		}, false, true},
		{"Σ[0](x ⊙ γ): a broadcast operand in the prologue", [][]int{{999, 130}, {130}}, func(xs []*G.Node) *G.Node {
			return must(G.Sum(must(G.BroadcastHadamardProd(xs[0], xs[1], nil, []byte{0})), 0))
		}, func(in [][]float64, r, c int) []float64 {
			s := make([]float64, c)
			for i := range in[0] {
				s[i%c] += in[0][i] * in[1][i%c]
			}
			return s
		}, false, true},
		{"max[0] 1000×777", [][]int{{1000, 777}}, func(xs []*G.Node) *G.Node { return must(G.Max(xs[0], 0)) }, nil, true, true},
		{"max[0] 4095×33", [][]int{{4095, 33}}, func(xs []*G.Node) *G.Node { return must(G.Max(xs[0], 0)) }, nil, true, true},
	}
	gpu8 := GPU(8, 1024, 48<<10)
	gpu8.NumWarps = 8
	targets := []struct {
		name string
		t    Target
	}{{"h200", H200}, {"8 SMs, 8 warps", gpu8}, {"cpu, 2 cores", CPU(2)}}
	for _, c := range cases {
		for _, tg := range targets {
			t.Run(c.name+"/"+tg.name, func(t *testing.T) {
				if testing.Short() && c.shapes[0][0]*c.shapes[0][1] > 1<<20 {
					t.Skip("-short: 3M elements on the interpreter")
				}
				g := G.NewGraph()
				var xs []*G.Node
				for i, sh := range c.shapes {
					xs = append(xs, G.NewTensor(g, tensor.Float32, len(sh), G.WithShape(sh...), G.WithName(fmt.Sprintf("x%d", i))))
				}
				c.build(xs)
				k := emitOne(t, g, tg.t)
				columns := k.Tile.Meta["COLUMNS"] == 1
				if want := c.columns; columns != want {
					t.Fatalf("column form %v, want %v: %v", columns, want, k.Tile.Meta)
				}
				if k.Accumulates != (k.Grid[1] > 1) || k.Accumulates && (c.max || !tg.t.GPU()) {
					t.Fatalf("accumulates %v, grid %v (a maximum or a cpu target never splits)", k.Accumulates, k.Grid)
				}
				sh := c.shapes[0]
				cols := sh[len(sh)-1]
				rows := numel(sh) / cols
				if len(sh) == 3 {
					rows, cols = sh[0]*sh[1], sh[2]
				}
				rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
				var args []any
				var in [][]float64
				for _, s := range c.shapes {
					x32, x64 := make([]float32, numel(s)), make([]float64, numel(s))
					for i := range x32 {
						x32[i] = float32(rng.Float64()*4 - 2)
						x64[i] = float64(x32[i])
					}
					args, in = append(args, x32), append(in, x64)
				}
				var want, scale []float64
				want, scale = make([]float64, cols), make([]float64, cols)
				for j := range want {
					want[j] = math.Inf(-1)
					if !c.max {
						want[j] = 0
					}
				}
				if c.ref != nil {
					want = c.ref(in, rows, cols)
				}
				for i, v := range in[0] {
					switch j := i % cols; {
					case c.max:
						want[j] = math.Max(want[j], v)
					case c.ref == nil:
						want[j] += v
					}
					scale[i%cols] += math.Abs(v) * 2 // |x·y| ≤ 2|x|
				}
				out := make([]float32, cols)
				for i := range out {
					out[i] = float32(math.NaN())
					if k.Accumulates {
						out[i] = 0
					}
				}
				if err := interp.Interpret(k.Tile, k.Grid, append(args, out)...); err != nil {
					t.Fatal(err)
				}
				for j, w := range want {
					tol := 1e-5 * scale[j]
					if c.max {
						tol = 0
					}
					if g := float64(out[j]); !(math.Abs(g-w) <= tol) {
						t.Fatalf("%v grid %v: output %d = %v, want %v (within %.3g)", k.Tile.Meta, k.Grid, j, g, w, tol)
					}
				}
			})
		}
	}
}

// TestColumnFormLoads: in the column form every load of the reduction's
// input is a [BLOCK_R, BLOCK_O] block whose last axis walks the
// contiguous outputs, and the reduction is along axis 0 (what codegen
// turns into 128-bit loads of 128 neighbouring floats a warp row).
func TestColumnFormLoads(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(4096, 3072), G.WithName("x"))
	G.Must(G.Sum(x, 0))
	k := emitOne(t, g, H200)
	bo, br := k.Tile.Meta["BLOCK_O"], k.Tile.Meta["BLOCK_R"]
	if want := (tile.Grid{3072 / bo, tile.CDiv(4096, k.Tile.Meta["CHUNK"])}); k.Grid != want || !k.Accumulates {
		t.Fatalf("grid %v accumulates %v, want %v split", k.Grid, k.Accumulates, want)
	}
	if k.Grid[0]*k.Grid[1] < 2*H200.SMs {
		t.Errorf("%d programs for %d SMs", k.Grid[0]*k.Grid[1], H200.SMs)
	}
	loads, reduces := 0, 0
	k.Tile.Walk(func(v *tile.Value) {
		switch {
		case v.Op == tile.OpLoad:
			loads++
			if s := v.Type.Shape; s.Rank != 2 || s.Dims[0] != br || s.Dims[1] != bo {
				t.Errorf("a load of %v, want [%d, %d]", s, br, bo)
			}
		case v.Op == tile.OpReduceSum:
			reduces++
			if v.Aux != 0 {
				t.Errorf("a reduction along axis %d, want 0", v.Aux)
			}
		}
	})
	if loads != 1 || reduces != 1 {
		t.Fatalf("%d loads and %d reductions, want 1 and 1:\n%s", loads, reduces, k.Tile)
	}
}

// TestColumnFormManySums: five column sums of one shape (a block's
// LayerNorm gradients: fused_15 of the BERT layer) are one kernel with
// five outputs; on a GPU it holds 8 elements a thread of each sum (8 rows
// a tile at 4 warps, 64 accumulator registers: at 32 a thread ptxas took
// 254 registers) and splits the rows for 4 programs an SM. On the
// interpreter (outputs zeroed: the kernel adds into them) each agrees
// with float64 sums of its products within 1e-5·Σ|terms|, at the BERT
// shape and at a tail.
func TestColumnFormManySums(t *testing.T) {
	cases := []struct {
		rows, cols int
		br, chunk  int
	}{{4096, 768, 8, 48}, {1000, 777, 8, 16}}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d", c.rows, c.cols), func(t *testing.T) {
			if testing.Short() && c.rows*c.cols > 1<<20 {
				t.Skip("-short: 3M elements on the interpreter")
			}
			g := G.NewGraph()
			var xs []*G.Node
			for i := range 6 {
				xs = append(xs, G.NewMatrix(g, tensor.Float32, G.WithShape(c.rows, c.cols), G.WithName(fmt.Sprintf("x%d", i))))
			}
			for i := 1; i < 6; i++ { // Σ[0] x0⊙xi
				G.Must(G.Sum(G.Must(G.HadamardProd(xs[0], xs[i])), 0))
			}
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: H200})
			if len(groups) != 1 || len(groups[0].Extra) != 4 {
				t.Fatalf("%d groups, want one with 5 outputs", len(groups))
			}
			k, err := Emit(groups[0], H200, tile.PrecIEEE)
			if err != nil {
				t.Fatal(err)
			}
			m := k.Tile.Meta
			if m["COLUMNS"] != 1 || m["BLOCK_O"] != 128 || m["BLOCK_R"] != c.br || m["CHUNK"] != c.chunk || !k.Accumulates {
				t.Fatalf("meta %v accumulates %v; want the column form, 128 columns, %d rows, chunks of %d", m, k.Accumulates, c.br, c.chunk)
			}
			if p := k.Grid[0] * k.Grid[1]; p < 2*H200.SMs {
				t.Errorf("%d programs for %d SMs", p, H200.SMs)
			}
			rng := rand.New(rand.NewPCG(uint64(c.rows), 5))
			in := map[*Node][]float32{}
			for _, n := range groups[0].Inputs {
				d := make([]float32, c.rows*c.cols)
				for i := range d {
					d[i] = float32(rng.Float64()*4 - 2)
				}
				in[n] = d
			}
			var args []any
			for _, n := range groups[0].Inputs {
				args = append(args, in[n])
			}
			outs := make([][]float32, 5)
			for i := range outs {
				outs[i] = make([]float32, c.cols) // zeros: the kernel adds into them
				args = append(args, outs[i])
			}
			if err := interp.Interpret(k.Tile, k.Grid, args...); err != nil {
				t.Fatal(err)
			}
			for o, n := range append([]*Node{groups[0].Root}, groups[0].Extra...) {
				prod := n.Inputs[0] // x0 ⊙ xi
				a, b := in[prod.Inputs[0]], in[prod.Inputs[1]]
				if a == nil || b == nil {
					t.Fatalf("output %d: the product's operands are not the kernel's inputs", o)
				}
				want, scale := columnRef(a, b, c.cols, false)
				for j, w := range want {
					if g := float64(outs[o][j]); !(math.Abs(g-w) <= 1e-5*scale[j]) {
						t.Fatalf("output %d column %d: %v, want %v", o, j, g, w)
					}
				}
			}
		})
	}
}

// TestColumnsInline: a column reduction as native code small enough for
// one core (at most 128K elements read) is one chunk of whole rows in the
// split form's blocks (a block and a tail where that reads fewer columns),
// not 32-column programs; sums, sibling sums and a maximum, on the
// reference interpreter against float64 (sums within 1e-5·Σ|x|, the
// maximum exactly), outputs poisoned. Larger, or on the executor, the
// unsplit form as before.
func TestColumnsInline(t *testing.T) {
	native := CPU(16)
	native.Native = true
	for _, c := range []struct {
		name         string
		rows, cols   int
		op           string // "sum", "max", "siblings" (Σ x, Σ x⊙y)
		target       Target
		bo, br, tail int // 0: the unsplit form of 32-column programs
	}{
		{"64×777 sum: 768 and a tail of 16", 64, 777, "sum", native, 768, 2, 16},
		{"64×777 max: 768 and a tail of 16", 64, 777, "max", native, 768, 2, 16},
		{"64×768, two sibling sums: whole rows", 64, 768, "siblings", native, 768, 1, 0},
		{"128×768, two sibling sums: over 128K elements read, 32-column programs", 128, 768, "siblings", native, 0, 0, 0},
		{"20×1000 sum: two blocks of 512, the last shifted", 20, 1000, "sum", native, 512, 4, 0},
		{"7×33 sum: 32 and a tail of 16, rows off the tile", 7, 33, "sum", native, 32, 8, 16},
		{"200×777 max: over 128K elements, 32-column programs", 200, 777, "max", native, 0, 0, 0},
		{"64×777 sum on the executor: 32-column programs", 64, 777, "sum", CPU(16), 0, 0, 0},
		{"64×3 sum: a block of 8, masked past the columns", 64, 3, "sum", native, 8, 64, 0},
		{"37×5 max: a block of 8, masked past the columns and rows", 37, 5, "max", native, 8, 64, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, grp := columnKernel(t, c.rows, c.cols, c.op, c.target)
			m := k.Tile.Meta
			if m["COLUMNS"] != 1 || k.Parts > 1 || k.Combine != nil || m["CHUNK"] != c.rows {
				t.Fatalf("meta %v, %d parts: not the unsplit column form", m, k.Parts)
			}
			if c.bo == 0 {
				if m["BLOCK_O"] != 32 || m["TAIL"] != 0 {
					t.Fatalf("meta %v, want 32-column programs", m)
				}
				return
			}
			if m["BLOCK_O"] != c.bo || m["BLOCK_R"] != c.br || m["TAIL"] != c.tail {
				t.Fatalf("meta %v, want BLOCK_O %d, BLOCK_R %d, TAIL %d", m, c.bo, c.br, c.tail)
			}
			k.Tile.Walk(func(v *tile.Value) {
				if v.Op == tile.OpLoad && len(v.Args) > 1 && c.rows%c.br == 0 && c.cols >= c.bo {
					t.Errorf("a masked load: %v", v)
				}
			})
			rng := rand.New(rand.NewPCG(uint64(c.rows), uint64(c.cols)))
			ins := map[string][]float32{}
			for _, name := range []string{"x", "y"} {
				d := make([]float32, c.rows*c.cols)
				for i := range d {
					d[i] = float32(rng.Float64()*4 - 2)
				}
				ins[name] = d
			}
			var args []any
			for _, in := range grp.Inputs {
				args = append(args, ins[in.G.Name()])
			}
			outs := make([][]float32, max(1, k.Outs))
			for i := range outs {
				outs[i] = make([]float32, c.cols)
				for j := range outs[i] {
					outs[i][j] = float32(math.NaN())
				}
				args = append(args, outs[i])
			}
			if err := interp.Interpret(k.Tile, k.Grid, args...); err != nil {
				t.Fatal(err)
			}
			for o, n := range append([]*Node{grp.Root}, grp.Extra...) {
				var y []float32
				if len(n.Inputs[0].Inputs) == 2 { // Σ[0] x ⊙ y
					y = ins["y"]
				}
				want, scale := columnRef(ins["x"], y, c.cols, c.op == "max")
				for j, w := range want {
					if got := float64(outs[o][j]); !(math.Abs(got-w) <= 1e-5*scale[j]) {
						t.Fatalf("output %d, column %d: %v, want %v", o, j, got, w)
					}
				}
			}
		})
	}
}

// TestNarrowColumnCandidates: where kernels are machine code, no
// autotuner candidate of a column reduction of 3 columns takes a block
// under minColumnLanes (the machine code declines it: such a candidate
// would be measured on the executor), nor does the default.
func TestNarrowColumnCandidates(t *testing.T) {
	native := CPU(16)
	native.Native = true
	_, grp := columnKernel(t, 640, 3, "sum", native)
	// the default first; minColumnLanes: the machine code's vector of 8 lanes
	cands, least := Candidates(grp, native, tile.PrecIEEE), 8
	for _, m := range cands {
		if m["BLOCK_O"] < least {
			t.Errorf("candidate %v: BLOCK_O under %d", m, least)
		}
	}
}

// TestColumnTailRejected: a TAIL (the row's last columns in a tile of
// their own) that does not make one block and a tail of the row is an
// error of Emit, not a kernel that leaves columns unsummed or sums some
// twice: an autotuner's candidate with BLOCK_O changed and TAIL kept.
func TestColumnTailRejected(t *testing.T) {
	tg := CPU(16)
	tg.Native = true
	for _, c := range []struct {
		name string
		meta tile.Meta
	}{
		{"block and tail short of the row", tile.Meta{"COLUMNS": 1, "BLOCK_O": 512, "BLOCK_R": 4, "CHUNK": 128, "TAIL": 16}},
		{"block wider than the row", tile.Meta{"COLUMNS": 1, "BLOCK_O": 1024, "BLOCK_R": 2, "CHUNK": 128, "TAIL": 16}},
		{"tail wider than the row", tile.Meta{"COLUMNS": 1, "BLOCK_O": 768, "BLOCK_R": 2, "CHUNK": 128, "TAIL": 1024}},
		{"not the column form", tile.Meta{"BLOCK_O": 768, "BLOCK_R": 2, "CHUNK": 128, "TAIL": 16}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(1000, 777), G.WithName("x"))
			G.Must(G.Sum(x, 0))
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: tg})
			if len(groups) != 1 {
				t.Fatalf("%d groups, want 1", len(groups))
			}
			if k, err := Emit(groups[0], TuneTo(tg, c.meta), tile.PrecIEEE); err == nil {
				t.Fatalf("emitted with %v: %v", c.meta, k.Tile.Meta)
			}
		})
	}
}

// TestColumnParts: on a CPU target as native code a column sum splits over
// row chunks (Kernel.Parts): programs over column blocks × chunks, each
// chunk's sums a part of the scratch, which Combine adds in order. The plan
// (BLOCK_O, CHUNK, the parts: 32 programs where the input holds 32 of
// about 64K elements, two a core up to 16 cores on any host), then on the reference
// interpreter, scratch and outputs poisoned (NaN): every part of every
// column written, each output the parts added in order from zero bit for
// bit (float32 adds in Go: the result does not depend on the order the
// programs ran in), and within 1e-5·Σ|terms| of float64 sums of the same
// float32 inputs (as TestColumnReductions). Shapes off every block. A
// maximum, too few rows and the executor's target stay unsplit.
func TestColumnParts(t *testing.T) {
	native := func(cores int) Target {
		tg := CPU(cores)
		tg.Native = true
		return tg
	}
	cases := []struct {
		name       string
		rows, cols int
		sums       int // 1: Σ[0] x; 2: Σ[0] x and Σ[0] x⊙y (siblings, one kernel)
		max        bool
		target     Target
		// the plan; parts 0: unsplit; tail: the row's last columns in a
		// tile of their own (TAIL), one program of columns
		bo, br, chunk, parts, tail int
		// every load unmasked: where the columns end inside a block, the
		// last one shifted to end at the last column (no mask on columns)
		whole bool
	}{
		{name: "8192×1024 (colsum large) on 16 cores: 32 chunks of 256 whole rows", rows: 8192, cols: 1024, sums: 1, target: native(16), bo: 1024, br: 2, chunk: 256, parts: 32, whole: true},
		{name: "8192×1024 on 2 cores: the same 32 programs", rows: 8192, cols: 1024, sums: 1, target: native(2), bo: 1024, br: 2, chunk: 256, parts: 32, whole: true},
		{name: "1000×777 (colsum small): 768 columns and a tail of the last 16 × 12 chunks of 84 rows", rows: 1000, cols: 777, sums: 1, target: native(16), bo: 768, br: 2, chunk: 84, parts: 12, tail: 16, whole: true},
		{name: "1001×777, two sibling sums: 768 columns and a tail of 16, one row a tile", rows: 1001, cols: 777, sums: 2, target: native(16), bo: 768, br: 1, chunk: 84, parts: 12, tail: 16, whole: true},
		{name: "600×1100: 1024 columns and a tail of the last 96", rows: 600, cols: 1100, sums: 1, target: native(16), bo: 1024, br: 1, chunk: 60, parts: 10, tail: 96, whole: true},
		{name: "4097×1000: rows and columns off every block", rows: 4097, cols: 1000, sums: 1, target: native(16), bo: 512, br: 4, chunk: 260, parts: 16},
		{name: "3001×768, two sibling sums: 768-column rows, 1 a tile", rows: 3001, cols: 768, sums: 2, target: native(16), bo: 768, br: 1, chunk: 94, parts: 32, whole: true},
		{name: "4095×33: narrow rows, 32 columns and a tail of 16, chunks of about 64K elements", rows: 4095, cols: 33, sums: 1, target: native(16), bo: 32, br: 32, chunk: 1376, parts: 3, tail: 16},
		{name: "20000×12: fewer columns than a vector: masked blocks, masked combining", rows: 20000, cols: 12, sums: 1, target: native(16), bo: 16, br: 128, chunk: 4096, parts: 5},
		{name: "100×1024: chunks of about 64 rows (64K elements), rounded", rows: 100, cols: 1024, sums: 1, target: native(16), bo: 1024, br: 2, chunk: 50, parts: 2},
		{name: "20×1024: one chunk, unsplit", rows: 20, cols: 1024, sums: 1, target: native(16)},
		{name: "max[0] 1000×777: unsplit", rows: 1000, cols: 777, max: true, target: native(16)},
		{name: "1000×777 on the executor: unsplit", rows: 1000, cols: 777, sums: 1, target: CPU(16)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			op := "sum"
			switch {
			case c.max:
				op = "max"
			case c.sums == 2:
				op = "siblings"
			}
			k, grp := columnKernel(t, c.rows, c.cols, op, c.target)
			m := k.Tile.Meta
			if m["COLUMNS"] != 1 {
				t.Fatalf("meta %v: not the column form", m)
			}
			if c.parts == 0 {
				if k.Parts > 1 || k.Combine != nil || k.Grid[1] > 1 || k.Accumulates {
					t.Fatalf("meta %v grid %v: %d parts, accumulates %v; want unsplit", m, k.Grid, k.Parts, k.Accumulates)
				}
				return
			}
			if m["BLOCK_O"] != c.bo || m["BLOCK_R"] != c.br || m["CHUNK"] != c.chunk || m["TAIL"] != c.tail || k.Parts != c.parts || k.Combine == nil || k.Accumulates {
				t.Fatalf("meta %v, %d parts, accumulates %v; want BLOCK_O %d, BLOCK_R %d, CHUNK %d, TAIL %d, %d parts", m, k.Parts, k.Accumulates, c.bo, c.br, c.chunk, c.tail, c.parts)
			}
			programs := tile.CDiv(c.cols, c.bo)
			if c.tail > 0 {
				programs = 1
			}
			if want := (tile.Grid{programs, c.parts}); k.Grid != want {
				t.Fatalf("grid %v, want %v", k.Grid, want)
			}
			k.Tile.Walk(func(v *tile.Value) {
				if c.whole && v.Op == tile.OpLoad && len(v.Args) > 1 {
					t.Errorf("a masked load: %v", v)
				}
			})
			// the combining kernel's loads are whole vectors wherever the
			// columns fill one (its last block shifted as the parts' are)
			k.Combine.Walk(func(v *tile.Value) {
				if c.cols >= 16 && v.Op == tile.OpLoad && len(v.Args) > 1 {
					t.Errorf("a masked load in the combining kernel: %v", v)
				}
			})
			if p := k.Grid[0] * k.Grid[1]; c.rows*c.cols >= 32*65536 && p < 32 { // 32 programs of 256 KB (minPartElems)
				t.Errorf("%d programs, want at least 32 (two a core of 16)", p)
			}
			if testing.Short() && c.rows*c.cols > 1<<20 {
				t.Skip("-short: the plan checked; 8M elements on the interpreter left out")
			}
			rng := rand.New(rand.NewPCG(uint64(c.rows), uint64(c.cols)))
			ins := map[string][]float32{}
			for _, name := range []string{"x", "y"} {
				d := make([]float32, c.rows*c.cols)
				for i := range d {
					d[i] = float32(rng.Float64()*4 - 2)
				}
				ins[name] = d
			}
			var args []any
			for _, in := range grp.Inputs {
				args = append(args, ins[in.G.Name()])
			}
			nan := float32(math.NaN())
			scratch := make([][]float32, k.Outs)
			outs := make([][]float32, k.Outs)
			for i, n := range k.ScratchSizes() {
				if n != c.parts*c.cols {
					t.Fatalf("scratch of %d elements, want %d", n, c.parts*c.cols)
				}
				scratch[i] = make([]float32, n)
				outs[i] = make([]float32, c.cols)
				for j := range scratch[i] {
					scratch[i][j] = nan
				}
				for j := range outs[i] {
					outs[i][j] = nan
				}
			}
			main, comb := args, []any{}
			for i := range scratch {
				main = append(main, scratch[i])
				comb = append(comb, scratch[i])
			}
			for i := range outs {
				comb = append(comb, outs[i])
			}
			if err := interp.Interpret(k.Tile, k.Grid, main...); err != nil {
				t.Fatal(err)
			}
			if err := interp.Interpret(k.Combine, k.CombineGrid, comb...); err != nil {
				t.Fatal(err)
			}
			for o, n := range append([]*Node{grp.Root}, grp.Extra...) {
				prod := len(n.Inputs[0].Inputs) == 2 // Σ[0] x ⊙ y (no reshape here: n is the sum)
				for j := range c.cols {
					var inOrder float32
					for p := range c.parts {
						v := scratch[o][p*c.cols+j]
						if v != v {
							t.Fatalf("output %d: part %d of column %d not written", o, p, j)
						}
						inOrder += v
					}
					var want, scale float64
					for r := range c.rows {
						v := float64(ins["x"][r*c.cols+j])
						if prod {
							v *= float64(ins["y"][r*c.cols+j])
						}
						want += v
						scale += math.Abs(v)
					}
					got := outs[o][j]
					if math.Float32bits(got) != math.Float32bits(inOrder) {
						t.Fatalf("output %d column %d = %v, the parts in order %v", o, j, got, inOrder)
					}
					if tol := 1e-5 * scale; !(math.Abs(float64(got)-want) <= tol) {
						t.Fatalf("output %d column %d = %v, want %v (within %.3g)", o, j, got, want, tol)
					}
				}
			}
		})
	}
}

// columnKernel is the one kernel of a column reduction over a rows×cols
// matrix on target: op "sum" (Σ[0] x), "max" (max[0] x) or "siblings" (Σ[0] x
// and Σ[0] x⊙y), imported, partitioned (one group) and emitted.
func columnKernel(t *testing.T, rows, cols int, op string, target Target) (*Kernel, *Group) {
	t.Helper()
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("x"))
	switch op {
	case "max":
		G.Must(G.Max(x, 0))
	case "siblings":
		y := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("y"))
		G.Must(G.Sum(x, 0))
		G.Must(G.Sum(G.Must(G.HadamardProd(x, y)), 0))
	default:
		G.Must(G.Sum(x, 0))
	}
	return emitOneGroup(t, g, target)
}

// columnRef is the float64 reference of a column reduction of a row-major
// matrix a of cols columns, or of a⊙b where b is not nil: per column the
// sum (the maximum where max is set) and the sum of the terms' magnitudes,
// which bounds a float32 sum's error (0 for a maximum: exact).
func columnRef(a, b []float32, cols int, max bool) (want, scale []float64) {
	want, scale = make([]float64, cols), make([]float64, cols)
	if max {
		for j := range want {
			want[j] = math.Inf(-1)
		}
	}
	for i := range a {
		v := float64(a[i])
		if b != nil {
			v *= float64(b[i])
		}
		if max {
			want[i%cols] = math.Max(want[i%cols], v)
			continue
		}
		want[i%cols] += v
		scale[i%cols] += math.Abs(v)
	}
	return want, scale
}
