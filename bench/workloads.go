package bench

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Workload builds a standard graph at a size.
type Workload struct {
	Name string
	Doc  string
	// Build returns the spec at size "small" or "large" (float32, seeded
	// random inputs).
	Build func(size string) (Spec, error)
}

// Sizes are the sizes every workload has.
var Sizes = []string{"small", "large"}

// Workloads are the standard graphs, as Gorgonia users write them.
var Workloads = []Workload{
	{"chain", "gelu(x·0.5+1)·2, tanh form, op by op", elementwise},
	{"softmax", "softmax along rows, op by op (max, sub, exp, sum, div)", softmaxW},
	{"layernorm", "LayerNorm along rows, op by op, with γ and β", layerNormW},
	{"linear_gelu", "gelu(x·W + b): a matrix product with bias and activation", linearGelu},
	{"attention", "softmax(q·kᵀ/√d)·v over batch×heads, batched products", attentionW},
	{"mlp_step", "a 2-layer MLP's loss and gradients (one training step's work)", mlpStep},
	{"mlp_train", "mlp_step as a training loop: batch up, RunAll, Adam's step (fused: fusion.NewSolver), loss read", mlpTrain},
	{"encoder_fwd", "a transformer encoder block, forward", func(s string) (Spec, error) { return encoderW(s, false) }},
	{"encoder_fwd_bwd", "a transformer encoder block, forward and gradients", func(s string) (Spec, error) { return encoderW(s, true) }},
}

// Lookup returns the workload named name.
func Lookup(name string) (Workload, bool) {
	for _, w := range Workloads {
		if w.Name == name {
			return w, true
		}
	}
	return Workload{}, false
}

func pick(size string, small, large int) (int, error) {
	switch size {
	case "small":
		return small, nil
	case "large":
		return large, nil
	}
	return 0, fmt.Errorf("bench: size %q: want small or large", size)
}

type builder struct {
	g      *G.ExprGraph
	rng    *rand.Rand
	inputs map[*G.Node]tensor.Tensor
}

func newBuilder() *builder {
	return &builder{g: G.NewGraph(), rng: rand.New(rand.NewPCG(1, 2)), inputs: map[*G.Node]tensor.Tensor{}}
}

// input adds a float32 input of the given shape with values in ±scale.
func (b *builder) input(name string, scale float64, shape ...int) *G.Node {
	n := 1
	for _, s := range shape {
		n *= s
	}
	d := make([]float32, n)
	for i := range d {
		d[i] = float32((b.rng.Float64()*2 - 1) * scale)
	}
	node := G.NewTensor(b.g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name))
	b.inputs[node] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	return node
}

func c32(v float64) *G.Node { return G.NewConstant(float32(v)) }

func gelu(x *G.Node) *G.Node { // tanh form, as users write it
	inner := G.Must(G.Mul(G.Must(G.Add(x, G.Must(G.Mul(G.Must(G.Cube(x)), c32(0.044715))))), c32(math.Sqrt(2/math.Pi))))
	return G.Must(G.Mul(G.Must(G.HadamardProd(x, G.Must(G.Add(G.Must(G.Tanh(inner)), c32(1))))), c32(0.5)))
}

func layerNorm(x, gamma, beta *G.Node) *G.Node {
	mu := G.Must(G.Mean(x, 1))
	xc := G.Must(G.BroadcastSub(x, mu, nil, []byte{1}))
	v := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
	rstd := G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(v, c32(1e-5)))))))
	y := G.Must(G.BroadcastHadamardProd(xc, rstd, nil, []byte{1}))
	return G.Must(G.BroadcastAdd(G.Must(G.BroadcastHadamardProd(y, gamma, nil, []byte{0})), beta, nil, []byte{0}))
}

func (b *builder) spec(name, size string, flops int64, outputs ...*G.Node) Spec {
	return Spec{Name: name, Size: size, Graph: b.g, Inputs: b.inputs, Outputs: outputs, Flops: flops}
}

func elementwise(size string) (Spec, error) {
	n, err := pick(size, 1<<16, 1<<22)
	if err != nil {
		return Spec{}, err
	}
	b := newBuilder()
	x := b.input("x", 2, n/1024, 1024)
	h := G.Must(G.Add(G.Must(G.Mul(x, c32(0.5))), c32(1)))
	return b.spec("chain", size, 0, G.Must(G.Mul(gelu(h), c32(2)))), nil
}

func softmaxW(size string) (Spec, error) {
	rows, err := pick(size, 64, 4096)
	if err != nil {
		return Spec{}, err
	}
	b := newBuilder()
	x := b.input("x", 4, rows, 1024)
	e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Max(x, 1)), nil, []byte{1}))))
	return b.spec("softmax", size, 0, G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))), nil
}

func layerNormW(size string) (Spec, error) {
	rows, err := pick(size, 64, 4096)
	if err != nil {
		return Spec{}, err
	}
	b := newBuilder()
	x := b.input("x", 4, rows, 1024)
	gamma, beta := b.input("gamma", 1, 1024), b.input("beta", 1, 1024)
	return b.spec("layernorm", size, 0, layerNorm(x, gamma, beta)), nil
}

func linearGelu(size string) (Spec, error) {
	m, err := pick(size, 128, 1024)
	if err != nil {
		return Spec{}, err
	}
	k, n := m, m
	b := newBuilder()
	x, w, bias := b.input("x", 1, m, k), b.input("w", 1/math.Sqrt(float64(k)), k, n), b.input("b", 1, n)
	y := gelu(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), bias, nil, []byte{0})))
	return b.spec("linear_gelu", size, int64(2*m*n*k), y), nil
}

func attentionW(size string) (Spec, error) {
	bh, err := pick(size, 8, 32) // batch × heads
	if err != nil {
		return Spec{}, err
	}
	s, d := 128, 64
	if size == "large" {
		s = 512
	}
	b := newBuilder()
	q, k, v := b.input("q", 1, bh, s, d), b.input("k", 1, bh, s, d), b.input("v", 1, bh, s, d)
	sc := G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), c32(1/math.Sqrt(float64(d)))))
	out := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
	return b.spec("attention", size, int64(4*bh*s*s*d), out), nil
}

func mlpStep(size string) (Spec, error) {
	b, loss, _, grads, flops, err := mlpGraph(size)
	if err != nil {
		return Spec{}, err
	}
	return b.spec("mlp_step", size, flops, append(G.Nodes{loss}, grads...)...), nil
}

// mlpGraph is a 2-layer MLP with its loss and gradients: the learnables
// w1, b1, w2, b2 are inputs of the builder; flops is one step's work.
func mlpGraph(size string) (b *builder, loss *G.Node, learnables, grads G.Nodes, flops int64, err error) {
	batch, err := pick(size, 64, 512)
	if err != nil {
		return nil, nil, nil, nil, 0, err
	}
	in, hid, out := 256, 512, 16
	if size == "large" {
		in, hid = 784, 1024
	}
	b = newBuilder()
	x, y := b.input("x", 1, batch, in), b.input("y", 1, batch, out)
	w1, b1 := b.input("w1", 1/math.Sqrt(float64(in)), in, hid), b.input("b1", 0.1, hid)
	w2, b2 := b.input("w2", 1/math.Sqrt(float64(hid)), hid, out), b.input("b2", 0.1, out)
	h := gelu(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0})))
	p := G.Must(G.BroadcastAdd(G.Must(G.Mul(h, w2)), b2, nil, []byte{0}))
	loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(p, y))))))
	learnables = G.Nodes{w1, b1, w2, b2}
	if grads, err = G.Grad(loss, learnables...); err != nil {
		return nil, nil, nil, nil, 0, err
	}
	flops = int64(3 * 2 * batch * (in*hid + hid*out)) // forward, and two products per layer backward
	return b, loss, learnables, grads, flops, nil
}

// encoderW: multi-head self-attention through batched products (per-head
// projections, as Gorgonia computes the transposed form wrongly: see
// DESIGN.md, "Gorgonia v0.9.18"), residual, LayerNorm, a GELU MLP, residual, LayerNorm.
func encoderW(size string, backward bool) (Spec, error) {
	batch, err := pick(size, 2, 8)
	if err != nil {
		return Spec{}, err
	}
	s, d, h := 64, 128, 4
	if size == "large" {
		s, d, h = 128, 256, 8
	}
	ff, dh := 4*d, d/h
	b := newBuilder()
	x := b.input("x", 1, batch*s, d)
	var params G.Nodes
	param := func(name string, scale float64, shape ...int) *G.Node {
		p := b.input(name, scale, shape...)
		params = append(params, p)
		return p
	}
	var heads G.Nodes
	for i := 0; i < h; i++ {
		proj := func(name string) *G.Node {
			w := param(fmt.Sprintf("%s%d", name, i), 1/math.Sqrt(float64(d)), d, dh)
			return G.Must(G.Reshape(G.Must(G.Mul(x, w)), tensor.Shape{batch, s, dh}))
		}
		q, k, v := proj("wq"), proj("wk"), proj("wv")
		sc := G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), c32(1/math.Sqrt(float64(dh)))))
		o := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
		heads = append(heads, G.Must(G.Reshape(o, tensor.Shape{batch * s, dh})))
	}
	att := G.Must(G.Concat(1, heads...))
	wo := param("wo", 1/math.Sqrt(float64(d)), d, d)
	h1 := layerNorm(G.Must(G.Add(x, G.Must(G.Mul(att, wo)))), param("ln1_g", 1, d), param("ln1_b", 0.1, d))
	w1, b1 := param("w1", 1/math.Sqrt(float64(d)), d, ff), param("b1", 0.1, ff)
	w2, b2 := param("w2", 1/math.Sqrt(float64(ff)), ff, d), param("b2", 0.1, d)
	m := G.Must(G.BroadcastAdd(G.Must(G.Mul(gelu(G.Must(G.BroadcastAdd(G.Must(G.Mul(h1, w1)), b1, nil, []byte{0}))), w2)), b2, nil, []byte{0}))
	out := layerNorm(G.Must(G.Add(h1, m)), param("ln2_g", 1, d), param("ln2_b", 0.1, d))
	n := int64(batch * s)
	flops := 2*n*int64(3*d*d+d*d+2*d*ff) + int64(batch*h)*4*int64(s*s*dh)
	name := "encoder_fwd"
	outputs := G.Nodes{out}
	if backward {
		name = "encoder_fwd_bwd"
		cost := G.Must(G.Mean(G.Must(G.Square(out))))
		grads, err := G.Grad(cost, params...)
		if err != nil {
			return Spec{}, err
		}
		outputs = append(G.Nodes{cost}, grads...)
		flops *= 3
	}
	return b.spec(name, size, flops, outputs...), nil
}
