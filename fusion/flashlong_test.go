package fusion_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// longAttention is the training attention of the memory target:
// softmax(q·kᵀ/8)·v over batch × heads 16 at sequence s and head dim 64,
// float32, the loss mean(out²) and the gradients of q, k and v.
type longAttention struct {
	g            *G.ExprGraph
	q, k, v, out *G.Node
	loss         *G.Node
	grads        G.Nodes
	qv, kv, vv   []float32
	bh, s, d     int
}

func newLongAttention(t *testing.T, s int, values bool) *longAttention {
	t.Helper()
	la := &longAttention{g: G.NewGraph(), bh: 16, s: s, d: 64}
	rng := rand.New(rand.NewPCG(uint64(s), 16))
	input := func(name string) (*G.Node, []float32) {
		n := G.NewTensor(la.g, tensor.Float32, 3, G.WithShape(la.bh, s, la.d), G.WithName(name))
		if !values {
			return n, nil
		}
		v := make([]float32, la.bh*s*la.d)
		for i := range v {
			v[i] = float32(rng.Float64()*2 - 1)
		}
		if err := G.Let(n, tensor.New(tensor.WithShape(la.bh, s, la.d), tensor.WithBacking(v))); err != nil {
			t.Fatal(err)
		}
		return n, v
	}
	la.q, la.qv = input("q")
	la.k, la.kv = input("k")
	la.v, la.vv = input("v")
	sc := G.Must(G.Mul(G.Must(G.BatchedMatMul(la.q, la.k, false, true)), G.NewConstant(float32(0.125))))
	la.out = G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), la.v, false, false))
	la.loss = G.Must(G.Mean(G.Must(G.Square(la.out))))
	grads, err := G.Grad(la.loss, la.q, la.k, la.v)
	if err != nil {
		t.Fatal(err)
	}
	la.grads = grads
	return la
}

// checkMemory: no value of the rewritten graph has as many elements as one
// head's scores, and all its values together take less than a sixteenth of
// the batch's scores' bytes: O(batch·heads·s·d), not O(s²).
func (la *longAttention) checkMemory(t *testing.T, c *fusion.Compiled) {
	t.Helper()
	var total int64
	for _, n := range c.Graph.AllNodes() {
		if n.Op() == nil {
			continue // the inputs
		}
		size := int64(n.Shape().TotalSize())
		if f, ok := n.Op().(*fusion.FusedOp); ok && f.Outputs() > 1 {
			size = 0 // counted by its parts
			for _, p := range f.PartSizes() {
				size += int64(p)
			}
		}
		if size >= int64(la.s)*int64(la.s) {
			t.Fatalf("%v holds %d elements, as many as a head's %d×%d scores", n.Name(), size, la.s, la.s)
		}
		total += 4 * size
	}
	scores := 4 * int64(la.bh) * int64(la.s) * int64(la.s)
	if total >= scores/16 {
		t.Fatalf("the rewritten graph's values take %d MiB, the scores %d MiB", total>>20, scores>>20)
	}
	t.Logf("values of the training step: %d MiB; the scores alone would be %d MiB", total>>20, scores>>20)
}

// TestFlashAttentionLongSequenceMemory: at S = 16384, B1 H16 D64, the
// training step compiled for the H200 holds O(S) values per head (the GPU
// test runs it).
func TestFlashAttentionLongSequenceMemory(t *testing.T) {
	la := newLongAttention(t, 16384, false)
	c, err := fusion.Compile(la.g, fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200))
	if err != nil {
		t.Fatal(err)
	}
	la.checkMemory(t, c)
}

// checkRows checks the output and dQ of a few rows against float64, and
// two sums over all keys: Σ_j dV_j = Σ_i dO_i (a softmax row sums to 1) and
// Σ_j dK_j = 0 (so does a SoftmaxDiff row), each head's, relative to the
// magnitude summed.
func (la *longAttention) checkRows(t *testing.T, tol float64) {
	t.Helper()
	s, d, bh := la.s, la.d, la.bh
	out, dq, dk, dv := floats(la.out.Value()), floats(la.grads[0].Value()), floats(la.grads[1].Value()), floats(la.grads[2].Value())
	n := float64(bh * s * d)
	for _, at := range [][2]int{{0, 0}, {3, s / 2}, {bh - 1, s - 1}} {
		b, i := at[0], at[1]
		q := la.qv[(b*s+i)*d:]
		p := make([]float64, s)
		m := math.Inf(-1)
		for j := range s {
			dot := 0.0
			for e := range d {
				dot += float64(q[e]) * float64(la.kv[(b*s+j)*d+e])
			}
			p[j] = dot * 0.125
			m = math.Max(m, p[j])
		}
		z := 0.0
		for j := range p {
			p[j] = math.Exp(p[j] - m)
			z += p[j]
		}
		o := make([]float64, d)
		for j := range p {
			p[j] /= z
			for e := range d {
				o[e] += p[j] * float64(la.vv[(b*s+j)*d+e])
			}
		}
		do := make([]float64, d)
		delta := 0.0
		for e := range d {
			do[e] = 2 * o[e] / n
			delta += do[e] * o[e]
		}
		dqi := make([]float64, d)
		for j := range p {
			dp := 0.0
			for e := range d {
				dp += do[e] * float64(la.vv[(b*s+j)*d+e])
			}
			ds := p[j] * (dp - delta) * 0.125
			for e := range d {
				dqi[e] += ds * float64(la.kv[(b*s+j)*d+e])
			}
		}
		closeTo(t, "out row", out[(b*s+i)*d:(b*s+i+1)*d], o, tol)
		scale := 0.0
		for _, x := range dqi {
			scale = math.Max(scale, math.Abs(x))
		}
		for e := range d {
			if got := dq[(b*s+i)*d+e]; math.Abs(got-dqi[e]) > tol*scale {
				t.Fatalf("dq[%d,%d,%d] = %v, want %v (row's largest %v)", b, i, e, got, dqi[e], scale)
			}
		}
	}
	for b := range bh {
		for e := range d {
			var sdv, sdo, sdk, mag float64
			for j := range s {
				at := (b*s+j)*d + e
				sdv, sdo, sdk = sdv+dv[at], sdo+2*out[at]/n, sdk+dk[at]
				mag += math.Abs(dk[at])
			}
			if math.Abs(sdv-sdo) > tol*math.Abs(sdo)+1e-12 || math.Abs(sdk) > tol*mag {
				t.Fatalf("head %d, column %d: Σ dV %v, Σ dO %v; Σ dK %v of Σ|dK| %v", b, e, sdv, sdo, sdk, mag)
			}
		}
	}
}

// TestFlashAttentionRowsCPU runs the long-sequence graph at S = 200 on the
// CPU: checkRows, which the GPU test uses at S = 16384, against it.
func TestFlashAttentionRowsCPU(t *testing.T) {
	la := newLongAttention(t, 200, true)
	vm := fusion.NewTapeMachine(la.g, fusion.WithMatMulFusion(true), fusion.WithKeep(la.out))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	la.checkRows(t, 1e-4)
}
