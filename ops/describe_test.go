package ops

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestDescribe: each op, built the way users build it, is described with
// the function the user called and the parameters that tell it apart.
func TestDescribe(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("y"))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(5, 3), G.WithName("w"))
	q := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 4, 3), G.WithName("q"))
	must := G.Must
	cases := []struct {
		name string
		n    *G.Node
		want string
	}{
		{"an input", x, "input"},
		{"a Hadamard product", must(G.HadamardProd(x, y)), "Mul"},
		{"a product by a scalar", must(G.Mul(x, G.NewConstant(2.0))), "Mul"},
		{"an addition", must(G.Add(x, y)), "Add"},
		{"a division", must(G.HadamardDiv(x, y)), "Div"},
		{"a comparison", must(G.Lt(x, y, true)), "Lt"},
		{"Log", must(G.Log(x)), "Log"},
		{"InverseSqrt", must(G.InverseSqrt(x)), "InverseSqrt"},
		{"a row sum", must(G.Sum(x, 1)), "Sum along axis 1"},
		{"a row maximum", must(G.Max(x, 1)), "Max along axis 1"},
		{"a product of a transpose", must(G.Mul(x, must(G.Transpose(w)))), "MatMul"},
		{"a batched product", must(G.BatchedMatMul(q, q, false, true)), "BatchedMatMul with B transposed"},
		{"a reshape", must(G.Reshape(x, tensor.Shape{3, 4})), "Reshape to (3, 4)"},
		{"a softmax", must(G.SoftMax(x)), "SoftMax"},
		{"a constant", G.NewConstant(0.5), "constant 0.5"},
		{"a concat", must(G.Concat(1, x, y)), "Concat along axis 1"},
		{"a comparison giving booleans", must(G.Gte(x, y, false)), "Gte"},
		{"a transpose", must(G.Transpose(x)), "Transpose"},
	}
	for _, c := range cases {
		if got := Classify(c.n).Describe(); got != c.want {
			t.Errorf("%s (%v): %q, want %q", c.name, c.n.Op(), got, c.want)
		}
	}
}

// TestDescribeEveryUnary: every unary op of the catalogue has the name of
// the function that makes it.
func TestDescribeEveryUnary(t *testing.T) {
	for s := range unaryOps {
		if unaryFuncs[s] == "" {
			t.Errorf("unary op %q has no function name", s)
		}
	}
}

// TestDescribeTransposedProducts: the products Grad makes with a transposed
// operand say which.
func TestDescribeTransposedProducts(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 5), G.WithName("w"))
	cost := G.Must(G.Sum(G.Must(G.Mul(x, w))))
	if _, err := G.Grad(cost, x, w); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range g.AllNodes() {
		if i := Classify(n); i.Kind == MatMul {
			seen[i.Describe()] = true
		}
	}
	for _, want := range []string{"MatMul", "MatMul with A transposed", "MatMul with B transposed"} {
		if !seen[want] {
			t.Errorf("no %q among the products %v", want, seen)
		}
	}
}
