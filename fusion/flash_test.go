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

// flashCase is one training attention graph: softmax(f(q·kᵀ))·v with a
// loss Σ(out²∘w) and gorgonia.Grad's backward for q, k and v.
type flashCase struct {
	name              string
	b, sq, sk, dk, dv int
	scale             string // "mul": q·kᵀ·(1/√dk); "div": q·kᵀ/√dk; "": none
	mask              string // "": none; "input": an additive [b,sq,sk] input; "causal": a lower-triangular constant [sq,sk] of 0 and −∞, broadcast; "causal-1e9": of 0 and −1e9; "01": a 0/1 [sq,sk] input times −1e9 in the graph
	f32               bool
	causalSkipsBlocks bool
}

var flashCases = []flashCase{
	{name: "plain, odd lengths", b: 2, sq: 37, sk: 45, dk: 20, dv: 12, scale: "mul"},
	{name: "no scale, one block", b: 1, sq: 16, sk: 16, dk: 32, dv: 8},
	{name: "scale by division (its own gradient)", b: 2, sq: 21, sk: 19, dk: 8, dv: 24, scale: "div"},
	{name: "additive mask input", b: 2, sq: 33, sk: 40, dk: 12, dv: 20, scale: "mul", mask: "input"},
	{name: "causal constant, −∞: blocks above the diagonal skipped", b: 2, sq: 70, sk: 70, dk: 20, dv: 20, scale: "mul", mask: "causal", causalSkipsBlocks: true},
	{name: "causal constant, −1e9", b: 1, sq: 45, sk: 50, dk: 12, dv: 8, scale: "mul", mask: "causal-1e9"},
	{name: "0/1 mask times −1e9 in the graph", b: 2, sq: 35, sk: 35, dk: 16, dv: 16, scale: "mul", mask: "01"},
	{name: "head dims 96 and 33", b: 1, sq: 40, sk: 29, dk: 96, dv: 33, scale: "mul"},
	{name: "float32", b: 2, sq: 37, sk: 41, dk: 24, dv: 16, scale: "mul", mask: "causal", f32: true},
}

// flashGraph is a flashCase built as a Gorgonia graph, its inputs' values
// and a float64 reference of its loss.
type flashGraph struct {
	c                  flashCase
	g                  *G.ExprGraph
	q, k, v, w, m, out *G.Node
	cost               *G.Node
	grads              G.Nodes
	qv, kv, vv, wv, mv []float64 // mv: the additive mask as the graph adds it, [b,sq,sk]
	scale              float64
}

func newFlashGraph(t *testing.T, c flashCase) *flashGraph {
	t.Helper()
	dt := tensor.Float64
	if c.f32 {
		dt = tensor.Float32
	}
	fg := &flashGraph{c: c, g: G.NewGraph(), scale: 1}
	g := fg.g
	rng := rand.New(rand.NewPCG(uint64(c.sq*1000+c.sk), uint64(c.dk*100+c.dv)))
	random := func(name string, scale float64, shape ...int) (*G.Node, []float64) {
		n := 1
		for _, s := range shape {
			n *= s
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = (rng.Float64()*2 - 1) * scale
		}
		node := G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name))
		if err := G.Let(node, tensorOf(v, c.f32, shape...)); err != nil {
			t.Fatal(err)
		}
		return node, v
	}
	fg.q, fg.qv = random("q", 1, c.b, c.sq, c.dk)
	fg.k, fg.kv = random("k", 1, c.b, c.sk, c.dk)
	fg.v, fg.vv = random("v", 1, c.b, c.sk, c.dv)
	fg.w, fg.wv = random("w", 1, c.b, c.sq, c.dv)
	constant := func(x float64) *G.Node {
		if c.f32 {
			return G.NewConstant(float32(x))
		}
		return G.NewConstant(x)
	}
	sc := G.Must(G.BatchedMatMul(fg.q, fg.k, false, true))
	switch c.scale {
	case "mul":
		fg.scale = 1 / math.Sqrt(float64(c.dk))
		sc = G.Must(G.Mul(sc, constant(fg.scale)))
	case "div":
		fg.scale = 1 / math.Sqrt(float64(c.dk))
		sc = G.Must(G.Div(sc, constant(math.Sqrt(float64(c.dk)))))
	}
	fg.mv = make([]float64, c.b*c.sq*c.sk)
	triangle := func(masked float64) []float64 {
		m := make([]float64, c.sq*c.sk)
		for i := range c.sq {
			for j := range c.sk {
				if j > i {
					m[i*c.sk+j] = masked
				}
			}
		}
		return m
	}
	broadcast := func(m []float64) { // [sq,sk] over the batch
		for bi := range c.b {
			copy(fg.mv[bi*c.sq*c.sk:], m)
		}
	}
	switch c.mask {
	case "input":
		fg.m, fg.mv = random("mask", 2, c.b, c.sq, c.sk)
		for i := range fg.mv { // some −∞, none in column 0: no row is all masked
			if i%c.sk != 0 && rng.IntN(5) == 0 {
				fg.mv[i] = math.Inf(-1)
			}
		}
		if err := G.Let(fg.m, tensorOf(fg.mv, c.f32, c.b, c.sq, c.sk)); err != nil {
			t.Fatal(err)
		}
		sc = G.Must(G.Add(sc, fg.m))
	case "causal", "causal-1e9":
		masked := math.Inf(-1)
		if c.mask == "causal-1e9" {
			masked = -1e9
		}
		m := triangle(masked)
		broadcast(m)
		cm := G.NewConstant(tensorOf(m, c.f32, c.sq, c.sk), G.WithName("causal"), G.In(g))
		sc = G.Must(G.BroadcastAdd(sc, cm, nil, []byte{0}))
	case "01":
		zeroOne := make([]float64, c.sq*c.sk)
		for i := range zeroOne {
			if i%c.sk != 0 && rng.IntN(3) == 0 {
				zeroOne[i] = 1
			}
		}
		fg.m = G.NewTensor(g, dt, 2, G.WithShape(c.sq, c.sk), G.WithName("mask01"))
		if err := G.Let(fg.m, tensorOf(zeroOne, c.f32, c.sq, c.sk)); err != nil {
			t.Fatal(err)
		}
		m := make([]float64, len(zeroOne))
		for i, z := range zeroOne {
			m[i] = z * -1e9
		}
		broadcast(m)
		sc = G.Must(G.BroadcastAdd(sc, G.Must(G.Mul(fg.m, constant(-1e9))), nil, []byte{0}))
	}
	fg.out = G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), fg.v, false, false))
	fg.cost = G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Square(fg.out)), fg.w))))
	grads, err := G.Grad(fg.cost, fg.q, fg.k, fg.v)
	if err != nil {
		t.Fatal(err)
	}
	fg.grads = grads
	return fg
}

func tensorOf(v []float64, f32 bool, shape ...int) *tensor.Dense {
	if !f32 {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), v...)))
	}
	d := make([]float32, len(v))
	for i, x := range v {
		d[i] = float32(x)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
}

// reference is the case in float64: the loss, the output, and dQ, dK, dV
// written out by hand (FlashAttention's formulas are not used: the
// probabilities are formed and differentiated as a matrix).
func (fg *flashGraph) reference(q, k, v []float64) (cost float64, out, dq, dk, dv []float64) {
	c := fg.c
	out, dq, dk, dv = make([]float64, c.b*c.sq*c.dv), make([]float64, c.b*c.sq*c.dk), make([]float64, c.b*c.sk*c.dk), make([]float64, c.b*c.sk*c.dv)
	for bi := range c.b {
		qb, kb, vb := q[bi*c.sq*c.dk:], k[bi*c.sk*c.dk:], v[bi*c.sk*c.dv:]
		s := make([]float64, c.sq*c.sk)
		for i := range c.sq {
			for j := range c.sk {
				dot := 0.0
				for d := range c.dk {
					dot += qb[i*c.dk+d] * kb[j*c.dk+d]
				}
				s[i*c.sk+j] = dot*fg.scale + fg.mv[(bi*c.sq+i)*c.sk+j]
			}
		}
		p := softmaxRef(s, c.sq, c.sk)
		do := make([]float64, c.sq*c.dv)
		for i := range c.sq {
			for e := range c.dv {
				o := 0.0
				for j := range c.sk {
					o += p[i*c.sk+j] * vb[j*c.dv+e]
				}
				at := (bi*c.sq+i)*c.dv + e
				out[at] = o
				cost += o * o * fg.wv[at]
				do[i*c.dv+e] = 2 * o * fg.wv[at]
			}
		}
		ds := make([]float64, c.sq*c.sk)
		for i := range c.sq {
			row := 0.0
			for j := range c.sk {
				dp := 0.0
				for e := range c.dv {
					dp += do[i*c.dv+e] * vb[j*c.dv+e]
				}
				ds[i*c.sk+j] = dp
				row += dp * p[i*c.sk+j]
			}
			for j := range c.sk {
				ds[i*c.sk+j] = p[i*c.sk+j] * (ds[i*c.sk+j] - row) * fg.scale
			}
		}
		for i := range c.sq {
			for j := range c.sk {
				for e := range c.dv {
					dv[(bi*c.sk+j)*c.dv+e] += p[i*c.sk+j] * do[i*c.dv+e]
				}
				for d := range c.dk {
					dq[(bi*c.sq+i)*c.dk+d] += ds[i*c.sk+j] * kb[j*c.dk+d]
					dk[(bi*c.sk+j)*c.dk+d] += ds[i*c.sk+j] * qb[i*c.dk+d]
				}
			}
		}
	}
	return cost, out, dq, dk, dv
}

// TestFlashAttentionTraining: a training graph's attention (gorgonia.Grad's
// backward of q, k and v) becomes one forward kernel and two backward
// kernels; no value of the rewritten graph holds the S×S scores or any of
// their gradients; the loss, output and gradients agree with a float64
// reference (1e-10 relative in float64, 2e-4 in float32) and the gradients
// with central differences of the reference's loss; at odd sequence lengths
// and head dims, with and without masks.
func TestFlashAttentionTraining(t *testing.T) {
	checkFlashTraining(t, 1e-10, 2e-4, nil, fusion.WithMatMulFusion(true))
}

// TestFlashAttentionPrecisions: the float32 case with the products in TF32,
// bfloat16 and 3xTF32, against the float64 reference at each precision's
// tolerance (relative to 1 + |value|; the largest error is logged).
func TestFlashAttentionPrecisions(t *testing.T) {
	for _, p := range flashPrecisions {
		t.Run(p.prec.String(), func(t *testing.T) {
			checkFlashTraining(t, 0, p.tol, func(c flashCase) bool { return c.f32 }, fusion.WithMatMulFusion(true), fusion.WithPrecision(p.prec))
		})
	}
}

// flashPrecisions are the tensor cores' precisions and their tolerances
// against the float64 reference (measured on the interpreter: 4.2e-4, 3e-3,
// 3.2e-7).
var flashPrecisions = []struct {
	prec tile.Precision
	tol  float64
}{{tile.PrecTF32, 2e-3}, {tile.PrecBF16, 1.5e-2}, {tile.PrecTF32x3, 2e-6}}

// checkFlashTraining runs the cases (those only picks, where not nil) at
// the tolerances of float64 and float32 cases.
func checkFlashTraining(t *testing.T, tol64, tol32 float64, only func(flashCase) bool, opts ...fusion.Option) {
	for _, c := range flashCases {
		if testing.Short() && c.sq*c.sk > 2000 || only != nil && !only(c) {
			continue
		}
		t.Run(c.name, func(t *testing.T) { checkFlashCase(t, c, tol64, tol32, opts...) })
	}
}

// checkFlashCase is checkFlashTraining's test of one case.
func checkFlashCase(t *testing.T, c flashCase, tol64, tol32 float64, opts ...fusion.Option) {
	t.Helper()
	fg := newFlashGraph(t, c)
	vm := fusion.NewTapeMachine(fg.g, append([]fusion.Option{fusion.WithKeep(fg.out)}, opts...)...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	rep := vm.Report()
	kinds := map[string]int{}
	for _, grp := range rep.Groups {
		kinds[grp.Kind]++
		if strings.HasPrefix(grp.Kind, "attention") {
			continue
		}
		for _, op := range grp.Ops {
			if strings.HasPrefix(op, "BatchedMatMul") || strings.HasPrefix(op, "SoftMax") {
				t.Fatalf("%s in a %s kernel, not in attention's:\n%v", op, grp.Kind, rep)
			}
		}
	}
	if kinds["attention"] != 1 || kinds["attention_dq"] != 1 || kinds["attention_dkv"] != 1 {
		t.Fatalf("kernels by kind %v, want one attention, attention_dq and attention_dkv:\n%v", kinds, rep)
	}
	// no S×S value: no value the rewritten graph computes has the
	// scores' shape (inputs and constants are the user's; a
	// multi-output kernel's value is checked part by part)
	for _, n := range vm.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); n.Op() == nil || strings.HasPrefix(n.Op().String(), "const") || ok && f.Outputs() > 1 {
			continue
		}
		if s := n.Shape(); len(s) >= 2 && (s[len(s)-2] == c.sq && s[len(s)-1] == c.sk || s[len(s)-2] == c.sk && s[len(s)-1] == c.sq) {
			t.Fatalf("%v (%v) has shape %v: scores of %d×%d", n.Name(), n.Op(), s, c.sq, c.sk)
		}
	}
	lowersToPTX(t, vm)
	if err := vm.RunAll(); err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	tol := tol64
	if c.f32 {
		tol = tol32
	}
	q, k, v := fg.qv, fg.kv, fg.vv
	if c.f32 { // the reference sees the values the graph does
		q, k, v = round32(q), round32(k), round32(v)
		fg.wv, fg.mv = round32(fg.wv), round32(fg.mv)
	}
	cost, out, dq, dk, dv := fg.reference(q, k, v)
	worst := 0.0
	for i, got := range [][]float64{floats(fg.out.Value()), floats(fg.grads[0].Value()), floats(fg.grads[1].Value()), floats(fg.grads[2].Value())} {
		for j, w := range [][]float64{out, dq, dk, dv}[i] {
			worst = math.Max(worst, math.Abs(got[j]-w)/(1+math.Abs(w)))
		}
	}
	t.Logf("largest error against float64, relative to 1+|value|: %.2g", worst)
	closeTo(t, "loss", []float64{scalar(fg.cost.Value())}, []float64{cost}, tol)
	closeTo(t, "out", floats(fg.out.Value()), out, tol)
	got := [][]float64{floats(fg.grads[0].Value()), floats(fg.grads[1].Value()), floats(fg.grads[2].Value())}
	for i, want := range [][]float64{dq, dk, dv} {
		closeTo(t, []string{"dq", "dk", "dv"}[i], got[i], want, tol)
	}
	// central differences of the reference's loss, at a few entries
	rng := rand.New(rand.NewPCG(7, uint64(c.sq)))
	vals := [][]float64{q, k, v}
	for trial := range 12 {
		which := trial % 3
		x := vals[which]
		i := rng.IntN(len(x))
		old, h := x[i], 1e-5
		x[i] = old + h
		up, _, _, _, _ := fg.reference(vals[0], vals[1], vals[2])
		x[i] = old - h
		down, _, _, _, _ := fg.reference(vals[0], vals[1], vals[2])
		x[i] = old
		fd := (up - down) / (2 * h)
		if g := got[which][i]; math.Abs(fd-g) > 1e-5*(math.Abs(fd)+1) && !(c.f32 && math.Abs(fd-g) <= tol32*(math.Abs(fd)+1)*10) {
			t.Fatalf("d loss / d %s[%d]: %v fused, %v by central differences", []string{"q", "k", "v"}[which], i, g, fd)
		}
	}
}

// TestFlashAttentionLargeTilesCPU: float32 attention forward and backward
// with the tiles the CPU's machine code takes at 2 cores (128 queries by 128
// keys; graphpass.cpuAttnBlocks), tails in both sequences and a causal
// mask, against the float64 reference and central differences.
func TestFlashAttentionLargeTilesCPU(t *testing.T) {
	c := flashCase{name: "float32, 128×128 tiles, tails", b: 8, sq: 200, sk: 150, dk: 48, dv: 40, scale: "mul", mask: "causal", f32: true}
	target := graphpass.CPU(2)
	target.Native = true
	opts := []fusion.Option{fusion.WithMatMulFusion(true), fusion.WithTarget(target)}
	// the kernels take the tiles this test is about
	fg := newFlashGraph(t, c)
	vm := fusion.NewTapeMachine(fg.g, opts...)
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	tiles := 0
	for _, n := range vm.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok && strings.HasPrefix(f.Kernel().Name, "fused") && f.Kernel().Meta["BLOCK_M"] != 0 {
			if m := f.Kernel().Meta; m["BLOCK_M"] != 128 || m["BLOCK_N"] != 128 {
				t.Fatalf("%s: %v, want 128×128 tiles", f.Kernel().Name, m)
			}
			tiles++
		}
	}
	vm.Close()
	if tiles != 3 {
		t.Fatalf("%d attention kernels with tiles, want 3", tiles)
	}
	checkFlashCase(t, c, 0, 2e-4, opts...)
}

func round32(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(float32(v))
	}
	return out
}
