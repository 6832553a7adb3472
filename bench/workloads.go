package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Workload builds a standard graph at a size.
type Workload struct {
	Name string
	Doc  string
	// Build returns the spec at size "small" or "large", or "peer" where
	// the workload has it (float32, seeded random inputs).
	Build func(size string) (Spec, error)
}

// Sizes are the sizes every workload has, which a bench run measures by
// default.
var Sizes = []string{"small", "large"}

// Peer is the size of the shapes the peers (PyTorch on the same GPU) are
// measured at in bench/torch/workloads.py: the BERT-base encoder layer
// (batch 8, sequence 512, model 768, 12 heads, FF 3072) and attention at B4
// H16 S2048 D64 and B2 H16 S4096 D128. Only the workloads HasPeer names
// have it; too big for the CPU bench, a GPU round's. The row workloads
// (softmax, LayerNorm) and the chain have several shapes there, each its
// own size "peer:…" (PeerSizes); -size peer on the command line stands for
// every workload's PeerSizes.
const Peer = "peer"

// peerWorkloads have the size Peer.
var peerWorkloads = map[string]bool{"attention": true, "attention_d128": true, "attention_fwd_bwd": true, "encoder_fwd": true, "encoder_fwd_bwd": true, "encoder_train": true}

// PeerRows are the row shapes (rows, columns) of softmax and LayerNorm at
// the peers' shapes (bench/torch/workloads.py --sizes peer: eager,
// torch.compile and Triton's tutorial softmax): the widths the
// hand-written and PyTorch's kernels were measured at, and odd ones
// (issue 12).
var PeerRows = [][2]int{{8192, 4096}, {32768, 1024}, {4096, 32768}, {1823, 781}, {1151, 8192}}

// PeerColumns are the shapes (rows, columns) of the column sums at the
// peers' shapes: the BERT-base layer's bias gradients, Σ[0] of its FF
// activations' gradient (4096×3072) and of its model-wide ones (4096×768).
var PeerColumns = [][2]int{{4096, 3072}, {4096, 768}}

// PeerChain is the element count of the chain at the peers' shape.
const PeerChain = 64 << 20

// peerSizes are the workloads with several peer shapes, each a size
// "peer:ROWSxCOLS" (rows) or "peer:64M" (the chain), as Build takes them.
var peerSizes = map[string][]string{
	"chain":     {fmt.Sprintf("%s:%dM", Peer, PeerChain>>20)},
	"softmax":   peerRowSizes(),
	"layernorm": peerRowSizes(),
	"colsum":    peerShapeSizes(PeerColumns),
}

func peerRowSizes() []string { return peerShapeSizes(PeerRows) }

func peerShapeSizes(shapes [][2]int) []string {
	var s []string
	for _, rc := range shapes {
		s = append(s, fmt.Sprintf("%s:%dx%d", Peer, rc[0], rc[1]))
	}
	return s
}

// PeerSizes are w's sizes at its peers' shapes: Peer, several "peer:…"
// sizes, or none.
func (w Workload) PeerSizes() []string {
	if peerWorkloads[w.Name] {
		return []string{Peer}
	}
	return peerSizes[w.Name]
}

// HasPeer reports whether w has sizes at its peers' shapes.
func (w Workload) HasPeer() bool { return len(w.PeerSizes()) > 0 }

// rowShape is the (rows, columns) of a row workload at size: small and
// large are 1024 wide, a peer size names its shape.
func rowShape(size string, small, large int) (int, int, error) {
	return peerShape(size, PeerRows, small, large, 1024)
}

// peerShape is the (rows, columns) at size: small and large rows of cols,
// a peer size one of shapes.
func peerShape(size string, shapes [][2]int, small, large, cols int) (int, int, error) {
	if rest, ok := strings.CutPrefix(size, Peer+":"); ok {
		var r, c int
		if _, err := fmt.Sscanf(rest, "%dx%d", &r, &c); err == nil && slices.Contains(shapes, [2]int{r, c}) {
			return r, c, nil
		}
		return 0, 0, fmt.Errorf("bench: size %q: not a peer shape (%v)", size, peerShapeSizes(shapes))
	}
	if size == Peer { // one call per shape (tilefuse bench -size peer runs them all)
		return 0, 0, fmt.Errorf("bench: size %q: this workload has several peer shapes, name one: %v", size, peerShapeSizes(shapes))
	}
	rows, err := pick(size, small, large)
	return rows, cols, err
}

// Workloads are the standard graphs, as Gorgonia users write them.
var Workloads = []Workload{
	{"chain", "gelu(x·0.5+1)·2, tanh form, op by op", elementwise},
	{"softmax", "softmax along rows, op by op (max, sub, exp, sum, div)", softmaxW},
	{"layernorm", "LayerNorm along rows, op by op, with γ and β", layerNormW},
	{"colsum", "a bias's gradient: Reshape(Σ[0] dy), column sums over rows (small 1000×777, large 8192×1024; peer: 4096×3072 and 4096×768, the BERT layer's)", colSum},
	{"linear_gelu", "gelu(x·W + b): a matrix product with bias and activation", linearGelu},
	{"attention", "softmax(q·kᵀ/√d)·v over batch×heads, batched products (peer: B4 H16 S2048 D64)", func(s string) (Spec, error) { return attentionW(s, 64, false) }},
	{"attention_d128", "attention with head dim 128 (peer: B2 H16 S4096 D128)", func(s string) (Spec, error) { return attentionW(s, 128, false) }},
	{"attention_fwd_bwd", "attention, a loss mean(out²) and the gradients of q, k and v (peer: B4 H16 S2048 D64)", func(s string) (Spec, error) { return attentionW(s, 64, true) }},
	{"mlp_step", "a 2-layer MLP's loss and gradients (one training step's work)", mlpStep},
	{"mlp_train", "mlp_step as a training loop: batch up, RunAll, Adam's step (fused: fusion.NewSolver), loss read", mlpTrain},
	{"encoder_fwd", "a transformer encoder block, forward (peer: BERT-base)", func(s string) (Spec, error) { return encoderW(s, false) }},
	{"encoder_fwd_bwd", "a transformer encoder block, forward, a loss mean(out²) and gradients (peer: BERT-base)", func(s string) (Spec, error) { return encoderW(s, true) }},
	{"convnet", "Gorgonia's convnet example (MNIST 28×28: three 3×3 convolutions of 32, 64 and 128 filters, each with ReLU and a 2×2 max pool; dense 1152→625 with ReLU, 625→10, softmax, cross-entropy; no dropout): the loss and its 5 weights' gradients, batch 4 (small) or 100 (large, the example's)", convNet},
	{"encoder_train", "encoder_fwd_bwd as a training loop: batch up, RunAll, Adam's step (fused: fusion.NewSolver), loss read (peer: BERT-base)", encoderTrain},
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

// pick3 is pick for workloads that have the size Peer.
func pick3(size string, small, large, peer int) (int, error) {
	if size == Peer {
		return peer, nil
	}
	v, err := pick(size, small, large)
	if err != nil {
		return 0, fmt.Errorf("bench: size %q: want small, large or %s", size, Peer)
	}
	return v, nil
}

type builder struct {
	g      *G.ExprGraph
	rng    *rand.Rand
	inputs map[*G.Node]tensor.Tensor
	f64    bool // float64 inputs (BuildFloat64)
}

// buildF64 makes the builders of a BuildFloat64 call use float64; held
// for the call's duration.
var (
	buildMu  sync.Mutex
	buildF64 bool
)

func newBuilder() *builder {
	return &builder{g: G.NewGraph(), rng: rand.New(rand.NewPCG(1, 2)), inputs: map[*G.Node]tensor.Tensor{}, f64: buildF64}
}

// BuildFloat64 is wl.Build(size) with float64 inputs and constants (the
// same shapes and seeded values, widened): Gorgonia's usual dtype, for
// measuring and testing float64 graphs.
func BuildFloat64(wl Workload, size string) (Spec, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	buildF64 = true
	defer func() { buildF64 = false }()
	return wl.Build(size)
}

// input adds a float32 (float64) input of the given shape with values in
// ±scale.
func (b *builder) input(name string, scale float64, shape ...int) *G.Node {
	n := 1
	for _, s := range shape {
		n *= s
	}
	if b.f64 {
		d := make([]float64, n)
		for i := range d {
			d[i] = float64(float32((b.rng.Float64()*2 - 1) * scale))
		}
		node := G.NewTensor(b.g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(name))
		b.inputs[node] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
		return node
	}
	d := make([]float32, n)
	for i := range d {
		d[i] = float32((b.rng.Float64()*2 - 1) * scale)
	}
	node := G.NewTensor(b.g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name))
	b.inputs[node] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	return node
}

// cOf is constant v of x's dtype (float32 or float64).
func cOf(x *G.Node, v float64) *G.Node {
	if x.Dtype() == tensor.Float64 {
		return G.NewConstant(v)
	}
	return G.NewConstant(float32(v))
}

// GELU is GELU's tanh form as users write it, op by op: ½·x·(1 +
// tanh(√(2/π)·(x + 0.044715·x³))), with Gorgonia's Cube, in x's float type.
func GELU(x *G.Node) *G.Node {
	inner := G.Must(G.Mul(G.Must(G.Add(x, G.Must(G.Mul(G.Must(G.Cube(x)), cOf(x, 0.044715))))), cOf(x, math.Sqrt(2/math.Pi))))
	return G.Must(G.Mul(G.Must(G.HadamardProd(x, G.Must(G.Add(G.Must(G.Tanh(inner)), cOf(x, 1))))), cOf(x, 0.5)))
}

func layerNorm(x, gamma, beta *G.Node) *G.Node {
	mu := G.Must(G.Mean(x, 1))
	xc := G.Must(G.BroadcastSub(x, mu, nil, []byte{1}))
	v := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
	rstd := G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(v, cOf(x, 1e-5)))))))
	y := G.Must(G.BroadcastHadamardProd(xc, rstd, nil, []byte{1}))
	return G.Must(G.BroadcastAdd(G.Must(G.BroadcastHadamardProd(y, gamma, nil, []byte{0})), beta, nil, []byte{0}))
}

func (b *builder) spec(name, size string, flops int64, outputs ...*G.Node) Spec {
	return Spec{Name: name, Size: size, Graph: b.g, Inputs: b.inputs, Outputs: outputs, Flops: flops}
}

func elementwise(size string) (Spec, error) {
	var n int
	var err error
	if size == peerSizes["chain"][0] {
		n = PeerChain
	} else if n, err = pick(size, 1<<16, 1<<22); err != nil {
		return Spec{}, err
	}
	b := newBuilder()
	x := b.input("x", 2, n/1024, 1024)
	h := G.Must(G.Add(G.Must(G.Mul(x, cOf(x, 0.5))), cOf(x, 1)))
	return b.spec("chain", size, 0, G.Must(G.Mul(GELU(h), cOf(x, 2)))), nil
}

func softmaxW(size string) (Spec, error) {
	rows, cols, err := rowShape(size, 64, 4096)
	if err != nil {
		return Spec{}, err
	}
	b := newBuilder()
	x := b.input("x", 4, rows, cols)
	e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Max(x, 1)), nil, []byte{1}))))
	return b.spec("softmax", size, 0, G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))), nil
}

func layerNormW(size string) (Spec, error) {
	rows, cols, err := rowShape(size, 64, 4096)
	if err != nil {
		return Spec{}, err
	}
	b := newBuilder()
	x := b.input("x", 4, rows, cols)
	gamma, beta := b.input("gamma", 1, cols), b.input("beta", 1, cols)
	return b.spec("layernorm", size, 0, layerNorm(x, gamma, beta)), nil
}

// colSum: Reshape(Sum(dy, 0)), Gorgonia's gradient of a broadcast bias,
// alone: a column reduction whose GB/s is its input's bytes over its time.
func colSum(size string) (Spec, error) {
	rows, cols, err := peerShape(size, PeerColumns, 1000, 8192, 1024)
	if err != nil {
		return Spec{}, err
	}
	if size == "small" {
		cols = 777
	}
	b := newBuilder()
	dy := b.input("dy", 1, rows, cols)
	return b.spec("colsum", size, 0, G.Must(G.Reshape(G.Must(G.Sum(dy, 0)), tensor.Shape{cols}))), nil
}

func linearGelu(size string) (Spec, error) {
	m, err := pick(size, 128, 1024)
	if err != nil {
		return Spec{}, err
	}
	k, n := m, m
	b := newBuilder()
	x, w, bias := b.input("x", 1, m, k), b.input("w", 1/math.Sqrt(float64(k)), k, n), b.input("b", 1, n)
	y := GELU(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), bias, nil, []byte{0})))
	return b.spec("linear_gelu", size, int64(2*m*n*k), y), nil
}

// attentionW: softmax(q·kᵀ/√d)·v over batch × heads at head dim d, and
// with backward a loss mean(out²) and the gradients of q, k and v. Flops
// count the forward's two products (4·bh·s²·d) and the backward's five
// (10·bh·s²·d: FlashAttention's convention, the scores' product recomputed).
func attentionW(size string, d int, backward bool) (Spec, error) {
	bh, s := 0, 0
	var err error
	if d == 128 {
		if bh, err = pick3(size, 4, 16, 2*16); err == nil {
			s, _ = pick3(size, 64, 512, 4096)
		}
	} else {
		if bh, err = pick3(size, 8, 32, 4*16); err == nil {
			s, _ = pick3(size, 128, 512, 2048)
		}
	}
	if err != nil {
		return Spec{}, err
	}
	b := newBuilder()
	q, k, v := b.input("q", 1, bh, s, d), b.input("k", 1, bh, s, d), b.input("v", 1, bh, s, d)
	sc := G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), cOf(q, 1/math.Sqrt(float64(d)))))
	out := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
	flops := int64(4 * bh * s * s * d)
	name := "attention"
	if d != 64 {
		name = fmt.Sprintf("attention_d%d", d)
	}
	if !backward {
		return b.spec(name, size, flops, out), nil
	}
	loss := G.Must(G.Mean(G.Must(G.Square(out))))
	grads, err := G.Grad(loss, q, k, v)
	if err != nil {
		return Spec{}, err
	}
	return b.spec(name+"_fwd_bwd", size, flops*14/4, append(G.Nodes{loss}, grads...)...), nil
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
	h := GELU(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0})))
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
	s, _, _, err := encoderSpec(size, backward)
	return s, err
}

// encoderTrain is encoder_fwd_bwd's graph trained with Adam (learn rate
// 1e-3) over all its parameters (the heads' projections, wo, the MLP's and
// the LayerNorms'), the loss mean(out²); the batch x is let anew at every
// step.
func encoderTrain(size string) (Spec, error) {
	s, params, cost, err := encoderSpec(size, true)
	if err != nil {
		return Spec{}, err
	}
	s.Name = "encoder_train"
	s.Train = &Train{Learnables: params, Loss: cost, Solver: func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(1e-3)) }}
	return s, nil
}

// encoderSpec is the encoder block's spec, its parameters and (backward)
// its loss.
func encoderSpec(size string, backward bool) (_ Spec, params G.Nodes, cost *G.Node, _ error) {
	batch, err := pick3(size, 2, 8, 8)
	if err != nil {
		return Spec{}, nil, nil, err
	}
	s, d, h := 64, 128, 4
	switch size {
	case "large":
		s, d, h = 128, 256, 8
	case Peer: // BERT-base: FF 4·768 = 3072
		s, d, h = 512, 768, 12
	}
	ff, dh := 4*d, d/h
	b := newBuilder()
	x := b.input("x", 1, batch*s, d)
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
		sc := G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), cOf(q, 1/math.Sqrt(float64(dh)))))
		o := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
		heads = append(heads, G.Must(G.Reshape(o, tensor.Shape{batch * s, dh})))
	}
	att := G.Must(G.Concat(1, heads...))
	wo := param("wo", 1/math.Sqrt(float64(d)), d, d)
	h1 := layerNorm(G.Must(G.Add(x, G.Must(G.Mul(att, wo)))), param("ln1_g", 1, d), param("ln1_b", 0.1, d))
	w1, b1 := param("w1", 1/math.Sqrt(float64(d)), d, ff), param("b1", 0.1, ff)
	w2, b2 := param("w2", 1/math.Sqrt(float64(ff)), ff, d), param("b2", 0.1, d)
	m := G.Must(G.BroadcastAdd(G.Must(G.Mul(GELU(G.Must(G.BroadcastAdd(G.Must(G.Mul(h1, w1)), b1, nil, []byte{0}))), w2)), b2, nil, []byte{0}))
	out := layerNorm(G.Must(G.Add(h1, m)), param("ln2_g", 1, d), param("ln2_b", 0.1, d))
	n := int64(batch * s)
	flops := 2*n*int64(3*d*d+d*d+2*d*ff) + int64(batch*h)*4*int64(s*s*dh)
	name := "encoder_fwd"
	outputs := G.Nodes{out}
	if backward {
		name = "encoder_fwd_bwd"
		cost = G.Must(G.Mean(G.Must(G.Square(out))))
		grads, err := G.Grad(cost, params...)
		if err != nil {
			return Spec{}, nil, nil, err
		}
		outputs = append(G.Nodes{cost}, grads...)
		flops *= 3
	}
	return b.spec(name, size, flops, outputs...), params, cost, nil
}

// convNet is Gorgonia's convnet example (examples/convnet) as one training
// step's work: its layers and loss as the example writes them, without
// its dropout (random), and the gradients of its five weights. Flops count
// the convolutions as the products of their im2col (2·b·h·w·9·cin·cout a
// layer) and the dense layers, forward, and twice that backward less the
// first convolution's input gradient (nothing reads it).
func convNet(size string) (Spec, error) {
	batch, err := pick(size, 4, 100)
	if err != nil {
		return Spec{}, err
	}
	b := newBuilder()
	x, y := b.input("x", 1, batch, 1, 28, 28), b.input("y", 1, batch, 10)
	var ws G.Nodes
	var flops, first int64
	in, hw := 1, 28
	p := x
	for i, out := range []int{32, 64, 128} {
		w := b.input(fmt.Sprintf("w%d", i), 1/math.Sqrt(float64(9*in)), out, in, 3, 3)
		ws = append(ws, w)
		f := int64(2 * batch * hw * hw * 9 * in * out)
		if i == 0 {
			first = f
		}
		flops += f
		c := G.Must(G.Conv2d(p, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		p = G.Must(G.MaxPool2D(G.Must(G.Rectify(c)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		in, hw = out, hw/2
	}
	flat := in * hw * hw // 128·3·3
	w3 := b.input("w3", 1/math.Sqrt(float64(flat)), flat, 625)
	w4 := b.input("w4", 1/math.Sqrt(625), 625, 10)
	ws = append(ws, w3, w4)
	flops += int64(2 * batch * (flat*625 + 625*10))
	h := G.Must(G.Rectify(G.Must(G.Mul(G.Must(G.Reshape(p, tensor.Shape{batch, flat})), w3))))
	o := G.Must(G.SoftMax(G.Must(G.Mul(h, w4))))
	loss := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.HadamardProd(G.Must(G.Log(o)), y))))))
	grads, err := G.Grad(loss, ws...)
	if err != nil {
		return Spec{}, err
	}
	return b.spec("convnet", size, 3*flops-first, append(G.Nodes{loss}, grads...)...), nil
}
