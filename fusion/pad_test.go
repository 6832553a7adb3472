package fusion_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestPaddedOperands: x·W + b with rows of x, W and the output not 16-byte
// aligned (1030×517 by 517×519), compiled for the H200 at a tensor-core
// precision, copies x and W into aligned rows by two pad kernels before
// its product (graphpass's padOperands), and, run on the CPU, agrees with
// a float64 reference that sees the precision's operand conversions
// within float32 summation's error; at ieee and for a CPU target no pad
// kernel is written.
func TestPaddedOperands(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 276M multiply-adds on the CPU")
	}
	opts := func(target bool, p tile.Precision) []fusion.Option {
		o := []fusion.Option{fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true), fusion.WithPrecision(p)}
		if target {
			o = append(o, fusion.WithTarget(graphpass.H200))
		}
		return o
	}
	checkPadded(t, []padCase{
		{"h200 tf32", 1030, 517, 519, opts(true, tile.PrecTF32), tile.PrecTF32, 2},
		{"h200 bf16, k aligned", 1030, 516, 519, opts(true, tile.PrecBF16), tile.PrecBF16, 1},
		{"h200 ieee", 1030, 517, 519, opts(true, tile.PrecIEEE), tile.PrecIEEE, 0},
		{"cpu tf32", 1030, 517, 519, opts(false, tile.PrecTF32), tile.PrecTF32, 0},
	})
}

type padCase struct {
	name    string
	m, k, n int
	opts    []fusion.Option
	prec    tile.Precision // the precision the reference converts operands to
	pads    int            // pad kernels the compiled graph has
}

func checkPadded(t *testing.T, cases []padCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(c.m, c.k), G.WithName("x"))
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(c.k, c.n), G.WithName("w"))
			b := G.NewVector(g, tensor.Float32, G.WithShape(c.n), G.WithName("b"))
			y := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))
			vm := fusion.NewTapeMachine(g, c.opts...)
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			if pads := padKernels(vm); len(pads) != c.pads {
				t.Fatalf("%d pad kernels, want %d\n%v", len(pads), c.pads, vm.Report())
			}
			rng := rand.New(rand.NewPCG(31, 32))
			data := func(n int, scale float64) []float32 {
				d := make([]float32, n)
				for i := range d {
					d[i] = float32((rng.Float64()*2 - 1) * scale)
				}
				return d
			}
			xd, wd, bd := data(c.m*c.k, 1), data(c.k*c.n, 1), data(c.n, 1)
			for _, l := range []struct {
				n     *G.Node
				d     []float32
				shape []int
			}{{x, xd, []int{c.m, c.k}}, {w, wd, []int{c.k, c.n}}, {b, bd, []int{c.n}}} {
				if err := G.Let(l.n, tensor.New(tensor.WithShape(l.shape...), tensor.WithBacking(append([]float32(nil), l.d...)))); err != nil {
					t.Fatal(err)
				}
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			got := y.Value().Data().([]float32)
			ca, cb := referenceOperands(c.prec)
			worst := 0.0
			for i := range c.m {
				for j := range c.n {
					s, mag := float64(bd[j]), math.Abs(float64(bd[j]))
					for l := range c.k {
						p := ca(xd[i*c.k+l]) * cb(wd[l*c.n+j])
						s, mag = s+p, mag+math.Abs(p)
					}
					// float32 sums of k+1 terms: within (k+1)·2⁻²⁴ of Σ|terms|
					if e := math.Abs(float64(got[i*c.n+j])-s) / (mag * float64(c.k+1) * 0x1p-24); !(e <= worst) {
						worst = e
					}
				}
			}
			if worst > 1 || math.IsNaN(worst) {
				t.Fatalf("off the reference by %.3g of float32 summation's bound", worst)
			}
		})
	}
}

// TestPaddedBatchedOperands: a batch of products x[z]·w[z] with x's rows
// odd (2 × 520×515 by 515×516), compiled for the H200 at TF32, copies
// each matrix of x into aligned rows (one pad kernel, the batch on its
// program axis 2; w's rows are aligned) and, run on the CPU, agrees with
// float64 on every element of every matrix.
func TestPaddedBatchedOperands(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 276M multiply-adds on the CPU")
	}
	const batch, m, k, n = 2, 520, 515, 516
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(batch, m, k), G.WithName("x"))
	w := G.NewTensor(g, tensor.Float32, 3, G.WithShape(batch, k, n), G.WithName("w"))
	y := G.Must(G.BatchedMatMul(x, w, false, false))
	vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true),
		fusion.WithTarget(graphpass.H200), fusion.WithPrecision(tile.PrecTF32))
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	pads := padKernels(vm)
	if len(pads) != 1 {
		t.Fatalf("%d pad kernels, want 1\n%v", len(pads), vm.Report())
	}
	if g := pads[0].Grid(); g[2] != batch {
		t.Fatalf("the pad kernel's grid %v: want the batch on axis 2", g)
	}
	rng := rand.New(rand.NewPCG(41, 42))
	data := func(size int) []float32 {
		d := make([]float32, size)
		for i := range d {
			d[i] = float32(rng.Float64()*2 - 1)
		}
		return d
	}
	xd, wd := data(batch*m*k), data(batch*k*n)
	if err := G.Let(x, tensor.New(tensor.WithShape(batch, m, k), tensor.WithBacking(append([]float32(nil), xd...)))); err != nil {
		t.Fatal(err)
	}
	if err := G.Let(w, tensor.New(tensor.WithShape(batch, k, n), tensor.WithBacking(append([]float32(nil), wd...)))); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	got := y.Value().Data().([]float32)
	ca, cb := referenceOperands(tile.PrecTF32)
	worst := 0.0
	for z := range batch {
		for i := range m {
			for j := range n {
				s, mag := 0.0, 0.0
				for l := range k {
					p := ca(xd[(z*m+i)*k+l]) * cb(wd[(z*k+l)*n+j])
					s, mag = s+p, mag+math.Abs(p)
				}
				if e := math.Abs(float64(got[(z*m+i)*n+j])-s) / (mag * k * 0x1p-24); !(e <= worst) {
					worst = e
				}
			}
		}
	}
	if worst > 1 || math.IsNaN(worst) {
		t.Fatalf("off the reference by %.3g of float32 summation's bound", worst)
	}
}

// padKernels are the pad kernels (graphpass's padded copies) of vm's graph.
func padKernels(vm *fusion.Machine) []*fusion.FusedOp {
	var pads []*fusion.FusedOp
	for _, nd := range vm.Compiled().Graph.AllNodes() {
		if f, ok := nd.Op().(*fusion.FusedOp); ok && strings.HasSuffix(f.Kernel().Name, "_pad") {
			pads = append(pads, f)
		}
	}
	return pads
}

// referenceOperands converts a product's float32 operands as its dot at
// precision p sees them, for a float64 reference (3xTF32 is within
// float32's error of exact: its operands as they are).
func referenceOperands(p tile.Precision) (a, b func(float32) float64) {
	id := func(v float32) float64 { return float64(v) }
	if p == tile.PrecTF32x3 {
		return id, id
	}
	ca, cb := p.Operands()
	if ca == nil {
		return id, id
	}
	return func(v float32) float64 { return float64(ca(v)) }, func(v float32) float64 { return float64(cb(v)) }
}
