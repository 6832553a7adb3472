package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// FuzzConvNet: a random stack of convolutions (kernel, padding, stride,
// dilation and filters from the input), max pools, 4-D transposes and
// activations over a float64 image (float32 where the first byte's top
// bit is set), with the gradients of a loss with respect to the image and
// every filter, runs on tilefuse's machine with the CPU's kernels (where
// they are machine code, im2col, col2im, the pools and the transposes
// among them) and with the H200's (run on the CPU) and agrees with
// Gorgonia's own machine within 1e-10·(1 + |x|) in float64, 1e-4·(1 + |x|)
// in float32 (the products' sums in another order).
func FuzzConvNet(f *testing.F) {
	for _, s := range []string{"\x01\x02\x07\x09\x00\x11\x22\x01\x33", "\x02\x01\x0a\x08\x01\x02\x13\x04\x00\x21", "\x00\x03\x05\x0b\x03\x10\x02\x31\x12\x00\x02",
		"\x81\x02\x07\x09\x00\x11\x22\x01\x33", "\x80\x03\x05\x0b\x03\x10\x02\x31\x12\x00\x02\x02\x00\x01"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 40 {
			data = data[:40]
		}
		for _, tg := range targets {
			checkConvNet(t, data, tg.name, tg.opts...)
		}
	})
}

// convProgram decodes data into a graph (see FuzzConvNet), twice the same.
func convProgram(data []byte) (g *G.ExprGraph, in []*G.Node, loss *G.Node, grads []*G.Node, listing string, err error) {
	defer func() {
		if r := recover(); r != nil { // Gorgonia's G.Must
			err = fmt.Errorf("the generator: %v", r)
		}
	}()
	pos := 0
	n := func(k int) int { // the next byte mod k
		if pos >= len(data) {
			return 0
		}
		pos++
		return int(data[pos-1]) % k
	}
	var lines []string
	g = G.NewGraph()
	dt := convDtype(data)
	b, c, h, w := 1+n(2), 1+n(3), 4+n(9), 4+n(9)
	x := G.NewTensor(g, dt, 4, G.WithShape(b, c, h, w), G.WithName("x"))
	in = append(in, x)
	lines = append(lines, fmt.Sprintf("x %v", x.Shape()))
	v := x
	for layer := 0; layer < 1+n(4); layer++ {
		s := v.Shape()
		switch n(5) {
		case 0, 1: // a convolution
			k, st, d, oc := 1+n(3), 1+n(2), 1+n(2), 1+n(3)
			p := n(k)
			if (s[2]+2*p-d*(k-1)-1)/st+1 < 1 || (s[3]+2*p-d*(k-1)-1)/st+1 < 1 || s[2]+2*p < d*(k-1)+1 || s[3]+2*p < d*(k-1)+1 {
				continue
			}
			fw := G.NewTensor(g, dt, 4, G.WithShape(oc, s[1], k, k), G.WithName(fmt.Sprintf("f%d", layer)))
			in = append(in, fw)
			v = G.Must(G.Conv2d(v, fw, tensor.Shape{k, k}, []int{p, p}, []int{st, st}, []int{d, d}))
			lines = append(lines, fmt.Sprintf("Conv2d %d filters %dx%d pad %d stride %d dilation %d → %v", oc, k, k, p, st, d, v.Shape()))
		case 2: // a max pool
			k, st := 2+n(2), 1+n(3)
			p := n(k)
			if s[2]+2*p < k || s[3]+2*p < k {
				continue
			}
			v = G.Must(G.MaxPool2D(v, tensor.Shape{k, k}, []int{p, p}, []int{st, st}))
			lines = append(lines, fmt.Sprintf("MaxPool2D %dx%d pad %d stride %d → %v", k, k, p, st, v.Shape()))
		case 3: // a transpose of the four axes
			perm := [][]int{{0, 1, 3, 2}, {1, 0, 2, 3}, {0, 2, 1, 3}, {3, 2, 1, 0}, {0, 3, 1, 2}}[n(5)]
			v = G.Must(G.Transpose(v, perm...))
			lines = append(lines, fmt.Sprintf("Transpose %v → %v", perm, v.Shape()))
		default: // an activation
			if n(2) == 0 {
				v = G.Must(G.Rectify(v))
				lines = append(lines, "Rectify")
			} else {
				v = G.Must(G.Tanh(v))
				lines = append(lines, "Tanh")
			}
		}
	}
	loss = G.Must(G.Sum(G.Must(G.Square(v))))
	grads, err = G.Grad(loss, in...)
	return g, in, loss, grads, strings.Join(lines, "\n"), err
}

func checkConvNet(t *testing.T, data []byte, leg string, opts ...fusion.Option) {
	gRef, inRef, lossRef, dRef, listing, err := convProgram(data)
	if err != nil {
		t.Skipf("Gorgonia does not build this program: %v", err)
	}
	g, in, loss, d, _, _ := convProgram(data)
	// the image in eighths (equal elements: ties in the pools' windows),
	// the filters not: a sum of products of eighths may cancel exactly,
	// which Gorgonia's BLAS computes as 0 and the kernels' fused
	// multiply-adds as the rounding error of one product (−6.9e-18), and
	// a ReLU's gradient there is 1 against 0 (testdata 8134253fea67fcf0)
	rng := rand.New(rand.NewPCG(uint64(len(data)), 5))
	letTwins(t, rng, inRef[:1], in[:1], func(x float64) float64 { return math.Round(x*8) / 8 })
	letTwins(t, rng, inRef[1:], in[1:], nil)
	vmRef := G.NewTapeMachine(gRef)
	defer vmRef.Close()
	if err := vmRef.RunAll(); err != nil {
		t.Skipf("Gorgonia's machine does not run this program: %v", err)
	}
	vm := fusion.NewTapeMachine(g, append(opts, fusion.WithMatMulFusion(true))...)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatalf("%s: %v\n%s\n%v", leg, err, listing, vm.Report())
	}
	what := func(s string) string { return leg + ": " + s + "\n" + listing }
	tol := 1e-10
	if convDtype(data) == tensor.Float32 {
		tol = 1e-4
	}
	sameAsGorgonia(t, what("loss"), loss, lossRef, tol)
	for i := range d {
		sameAsGorgonia(t, what(fmt.Sprintf("gradient %d", i)), d[i], dRef[i], tol)
	}
}

// convDtype is the type of convProgram's tensors: float32 where data's
// first byte has its top bit set (its other uses read it modulo small
// numbers, which that bit does not change), else float64.
func convDtype(data []byte) tensor.Dtype {
	if len(data) > 0 && data[0]&0x80 != 0 {
		return tensor.Float32
	}
	return tensor.Float64
}
