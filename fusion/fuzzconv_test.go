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
// in float32 (the products' sums in another order), or, where a float32
// element is not, is about as near the same program in float64 as
// Gorgonia's float32 one (f32Within).
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
	if convDtype(data) == tensor.Float32 {
		f32Within(t, data, in, append([]*G.Node{loss}, d...), append([]*G.Node{lossRef}, dRef...), what)
		return
	}
	sameAsGorgonia(t, what("loss"), loss, lossRef, 1e-10)
	for i := range d {
		sameAsGorgonia(t, what(fmt.Sprintf("gradient %d", i)), d[i], dRef[i], 1e-10)
	}
}

// f32Within checks a float32 program's values (the loss, then each
// gradient) against Gorgonia's float32 ones within 1e-4·(1 + |x|); where
// an element is not, against the same program in float64 on the same
// inputs (Gorgonia's machine, the data's first byte's top bit clear): its
// error there, |x − x64|/(1 + |x64|), must be within 1e-4 or no more than
// twice Gorgonia's float32 value's, or than twice that of Gorgonia's
// float32 program run with the filters perturbed (convPerturbed32). Both
// float32 results stray from the float64 one where sums cancel (testdata
// d07968ccd3d1fac8: a gradient 1.0e-4 from it in ours, 6.7e-5 in
// Gorgonia's, 1.7e-4 apart), and Gorgonia's may be near it by luck
// (4238cd86dbf8cbe2: 1.3e-4 in ours, 1.1e-6 in Gorgonia's, 1.4e-3 with
// its filters perturbed).
func f32Within(t *testing.T, data []byte, in, got, ref []*G.Node, what func(string) string) {
	t.Helper()
	const tol = 1e-4
	name := func(i int) string {
		if i == 0 {
			return "loss"
		}
		return fmt.Sprintf("gradient %d", i-1)
	}
	var ref64, refP []*G.Node // built at the first element past tol
	for i := range got {
		g, w := floats(got[i].Value()), floats(ref[i].Value())
		if len(w) == 0 && ref[i].Value() != nil {
			g, w = []float64{scalar(got[i].Value())}, []float64{scalar(ref[i].Value())}
		}
		if len(w) == 0 || len(g) != len(w) {
			t.Fatalf("%s: %d values, Gorgonia's %d", what(name(i)), len(g), len(w))
		}
		for j := range w {
			if math.Abs(g[j]-w[j]) <= tol*(1+math.Abs(w[j])) {
				continue
			}
			if ref64 == nil {
				ref64 = convIn64(t, data, in)
			}
			w64 := elements(ref64[i].Value())
			e, eRef := math.Abs(g[j]-w64[j])/(1+math.Abs(w64[j])), math.Abs(w[j]-w64[j])/(1+math.Abs(w64[j]))
			if e <= tol || e <= 2*eRef {
				continue
			}
			// Gorgonia's float32 error may be small by luck where the
			// element is ill-conditioned (a sum of large terms that
			// cancel: testdata 4238cd86dbf8cbe2, Σ|terms| 1804 against a
			// result of 0.26): its error with the filters a few dozen ulps
			// off says how far float32's roundings can move the element
			if refP == nil {
				refP = convPerturbed32(t, data, in)
			}
			wp := elements(refP[i].Value())
			eP := math.Abs(wp[j]-w64[j]) / (1 + math.Abs(w64[j]))
			if e > 2*max(eRef, eP) {
				t.Fatalf("%s[%d] = %v, want %v (Gorgonia's float32), %v in float64: error %.2g against Gorgonia's %.2g (%.2g with the filters perturbed)", what(name(i)), j, g[j], w[j], w64[j], e, eRef, eP)
			}
		}
	}
}

// elements is v's elements, or its one value where v is a scalar.
func elements(v G.Value) []float64 {
	if x := floats(v); len(x) > 0 {
		return x
	}
	return []float64{scalar(v)}
}

// convIn64 runs data's program in float64 on Gorgonia's machine over the
// float32 program's inputs in (widened), returning its loss and gradients.
func convIn64(t *testing.T, data []byte, in []*G.Node) []*G.Node {
	t.Helper()
	return convTwin(t, "the float64 twin", append([]byte{data[0] &^ 0x80}, data[1:]...), func(i int) any { return floats(in[i].Value()) })
}

// perturbRel is how far convPerturbed32 moves each filter element: 2⁻¹⁸
// of it, 64 float32 ulps, about what the roundings of a float32 sum of 64
// terms move its result by (what each op of the program passes on to the
// next: the image's 4-D products sum up to 48–288 terms).
const perturbRel = 0x1p-18

// convPerturbed32 runs data's float32 program on Gorgonia's machine over
// in's values with every filter element perturbRel of itself off in a
// seeded random direction (the image as it is: its eighths keep the pools'
// ties), returning its loss and gradients.
func convPerturbed32(t *testing.T, data []byte, in []*G.Node) []*G.Node {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(len(data)), 7))
	return convTwin(t, "the perturbed twin", data, func(i int) any {
		v := slices.Clone(in[i].Value().Data().([]float32))
		for j := range v {
			if i > 0 {
				v[j] *= float32(1 + float64(2*rng.IntN(2)-1)*perturbRel)
			}
		}
		return v
	})
}

// convTwin runs data's program on Gorgonia's machine with input i's
// backing backing(i), returning its loss and gradients; what names it in
// failures.
func convTwin(t *testing.T, what string, data []byte, backing func(i int) any) []*G.Node {
	t.Helper()
	g, in, loss, grads, _, err := convProgram(data)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for i, n := range in {
		if err := G.Let(n, tensor.New(tensor.WithShape(n.Shape().Clone()...), tensor.WithBacking(backing(i)))); err != nil {
			t.Fatal(err)
		}
	}
	vm := G.NewTapeMachine(g)
	t.Cleanup(func() { vm.Close() })
	if err := vm.RunAll(); err != nil {
		t.Fatalf("%s on Gorgonia's machine: %v", what, err)
	}
	return append([]*G.Node{loss}, grads...)
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
