package graphpass

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// The wave model: on a GPU whose shared memory holds the swapped wgmma
// form's 4 stages of 256×128 (the H200), a TF32 or bf16 product at least
// 128 on every side chooses its tensor-core tiling (and, for a bare
// product of one batch, SPLIT_K) by the least estimated time:
//
//	time = ceil(CTAs / SMs) · (steps + 3) · step(form, BM·BN) + reduction
//	step = c(form) · (BM·BN + a(form)) · BLOCK_K      (×0.75 for bf16)
//	reduction = (SPLIT_K + 1) · 4·M·N bytes / 2 TB/s  (SPLIT_K > 1 only;
//	            3 µs + the bytes at 7 TB/s where the L2 holds the output)
//
// CTAs = batch · ⌈M/BM⌉ · ⌈N/BN⌉ · SPLIT_K; steps = ⌈⌈K/BK⌉/SPLIT_K⌉ (the
// longest part); 3 steps a tile for the pipeline's fill and the epilogue.
// The model weighs the tilings that were measured (below) and applies to
// products with a wave of 128×128 tiles, bare ones with K ≥ 2048 (which
// a split may fill) and ones of at least a quarter wave (at TF32 an
// eighth: fewTiles);
// smaller ones keep tuneMatMul's older rules.
// An SM runs ceil(CTAs/SMs) tiles whatever its residency (the block
// scheduler refills a slot as a CTA ends; co-resident CTAs share the SM's
// tensor cores), so the wave count is that ceiling. A step's cost grows
// with the tile's area plus a per-step overhead a (the fragment loads,
// barriers and issue a tile pays whatever its size): the constants were
// fitted to the H200's measurements of 2026-12-01 (tf32; c of the two
// wgmma forms refitted on 2026-12-03, below): swapped wgmma
// 256×128 at 4096³ 234.8 TFLOP/s, 128×128 183.1, 64×128 144 (4096×3072×768);
// the transposing wgmma 128×256 210.9; mma.sync 128×128 150 and 64×128 at
// 288 tiles 0.186 ms (768×3072×4096); split K on 4096×3072×768 at 256×128,
// 2, 3 and 4 parts: 109, 90, 78 against 194 (the reduction's 2 TB/s and
// its +1: the output zeroed). A split must beat the best unsplit tiling by
// a tenth (its cost is the least certain term).
//
// Forms: the swapped wgmma (wgmma = 2; BN = 16·num_warps: 128 at 8 warps,
// and 64 at 4 for TF32 products of fewTiles; BM 64, 128, 192 or 256), the transposing wgmma (wgmma = 1, tf32, 128×256 at 8
// warps) and mma.sync (128×128 at 8 warps, 64×128 at 4). A form whose operand copies
// would be 4 bytes wide is not a choice: A stored transposed (Aᵀ·B, the
// weight gradients) in either wgmma form (wgmma reads it K-major from
// shared memory, a tf32 operand only K-major), B stored transposed in the
// transposing form and in bf16's swapped form; those run on mma.sync, or
// for Aᵀ on the swapped form with Aᵀ staged (wg_stage = 1: 16-byte copies
// transposed by their threads; formStaged, weighed at TF32 since measured
// on the H200, a candidate only at bf16: stagedCandidates). An epilogue
// that reads a value of the output's shape through many elementwise ops
// or a transcendental (heavyEpi) keeps the swapped form to 64 rows.
// BLOCK_M = 192 (a block dimension three times a power of two) fills the
// H200's 132 SMs with 4096×768 (22×6 tiles); BLOCK_N = 192 would take 12
// warps in the swapped form, which codegen does not (num_warps is a power
// of two).

// tcForm is a tensor-core form of the K loop: its meta-parameter wgmma
// and its cost constants (seconds per element of tile area and k, the
// per-step overhead in elements of area).
type tcForm struct {
	wgmma int
	stage bool // wg_stage = 1: Aᵀ staged and transposed by its copying threads
	c     float64
	a     int
}

var (
	// c refitted on 2026-12-03 (seventeenth session) to the loops of
	// that day: the swapped form's to matmul 4096³ TF32 in 0.450 ms at
	// 256×128 (4 waves of 131 steps; it was 8.52e-13, fitted to 234.8
	// TFLOP/s on 2026-12-01), the transposing form's in the ratio of its
	// time to the swapped form's in one call (`tilefuse peer -precision
	// tf32 -run 'matmul 4096³' -tune …`, r17g: swapped 256×128 0.461 ms,
	// 128×128 0.577, 64×128 0.754 — c within 5% of each other; the
	// transposing form 128×256 0.608; it was 9.49e-13). The model then
	// estimates the BERT layer's products within 10–15% of their times
	// (4096×3072×768 69.5 µs against 74, 4096×768×3072 68.0 against
	// 75–77) and takes the copied weight gradients (A·B 768×3072×4096 and
	// 3072×768×4096) unsplit: 80 and 84 µs against 89 and 91 in 4 parts
	// (r17g), where the old c chose the split. mma.sync keeps its fit:
	// it runs the products with A stored transposed, where it was measured
	// (the same call's A·B at 4096³, 128×128 0.857 ms and 64×128 at 4
	// warps 0.895, would give 1.43e-12, and then the model took mma.sync
	// for Aᵀ·B 768×3072×4096 over the staged form that ran it faster);
	// nor does the staged form's (below)
	formSwapped = tcForm{wgmma: 2, c: 6.55e-13, a: 8192}
	formWGMMA   = tcForm{wgmma: 1, c: 8.64e-13, a: 8192}
	formMMASync = tcForm{wgmma: 0, c: 1.616e-12, a: 1024}
	// the swapped form with Aᵀ staged (wg_stage = 1), fitted to the H200's
	// TF32 Aᵀ·B 768×768×4096 at 192, 128 and 64 rows unsplit (0.180,
	// 0.121, 0.078 ms: one wave each, 131 steps); it also gives 768×3072
	// ×4096's 192×128 (0.177) and, with the reduction below, its split in
	// 4 (0.148) within 5% (tilefuse tune, 2026-12-01, fourth session).
	// The model weighs it at TF32; at bf16 it is a candidate only
	// (stagedCandidates)
	formStaged   = tcForm{wgmma: 2, stage: true, c: 1.486e-12, a: 4384}
	splitBytesPS = 2e12 // the split's reduction, bytes a second
	// an output the L2 holds with its parts (at most splitL2Bytes) is
	// reduced at splitL2BytesPS after splitL2Fixed seconds (the zeroing,
	// the last parts): the H200's TF32 Aᵀ·B 768×3072×4096 split in 4 took
	// 10 µs beyond its waves (47 MB of atomic traffic), 768×768 in 3 parts
	// 4.6 µs (9.4 MB); 4096×3072 outputs (50 MB) kept 2 TB/s
	splitL2Bytes   = 16 << 20
	splitL2BytesPS = 7e12
	splitL2Fixed   = 3e-6
	// heavyEpiOps: see heavyEpilogue
	heavyEpiOps = 8
)

// tcTiling is a choice of the wave model: a form, the tile, warps, stages
// and K's parts.
type tcTiling struct {
	form                 tcForm
	bm, bn, warps, split int
	stages               int
	est                  float64 // seconds
}

func (c tcTiling) meta() tile.Meta {
	m := tile.Meta{"BLOCK_M": c.bm, "BLOCK_N": c.bn, "BLOCK_K": 32, "num_warps": c.warps, "num_stages": c.stages}
	if c.form.wgmma != 0 {
		m["wgmma"] = c.form.wgmma
	}
	if c.form.stage {
		m["wg_stage"] = 1
	}
	if c.split > 1 {
		m["SPLIT_K"] = c.split
	}
	return m
}

func (c tcTiling) String() string {
	return fmt.Sprintf("%v (%.1f µs)", c.meta(), c.est*1e6)
}

// busyEpilogue is the wave model's choice m for product s at prec with
// the epilogue through shared memory (epi_smem = 1) on the swapped form
// where it writes more than one output or reads a value of the output's
// shape through a transcendental that is not heavy at prec (the H200,
// 2026-12-04, the tuner at the BERT layer, TF32, r28j: the forward's
// gelu(x·W1 + b1) writing x·W1 + b1 too 0.0878 → 0.0812 ms, dO·W2ᵀ ⊙
// gelu'(z) 0.097 → 0.087; the products whose epilogue adds the residual
// kept theirs).
func busyEpilogue(m tile.Meta, prec tile.Precision, s waveShape) tile.Meta {
	if m["wgmma"] == 2 && (s.outputs > 1 || s.heavyEpi && !s.heavy(prec)) {
		m["epi_smem"] = 1
	}
	return m
}

// partialColumns is the wave model's choice m for product s at prec with
// the epilogue through shared memory (epi_smem = 1) where the swapped
// form's output is not whole tiles of columns (its epilogue from the
// accumulator masks each column), and, at TF32 where B is stored [k][n]
// with rows not 16-byte aligned, B's copies realigned (realign_b = 1). On
// the H200 (2026-12-04, r24d, `tilefuse peer -precision tf32 -run vocab
// -tune …`, 256×128, 4 stages, TFLOP/s; cuBLAS TF32 in the same call 124
// and 122): BERT's vocabulary projection 4096×30522×768 206.3 → 234.2
// with epi_smem → 237.9 with both, GPT-2's 4096×50257×768 191.1 → 216.8 →
// 226.6 (realigned alone: 202.9, 190.2).
func partialColumns(m tile.Meta, prec tile.Precision, s waveShape) tile.Meta {
	if m["wgmma"] != 2 || s.n%m["BLOCK_N"] == 0 {
		return m
	}
	m["epi_smem"] = 1
	if prec == tile.PrecTF32 && !s.transB && s.n%4 != 0 && !s.bPadded {
		m["realign_b"] = 1
	}
	return m
}

// waveShape is what the model reads of a product.
type waveShape struct {
	batch, m, n, k int
	transA, transB bool
	bare           bool // nothing but the product in its group, one batch: SPLIT_K writable
	bPadded        bool // B read from a copy in aligned rows (padOperands)
	outputs        int  // the values the group writes (its root and extra outputs)
	// heavyEpi: the epilogue reads a value of the output's shape through
	// a transcendental (an input gradient through an activation's
	// derivative, dO·Wᵀ ⊙ gelu'(z)): on the swapped form only 64 rows,
	// and not the transposing form (not measured with such an epilogue),
	// which the model's cost does not see (the H200, TF32, the BERT layer's
	// 4096×3072×768: 256 rows 0.269 ms, 192 0.238, 128 0.189, 64 0.168;
	// its forward gelu(x·W+b), no such read, 0.177 at 256 and 64; late
	// loads and epi_smem did not close it: DESIGN.md)
	heavyEpi bool
	// geluTanh: heavyEpi's only transcendentals are tanhs read as 1 + t or
	// t·t (GELU and its derivative), which a TF32 or bf16 product's
	// epilogue computes by ex2 and rsqrt (emit.go: tanhPlusOne, tanhSums);
	// then the epilogue is not heavy at those precisions (heavy)
	geluTanh bool
}

// heavy is heavyEpi at precision prec: not where the epilogue's tanhs are
// GELU's and the products TF32 or bf16. The H200 (r28k, 2026-12-04): the
// BERT layer's dO·W2ᵀ ⊙ gelu'(z) at TF32 with its tanh so computed ran
// 0.115 ms at 64 rows and 0.097 at the model's 256×128 (0.087 with
// epi_smem), the layer's forward and backward 168.4, 168.9 → 171.2,
// 170.9 TFLOP/s.
func (s waveShape) heavy(prec tile.Precision) bool {
	return s.heavyEpi && !(s.geluTanh && (prec == tile.PrecTF32 || prec == tile.PrecBF16))
}

// splitCost is the seconds of a split in parts of an m×n f32 output:
// zeroing it and adding the parts into it, in the L2 where it fits.
func splitCost(parts, m, n int) float64 {
	bytes := float64((parts + 1) * 4 * m * n)
	if 4*m*n*(parts+1) <= splitL2Bytes*(parts+1) && 4*m*n <= splitL2Bytes {
		return splitL2Fixed + bytes/splitL2BytesPS
	}
	return bytes / splitBytesPS
}

// waveModelApplies reports whether the wave model chooses grp's tiling on
// t at prec (else tuneMatMul's older rules do).
func waveModelApplies(t Target, prec tile.Precision, s waveShape) bool {
	if !t.GPU() || (prec != tile.PrecTF32 && prec != tile.PrecBF16) || t.SharedMemory < 4*4*32*(256+128)+2*2*256*32 ||
		s.m < 128 || s.n < 128 || s.k < 128 {
		return false
	}
	return s.batch*tile.CDiv(s.m, 128)*tile.CDiv(s.n, 128) >= t.SMs || s.bare && s.k >= 2048 || s.fewTiles(t, prec)
}

// fewTiles reports whether s is a product of fewer 128×128 tiles than t
// has SMs, at least a quarter of them, which the wave model did not weigh
// before (neither a wave of 128×128 tiles nor bare over K ≥ 2048): such a
// product took tuneMatMul's older rule, mma.sync at 64×64. The model now
// chooses its tiling too, with the swapped form at 64 columns a CTA (one
// warpgroup, 4 warps) among its TF32 choices where A is stored as read
// (NN, NT). NT and TN 1024³ on an H100 (r54c, TFLOP/s, the older rule
// against the tilings the model weighs): NT TF32 116.4 against 172.8 at
// 128×64 (4 warps), 156.7 at 64×128, 128.9 at 128×128, bf16 124.0 against
// 112.6, 133.4, 105.8; TN (A stored transposed: the staged swapped form at
// TF32 69.2–102.5, bf16 77.0–110.9) mma.sync 64×128 at 4 warps 116.7
// against 106.7, bf16 129.4 against 117.6. NN, an H100 (2026-12-07, r54a,
// `tilefuse peer -tune`, TFLOP/s, the older rule's mma.sync 64×64 against
// the swapped form): TF32 1024³ 114.6 against 168.0 at 128×64 (4 warps),
// 155.2 at 64×128, 126.2 at 128×128; 1000³ 98.9 against 131.2, 121.9,
// 108.1; gelu(x·W + b) 1024³ 111.5 against 159.6, 150.1, 118.0; 1025³
// (operands copied) 56.4 against 75.6, 68.1, 76.1; 2048×1024×1024 127.0
// against 174.8, 188.6, 229.5; bf16 1024³ 120.9 against 110.5, 130.4,
// 103.6 (bf16 at 4 warps converts A by half the threads: not a choice),
// 1000³ 101.6 against 94.9, 110.2, 84.6, 1025³ 59.8 against 46.5, 61.9,
// 69.2, 2048×1024×1024 135.2 against 117.4, 166.7, 197.1. SPLIT_K = 2 was
// slower at every one of them. At 512³ (16 tiles) bf16 keeps the older
// rule's 32×32 tiles (38.3 against 26.6–30.6 on the swapped form; the
// model's estimates leave out the launch's few µs).
//
// At TF32 with A stored as read, from an eighth of a wave (16 tiles on 132
// SMs) too, where the model takes 64×64 at 4 warps (r54c, an H100, the
// older rule's 32×32 against 64×64, TFLOP/s): 512×1024×784 (the MLP
// step's first layer, 32 tiles) 53.8 against 95.9, 512³ 37.3 against
// 41.2, 1024×256×1024 50.2 against 55.8, 1024×256×256 25.0 against 25.4;
// not at bf16 (55.8 against 67.6 there, but 52.0 against 37.8, 38.6
// against 29.8, 26.1 against 22.6). A·Bᵀ likewise (r55a, an H100, two
// turns, the older rule against the model's choice): NT 512×1024×784
// 51.7, 50.4 against 89.0, 91.8 (64×64), NT 1024×256×1024 (K in 4
// parts) 37.6, 37.7 against 63.9, 64.5 (128×64), NT 512³ 39.4, 39.5
// against 42.6, 41.8 (64×64).
func (s waveShape) fewTiles(t Target, prec tile.Precision) bool {
	tiles := s.batch * tile.CDiv(s.m, 128) * tile.CDiv(s.n, 128)
	if tiles >= t.SMs || s.bare && s.k >= 2048 {
		return false
	}
	return 4*tiles >= t.SMs || prec == tile.PrecTF32 && !s.transA && tiles >= t.SMs/8
}

// waveTilings lists every tiling the model weighs for s on t at prec,
// with its estimate, in the model's order of preference on a tie.
func waveTilings(t Target, prec tile.Precision, s waveShape) []tcTiling {
	return tilings(t, prec, s, false)
}

// tilings lists the model's tilings for s (staged false), or only those of
// the staged swapped form for Aᵀ (staged true: the candidates that are
// not the model's choices until measured).
func tilings(t Target, prec tile.Precision, s waveShape, staged bool) []tcTiling {
	const bk = 32
	bf16 := prec == tile.PrecBF16
	var out []tcTiling
	add := func(f tcForm, bm, bn, warps, stages int) {
		if stages < 2 || 32*warps > t.MaxThreads {
			return
		}
		steps := tile.CDiv(s.k, bk)
		for split := 1; split <= 4; split++ {
			if split > 1 && (!s.bare || steps < 4*split) {
				break
			}
			ctas := s.batch * tile.CDiv(s.m, bm) * tile.CDiv(s.n, bn) * split
			step := f.c * float64(bm*bn+f.a) * bk
			if bf16 {
				step *= 0.75
			}
			est := float64(tile.CDiv(ctas, t.SMs)) * float64(tile.CDiv(steps, split)+3) * step
			if split > 1 {
				est += splitCost(split, s.m, s.n)
			}
			out = append(out, tcTiling{form: f, bm: bm, bn: bn, warps: warps, split: split, stages: stages, est: est})
		}
	}
	if staged || prec == tile.PrecTF32 {
		// Aᵀ copied 16 bytes wide into a [k][m] staging tile, transposed
		// into the K-major tile by its threads, both in each stage (bf16:
		// the K-major tile in bf16); at least 3 stages: 256×128 fits only
		// at bf16
		if s.transA && !(bf16 && s.transB) {
			for _, bm := range []int{256, 192, 128, 64} {
				kt := 4 * bm * bk
				if bf16 {
					kt /= 2
				}
				stage := (kt + 4*bk*(bm+128) + 1023) / 1024 * 1024
				if st := min(4, t.SharedMemory/stage); st >= 3 {
					add(formStaged, bm, 128, 8, st)
				}
			}
		}
		if staged {
			return out
		}
	}
	// the swapped wgmma: 4 stages where they fit (bf16's tile of A in
	// bf16 in each stage beside its f32 tiles: 3 at 256×128), at least 3;
	// at bf16 with B stored [n][k] too, its fragments read in pairs of k
	// (codegen, bf16PairFrags)
	if !s.transA {
		if s.fewTiles(t, prec) && prec == tile.PrecTF32 {
			// 64 columns a CTA at 4 warps: weighed first, so that it
			// takes a tie with 64×128 (one m64n128 wgmma a k step
			// where 64×128 has two warpgroups of m64n64: fewTiles)
			for _, bm := range []int{128, 64} {
				if !s.heavy(prec) || bm <= 64 {
					if st := min(4, t.SharedMemory/((4*bk*(bm+64)+1023)/1024*1024)); st >= 3 {
						add(formSwapped, bm, 64, 4, st)
					}
				}
			}
		}
		for _, bm := range []int{256, 192, 128, 64} {
			if s.heavy(prec) && bm > 64 {
				continue
			}
			for _, bn := range []int{128} {
				bytes := 4 * bk * (bm + bn)
				if bf16 {
					bytes += 2 * bm * bk
				}
				stage := (bytes + 1023) / 1024 * 1024
				if st := min(4, t.SharedMemory/stage); st >= 3 {
					add(formSwapped, bm, bn, bn/16, st)
				}
			}
		}
	}
	// the transposing wgmma: 128×256, two K-major B tiles beside the stages
	if prec == tile.PrecTF32 && !s.transA && !s.transB && !s.heavy(prec) {
		extra := 2 * 256 * 128
		add(formWGMMA, 128, 256, 8, max(2, min(3, (t.SharedMemory-extra)/(4*bk*(128+256)))))
	}
	for _, sh := range [][2]int{{128, 128}, {64, 128}} {
		warps := 4
		if sh[0]*sh[1] >= 128*128 {
			warps = 8
		}
		add(formMMASync, sh[0], sh[1], warps, max(2, min(3, t.SharedMemory/(4*bk*(sh[0]+sh[1])))))
	}
	return out
}

// chooseWaves is the model's choice for s: the least estimate, a split
// only where it beats every unsplit tiling by a tenth.
func chooseWaves(t Target, prec tile.Precision, s waveShape) tcTiling {
	var best, bestSplit tcTiling
	for _, c := range waveTilings(t, prec, s) {
		b := &best
		if c.split > 1 {
			b = &bestSplit
		}
		if b.est == 0 || c.est < b.est {
			*b = c
		}
	}
	if bestSplit.est > 0 && bestSplit.est < 0.9*best.est {
		return bestSplit
	}
	return best
}

// productWaveShape reads grp's product for the model: a matmul group's
// 2-D product, or batched over 3-D operands (ok false for other kinds,
// such as the heads' kernels, which tune their products with
// tuneMatMul's rules).
func productWaveShape(grp *Group) (waveShape, bool) {
	mm := grp.MatMul
	if grp.Kind != MatMulGroup || mm == nil || len(mm.Inputs) != 2 {
		return waveShape{}, false
	}
	s, a := mm.Info.Shape, mm.Inputs[0].Info.Shape
	if len(s) < 2 || len(s) > 3 || len(a) != len(s) {
		return waveShape{}, false
	}
	batch := 1
	if len(s) == 3 {
		batch = s[0]
	}
	m, n, k := s[len(s)-2], s[len(s)-1], productK(mm)
	heavy, gelu := heavyEpilogue(grp)
	return waveShape{batch: batch, m: m, n: n, k: k, transA: grp.transA(), transB: mm.Info.TransB,
		bare: batch == 1 && grp.Root == mm && len(grp.Extra) == 0, outputs: 1 + len(grp.Extra), heavyEpi: heavy, geluTanh: gelu,
		bPadded: grp.bPad != nil}, true
}

// heavyEpilogue reports whether product group grp reads, beside its
// product's operands, an input of its output's shape, and computes a
// transcendental (tanh, exp, log, erf, sigmoid) or at least heavyEpiOps
// elementwise ops in its epilogue (the BERT layer's dO·W2ᵀ ⊙ gelu'(z)
// reads the forward's kept values and computes the derivative in 13
// products and sums; a residual's sum is one); and geluTanh, whether its
// only transcendentals, its own and those it recomputes, are tanhs read
// as 1 + t or t·t (waveShape.heavy).
func heavyEpilogue(grp *Group) (heavy, geluTanh bool) {
	mm := grp.MatMul
	reads := false
	for _, in := range grp.Inputs {
		if in != mm.Inputs[0] && in != mm.Inputs[1] && sameShape(in.Info.Shape, mm.Info.Shape) {
			reads = true
		}
	}
	if !reads {
		return false, false
	}
	ew := 0 // the epilogue's elementwise ops
	for _, n := range grp.Members {
		switch n.Info.Kind {
		case ops.Unary:
			if transcendental[n.Info.Name] {
				heavy = true
			}
			ew++
		case ops.Binary:
			ew++
		}
	}
	heavy = heavy || ew >= heavyEpiOps
	// GELU's tanhs, the group's own or recomputed, and no other
	// transcendental
	in := map[*Node]bool{}
	all := append(slices.Clone(grp.Members), grp.Recompute...)
	for _, n := range all {
		in[n] = true
	}
	tanhs := 0
	for _, n := range all {
		if n.Info.Kind != ops.Unary || !transcendental[n.Info.Name] {
			continue
		}
		if n.Info.Name != "tanh" || !geluTanhUses(n, func(u *Node) bool { return in[u] }, nil) {
			return heavy, false
		}
		tanhs++
	}
	return heavy, tanhs > 0
}

// transcendental are the unary ops heavyEpilogue counts as heavy.
var transcendental = map[string]bool{"tanh": true, "exp": true, "ln": true, "log2": true, "log1p": true, "expm1": true, "sigmoid": true, "softplus": true, "erf": true}

// maxWaveSplits is how many of the model's split tilings an autotuner
// tries beside every unsplit one.
const maxWaveSplits = 3

// waveCandidates are the model's tilings for s: every unsplit one, then
// the maxWaveSplits cheapest splits, each group cheapest first; then the
// staged form's (stagedCandidates; Candidates drops the ones listed twice).
func waveCandidates(t Target, prec tile.Precision, s waveShape) []tile.Meta {
	return append(unsplitThenSplits(waveTilings(t, prec, s)), stagedCandidates(t, prec, s)...)
}

// unsplitThenSplits are the metas of tilings: every unsplit one, then the
// maxWaveSplits cheapest splits, each group cheapest first.
func unsplitThenSplits(all []tcTiling) []tile.Meta {
	slices.SortStableFunc(all, func(a, b tcTiling) int {
		if a.split > 1 != (b.split > 1) {
			if a.split > 1 {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.est, b.est)
	})
	var out []tile.Meta
	splits := 0
	for _, c := range all {
		if c.split > 1 {
			if splits == maxWaveSplits {
				break
			}
			splits++
		}
		out = append(out, c.meta())
	}
	return out
}

// stagedCandidates are the staged swapped form's tilings for Aᵀ (every
// unsplit one, then the maxWaveSplits cheapest splits), candidates for the
// autotuner (the model weighs them itself at TF32 only: waveTilings).
func stagedCandidates(t Target, prec tile.Precision, s waveShape) []tile.Meta {
	return unsplitThenSplits(tilings(t, prec, s, true))
}

// storeBoundK is the longest K of a product that storeBound takes: two
// steps of BLOCK_K = 32.
const storeBoundK = 64

// storeBoundMeta is the tiling of a store-bound product: the swapped wgmma
// form at 128×128 (64 accumulators a thread: two CTAs an SM, so that one's
// epilogue stores while the other's loop runs; at 256×128 the heuristic's
// kernel took 254 registers, one CTA an SM, its phases in turn), 3 stages
// (at most 2 iterations: a fourth would hold nothing), the epilogue through
// shared memory (epi_smem = 1, codegen's epilogueThroughSmem: the
// accumulator of Cᵀ read back row-major, 16-byte stores where the rows
// are 16-byte aligned, else lanes along consecutive columns), whatever
// the operands' row lengths: where one's rows are not 8-byte aligned (K
// odd for A, N odd for B) its copies are 4 bytes wide, 16 a thread and
// operand at 128×128, each address held across the loop (ptxas 11.8 on an
// sm_90 stand-in: 251 registers at 4095×4097×33, one CTA an SM, against
// 128 at 64×128), yet 128 rows still store faster: on the H200
// (2026-12-02, `tilefuse peer -run 'matmul 4095'`) 4095×4097×33 ran
// 21.1–21.6 TFLOP/s at 128×128 (227 registers) against 16.4 at 64×128 and
// 10.0 at the 256×128 form before. Since the copies address from base
// registers (codegen's copyBases) the stand-in takes 128 at 128×128; the
// H200's ptxas 156, and 20.6 TFLOP/s against 20.9 with the old addresses
// (2026-12-02, one call), where 256×128 at 4 stages ran 23.2 (254
// registers): a candidate for this rule once measured again. It was
// (storeBoundOddRows); where the output is whole tiles, the epilogue goes
// from the registers (storeBoundDirect).
//
// max_registers = 128 keeps the two CTAs an SM the tiling is for: the
// H200's ptxas gave the kernel 140 registers, one CTA an SM; capped, 128
// and no spills, 4096×4096×32 ran 34.1 → 42.7 TFLOP/s and ×64 57.3 →
// 71.9 (2026-12-04, r21b, `tilefuse peer -precision tf32 -tune
// max_registers=128`).
//
// k_tail = 1: where K is no multiple of 32 the last iteration runs only
// its k steps of 8 that start before K, and since 2026-12-04 its copies
// past them are not issued (codegen's tailCopyLimit): at K = 33 one k step
// of four and 8 of 32 rows of k copied. On the H200 (2026-12-04, r23b,
// `tilefuse peer -precision tf32 -tune k_tail=1`, one process, TFLOP/s)
// 4096×4096×33 33.3 → 36.2, ×50 51.8 → 54.7, 4095×4097×33 25.4 → 27.3;
// ×32 (no tail) 41.4 and 41.9. Where K is a multiple of 32 it changes
// nothing.
var storeBoundMeta = tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 3,
	"wgmma": 2, "epi_smem": 1, "max_registers": 128, "k_tail": 1}

// storeBoundDirect is storeBoundMeta with the epilogue stored from the
// accumulator's registers (epi_smem = 0), the choice where the output is
// whole tiles of 128×128 (its rows 16-byte aligned): on the H200 (2026-12-04, r21b, `tilefuse peer
// -precision tf32 -tune …`) at 128×128, 128 registers, 4096×4096×32 ran
// 42.2–42.8 TFLOP/s against 42.7 through shared memory, ×64 74.5 against
// 71.9, ×50 53.0 against 52.0; r22a: ×32 43.1 against 43.3, ×33 33.9
// against 32.5, ×48 55.2 against 54.5, ×50 53.5 against 52.3, ×64 74.0
// against 72.2. Not where the output's rows are not whole tiles: the
// rows' masks spilled (4095×4096×32, 128 bytes: 32.8 TFLOP/s against 42.4
// through shared memory, r22a); nor its columns (4096×4100×32, rows 16-byte
// aligned, a last column of tiles 4 wide: 22.0 against 41.7 through shared
// memory, r24c, 2026-12-04; stalled on the stores' queue, lg_throttle
// 20.6 stalls an issue against 5.8, and 4.9 M sectors written to L2 against 3.4 M
// for its 64 MB).
var storeBoundDirect = with(storeBoundMeta, "epi_smem", 0)

// storeBoundTall is storeBoundMeta at 256 rows and 2 stages, one CTA an SM
// by design (254 registers: no cap): the odd-rows choice
// (storeBoundOddRows) and a candidate of the others. Two stages, as K is
// at most two iterations: on the H200 4095×4097×33 ran 25.8 and 26.1
// TFLOP/s at 2 stages against 24.0 and 24.4 at 4 (2026-12-03 r21a,
// 2026-12-04 r22a).
var storeBoundTall = with(storeBoundMeta, "BLOCK_M", 256, "num_stages", 2, "max_registers", 0)

// storeBoundOddRows: where the output's rows are an odd number of words
// (stored a word at a time, lanes along the columns) and A's rows are
// not 16-byte aligned (K not a multiple of 4: A's copies 4 or 8 bytes
// wide, 16 a thread and stage at 128×128), tuneMatMul takes storeBoundTall
// (254 registers, one CTA an SM): on the H200, 2026-12-02, two calls,
// 4095×4097×33 ran 23.0–23.2 TFLOP/s there against 20.6–20.7 at 128×128
// (156 registers), memcheck clean (`tilefuse peer -precision tf32 -run
// 'matmul 4095' -tune 'BLOCK_M=256,num_stages=4'`); since the registers'
// cap, 26.1 against 24.1 at 128×128 (64 bytes spilled; 2026-12-04, r22a).
// Where A's copies are 16 bytes wide, storeBoundMeta: 4096×4097×32 ran
// 33.5 there (128 registers, no spill) against 31.7 at 256×128 (r22a).
//
// storeBoundCandidates are the autotuner's alternatives to the choice def
// (storeBoundMeta, storeBoundDirect or storeBoundTall): the swapped form
// at 256×128 with and without epi_smem, at 64 and 128 rows with it and
// 128 without it, the choice without k_tail (every k step and copy of
// the last iteration run), and where B's rows are not 16-byte aligned (B
// stored [k][n], n no multiple of 4) the choice with B's copies realigned (realign_b = 1:
// on the H200, r24b, 2026-12-04, `tilefuse peer -tune realign_b=0` when it
// was the default: 4096×4097×32 33.8 TFLOP/s against 33.1, 4095×4097×33
// 26.8 against 27.5 at 256×128 and 25.8 against 26.6 at 128×128, so not
// the default).
func storeBoundCandidates(def tile.Meta, s waveShape) []tile.Meta {
	c := []tile.Meta{
		storeBoundTall,
		with(storeBoundTall, "epi_smem", 0),
		with(storeBoundMeta, "BLOCK_M", 64),
		with(storeBoundMeta),
		with(storeBoundMeta, "epi_smem", 0),
		with(def, "k_tail", 0),
	}
	if !s.transB && s.n%4 != 0 && !s.bPadded {
		c = append(c, with(def, "realign_b", 1))
	}
	return c
}

// storeBound reports whether product s on t at prec is bound by its
// output's stores rather than its arithmetic: a TF32 product (A as given,
// K-major, as the swapped form copies it) over K of at most storeBoundK,
// at least 128 on each side of the output, with a wave of 128×128 tiles,
// on a GPU whose shared memory holds the swapped form's 3 stages of
// 128×128 (and the epilogue's 128×132 words in them). The H200,
// 2026-12-02, TF32, heuristic's 256×128 swapped form, 8 warps, 4 stages:
// 4096×4096×32 36.6 TFLOP/s, ×64 65.8, 4095×4097×33 9.7 (19.9 with
// epi_smem), 4096×4096×50 47.4; the 64 MB output at ~4 TB/s is ~16 µs, the
// arithmetic at 300 TFLOP/s 7 µs at K = 64. An epilogue that reads a value
// of the output's shape through many ops (heavyEpi) is left to the other
// rules.
func storeBound(t Target, prec tile.Precision, s waveShape) bool {
	if !t.GPU() || prec != tile.PrecTF32 || s.transA || s.heavy(prec) || s.k > storeBoundK ||
		s.m < 128 || s.n < 128 || t.SharedMemory < 3*4*32*(128+128) {
		return false
	}
	// whatever K's rows (4096×4096×50, A's copies 8 bytes wide under
	// 16-byte aligned output rows: 53.0–53.5 TFLOP/s at 128×128 against
	// 49.8–50.6 at the other rules' 256×128 on the H200, 2026-12-04, r21b
	// and r22b; before the registers' cap, 42.5 against 47.2, so that such
	// products kept the other rules until then)
	return s.batch*tile.CDiv(s.m, 128)*tile.CDiv(s.n, 128) >= t.SMs
}
