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
)

// TestConvNet: Gorgonia's convolutional network (its convnet example's
// layers: Conv2d, Rectify, MaxPool2D twice, a dense layer, SoftMax, the
// cross-entropy and its gradients) runs on tilefuse's machine with the
// results of Gorgonia's own, in float64 and float32, with the CPU's kernels
// and with the H200's (run on the CPU): the convolutions' products, the
// ReLUs, the dense layers and the softmax fused, and with the GPU's
// kernels everything — im2col, the NHWC → NCHW transposes, MaxPool2D and
// its backward, col2im — as with the CPU's where kernels are machine code,
// each of them machine code there (allNative; elsewhere Gorgonia runs
// them: graphpass.KernelOn; the report says why).
func TestConvNet(t *testing.T) {
	for _, c := range []struct {
		dt  tensor.Dtype
		tol float64
	}{{tensor.Float64, 1e-12}, {tensor.Float32, 2e-5}} {
		for _, tg := range targets {
			t.Run(c.dt.String()+"/"+tg.name, func(t *testing.T) { convNet(t, c.dt, c.tol, tg.fused, tg.opts...) })
		}
	}
}

func convNet(t *testing.T, dt tensor.Dtype, tol float64, fused bool, opts ...fusion.Option) {
	build := func() (*G.ExprGraph, []*G.Node, *G.Node, []*G.Node) {
		g := G.NewGraph()
		const bs = 3
		x := G.NewTensor(g, dt, 4, G.WithShape(bs, 1, 28, 28), G.WithName("x"))
		y := G.NewMatrix(g, dt, G.WithShape(bs, 10), G.WithName("y"))
		w0 := G.NewTensor(g, dt, 4, G.WithShape(8, 1, 3, 3), G.WithName("w0"))
		w1 := G.NewTensor(g, dt, 4, G.WithShape(16, 8, 3, 3), G.WithName("w1"))
		w2 := G.NewMatrix(g, dt, G.WithShape(16*7*7, 32), G.WithName("w2"))
		w3 := G.NewMatrix(g, dt, G.WithShape(32, 10), G.WithName("w3"))
		layer := func(in, w *G.Node) *G.Node {
			cv := G.Must(G.Conv2d(in, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
			return G.Must(G.MaxPool2D(G.Must(G.Rectify(cv)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		}
		p := layer(layer(x, w0), w1)
		h := G.Must(G.Rectify(G.Must(G.Mul(G.Must(G.Reshape(p, tensor.Shape{bs, 16 * 7 * 7})), w2))))
		o := G.Must(G.SoftMax(G.Must(G.Mul(h, w3))))
		loss := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.HadamardProd(G.Must(G.Log(o)), y))))))
		ws := []*G.Node{x, y, w0, w1, w2, w3}
		grads, err := G.Grad(loss, ws[2:]...)
		if err != nil {
			t.Fatal(err)
		}
		return g, ws, loss, grads
	}
	gRef, inRef, lossRef, dRef := build()
	g, in, loss, d := build()
	letTwins(t, rand.New(rand.NewPCG(28, 28)), inRef, in, nil)
	vm := fusion.NewTapeMachine(g, opts...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	left := map[string]int{}
	for _, u := range vm.Report().Unfused {
		left[u.Op]++
		if fused || !cpuLeaves(u.Op) {
			t.Errorf("%s left to Gorgonia", u.Op)
		}
		if windowOps[u.Op] && !strings.Contains(u.Why, "not as machine code") {
			t.Errorf("%s left to Gorgonia, the report says why not: %q", u.Op, u.Why)
		}
	}
	for op := range windowOps {
		if !fused && cpuLeaves(op) && left[op] == 0 {
			t.Errorf("no %s left to Gorgonia with the CPU's kernels", op)
		}
	}
	if !fused && jit.Supported() {
		allNative(t, vm)
	}
	// a window op's operand is computed once an element, not in the window
	// op's kernel for each window that reads it (graphpass windowed)
	for _, grp := range vm.Report().Groups {
		var windows []string
		for _, op := range grp.Ops {
			if windowOps[op] {
				windows = append(windows, op)
			}
		}
		if len(windows) > 1 {
			t.Errorf("kernel %s computes %v: a window op's operand in its kernel", grp.Root, windows)
		}
	}
	vmRef := G.NewTapeMachine(gRef)
	defer vmRef.Close()
	for run := 0; run < 2; run++ {
		if err := vmRef.RunAll(); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatalf("%v\n%v", err, vm.Report())
		}
		sameAsGorgonia(t, fmt.Sprintf("run %d: loss", run), loss, lossRef, tol)
		for i := range d {
			sameAsGorgonia(t, fmt.Sprintf("run %d: gradient %d", run, i), d[i], dRef[i], tol)
		}
		vmRef.Reset()
	}
	t.Logf("%d kernels; left to Gorgonia: %v", vm.Report().Kernels(), left)
}

// TestConvolutions: Gorgonia's Conv2d at paddings, strides and dilations
// that put windows past every edge (odd image sizes, kernels not square),
// its value and the gradients of Σ tanh(conv)² with respect to the image
// and the filter, in float64 and float32, match Gorgonia's with the CPU's
// kernels and with the H200's (run on the CPU), where im2col (it reads the
// image, or zero past an edge) and col2im (the image's gradient) fuse (on
// the CPU where kernels are machine code: cpuLeaves), every kernel
// machine code there.
func TestConvolutions(t *testing.T) {
	for _, c := range []struct {
		name                        string
		img, filter                 []int
		kernel, pad, stride, dilate []int
	}{
		{"3x3 pad 1", []int{2, 3, 9, 11}, []int{4, 3, 3, 3}, []int{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}},
		{"5x3 pad 2,0 stride 2,1", []int{2, 2, 13, 7}, []int{3, 2, 5, 3}, []int{5, 3}, []int{2, 0}, []int{2, 1}, []int{1, 1}},
		{"2x2 stride 2", []int{1, 4, 10, 10}, []int{5, 4, 2, 2}, []int{2, 2}, []int{0, 0}, []int{2, 2}, []int{1, 1}},
		{"3x3 pad 2 dilation 2", []int{2, 1, 8, 9}, []int{2, 1, 3, 3}, []int{3, 3}, []int{2, 2}, []int{1, 1}, []int{2, 2}},
		{"3x3 pad 1 stride 3", []int{3, 2, 11, 10}, []int{4, 2, 3, 3}, []int{3, 3}, []int{1, 1}, []int{3, 3}, []int{1, 1}},
		// images of 7 × 7: on the CPU 4 images an im2col program (graphpass
		// BLOCK_F), the last program one image
		{"3x3 pad 1, 7x7 images, batch 5", []int{5, 3, 7, 7}, []int{4, 3, 3, 3}, []int{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}},
	} {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				build := func() (*G.ExprGraph, []*G.Node, *G.Node, []*G.Node) {
					g := G.NewGraph()
					x := G.NewTensor(g, dt, 4, G.WithShape(c.img...), G.WithName("x"))
					w := G.NewTensor(g, dt, 4, G.WithShape(c.filter...), G.WithName("w"))
					cv := G.Must(G.Conv2d(x, w, tensor.Shape(c.kernel), c.pad, c.stride, c.dilate))
					loss := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Tanh(cv))))))
					grads, err := G.Grad(loss, x, w)
					if err != nil {
						t.Fatal(err)
					}
					return g, []*G.Node{x, w}, cv, append(grads, loss)
				}
				gRef, inRef, cvRef, outRef := build()
				g, in, cv, out := build()
				letTwins(t, rand.New(rand.NewPCG(5, 5)), inRef, in, nil)
				tol := 1e-12
				if dt == tensor.Float32 {
					tol = 2e-5 // products and sums in another order
				}
				for _, tg := range targets {
					convolution(t, g, cv, out, cvRef, outRef, gRef, tol, tg.fused, tg.opts...)
				}
			})
		}
	}
}

// windowOps are the report's names of the ops that read a window of
// their operand's elements for each of theirs.
var windowOps = map[string]bool{"Im2Col": true, "Col2Im": true, "MaxPool": true, "MaxPool's gradient": true}

// cpuLeaves reports whether Gorgonia runs op (the report's name) on the
// CPU target (graphpass.KernelOn): every transpose and window op where
// kernels are not machine code, none where they are.
func cpuLeaves(op string) bool {
	return (op == "Transpose" || windowOps[op]) && !jit.Supported()
}

func convolution(t *testing.T, g *G.ExprGraph, cv *G.Node, out []*G.Node, cvRef *G.Node, outRef []*G.Node, gRef *G.ExprGraph, tol float64, fused bool, opts ...fusion.Option) {
	vm := fusion.NewTapeMachine(g, append(opts, fusion.WithKeep(cv))...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	for _, u := range vm.Report().Unfused {
		if fused || !cpuLeaves(u.Op) {
			t.Errorf("%s left to Gorgonia", u.Op)
		}
	}
	if fused {
		lowersToPTX(t, vm)
	} else if jit.Supported() {
		allNative(t, vm)
	}
	runTwins(t, gRef, vm)
	for i, n := range append([]*G.Node{cv}, out...) {
		sameAsGorgonia(t, fmt.Sprintf("fused %v: value %d", fused, i), n, append([]*G.Node{cvRef}, outRef...)[i], tol)
	}
}

// TestMaxPools: Gorgonia's MaxPool2D at windows that overlap (stride
// below the kernel: several windows hold an element), pad past the edges
// and do not tile the image, over values with many ties (a few levels: the
// first largest element of a window takes its gradient, as Gorgonia's
// mask has it), its value and the gradient of Σ pool·y with respect to the
// image are Gorgonia's bit for bit (the same comparisons, the same
// additions in the same order), in float64 and float32, with the CPU's
// kernels and with the H200's (run on the CPU), where the pool and its
// backward are kernels (on the CPU where kernels are machine code, each
// machine code: cpuLeaves).
func TestMaxPools(t *testing.T) {
	for _, c := range []struct {
		name        string
		img         []int
		kernel      []int
		pad, stride []int
	}{
		{"2x2 stride 2", []int{2, 3, 8, 10}, []int{2, 2}, []int{0, 0}, []int{2, 2}},
		{"3x3 stride 1 pad 1", []int{2, 2, 7, 9}, []int{3, 3}, []int{1, 1}, []int{1, 1}},
		{"3x2 stride 2,1 pad 1,0", []int{1, 3, 9, 7}, []int{3, 2}, []int{1, 0}, []int{2, 1}},
		{"2x2 stride 2, odd image", []int{3, 2, 11, 9}, []int{2, 2}, []int{0, 0}, []int{2, 2}},
		{"3x3 stride 2 pad 1", []int{2, 2, 10, 10}, []int{3, 3}, []int{1, 1}, []int{2, 2}},
		{"2x3 stride 2 explicit pad 1,0,0,2", []int{2, 2, 9, 8}, []int{2, 3}, []int{1, 0, 0, 2}, []int{2, 2}},
	} {
		for _, tg := range targets {
			for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
				t.Run(c.name+"/"+tg.name+"/"+dt.String(), func(t *testing.T) {
					build := func() (*G.ExprGraph, []*G.Node, *G.Node, *G.Node) {
						g := G.NewGraph()
						x := G.NewTensor(g, dt, 4, G.WithShape(c.img...), G.WithName("x"))
						p := G.Must(G.MaxPool2D(x, tensor.Shape(c.kernel), c.pad, c.stride))
						y := G.NewTensor(g, dt, 4, G.WithShape(p.Shape()...), G.WithName("y"))
						loss := G.Must(G.Sum(G.Must(G.HadamardProd(p, y))))
						grads, err := G.Grad(loss, x)
						if err != nil {
							t.Fatal(err)
						}
						return g, []*G.Node{x, y}, p, grads[0]
					}
					gRef, inRef, pRef, dRef := build()
					g, in, p, d := build()
					letTwins(t, rand.New(rand.NewPCG(7, 11)), inRef[:1], in[:1], func(x float64) float64 { return math.Round(x*2) / 2 }) // five levels: ties
					letTwins(t, rand.New(rand.NewPCG(7, 12)), inRef[1:], in[1:], nil)
					vm := fusion.NewTapeMachine(g, append(tg.opts, fusion.WithKeep(p))...)
					defer vm.Close()
					if err := vm.Err(); err != nil {
						t.Fatal(err)
					}
					for _, u := range vm.Report().Unfused {
						if tg.fused || !cpuLeaves(u.Op) {
							t.Errorf("%s left to Gorgonia", u.Op)
						}
					}
					if tg.fused {
						lowersToPTX(t, vm)
					} else if jit.Supported() {
						allNative(t, vm)
					}
					runTwins(t, gRef, vm)
					// the same comparisons, the same additions in the same order: bit for bit
					sameAsGorgonia(t, "the pool", p, pRef, 0)
					sameAsGorgonia(t, "its gradient", d, dRef, 0)
				})
			}
		}
	}
}

// TestWindowOpsAroundTransposes: on the CPU where kernels are machine
// code, window ops next to transposes — an NHWC image transposed into a
// convolution (im2col reads through the transpose), a max pool whose
// output is transposed over its rows and columns (its backward keeps a
// group of its own, graphpass windowJoins: the rows' lanes would not run
// along its channels), a max pool of an image in (N, W, H, C) (its
// backward joins the transpose back, whose lanes run along its channels,
// and stays machine code, written over blocks of the backward's shape with
// its lanes along the channels: the transposes' reads split through the
// shapes' common refinement), a batch of one (axes of size 1 in every flat index)
// — are kernels, every kernel machine code, with Gorgonia's values and
// gradients (float32; the products' sums in another order).
func TestWindowOpsAroundTransposes(t *testing.T) {
	needMachineCode(t, "window ops are Gorgonia's (TestConvNet checks the reason)")
	for _, c := range []struct {
		name  string
		build func(g *G.ExprGraph) ([]*G.Node, *G.Node)
		// the max pool's backward shares a kernel with a transpose
		// (checked where set)
		poolGradWithTranspose bool
	}{
		{"an NHWC image into a convolution and a pool", func(g *G.ExprGraph) ([]*G.Node, *G.Node) {
			x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(2, 9, 10, 3), G.WithName("x"))
			w := G.NewTensor(g, tensor.Float32, 4, G.WithShape(4, 3, 3, 3), G.WithName("w"))
			cv := G.Must(G.Conv2d(G.Must(G.Transpose(x, 0, 3, 1, 2)), w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
			p := G.Must(G.MaxPool2D(G.Must(G.Rectify(cv)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			return []*G.Node{x, w}, G.Must(G.Sum(G.Must(G.Square(p))))
		}, false},
		{"a pool transposed over its rows and columns", func(g *G.ExprGraph) ([]*G.Node, *G.Node) {
			x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(2, 3, 12, 10), G.WithName("x"))
			p := G.Must(G.MaxPool2D(G.Must(G.Tanh(x)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			q := G.Must(G.Transpose(p, 0, 1, 3, 2))
			u := G.NewTensor(g, tensor.Float32, 4, G.WithShape(q.Shape()...), G.WithName("u"))
			return []*G.Node{x, u}, G.Must(G.Sum(G.Must(G.HadamardProd(q, u))))
		}, false},
		{"a pool of an image in (N, W, H, C)", func(g *G.ExprGraph) ([]*G.Node, *G.Node) {
			z := G.NewTensor(g, tensor.Float32, 4, G.WithShape(2, 10, 12, 3), G.WithName("z"))
			p := G.Must(G.MaxPool2D(G.Must(G.Tanh(G.Must(G.Transpose(z, 0, 3, 2, 1)))), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			u := G.NewTensor(g, tensor.Float32, 4, G.WithShape(p.Shape()...), G.WithName("u"))
			return []*G.Node{z, u}, G.Must(G.Sum(G.Must(G.HadamardProd(p, u))))
		}, true},
		{"a batch of one, a 3-channel image, stride 2", func(g *G.ExprGraph) ([]*G.Node, *G.Node) {
			x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(1, 3, 11, 5), G.WithName("x"))
			w := G.NewTensor(g, tensor.Float32, 4, G.WithShape(2, 3, 2, 2), G.WithName("w"))
			cv := G.Must(G.Conv2d(G.Must(G.Transpose(x, 0, 1, 3, 2)), w, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}, []int{1, 1}))
			return []*G.Node{x, w}, G.Must(G.Sum(G.Must(G.Square(cv))))
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func() (*G.ExprGraph, []*G.Node, *G.Node, []*G.Node) {
				g := G.NewGraph()
				in, loss := c.build(g)
				grads, err := G.Grad(loss, in...)
				if err != nil {
					t.Fatal(err)
				}
				return g, in, loss, grads
			}
			gRef, inRef, lossRef, dRef := build()
			g, in, loss, d := build()
			letTwins(t, rand.New(rand.NewPCG(3, 3)), inRef, in, nil)
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			for _, u := range vm.Report().Unfused {
				if windowOps[u.Op] || u.Op == "Transpose" {
					t.Errorf("%s left to Gorgonia: %s", u.Op, u.Why)
				}
			}
			allNative(t, vm)
			if c.poolGradWithTranspose {
				i := slices.IndexFunc(vm.Report().Groups, func(g fusion.GroupInfo) bool {
					return slices.Contains(g.Ops, "MaxPool's gradient") && slices.Contains(g.Ops, "Transpose")
				})
				if i < 0 {
					t.Fatalf("the max pool's backward has a kernel of its own:\n%v", vm.Report())
				}
				// over blocks of the pool's backward, its lanes along the
				// channels (graphpass rootPerm: stores contiguous through
				// the transpose), not over the rows of the transpose's
				// output (one pixel's channels a program)
				name := vm.Report().Groups[i].Kernel
				for _, n := range vm.Compiled().Graph.AllNodes() {
					if f, ok := n.Op().(*fusion.FusedOp); ok && f.Kernel().Name == name && f.Kernel().Meta["BLOCK_L"] == 0 {
						t.Errorf("kernel %s written with %v, not over lanes", name, f.Kernel().Meta)
					}
				}
			}
			runTwins(t, gRef, vm)
			sameAsGorgonia(t, "loss", loss, lossRef, 2e-5)
			for i := range d {
				sameAsGorgonia(t, fmt.Sprintf("gradient %d", i), d[i], dRef[i], 2e-5)
			}
		})
	}
}
