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
	// f32 sums in another order (the simulator's reductions go across
	// lanes and warps, the interpreter's in order): a few ulp of the
	// largest term, and LayerNorm's output cancels (xc·rstd·γ + β)
	scale := 0.0
	for i, w := range want {
		if math.IsNaN(float64(w)) {
			t.Fatalf("the interpreter left output %d unwritten", i)
		}
		scale = max(scale, math.Abs(float64(w)))
	}
	for i, w := range want {
		if g := out[i]; !(math.Abs(float64(g-w)) <= 1e-6*scale+2e-5*math.Abs(float64(w))) {
			t.Fatalf("%s: output[%d] (row %d) = %v in the simulator, %v in the interpreter", k.Meta, i, i/cols, g, w)
		}
	}
	if cols%4 == 0 {
		for _, op := range []string{"ld.global", "st.global"} {
			if !strings.Contains(sim.Last.PTX, op+".v4.f32") && !strings.Contains(sim.Last.PTX, op+".cs.v4.f32") {
				t.Errorf("%s: no 128-bit %s in the PTX", k.Meta, op)
			}
		}
	}
	t.Logf("%s %v: %d rows agree", k.Meta, grid, sub)
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
