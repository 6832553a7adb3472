package ptxsim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
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

// TestColumnKernelsOfTheH200 lowers the column reductions the fusion pass
// writes for the H200 (graphpass.H200: the column form, COLUMNS = 1, split
// over row chunks where the column blocks are few) at the bench's column
// shapes (bench.PeerColumns) and at tails (rows and columns off every
// block), for a bias's gradient (Σ[0]), a LayerNorm's bias and gain
// gradients together (Σ[0] dy and Σ[0] dy⊙x̂, Reshape'd to vectors: one
// kernel with two outputs that loads dy once) and column maxima, runs them
// in the simulator (sm_90, racecheck and initcheck on) and compares every
// output with the reference interpreter's on the same programs (outputs
// poisoned with NaN first, zeros where the kernel adds into them; within
// 1e-6 of Σ|terms| of the output: f32 sums in another order). At the peer
// shapes it runs the first two column blocks and row chunks only: a
// program reads its own rows and columns alone, and the kernel is the one
// the full shape gets. Where the width keeps rows 16 bytes aligned, the
// loads are 128 bits wide (ld.global.v4.f32) and no load is scalar.
func TestColumnKernelsOfTheH200(t *testing.T) {
	type shape struct {
		rows, cols int
		sub        bool // the first 2×2 programs only
	}
	var shapes []shape
	for _, rc := range bench.PeerColumns {
		shapes = append(shapes, shape{rc[0], rc[1], true})
	}
	shapes = append(shapes, shape{1000, 777, false}, shape{4095, 33, false}, shape{3, 4097, false}, shape{517, 256, false})
	for _, sh := range shapes {
		for _, form := range []string{"bias", "bias and gain", "max"} {
			t.Run(fmt.Sprintf("%s %dx%d", form, sh.rows, sh.cols), func(t *testing.T) {
				runColumnKernel(t, form, sh.rows, sh.cols, sh.sub)
			})
		}
	}
}

var scalarLoad = regexp.MustCompile(`ld\.global(\.[a-z]+)*\.f32`)

// TestColumnTailInSimulator: the CPU's column form with a tail (TAIL: one
// block of 1024 columns and a tile of the row's last 96, three times a
// power of two), lowered to PTX as FuzzFusion lowers every kernel, runs in
// the simulator as in the interpreter: its [1, 96] tile's spare lanes and
// warps hold copies along the 1 (codegen's newBlocked), where a tile of
// 128 along the 96 did not lower.
func TestColumnTailInSimulator(t *testing.T) {
	cpu := graphpass.CPU(16)
	cpu.Native = true // the machine-code backend's forms
	k := runColumnKernelOn(t, cpu, "bias", 7, 1104, false)
	if k.Meta["TAIL"] != 96 {
		t.Fatalf("not the column tail of 96: %v", k.Meta)
	}
}

func runColumnKernel(t *testing.T, form string, rows, cols int, sub bool) {
	runColumnKernelOn(t, graphpass.H200, form, rows, cols, sub)
}

func runColumnKernelOn(t *testing.T, target graphpass.Target, form string, rows, cols int, sub bool) *tile.Kernel {
	g := G.NewGraph()
	dy := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("dy"))
	vec := func(n *G.Node) *G.Node { return G.Must(G.Reshape(n, tensor.Shape{cols})) }
	switch form {
	case "bias":
		vec(G.Must(G.Sum(dy, 0)))
	case "bias and gain":
		xh := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("xhat"))
		vec(G.Must(G.Sum(dy, 0)))
		vec(G.Must(G.Sum(G.Must(G.HadamardProd(dy, xh)), 0)))
	case "max":
		G.Must(G.Max(dy, 0))
	}
	c, err := fusion.Compile(g, fusion.WithTarget(target))
	if err != nil {
		t.Fatal(err)
	}
	var f *fusion.FusedOp
	ins := 0
	for _, n := range c.Graph.AllNodes() {
		if op, ok := n.Op().(*fusion.FusedOp); ok && !op.IsView() {
			if f != nil {
				t.Fatalf("two kernels:\n%v", c.Report)
			}
			f = op
			ch := c.Graph.From(n.ID())
			ins = ch.Len()
		}
	}
	if f == nil {
		t.Fatalf("no kernel:\n%v", c.Report)
	}
	k, grid := f.Kernel(), f.Grid()
	if k.Meta["COLUMNS"] != 1 {
		t.Fatalf("not the column form: %v", k.Meta)
	}
	if sub {
		grid[0], grid[1] = min(grid[0], 2), min(grid[1], 2)
	}
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	var args, ref []any
	var scale []float64 = make([]float64, cols)
	for range ins {
		d := make([]float32, rows*cols)
		for i := range d {
			d[i] = float32(rng.Float64()*8 - 4)
			scale[i%cols] += 4 * math.Abs(float64(d[i]))
		}
		args, ref = append(args, d), append(ref, append([]float32(nil), d...))
	}
	var outs [][]float32
	for range len(k.Params) - ins {
		out, want := make([]float32, cols), make([]float32, cols)
		for i := range out {
			if !f.Accumulates() {
				out[i], want[i] = float32(math.NaN()), float32(math.NaN())
			}
		}
		args, ref, outs = append(args, out), append(ref, want), append(outs, out)
	}
	if err := interp.Interpret(k, grid, ref...); err != nil {
		t.Fatal(err)
	}
	sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
	if err := sim.Launch(k, grid, args...); err != nil {
		t.Fatalf("%s: %v", k.Meta, err)
	}
	done := min(cols, grid[0]*k.Meta["BLOCK_O"]) // the columns the programs run cover
	if k.Meta["TAIL"] > 0 && !sub {
		done = cols // and the tail's tile the row's last
	}
	for o, out := range outs {
		want := ref[ins+o].([]float32)
		for j := range done {
			w, g := float64(want[j]), float64(out[j])
			if math.IsNaN(w) {
				t.Fatalf("output %d: the interpreter left column %d unwritten", o, j)
			}
			if !(math.Abs(g-w) <= 1e-6*scale[j]) {
				t.Fatalf("%s grid %v: output %d column %d = %v in the simulator, %v in the interpreter", k.Meta, grid, o, j, g, w)
			}
		}
	}
	if cols%4 == 0 {
		if !regexp.MustCompile(`ld\.global(\.[a-z]+)*\.v4\.f32`).MatchString(sim.Last.PTX) {
			t.Errorf("%s: no 128-bit load in the PTX", k.Meta)
		}
		if m := scalarLoad.FindString(sim.Last.PTX); m != "" {
			t.Errorf("%s: a scalar load (%s) in the PTX", k.Meta, m)
		}
	}
	t.Logf("%s %v: %d columns agree", k.Meta, grid, done)
	return k
}
