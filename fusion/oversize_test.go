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

// TestOversizedLeftToGorgonia: nodes that read or write a tensor of more
// elements than kernels index (graphpass.MaxElements, lowered here to
// 5000 so that the tensors stay small) run as Gorgonia runs them, beside
// the kernels of the rest of the graph, and every value is right: out =
// Σ_j exp(x)ᵢⱼ + Σ_k tanh(y)ᵢₖ with x 64×100 (6400 elements: exp and its
// sum left to Gorgonia), y 64×10 (fused), and p = x·w (a product reading
// x: left to Gorgonia too). The report names each such node and says why.
// On every backend this build has; a backend that is not here is skipped
// and says so.
func TestOversizedLeftToGorgonia(t *testing.T) {
	const r, c, cy, cw, limit = 64, 100, 10, 7, 5000
	rng := rand.New(rand.NewPCG(40, 1))
	xv, yv, wv := randMatrix(rng, r, c, 1), randMatrix(rng, r, cy, 2), randMatrix(rng, c, cw, 1)
	xs, ys, ws := xv.Data().([]float64), yv.Data().([]float64), wv.Data().([]float64)
	want, wantP := make([]float64, r), make([]float64, r*cw)
	for i := range r {
		for j := range c {
			want[i] += math.Exp(xs[i*c+j])
			for k := range cw {
				wantP[i*cw+k] += xs[i*c+j] * ws[j*cw+k]
			}
		}
		for k := range cy {
			want[i] += math.Tanh(ys[i*cy+k])
		}
	}
	for _, b := range []fusion.Backend{fusion.CPU, fusion.CUDA} {
		t.Run(b.String(), func(t *testing.T) {
			if err := fusion.Available(b); err != nil {
				t.Skipf("backend %v is not here: %v", b, err)
			}
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(r, c), G.WithName("x"))
			y := G.NewMatrix(g, tensor.Float64, G.WithShape(r, cy), G.WithName("y"))
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(c, cw), G.WithName("w"))
			out := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Exp(x)), 1)), G.Must(G.Sum(G.Must(G.Tanh(y)), 1))))
			p := G.Must(G.Mul(x, w))
			G.Let(x, xv)
			G.Let(y, yv)
			G.Let(w, wv)
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(b), fusion.WithMatMulFusion(true), fusion.WithMaxElements(limit))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			rep := vm.Report()
			left := map[string]string{}
			for _, u := range rep.Unfused {
				left[u.Op] = u.Why
			}
			for _, op := range []string{"Exp", "Σ[1]", "MatMul"} {
				why, ok := "", false
				for o, w := range left {
					if strings.HasPrefix(o, op) {
						why, ok = w, true
					}
				}
				if !ok || !strings.Contains(why, "6400 elements") || !strings.Contains(why, "32-bit offsets") {
					t.Errorf("%s: left to Gorgonia %v, why %q (unfused: %v)", op, ok, why, rep.Unfused)
				}
			}
			if rep.Kernels() == 0 {
				t.Fatalf("no kernel: the small part of the graph is not fused\n%v", rep)
			}
			for run := range 2 {
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				check := func(name string, got, want []float64) {
					for i := range want {
						if d := math.Abs(got[i] - want[i]); !(d <= 1e-12*(1+math.Abs(want[i]))) {
							t.Fatalf("run %d: %s[%d] = %v, want %v", run, name, i, got[i], want[i])
						}
					}
				}
				check("out", out.Value().Data().([]float64), want)
				check("x·w", p.Value().Data().([]float64), wantP)
			}
		})
	}
}

// TestOversizedAttentionMask: attention whose additive mask has more
// elements than kernels index (the bound lowered to 4096; the mask and the
// scores 8192) is not one flash kernel: its products, softmax and mask run
// as Gorgonia runs them, the rest fused, and the output and the gradients
// of q, k and v are those of the machine with the bound at its default
// (one flash kernel forward, two backward), within 1e-12.
func TestOversizedAttentionMask(t *testing.T) {
	const b, s, d = 2, 64, 8
	rng := rand.New(rand.NewPCG(40, 2))
	vals := map[string]*tensor.Dense{}
	for _, n := range []string{"q", "k", "v"} {
		vals[n] = tensor.New(tensor.WithShape(b, s, d), tensor.WithBacking(randMatrix(rng, b*s, d, 1).Data()))
	}
	vals["mask"] = tensor.New(tensor.WithShape(b, s, s), tensor.WithBacking(randMatrix(rng, b*s, s, 2).Data()))
	run := func(opts ...fusion.Option) (*fusion.Report, [][]float64) {
		g := G.NewGraph()
		in := map[string]*G.Node{}
		for _, n := range []string{"q", "k", "v", "mask"} {
			in[n] = G.NewTensor(g, tensor.Float64, 3, G.WithShape(vals[n].Shape()...), G.WithName(n))
			G.Let(in[n], vals[n].Clone().(*tensor.Dense))
		}
		sc := G.Must(G.Add(G.Must(G.Mul(G.Must(G.BatchedMatMul(in["q"], in["k"], false, true)), G.NewConstant(0.35))), in["mask"]))
		out := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), in["v"], false, false))
		grads, err := G.Grad(G.Must(G.Sum(G.Must(G.Square(out)))), in["q"], in["k"], in["v"])
		if err != nil {
			t.Fatal(err)
		}
		vm := fusion.NewTapeMachine(g, append([]fusion.Option{fusion.WithMatMulFusion(true)}, opts...)...)
		defer vm.Close()
		if err := vm.Err(); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		var got [][]float64
		for _, n := range append(G.Nodes{out}, grads...) {
			got = append(got, append([]float64(nil), n.Value().Data().([]float64)...))
		}
		return vm.Report(), got
	}
	repDef, want := run()
	repLow, got := run(fusion.WithMaxElements(4096))
	if !strings.Contains(repDef.String(), "attention") {
		t.Fatalf("at the default bound no attention kernel:\n%v", repDef)
	}
	if strings.Contains(repLow.String(), "attention") {
		t.Fatalf("at 4096 an attention kernel reads the 8192-element mask:\n%v", repLow)
	}
	over := 0
	for _, u := range repLow.Unfused {
		if strings.Contains(u.Why, "32-bit offsets") {
			over++
		}
	}
	if over == 0 || repLow.Kernels() == 0 {
		t.Fatalf("at 4096: %d ops left to Gorgonia for their size, %d kernels\n%v", over, repLow.Kernels(), repLow)
	}
	for i := range want {
		for j := range want[i] {
			if d := math.Abs(got[i][j] - want[i][j]); !(d <= 1e-12*(1+math.Abs(want[i][j]))) {
				t.Fatalf("value %d, element %d: %v at 4096, %v at the default", i, j, got[i][j], want[i][j])
			}
		}
	}
}
