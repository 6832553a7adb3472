package fusion

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
)

// multiConfigs are solver configurations for the multi-tensor kernel's
// tests: every solver, bare and with every switch (L1, L2, batch, clip).
func multiConfigs(t *testing.T) map[string]solverConfig {
	t.Helper()
	out := map[string]solverConfig{}
	mks := []func(...G.SolverOpt) G.Solver{
		func(o ...G.SolverOpt) G.Solver {
			return G.NewVanillaSolver(append([]G.SolverOpt{G.WithLearnRate(0.1)}, o...)...)
		},
		func(o ...G.SolverOpt) G.Solver {
			return G.NewMomentum(append([]G.SolverOpt{G.WithLearnRate(0.1)}, o...)...)
		},
		func(o ...G.SolverOpt) G.Solver {
			return G.NewAdamSolver(append([]G.SolverOpt{G.WithLearnRate(0.01)}, o...)...)
		},
		func(o ...G.SolverOpt) G.Solver {
			return G.NewRMSPropSolver(append([]G.SolverOpt{G.WithLearnRate(0.01)}, o...)...)
		},
		func(o ...G.SolverOpt) G.Solver {
			return G.NewAdaGradSolver(append([]G.SolverOpt{G.WithLearnRate(0.1)}, o...)...)
		},
	}
	for _, mk := range mks {
		for _, opts := range [][]G.SolverOpt{nil, {G.WithL1Reg(0.01), G.WithL2Reg(0.02), G.WithBatchSize(4), G.WithClip(0.5)}} {
			c, err := readSolver(mk(opts...))
			if err != nil {
				t.Fatal(err)
			}
			out[c.kernelName(tile.F32)] = c
		}
	}
	return out
}

// TestSolverMultiTableEncoding checks the table's offsets (hi·2³¹ + lo)
// for offsets far beyond 32 bits, negative ones and chunk counts, decoded
// as the kernel decodes them.
func TestSolverMultiTableEncoding(t *testing.T) {
	c := solverConfig{kind: solverAdam}
	offs := [][]int64{
		{0, -5, 1 << 40, -(1 << 35) - 3},
		{7, math.MaxInt32, math.MinInt32, 3 << 33},
	}
	sizes := []int{solverBlock + 1, 5}
	tab, err := c.multiTable(offs, sizes)
	if err != nil {
		t.Fatal(err)
	}
	row := c.multiRow()
	if got, want := len(tab), row*3; got != want {
		t.Fatalf("%d entries, want %d (3 programs)", got, want)
	}
	type prog struct {
		learnable, at, n int
	}
	for p, want := range []prog{{0, 0, solverBlock}, {0, solverBlock, 1}, {1, 0, 5}} {
		r := tab[p*row : (p+1)*row]
		for k, o := range offs[want.learnable] {
			got := int64(r[2*k])*(1<<31) + int64(r[2*k+1])
			if got != o+int64(want.at) || r[2*k+1] < 0 {
				t.Errorf("program %d tensor %d: offset %d (hi %d lo %d), want %d", p, k, got, r[2*k], r[2*k+1], o+int64(want.at))
			}
		}
		if int(r[row-1]) != want.n {
			t.Errorf("program %d: %d elements, want %d", p, r[row-1], want.n)
		}
	}
	if _, err := c.multiTable([][]int64{{0, 1}}, []int{3}); err == nil {
		t.Error("a learnable with 2 tensors for Adam (4): no error")
	}
}

// TestSolverMultiKernelOnPTXSim runs the multi-tensor kernel's PTX in the
// simulator over six tensors of awkward sizes (1, 3, 1023, 1024, 1025,
// 2500 elements: tails not multiples of the block) laid out in memory out
// of order (offsets from base negative and positive), each followed by
// poison, and checks every value, state and gradient bit for bit against
// the per-tensor kernel's run on the same simulator, for three steps, and
// the poison untouched: one launch does what a launch per tensor did.
func TestSolverMultiKernelOnPTXSim(t *testing.T) {
	sizes := []int{1025, 3, 2500, 1, 1024, 1023}
	const pad = 7
	for name, c := range multiConfigs(t) {
		for _, d := range []tile.DType{tile.F32, tile.F64} {
			t.Run(fmt.Sprintf("%s/%v", name, d), func(t *testing.T) {
				if testing.Short() && d == tile.F64 {
					t.Skip("-short: f32 only")
				}
				multiCase(t, c, d, sizes, pad)
			})
		}
	}
}

func multiCase(t *testing.T, c solverConfig, d tile.DType, sizes []int, pad int) {
	single, err := buildSolverKernel(c, d)
	if err != nil {
		t.Fatal(err)
	}
	multi, err := buildSolverMultiKernel(c, d)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := codegen.Compile(multi, codegen.Options{Arch: 90, NumWarps: 4, Spec: ptxsim.Spec(multi, make([]any, len(multi.Params)))})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := ptxsim.Parse(ck.PTX)
	if err != nil {
		t.Fatal(err)
	}
	ntens := 2 + c.kind.states()
	rng := rand.New(rand.NewPCG(uint64(len(sizes)), uint64(c.kind)))
	const poison = -7.25e3
	// per learnable, per tensor (w, g, states): host values, [n | pad poison]
	host := make([][][]float64, len(sizes))
	for i, n := range sizes {
		host[i] = make([][]float64, ntens)
		for k := range ntens {
			v := make([]float64, n+pad)
			for j := range v {
				v[j] = poison
				if j < n {
					v[j] = 0.5 * rng.NormFloat64()
					if k >= 2 {
						v[j] = math.Abs(v[j]) // running sums of squares stay positive
					}
				}
			}
			host[i][k] = v
		}
	}
	conv := func(v []float64) any {
		if d == tile.F64 {
			return append([]float64(nil), v...)
		}
		f := make([]float32, len(v))
		for j, x := range v {
			f[j] = float32(x)
		}
		return f
	}
	asF64 := func(v any) []float64 {
		switch v := v.(type) {
		case []float32:
			out := make([]float64, len(v))
			for j, x := range v {
				out[j] = float64(x)
			}
			return out
		}
		return v.([]float64)
	}
	// the reference: the per-tensor kernel on the simulator
	ref := make([][]any, len(sizes))
	for i := range sizes {
		for k := range ntens {
			ref[i] = append(ref[i], conv(host[i][k]))
		}
	}
	// the multi-tensor kernel's memory: buffers allocated in reverse
	// order, tensor-major, so that base (the first learnable's w) sits
	// in the middle
	mem := ptxsim.NewMemory()
	addr := make([][]uint64, len(sizes))
	for i := range sizes {
		addr[i] = make([]uint64, ntens)
	}
	es := uint64(4)
	if d == tile.F64 {
		es = 8
	}
	for k := ntens - 1; k >= 0; k-- {
		for i := len(sizes) - 1; i >= 0; i-- {
			a, err := mem.AllocCopy(fmt.Sprintf("t%d.%d", i, k), conv(host[i][k]))
			if err != nil {
				t.Fatal(err)
			}
			addr[i][k] = a
		}
	}
	base := addr[0][0]
	offs := make([][]int64, len(sizes))
	for i := range sizes {
		for k := range ntens {
			offs[i] = append(offs[i], (int64(addr[i][k])-int64(base))/int64(es))
		}
	}
	tab, err := c.multiTable(offs, sizes)
	if err != nil {
		t.Fatal(err)
	}
	tabAt, err := mem.AllocCopy("tab", tab)
	if err != nil {
		t.Fatal(err)
	}
	sim := &ptxsim.Launcher{Arch: 90, NumWarps: 4}
	for step := 1; step <= 3; step++ {
		// a fresh gradient each step, the same in both
		for i, n := range sizes {
			g := make([]float64, n+pad)
			for j := range g {
				g[j] = poison
				if j < n {
					g[j] = 0.3 * rng.NormFloat64()
				}
			}
			ref[i][1] = conv(g)
			if err := mem.Write(addr[i][1], conv(g)); err != nil {
				t.Fatal(err)
			}
		}
		sc := c.scalars(d, step)
		for i, n := range sizes {
			args := append(append([]any{}, ref[i]...), n)
			args = append(args, sc...)
			if err := sim.Launch(single, tile.Grid{tile.CDiv(n, solverBlock)}, args...); err != nil {
				t.Fatal(err)
			}
		}
		args := append([]any{base, tabAt}, sc...)
		for j, p := range multi.Params[2:] {
			if args[2+j], err = tile.ConvertScalar(args[2+j], p.Type.DType); err != nil {
				t.Fatal(err)
			}
		}
		cfg := ptxsim.Config{Grid: [3]int{len(tab) / c.multiRow(), 1, 1}, Block: [3]int{ck.Threads(), 1, 1}, DynamicShared: ck.SharedBytes}
		if err := mod.Launch(multi.Name, cfg, mem, args...); err != nil {
			t.Fatal(err)
		}
		for i, n := range sizes {
			for k := range ntens {
				got := conv(host[i][k]) // the shape of it; overwritten
				if err := mem.Read(addr[i][k], got); err != nil {
					t.Fatal(err)
				}
				g, w := asF64(got), asF64(ref[i][k])
				for j := range n + pad {
					if math.Float64bits(g[j]) != math.Float64bits(w[j]) {
						t.Fatalf("step %d learnable %d (%d elements) tensor %d element %d: multi %v, per tensor %v", step, i, n, k, j, g[j], w[j])
					}
					if j >= n && g[j] != poison {
						t.Fatalf("step %d learnable %d tensor %d: poison past the end overwritten at %d: %v", step, i, k, j, g[j])
					}
				}
			}
		}
	}
}
