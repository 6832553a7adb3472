package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// TestSliceConcatSoftmaxBackward: slices and a concat (and, in the backward
// pass, the softmax's backward and the concat's slices) fuse into kernels;
// the loss and the gradient match Gorgonia. Row 30 and the split at 13 are
// not multiples of any block.
func TestSliceConcatSoftmaxBackward(t *testing.T) { checkSliceConcat(t, 1e-12) }

func checkSliceConcat(t *testing.T, tol float64, opts ...fusion.Option) {
	build := func() (*G.ExprGraph, *G.Node, *G.Node, *G.Node, *G.Node) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(7, 30), G.WithName("x"))
		tg := G.NewMatrix(g, tensor.Float64, G.WithShape(7, 30), G.WithName("target"))
		a := G.Must(G.Tanh(G.Must(G.Slice(x, nil, G.S(0, 13)))))
		b := G.Must(G.Exp(G.Must(G.Mul(G.Must(G.Slice(x, nil, G.S(13, 30))), G.NewConstant(0.5)))))
		p := G.Must(G.SoftMax(G.Must(G.Concat(1, a, b))))
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(p, tg))))
		grads, err := G.Grad(loss, x)
		if err != nil {
			t.Fatal(err)
		}
		return g, x, tg, loss, grads[0]
	}
	gRef, xRef, tRef, lossRef, dxRef := build()
	g, x, tg, loss, dx := build()
	rng := rand.New(rand.NewPCG(9, 9))
	xv, tv := data(tensor.Float64, rng, 7, 30), data(tensor.Float64, rng, 7, 30)
	for _, l := range [][2]*G.Node{{xRef, x}, {tRef, tg}} {
		v := xv
		if l[0] == tRef {
			v = tv
		}
		if err := G.Let(l[0], v); err != nil {
			t.Fatal(err)
		}
		if err := G.Let(l[1], v.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	vm := fusion.NewTapeMachine(g, opts...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	for _, u := range vm.Report().Unfused {
		for _, op := range []string{"Slice", "Concat", "SoftMax's gradient"} {
			if strings.HasPrefix(u.Op, op) {
				t.Fatalf("%s left to Gorgonia:\n%v", u.Op, vm.Report())
			}
		}
	}
	lowersToPTX(t, vm)
	vmRef := G.NewTapeMachine(gRef)
	defer vmRef.Close()
	if err := vmRef.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatalf("%v\n%v", err, vm.Report())
	}
	if a, b := scalar(loss.Value()), scalar(lossRef.Value()); !(math.Abs(a-b) <= tol*(1+math.Abs(b))) {
		t.Fatalf("loss %v fused, %v in Gorgonia", a, b)
	}
	got, want := floats(dx.Value()), floats(dxRef.Value())
	if len(got) != len(want) || len(want) != 7*30 {
		t.Fatalf("gradient: %d values, want %d", len(got), len(want))
	}
	for j := range want {
		if !(math.Abs(got[j]-want[j]) <= tol*(1+math.Abs(want[j]))) {
			t.Fatalf("gradient [%d] = %v, want %v\n%v", j, got[j], want[j], vm.Report())
		}
	}
	t.Logf("%d kernels; left to Gorgonia: %d", vm.Report().Kernels(), len(vm.Report().Unfused))
}

// TestTransposeFusedBackward: Gorgonia's Transpose fuses as an injective op
// in a GPU's kernels (here the H200's, run on the CPU; none is left to
// Gorgonia) and is left to Gorgonia on the CPU (graphpass.KernelOn) — a
// 4-D permutation of a tanh's input, a 3-D one after a product's reshape
// (a convolution's NHWC → NCHW), a 2-D one as a product's operand —
// forward and backward (its gradient is the inverse permutation); loss and
// gradients match Gorgonia's both ways. The sizes 3, 5, 7 are no block's
// multiples.
func TestTransposeFusedBackward(t *testing.T) {
	for _, c := range targets {
		t.Run(c.name, func(t *testing.T) { transposeBackward(t, c.fused, c.opts...) })
	}
}

// targets are the two ways the transpose tests run: the CPU's own kernels
// (Transpose left to Gorgonia where kernels are not machine code, Im2Col
// and the pools everywhere), and the H200's run on the CPU (fused);
// products fused both ways (on a CPU without the vector products, as under
// -tags purego, they are Gorgonia's by default).
var targets = []struct {
	name  string
	fused bool
	opts  []fusion.Option
}{
	{"cpu", false, []fusion.Option{fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true)}},
	{"H200 kernels", true, []fusion.Option{fusion.WithBackend(fusion.CPU), fusion.WithTarget(graphpass.H200), fusion.WithMatMulFusion(true)}},
}

func transposeBackward(t *testing.T, fused bool, opts ...fusion.Option) {
	build := func() (*G.ExprGraph, []*G.Node, *G.Node, []*G.Node) {
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(3, 5, 7, 2), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 7), G.WithName("w"))
		u := G.NewMatrix(g, tensor.Float64, G.WithShape(3*5*2, 6), G.WithName("u"))
		a := G.Must(G.Tanh(G.Must(G.Transpose(x, 0, 3, 1, 2)))) // (3, 2, 5, 7)
		r := G.Must(G.Reshape(a, tensor.Shape{3 * 2 * 5, 7}))
		p := G.Must(G.Mul(r, G.Must(G.Transpose(w)))) // (30, 6)
		q := G.Must(G.Transpose(G.Must(G.Reshape(p, tensor.Shape{3, 10, 6})), 2, 0, 1))
		s := G.Must(G.Mul(G.Must(G.Reshape(q, tensor.Shape{6, 30})), u)) // (6, 6)
		loss := G.Must(G.Sum(G.Must(G.Square(s))))
		grads, err := G.Grad(loss, x, w, u)
		if err != nil {
			t.Fatal(err)
		}
		return g, []*G.Node{x, w, u}, loss, grads
	}
	gRef, inRef, lossRef, dRef := build()
	g, in, loss, d := build()
	letTwins(t, rand.New(rand.NewPCG(4, 7)), inRef, in, nil)
	vm := fusion.NewTapeMachine(g, opts...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, u := range vm.Report().Unfused {
		if u.Op != "Transpose" {
			t.Fatalf("%s left to Gorgonia:\n%v", u.Op, vm.Report())
		}
		if !strings.Contains(u.Why, "not as machine code") { // the report says why: kernels here would run on the executor
			t.Errorf("a transpose left to Gorgonia because %q", u.Why)
		}
		left++
	}
	if want := !fused && !jit.Supported(); want != (left > 0) { // the CPU's machine code takes transposes
		t.Fatalf("%d transposes left to Gorgonia (fused: %v, machine code: %v):\n%v", left, fused, jit.Supported(), vm.Report())
	}
	if fused {
		lowersToPTX(t, vm)
	}
	runTwins(t, gRef, vm)
	sameAsGorgonia(t, "loss", loss, lossRef, 1e-12)
	for i := range d {
		sameAsGorgonia(t, fmt.Sprintf("gradient %d", i), d[i], dRef[i], 1e-12)
	}
	t.Logf("%d kernels; left to Gorgonia: %d", vm.Report().Kernels(), len(vm.Report().Unfused))
}

// TestTransposeKeepsShape: ops that move elements but keep the shape — a
// Transpose of square matrices, a batch of square ones or equal axes,
// rows or columns rolled by slices and a concat — inside products'
// epilogues, row groups and reductions' prologues (the H200's kernels,
// where transposes fuse, run on the CPU) read other elements than their
// output's: each graph's value matches Gorgonia's (a square product
// transposed after its ReLU gave 1008 of 1369 elements wrong, a product's
// rows rolled all of them, when the product joined the group: its
// epilogue holds one tile of the product).
func TestTransposeKeepsShape(t *testing.T) {
	for _, c := range []struct {
		name   string
		shapes [][]int
		build  func(in []*G.Node) *G.Node
	}{
		{"relu of a square product, transposed", [][]int{{37, 20}, {20, 37}}, func(in []*G.Node) *G.Node {
			return G.Must(G.Transpose(G.Must(G.Rectify(G.Must(G.Mul(in[0], in[1]))))))
		}},
		{"a batch of square products, transposed", [][]int{{3, 33, 16}, {3, 16, 33}}, func(in []*G.Node) *G.Node {
			return G.Must(G.Tanh(G.Must(G.Transpose(G.Must(G.BatchedMatMul(in[0], in[1], false, false)), 0, 2, 1))))
		}},
		{"a square softmax, transposed", [][]int{{45, 45}}, func(in []*G.Node) *G.Node {
			return G.Must(G.Transpose(G.Must(G.SoftMax(in[0]))))
		}},
		{"softmax of a transpose", [][]int{{45, 45}}, func(in []*G.Node) *G.Node {
			return G.Must(G.SoftMax(G.Must(G.Exp(G.Must(G.Transpose(in[0]))))))
		}},
		{"a row sum of a transpose times x", [][]int{{29, 29}}, func(in []*G.Node) *G.Node {
			return G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Transpose(in[0])), in[0])), 1))
		}},
		{"x minus its row mean, transposed", [][]int{{40, 40}}, func(in []*G.Node) *G.Node {
			m := G.Must(G.Mean(in[0], 1))
			d := G.Must(G.BroadcastSub(in[0], m, nil, []byte{1}))
			return G.Must(G.Transpose(G.Must(G.Square(d))))
		}},
		{"equal axes swapped", [][]int{{6, 6, 7}}, func(in []*G.Node) *G.Node {
			return G.Must(G.Add(G.Must(G.Transpose(in[0], 1, 0, 2)), in[0]))
		}},
		{"a square product of a transpose", [][]int{{30, 30}, {30, 30}}, func(in []*G.Node) *G.Node {
			return G.Must(G.Transpose(G.Must(G.Mul(G.Must(G.Transpose(in[0])), in[1]))))
		}},
		{"a product's rows rolled", [][]int{{40, 20}, {20, 40}}, func(in []*G.Node) *G.Node {
			p := G.Must(G.Tanh(G.Must(G.Mul(in[0], in[1]))))
			return G.Must(G.Concat(0, G.Must(G.Slice(p, G.S(20, 40))), G.Must(G.Slice(p, G.S(0, 20)))))
		}},
		{"a product's columns rolled", [][]int{{24, 16}, {16, 40}}, func(in []*G.Node) *G.Node {
			p := G.Must(G.Mul(in[0], in[1]))
			return G.Must(G.Exp(G.Must(G.Concat(1, G.Must(G.Slice(p, nil, G.S(7, 40))), G.Must(G.Slice(p, nil, G.S(0, 7)))))))
		}},
		{"a softmax's rows rolled", [][]int{{30, 33}}, func(in []*G.Node) *G.Node {
			p := G.Must(G.SoftMax(in[0]))
			return G.Must(G.Concat(0, G.Must(G.Slice(p, G.S(11, 30))), G.Must(G.Slice(p, G.S(0, 11)))))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func() (*G.ExprGraph, []*G.Node, *G.Node) {
				g := G.NewGraph()
				var in []*G.Node
				for i, s := range c.shapes {
					in = append(in, G.NewTensor(g, tensor.Float64, len(s), G.WithShape(s...), G.WithName(string(rune('a'+i)))))
				}
				return g, in, c.build(in)
			}
			gRef, inRef, outRef := build()
			g, in, out := build()
			letTwins(t, rand.New(rand.NewPCG(8, 8)), inRef, in, nil)
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithTarget(graphpass.H200), fusion.WithMatMulFusion(true), fusion.WithKeep(out))
			defer vm.Close()
			runTwins(t, gRef, vm)
			for _, u := range vm.Report().Unfused {
				t.Errorf("%s left to Gorgonia", u.Op)
			}
			sameAsGorgonia(t, "the value", out, outRef, 1e-12)
			lowersToPTX(t, vm)
		})
	}
}

// TestTransposedOperands: a product of a Transpose of its operand's last
// two axes — x·Transpose(w), Transpose(a)·b, q ××× Transpose(k, 0, 2, 1)
// in an attention — reads the operand as stored (its TransA or TransB
// flipped: graphpass.FoldTransposedOperands), so the transpose is not
// computed at all (no kernel, not left to Gorgonia) where nothing else
// reads it, and is where something does; the backward's transposes of
// products (a weight's gradient Transpose(xᵀ·dy)) are the products of the
// operands swapped; forward and backward match Gorgonia's with the CPU's
// kernels and the H200's.
func TestTransposedOperands(t *testing.T) {
	for _, c := range []struct {
		name     string
		shapes   [][]int
		build    func(in []*G.Node) *G.Node
		computed bool // a transpose is also read by something else
	}{
		{"x·wᵀ", [][]int{{13, 20}, {17, 20}}, func(in []*G.Node) *G.Node {
			return G.Must(G.Tanh(G.Must(G.Mul(in[0], G.Must(G.Transpose(in[1]))))))
		}, false},
		{"aᵀ·b", [][]int{{20, 13}, {20, 17}}, func(in []*G.Node) *G.Node {
			return G.Must(G.Mul(G.Must(G.Transpose(in[0])), in[1]))
		}, false},
		{"x·xᵀ", [][]int{{19, 7}}, func(in []*G.Node) *G.Node {
			return G.Must(G.Mul(in[0], G.Must(G.Transpose(in[0]))))
		}, false},
		{"softmax(q·kᵀ)·v", [][]int{{3, 33, 16}, {3, 33, 16}, {3, 33, 16}}, func(in []*G.Node) *G.Node {
			s := G.Must(G.BatchedMatMul(in[0], G.Must(G.Transpose(in[1], 0, 2, 1)), false, false))
			return G.Must(G.BatchedMatMul(G.Must(G.SoftMax(s)), in[2], false, false))
		}, false},
		{"x·wᵀ and wᵀ itself", [][]int{{13, 20}, {17, 20}}, func(in []*G.Node) *G.Node {
			wt := G.Must(G.Transpose(in[1]))
			return G.Must(G.Add(G.Must(G.Sum(G.Must(G.Mul(in[0], wt)))), G.Must(G.Sum(G.Must(G.Exp(wt))))))
		}, true},
	} {
		for _, tg := range targets {
			t.Run(c.name+"/"+tg.name, func(t *testing.T) {
				build := func() (*G.ExprGraph, []*G.Node, *G.Node, []*G.Node) {
					g := G.NewGraph()
					var in []*G.Node
					for i, s := range c.shapes {
						in = append(in, G.NewTensor(g, tensor.Float64, len(s), G.WithShape(s...), G.WithName(string(rune('a'+i)))))
					}
					out := c.build(in)
					loss := G.Must(G.Sum(G.Must(G.Square(out))))
					grads, err := G.Grad(loss, in...)
					if err != nil {
						t.Fatal(err)
					}
					return g, in, loss, grads
				}
				gRef, inRef, lossRef, dRef := build()
				g, in, loss, d := build()
				letTwins(t, rand.New(rand.NewPCG(2, 3)), inRef, in, nil)
				vm := fusion.NewTapeMachine(g, tg.opts...)
				defer vm.Close()
				runTwins(t, gRef, vm)
				// the forward's transposes (labelled Transpose(a), …; the
				// backward's read unnamed values): computed only where
				// read by other than a product
				forward, notComputed := 0, 0
				fwd := func(label string) bool {
					return strings.HasPrefix(label, "Transpose(") && !strings.Contains(label, "…")
				}
				rep := vm.Report()
				for _, k := range rep.Groups {
					for _, n := range k.Nodes {
						if fwd(n) {
							forward++
						}
					}
				}
				for _, u := range rep.Unfused {
					if fwd(u.Node) {
						forward++
					}
				}
				for _, n := range rep.NotComputed {
					if fwd(n) {
						notComputed++
					}
				}
				if !c.computed && notComputed == 0 {
					t.Errorf("no forward transpose among the values not computed\n%v", rep)
				}
				// nor the backward's (Transpose(xᵀ·dy) of a weight's gradient:
				// the product of the operands swapped)
				any := 0
				for _, k := range rep.Groups {
					for _, op := range k.Ops {
						if op == "Transpose" {
							any++
						}
					}
				}
				for _, u := range rep.Unfused {
					if u.Op == "Transpose" {
						any++
					}
				}
				if !c.computed && any > 0 {
					t.Errorf("%d transposes computed\n%v", any, rep)
				}
				if c.computed != (forward > 0) {
					t.Errorf("the forward's transposes computed %d times, want computed %v\n%v", forward, c.computed, rep)
				}
				sameAsGorgonia(t, "loss", loss, lossRef, 1e-12)
				for i := range d {
					sameAsGorgonia(t, fmt.Sprintf("gradient %d", i), d[i], dRef[i], 1e-12)
				}
			})
		}
	}
}

// TestChainedTransposes: two transposes in a row (each pair of the 4-D
// permutations FuzzConvNet draws, and NCHW ↔ NHWC), between two tanh, at
// shapes whose sizes are no block's multiples, with a batch of one among
// them; loss and gradient match Gorgonia's, and on a CPU whose kernels are
// machine code every kernel is (graphpass merges each transpose's axes its
// own way, (B, C, H·W) against (B, C·H, W), and reads one through the
// other through their common refinement, emitter.refineRuns: dividing the
// flat indices divided the lanes, which the machine code does not take:
// 32 of these 72 cases did before).
func TestChainedTransposes(t *testing.T) {
	chainedTransposes(t, jit.Supported(), fusion.WithBackend(fusion.CPU))
}

// chainedTransposes runs TestChainedTransposes' graphs on the backend opts
// name (TestChainedTransposesOnGPU: the GPU's kernels take the same flat
// indices); every kernel is checked to be machine code where native says.
func chainedTransposes(t *testing.T, native bool, opts ...fusion.Option) {
	perms := [][]int{{0, 1, 3, 2}, {1, 0, 2, 3}, {0, 2, 1, 3}, {3, 2, 1, 0}, {0, 3, 1, 2}, {0, 2, 3, 1}}
	for _, shape := range [][]int{{2, 3, 5, 7}, {1, 5, 6, 3}} {
		for _, p1 := range perms {
			for _, p2 := range perms {
				t.Run(fmt.Sprintf("%v %v %v", shape, p1, p2), func(t *testing.T) {
					build := func() (*G.ExprGraph, *G.Node, *G.Node, *G.Node) {
						g := G.NewGraph()
						x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(shape...), G.WithName("x"))
						y := G.Must(G.Tanh(G.Must(G.Transpose(G.Must(G.Transpose(G.Must(G.Tanh(x)), p1...)), p2...))))
						u := G.NewTensor(g, tensor.Float32, 4, G.WithShape(y.Shape()...), G.WithName("u"))
						loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, u))))
						dx, err := G.Grad(loss, x)
						if err != nil {
							t.Fatal(err)
						}
						return g, x, loss, dx[0]
					}
					gRef, xRef, lossRef, dRef := build()
					g, x, loss, d := build()
					uRef, u := gRef.ByName("u")[0], g.ByName("u")[0]
					letTwins(t, rand.New(rand.NewPCG(5, 9)), []*G.Node{xRef, uRef}, []*G.Node{x, u}, nil)
					vm := fusion.NewTapeMachine(g, opts...)
					defer vm.Close()
					if err := vm.Err(); err != nil {
						t.Fatal(err)
					}
					if native {
						allNative(t, vm)
					}
					runTwins(t, gRef, vm)
					sameAsGorgonia(t, "loss", loss, lossRef, 1e-5)
					sameAsGorgonia(t, "gradient", d, dRef, 1e-5)
				})
			}
		}
	}
}

// TestTransposeTiles: on a CPU whose kernels are machine code a group with
// one transpose that moves its operand's last axis is written over blocks
// [BLOCK_R, BLOCK_L] of its output, the rows along the axis that reads the
// operand's last (graphpass transposeTiles: its loads are contiguous down
// each block's columns, which the machine code packs and turns in
// registers), where that axis is at least 8 long (a block at least 8
// lanes wide, masked past a shorter last axis); else over rows of the
// output (BLOCK_C: its lanes loaded one by one); float32 and float64.
// Values and gradients Gorgonia's, every kernel machine code.
func TestTransposeTiles(t *testing.T) {
	needMachineCode(t, "transposes are Gorgonia's there")
	for _, c := range []struct {
		name  string
		dt    tensor.Dtype
		shape []int
		perm  []int
		want  string // the forward transpose's kernel's meta-parameters
	}{
		{"NHWC → NCHW, 28 columns of 32 channels", tensor.Float32, []int{2, 9, 28, 32}, []int{0, 3, 1, 2}, "{BLOCK_L = 32, BLOCK_R = 16}"},
		{"NCHW → NHWC, 16 channels of 10 columns", tensor.Float32, []int{2, 16, 6, 10}, []int{0, 2, 3, 1}, "{BLOCK_L = 16, BLOCK_R = 16}"},
		{"NHWC → NCHW, 7 columns in 8 lanes", tensor.Float32, []int{3, 7, 7, 128}, []int{0, 3, 1, 2}, "{BLOCK_L = 8, BLOCK_R = 64}"},
		{"NCHW → NHWC, 3 channels in 8 lanes", tensor.Float32, []int{2, 3, 9, 20}, []int{0, 2, 3, 1}, "{BLOCK_L = 8, BLOCK_R = 32}"},
		{"NCHW → NHWC, 5 columns: rows", tensor.Float32, []int{2, 64, 3, 5}, []int{0, 2, 3, 1}, "{BLOCK_C = 64}"},
		{"NHWC → NCHW in float64", tensor.Float64, []int{2, 9, 28, 32}, []int{0, 3, 1, 2}, "{BLOCK_L = 32, BLOCK_R = 16}"},
		{"NCHW → NHWC in float64, 5 columns: rows", tensor.Float64, []int{2, 64, 3, 5}, []int{0, 2, 3, 1}, "{BLOCK_C = 64}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func() (*G.ExprGraph, *G.Node, *G.Node, *G.Node) {
				g := G.NewGraph()
				x := G.NewTensor(g, c.dt, 4, G.WithShape(c.shape...), G.WithName("x"))
				y := G.Must(G.Rectify(G.Must(G.Transpose(G.Must(G.Tanh(x)), c.perm...))))
				u := G.NewTensor(g, c.dt, 4, G.WithShape(y.Shape()...), G.WithName("u"))
				loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, u))))
				dx, err := G.Grad(loss, x)
				if err != nil {
					t.Fatal(err)
				}
				return g, y, loss, dx[0]
			}
			gRef, yRef, lossRef, dRef := build()
			g, y, loss, d := build()
			letTwins(t, rand.New(rand.NewPCG(6, 1)), []*G.Node{gRef.ByName("x")[0], gRef.ByName("u")[0]}, []*G.Node{g.ByName("x")[0], g.ByName("u")[0]}, nil)
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			allNative(t, vm)
			var metas []string
			for _, n := range vm.Compiled().Graph.AllNodes() {
				if f, ok := n.Op().(*fusion.FusedOp); ok && !f.IsView() {
					metas = append(metas, f.Kernel().Meta.String())
				}
			}
			if !slices.Contains(metas, c.want) {
				t.Errorf("kernels' meta-parameters %v, want one %s", metas, c.want)
			}
			runTwins(t, gRef, vm)
			sameAsGorgonia(t, "y", y, yRef, 1e-6) // tanh within 1.5 ulp of Go's
			sameAsGorgonia(t, "loss", loss, lossRef, 1e-5)
			sameAsGorgonia(t, "gradient", d, dRef, 1e-6)
		})
	}
}
