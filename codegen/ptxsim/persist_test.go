package ptxsim_test

import (
	"fmt"
	"maps"
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

// buildRowForm writes form (softmax op by op, Gorgonia's SoftMax, or
// LayerNorm with γ and β) over a rows×cols x.
func buildRowForm(form string, rows, cols int) *G.ExprGraph {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("x"))
	switch form {
	case "softmax":
		e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Max(x, 1)), nil, []byte{1}))))
		G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))
	case "Gorgonia SoftMax":
		G.Must(G.SoftMax(x))
	case "layernorm":
		gamma := G.NewVector(g, tensor.Float32, G.WithShape(cols), G.WithName("gamma"))
		beta := G.NewVector(g, tensor.Float32, G.WithShape(cols), G.WithName("beta"))
		mu := G.Must(G.Mean(x, 1))
		xc := G.Must(G.BroadcastSub(x, mu, nil, []byte{1}))
		v := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
		rstd := G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(v, G.NewConstant(float32(1e-5))))))))
		y := G.Must(G.BroadcastHadamardProd(xc, rstd, nil, []byte{1}))
		G.Must(G.BroadcastAdd(G.Must(G.BroadcastHadamardProd(y, gamma, nil, []byte{0})), beta, nil, []byte{0}))
	}
	return g
}

// TestPersistentRowKernelsInSimulator: the persistent row form (PERSIST =
// k: min(rows, k·SMs) programs looping over their rows, the next row
// loaded before the current one is stored), as the autotuner's candidate
// (the next row loaded late) and whole before the store, lowered to PTX
// runs in the simulator (sm_90, racecheck and initcheck on: the
// reductions' shared memory reused row after row) and agrees with the
// reference interpreter
// running the same kernel (outputs poisoned with NaN; within a millionth
// of the largest output plus 2e-5 relative, as runRowKernel), on targets
// of 2 to 4 SMs so that each program loops over several rows, rows no
// multiple of the grid, widths with a masked tail (777 in 1024, 1000) and
// without (4096, 8192: 128-bit accesses). In the PTX the loop's body has
// global loads after its first global store where the store issues the
// late loads (the next row, and LayerNorm's γ and β) and has more groups
// than are issued ahead of it, and none where the next row is loaded
// whole before it; as many loads of each input as stores, none twice.
func TestPersistentRowKernelsInSimulator(t *testing.T) {
	cases := []struct {
		form            string
		rows, cols, sms int
		persist         int
		whole           bool // the next row loaded whole before the store (no late_loads), not the tuner's candidate
		smem            bool // the next row through shared memory (smem_carry)
	}{
		{"softmax", 37, 777, 4, 2, false, false},
		{"softmax", 37, 777, 4, 2, true, false},
		{"Gorgonia SoftMax", 21, 1000, 2, 3, false, false},
		{"layernorm", 37, 777, 4, 3, false, false},
		{"layernorm", 9, 4096, 2, 2, false, false},
		{"softmax", 9, 4096, 2, 2, false, false},
		{"softmax", 9, 4096, 2, 2, true, false},
		{"layernorm", 130, 8192, 3, 1, false, false},
		{"softmax", 130, 8192, 3, 2, false, false},
		{"softmax", 37, 777, 4, 2, false, true},
		{"Gorgonia SoftMax", 21, 1000, 2, 3, false, true},
		{"layernorm", 37, 777, 4, 3, false, true},
		{"layernorm", 9, 4096, 2, 2, false, true},
		{"softmax", 9, 4096, 2, 4, false, true},
		{"softmax", 130, 8192, 3, 1, false, true},
		{"softmax", 40, 64, 4, 2, false, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %dx%d on %d SMs, PERSIST %d, whole %v, smem %v", c.form, c.rows, c.cols, c.sms, c.persist, c.whole, c.smem), func(t *testing.T) {
			tg := graphpass.GPU(c.sms, 1024, 48<<10)
			if c.smem { // two rows a program in shared memory, as on an H200
				tg = graphpass.GPU(c.sms, 1024, 227<<10)
			}
			gr, err := graphpass.Import(buildRowForm(c.form, c.rows, c.cols))
			if err != nil {
				t.Fatal(err)
			}
			groups := graphpass.Partition(gr, graphpass.Options{Target: tg})
			if len(groups) != 1 {
				t.Fatalf("%d groups, want 1", len(groups))
			}
			grp := groups[0]
			cands := graphpass.Candidates(grp, tg, tile.PrecIEEE)
			var meta tile.Meta
			for _, m := range cands {
				if m["PERSIST"] == c.persist {
					meta = m
				}
			}
			if c.smem { // not a candidate (measured slower): the default made persistent, its late loads kept
				meta = maps.Clone(cands[0])
				meta["PERSIST"], meta["smem_carry"] = c.persist, 1
				if c.cols < 128 { // rows held by fewer lanes than threads (replicated), one a program
					meta = tile.Meta{"BLOCK": c.cols, "num_warps": 4, "PERSIST": c.persist, "smem_carry": 1}
				}
			}
			if meta == nil {
				t.Fatalf("no candidate with PERSIST = %d: %v", c.persist, cands)
			}
			if c.whole {
				meta = maps.Clone(meta)
				delete(meta, "late_loads")
			}
			k, err := graphpass.Emit(grp, graphpass.TuneTo(tg, meta), tile.PrecIEEE)
			if err != nil {
				t.Fatal(err)
			}
			if grid := min(c.rows, c.persist*c.sms); k.Grid[0] != grid || grid >= c.rows {
				t.Fatalf("grid %v, want %d programs for %d rows", k.Grid, grid, c.rows)
			}
			rng := rand.New(rand.NewPCG(uint64(c.rows), uint64(c.cols)))
			var args, ref []any
			for _, in := range grp.Inputs {
				d := make([]float32, tensorSize(in.Info.Shape))
				for i := range d {
					d[i] = float32(rng.Float64()*8 - 4)
				}
				args, ref = append(args, d), append(ref, append([]float32(nil), d...))
			}
			out, want, sim := simulateRows(t, k, meta, args, ref, c.rows*c.cols)
			rowsAgree(t, meta.String(), out, want, c.cols)
			ptx := sim.Last.PTX
			head := strings.Index(ptx, "$L_for")
			if head < 0 {
				t.Fatalf("%v: no loop in the PTX", meta)
			}
			body := ptx[head:]
			first := strings.Index(body, "st.global")
			if first < 0 {
				t.Fatalf("%v: no global store in the loop", meta)
			}
			// late: loads after the first store where the store has more
			// groups than are issued ahead of it
			inputs := 1
			if c.form == "layernorm" {
				inputs = 3
			}
			after, stores := strings.Count(body[first:], "ld.global"), strings.Count(body, "st.global")
			if c.smem {
				// the row's copies first in the body, as many and as wide
				// as the stores, read back from shared memory; γ and β
				// late as before
				copies, reads := strings.Count(body, "cp.async.cg"), strings.Count(body, "ld.shared.v4")
				wide := c.cols%4 == 0 && c.cols >= 4*32*meta["num_warps"] // 16 bytes a thread at least
				if wide && (copies != stores || reads < stores) || !wide && strings.Count(body, "cp.async.c") < stores {
					t.Errorf("%v: %d 16-byte copies and %d 16-byte shared reads in the loop for %d stores", meta, copies, reads, stores)
				}
				if cp := strings.Index(body, "cp.async"); cp < 0 || cp > first || strings.Index(body, "cp.async.wait_group 1") < 0 {
					t.Errorf("%v: the next row's copies do not start the loop's body, or no wait for the current row's", meta)
				}
				if loads := strings.Count(body, "ld.global"); loads != (inputs-1)*stores {
					t.Errorf("%v: %d global loads in the loop, want %d (γ and β)", meta, loads, (inputs-1)*stores)
				}
				t.Logf("%v over %v: %d rows agree", meta, k.Grid, c.rows)
				return
			}
			if d := meta["late_loads"]; d > 0 && stores > d+1 && after == 0 || d == 0 && after > 0 {
				t.Errorf("%v: %d global loads after the first of the loop's %d global stores", meta, after, stores)
			}
			// each access once: the next row's loads (and γ's and β's) as
			// many and as wide as the row's stores, none a second time
			if loads := strings.Count(body, "ld.global"); loads != inputs*stores {
				t.Errorf("%v: %d global loads in the loop, want %d (%d inputs, %d stores)", meta, loads, inputs*stores, inputs, stores)
			}
			if c.cols%4 == 0 {
				wideAccesses(t, meta.String()+" (the loop)", body)
			}
			t.Logf("%v over %v: %d rows agree", meta, k.Grid, c.rows)
		})
	}
}

// TestPersistentRowExtrasInSimulator: a persistent row kernel with extra
// outputs (LayerNorm's x − μ and its 1/σ, one value a row, stored by the
// lanes of the row's first column) runs in the simulator (racecheck,
// initcheck) and agrees with the interpreter on every output: 37 rows of
// 777 on 4 SMs at 2 programs an SM.
func TestPersistentRowExtrasInSimulator(t *testing.T) {
	const rows, cols = 37, 777
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("x"))
	mu := G.Must(G.Mean(x, 1))
	xc := G.Must(G.BroadcastSub(x, mu, nil, []byte{1}))
	v := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
	rstd := G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(v, G.NewConstant(float32(1e-5))))))))
	G.Must(G.BroadcastHadamardProd(xc, rstd, nil, []byte{1}))
	G.Must(G.Mul(rstd, G.NewVector(g, tensor.Float32, G.WithShape(rows), G.WithName("w"))))
	G.Must(G.Tanh(xc))
	gr, err := graphpass.Import(g)
	if err != nil {
		t.Fatal(err)
	}
	tg := graphpass.GPU(4, 1024, 48<<10)
	var grp *graphpass.Group
	for _, gp := range graphpass.Partition(gr, graphpass.Options{Target: tg}) {
		if gp.Kind == graphpass.RowGroup {
			grp = gp
		}
	}
	if grp == nil || len(grp.Extra) != 2 {
		t.Fatalf("no row group with two extra outputs: %v", grp)
	}
	meta := maps.Clone(graphpass.Candidates(grp, tg, tile.PrecIEEE)[0])
	meta["PERSIST"] = 2
	k, err := graphpass.Emit(grp, graphpass.TuneTo(tg, meta), tile.PrecIEEE)
	if err != nil {
		t.Fatal(err)
	}
	if k.Grid[0] != 8 {
		t.Fatalf("grid %v, want 8 programs", k.Grid)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	xs := make([]float32, rows*cols)
	for i := range xs {
		xs[i] = float32(rng.Float64()*8 - 4)
	}
	var sizes []int
	if k.OnePointer {
		total := 0
		for i := range k.Outs {
			total += tensorSize(k.Shape(i))
		}
		sizes = []int{total}
	} else {
		for i := range k.Outs {
			sizes = append(sizes, tensorSize(k.Shape(i)))
		}
	}
	args, ref := []any{append([]float32(nil), xs...)}, []any{append([]float32(nil), xs...)}
	var got, want [][]float32
	for _, n := range sizes {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(math.NaN()), float32(math.NaN())
		}
		got, want = append(got, a), append(want, b)
		args, ref = append(args, a), append(ref, b)
	}
	if err := interp.Interpret(k.Tile, k.Grid, ref...); err != nil {
		t.Fatal(err)
	}
	sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: meta["num_warps"]}
	if err := sim.Launch(k.Tile, k.Grid, args...); err != nil {
		t.Fatalf("%v: %v", meta, err)
	}
	for o := range want {
		for i, w := range want[o] {
			if math.IsNaN(float64(w)) {
				t.Fatalf("output buffer %d [%d]: the interpreter left it unwritten", o, i)
			}
			if g := got[o][i]; !(math.Abs(float64(g-w)) <= 1e-5+2e-5*math.Abs(float64(w))) {
				t.Fatalf("%v: output buffer %d [%d] = %v in the simulator, %v in the interpreter", meta, o, i, g, w)
			}
		}
	}
	t.Logf("%v over %v: %d output buffers agree", meta, k.Grid, len(want))
}
