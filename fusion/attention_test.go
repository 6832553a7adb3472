package fusion_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/fusion"
)

func rand3(rng *rand.Rand, a, b, c int) *tensor.Dense {
	v := make([]float64, a*b*c)
	for i := range v {
		v[i] = rng.Float64()*2 - 1
	}
	return tensor.New(tensor.WithShape(a, b, c), tensor.WithBacking(v))
}

// TestAttentionIsOneKernel: softmax(q·kᵀ·scale [+ mask])·v, written with
// Gorgonia's batched products, becomes one flash-style kernel (no score
// matrix), matching a float64 reference; sequence lengths that are not a
// multiple of the block and a head dimension below 16 included.
func TestAttentionIsOneKernel(t *testing.T) { checkAttention(t, 1e-12, fusion.WithMatMulFusion(true)) }

// TestAttentionOnCPUDefault: on the CPU, attention fuses by default where
// the interpreter's dot has vector instructions (cpu.VectorDot), and is
// left to Gorgonia's BLAS products elsewhere and under
// WithMatMulFusion(false), with the report saying how to fuse it.
func TestAttentionOnCPUDefault(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  []fusion.Option
		fused bool
	}{{"default", nil, cpu.VectorDot()}, {"WithMatMulFusion(false)", []fusion.Option{fusion.WithMatMulFusion(false)}, false}} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			q := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 5, 4), G.WithName("q"))
			v := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 5, 4), G.WithName("v"))
			G.Must(G.BatchedMatMul(G.Must(G.SoftMax(G.Must(G.BatchedMatMul(q, q, false, true)))), v, false, false))
			comp, err := fusion.Compile(g, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			fused := false
			for _, grp := range comp.Report.Groups {
				fused = fused || grp.Kind == "attention"
			}
			if fused != c.fused {
				t.Fatalf("attention fused: %v, want %v:\n%v", fused, c.fused, comp.Report)
			}
			if !fused && !strings.Contains(comp.Report.String(), "WithMatMulFusion") {
				t.Fatalf("the report does not say how to fuse attention:\n%v", comp.Report)
			}
		})
	}
}

func checkAttention(t *testing.T, tol float64, opts ...fusion.Option) {
	for _, c := range []struct {
		name    string
		b, s, d int
		masked  int // 0: none; 1: an additive -Inf mask; 2: a 0/1 mask times -1e9 in the graph; 3: 1 with row 3 all -Inf
	}{{"plain", 3, 37, 8, 0}, {"causal mask", 2, 70, 20, 1}, {"0/1 mask scaled in the graph", 2, 45, 12, 2},
		{"a fully masked row gives NaN, as softmax then the product does", 2, 40, 8, 3}, {"one block", 1, 16, 16, 0}} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			q := G.NewTensor(g, tensor.Float64, 3, G.WithShape(c.b, c.s, c.d), G.WithName("q"))
			k := G.NewTensor(g, tensor.Float64, 3, G.WithShape(c.b, c.s, c.d), G.WithName("k"))
			v := G.NewTensor(g, tensor.Float64, 3, G.WithShape(c.b, c.s, c.d), G.WithName("v"))
			scale := 1 / math.Sqrt(float64(c.d))
			sc := G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(scale)))
			var mask *G.Node
			if c.masked > 0 {
				mask = G.NewTensor(g, tensor.Float64, 3, G.WithShape(c.b, c.s, c.s), G.WithName("mask"))
				add := mask
				if c.masked == 2 {
					add = G.Must(G.Mul(mask, G.NewConstant(-1e9)))
				}
				sc = G.Must(G.Add(sc, add))
			}
			out := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
			vm := oneKernel(t, g, "attention", true, opts...)
			lowersToPTX(t, vm)
			rng := rand.New(rand.NewPCG(uint64(c.s), 3))
			qv, kv, vv := rand3(rng, c.b, c.s, c.d), rand3(rng, c.b, c.s, c.d), rand3(rng, c.b, c.s, c.d)
			G.Let(q, qv)
			G.Let(k, kv)
			G.Let(v, vv)
			md, add := make([]float64, c.b*c.s*c.s), make([]float64, c.b*c.s*c.s)
			if c.masked > 0 {
				for bi := 0; bi < c.b; bi++ {
					for i := 0; i < c.s; i++ {
						for j := 0; j < c.s; j++ {
							if j <= i && !(c.masked == 3 && i == 3) {
								continue // causal: keys up to the query's own position
							}
							md[(bi*c.s+i)*c.s+j], add[(bi*c.s+i)*c.s+j] = math.Inf(-1), math.Inf(-1)
							if c.masked == 2 {
								md[(bi*c.s+i)*c.s+j], add[(bi*c.s+i)*c.s+j] = 1, -1e9
							}
						}
					}
				}
				G.Let(mask, tensor.New(tensor.WithShape(c.b, c.s, c.s), tensor.WithBacking(md)))
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			qd, kd, vd := qv.Data().([]float64), kv.Data().([]float64), vv.Data().([]float64)
			want := make([]float64, c.b*c.s*c.d)
			for bi := 0; bi < c.b; bi++ {
				scores := make([]float64, c.s*c.s)
				for i := 0; i < c.s; i++ {
					for j := 0; j < c.s; j++ {
						dot := 0.0
						for l := 0; l < c.d; l++ {
							dot += qd[(bi*c.s+i)*c.d+l] * kd[(bi*c.s+j)*c.d+l]
						}
						scores[i*c.s+j] = dot*scale + add[(bi*c.s+i)*c.s+j]
					}
				}
				p := softmaxRef(scores, c.s, c.s)
				for i := 0; i < c.s; i++ {
					for l := 0; l < c.d; l++ {
						acc := 0.0
						for j := 0; j < c.s; j++ {
							acc += p[i*c.s+j] * vd[(bi*c.s+j)*c.d+l]
						}
						want[(bi*c.s+i)*c.d+l] = acc
					}
				}
			}
			closeTo(t, "attention", floats(out.Value()), want, tol)
		})
	}
}

// lowersToPTX checks that every kernel of vm's graph lowers to PTX (which
// the GPU backend needs; ptxas runs in the codegen tests and on the GPU).
func lowersToPTX(t *testing.T, vm *fusion.Machine) {
	t.Helper()
	for _, n := range vm.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok {
			if _, err := codegen.Compile(f.Kernel(), codegen.Options{NumWarps: f.Kernel().Meta["num_warps"]}); err != nil {
				t.Fatalf("%s does not lower to PTX: %v", f.Kernel().Name, err)
			}
		}
	}
}
