package graphpass_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// persistRef computes a row workload in float64 from its inputs (by name:
// x, r, gamma, beta), rows of n.
type persistRef func(in map[string][]float64, rows, n int) []float64

func softmaxRef(in map[string][]float64, rows, n int) []float64 {
	x, out := in["x"], make([]float64, rows*n)
	for i := range rows {
		row := x[i*n : (i+1)*n]
		m := slices.Max(row)
		s := 0.0
		for _, v := range row {
			s += math.Exp(v - m)
		}
		for j, v := range row {
			out[i*n+j] = math.Exp(v-m) / s
		}
	}
	return out
}

// layerNormRef is LayerNorm (ε 1e-5) of x, or of x + r where there is an
// r, times γ plus β where there are.
func layerNormRef(in map[string][]float64, rows, n int) []float64 {
	out := make([]float64, rows*n)
	row := make([]float64, n)
	for i := range rows {
		for j := range n {
			row[j] = in["x"][i*n+j]
			if r := in["r"]; r != nil {
				row[j] += r[i*n+j]
			}
		}
		mean, v := 0.0, 0.0
		for _, x := range row {
			mean += x
		}
		mean /= float64(n)
		for _, x := range row {
			v += (x - mean) * (x - mean)
		}
		rstd := 1 / math.Sqrt(v/float64(n)+1e-5)
		for j, x := range row {
			y := (x - mean) * rstd
			if g := in["gamma"]; g != nil {
				y = y*g[j] + in["beta"][j]
			}
			out[i*n+j] = y
		}
	}
	return out
}

// opResidualLayerNorm is LayerNorm(x + r) with γ and β: two inputs read at
// the row's own indices.
func opResidualLayerNorm(x *G.Node) *G.Node {
	r := G.NewTensor(x.Graph(), tensor.Float32, 2, G.WithShape(x.Shape()...), G.WithName("r"))
	return opLayerNormAffine(G.Must(G.Add(x, r)))
}

// TestPersistentRows: a row kernel held in one block, one row a program,
// written persistent (PERSIST = k: min(rows, k·SMs) programs, each looping
// over rows pid, pid + grid, …, the next row's loads issued before the
// current row's stores) computes, in the reference interpreter, what
// float64 does: softmax written op by op and Gorgonia's, LayerNorm with γ
// and β (loaded late, 2 groups ahead) and of a sum x + r (two inputs
// carried a row ahead); on targets of few SMs so that each program takes
// several rows, and on a CPU's (its cores in place of SMs); rows over two
// leading axes (3×13×777: the loop's row split into coordinates); rows
// that are no multiple of the grid, widths that are no multiple of the
// block (777 in 1024), and fewer rows than the grid (one each). Outputs
// are poisoned with NaN first; f32 against float64 within 2e-5·(1 +
// |y|)·√(n/64) (sums of n terms in another order). The kernel's grid, its
// one loop and its loads before the loop are checked: without the
// persistent form PERSIST was ignored, the grid was the rows and no loop
// ran.
func TestPersistentRows(t *testing.T) {
	softmaxG := func(x *G.Node) *G.Node { return G.Must(G.SoftMax(x)) }
	cases := []struct {
		name       string
		build      func(x *G.Node) *G.Node
		ref        persistRef
		rows, n    int
		sms, k     int
		grid, most int   // the grid, and the most rows a program takes
		held       int   // inputs loaded a row ahead (before the loop, and in it)
		dims       []int // x's shape where it is not rows×n
	}{
		{"softmax op by op 37×777, 4 SMs, 2 programs an SM", opSoftmax, softmaxRef, 37, 777, 4, 2, 8, 5, 1, nil},
		{"Gorgonia SoftMax 37×777, 4 SMs, 1 an SM", softmaxG, softmaxRef, 37, 777, 4, 1, 4, 10, 1, nil},
		{"layernorm with γ and β 37×777, 4 SMs, 3 an SM", opLayerNormAffine, layerNormRef, 37, 777, 4, 3, 12, 4, 1, nil},
		{"layernorm of x + r 37×777, 5 SMs, 2 an SM", opResidualLayerNorm, layerNormRef, 37, 777, 5, 2, 10, 4, 2, nil},
		{"layernorm with γ and β 130×8192, 3 SMs", opLayerNormAffine, layerNormRef, 130, 8192, 3, 1, 3, 44, 1, nil},
		{"softmax op by op 130×8192, 3 SMs, 2 an SM", opSoftmax, softmaxRef, 130, 8192, 3, 2, 6, 22, 1, nil},
		{"softmax op by op 5×300, fewer rows than the grid", opSoftmax, softmaxRef, 5, 300, 4, 2, 5, 1, 1, nil},
		{"layernorm with γ and β 37×777 on a cpu of 3 cores (sms 0), 2 a core", opLayerNormAffine, layerNormRef, 37, 777, 0, 2, 6, 7, 1, nil},
		{"Gorgonia SoftMax 3×13×777 (rows over two axes), 4 SMs, 2 an SM", softmaxG, softmaxRef, 39, 777, 4, 2, 8, 5, 1, []int{3, 13, 777}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			shape := []int{c.rows, c.n}
			if c.dims != nil {
				shape = c.dims
			}
			c.build(G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName("x")))
			tg := GPU(c.sms, 1024, 48<<10)
			if c.sms == 0 {
				tg = CPU(3)
			}
			_, grp := emitOneGroup(t, g, tg)
			def := Candidates(grp, tg, tile.PrecIEEE)[0]
			if def["BLOCK_M"] > 1 || def["CHUNK"] > 0 {
				t.Fatalf("the default %v holds no row a program in one block", def)
			}
			m := maps.Clone(def)
			m["PERSIST"] = c.k
			k, err := Emit(grp, TuneTo(tg, m), tile.PrecIEEE)
			if err != nil {
				t.Fatal(err)
			}
			if k.Grid[0] != c.grid || k.Tile.Count(tile.OpFor) != 1 {
				t.Fatalf("grid %v and %d loops, want %d programs and one loop:\n%s", k.Grid, k.Tile.Count(tile.OpFor), c.grid, k.Tile)
			}
			before := 0 // loads of the first row, before the loop
			for _, v := range k.Tile.Body.Values {
				if v.Op == tile.OpLoad {
					before++
				}
			}
			if before != c.held {
				t.Fatalf("%d loads before the loop, want %d:\n%s", before, c.held, k.Tile)
			}
			if most := (c.rows + c.grid - 1) / c.grid; most != c.most {
				t.Fatalf("%d rows a program at most, the case says %d", most, c.most)
			}
			rng := rand.New(rand.NewPCG(uint64(c.rows), uint64(c.n)))
			in := map[string][]float64{}
			var args []any
			for _, x := range grp.Inputs {
				name := x.G.Name()
				size := c.n
				if len(x.Info.Shape) >= 2 {
					size = c.rows * c.n
				}
				v32, v64 := make([]float32, size), make([]float64, size)
				for i := range v32 {
					v32[i] = float32(rng.Float64()*8 - 4)
					v64[i] = float64(v32[i])
				}
				if _, ok := in[name]; ok || name == "" {
					t.Fatalf("input %q twice or unnamed", name)
				}
				in[name] = v64
				args = append(args, v32)
			}
			out := make([]float32, c.rows*c.n)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			if err := interp.Interpret(k.Tile, k.Grid, append(args, out)...); err != nil {
				t.Fatal(err)
			}
			want := c.ref(in, c.rows, c.n)
			tol := 2e-5 * math.Sqrt(float64(c.n)/64)
			for i, w := range want {
				if d := math.Abs(float64(out[i]) - w); !(d <= tol*(1+math.Abs(w))) {
					t.Fatalf("%v: output[%d] (row %d) = %v, float64 %v", m, i, i/c.n, out[i], w)
				}
			}
			t.Logf("%v over %v: %d rows agree", m, k.Grid, c.rows)
		})
	}
}

// TestPersistentRejected: PERSIST with rows walked in blocks (CHUNK) or
// several rows a program (BLOCK_M) is an error of Emit, not a kernel that
// ignores it.
func TestPersistentRejected(t *testing.T) {
	cases := []struct {
		name  string
		shape []int
		meta  tile.Meta
	}{
		{"walked in blocks", []int{200, 40000}, tile.Meta{"CHUNK": 8192, "num_warps": 16, "PERSIST": 1}},
		{"rows a program", []int{4096, 100}, tile.Meta{"BLOCK": 128, "BLOCK_M": 8, "num_warps": 4, "PERSIST": 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			opLayerNorm(G.NewTensor(g, tensor.Float32, 2, G.WithShape(c.shape...), G.WithName("x")))
			_, grp := emitOneGroup(t, g, H200)
			if _, err := Emit(grp, TuneTo(H200, c.meta), tile.PrecIEEE); err == nil {
				t.Fatalf("%v: no error", c.meta)
			} else {
				t.Log(err)
			}
		})
	}
}

// TestPersistentCandidates: the autotuner's candidates for a row held in
// one block, one row a program, include the default made persistent at 1
// to 4 programs an SM where they fit (threads, and two rows of registers a
// program), with the next row loaded late (late_loads: the default's, else
// 1); none where the rows are no more than the SMs, and none with the next
// row through shared memory (smem_carry: measured slower, tune.go).
func TestPersistentCandidates(t *testing.T) {
	cases := []struct {
		name  string
		build func(x *G.Node) *G.Node
		shape []int
		want  []int // PERSIST values among the candidates
	}{
		{"layernorm 1151×8192", opLayerNormAffine, []int{1151, 8192}, []int{1, 2, 3, 4}},
		{"softmax 1151×8192", opSoftmax, []int{1151, 8192}, []int{1, 2, 3, 4}},
		{"layernorm 8192×4096", opLayerNormAffine, []int{8192, 4096}, []int{1, 2, 3, 4, 8}},
		{"softmax 32768×1024 at 4 warps", opSoftmax, []int{32768, 1024}, []int{1, 2, 3, 4, 8, 16}},
		{"layernorm 4096×32768: one program of 16 warps an SM", opLayerNormAffine, []int{4096, 32768}, []int{1}},
		{"softmax 100×4096: no more rows than SMs", opSoftmax, []int{100, 4096}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			c.build(G.NewTensor(g, tensor.Float32, 2, G.WithShape(c.shape...), G.WithName("x")))
			_, grp := emitOneGroup(t, g, H200)
			cands := Candidates(grp, H200, tile.PrecIEEE)
			var got []int
			for _, m := range cands {
				if _, ok := m["smem_carry"]; ok {
					t.Errorf("candidate %v carries the next row through shared memory", m)
				}
				if p := m["PERSIST"]; p > 0 {
					def := maps.Clone(cands[0])
					def["PERSIST"], def["late_loads"] = p, max(1, def["late_loads"])
					got = append(got, p)
					if m.String() != def.String() {
						t.Errorf("candidate %v is not the default %v made persistent", m, cands[0])
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("PERSIST %v among the candidates, want %v: %v", got, c.want, cands)
			}
			if cands[0]["PERSIST"] != 0 {
				t.Fatalf("the default %v is persistent: not measured yet", cands[0])
			}
		})
	}
}

// TestPersistentPTX: every persistent candidate (PERSIST) of softmax
// written op by op and LayerNorm with γ and β at the bench's peer shapes
// on the H200, and at up to 3 programs an SM and 8192 wide the same with
// the next row through shared memory (smem_carry, late loads off), lowers to PTX that ptxas 11.8 (sm_90), where installed
// (required under TILEFUSE_REQUIRE_PTXAS=1, as in CI), assembles, and
// spills nothing at rows of up to 16384 (LayerNorm at 32768 wide spills
// 68 bytes a thread at 128 registers, 16 warps). It logs each kernel's
// registers, spilled bytes and the programs an SM its registers and
// threads allow (64K registers, allocated 8 at a time a thread, 2048
// threads), against the PERSIST it asks for.
func TestPersistentPTX(t *testing.T) {
	ptxas, err := exec.LookPath("ptxas")
	if err != nil {
		if os.Getenv("TILEFUSE_REQUIRE_PTXAS") != "" {
			t.Fatalf("ptxas is required (TILEFUSE_REQUIRE_PTXAS is set) but not found: %v", err)
		}
		t.Skip("ptxas not found: install the CUDA toolkit (see README) to assemble the generated PTX")
	}
	forms := []struct {
		name  string
		build func(x *G.Node) *G.Node
	}{{"softmax", opSoftmax}, {"layernorm", opLayerNormAffine}}
	for _, f := range forms {
		for _, sh := range [][2]int{{8192, 4096}, {1151, 8192}, {4096, 32768}, {32768, 1024}, {1823, 781}} {
			t.Run(fmt.Sprintf("%s %dx%d", f.name, sh[0], sh[1]), func(t *testing.T) {
				g := G.NewGraph()
				f.build(G.NewTensor(g, tensor.Float32, 2, G.WithShape(sh[0], sh[1]), G.WithName("x")))
				_, grp := emitOneGroup(t, g, H200)
				n := 0
				var forms []tile.Meta
				for _, m := range Candidates(grp, H200, tile.PrecIEEE) {
					if m["PERSIST"] > 0 {
						forms = append(forms, m)
						if m["PERSIST"] <= 3 && sh[1] <= 8192 { // and the next row through shared memory (not a candidate)
							sm := maps.Clone(m)
							delete(sm, "late_loads")
							sm["smem_carry"] = 1
							forms = append(forms, sm)
						}
					}
				}
				for _, m := range forms {
					n++
					k, ck := compileH200(t, grp, m)
					regs, spill := ptxasUsage(t, ptxas, ck.PTX, m.String())
					threads := 32 * m["num_warps"]
					fit := min(2048/threads, (64<<10)/(threads*((regs+7)/8*8)))
					t.Logf("%v over %v: %d registers, %d bytes spilled, %d programs an SM fit", m, k.Grid, regs, spill, fit)
					if m["BLOCK"] <= 16384 && spill > 0 {
						t.Errorf("%v: %d bytes spilled", m, spill)
					}
				}
				if n == 0 {
					t.Skip("no persistent candidate (rows a program, or walked)")
				}
			})
		}
	}
}

// TestPersistentRowsExtras: a persistent row kernel with extra outputs
// (LayerNorm's x − μ, read by another kernel, and its 1/σ, one value a
// row, read by a product of the rows) stores each, every row, and every
// one matches float64 in the reference interpreter: 37 rows of 777 on a
// target of 4 SMs at 2 programs an SM (8 programs, up to 5 rows each;
// several stores, so the next row is loaded whole before them). Outputs
// poisoned with NaN; within 2e-5·(1 + |y|)·√(n/64).
func TestPersistentRowsExtras(t *testing.T) {
	const rows, n = 37, 777
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 2, G.WithShape(rows, n), G.WithName("x"))
	mu := G.Must(G.Mean(x, 1))
	xc := G.Must(G.BroadcastSub(x, mu, nil, []byte{1}))
	v := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
	rstd := G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(v, G.NewConstant(float32(1e-5))))))))
	G.Must(G.BroadcastHadamardProd(xc, rstd, nil, []byte{1}))
	G.Must(G.Mul(rstd, G.NewVector(g, tensor.Float32, G.WithShape(rows), G.WithName("w"))))
	G.Must(G.Tanh(xc))
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	tg := GPU(4, 1024, 48<<10)
	var grp *Group
	for _, gp := range Partition(gr, Options{Target: tg}) {
		if gp.Kind == RowGroup {
			grp = gp
		}
	}
	if grp == nil || len(grp.Extra) != 2 {
		t.Fatalf("no row group with two extra outputs: %v", grp)
	}
	m := maps.Clone(Candidates(grp, tg, tile.PrecIEEE)[0])
	m["PERSIST"] = 2
	k, err := Emit(grp, TuneTo(tg, m), tile.PrecIEEE)
	if err != nil {
		t.Fatal(err)
	}
	if k.Grid[0] != 8 || k.Tile.Count(tile.OpFor) != 1 || k.Tile.Count(tile.OpStore) != 3 {
		t.Fatalf("grid %v, %d loops, %d stores; want 8 programs, one loop, 3 stores:\n%s", k.Grid, k.Tile.Count(tile.OpFor), k.Tile.Count(tile.OpStore), k.Tile)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	x32, x64 := make([]float32, rows*n), make([]float64, rows*n)
	for i := range x32 {
		x32[i] = float32(rng.Float64()*8 - 4)
		x64[i] = float64(x32[i])
	}
	if len(grp.Inputs) != 1 {
		t.Fatalf("inputs %v, want x alone", grp.Inputs)
	}
	// float64: y = (x − μ)/σ, x − μ, 1/σ
	wy, wc, wr := make([]float64, rows*n), make([]float64, rows*n), make([]float64, rows)
	for i := range rows {
		mean, s := 0.0, 0.0
		for j := range n {
			mean += x64[i*n+j]
		}
		mean /= n
		for j := range n {
			d := x64[i*n+j] - mean
			s += d * d
		}
		wr[i] = 1 / math.Sqrt(s/n+1e-5)
		for j := range n {
			wc[i*n+j] = x64[i*n+j] - mean
			wy[i*n+j] = wc[i*n+j] * wr[i]
		}
	}
	want := map[*Node][]float64{grp.Root: wy}
	for _, e := range grp.Extra {
		switch len(e.Info.Shape) == 2 && e.Info.Shape[1] == n {
		case true:
			want[e] = wc
		default:
			want[e] = wr
		}
	}
	outs := append([]*Node{grp.Root}, grp.Extra...)
	var bufs [][]float32
	args := []any{x32}
	if k.OnePointer {
		size := 0
		for _, o := range outs {
			size += len(want[o])
		}
		bufs = append(bufs, make([]float32, size))
	} else {
		for _, o := range outs {
			bufs = append(bufs, make([]float32, len(want[o])))
		}
	}
	for _, b := range bufs {
		for i := range b {
			b[i] = float32(math.NaN())
		}
		args = append(args, b)
	}
	if err := interp.Interpret(k.Tile, k.Grid, args...); err != nil {
		t.Fatal(err)
	}
	tol := 2e-5 * math.Sqrt(n/64.0)
	at := 0
	for i, o := range outs {
		got := bufs[min(i, len(bufs)-1)]
		if k.OnePointer {
			got = bufs[0][at : at+len(want[o])]
			at += len(want[o])
		}
		for j, w := range want[o] {
			if d := math.Abs(float64(got[j]) - w); !(d <= tol*(1+math.Abs(w))) {
				t.Fatalf("%v: output %d (%v) [%d] = %v, float64 %v", m, i, o, j, got[j], w)
			}
		}
	}
	t.Logf("%v over %v: %d outputs of %d rows agree", m, k.Grid, len(outs), rows)
}
