package ptxsim_test

import (
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// multiOutputProduct is the swapped-wgmma product of an m×k A and a k×n B
// (B stored transposed, n×k, where bT) with an epilogue of three outputs,
// as the encoder's forward keeps a GELU's intermediates for the backward:
// s = 2·acc + bias, y = tanh(s), z = s·y, each stored through a pointer
// of its own, masked at the edges.
func multiOutputProduct(t *testing.T, m, n, k int, bT bool) *tile.Kernel {
	t.Helper()
	const bm, bn, bk = 256, 128, 32
	b := tile.NewBuilder("mm_outputs", tile.Meta{"num_stages": 4, "wgmma": 2, "num_warps": 8})
	pa, pb, pbias := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("bias", tile.F32)
	ps, py, pz := b.Ptr("s", tile.F32), b.Ptr("y", tile.F32), b.Ptr("z", tile.F32)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	offA := b.Add(b.Mul(rm, k), rkRow)
	offB := b.Add(b.Mul(rkCol, n), rn) // (k, n) at k·n + n
	kStride := n
	if bT {
		offB, kStride = b.Add(rkCol, b.Mul(rn, k)), 1 // (k, n) at n·k + k
	}
	inM, inN := b.Lt(rm, m), b.Lt(rn, n)
	acc := b.For(0, k, bk, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		av := b.Load(b.AddPtr(pa, b.Add(offA, k0)), b.And(inM, b.Lt(b.Add(rkRow, k0), k)), 0.0)
		bv := b.Load(b.AddPtr(pb, b.Add(offB, b.Mul(k0, kStride))), b.And(b.Lt(b.Add(rkCol, k0), k), inN), 0.0)
		return []*tile.Value{b.Dot(av, bv, c[0], tile.PrecTF32)}
	})
	bias := b.BroadcastTo(b.Load(b.AddPtr(pbias, rn), inN, 0.0), tile.Shp(bm, bn))
	s := b.Add(b.Mul(acc[0], 2.0), bias)
	y := b.Tanh(s)
	idx, mask := b.Add(b.Mul(rm, n), rn), b.And(inM, inN)
	b.Store(b.AddPtr(ps, idx), s, mask)
	b.Store(b.AddPtr(py, idx), y, mask)
	b.Store(b.AddPtr(pz, idx), b.Mul(s, y), mask)
	kk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kk
}

// TestMultiOutputEpilogue: a wgmma product whose epilogue stores three
// values of every element, group by group of the accumulator's slots
// (codegen's storeGroup), agrees with the interpreter in the simulator
// (racecheck, initcheck), at sizes that are no multiple of the tile, with
// B stored as given and transposed; every output element written.
func TestMultiOutputEpilogue(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	const m, n, k = 300, 200, 100
	for _, bT := range []bool{false, true} {
		name := "A·B"
		if bT {
			name = "A·Bᵀ"
		}
		t.Run(name, func(t *testing.T) {
			kern := multiOutputProduct(t, m, n, k, bT)
			rng := rand.New(rand.NewPCG(11, 3))
			fill := func(size int) []float32 {
				d := make([]float32, size)
				for i := range d {
					d[i] = float32(rng.Float64()*2 - 1)
				}
				return d
			}
			a, bb, bias := fill(m*k), fill(k*n), fill(n)
			grid := tile.Grid{tile.CDiv(m, 256), tile.CDiv(n, 128)}
			run := func(launch func(args ...any) error) [3][]float32 {
				var outs [3][]float32
				for i := range outs {
					outs[i] = make([]float32, m*n)
					for j := range outs[i] {
						outs[i][j] = float32(math.NaN())
					}
				}
				if err := launch(a, bb, bias, outs[0], outs[1], outs[2]); err != nil {
					t.Fatal(err)
				}
				return outs
			}
			want := run(func(args ...any) error { return interp.Interpret(kern, grid, args...) })
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
			got := run(func(args ...any) error { return sim.Launch(kern, grid, args...) })
			// group by group: the first slot's three stores (tanh between)
			// before the second slot's; store by store the first 128 stores
			// of s came before any tanh
			epi := sim.Last.PTX[strings.LastIndex(sim.Last.PTX, "$L_pipe_end"):]
			stores := regexp.MustCompile(`st\.global`).FindAllStringIndex(epi, -1)
			tanh := regexp.MustCompile(`ex2\.approx`).FindAllStringIndex(epi, -1)
			if len(stores) != 3*128 || len(tanh) == 0 || tanh[0][0] > stores[1][0] {
				t.Errorf("%d stores, %d ex2: the outputs are not stored slot by slot", len(stores), len(tanh))
			}
			for o := range got {
				for i := range got[o] {
					g, w := float64(got[o][i]), float64(want[o][i])
					if math.IsNaN(g) || math.Abs(g-w) > 1e-5*max(1, math.Abs(w)) {
						t.Fatalf("output %d element (%d, %d): %v, want %v", o, i/n, i%n, g, w)
					}
				}
			}
		})
	}
}

// residualProduct is the swapped-wgmma product of an m×k A and a k×n B (B
// stored transposed where bT) at prec with a backward's epilogue that reads
// a residual input r of the output's shape: d = acc·(1 − r²) (tanh's
// derivative, as a GELU backward multiplies by the activation's) and
// e = acc + bias, each stored masked at the edges; BLOCK_M bm, epi_smem
// as given.
func residualProduct(t *testing.T, m, n, k, bm int, bT bool, prec tile.Precision, epi int) *tile.Kernel {
	t.Helper()
	const bn, bk = 128, 32
	b := tile.NewBuilder("mm_residual", tile.Meta{"num_stages": 4, "wgmma": 2, "num_warps": 8, "epi_smem": epi})
	pa, pb, pbias, pr := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("bias", tile.F32), b.Ptr("r", tile.F32)
	pd, pe := b.Ptr("d", tile.F32), b.Ptr("e", tile.F32)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	offA := b.Add(b.Mul(rm, k), rkRow)
	offB := b.Add(b.Mul(rkCol, n), rn)
	kStride := n
	if bT {
		offB, kStride = b.Add(rkCol, b.Mul(rn, k)), 1
	}
	inM, inN := b.Lt(rm, m), b.Lt(rn, n)
	acc := b.For(0, k, bk, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		av := b.Load(b.AddPtr(pa, b.Add(offA, k0)), b.And(inM, b.Lt(b.Add(rkRow, k0), k)), 0.0)
		bv := b.Load(b.AddPtr(pb, b.Add(offB, b.Mul(k0, kStride))), b.And(b.Lt(b.Add(rkCol, k0), k), inN), 0.0)
		return []*tile.Value{b.Dot(av, bv, c[0], prec)}
	})
	idx, mask := b.Add(b.Mul(rm, n), rn), b.And(inM, inN)
	r := b.Load(b.AddPtr(pr, idx), mask, 0.0)
	bias := b.BroadcastTo(b.Load(b.AddPtr(pbias, rn), inN, 0.0), tile.Shp(bm, bn))
	b.Store(b.AddPtr(pd, idx), b.Mul(acc[0], b.Sub(1.0, b.Mul(r, r))), mask)
	b.Store(b.AddPtr(pe, idx), b.Add(acc[0], bias), mask)
	kk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kk
}

// TestEpilogueThroughSmem: the swapped form's epilogue through shared
// memory (epi_smem = 1: the accumulator of Cᵀ stored into the stages'
// memory after the K loop and read back row-major) with a residual input,
// a bias and two outputs agrees with the interpreter running the same
// kernel in the simulator (racecheck, initcheck, the wgmma checks), at
// tiles of 256 and 192 rows, TF32 and bf16, B as given and transposed,
// sizes no multiple of the tile; every output element written (outputs
// poisoned with NaN). Where n is a multiple of 4 the residual's loads and
// the stores are 16 bytes wide, else 4; without epi_smem the stores are 4.
func TestEpilogueThroughSmem(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	for _, c := range []struct {
		name       string
		m, n, k    int
		bm         int
		bT         bool
		prec       tile.Precision
		epi        int
		wantVector bool
	}{
		{"tf32 A·B 300x200x100 256x128", 300, 200, 100, 256, false, tile.PrecTF32, 1, true},
		{"tf32 A·Bᵀ 300x200x100 256x128", 300, 200, 100, 256, true, tile.PrecTF32, 1, true},
		{"tf32 A·Bᵀ 430x200x70 192x128", 430, 200, 70, 192, true, tile.PrecTF32, 1, true},
		{"bf16 A·B 300x200x100 256x128", 300, 200, 100, 256, false, tile.PrecBF16, 1, true},
		{"bf16 A·Bᵀ 430x200x70 192x128", 430, 200, 70, 192, true, tile.PrecBF16, 1, true},
		{"tf32 A·B 130x90x100 256x128 n not a multiple of 4", 130, 90, 100, 256, false, tile.PrecTF32, 1, false},
		{"tf32 A·Bᵀ 300x200x100 256x128 without epi_smem", 300, 200, 100, 256, true, tile.PrecTF32, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			kern := residualProduct(t, c.m, c.n, c.k, c.bm, c.bT, c.prec, c.epi)
			rng := rand.New(rand.NewPCG(11, 5))
			fill := func(size int) []float32 {
				d := make([]float32, size)
				for i := range d {
					d[i] = float32(rng.Float64()*2 - 1)
				}
				return d
			}
			a, bb, bias, r := fill(c.m*c.k), fill(c.k*c.n), fill(c.n), fill(c.m*c.n)
			grid := tile.Grid{tile.CDiv(c.m, c.bm), tile.CDiv(c.n, 128)}
			run := func(launch func(args ...any) error) [2][]float32 {
				var outs [2][]float32
				for i := range outs {
					outs[i] = make([]float32, c.m*c.n)
					for j := range outs[i] {
						outs[i][j] = float32(math.NaN())
					}
				}
				if err := launch(a, bb, bias, r, outs[0], outs[1]); err != nil {
					t.Fatal(err)
				}
				return outs
			}
			want := run(func(args ...any) error { return interp.Interpret(kern, grid, args...) })
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
			got := run(func(args ...any) error { return sim.Launch(kern, grid, args...) })
			ptx := sim.Last.PTX
			if !strings.Contains(ptx, "wgmma.mma_async") {
				t.Fatal("not the wgmma form")
			}
			// (read back in runs of 4 only where the stores are 16 bytes
			// wide: at n = 90 in runs of 2, 8-byte reads and stores)
			if got := strings.Contains(ptx, "ld.shared.v4.f32"); got != (c.epi == 1 && c.wantVector) {
				t.Errorf("16-byte reads of the accumulator's tile: %v, want %v", got, c.epi == 1 && c.wantVector)
			}
			epi := ptx[strings.LastIndex(ptx, "$L_pipe_end"):]
			if got := strings.Contains(epi, "st.global.v4.f32"); got != c.wantVector {
				t.Errorf("st.global.v4.f32 in the epilogue: %v, want %v", got, c.wantVector)
			}
			// the residual's loads (the bias row's may be 16 bytes wide in
			// either form)
			if n := strings.Count(epi, "ld.global.v4.f32"); c.wantVector && n < c.bm/8 {
				t.Errorf("%d ld.global.v4.f32 in the epilogue, want at least %d (a row of 4 a thread each 8 rows)", n, c.bm/8)
			}
			for o := range got {
				for i := range got[o] {
					g, w := float64(got[o][i]), float64(want[o][i])
					if math.IsNaN(g) || math.Abs(g-w) > 1e-5*max(1, math.Abs(w)) {
						t.Fatalf("output %d element (%d, %d): %v, want %v", o, i/c.n, i%c.n, g, w)
					}
				}
			}
		})
	}
}
