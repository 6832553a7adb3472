package graphpass_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestEmitIndexing: the emitter masks only where the sizes leave lanes out
// of range, and reads a reduction's operand without splitting its flat
// index when the kept and the reduced dimensions are contiguous runs: no
// div, rem or select per element that the shapes make useless (each costs
// the interpreter a pass over the block, and the GPU an instruction).
func TestEmitIndexing(t *testing.T) {
	must := G.Must
	cases := []struct {
		name  string
		shape []int
		build func(x *G.Node) *G.Node
		// ops the kernel must not have, and ones it must
		absent, present []tile.Op
	}{
		{"elementwise, whole blocks: no mask", []int{8, 1024}, func(x *G.Node) *G.Node { return must(G.Tanh(x)) },
			[]tile.Op{tile.OpLt, tile.OpSelect, tile.OpDiv, tile.OpRem}, nil},
		{"elementwise, a tail: masked", []int{3, 1000}, func(x *G.Node) *G.Node { return must(G.Tanh(x)) },
			[]tile.Op{tile.OpDiv, tile.OpRem}, []tile.Op{tile.OpLt}},
		{"full sum: the flat index as it is", []int{64, 512}, func(x *G.Node) *G.Node { return must(G.Sum(x)) },
			[]tile.Op{tile.OpDiv, tile.OpRem, tile.OpSelect, tile.OpLt}, []tile.Op{tile.OpAtomicAdd}},
		// the masked load gives +0 off the mask: no select of the identity
		{"full sum with a tail: masked, no select, still no split", []int{7, 300}, func(x *G.Node) *G.Node { return must(G.Sum(x)) },
			[]tile.Op{tile.OpDiv, tile.OpRem, tile.OpSelect}, []tile.Op{tile.OpLt}},
		{"row sums over trailing axes: no split", []int{16, 8, 128}, func(x *G.Node) *G.Node { return must(G.Sum(x, 1, 2)) },
			[]tile.Op{tile.OpDiv, tile.OpRem, tile.OpSelect}, nil},
		{"column sums: no split", []int{64, 512}, func(x *G.Node) *G.Node { return must(G.Sum(x, 0)) },
			[]tile.Op{tile.OpDiv, tile.OpRem, tile.OpSelect}, nil},
		{"a middle axis: split as it must be", []int{4, 6, 8}, func(x *G.Node) *G.Node { return must(G.Sum(x, 1)) },
			nil, []tile.Op{tile.OpDiv, tile.OpRem}},
		{"softmax rows of a power of two: no mask", []int{32, 256}, func(x *G.Node) *G.Node { return must(G.SoftMax(x)) },
			[]tile.Op{tile.OpLt}, nil},
		{"softmax rows of 1000: masked", []int{32, 1000}, func(x *G.Node) *G.Node { return must(G.SoftMax(x)) },
			nil, []tile.Op{tile.OpLt}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewTensor(g, tensor.Float32, len(c.shape), G.WithShape(c.shape...), G.WithName("x"))
			c.build(x)
			k := emitOne(t, g, H200)
			has := map[tile.Op]bool{}
			k.Tile.Walk(func(v *tile.Value) { has[v.Op] = true })
			for _, op := range c.absent {
				if has[op] {
					t.Errorf("kernel has %v:\n%s", op, k.Tile)
				}
			}
			for _, op := range c.present {
				if !has[op] {
					t.Errorf("kernel lacks %v:\n%s", op, k.Tile)
				}
			}
			if t.Failed() {
				return
			}
			// and it computes what Gorgonia does in float64, on the interpreter
			agrees(t, k, [][]int{c.shape}, func(xs []*G.Node) *G.Node { return c.build(xs[0]) })
		})
	}
}

// agrees runs k on the interpreter over seeded inputs of the given shapes
// and compares it with Gorgonia's float64 run of build (outputs poisoned
// first; float32 sums of n terms of ±2: 1e-5·√n relative).
func agrees(t *testing.T, k *Kernel, shapes [][]int, build func([]*G.Node) *G.Node) {
	t.Helper()
	g64 := G.NewGraph()
	var xs []*G.Node
	args := []any{}
	total := 0
	rng := rand.New(rand.NewPCG(5, uint64(len(shapes))))
	for i, sh := range shapes {
		n := 1
		for _, d := range sh {
			n *= d
		}
		total = max(total, n)
		in32, in64 := make([]float32, n), make([]float64, n)
		for j := range in32 {
			in32[j] = float32(rng.Float64()*4 - 2)
			in64[j] = float64(in32[j])
		}
		x := G.NewTensor(g64, tensor.Float64, len(sh), G.WithShape(sh...), G.WithName(fmt.Sprintf("x%d", i)))
		if err := G.Let(x, tensor.New(tensor.WithShape(sh...), tensor.WithBacking(in64))); err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
		args = append(args, in32)
	}
	y := build(xs)
	vm := G.NewTapeMachine(g64)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	var want []float64
	switch d := y.Value().Data().(type) {
	case []float64:
		want = d
	case float64:
		want = []float64{d}
	}
	out := make([]float32, len(want))
	for i := range out {
		out[i] = float32(math.NaN()) // poisoned: every element must be written
	}
	if k.Accumulates {
		clear(out)
	}
	if err := interp.Interpret(k.Tile, k.Grid, append(args, out)...); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if d := math.Abs(float64(out[i]) - w); !(d <= 1e-5*(1+math.Abs(w))*math.Sqrt(float64(total))) {
			t.Fatalf("element %d: %v, want %v", i, out[i], w)
		}
	}
}

// TestEmitBlockCoordinates: in an elementwise kernel, a coordinate whose
// period divides the block is computed from the lanes alone (no div or rem
// that depends on the program id: once per launch on the interpreter); the
// others still split the flat index.
func TestEmitBlockCoordinates(t *testing.T) {
	must := G.Must
	cases := []struct {
		name     string
		shapes   [][]int
		build    func(xs []*G.Node) *G.Node
		perBlock bool // every div and rem independent of the program id
	}{
		{"concat of four heads along the row", [][]int{{128, 32}, {128, 32}, {128, 32}, {128, 32}}, func(xs []*G.Node) *G.Node {
			return must(G.Concat(1, xs...))
		}, true},
		{"a bias over 512-wide rows", [][]int{{64, 512}, {512}}, func(xs []*G.Node) *G.Node {
			return must(G.Tanh(must(G.BroadcastAdd(xs[0], xs[1], nil, []byte{0}))))
		}, true},
		{"a bias over 1000-wide rows", [][]int{{6, 1000}, {1000}}, func(xs []*G.Node) *G.Node {
			return must(G.Tanh(must(G.BroadcastAdd(xs[0], xs[1], nil, []byte{0}))))
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			var xs []*G.Node
			for i, sh := range c.shapes {
				xs = append(xs, G.NewTensor(g, tensor.Float32, len(sh), G.WithShape(sh...), G.WithName(fmt.Sprintf("x%d", i))))
			}
			c.build(xs)
			k := emitOne(t, g, H200)
			onPID := map[*tile.Value]bool{}
			perProgram := 0
			k.Tile.Walk(func(v *tile.Value) {
				dep := v.Op == tile.OpProgramID
				for _, a := range v.Args {
					dep = dep || onPID[a]
				}
				onPID[v] = dep
				if dep && (v.Op == tile.OpDiv || v.Op == tile.OpRem) {
					perProgram++
				}
			})
			if c.perBlock != (perProgram == 0) {
				t.Fatalf("%d div/rem on the program id, want none: %v\n%s", perProgram, c.perBlock, k.Tile)
			}
			agrees(t, k, c.shapes, c.build)
		})
	}
}

// emitOne partitions g for target tg, wants one group, and emits its kernel.
func emitOne(t *testing.T, g *G.ExprGraph, tg Target) *Kernel {
	t.Helper()
	k, _ := emitOneGroup(t, g, tg)
	return k
}

// emitOneGroup is emitOne that also returns the group.
func emitOneGroup(t *testing.T, g *G.ExprGraph, tg Target) (*Kernel, *Group) {
	t.Helper()
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	groups := Partition(gr, Options{Target: tg})
	if len(groups) != 1 {
		t.Fatalf("%d groups, want 1", len(groups))
	}
	k, err := Emit(groups[0], tg, tile.PrecIEEE)
	if err != nil {
		t.Fatal(err)
	}
	return k, groups[0]
}

// TestTanhPlusOne: 1 + tanh(u) (GELU's tanh form) is written from
// e^(−2u), the same value in fewer instructions, where the tanh is read by
// that sum alone: on a GPU as 2·sigmoid(2u), on a CPU as 2/(1 + e^(−2u));
// a tanh read elsewhere too and a sum with another constant keep the tanh.
// Each kernel agrees with Gorgonia in float64 on the interpreter.
func TestTanhPlusOne(t *testing.T) {
	must := G.Must
	c := func(x *G.Node, v float64) *G.Node {
		if x.Dtype() == tensor.Float32 {
			return G.NewConstant(float32(v))
		}
		return G.NewConstant(v)
	}
	gelu := func(x *G.Node) *G.Node { // ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
		cube := must(G.HadamardProd(must(G.HadamardProd(x, x)), x))
		inner := must(G.Mul(must(G.Add(x, must(G.Mul(cube, c(x, 0.044715))))), c(x, math.Sqrt(2/math.Pi))))
		return must(G.Mul(must(G.HadamardProd(x, must(G.Add(must(G.Tanh(inner)), c(x, 1))))), c(x, 0.5)))
	}
	onePlus := func(x *G.Node) *G.Node { return must(G.Add(c(x, 1), must(G.Tanh(x)))) }
	twice := func(x *G.Node) *G.Node {
		th := must(G.Tanh(x))
		return must(G.HadamardProd(must(G.Add(th, c(x, 1))), th))
	}
	cpu := CPU(2)
	// the form of the sum: from a sigmoid (a GPU), from an exp and a
	// division (a CPU), or the tanh kept
	const sigmoid, expDiv, tanh = "sigmoid", "exp and division", "tanh"
	for _, tc := range []struct {
		name   string
		target Target
		build  func(x *G.Node) *G.Node
		form   string
	}{
		{"gelu's tanh form on the H200", H200, gelu, sigmoid},
		{"1 + tanh(x), the constant first", H200, onePlus, sigmoid},
		{"tanh(x) + 2: another constant", H200, func(x *G.Node) *G.Node { return must(G.Add(must(G.Tanh(x)), c(x, 2))) }, tanh},
		{"(tanh(x) + 1)·tanh(x): the tanh read twice", H200, twice, tanh},
		{"gelu on the CPU", cpu, gelu, expDiv},
		{"1 + tanh(x) on the CPU", cpu, onePlus, expDiv},
		{"(tanh(x) + 1)·tanh(x) on the CPU: the tanh read twice", cpu, twice, tanh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shape := []int{8, 1000}
			g := G.NewGraph()
			x := G.NewTensor(g, tensor.Float32, 2, G.WithShape(shape...), G.WithName("x"))
			tc.build(x)
			k := emitOne(t, g, tc.target)
			has := map[tile.Op]bool{}
			k.Tile.Walk(func(v *tile.Value) { has[v.Op] = true })
			form := tanh
			switch {
			case has[tile.OpTanh]:
			case has[tile.OpSigmoid]:
				form = sigmoid
			case has[tile.OpExp] && has[tile.OpDiv]:
				form = expDiv
			default:
				form = "none of them"
			}
			if form != tc.form || form != tanh && has[tile.OpTanh] {
				t.Fatalf("1 + tanh written by its %s; want %s:\n%s", form, tc.form, k.Tile)
			}
			agrees(t, k, [][]int{shape}, func(xs []*G.Node) *G.Node { return tc.build(xs[0]) })
		})
	}
}

// TestTanhPlusOneRounded: in the epilogue of a product formed in TF32 or
// bf16, 1 + tanh(u) of a u computed from the product is written with ex2
// and rsqrt (2·r², r = 1/√(1 + 2^(−2u·log₂e))): no sigmoid, tanh or exp
// left, and the kernel agrees with float64 within TF32's bound on the
// interpreter; an ieee or 3xTF32 product keeps the exact sigmoid.
func TestTanhPlusOneRounded(t *testing.T) {
	must := G.Must
	const m, k, n = 48, 64, 80
	// GELU as users write it: form 0 as the bench's peer products, 1 with
	// Gorgonia's Cube and the constants on the left, 2 with ½·x first
	build := func(form int) *G.ExprGraph {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float32, G.WithShape(m, k), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float32, G.WithShape(k, n), G.WithName("w"))
		b := G.NewVector(g, tensor.Float32, G.WithShape(n), G.WithName("b"))
		s := must(G.BroadcastAdd(must(G.Mul(x, w)), b, nil, []byte{0}))
		c := func(v float64) *G.Node { return G.NewConstant(float32(v)) }
		switch form {
		case 0:
			cube := must(G.HadamardProd(must(G.HadamardProd(s, s)), s))
			inner := must(G.Mul(must(G.Add(s, must(G.Mul(cube, c(0.044715))))), c(math.Sqrt(2/math.Pi))))
			must(G.Mul(must(G.HadamardProd(s, must(G.Add(must(G.Tanh(inner)), c(1))))), c(0.5)))
		case 1:
			inner := must(G.Mul(c(math.Sqrt(2/math.Pi)), must(G.Add(must(G.Mul(c(0.044715), must(G.Cube(s)))), s))))
			must(G.Mul(c(0.5), must(G.HadamardProd(must(G.Add(c(1), must(G.Tanh(inner)))), s))))
		case 2:
			cube := must(G.HadamardProd(s, must(G.HadamardProd(s, s))))
			inner := must(G.Mul(must(G.Add(must(G.Mul(cube, c(0.044715))), s)), c(math.Sqrt(2/math.Pi))))
			must(G.HadamardProd(must(G.Mul(s, c(0.5))), must(G.Add(must(G.Tanh(inner)), c(1)))))
		}
		return g
	}
	for _, tc := range []struct {
		name    string
		prec    tile.Precision
		form    int
		rounded bool
	}{
		{"tf32: ex2 and rsqrt", tile.PrecTF32, 0, true},
		{"tf32: ex2 and rsqrt, Cube, constants first", tile.PrecTF32, 1, true},
		{"tf32: ex2 and rsqrt, ½·x first", tile.PrecTF32, 2, true},
		{"bf16: ex2 and rsqrt", tile.PrecBF16, 0, true},
		{"3xTF32: the exact sigmoid", tile.PrecTF32x3, 0, false},
		{"ieee: the exact sigmoid", tile.PrecIEEE, 0, false},
		{"ieee: the exact sigmoid, Cube, constants first", tile.PrecIEEE, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(tc.form)
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: H200, MatMul: true})
			if len(groups) != 1 || groups[0].Kind != MatMulGroup {
				t.Fatalf("%d groups, want one matmul group", len(groups))
			}
			kern, err := Emit(groups[0], H200, tc.prec)
			if err != nil {
				t.Fatal(err)
			}
			has := map[tile.Op]bool{}
			kern.Tile.Walk(func(v *tile.Value) { has[v.Op] = true })
			if got := has[tile.OpExp2] && has[tile.OpRsqrt] && !has[tile.OpSigmoid] && !has[tile.OpTanh]; got != tc.rounded {
				t.Fatalf("rounded form %v, want %v:\n%s", got, tc.rounded, kern.Tile)
			}
			if !tc.rounded && (!has[tile.OpSigmoid] || has[tile.OpTanh]) {
				t.Fatalf("want the exact sigmoid:\n%s", kern.Tile)
			}
			if tc.rounded {
				// the constants folded (½ against 2·r², √(2/π) and 0.044715
				// into the exponent's): s² and s·(c + ca·s²), r², s·r²; the
				// bias, c + …, 1 + 2^t
				f32 := map[tile.Op]int{}
				kern.Tile.Walk(func(v *tile.Value) {
					if v.Type.DType == tile.F32 && !v.Type.Ptr {
						f32[v.Op]++
					}
				})
				if f32[tile.OpMul] != 5 || f32[tile.OpAdd] != 3 || f32[tile.OpExp2] != 1 || f32[tile.OpRsqrt] != 1 {
					t.Errorf("f32 mul %d, add %d, exp2 %d, rsqrt %d; want 5, 3, 1, 1:\n%s",
						f32[tile.OpMul], f32[tile.OpAdd], f32[tile.OpExp2], f32[tile.OpRsqrt], kern.Tile)
				}
			}
			// against float64 on the interpreter: gelu of the product's
			// rows, within the precision's bound of the largest output
			rng := rand.New(rand.NewPCG(9, 1))
			xs, ws, bs := make([]float32, m*k), make([]float32, k*n), make([]float32, n)
			for _, v := range [][]float32{xs, ws, bs} {
				for i := range v {
					v[i] = float32(rng.Float64()*2 - 1)
				}
			}
			args := map[*G.Node][]float32{}
			for _, nd := range g.AllNodes() {
				switch nd.Name() {
				case "x":
					args[nd] = xs
				case "w":
					args[nd] = ws
				case "b":
					args[nd] = bs
				}
			}
			var in []any
			for _, x := range groups[0].Inputs {
				in = append(in, args[x.G])
			}
			out := make([]float32, m*n)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			if err := interp.Interpret(kern.Tile, kern.Grid, append(in, out)...); err != nil {
				t.Fatal(err)
			}
			tol := map[tile.Precision]float64{tile.PrecTF32: 4e-3, tile.PrecBF16: 3e-2, tile.PrecTF32x3: 1e-5, tile.PrecIEEE: 1e-5}[tc.prec]
			for i := range m {
				for j := range n {
					s := float64(bs[j])
					for kk := range k {
						s += float64(xs[i*k+kk]) * float64(ws[kk*n+j])
					}
					want := 0.5 * s * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(s+0.044715*s*s*s)))
					if d := math.Abs(float64(out[i*n+j]) - want); !(d <= tol*(1+math.Abs(want))) {
						t.Fatalf("(%d, %d): %v, want %v", i, j, out[i*n+j], want)
					}
				}
			}
		})
	}
}
