package graphpass

import (
	"math"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/ops"
)

// TestFoldConstants: Import folds a scalar computed by +, −, ×, ÷ or a
// negation from scalar constants (SizeOf among them) into a constant whose
// value is bit for bit the one Gorgonia's machine computes: in float32
// graphs the operation rounded once in float32 (1/3, 0.1+0.2, 2²⁴+1 and a
// SizeOf past 2²⁴ differ from float64's), chains folded operands first.
// What is not exactly rounded (exp), reads a tensor or an input, has a
// non-finite value, or is an integer is left to a kernel.
func TestFoldConstants(t *testing.T) {
	must := G.Must
	f32 := func(g *G.ExprGraph, v float32) *G.Node { return G.NewConstant(v, G.In(g)) }
	f64 := func(g *G.ExprGraph, v float64) *G.Node { return G.NewConstant(v, G.In(g)) }
	cases := []struct {
		name  string
		build func(g *G.ExprGraph) *G.Node
		fold  bool
	}{
		{"f32 1/3 rounds once in float32", func(g *G.ExprGraph) *G.Node { return must(G.Div(f32(g, 1), f32(g, 3))) }, true},
		{"f32 0.1+0.2", func(g *G.ExprGraph) *G.Node { return must(G.Add(f32(g, 0.1), f32(g, 0.2))) }, true},
		{"f32 2^24+1 rounds to 2^24", func(g *G.ExprGraph) *G.Node { return must(G.Add(f32(g, 1<<24), f32(g, 1))) }, true},
		{"f32 0.7-0.1", func(g *G.ExprGraph) *G.Node { return must(G.Sub(f32(g, 0.7), f32(g, 0.1))) }, true},
		{"f32 1.1·1.1", func(g *G.ExprGraph) *G.Node { return must(G.Mul(f32(g, 1.1), f32(g, 1.1))) }, true},
		{"f32 a product past float32's precision", func(g *G.ExprGraph) *G.Node { return must(G.Mul(f32(g, 16777215), f32(g, 16777213))) }, true},
		{"f32 negation", func(g *G.ExprGraph) *G.Node { return must(G.Neg(f32(g, 0.3))) }, true},
		{"f32 Mean's divisor SizeOf·SizeOf and its 1/n", func(g *G.ExprGraph) *G.Node {
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(3, 7), G.WithName("x"))
			n := must(G.Mul(must(G.SizeOf(0, x)), must(G.SizeOf(1, x))))
			return must(G.Div(f32(g, 1), n))
		}, true},
		{"f32 a chain −(1/3)/(7·11) folds operands first", func(g *G.ExprGraph) *G.Node {
			return must(G.Div(must(G.Neg(must(G.Div(f32(g, 1), f32(g, 3))))), must(G.Mul(f32(g, 7), f32(g, 11)))))
		}, true},
		{"f32 SizeOf past 2^24 rounded as the kernel's literal", func(g *G.ExprGraph) *G.Node {
			x := G.NewVector(g, tensor.Float32, G.WithShape(1<<24+1), G.WithName("x"))
			return must(G.Div(f32(g, 1), must(G.SizeOf(0, x))))
		}, true},
		{"f64 1/3", func(g *G.ExprGraph) *G.Node { return must(G.Div(f64(g, 1), f64(g, 3))) }, true},
		{"f64 0.1+0.2", func(g *G.ExprGraph) *G.Node { return must(G.Add(f64(g, 0.1), f64(g, 0.2))) }, true},
		{"f64 chain", func(g *G.ExprGraph) *G.Node {
			return must(G.Sub(must(G.Mul(f64(g, 0.1), f64(g, 3))), must(G.Neg(f64(g, 1e-17)))))
		}, true},
		{"exp is not exactly rounded: left to a kernel", func(g *G.ExprGraph) *G.Node { return must(G.Exp(f32(g, 0.5))) }, false},
		{"a scalar of an input: left", func(g *G.ExprGraph) *G.Node {
			s := G.NewScalar(g, tensor.Float32, G.WithName("s"), G.WithValue(float32(2)))
			return must(G.Mul(s, f32(g, 3)))
		}, false},
		{"a sum of a tensor: left", func(g *G.ExprGraph) *G.Node {
			x := G.NewVector(g, tensor.Float32, G.WithShape(5), G.WithName("x"))
			return must(G.Mul(must(G.Sum(x)), f32(g, 3)))
		}, false},
		{"1/0 is not finite: left", func(g *G.ExprGraph) *G.Node { return must(G.Div(f32(g, 1), f32(g, 0))) }, false},
		{"an overflow to ∞: left", func(g *G.ExprGraph) *G.Node { return must(G.Mul(f32(g, 3e38), f32(g, 10))) }, false},
		{"integers: left", func(g *G.ExprGraph) *G.Node { return must(G.Add(G.NewConstant(3, G.In(g)), G.NewConstant(4, G.In(g)))) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := G.NewGraph()
			G.NewScalar(g, tensor.Float64, G.WithName("anchor"), G.WithValue(0.0)) // Gorgonia's machine wants an input
			n := tc.build(g)
			if len(g.Inputs()) > 0 {
				for _, in := range g.Inputs() {
					if in.Value() == nil {
						if err := G.Let(in, tensor.New(tensor.Of(in.Dtype()), tensor.WithShape(in.Shape()...))); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			nd := gr.Lookup(n)
			if nd == nil {
				t.Fatalf("%v is not imported", n)
			}
			if !tc.fold {
				if nd.Info.Kind == ops.Constant {
					t.Fatalf("%v folded to %v: want it left to a kernel", n, nd.Info.Value)
				}
				return
			}
			if nd.Info.Kind != ops.Constant {
				t.Fatalf("%v is %v (%s), want a folded constant", n, nd.Info.Kind, nd.Info.Why)
			}
			m := G.NewTapeMachine(g)
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			switch v := n.Value().Data().(type) {
			case float32:
				if got := float32(nd.Info.Value); math.Float32bits(got) != math.Float32bits(v) || float64(got) != nd.Info.Value {
					t.Errorf("folded %v (%08x), Gorgonia computes %v (%08x)", nd.Info.Value, math.Float32bits(got), v, math.Float32bits(v))
				}
			case float64:
				if math.Float64bits(nd.Info.Value) != math.Float64bits(v) {
					t.Errorf("folded %v, Gorgonia computes %v", nd.Info.Value, v)
				}
			default:
				t.Fatalf("value %T", v)
			}
		})
	}
}

// TestFoldTransposedOperands: a product's operand that is a Transpose of
// its last two axes is read as stored, its flag flipped, the transpose's
// user lists following; other patterns, and other users, are left alone.
func TestFoldTransposedOperands(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 4), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(5, 4), G.WithName("w"))
	q := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 3, 4), G.WithName("q"))
	k := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 3, 4), G.WithName("k"))
	r := G.NewTensor(g, tensor.Float64, 3, G.WithShape(4, 2, 3), G.WithName("r"))
	m := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 4, 5), G.WithName("m"))
	wt := G.Must(G.Transpose(w))
	xw := G.Must(G.Mul(x, wt))                                                      // folds: x·w, B transposed
	qk := G.Must(G.BatchedMatMul(q, G.Must(G.Transpose(k, 0, 2, 1)), false, false)) // folds
	rq := G.Must(G.BatchedMatMul(G.Must(G.Transpose(r, 1, 2, 0)), m, false, false)) // (2, 3, 4)·(2, 4, 5): not the last two swapped
	ew := G.Must(G.Exp(wt))                                                         // wt's other user
	_, _, _ = rq, ew, qk
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	if n := FoldTransposedOperands(gr, func(*Node) bool { return false }, Options{Target: H200}); n != 2 {
		t.Fatalf("%d operands folded, want 2", n)
	}
	nx, nw, nk, nwt := gr.Lookup(xw), gr.Lookup(w), gr.Lookup(k), gr.Lookup(wt)
	if nx.Inputs[1] != nw || !nx.Info.TransB || nx.Info.TransA {
		t.Errorf("x·wᵀ reads %v (TransA %v, TransB %v), want w with B transposed", nx.Inputs[1], nx.Info.TransA, nx.Info.TransB)
	}
	if nq := gr.Lookup(qk); nq.Inputs[1] != nk || !nq.Info.TransB {
		t.Errorf("q ××× kᵀ reads %v (TransB %v), want k with B transposed", nq.Inputs[1], nq.Info.TransB)
	}
	if nr := gr.Lookup(rq); nr.Inputs[0].Info.Kind != ops.Transpose || nr.Info.TransA {
		t.Errorf("a (1, 2, 0) transpose was folded")
	}
	if len(nwt.Users) != 1 || nwt.Users[0] != gr.Lookup(ew) || nwt.FoldedAway() {
		t.Errorf("wᵀ's users %v, folded away %v: want its Exp alone", nwt.Users, nwt.FoldedAway())
	}
	if !slices.Contains(nw.Users, nx) {
		t.Errorf("w's users %v lack x·w", nw.Users)
	}
	if nkt := gr.Lookup(qk).Inputs[1]; nkt != nk {
		t.Fatal("kᵀ not folded")
	}
	for _, n := range gr.Nodes {
		if n.Info.Kind == ops.Transpose && len(n.Inputs) == 1 && n.Inputs[0] == nk && !n.FoldedAway() {
			t.Errorf("kᵀ, read by nothing now, is not FoldedAway")
		}
	}
}

// TestFoldTransposedProducts: a Transpose of a product that nothing else
// reads and that the user did not name becomes the product of the
// operands swapped, (op(A)·op(B))ᵀ = op(B)ᵀ·op(A)ᵀ; a product the user
// reads (named, or userReads) keeps its transpose.
func TestFoldTransposedProducts(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 4), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 5), G.WithName("y"))
	z := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 5), G.WithName("z"))
	tp := G.Must(G.Transpose(G.Must(G.Mul(x, y))))                        // (5, 3) = yᵀ·xᵀ
	kept := G.Must(G.Mul(G.Must(G.Transpose(y)), G.Must(G.Transpose(x)))) // read by the user (userReads)
	tk := G.Must(G.Transpose(kept))                                       // stays a transpose
	named := G.Must(G.Mul(x, z))                                          // the user's name (another product: Gorgonia shares equal nodes)
	G.WithName("xy")(named)                                               // named after it was made
	tn := G.Must(G.Transpose(named))                                      // stays a transpose
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	reads := func(n *Node) bool { return n.G == kept }
	FoldTransposedOperands(gr, reads, Options{Target: H200})
	p := gr.Lookup(tp)
	if p.Info.Kind != ops.MatMul || p.Inputs[0] != gr.Lookup(y) || p.Inputs[1] != gr.Lookup(x) || !p.Info.TransA || !p.Info.TransB {
		t.Errorf("(x·y)ᵀ is %v over %v, %v (TransA %v, TransB %v): want yᵀ·xᵀ", p.Info.Kind, p.Inputs[0], p.Inputs[len(p.Inputs)-1], p.Info.TransA, p.Info.TransB)
	}
	for _, n := range []*G.Node{tk, tn} {
		if gr.Lookup(n).Info.Kind != ops.Transpose {
			t.Errorf("%v folded: its product is read", n)
		}
	}
}
