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
