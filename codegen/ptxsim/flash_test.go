package ptxsim_test

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// flashKernel is a FlashAttention-2 forward pass written by hand, as
// graphpass writes it: a program holds bm queries of a head dim d (Q
// loaded once), loops over blocks of bn of the n keys (Kᵀ loaded as
// [d, bn], its head dim contiguous in memory, and V as [bn, d]) with an
// online softmax, and divides by the row sums at the end.
func flashKernel(t *testing.T, n, d, bm, bn int, prec tile.Precision, meta tile.Meta) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("flash", meta)
	pq, pk, pv, po := b.Ptr("q", tile.F32), b.Ptr("k", tile.F32), b.Ptr("v", tile.F32), b.Ptr("o", tile.F32)
	inf := math.Inf(1)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1) // [BM,1]
	rd, rdCol := b.ExpandDims(b.Arange(0, d), 0), b.ExpandDims(b.Arange(0, d), 1)
	rows := b.BroadcastTo(b.Lt(rm, n), tile.Shp(bm, d))
	q := b.Load(b.AddPtr(pq, b.Add(b.Mul(rm, d), rd)), rows, 0.0)
	init := []*tile.Value{b.Full(-inf, tile.F32, bm, 1), b.Zeros(tile.F32, bm, 1), b.Zeros(tile.F32, bm, d)}
	res := b.For(0, n, bn, init, func(n0 *tile.Value, c []*tile.Value) []*tile.Value {
		rn := b.ExpandDims(b.Add(b.Arange(0, bn), n0), 0) // [1,BN]
		kt := b.Load(b.AddPtr(pk, b.Add(b.Mul(rn, d), rdCol)), b.BroadcastTo(b.Lt(rn, n), tile.Shp(d, bn)), 0.0)
		s := b.Where(b.Lt(rn, n), b.Dot(q, kt, nil, prec), -inf)
		m := b.Maximum(c[0], b.Max(s, 1, tile.KeepDims))
		alpha := b.Exp(b.Sub(c[0], m))
		p := b.Exp(b.Sub(s, m))
		rnCol := b.ExpandDims(b.Add(b.Arange(0, bn), n0), 1) // [BN,1]
		v := b.Load(b.AddPtr(pv, b.Add(b.Mul(rnCol, d), rd)), b.BroadcastTo(b.Lt(rnCol, n), tile.Shp(bn, d)), 0.0)
		l := b.Add(b.Mul(c[1], alpha), b.Sum(p, 1, tile.KeepDims))
		return []*tile.Value{m, l, b.Dot(p, v, b.Mul(c[2], alpha), prec)}
	})
	b.Store(b.AddPtr(po, b.Add(b.Mul(rm, d), rd)), b.Div(res[2], res[1]), rows)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestFlashMMALoop: the hand-written flash forward pass runs in an MMA loop
// at the tensor-core precisions: S and P·V on mma.sync with P handed from
// the first product's accumulator to the second's A operand in registers
// (nothing of it through shared memory), the row maximum and sum as
// shuffles among a row's 4 lanes, K and V copied by cp.async (16 bytes: Kᵀ
// along its contiguous first dimension) into two stages, one wait and one
// barrier an iteration; the result agrees with the interpreter on 100 keys
// (not a multiple of the 32-key blocks) under racecheck and initcheck, on
// sm_80 and sm_90. With the meta-parameter mma_regs = 0 Q is written once
// into shared memory and its fragments read every iteration (ld.shared.v2,
// two per m16 tile and k step). IEEE stays on the FMA path.
func TestFlashMMALoop(t *testing.T) {
	const n, d, bm, bn = 100, 64, 64, 32
	for _, c := range []struct {
		name   string
		prec   tile.Precision
		meta   tile.Meta
		tol    tiletest.Tol
		mma    string
		per    int // mma.sync an iteration: (S: 4 n8 × 8 k steps + PV: 8 n8 × 4 k steps) per warp
		aReads int // ld.shared.v2 of Q an iteration
		stores int // st.shared an iteration: TF32's in-place rounding of the thread's copies (4 words each)
		cvts   int // conversions to TF32 an iteration (B rounded by cvt.rn, or on sm_80 by integer ops around a cvt.rna; A truncated by and.b32 0xffffe000; 3xTF32's split likewise)
	}{
		{"tf32", tile.PrecTF32, nil, tiletest.Tol{Abs: 2e-3, Rel: 2e-2}, `mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32`, 32 + 32, 0, 2 * 64 * 32 / 128 / 4, 2*64*32/128 + 16*32/32},
		{"tf32, Q in shared memory", tile.PrecTF32, tile.Meta{"mma_regs": 0}, tiletest.Tol{Abs: 2e-3, Rel: 2e-2}, `mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32`, 32 + 32, 2 * 8, 2 * 64 * 32 / 128 / 4, 2*64*32/128 + 16*32/32},
		{"bf16", tile.PrecBF16, nil, tiletest.Tol{Abs: 2e-2, Rel: 5e-2}, `mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32`, 16 + 16, 0, 0, 0},
		{"tf32x3", tile.PrecTF32x3, nil, tiletest.Tol{Abs: 2e-5, Rel: 2e-4}, `mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32`, 3 * (32 + 32), 0, 0, 2 * (4*8*2 + 8*4*2 + 16)}, // hi and lo of every B word and of P's
		{"ieee", tile.PrecIEEE, nil, tiletest.Tol{Abs: 2e-5, Rel: 2e-4}, `mma\.sync`, 0, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := flashKernel(t, n, d, bm, bn, c.prec, c.meta)
			ck, err := codegen.Compile(k, codegen.Options{Arch: 80, Spec: []int{16, 16, 16, 16}})
			if err != nil {
				t.Fatal(err)
			}
			p := ck.PTX
			if c.prec == tile.PrecIEEE {
				if strings.Contains(p, "mma.sync") || strings.Contains(p, "cp.async") {
					t.Error("an ieee flash loop went onto the tensor cores")
				}
			} else {
				i, j := strings.Index(p, "$L_mma_loop_"), strings.Index(p, "$L_mma_loop_end_")
				if i < 0 || j < 0 {
					t.Fatalf("no MMA loop:\n%s", p)
				}
				loop := p[i:strings.LastIndex(p, "$L_mma_loop_end_")]
				for _, x := range []struct {
					re   string
					want int
				}{
					{c.mma, c.per},
					{`cp\.async\.cg\.shared\.global \[%r\d+(\+-?\d+)?\], \[%rd\d+(\+-?\d+)?\], 16, %r\d+`, 2 * 64 * 32 / 4 / 128},
					{`cp\.async\.wait_group 0`, 1},
					{`bar\.sync`, 1},
					{`st\.shared`, c.stores},
					// TF32: each thread rounds its 2·32·64/128 copied words
					// of K and V (B operands) once, and truncates its P
					// fragments (A: 16 rows × 32 keys a warp); the B
					// fragments read no conversion
					{`cvt\.rna?\.tf32\.f32|and\.b32 %r\d+, %[rf]\d+, 0xffffe000`, c.cvts},
					{`ld\.shared\.v2\.b32`, c.aReads + 4*8}, // and S's B fragments: 4 n8 × 8 k steps
					{`shfl\.sync\.bfly`, 2 * 2 * 2},         // the maximum and the sum: rows g and g+8, lanes ^1 and ^2
				} {
					if got := len(regexp.MustCompile(x.re).FindAllString(loop, -1)); got != x.want {
						t.Errorf("%d × %s in the loop, want %d", got, x.re, x.want)
					}
				}
			}
			for _, arch := range []int{80, 90} {
				rng := tiletest.RNG("flash " + c.name)
				in := func(size int) []float32 {
					x := make([]float32, size)
					for i := range x {
						x[i] = float32(rng.Float64()*2 - 1)
					}
					return x
				}
				q, kk, v := in(n*d), in(n*d), in(n*d)
				want, got := make([]float32, n*d), make([]float32, n*d)
				for i := range got {
					got[i] = float32(math.NaN())
				}
				grid := tile.Grid{tile.CDiv(n, bm)}
				if err := interp.Interpret(k, grid, q, kk, v, want); err != nil {
					t.Fatal(err)
				}
				sim := &ptxsim.Launcher{Arch: arch, Racecheck: true, Initcheck: true}
				if err := sim.Launch(k, grid, q, kk, v, got); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					g, w := float64(got[i]), float64(want[i])
					if !(math.Abs(g-w) <= c.tol.Abs+c.tol.Rel*math.Abs(w)) {
						t.Fatalf("sm_%d: o[%d] = %v in the simulator, %v in the interpreter (tolerance %+v)", arch, i, g, w, c.tol)
					}
				}
			}
		})
	}
}
