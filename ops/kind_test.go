package ops

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestKindTable: every kind has its entry (the table's type checks its
// length; this checks that no entry in the middle was left empty), a kind
// that Gorgonia spells is read, and only elementwise and injective kinds are
// written by the catalogue.
func TestKindTable(t *testing.T) {
	for k := range numKinds {
		p := kinds[k]
		t.Run(p.name, func(t *testing.T) {
			switch {
			case p.name == "":
				t.Fatalf("kind %d has no entry", k)
			case (p.spelled == nil) != (k == Opaque || k == Input):
				t.Fatalf("%v: spelled %v; only Opaque and Input have no spelling", k, p.spelled != nil)
			case p.spelled != nil && p.read == nil:
				t.Fatalf("%v is spelled but not read", k)
			case (p.write != nil) != (p.elementwise || p.injective):
				t.Fatalf("%v: written by the catalogue %v, elementwise %v, injective %v", k, p.write != nil, p.elementwise, p.injective)
			case p.product && (p.elementwise || p.row):
				t.Fatalf("%v: a product is neither elementwise nor a row op", k)
			case p.window && !p.injective:
				t.Fatalf("%v: a window kind fuses as the injective ones do", k)
			}
		})
	}
	if s := numKinds.String(); s != "kind(20)" {
		t.Fatalf("the end sentinel prints %q", s)
	}
}

// TestSpellings: each spelling Gorgonia v0.9.18 gives its ops is one kind's
// and no other's (Classify takes the first match), and the predicates other
// packages use say what they name.
func TestSpellings(t *testing.T) {
	cases := []struct {
		s    string
		kind Kind // Opaque: no kind's
	}{
		{"const 0", Constant}, {"const true", Constant}, {"SizeOf=4", Constant},
		{"exp", Unary}, {"invSqrt", Unary}, {"softplus", Unary},
		{"+ false", Binary}, {"⊙ false", Binary}, {"< true", Binary}, {">= false", Binary},
		{"Reshape(2, 1)", Reshape}, {"Repeat1", Repeat},
		{"Σ[1]", Reduce}, {"Σ[0 1]", Reduce}, {"MaxAlong[1]", Reduce},
		{"Softmax{-1, false}()", Softmax}, {"SoftmaxDiff{-1, false}()", SoftmaxGrad},
		{"A × B", MatMul}, {"Aᵀ × Bᵀ", MatMul}, {"A ××× Bᵀ", BatchedMatMul},
		{"T[:, 1:4]", Slice}, {"T[:, 1:4]+=...", SliceIncr}, {"Concat(1)", Concat},
		{"Aᵀ{1, 0}", Transpose}, {"Aᵀ{0, 3, 1, 2}", Transpose},
		{"im2col<(3,3), (1, 1), (1,1) (1, 1)>", Im2Col}, {"col2im<(3,3), (1, 1), (1,1)>", Col2Im},
		{"MaxPool{4, 8, 28, 28}(kernel: (2, 2), pad: (0, 0), stride: (2, 2))", MaxPool},
		{"MaxPoolDiff{4, 8, 28, 28}(kernel: (2, 2), pad: (0, 0), stride: (2, 2))", MaxPoolDiff},
		{"=", Opaque}, {"print", Opaque}, {"A × b", Opaque},
	}
	for _, c := range cases {
		t.Run(c.s, func(t *testing.T) {
			var match []Kind
			for k := range numKinds {
				if p := kinds[k]; p.spelled != nil && p.spelled(c.s) {
					match = append(match, k)
				}
			}
			if c.kind == Opaque && len(match) != 0 || c.kind != Opaque && (len(match) != 1 || match[0] != c.kind) {
				t.Fatalf("%q is spelled by %v, want %v", c.s, match, c.kind)
			}
		})
	}
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(3, 2), G.WithName("y"))
	var v G.Value
	preds := []struct {
		name string
		op   G.Op
		f    func(G.Op) bool
		want bool
	}{
		{"a constant is const", G.NewConstant(float32(1)).Op(), IsConst, true},
		{"an input is not const", x.Op(), IsConst, false},
		{"a product is a matmul", G.Must(G.Mul(x, y)).Op(), IsMatMul, true},
		{"a batched product is not", G.Must(G.BatchedMatMul(G.Must(G.Reshape(x, tensor.Shape{1, 2, 3})), G.Must(G.Reshape(y, tensor.Shape{1, 3, 2})))).Op(), IsMatMul, false},
		{"Read is a statement", G.Read(x, &v).Op(), IsStatement, true},
		{"Read is not Set", G.Read(x, &v).Op(), IsSet, false},
		{"Set is", G.Set(x, y).Op(), IsSet, true},
		{"exp is no statement", G.Must(G.Exp(x)).Op(), IsStatement, false},
		{"nil is nothing", nil, IsConst, false},
	}
	for _, c := range preds {
		if got := c.f(c.op); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestMadeByGrad: the nodes gorgonia.Grad makes are told from the user's:
// the gradient it returns and its contribution to a constant's gradient
// (which no node's Grad() reads) are Grad's; the user's own nodes, the
// constant and a value the user computes from a gradient afterwards are
// not.
func TestMadeByGrad(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	c := G.NewConstant(0.5)
	xc := G.Must(G.Mul(x, c))
	cost := G.Must(G.Sum(G.Must(G.Square(xc))))
	grads, err := G.Grad(cost, x)
	if err != nil {
		t.Fatal(err)
	}
	norm := G.Must(G.Sum(G.Must(G.Square(grads[0])))) // the user's metric of a gradient
	var toC *G.Node                                   // Grad's contribution to c's gradient: a scalar root that is no node's gradient
	for _, n := range g.AllNodes() {
		if n.IsScalar() && n != cost && n != norm && len(n.DerivOf()) == 0 && g.To(n.ID()).Len() == 0 && n.Op() != nil && !IsConst(n.Op()) {
			toC = n
		}
	}
	if toC == nil {
		t.Fatal("no contribution to the constant's gradient: the test's premise is gone")
	}
	for _, tc := range []struct {
		name string
		n    *G.Node
		want bool
	}{
		{"the gradient Grad returns", grads[0], true},
		{"the contribution to the constant's gradient", toC, true},
		{"an input", x, false},
		{"the constant", c, false},
		{"the user's product", xc, false},
		{"the user's cost", cost, false},
		{"the user's metric of a gradient", norm, false},
		{"nil", nil, false},
	} {
		if got := MadeByGrad(tc.n); got != tc.want {
			t.Errorf("%s (%v): %v, want %v", tc.name, tc.n, got, tc.want)
		}
	}
}
