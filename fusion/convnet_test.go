package fusion_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestConvNet: Gorgonia's convolutional network (its convnet example's
// layers: Conv2d, Rectify, MaxPool2D twice, a dense layer, SoftMax, the
// cross-entropy and its gradients) runs on tilefuse's machine with the
// results of Gorgonia's own, in float64 and float32: the convolutions'
// products, their NHWC → NCHW transposes with the ReLUs, the dense layers
// and the softmax fused; im2col, col2im, MaxPool2D and its backward left
// to Gorgonia (said in the report).
func TestConvNet(t *testing.T) {
	for _, c := range []struct {
		dt  tensor.Dtype
		tol float64
	}{{tensor.Float64, 1e-12}, {tensor.Float32, 2e-5}} {
		t.Run(c.dt.String(), func(t *testing.T) {
			build := func() (*G.ExprGraph, []*G.Node, *G.Node, []*G.Node) {
				g := G.NewGraph()
				const bs = 3
				x := G.NewTensor(g, c.dt, 4, G.WithShape(bs, 1, 28, 28), G.WithName("x"))
				y := G.NewMatrix(g, c.dt, G.WithShape(bs, 10), G.WithName("y"))
				w0 := G.NewTensor(g, c.dt, 4, G.WithShape(8, 1, 3, 3), G.WithName("w0"))
				w1 := G.NewTensor(g, c.dt, 4, G.WithShape(16, 8, 3, 3), G.WithName("w1"))
				w2 := G.NewMatrix(g, c.dt, G.WithShape(16*7*7, 32), G.WithName("w2"))
				w3 := G.NewMatrix(g, c.dt, G.WithShape(32, 10), G.WithName("w3"))
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
			rng := rand.New(rand.NewPCG(28, 28))
			for i := range in {
				n := in[i].Shape().TotalSize()
				var v *tensor.Dense
				if c.dt == tensor.Float64 {
					b := make([]float64, n)
					for j := range b {
						b[j] = rng.Float64()*2 - 1
					}
					v = tensor.New(tensor.WithShape(in[i].Shape().Clone()...), tensor.WithBacking(b))
				} else {
					b := make([]float32, n)
					for j := range b {
						b[j] = float32(rng.Float64()*2 - 1)
					}
					v = tensor.New(tensor.WithShape(in[i].Shape().Clone()...), tensor.WithBacking(b))
				}
				if err := G.Let(inRef[i], v); err != nil {
					t.Fatal(err)
				}
				if err := G.Let(in[i], v.Clone()); err != nil {
					t.Fatal(err)
				}
			}
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			left := map[string]int{}
			for _, u := range vm.Report().Unfused {
				left[strings.SplitN(u.Op, "{", 2)[0]]++
				if !strings.HasPrefix(u.Op, "im2col") && !strings.HasPrefix(u.Op, "col2im") && !strings.HasPrefix(u.Op, "MaxPool") {
					t.Errorf("%s left to Gorgonia", u.Op)
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
				if a, b := scalar(loss.Value()), scalar(lossRef.Value()); !(math.Abs(a-b) <= c.tol*(1+math.Abs(b))) {
					t.Fatalf("run %d: loss %v fused, %v in Gorgonia", run, a, b)
				}
				for i := range d {
					got, want := floats(d[i].Value()), floats(dRef[i].Value())
					if len(got) != len(want) || len(want) == 0 {
						t.Fatalf("gradient %d: %d values, want %d", i, len(got), len(want))
					}
					for j := range want {
						if !(math.Abs(got[j]-want[j]) <= c.tol*(1+math.Abs(want[j]))) {
							t.Fatalf("run %d: gradient %d [%d] = %v, want %v", run, i, j, got[j], want[j])
						}
					}
				}
				vmRef.Reset()
			}
			t.Logf("%d kernels; left to Gorgonia: %v", vm.Report().Kernels(), left)
		})
	}
}
