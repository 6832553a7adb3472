package fusion_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// Fused against Gorgonia's tape machine on the CPU, side by side (compare
// the ratios; bench/RESULTS.md has numbers). Inputs are float32, 1M elements.

type workload struct {
	name  string
	build func(g *G.ExprGraph, x *G.Node)
}

var workloads = []workload{
	{"chain", func(g *G.ExprGraph, x *G.Node) { // gelu(x·0.5 + 1)·2, tanh form, op by op
		h := G.Must(G.Add(G.Must(G.Mul(x, G.NewConstant(float32(0.5)))), G.NewConstant(float32(1))))
		inner := G.Must(G.Mul(G.Must(G.Add(h, G.Must(G.Mul(G.Must(G.Cube(h)), G.NewConstant(float32(0.044715)))))), G.NewConstant(float32(math.Sqrt(2/math.Pi)))))
		G.Must(G.Mul(G.Must(G.HadamardProd(h, G.Must(G.Add(G.Must(G.Tanh(inner)), G.NewConstant(float32(1)))))), G.NewConstant(float32(1))))
	}},
	{"softmax", func(g *G.ExprGraph, x *G.Node) { // op by op
		e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Max(x, 1)), nil, []byte{1}))))
		G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))
	}},
	{"layernorm", func(g *G.ExprGraph, x *G.Node) {
		mu := G.Must(G.Mean(x, 1))
		xc := G.Must(G.BroadcastSub(x, mu, nil, []byte{1}))
		v := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
		G.Must(G.BroadcastHadamardProd(xc, G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(v, G.NewConstant(float32(1e-5)))))))), nil, []byte{1}))
	}},
}

func benchGraph(b *testing.B, w workload, fused bool) {
	const rows, cols = 1024, 1024
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("x"))
	w.build(g, x)
	d := make([]float32, rows*cols)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range d {
		d[i] = float32(rng.Float64()*4 - 2)
	}
	G.Let(x, tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(d)))
	var vm interface {
		RunAll() error
		Reset()
		Close() error
	}
	if fused {
		m := fusion.NewTapeMachine(g)
		if err := m.Err(); err != nil {
			b.Fatal(err)
		}
		vm = m
	} else {
		vm = G.NewTapeMachine(g)
	}
	defer vm.Close()
	b.SetBytes(8 * rows * cols) // one read and one write of the data
	for b.Loop() {
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
	}
}

func BenchmarkCPU(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name+"/gorgonia", func(b *testing.B) { benchGraph(b, w, false) })
		b.Run(w.name+"/fused", func(b *testing.B) { benchGraph(b, w, true) })
	}
}
