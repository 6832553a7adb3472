package ops

import (
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/tile"
)

// TestClassify builds each op the way users do and checks what the
// catalogue makes of it.
func TestClassify(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("y"))
	v := G.NewVector(g, tensor.Float32, G.WithShape(3), G.WithName("v"))
	xi := G.NewMatrix(g, tensor.Int, G.WithShape(2, 3), G.WithName("xi"))
	col := G.NewMatrix(g, tensor.Float32, G.WithShape(3, 1), G.WithName("col"))
	row := G.NewMatrix(g, tensor.Float32, G.WithShape(1, 3), G.WithName("row"))
	must := G.Must
	cases := []struct {
		name string
		n    *G.Node
		kind Kind
		want func(Info) bool
	}{
		{"input", x, Input, func(i Info) bool { return i.DType == tile.F32 }},
		{"exp", must(G.Exp(x)), Unary, nil},
		{"ln", must(G.Log(x)), Unary, nil},
		{"invSqrt", must(G.InverseSqrt(x)), Unary, nil},
		{"softplus", must(G.Softplus(x)), Unary, nil},
		{"add", must(G.Add(x, y)), Binary, func(i Info) bool { return i.Binary == tile.OpAdd }},
		{"hadamard div", must(G.HadamardDiv(x, y)), Binary, func(i Info) bool { return i.Binary == tile.OpDiv }},
		{"pow", must(G.Pow(x, y)), Binary, func(i Info) bool { return i.Binary == tile.OpPow }},
		{"scalar mul", must(G.Mul(x, G.NewConstant(float32(2)))), Binary, func(i Info) bool { return i.Binary == tile.OpMul }},
		{"comparison, same type", must(G.Lt(x, y, true)), Binary, func(i Info) bool { return i.Cmp && i.Binary == tile.OpLt }},
		{"comparison, booleans", must(G.Gte(x, y, false)), Opaque, nil},
		{"constant", G.NewConstant(float32(2.5)), Constant, func(i Info) bool { return i.Value == 2.5 }},
		{"sum along 1", must(G.Sum(x, 1)), Reduce, func(i Info) bool { return i.Reduce == tile.OpReduceSum && len(i.Axes) == 1 && i.Axes[0] == 1 }},
		{"sum along 0 and 1", must(G.Sum(x, 0, 1)), Reduce, func(i Info) bool { return len(i.Axes) == 2 }},
		{"max along 1", must(G.Max(x, 1)), Reduce, func(i Info) bool { return i.Reduce == tile.OpReduceMax }},
		{"reshape", must(G.Reshape(x, tensor.Shape{3, 2})), Reshape, nil},
		{"matmul", must(G.Mul(x, must(G.Transpose(y)))), MatMul, func(i Info) bool { return !i.TransA && !i.TransB }},
		{"matrix-vector", must(G.Mul(x, v)), Opaque, func(i Info) bool { return i.Why != "" }},
		{"int dtype", must(G.Add(xi, xi)), Opaque, func(i Info) bool { return i.Why != "" }},
		{"slice of a range", must(G.Slice(x, nil, G.S(1, 3))), Slice, func(i Info) bool { return i.Axes[0] == 1 && i.Start == 1 }},
		{"slice from the start", must(G.Slice(x, nil, G.S(0, 2))), Slice, func(i Info) bool { return i.Axes[0] == 1 && i.Start == 0 }},
		{"slice of a length-1 range (drops the axis)", must(G.Slice(x, G.S(1, 2))), Opaque, func(i Info) bool { return i.Why != "" }},
		{"slice of one index (drops the axis)", must(G.Slice(x, nil, G.S(2))), Opaque, func(i Info) bool { return i.Why != "" }},
		{"concat", must(G.Concat(1, x, y)), Concat, func(i Info) bool { return i.Axes[0] == 1 }},
		{"softmax", must(G.SoftMax(x)), Softmax, func(i Info) bool { return !i.Log }},
		{"softmax of a column vector (Gorgonia's: along axis 0)", must(G.SoftMax(col)), Opaque, func(i Info) bool { return i.Why != "" }},
		{"softmax of a row vector", must(G.SoftMax(row)), Softmax, nil},
	}
	bc := must(G.BroadcastAdd(x, v, nil, []byte{0}))
	ch := g.From(bc.ID())
	ch.Next()
	ch.Next()
	rep := ch.Node().(*G.Node) // Repeat0(Reshape(v), SizeOf)
	cases = append(cases, struct {
		name string
		n    *G.Node
		kind Kind
		want func(Info) bool
	}{"repeat (broadcasting)", rep, Repeat, func(i Info) bool { return len(i.Axes) == 1 && i.Axes[0] == 0 }})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info := Classify(c.n)
			if info.Kind != c.kind {
				t.Fatalf("%v: kind %v (%s), want %v", c.n.Op(), info.Kind, info.Why, c.kind)
			}
			if c.want != nil && !c.want(info) {
				t.Fatalf("%v: %+v", c.n.Op(), info)
			}
		})
	}
}

// TestClassifyBackwardOps: Gorgonia's SoftmaxDiff (from Grad through a
// SoftMax) is the softmax backward kind, and T[…]+=… (from Grad through a
// slice) the slice backward, with its range.
func TestClassifyBackwardOps(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 5), G.WithName("x"))
	cost := G.Must(G.Sum(G.Must(G.Square(G.Must(G.SoftMax(G.Must(G.Slice(x, nil, G.S(1, 4)))))))))
	if _, err := G.Grad(cost, x); err != nil {
		t.Fatal(err)
	}
	found := map[Kind]bool{}
	for _, n := range g.AllNodes() {
		if n.Op() == nil {
			continue
		}
		s, info := n.Op().String(), Classify(n)
		switch {
		case strings.HasPrefix(s, "SoftmaxDiff"):
			found[SoftmaxGrad] = true
			if info.Kind != SoftmaxGrad || info.Log {
				t.Fatalf("%v: %+v", s, info)
			}
		case strings.HasPrefix(s, "T[:, 1:4") && strings.HasSuffix(s, "+=..."):
			found[SliceIncr] = true
			if info.Kind != SliceIncr || info.Axes[0] != 1 || info.Start != 1 || info.End != 4 {
				t.Fatalf("%v: %+v", s, info)
			}
		}
	}
	if !found[SoftmaxGrad] || !found[SliceIncr] {
		t.Fatalf("the gradient graph lacks a SoftmaxDiff or a T[…]+=…: %v", found)
	}
}
