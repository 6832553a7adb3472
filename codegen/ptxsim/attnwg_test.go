package ptxsim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestAttentionWgmmaInSimulator: graphpass's attention forward kernel with
// the meta-parameter wgmma = 1 (codegen's MMA loops on Hopper's wgmma:
// mmawg.go) for sm_90a: S = Q·Kᵀ and O += P·V as wgmma.mma_async m64nNk8
// per warpgroup (64 rows at 4 warps, 128 at 8), K by 16-byte copies and V
// transposed by 4-byte copies into K-major swizzled tiles (128-byte rows,
// and 64-byte ones where a tile's k is 16 words), Q's fragments unpermuted,
// P's handed over permuted with V's k permuted to match; bf16 as
// m64nNk16, K and V copied in f32 and converted by the copying thread into
// K-major bf16 tiles (32-, 64- and 128-byte rows); with wg_stage = 1 (TF32)
// V copied 16 bytes wide in f32 and transposed by the copying threads.
// Each case runs in the
// simulator under racecheck, initcheck and the wgmma hazard check and
// agrees with the interpreter running the same kernel (TF32, bf16, 3xTF32; lengths that
// are no multiple of the blocks, causal −∞ and additive input masks, head
// dims padded and masked, a batch of 2). The PTX is checked for its form:
// .version 8.0, .target sm_90a, the wgmmas of each k step, one fence,
// commit and wait a product, the copies' widths, fence.proxy.async and one
// barrier an iteration, and no mma.sync.
func TestAttentionWgmmaInSimulator(t *testing.T) {
	// the simulator and the interpreter round the same operands; they
	// differ in the order of sums and in ex2.approx, which moves P across
	// a rounding boundary now and then (bf16: 8 bits)
	tols := map[tile.Precision]tiletest.Tol{tile.PrecTF32: {Abs: 1e-3, Rel: 1e-2}, tile.PrecBF16: {Abs: 1e-2, Rel: 5e-2}, tile.PrecTF32x3: {Abs: 2e-4, Rel: 1e-4}}
	for _, c := range []struct {
		name                 string
		b, sq, sk, dk, dv    int
		mask                 string
		bm, bn, warps, stage int
		staged               bool // wg_stage = 1
	}{
		{"d64 causal 64×32 4 warps", 1, 70, 70, 64, 64, "causal", 64, 32, 4, 2, false},
		{"d64 causal 64×32 4 warps, V staged", 1, 70, 70, 64, 64, "causal", 64, 32, 4, 2, true},
		{"d64 additive mask batch 2 128×64 8 warps 3 stages", 2, 37, 45, 64, 64, "input", 128, 64, 8, 3, false},
		{"d64 additive mask batch 2 128×64 8 warps 3 stages, V staged", 2, 37, 45, 64, 64, "input", 128, 64, 8, 3, true},
		{"d128 causal 64×32", 1, 40, 40, 128, 128, "causal", 64, 32, 4, 2, false},
		{"d32 odd lengths 64×64", 1, 33, 19, 32, 32, "", 64, 64, 4, 2, false},
		{"d96 padded, additive mask", 1, 21, 30, 96, 96, "input", 64, 32, 4, 2, false},
		{"dk 12 dv 20: 64-byte rows, 16 keys a step", 1, 29, 35, 12, 20, "causal", 64, 16, 4, 3, false},
		{"dk 12 dv 20: 64-byte rows, 16 keys a step, V staged", 1, 29, 35, 12, 20, "causal", 64, 16, 4, 3, true},
	} {
		for _, prec := range []tile.Precision{tile.PrecTF32, tile.PrecBF16, tile.PrecTF32x3} {
			t.Run(c.name+"/"+prec.String(), func(t *testing.T) {
				if testing.Short() && c.dk >= 96 {
					t.Skip("-short: the large head dims")
				}
				tol := tols[prec]
				grp, vals := attentionGroup(t, c.b, c.sq, c.sk, c.dk, c.dv, c.mask)
				meta := tile.Meta{"BLOCK_M": c.bm, "BLOCK_N": c.bn, "num_warps": c.warps, "num_stages": c.stage, "wgmma": 1}
				if c.staged {
					if prec == tile.PrecBF16 {
						t.Skip("wg_stage is TF32's and 3xTF32's: bf16 always converts its copies")
					}
					meta["wg_stage"] = 1
				}
				kern, err := graphpass.Emit(grp, graphpass.TuneTo(graphpass.H200, meta), prec)
				if err != nil {
					t.Fatal(err)
				}
				ck, err := codegen.Compile(kern.Tile, codegen.Options{Arch: 90, NumWarps: c.warps, Spec: []int{16, 16, 16, 16, 16, 16}})
				if err != nil {
					t.Fatal(err)
				}
				checkWgmmaForm(t, ck.PTX, attnDotPrec(prec), c.bn, c.dk, c.dv, c.staged)
				var args []any
				for _, x := range grp.Inputs {
					src, ok := vals[x.G.Name()]
					if !ok {
						t.Fatalf("input %v", x.G)
					}
					args = append(args, append([]float32(nil), src...))
				}
				n := c.b * c.sq * c.dv
				want, got := make([]float32, n), make([]float32, n)
				for i := range got {
					want[i], got[i] = float32(math.NaN()), float32(math.NaN())
				}
				if err := interp.Interpret(kern.Tile, kern.Grid, append(args, want)...); err != nil {
					t.Fatal(err)
				}
				sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: c.warps}
				if err := sim.Launch(kern.Tile, kern.Grid, append(args, got)...); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					g, w := float64(got[i]), float64(want[i])
					if !(math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w)) {
						t.Fatalf("out[%d] = %v in the simulator, %v in the interpreter (tolerance %+v)", i, g, w, tol)
					}
				}
			})
		}
	}
}

// attnDotPrec is the precision of graphpass's attention dots where the
// graph's products have precision p (graphpass's attnDot).
func attnDotPrec(p tile.Precision) tile.Precision {
	if p == tile.PrecTF32 {
		return tile.PrecTF32TB
	}
	return p
}

// checkWgmmaForm checks the form of a wgmma attention forward's PTX (bn
// keys a step, head dims dk and dv padded to powers of two, at least 16).
func checkWgmmaForm(t *testing.T, p string, prec tile.Precision, bn, dk, dv int, staged bool) {
	t.Helper()
	pad := func(d int) int {
		x := 16
		for x < d {
			x *= 2
		}
		return x
	}
	bdk, bdv := pad(dk), pad(dv)
	if !strings.Contains(p, ".version 8.0") || !strings.Contains(p, ".target sm_90a") {
		t.Error("not .version 8.0 / .target sm_90a")
	}
	if strings.Contains(p, "mma.sync") {
		t.Error("mma.sync in a wgmma kernel")
	}
	i, j := strings.Index(p, "$L_mma_loop_"), strings.LastIndex(p, "$L_mma_loop_end_")
	if i < 0 || j < 0 {
		t.Fatalf("no MMA loop:\n%s", p)
	}
	loop := p[i:j]
	// S = Q·Kᵀ: m64n{bn}, a k step of 8 of the head dim each; O += P·V:
	// m64n{bdv}, a k step of 8 keys each; every one of the full form
	ks, form := 8, regexp.MustCompile(`^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k8\.f32\.tf32\.tf32 \{(%f\d+, )+%f\d+\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %p\d+, 1, 1;$`)
	if prec == tile.PrecBF16 {
		ks, form = 16, regexp.MustCompile(`^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.bf16\.bf16 \{(%f\d+, )+%f\d+\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %p\d+, 1, 1, 0;$`)
	}
	per := 1
	if prec == tile.PrecTF32x3 { // three products a k step
		per = 3
	}
	want := map[string]int{fmt.Sprint(bn): per * bdk / ks}
	want[fmt.Sprint(bdv)] += per * bn / ks
	got := map[string]int{}
	all := regexp.MustCompile(`wgmma\.mma_async[^;]*;`).FindAllString(loop, -1)
	for _, x := range all {
		m := form.FindStringSubmatch(x)
		if m == nil {
			t.Errorf("wgmma of another form: %s", x)
			continue
		}
		got[m[1]]++
		if regs := strings.Count(x[:strings.Index(x, "}")], "%f"); fmt.Sprint(2*regs) != m[1] {
			t.Errorf("%d accumulator registers in %s", regs, x)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("wgmmas in the loop by N: %v, want %v", got, want)
	}
	// P·V's wgmmas are left in flight into the next iteration (O's
	// registers are their accumulator): retired after the copies are
	// prepared and before the barrier after which the stage they read is
	// rewritten, and after the loop
	if !regexp.MustCompile(`fence\.proxy\.async\.shared::cta;\s*wgmma\.wait_group\.sync\.aligned 0;\s*bar\.sync 0;`).MatchString(loop) {
		t.Error("no wgmma.wait_group 0 between the copies' fence and the barrier")
	}
	if !regexp.MustCompile(`\$L_mma_loop_end_\d+:\s*wgmma\.wait_group\.sync\.aligned 0;`).MatchString(p[j:]) {
		t.Error("no wgmma.wait_group 0 after the loop")
	}
	type count struct {
		re   string
		want int // -1: at least one
	}
	counts := []count{
		{`wgmma\.fence\.sync\.aligned`, 2},
		{`wgmma\.commit_group\.sync\.aligned`, 2},
		{`wgmma\.wait_group\.sync\.aligned 0`, 2},
		{`fence\.proxy\.async\.shared::cta`, 1},
		{`bar\.sync`, 1},
		{`cp\.async\.wait_group`, 1},
		{`cp\.async\.cg\.shared\.global \[%r\d+(\+-?\d+)?\], \[%rd\d+(\+-?\d+)?\], 16`, -1}, // K (and bf16's V): 16 bytes
	}
	if prec == tile.PrecBF16 { // converted by the copying thread: K packed, V a half a row
		counts = append(counts, count{`cp\.async\.ca`, 0}, count{`cvt\.rn\.bf16x2\.f32`, -1}, count{`st\.shared\.b16`, -1}, count{`cvt\.rna?\.tf32`, 0})
	} else if staged { // wg_stage: V copied 16 bytes wide, transposed by the copying threads
		counts = append(counts, count{`cp\.async\.ca`, 0}, count{`cvt\.rn\.bf16x2`, 0})
	} else { // V: 4 bytes, transposing
		counts = append(counts, count{`cp\.async\.ca\.shared\.global \[%r\d+(\+-?\d+)?\], \[%rd\d+(\+-?\d+)?\], 4`, -1}, count{`cvt\.rn\.bf16x2`, 0})
	}
	if prec == tile.PrecTF32TB {
		// (graphpass writes TF32 attention so) P (A) is rounded in
		// registers, K and V (B) are read by the tensor cores as they
		// landed (truncated), so nothing is converted in shared memory:
		// without wg_stage no store between the copies' wait and the fence
		counts = append(counts, count{`cvt\.rna?\.tf32\.f32`, -1}, count{`and\.b32 %r\d+, %r\d+, 0xffffe000`, 0})
		if !staged {
			w, f := strings.Index(loop, "cp.async.wait_group"), strings.Index(loop, "fence.proxy.async")
			if w < 0 || f < w || strings.Contains(loop[w:f], "st.shared") {
				t.Errorf("the stage's copies are converted between the wait and the fence:\n%s", loop[max(w, 0):max(f, 0)])
			}
		}
	}
	for _, x := range counts {
		got := len(regexp.MustCompile(x.re).FindAllString(loop, -1))
		if x.want < 0 {
			if got == 0 {
				t.Errorf("no %s in the loop", x.re)
			}
			continue
		}
		if got != x.want {
			t.Errorf("%d × %s in the loop, want %d", got, x.re, x.want)
		}
	}
}

// attentionGroup is softmax(q·kᵀ·scale + mask)·v at batch b (causal: a
// constant lower-triangular −∞ mask; input: an additive mask input of
// [b, sq, sk]; "": none) as graphpass's one attention group, with its
// inputs' values by name (seeded).
func attentionGroup(t *testing.T, b, sq, sk, dk, dv int, mask string) (*graphpass.Group, map[string][]float32) {
	t.Helper()
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(uint64(sq), uint64(dk)))
	vals := map[string][]float32{}
	in := func(name string, shape ...int) *G.Node {
		n := 1
		for _, s := range shape {
			n *= s
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.Float64()*2 - 1)
		}
		vals[name] = x
		return G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name))
	}
	q, k, v := in("q", b, sq, dk), in("k", b, sk, dk), in("v", b, sk, dv)
	sc := G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(float32(1/math.Sqrt(float64(dk))))))
	switch mask {
	case "causal":
		m := make([]float32, sq*sk)
		for i := range sq {
			for j := i + 1; j < sk; j++ {
				m[i*sk+j] = float32(math.Inf(-1))
			}
		}
		c := G.NewConstant(tensor.New(tensor.WithShape(sq, sk), tensor.WithBacking(m)), G.In(g))
		sc = G.Must(G.BroadcastAdd(sc, c, nil, []byte{0}))
	case "input":
		sc = G.Must(G.Add(sc, in("mask", b, sq, sk)))
	}
	G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
	gr, err := graphpass.Import(g)
	if err != nil {
		t.Fatal(err)
	}
	groups := graphpass.Partition(gr, graphpass.Options{Target: graphpass.H200, MatMul: true})
	if len(groups) != 1 || groups[0].Kind != graphpass.AttentionGroup {
		t.Fatalf("groups %v, want one attention group", groups)
	}
	return groups[0], vals
}

// TestAttentionWgmmaTraining: a training graph's attention kernels (the
// forward, which writes the log-sum-exp, dQ and dK/dV) with wgmma = 1 at
// 16 rows a warp (64 resident rows at 4 warps, 128 at 8) for sm_90a, in
// the simulator
// under racecheck, initcheck and the wgmma hazard check, from the inputs
// of a fused CPU run against its outputs (TestAttentionKernels's
// tolerances), TF32, bf16 and 3xTF32, lengths that are no multiple of the blocks,
// causal and additive masks, head dims 5–128 (16-, 8- and 4-byte copies),
// heads by projections and a concat (the heads a grid dimension).
// Every attention kernel runs its loop on wgmma (but 3xTF32's dK/dV at
// head dim 128, whose views do not fit two stages: mma.sync): the
// backward's tiles read with both k dimensions (K in S = Q·Kᵀ and dQ +=
// dS·K; Q and dO in dK/dV) are copied once and converted into a second
// K-major view by the copying threads.
func TestAttentionWgmmaTraining(t *testing.T) {
	tols := map[tile.Precision]tiletest.Tol{tile.PrecTF32: {Abs: 1e-3, Rel: 1e-2}, tile.PrecBF16: {Abs: 1e-2, Rel: 5e-2}, tile.PrecTF32x3: {Abs: 2e-4, Rel: 1e-4}}
	for _, c := range []struct {
		name              string
		b, sq, sk, dk, dv int
		mask              string
		rows              int // resident rows (queries; keys in dK/dV), 16 a warp
		heads             int // > 0: heads by projections and a concat (headsSpec), causal
		step              int // streamed rows a step (keys; queries in dK/dV); 0: 32
	}{
		{"d64 causal", 1, 70, 70, 64, 64, "causal", 64, 0, 0},
		{"dk 24 dv 40, additive mask, scale by division", 1, 33, 19, 24, 40, "input", 64, 0, 0},
		{"d128", 1, 40, 45, 128, 128, "", 64, 0, 0},
		{"dk 10 dv 6: 8-byte copies", 1, 37, 29, 10, 6, "causal", 64, 0, 0},
		{"dk 5 dv 7: 4-byte copies", 1, 21, 26, 5, 7, "input", 64, 0, 0},
		{"d32 causal, batch 2, 128 rows at 8 warps", 2, 140, 140, 32, 32, "causal", 128, 0, 0},
		{"3 heads of 32 by projections and a concat", 2, 37, 37, 32, 32, "heads", 64, 3, 0},
		{"d64 causal, 128 rows at 8 warps, 64 a step (graphpass's dQ and dK/dV on the H200)", 1, 150, 150, 64, 64, "causal", 128, 0, 64},
		{"dk 24 dv 40, additive mask, 128 rows at 8 warps, 64 a step", 1, 133, 77, 24, 40, "input", 128, 0, 64},
	} {
		for _, prec := range []tile.Precision{tile.PrecTF32, tile.PrecBF16, tile.PrecTF32x3} {
			t.Run(c.name+"/"+prec.String(), func(t *testing.T) {
				if testing.Short() && c.dk >= 128 {
					t.Skip("-short: the large head dim")
				}
				target := graphpass.H200
				target.Tune = func(grp *graphpass.Group, m tile.Meta) {
					step := c.step
					if step == 0 {
						step = 32
					}
					switch grp.Kind {
					case graphpass.AttentionGroup, graphpass.AttentionDQGroup:
						m["BLOCK_M"], m["BLOCK_N"] = c.rows, step
					case graphpass.AttentionDKVGroup:
						m["BLOCK_M"], m["BLOCK_N"] = step, c.rows
					default:
						return
					}
					m["num_warps"], m["wgmma"] = c.rows/16, 1
				}
				wl := bench.Workload{Name: c.name, Build: func(string) (bench.Spec, error) {
					if c.heads > 0 {
						return headsSpec(c.b, c.sq, c.heads, c.dk)
					}
					return attentionSpec(c.b, c.sq, c.sk, c.dk, c.dv, c.mask)
				}}
				onWgmma, onMMASync := 0, 0
				check := func(k *tile.Kernel) {
					if k.Meta["wgmma"] != 1 {
						return
					}
					ck, err := codegen.Compile(k, codegen.Options{Arch: 90, NumWarps: k.Meta["num_warps"]})
					if err != nil {
						t.Fatal(err)
					}
					switch p := ck.PTX; {
					case strings.Contains(p, "wgmma.mma_async") && !strings.Contains(p, "mma.sync") && strings.Contains(p, ".target sm_90a"):
						onWgmma++
					case strings.Contains(p, "mma.sync") && !strings.Contains(p, "wgmma"):
						onMMASync++
					default:
						t.Errorf("%s: neither on wgmma nor on mma.sync", k.Name)
					}
				}
				runGeneratedOn(t, wl, prec, tols[prec], 90, check, fusion.WithTarget(target))
				want := 3
				if prec == tile.PrecTF32x3 && (c.dk == 128 || c.dk == 64 && c.step == 64) {
					// dK/dV's views of Q and dO, high and low parts, at head
					// dim 128 (or 64 queries a step at head dim 64): two
					// stages would take 256 KiB (codegen keeps mma.sync there)
					want = 2
				}
				if onWgmma != want || onMMASync != 3-want {
					t.Fatalf("attention kernels: %d on wgmma, %d on mma.sync; want %d on wgmma, the rest on mma.sync", onWgmma, onMMASync, want)
				}
			})
		}
	}
}
