package graphpass

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/ops"
)

// kinds summarises a partition: each group as "kind:op,op,…", then
// " +op" for each extra output and " ~op" for each node of another group
// it computes again (rematerialise; not attention's own), sorted.
func kinds(groups []*Group) []string {
	var out []string
	for _, g := range groups {
		var ops []string
		for _, m := range g.Members {
			ops = append(ops, strings.Fields(m.Info.Name)[0])
		}
		s := g.Kind.String() + ":" + strings.Join(ops, ",")
		for _, x := range g.Extra {
			s += " +" + strings.Fields(x.Info.Name)[0]
		}
		for _, x := range g.Recompute {
			if groupKinds[g.Kind].remat {
				s += " ~" + strings.Fields(x.Info.Name)[0]
			}
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// readable checks that every value a group's kernel reads is written by
// some kernel or outside them: a group's root or extra output, an internal
// value, or a node in no group.
func readable(groups []*Group) error {
	for _, g := range groups {
		for _, in := range g.Inputs {
			if in.Recomputed() {
				return fmt.Errorf("%v reads %v, which no kernel writes (its group dissolved)", g, in)
			}
			if in.Group == nil || in.Internal() || in == in.Group.Root || slices.Contains(in.Group.Extra, in) {
				continue
			}
			return fmt.Errorf("%v reads %v, which %v computes but does not write", g, in, in.Group)
		}
	}
	return nil
}

// nativeCPU is a CPU whose kernels are machine code: window ops are
// kernels there (KernelOn).
var nativeCPU = Target{Cores: 2, Native: true}

func TestPartitionDecisions(t *testing.T) {
	must := G.Must
	cases := []struct {
		name  string
		build func(g *G.ExprGraph, x, y *G.Node) []*G.Node // returns nodes to write out
		opt   Options
		want  []string
	}{
		{"a chain is one kernel", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			must(G.Tanh(must(G.Add(must(G.Exp(x)), y))))
			return nil
		}, Options{}, []string{"elementwise:exp,+,tanh"}},
		{"a value used twice inside one kernel stays inside", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			e := must(G.Exp(x))
			must(G.HadamardProd(e, must(G.Add(e, y))))
			return nil
		}, Options{}, []string{"elementwise:exp,+,⊙"}},
		{"a value used by two kernels is an extra output of one", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// computed again by the sum, it would read x and y for e
			e := must(G.HadamardProd(x, y))
			must(G.Sum(e, 0))
			must(G.Tanh(e))
			return nil
		}, Options{}, []string{"elementwise:⊙,tanh +⊙", "reduction:Σ[0]"}},
		{"a cheap value is computed again by its reader where that moves fewer bytes", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// the sum reads x instead of exp(x), which is not written
			e := must(G.Exp(x))
			must(G.Sum(e, 0))
			must(G.Tanh(e))
			return nil
		}, Options{}, []string{"elementwise:exp,tanh", "reduction:Σ[0] ~exp"}},
		{"but not a value the user reads", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			e := must(G.Exp(x))
			must(G.Sum(e, 0))
			must(G.Tanh(e))
			return []*G.Node{e}
		}, Options{}, []string{"elementwise:exp,tanh +exp", "reduction:Σ[0]"}},
		{"nor a product's operand", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			e := must(G.Exp(x))
			must(G.Tanh(e))
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 6), G.WithName("w"))
			must(G.Mul(e, w))
			return nil
		}, Options{MatMul: true}, []string{"elementwise:exp,tanh +exp", "matmul:A"}},
		{"nor a chain longer than maxRecompute", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			e := x
			for range maxRecompute + 1 {
				e = must(G.Exp(e))
			}
			must(G.Sum(e, 0))
			must(G.Tanh(e))
			return nil
		}, Options{}, []string{"elementwise:exp,exp,exp,exp,exp,exp,exp,exp,exp,tanh +exp", "reduction:Σ[0]"}},
		{"values left one at a time where all together cannot be", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// q's chain is too long to compute again; tanh(e) and 1 + e,
			// both read by one sum, are left to it one after the other,
			// and it computes e = exp(x) once
			e := must(G.Exp(x))
			th, a := must(G.Tanh(e)), must(G.Add(e, G.NewConstant(1.0)))
			q := x
			for range maxRecompute + 1 {
				q = must(G.Sin(q))
			}
			must(G.HadamardProd(must(G.HadamardProd(th, a)), q))
			must(G.Sum(must(G.Sub(th, a)), 0))
			must(G.Max(q, 0))
			return nil
		}, Options{}, []string{"elementwise:exp,tanh,+,sin,sin,sin,sin,sin,sin,sin,sin,sin,⊙,⊙ +sin", "reduction:-,Σ[0] ~exp ~tanh ~+", "reduction:MaxAlong[0]"}},
		{"a product the values are computed from is written in their place", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// tanh(x·w) and 1 + tanh(x·w) read by two sums: the kernel
			// writes x·w once, each sum computes its value from it
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 6), G.WithName("w"))
			th := must(G.Tanh(must(G.Mul(x, w))))
			a := must(G.Add(th, G.NewConstant(1.0)))
			must(G.HadamardProd(th, a))
			must(G.Sum(th, 0))
			must(G.Sum(a, 1))
			return nil
		}, Options{MatMul: true}, []string{"matmul:A,tanh,+,⊙ +A", "reduction:Σ[0] ~tanh", "reduction:Σ[1] ~tanh ~+"}},
		{"a value another group left to P is computed again by P's readers too", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// groups of 4, made from the last node back: P = s, +, 1/√,
			// exp (s = x², its chain ending last) leaves s to A = s², +,
			// 1/√, which computes it from x; then A leaves q = s² + ½ to
			// the sum, which must compute s from x as well: no kernel
			// writes s (the sum read it from nowhere: FuzzFusion,
			// 2026-12-03)
			half := G.NewConstant(0.5)
			s := must(G.Square(x))
			a := must(G.Add(s, half)) // s's first user: s goes to P
			q := must(G.Add(must(G.Square(s)), half))
			must(G.InverseSqrt(q))
			must(G.Sum(q, 0))
			must(G.Exp(must(G.InverseSqrt(a))))
			return nil
		}, Options{MaxGroup: 4}, []string{"elementwise:square,+,invSqrt ~square", "elementwise:square,+,invSqrt,exp", "reduction:Σ[0] ~square ~square ~+"}},
		{"a node written out is an extra output", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			e := must(G.Exp(x))
			must(G.Tanh(e))
			return []*G.Node{e}
		}, Options{}, []string{"elementwise:exp,tanh +exp"}},
		{"an extra output that would make a kernel wait for itself is not one", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// exp feeds a column sum, which the kernel using exp reads back
			e := must(G.Exp(x))
			must(G.BroadcastSub(e, must(G.Sum(e, 0)), nil, []byte{0}))
			return nil
		}, Options{}, []string{"elementwise:Reshape(1,,Repeat0,-", "elementwise:exp", "reduction:Σ[0]"}},
		{"a broadcast's SizeOf of a value is no path back to it", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// the bias added to e is repeated SizeOf(0, e) times: that
			// reads e's shape, not its value, so e is an extra output of
			// the kernel that adds the bias (as LayerNorm's x̂ is)
			e := must(G.HadamardProd(x, y))
			must(G.Sum(e, 0))
			b := G.NewVector(g, tensor.Float64, G.WithShape(6), G.WithName("b"))
			must(G.BroadcastAdd(e, b, nil, []byte{0}))
			return nil
		}, Options{}, []string{"elementwise:⊙,Reshape(1,,Repeat0,+ +⊙", "reduction:Σ[0]"}},
		{"a reduced value is not an extra output of a row kernel", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			m := must(G.Max(x, 1))
			must(G.BroadcastSub(x, m, nil, []byte{1}))
			return []*G.Node{m}
		}, Options{}, []string{"elementwise:Reshape(4,,Repeat1,-", "reduction:MaxAlong[1]"}},
		{"a comparison kept as 0/1 in the values' dtype is an extra output", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			c := must(G.Gte(x, y, true))
			must(G.Tanh(c))
			return []*G.Node{c}
		}, Options{}, []string{"elementwise:>=,tanh +>="}},
		{"a reduction takes its producers as prologue", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			must(G.Sum(must(G.Square(must(G.Sub(x, y)))), 0))
			return nil
		}, Options{}, []string{"reduction:-,square,Σ[0]"}},
		{"a reshape of a column sum is the reduction's root", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// Gorgonia's gradient of a broadcast bias: Reshape(Sum(dy, 0))
			must(G.Reshape(must(G.Sum(must(G.HadamardProd(x, y)), 0)), tensor.Shape{1, 6}))
			return nil
		}, Options{}, []string{"reduction:⊙,Σ[0],Reshape(1,"}},
		{"a column sum the user reads is not", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			s := must(G.Sum(x, 0))
			must(G.Reshape(s, tensor.Shape{1, 6}))
			return []*G.Node{s}
		}, Options{}, []string{"elementwise:Reshape(1,", "reduction:Σ[0]"}},
		{"a reshape of a row sum too", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			must(G.Reshape(must(G.Sum(x, 1)), tensor.Shape{2, 2}))
			return nil
		}, Options{}, []string{"reduction:Σ[1],Reshape(2,"}},
		{"sibling column sums are one kernel", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// a LayerNorm's Σ dy and Σ dy⊙x̂ over the rows
			must(G.Sum(x, 0))
			must(G.Sum(must(G.HadamardProd(x, y)), 0))
			return nil
		}, Options{}, []string{"reduction:Σ[0],⊙,Σ[0] +Σ[0]"}},
		{"a sum of its sibling's value is not its sibling", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			must(G.Sum(must(G.BroadcastSub(x, must(G.Sum(x, 0)), nil, []byte{0})), 0))
			return nil
		}, Options{}, []string{"reduction:Reshape(1,,Repeat0,-,Σ[0]", "reduction:Σ[0]"}},
		{"sums along other axes are not siblings", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			must(G.Sum(x, 0))
			must(G.Sum(y, 1))
			return nil
		}, Options{}, []string{"reduction:Σ[0]", "reduction:Σ[1]"}},
		{"a value per row that others read is an extra output of the row kernel", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// as a LayerNorm's 1/σ, which its backward reads
			e := must(G.Exp(must(G.Sum(x, 1))))
			must(G.BroadcastHadamardProd(x, e, nil, []byte{1}))
			return []*G.Node{e}
		}, Options{}, []string{"row:Σ[1],exp,Reshape(4,,Repeat1,⊙ +exp"}},
		{"but not of a product's kernel", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			e := must(G.Exp(must(G.Sum(x, 1))))
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 6), G.WithName("w"))
			must(G.Mul(must(G.BroadcastHadamardProd(x, e, nil, []byte{1})), w))
			return []*G.Node{e}
		}, Options{MatMul: true}, []string{"matmul:A", "row:Σ[1],exp,Reshape(4,,Repeat1,⊙ +exp"}},
		{"a row reduction broadcast back is a row kernel", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			must(G.BroadcastSub(x, must(G.Max(x, 1)), nil, []byte{1}))
			return nil
		}, Options{}, []string{"row:MaxAlong[1],Reshape(4,,Repeat1,-"}},
		{"a column reduction broadcast back is not", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			must(G.BroadcastSub(x, must(G.Sum(x, 0)), nil, []byte{0}))
			return nil
		}, Options{}, []string{"elementwise:Reshape(1,,Repeat0,-", "reduction:Σ[0]"}},
		{"ReLU after a transpose, read by a max pool and its backward, is computed by both", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// the group ReLU(Aᵀ(z)) would write is dissolved: the pool
			// and its backward read z through the transpose
			z := G.NewTensor(g, tensor.Float64, 4, G.WithShape(2, 6, 8, 3), G.WithName("z"))
			p := must(G.MaxPool2D(must(G.Rectify(must(G.Transpose(z, 0, 3, 1, 2)))), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			u := G.NewTensor(g, tensor.Float64, 4, G.WithShape(p.Shape()...), G.WithName("u"))
			if _, err := G.Grad(must(G.Sum(must(G.HadamardProd(p, u)))), z); err != nil {
				panic(err)
			}
			return nil
		}, Options{Target: nativeCPU}, []string{"elementwise:MaxPool{2, ~Aᵀ{0, ~>= ~⊙", "elementwise:Reshape(1,,Repeat0,Repeat1,Repeat2,Repeat3,⊙",
			"elementwise:⊙ ~Aᵀ{0,", "elementwise:⊙,Aᵀ{0, ~Aᵀ{0, ~>=", "elementwise:⊙,MaxPoolDiff{2, ~Aᵀ{0, ~>= ~⊙ ~Reshape(1, ~Repeat0 ~Repeat1 ~Repeat2 ~Repeat3", "reduction:⊙,Σ[0"}},
		{"a max pool is not computed again by the im2col that reads it", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// fewer bytes (the image read once, not the pool written and
			// read), but each element of the im2col's 3×3 windows would
			// compute a 2×2 window of the pool's
			z := G.NewTensor(g, tensor.Float64, 4, G.WithShape(2, 3, 8, 8), G.WithName("z"))
			w := G.NewTensor(g, tensor.Float64, 4, G.WithShape(4, 3, 3, 3), G.WithName("w"))
			p := must(G.MaxPool2D(z, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			must(G.Conv2d(p, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
			return nil
		}, Options{Target: nativeCPU}, []string{"elementwise:MaxPool{2,", "elementwise:Reshape(2,,Aᵀ{0,", "elementwise:Reshape(4,", "elementwise:im2col<(3,3),,Reshape(32,"}},
		{"an exact value a comparison reads is computed again", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// the rows' max's gradient compares ReLU(x) with the max: both
			// computed again, they are the values the ReLU group wrote
			r := must(G.Rectify(x))
			if _, err := G.Grad(must(G.Sum(must(G.Max(r, 1)))), x); err != nil {
				panic(err)
			}
			return nil
		}, Options{}, []string{"elementwise:Reshape(1),Repeat0,Reshape(4,,Repeat1,==,Reshape(4,,Repeat1,⊙,⊙ ~>= ~⊙",
			"elementwise:⊙ ~>= ~⊙ ~Reshape(1) ~Repeat0 ~Reshape(4, ~Repeat1 ~== ~Reshape(4, ~Repeat1 ~⊙", "reduction:MaxAlong[1] ~>= ~⊙", "reduction:Σ[0]"}},
		{"an inexact one is read", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			// tanh computed again could come out an ulp from the value
			// the max was taken of
			r := must(G.Tanh(x))
			if _, err := G.Grad(must(G.Sum(must(G.Max(r, 1)))), x); err != nil {
				panic(err)
			}
			return nil
		}, Options{}, []string{"elementwise:Reshape(1),Repeat0,Reshape(4,,Repeat1,==,Reshape(4,,Repeat1,⊙,⊙,-,⊙", "elementwise:tanh", "reduction:MaxAlong[1]", "reduction:Σ[0]"}},
		{"fusion off: one kernel per op", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			must(G.Tanh(must(G.Add(must(G.Exp(x)), y))))
			return nil
		}, Options{Off: true}, []string{"elementwise:+", "elementwise:exp", "elementwise:tanh"}},
		{"group size is bounded", func(g *G.ExprGraph, x, y *G.Node) []*G.Node {
			must(G.Tanh(must(G.Add(must(G.Exp(x)), y))))
			return nil
		}, Options{MaxGroup: 2}, []string{"elementwise:+,tanh", "elementwise:exp"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 6), G.WithName("x"))
			y := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 6), G.WithName("y"))
			opt := c.opt
			out := c.build(g, x, y)
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			opt.WriteOut = map[*G.Node]bool{}
			for _, n := range out {
				opt.WriteOut[n] = true
			}
			groups := Partition(gr, opt)
			if err := readable(groups); err != nil {
				t.Fatal(err)
			}
			got := kinds(groups)
			if strings.Join(got, " | ") != strings.Join(c.want, " | ") {
				t.Fatalf("groups %q, want %q", got, c.want)
			}
		})
	}
}

// convGrad is the graph of Σ conv(x, w)², a 3×3 convolution padded by 1,
// and its gradient with respect to w (and to x, where withX), imported.
func convGrad(t *testing.T, xs, ws []int, withX bool) *Graph {
	t.Helper()
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(xs...), G.WithName("x"))
	w := G.NewTensor(g, tensor.Float32, 4, G.WithShape(ws...), G.WithName("w"))
	cv := G.Must(G.Conv2d(x, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	wrt := []*G.Node{w}
	if withX {
		wrt = []*G.Node{x, w}
	}
	if _, err := G.Grad(G.Must(G.Sum(G.Must(G.Square(cv)))), wrt...); err != nil {
		t.Fatal(err)
	}
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	return gr
}

// partitionKeeping partitions gr for target with products, the caller
// reading keep (if not nil), and checks that every value the caller reads
// is written out.
func partitionKeeping(t *testing.T, gr *Graph, target Target, keep *Node) []*Group {
	t.Helper()
	out := map[*G.Node]bool{}
	if keep != nil {
		out[keep.G] = true
	}
	groups := Partition(gr, Options{Target: target, MatMul: true, WriteOut: out})
	if err := readable(groups); err != nil {
		t.Fatal(err)
	}
	return groups
}

// TestColumnMajor: on a CPU whose kernels are machine code, a
// convolution's patches (the im2col's kernel's root), which only its
// products read, are stored column by column (columnMajor); not on a GPU,
// not on the executor, and not where the caller reads them.
func TestColumnMajor(t *testing.T) {
	for _, c := range []struct {
		name   string
		target Target
		keep   bool
		want   bool
	}{
		{"native CPU", nativeCPU, false, true},
		{"native CPU, the patches read by the caller", nativeCPU, true, false},
		{"the executor", CPU(2), false, false},
		{"H200", H200, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			gr := convGrad(t, []int{4, 3, 8, 8}, []int{5, 3, 3, 3}, false)
			var cols *Node // the patches as the products' rows: [4·8·8, 3·3·3]
			for _, n := range gr.Nodes {
				if n.Info.Kind == ops.Reshape && sameShape(n.Info.Shape, []int{256, 27}) {
					cols = n
				}
			}
			if cols == nil {
				t.Fatal("no patches")
			}
			var keep *Node
			if c.keep {
				keep = cols
			}
			groups := partitionKeeping(t, gr, c.target, keep)
			if cols.ColMajor() != c.want {
				t.Fatalf("the patches stored column by column: %v, want %v", cols.ColMajor(), c.want)
			}
			products := 0
			for _, grp := range groups {
				if grp.MatMul != nil && slices.Contains(grp.MatMul.Inputs, cols) {
					products++
				}
			}
			if products != 2 {
				t.Fatalf("%d products read the patches, want 2 (the convolution and its weight gradient)", products)
			}
		})
	}
}
