package fusion_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/fusion"
)

// TestMoveLanes: kernels of Concat, Slice, a broadcast's Repeat and a
// slice's backward whose flat blocks would divide their lanes (rows
// shorter than a block: the machine code does not divide lanes) are
// written over rows and lanes on a CPU whose kernels are machine code
// (graphpass moveLanes: BLOCK_L), alone (unfused: one kernel an op, as a
// lone Concat of a user's graph) and fused; every kernel is machine code,
// none falls back to the executor when run, and the values are Gorgonia's
// bit for bit (moves and one exact op; a loss's sum within 1e-12). So
// is a value one a row that such a group stores beside its root (an
// extra output: its row's index and first column from the block's
// coordinates, not divisions of its lanes), a row kernel's (at its row,
// the program), one of rows of one column (no division at all), and a
// transpose whose root flattens it to one axis (graphpass
// transposeTiles over the transpose's own shape). Row counts and widths are no
// block's multiples (37 rows of 128 in blocks of 8, widths 13, 30, 33).
func TestMoveLanes(t *testing.T) {
	needMachineCode(t, "")
	type graph struct {
		out   *G.Node
		in    []*G.Node
		extra []*G.Node // other values to compare (gradients, values one a row)
		tol   float64   // their tolerance, 0 bit for bit (a sum's order differs)
	}
	for _, c := range []struct {
		name    string
		build   func(g *G.ExprGraph) graph
		noLanes bool // the flat form (no move divides it)
	}{
		{"concat of four heads, float32", func(g *G.ExprGraph) graph {
			var hs []*G.Node
			for _, n := range []string{"a", "b", "c", "d"} {
				hs = append(hs, G.NewMatrix(g, tensor.Float32, G.WithShape(37, 32), G.WithName(n)))
			}
			return graph{out: G.Must(G.Concat(1, hs...)), in: hs}
		}, false},
		{"concat of odd widths, float64", func(g *G.ExprGraph) graph {
			a := G.NewMatrix(g, tensor.Float64, G.WithShape(5, 13), G.WithName("a"))
			b := G.NewMatrix(g, tensor.Float64, G.WithShape(5, 30), G.WithName("b"))
			return graph{out: G.Must(G.Concat(1, a, b)), in: []*G.Node{a, b}}
		}, false},
		{"concat along rows, then a ReLU", func(g *G.ExprGraph) graph {
			a := G.NewMatrix(g, tensor.Float32, G.WithShape(3, 20), G.WithName("a"))
			b := G.NewMatrix(g, tensor.Float32, G.WithShape(4, 20), G.WithName("b"))
			return graph{out: G.Must(G.Rectify(G.Must(G.Concat(0, a, b)))), in: []*G.Node{a, b}}
		}, false},
		{"slice of 33 columns", func(g *G.ExprGraph) graph {
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(29, 64), G.WithName("x"))
			return graph{out: G.Must(G.Slice(x, nil, G.S(7, 40))), in: []*G.Node{x}}
		}, false},
		{"broadcast along the last axis", func(g *G.ExprGraph) graph {
			x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(9, 6, 50), G.WithName("x"))
			y := G.NewMatrix(g, tensor.Float32, G.WithShape(9, 6), G.WithName("y"))
			return graph{out: G.Must(G.BroadcastAdd(x, y, nil, []byte{2})), in: []*G.Node{x, y}}
		}, false},
		{"a slice's backward", func(g *G.ExprGraph) graph {
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(11, 40), G.WithName("x"))
			u := G.NewMatrix(g, tensor.Float64, G.WithShape(11, 17), G.WithName("u"))
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Slice(x, nil, G.S(5, 22))), u))))
			d, err := G.Grad(loss, x)
			if err != nil {
				t.Fatal(err)
			}
			return graph{out: loss, in: []*G.Node{x, u}, extra: d, tol: 1e-12}
		}, false},
		{"a per-row value stored beside the broadcast", func(g *G.ExprGraph) graph {
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(100, 7), G.WithName("x"))
			a := G.NewVector(g, tensor.Float32, G.WithShape(100), G.WithName("a"))
			v := G.Must(G.Neg(a)) // read by the user: the group's extra output, one a row
			G.WithName("v")(v)
			y := G.Must(G.BroadcastSub(x, G.Must(G.Reshape(v, tensor.Shape{100, 1})), nil, []byte{1}))
			return graph{out: y, in: []*G.Node{x, a}, extra: []*G.Node{v}}
		}, false},
		{"a row kernel's mean stored beside its rows, float64", func(g *G.ExprGraph) graph {
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(37, 5), G.WithName("x"))
			mean := G.Must(G.Mean(x, 1)) // read by the user: one a row, beside the row kernel's root
			G.WithName("mean")(mean)
			y := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Reshape(mean, tensor.Shape{37, 1})), nil, []byte{1}))))
			return graph{out: y, in: []*G.Node{x}, extra: []*G.Node{mean}, tol: 1e-12}
		}, true},
		{"a transpose flattened to one axis", func(g *G.ExprGraph) graph {
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(33, 127), G.WithName("x"))
			y := G.Must(G.Reshape(G.Must(G.Transpose(G.Must(G.Neg(x)), 1, 0)), tensor.Shape{33 * 127}))
			return graph{out: y, in: []*G.Node{x}}
		}, false},
		{"a per-row value of rows of one", func(g *G.ExprGraph) graph {
			x := G.NewVector(g, tensor.Float32, G.WithShape(3), G.WithName("x"))
			v := G.Must(G.Neg(x))
			G.WithName("v")(v)
			return graph{out: G.Must(G.Reshape(v, tensor.Shape{3, 1})), in: []*G.Node{x}, extra: []*G.Node{v}}
		}, true},
	} {
		forModes(t, c.name, func(t *testing.T, fused bool) {
			gRef, g := G.NewGraph(), G.NewGraph()
			ref, ours := c.build(gRef), c.build(g)
			letTwins(t, rand.New(rand.NewPCG(4, 4)), ref.in, ours.in, nil)
			vm := nativeTwinRun(t, gRef, g, fused)
			lanes := false
			for _, n := range vm.Compiled().Graph.AllNodes() {
				if f, ok := n.Op().(*fusion.FusedOp); ok && !f.IsView() {
					lanes = lanes || strings.Contains(f.Kernel().Meta.String(), "BLOCK_L")
				}
			}
			if !lanes && !c.noLanes {
				t.Errorf("no kernel over rows and lanes (BLOCK_L):\n%v", vm.Report())
			}
			sameAsGorgonia(t, "out", ours.out, ref.out, ours.tol)
			for i := range ref.extra {
				sameAsGorgonia(t, "extra", ours.extra[i], ref.extra[i], ours.tol)
			}
		})
	}
}

// forModes runs f as the subtests name/unfused and name/fused (fusion
// off and on).
func forModes(t *testing.T, name string, f func(t *testing.T, fused bool)) {
	t.Helper()
	for _, fused := range []bool{false, true} {
		mode := "/unfused"
		if fused {
			mode = "/fused"
		}
		t.Run(name+mode, func(t *testing.T) { f(t, fused) })
	}
}

// nativeTwinRun makes tilefuse's CPU machine over g (fusion on or off),
// fails t unless every kernel is machine code, runs Gorgonia's machine
// over gRef and it once each (runTwins), and fails t if a launch of it
// fell back to the executor. The machine closes when t ends.
func nativeTwinRun(t *testing.T, gRef, g *G.ExprGraph, fused bool) *fusion.Machine {
	t.Helper()
	vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithFusion(fused))
	t.Cleanup(func() { vm.Close() })
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	allNative(t, vm)
	before := cpu.Fallbacks()
	runTwins(t, gRef, vm)
	if n := cpu.Fallbacks() - before; n != 0 {
		t.Errorf("%d launches fell back to the executor", n)
	}
	return vm
}
