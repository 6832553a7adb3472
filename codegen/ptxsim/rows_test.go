package ptxsim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestRowKernelsOfTheH200 lowers the row kernels the fusion pass writes
// for the H200 (graphpass.H200) at the bench's peer shapes
// (bench.PeerRows) and at shapes that take each other form of row kernel
// (several rows a program with the last program's rows masked, a row
// walked in blocks), for softmax and LayerNorm written op by op and
// Gorgonia's SoftMax, runs them in the simulator (sm_90, racecheck and
// initcheck on) and compares every output with the reference
// interpreter's on the same programs (poisoned with NaN first; within a
// millionth of the largest output plus 2e-5 relative). At the
// peer shapes it runs the first rows only: a program reads and writes its
// own rows alone, and the kernel is the one the full shape gets. Where a
// row's width keeps rows 16 bytes aligned, the row's loads and stores are
// 128 bits wide (ld.global[.cs].v4.f32).
func TestRowKernelsOfTheH200(t *testing.T) {
	type shape struct{ rows, cols, sub int } // sub: rows run (0: all)
	var shapes []shape
	for _, rc := range bench.PeerRows {
		shapes = append(shapes, shape{rc[0], rc[1], 2})
	}
	shapes = append(shapes, shape{601, 100, 0}, shape{5, 40000, 0}, shape{3, 20000, 0})
	for _, sh := range shapes {
		for _, form := range []string{"softmax", "Gorgonia SoftMax", "layernorm"} {
			name := fmt.Sprintf("%s %dx%d", form, sh.rows, sh.cols)
			t.Run(name, func(t *testing.T) {
				if testing.Short() && sh.cols*max(sh.sub, 1) > 1<<16 {
					t.Skip("-short: rows of more than 64K elements")
				}
				runRowKernel(t, form, sh.rows, sh.cols, sh.sub)
			})
		}
	}
}

func runRowKernel(t *testing.T, form string, rows, cols, sub int) {
	g := buildRowForm(form, rows, cols)
	c, err := fusion.Compile(g, fusion.WithTarget(graphpass.H200))
	if err != nil {
		t.Fatal(err)
	}
	var f *fusion.FusedOp
	var ins G.Nodes
	for _, n := range c.Graph.AllNodes() {
		if op, ok := n.Op().(*fusion.FusedOp); ok {
			if f != nil {
				t.Fatalf("two kernels:\n%v", c.Report)
			}
			f = op
			ch := c.Graph.From(n.ID())
			for ch.Next() {
				ins = append(ins, ch.Node().(*G.Node))
			}
		}
	}
	if f == nil {
		t.Fatalf("no kernel:\n%v", c.Report)
	}
	k, grid := f.Kernel(), f.Grid()
	if sub > 0 { // the first programs, on the rows they take
		bm := max(1, k.Meta["BLOCK_M"])
		sub = max(sub, bm) / bm * bm
		grid[0] = sub / bm
	} else {
		sub = rows
	}
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	var args, ref []any
	for _, in := range ins {
		n := cols
		if len(in.Shape()) == 2 {
			n = sub * cols
		}
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(rng.Float64()*8 - 4)
		}
		args, ref = append(args, d), append(ref, append([]float32(nil), d...))
	}
	out, want := make([]float32, sub*cols), make([]float32, sub*cols)
	for i := range out {
		out[i], want[i] = float32(math.NaN()), float32(math.NaN())
	}
	args, ref = append(args, out), append(ref, want)
	if err := interp.Interpret(k, grid, ref...); err != nil {
		t.Fatal(err)
	}
	sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
	if err := sim.Launch(k, grid, args...); err != nil {
		t.Fatalf("%s: %v", k.Meta, err)
	}
	rowsAgree(t, k.Meta.String(), out, want, cols)
	if cols%4 == 0 {
		wideAccesses(t, k.Meta.String(), sim.Last.PTX)
	}
	t.Logf("%s %v: %d rows agree", k.Meta, grid, sub)
}

// rowsAgree fails t where the interpreter left an output unwritten (want
// poisoned with NaN) or the simulator's out differs from it by more than
// a millionth of the largest output plus 2e-5 relative: f32 sums in
// another order (the simulator's reductions go across lanes and warps,
// the interpreter's in order) are a few ulp of the largest term apart, and
// LayerNorm's output cancels (xc·rstd·γ + β). what names the kernel.
func rowsAgree(t *testing.T, what string, out, want []float32, cols int) {
	t.Helper()
	scale := 0.0
	for i, w := range want {
		if math.IsNaN(float64(w)) {
			t.Fatalf("the interpreter left output %d unwritten", i)
		}
		scale = max(scale, math.Abs(float64(w)))
	}
	for i, w := range want {
		if g := out[i]; !(math.Abs(float64(g-w)) <= 1e-6*scale+2e-5*math.Abs(float64(w))) {
			t.Fatalf("%s: output[%d] (row %d) = %v in the simulator, %v in the interpreter", what, i, i/cols, g, w)
		}
	}
}

// simulateRows runs row kernel k (tuned to meta) in the simulator on args
// (the H200: racecheck, initcheck, meta's warps) and in the interpreter on
// ref, a copy of them, each into an output of n elements poisoned with NaN;
// it returns both outputs and the simulator (its Last PTX).
func simulateRows(t *testing.T, k *graphpass.Kernel, meta tile.Meta, args, ref []any, n int) (out, want []float32, sim *ptxsim.Launcher) {
	t.Helper()
	out, want = make([]float32, n), make([]float32, n)
	for i := range out {
		out[i], want[i] = float32(math.NaN()), float32(math.NaN())
	}
	if err := interp.Interpret(k.Tile, k.Grid, append(ref, want)...); err != nil {
		t.Fatal(err)
	}
	sim = &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: meta["num_warps"]}
	if err := sim.Launch(k.Tile, k.Grid, append(args, out)...); err != nil {
		t.Fatalf("%v: %v", meta, err)
	}
	return out, want, sim
}

// wideAccesses fails t where ptx has no 128-bit global load or store.
func wideAccesses(t *testing.T, what, ptx string) {
	t.Helper()
	for _, op := range []string{"ld.global", "st.global"} {
		if !strings.Contains(ptx, op+".v4.f32") && !strings.Contains(ptx, op+".cs.v4.f32") {
			t.Errorf("%s: no 128-bit %s in the PTX", what, op)
		}
	}
}

// TestGeneratedKernelsOfTheH200 is TestGeneratedKernels with the kernels
// written for the H200 (graphpass.H200: rows a program, warps per width,
// split sums, the streaming hint) instead of the CPU's: the small
// workloads' kernels of every kind in the simulator, from the inputs of a
// fused CPU run of the same kernels, against that run's outputs (ieee).
func TestGeneratedKernelsOfTheH200(t *testing.T) {
	tol := tiletest.Tol{Abs: 1e-5, Rel: 1e-4}
	total := 0
	for _, wl := range bench.Workloads {
		t.Run(wl.Name, func(t *testing.T) {
			switch {
			case wl.Name == "mlp_train" || wl.Name == "encoder_train":
				t.Skip("the kernels of mlp_step and encoder_fwd_bwd, with the solver's (TestSolverOnPTXSim)")
			case testing.Short() && (wl.Name == "encoder_fwd_bwd" || wl.Name == "attention_fwd_bwd"):
				t.Skip("-short: the backward passes' kernels take a while in the simulator")
			}
			n := runGenerated(t, wl, tile.PrecIEEE, tol, fusion.WithTarget(graphpass.H200))
			if n == 0 {
				t.Fatal("no generated kernel ran")
			}
			total += n
		})
	}
	t.Logf("%d kernels written for the H200 agree with the fused CPU run", total)
}

// TestLayerNormCandidatesInSimulator: every candidate the autotuner may
// try for LayerNorm with γ and β on the H200 (graphpass.Candidates: held in
// one block with γ and β loaded whole or late, 1, 2 or 4 groups ahead, at
// several warps; rows a program; walked in blocks) runs in the simulator
// under racecheck and initcheck and agrees with the interpreter running
// the same kernel (outputs poisoned with NaN; within a millionth of the
// largest output plus 2e-5 relative, as runRowKernel): widths with a
// masked tail (20000 in a block of 32768, 3000 in 4096, 1000 in 1024,
// 781: no 16-byte groups) and without (8192), rows no multiple of the rows
// a program.
func TestLayerNormCandidatesInSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: some forty row kernels in the simulator")
	}
	for _, sh := range [][2]int{{3, 20000}, {5, 3000}, {4, 8192}, {7, 1000}, {3, 781}} {
		rows, cols := sh[0], sh[1]
		gr, err := graphpass.Import(buildRowForm("layernorm", rows, cols))
		if err != nil {
			t.Fatal(err)
		}
		groups := graphpass.Partition(gr, graphpass.Options{Target: graphpass.H200})
		if len(groups) != 1 {
			t.Fatalf("%dx%d: %d groups, want 1", rows, cols, len(groups))
		}
		grp := groups[0]
		rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
		vals := map[string][]float32{}
		for _, in := range grp.Inputs {
			d := make([]float32, tensorSize(in.Info.Shape))
			for i := range d {
				d[i] = float32(rng.Float64()*8 - 4)
			}
			vals[in.G.Name()] = d
		}
		for _, meta := range graphpass.Candidates(grp, graphpass.H200, tile.PrecIEEE) {
			t.Run(fmt.Sprintf("%dx%d %v", rows, cols, meta), func(t *testing.T) {
				k, err := graphpass.Emit(grp, graphpass.TuneTo(graphpass.H200, meta), tile.PrecIEEE)
				if err != nil {
					t.Fatal(err)
				}
				var args, ref []any
				for _, in := range grp.Inputs {
					args = append(args, append([]float32(nil), vals[in.G.Name()]...))
					ref = append(ref, append([]float32(nil), vals[in.G.Name()]...))
				}
				out, want, _ := simulateRows(t, k, meta, args, ref, rows*cols)
				rowsAgree(t, meta.String(), out, want, cols)
			})
		}
	}
}

func tensorSize(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}
