//go:build tilefuse_cuda

package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestWriteBacksFetchedOnGPU checks the readable values a run brings down
// together (one wait, through the pinned fetcher): outputs of 1, 1003 and
// 5·2²⁰+3 float32s (the last larger than the fetcher, here held to 16 MiB,
// so it comes down on its own after the staged ones), each against a float64 reference
// (1e-6 relative), at three runs with a new x each; the values read after a
// run stay what they were after the next (fresh memory, not overwritten),
// and Stats counts a download per output; with launches one by one, as
// CUDA graphs and under WithProfile (no copies beside the kernels); and
// with every recycled or uncleared host buffer poisoned with NaN first, so
// that a byte a download into a recycled buffer leaves unwritten shows.
func TestWriteBacksFetchedOnGPU(t *testing.T) {
	if err := fusion.Available(fusion.CUDA); err != nil {
		t.Fatal(err)
	}
	defer fusion.SetMaxFetcherBytes(16 << 20)()
	modes := []struct {
		name   string
		opts   []fusion.Option
		poison bool
	}{
		{"launches", nil, false},
		{"graphs", []fusion.Option{fusion.WithCUDAGraphs(true)}, false},
		{"profile", []fusion.Option{fusion.WithProfile(true)}, false}, // no side-stream copies
		{"poisoned", nil, true},
	}
	for _, mode := range modes {
		for _, n := range []int{1003, 5<<20 + 3} {
			t.Run(fmt.Sprintf("%s/%d", mode.name, n), func(t *testing.T) {
				if mode.poison {
					defer fusion.SetRecycling(16, true)()
				}
				fetchedCase(t, n, mode.opts)
			})
		}
	}
}

func fetchedCase(t *testing.T, n int, opts []fusion.Option) {
	g := G.NewGraph()
	x := G.NewVector(g, tensor.Float32, G.WithShape(n), G.WithName("x"))
	y := G.Must(G.Add(G.Must(G.Mul(x, G.NewConstant(float32(2)))), G.NewConstant(float32(1))))
	z := G.Must(G.Square(x))
	s := G.Must(G.Sum(x))
	vm := fusion.NewTapeMachine(g, append([]fusion.Option{fusion.WithBackend(fusion.CUDA)}, opts...)...)
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(n), 5))
	type kept struct {
		y, z []float32
		s    float32
		want [3][]float64
		tol  float64 // the sum's: float32 rounding over a reduction tree, 6e-8·log2(n)·Σ|x|, doubled
	}
	var runs []kept
	for run := range 3 {
		xv := make([]float32, n)
		for i := range xv {
			xv[i] = float32(rng.NormFloat64())
		}
		if err := G.Let(x, tensor.New(tensor.WithShape(n), tensor.WithBacking(xv))); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatalf("n %d run %d: %v", n, run, err)
		}
		var k kept
		k.want[0], k.want[1], k.want[2] = make([]float64, n), make([]float64, n), []float64{0}
		for i, v := range xv {
			k.want[0][i] = 2*float64(v) + 1
			k.want[1][i] = float64(v) * float64(v)
			k.want[2][0] += float64(v)
			k.tol += 2 * 6e-8 * math.Log2(float64(n)) * math.Abs(float64(v))
		}
		k.y = y.Value().Data().([]float32)
		k.z = z.Value().Data().([]float32)
		k.s = s.Value().Data().(float32)
		if st := vm.Stats(); st.Downloads != 3 {
			t.Errorf("n %d run %d: %d downloads, want 3 (y, z, s)", n, run, st.Downloads)
		}
		runs = append(runs, k)
		vm.Reset()
		for r, k := range runs { // this run's and every earlier one's, unchanged
			for i := range n {
				if d := math.Abs(float64(k.y[i]) - k.want[0][i]); d > 1e-6*(1+math.Abs(k.want[0][i])) {
					t.Fatalf("n %d after run %d: run %d's y[%d] = %v, want %v", n, run, r, i, k.y[i], k.want[0][i])
				}
				if d := math.Abs(float64(k.z[i]) - k.want[1][i]); d > 1e-6*(1+math.Abs(k.want[1][i])) {
					t.Fatalf("n %d after run %d: run %d's z[%d] = %v, want %v", n, run, r, i, k.z[i], k.want[1][i])
				}
			}
			if d := math.Abs(float64(k.s) - k.want[2][0]); d > k.tol {
				t.Fatalf("n %d after run %d: run %d's sum = %v, want %v", n, run, r, k.s, k.want[2][0])
			}
		}
	}
	if err := vm.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSpeculativeRunOnGPU writes into a kept input's tensor in place
// between runs (no Let, no Touch): the run launches its compute on the
// device's copy, finds the bytes changed when the hashes come in, uploads
// the input and computes again, so that every run's y = 2x+1 is the new
// x's (1e-6 relative); Stats counts the uploads (first sight, second sight
// hashed, then only after a write), with launches and as CUDA graphs.
func TestSpeculativeRunOnGPU(t *testing.T) {
	if err := fusion.Available(fusion.CUDA); err != nil {
		t.Fatal(err)
	}
	const n = 300007
	for _, graphs := range []bool{false, true} {
		t.Run(fmt.Sprintf("graphs=%v", graphs), func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewVector(g, tensor.Float32, G.WithShape(n), G.WithName("x"))
			y := G.Must(G.Add(G.Must(G.Mul(x, G.NewConstant(float32(2)))), G.NewConstant(float32(1))))
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CUDA), fusion.WithCUDAGraphs(graphs))
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			defer vm.Close()
			rng := rand.New(rand.NewPCG(3, 9))
			xv := make([]float32, n)
			fill := func() {
				for i := range xv {
					xv[i] = float32(rng.NormFloat64())
				}
			}
			fill()
			if err := G.Let(x, tensor.New(tensor.WithShape(n), tensor.WithBacking(xv))); err != nil {
				t.Fatal(err)
			}
			for run, c := range []struct {
				write bool
				ups   int
			}{{false, 1}, {false, 1}, {false, 0}, {true, 1}, {false, 0}, {true, 1}, {true, 1}, {false, 0}} {
				if c.write {
					fill()
				}
				if err := vm.RunAll(); err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				if st := vm.Stats(); st.Uploads != c.ups {
					t.Errorf("run %d: %d uploads, want %d", run, st.Uploads, c.ups)
				}
				got := y.Value().Data().([]float32)
				for i, v := range xv {
					want := 2*float64(v) + 1
					if d := math.Abs(float64(got[i]) - want); d > 1e-6*(1+math.Abs(want)) {
						t.Fatalf("run %d (written: %v): y[%d] = %v, want %v", run, c.write, i, got[i], want)
					}
				}
				vm.Reset()
			}
		})
	}
}
