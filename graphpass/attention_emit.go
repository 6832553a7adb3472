package graphpass

import (
	"fmt"
	"math"

	"github.com/tilefuse/tilefuse/tile"
)

// The attention kernels' meta-parameters: BLOCK_M queries and BLOCK_N keys
// a score tile; the head dims are padded to powers of two (at least 16),
// their tails masked; BLOCK_R elements a step of the sums' final pass.

// tuneAttention, tuneAttentionDQ, tuneAttentionDKV: on a GPU, score tiles
// of 64×64 for head dims up to 64, 64×32 up to 128, 32×32 above (the
// accumulators and the resident blocks live in registers: at 4 warps a
// 64×128 accumulator is 64 floats a thread), halving the resident block
// where the grid would not fill the SMs once; the backward's resident key
// blocks (dK and dV accumulate in registers) are the smaller. On a CPU
// whose kernels run as machine code, ieee: cpuAttnBlocks; else 32×32 (the
// executor's dot works on 4×16 blocks; larger tiles were no faster).
func tuneAttention(grp *Group, t Target, prec tile.Precision, meta tile.Meta) {
	a := grp.attn
	if cpuAttn(t, prec) {
		meta["BLOCK_M"], meta["BLOCK_N"] = cpuAttnBlocks(grp, t, a.sq, a.sk)
		return
	}
	bm, bn := attnBlocks(a, t)
	nb := attnPrograms(grp)
	if t.GPU() && bm > 32 && tile.CDiv(a.sq, bm)*nb < t.SMs {
		bm = 32
	}
	// TF32 with a wave of 128-query blocks: 128 rows at 8 warps (16 a
	// warp) and 3 stages of K and V, as FlashAttention-2 on the H200
	// (measured with tilefuse tune, 2026-12-01, fifth round: B4 H16 S2048
	// D64 0.590 ms against 64×64 at 4 warps' 0.621; B2 H16 S4096 D128 at
	// 128×32 2.176 against 64×32's 2.57; 128 rows at 4 warps 0.609 and
	// 3.27)
	// For head dims up to 64, 128×32 at 4 warps (32 rows a warp) instead
	// (tilefuse tune on the H200, 2026-12-01, third session, twice: B4 H16
	// S2048 D64 0.577 → 0.496 and 0.578 → 0.504 ms in the rematch; at D128
	// 4 warps measured 3.26 against 8 warps' 2.17)
	// a wave of 128-query blocks at up to 8 warps; head dims of 128 with
	// Hopper's shared memory (the rules of TF32 and 3xTF32 below)
	wave128 := t.GPU() && bm == 64 && tile.CDiv(a.sq, 128)*nb >= t.SMs && t.MaxThreads >= 256
	hopper128 := headBlock(a.hk) == 128 && headBlock(a.hv) == 128 && hopperSmem(t)
	if prec == tile.PrecTF32 && wave128 && 3*4*bn*(headBlock(a.hk)+headBlock(a.hv)) <= 160<<10 && t.SharedMemory >= 160<<10 {
		if max(headBlock(a.hk), headBlock(a.hv)) <= 64 {
			// with Hopper's shared memory on wgmma at 8 warps, since the
			// dots are PrecTF32TB (attnDot) and nothing converts K and V in
			// shared memory (tilefuse tune on the H200, 2026-12-03: B4 H16
			// S2048 D64 0.380 ms against 128×32 at 4 warps on mma.sync's
			// 0.475; 0.384 with 2 stages, 64×64 at 4 warps 0.422; 28
			// candidates)
			meta["BLOCK_M"], meta["BLOCK_N"], meta["num_warps"], meta["num_stages"] = 128, 32, 4, 3
			if hopperSmem(t) {
				meta["num_warps"], meta["wgmma"] = 8, 1
			}
			return
		}
		// head dims of 128 with Hopper's shared memory: 64 keys a block on
		// wgmma (codegen's MMA loop with wgmma = 1; mma.sync off sm_90),
		// its default stages (tilefuse tune on the H200, 2026-12-02: B2 H16
		// S4096 D128 2.03 ms against 128×32 on mma.sync's 2.19; 128×64 on
		// mma.sync 2.22, 128×32 on wgmma 2.29; 2026-12-03, PrecTF32TB:
		// 1.334 against 128×32's 1.616, the best of 20)
		if hopper128 {
			meta["BLOCK_M"], meta["BLOCK_N"], meta["num_warps"], meta["wgmma"] = 128, 64, 8, 1
			return
		}
		meta["BLOCK_M"], meta["BLOCK_N"], meta["num_warps"], meta["num_stages"] = 128, bn, 8, 3
		return
	}
	// 3xTF32 at head dims of 128 with Hopper's shared memory and a wave of
	// 128-query blocks: 128×32 at 8 warps on wgmma (tilefuse tune on the
	// H200, 2026-12-02, sixth session: B2 H16 S4096 D128 4.70 ms against
	// the 64×32, 4 warps that the rules below give, 7.11; 27 candidates;
	// SDPA in strict fp32 10.1 ms in the same call)
	if prec == tile.PrecTF32x3 && wave128 && hopper128 {
		meta["BLOCK_M"], meta["BLOCK_N"], meta["num_warps"], meta["wgmma"] = 128, 32, 8, 1
		return
	}
	meta["BLOCK_M"], meta["BLOCK_N"] = bm, bn
	attnWarps(t, prec, bm, meta)
	// TF32 and bf16 at 64×64 (head dims ≤ 64, 4 warps): the loop needs 162–165
	// registers by ptxas 11.8 (sm_90) with no spill; a cap at 168 (the most
	// for 3 programs of 128 threads in 64K registers) makes sure 12 warps an
	// SM, not 8, overlap one another's softmax with their products (3xTF32
	// needs 227: it would spill)
	if t.GPU() && (prec == tile.PrecTF32 || prec == tile.PrecBF16) && meta["num_warps"] == 4 &&
		bm*max(headBlock(a.hk), headBlock(a.hv)) <= 32*32*4 {
		meta["max_registers"] = 168
	}
}

func tuneAttentionDQ(grp *Group, t Target, prec tile.Precision, meta tile.Meta) {
	a := grp.attn
	if cpuAttn(t, prec) {
		meta["BLOCK_M"], meta["BLOCK_N"] = cpuAttnBlocks(grp, t, a.sq, a.sk)
		return
	}
	bm, _ := attnBlocks(a, t)
	nb := attnPrograms(grp)
	if t.GPU() && bm > 32 && tile.CDiv(a.sq, bm)*nb < t.SMs {
		bm = 32
	}
	// TF32, head dims up to 64, a wave of 128-query blocks: 128×32 at 4
	// warps (tilefuse tune on the H200, 2026-12-01, third session: B4 H16
	// S2048 D64 dQ 0.973 → 0.732 ms against 64×32 at 4 warps)
	// With Hopper's shared memory and keys enough for 8 steps of 64, 64
	// keys a step at 8 warps on wgmma (tilefuse tune on the H200,
	// 2026-12-03, the dots PrecTF32TB: B4 H16 S2048 D64 0.620 ms against
	// 0.705; at the BERT layer's S512 it was slower then, 0.0937 against
	// 0.0864, and since P's exp2 flushes and dS's scale left the loop
	// faster, 0.0727 against 0.0836: r28j, 2026-12-04)
	if wideAttnTF32(t, prec, a, nb, bm, a.sq) {
		meta["BLOCK_M"], meta["BLOCK_N"], meta["num_warps"] = 128, 32, 4
		if hopperSmem(t) && a.sk >= 512 {
			meta["BLOCK_N"], meta["num_warps"], meta["wgmma"] = 64, 8, 1
		}
		return
	}
	meta["BLOCK_M"], meta["BLOCK_N"] = bm, 32
	attnWarps(t, prec, bm, meta)
}

// hopperSmem: the target has Hopper's shared memory (up to 227 KiB a
// program; an A100's 163 KiB is not), which the attention rules take as
// "wgmma is there" (codegen falls back to mma.sync below sm_90 anyway).
func hopperSmem(t Target) bool { return t.SharedMemory >= 200<<10 }

// wideAttnTF32: a TF32 attention kernel on a GPU, head dims up to 64, whose
// held block of 64 (queries; keys for dK/dV) can be 128 with a wave of
// programs still (nb of them a block of the sequence).
func wideAttnTF32(t Target, prec tile.Precision, a *attention, nb, held, seq int) bool {
	return t.GPU() && prec == tile.PrecTF32 && held == 64 && max(headBlock(a.hk), headBlock(a.hv)) <= 64 &&
		tile.CDiv(seq, 128)*nb >= t.SMs && t.MaxThreads >= 128
}

// attnPrograms is how many programs an attention kernel runs per block of
// its sequence: the batch, times the heads where the heads are a grid
// dimension (the BERT layer: 8 × 12 = 96; counting the batch alone, 8,
// gave its kernels the tiles of a grid that does not fill the SMs: on the
// H200 in TF32 the forward 0.117 ms at 32×64 against 0.065–0.071 at 128
// queries, dQ 0.152 against 0.088, dK/dV 0.162 against 0.128; tilefuse
// tune, 2026-12-01, fourth session).
func attnPrograms(grp *Group) int {
	n := grp.attn.nb
	if grp.heads != nil {
		n *= grp.heads.h
	}
	return n
}

func tuneAttentionDKV(grp *Group, t Target, prec tile.Precision, meta tile.Meta) {
	a := grp.attn
	if cpuAttn(t, prec) {
		meta["BLOCK_N"], meta["BLOCK_M"] = cpuAttnBlocks(grp, t, a.sk, a.sq)
		if len(a.sums) > 0 {
			meta["BLOCK_R"] = t.perThread(8, 1024)
		}
		return
	}
	_, bn := attnBlocks(a, t)
	nb := attnPrograms(grp)
	if t.GPU() && bn > 32 && tile.CDiv(a.sk, bn)*nb < t.SMs {
		bn = 32
	}
	if len(a.sums) > 0 {
		meta["BLOCK_R"] = t.perThread(8, 1024)
	}
	// as dQ: 128 keys at 4 warps (tilefuse tune on the H200, 2026-12-01,
	// third session: B4 H16 S2048 D64 dK/dV 1.316 → 0.996 ms against 64
	// keys at 4 warps)
	// With Hopper's shared memory, 64 queries a step at 8 warps on wgmma
	// (tilefuse tune on the H200, 2026-12-03, the dots PrecTF32TB: B4 H16
	// S2048 D64 0.963 ms against 0.99; the BERT layer's B8 H12 S512 D64
	// 0.1085 against 0.1183)
	if wideAttnTF32(t, prec, a, nb, bn, a.sk) {
		meta["BLOCK_M"], meta["BLOCK_N"], meta["num_warps"] = 32, 128, 4
		if hopperSmem(t) {
			meta["BLOCK_M"], meta["num_warps"], meta["wgmma"] = 64, 8, 1
		}
		return
	}
	meta["BLOCK_M"], meta["BLOCK_N"] = 32, bn
	attnWarps(t, prec, bn, meta)
}

// attnWarps: on a GPU, tensor-core precisions run a kernel's products with
// one warp per 16 of the rows it holds (codegen's MMA loops give each warp
// whole rows of the score tile, so that P stays in registers), at most the
// target's warps.
func attnWarps(t Target, prec tile.Precision, rows int, meta tile.Meta) {
	if t.GPU() && prec != tile.PrecIEEE {
		meta["num_warps"] = max(1, min(t.NumWarps, rows/16))
	}
}

// attentionSpace: the score tile's sides BLOCK_M and BLOCK_N each halved
// and doubled (16 to 128: a dot's sides are at least 16), and num_warps on a
// GPU; for the forward and both backward kernels. With the products on the
// tensor cores (codegen's MMA loops: a warp holds whole rows of the score
// tile, 16 or 32 of them) also the tiles FlashAttention-2 chooses from:
// 64 or 128 resident rows (queries; keys for dK/dV) at 16 or 32 rows a warp,
// 32 or 64 streamed, two stages or three where three stages of K and V
// take at most 160 KiB; and where a 4-warp program's accumulators are at
// most 32 registers a thread, the same capped at 168 registers
// (max_registers: 3 programs an SM instead of 2 where ptxas would take a
// few more); at 16 rows a warp, the same tiles with wgmma = 1 (codegen's
// MMA loops on Hopper's wgmma; the TF32 and 3xTF32 forward also with
// wg_stage = 1, V transposed from 16-byte copies instead of by 4-byte
// ones; not measured on the GPU yet, so only candidates).
func attentionSpace(grp *Group, t Target, prec tile.Precision, def tile.Meta) []tile.Meta {
	var out []tile.Meta
	if cpuAttn(t, prec) {
		// every pair of 32–256 (the search that chose cpuAttnBlocks)
		for _, m := range []int{32, 64, 128, 256} {
			for _, n := range []int{32, 64, 128, 256} {
				if c := with(def, "BLOCK_M", m, "BLOCK_N", n); c.String() != def.String() {
					out = append(out, c)
				}
			}
		}
		return out
	}
	for _, name := range []string{"BLOCK_M", "BLOCK_N"} {
		b := def[name]
		if b/2 >= tile.MinDotDim {
			out = append(out, with(def, name, b/2))
		}
		if 2*b <= 128 {
			out = append(out, with(def, name, 2*b))
		}
	}
	out = append(out, warpChoices(def, t, 8)...)
	if !t.GPU() || prec == tile.PrecIEEE {
		return out
	}
	a := grp.attn
	held, streamed := "BLOCK_M", "BLOCK_N" // the forward and dQ hold queries
	if grp.Kind == AttentionDKVGroup {
		held, streamed = streamed, held
	}
	bd := headBlock(a.hk) + headBlock(a.hv)
	for _, rows := range []int{64, 128} {
		for _, perWarp := range []int{16, 32} {
			nw := rows / perWarp
			if nw*32 > t.MaxThreads || nw > 8 {
				continue
			}
			for _, n := range []int{32, 64} {
				m := with(def, held, rows, streamed, n, "num_warps", nw)
				out = append(out, m)
				if 3*n*bd*4 <= 160<<10 {
					out = append(out, with(m, "num_stages", 3))
				}
				if nw == 4 && rows*headBlock(a.hv)/128 <= 32 {
					out = append(out, with(m, "max_registers", 168))
				}
				// the products on Hopper's wgmma (codegen's MMA loops
				// with wgmma = 1: a warpgroup per 64 rows, 16 a warp;
				// TF32, bf16 and 3xTF32; mma.sync where the GPU is not
				// sm_90 or the views do not fit two stages): not
				// measured yet, so never the default
				if perWarp == 16 {
					stages := []int{0} // 2 stages, and 3 where they fit
					if 3*n*bd*4 <= 160<<10 {
						stages = append(stages, 3)
					}
					for _, st := range stages {
						out = append(out, with(m, "num_stages", st, "wgmma", 1))
						if grp.Kind == AttentionGroup && prec != tile.PrecBF16 { // V copied 16 bytes wide, transposed by its threads
							out = append(out, with(m, "num_stages", st, "wgmma", 1, "wg_stage", 1))
						}
					}
				}
			}
		}
	}
	return out
}

func attnBlocks(a *attention, t Target) (bm, bn int) {
	if !t.GPU() {
		return 32, 32
	}
	switch d := max(headBlock(a.hk), headBlock(a.hv)); {
	case d <= 64:
		return 64, 64
	case d <= 128:
		return 64, 32
	}
	return 32, 32
}

// cpuAttn: the kernels run as machine code on a CPU (codegen/cpu/native's
// products are ieee only).
func cpuAttn(t Target, prec tile.Precision) bool {
	return !t.GPU() && t.Native && prec == tile.PrecIEEE
}

// cpuAttnBlocks: the held and streamed sides of the score tile for kernels
// that run as machine code on a CPU: the largest of 128, 64 and 32 held rows
// (64 and 32 for head dims over 128) that gives every core at least four
// programs, the streamed side as large (no larger than either sequence
// needs, at least 32). Measured with tilefuse tune on the 2-core VM
// (2026-12-01, every pair of 16–256; attention large, B·H 32, S 512, head
// dim 64): 32×32 16.0 ms, 64×64 10.9, 128×128 10.3 (128×256 10.0); head
// dim 128: 12.2, 9.5, 8.1; the backward's dQ 14.2 → 11.4 and dK/dV 17.8 →
// 15.0 at 128×128; size small (S 128) 0.35 → 0.27 ms.
func cpuAttnBlocks(grp *Group, t Target, held, streamed int) (int, int) {
	a, grids := grp.attn, attnPrograms(grp)
	sides := []int{128, 64, 32}
	if max(headBlock(a.hk), headBlock(a.hv)) > 128 {
		sides = sides[1:]
	}
	var bh, bs int
	for _, side := range sides {
		bh, bs = min(side, max(32, pow2AtLeast(held))), min(side, max(32, pow2AtLeast(streamed)))
		if grids*tile.CDiv(held, bh) >= 4*t.Cores {
			break
		}
	}
	return bh, bs
}

// headBlock is a head dim's block: a power of two, at least 16 (a dot's
// least side).
func headBlock(d int) int { return max(tile.MinDotDim, pow2AtLeast(d)) }

// attnEmit is what the three attention kernels share: the pattern, the
// sizes, and the score tile being computed.
type attnEmit struct {
	e        *emitter
	a        *attention
	b        *tile.Builder
	bdk, bdv int
	bat      *tile.Value // the batch (program axis 1)
	head     *tile.Value // the head (program axis 2; 0 but for heads)
	// the score tile: its query and key coordinates (a row and a column,
	// either way round), its flat indices into [nb, sq, sk], and whether
	// each lane is in range (nil: every lane)
	qi, kj, idx, valid *tile.Value
	tiles              map[*Node]*tile.Value // the values the kernel computes by blocks
}

func newAttnEmit(e *emitter) (*attnEmit, error) {
	a := e.grp.attn
	if a == nil {
		return nil, fmt.Errorf("graphpass: %v: no attention pattern", e.grp)
	}
	ae := &attnEmit{e: e, a: a, b: e.b, bdk: headBlock(a.hk), bdv: headBlock(a.hv), bat: e.b.ProgramID(1), head: e.b.ProgramID(2), tiles: map[*Node]*tile.Value{}}
	ss := []int{a.nb, a.sq, a.sk}
	e.space = func(idx *tile.Value, s []int) []*tile.Value {
		if idx != ae.idx || !sameShape(s, ss) {
			return nil
		}
		return []*tile.Value{ae.bat, ae.qi, ae.kj}
	}
	e.member = func(n *Node, idx *tile.Value) (*tile.Value, error) {
		if v := ae.tiles[n]; v != nil && idx == ae.idx {
			return v, nil
		}
		return nil, fmt.Errorf("graphpass: %v: %v %v outside its tile", e.grp, n.Info.Kind, n)
	}
	e.override = func(n *Node) func(idx *tile.Value) (*tile.Value, error) {
		switch {
		case n == a.causalAt && n != nil:
			return func(idx *tile.Value) (*tile.Value, error) {
				dt := n.Info.DType
				return ae.b.Where(ae.b.Gt(ae.kj, ae.qi), ae.b.Const(a.causalMasked, dt), ae.b.Const(a.causalKept, dt)), nil
			}
		case ae.tiles[n] != nil && n == a.scale:
			return func(idx *tile.Value) (*tile.Value, error) { return ae.tiles[n], nil }
		}
		return nil
	}
	return ae, nil
}

// ptr is the kernel's pointer for n (an input or an output).
func (ae *attnEmit) ptr(n *Node, out *tile.Value) (*tile.Value, error) {
	e := ae.e
	if p := e.ptr[n]; p != nil {
		return p, nil
	}
	return e.outPtr(out, n)
}

// A tensor the kernels read or write by blocks: its pointer at this
// program's head, and the stride between its rows (batch × sequence rows
// of head-dim columns).
type rowsOf struct {
	p      *tile.Value
	stride int
}

// operand is q, k, v, dO or the output O (which: 'q', 'k', 'v', 'd', 'o')
// as this program's head reads it: a single pattern's own tensor, or for
// heads q, k and v in the projections' stack and dO and O as columns of the
// Concat's gradient and the Concat (out: the kernel's output pointer, for
// the forward's O).
func (ae *attnEmit) operand(which byte, out *tile.Value) (rowsOf, error) {
	a, hs, b := ae.a, ae.e.grp.heads, ae.b
	if hs == nil {
		n, stride := map[byte]*Node{'q': a.q, 'k': a.k, 'v': a.v, 'd': a.dO, 'o': a.pv}[which], a.hv
		if which == 'q' || which == 'k' {
			stride = a.hk
		}
		p, err := ae.ptr(n, out)
		return rowsOf{p, stride}, err
	}
	switch which {
	case 'q', 'k', 'v':
		p := ae.e.ptr[hs.stack]
		if p == nil {
			return rowsOf{}, fmt.Errorf("graphpass: %v: the projections' stack is not an input of the kernel", ae.e.grp)
		}
		part := map[byte]int{'q': 0, 'k': 1, 'v': 2}[which]
		return rowsOf{b.AddPtr(p, b.Mul(b.Add(ae.head, part*hs.h), hs.n*hs.dh)), hs.dh}, nil
	}
	n, col := hs.dm, b.Mul(ae.head, hs.dh)
	if which == 'o' {
		n = hs.concat
	} else {
		for i, c := range hs.doCol { // the head's dO's columns
			if i == 0 {
				col = b.I32(c)
			} else {
				col = b.Where(b.Eq(ae.head, i), c, col)
			}
		}
	}
	p, err := ae.ptr(n, out)
	if err != nil {
		return rowsOf{}, err
	}
	return rowsOf{b.AddPtr(p, col), hs.h * hs.dh}, nil
}

// vec is the pointer to this program's head's row values ([heads, batch,
// queries]: the log-sum-exp, D, row sums) of internal value n.
func (ae *attnEmit) vec(n *Node, out *tile.Value) (*tile.Value, error) {
	p, err := ae.ptr(n, out)
	if err != nil || ae.e.grp.heads == nil {
		return p, err
	}
	return ae.b.AddPtr(p, ae.b.Mul(ae.head, ae.a.nb*ae.a.sq)), nil
}

// output is the pointer to this program's head's output of, of the
// pattern's head (of(head 0's pattern) for a single pattern); with heads, the
// kernel's one output pointer at the offset of the head's output, chosen
// among the heads' offsets.
func (ae *attnEmit) output(of func(a *attention) *Node, out *tile.Value) (*tile.Value, error) {
	hs, e, b := ae.e.grp.heads, ae.e, ae.b
	if hs == nil {
		return ae.ptr(of(ae.a), out)
	}
	if !e.grp.OnePointer {
		return nil, fmt.Errorf("graphpass: %v: per-head outputs without one output pointer", e.grp)
	}
	var at *tile.Value
	for i, a := range hs.pats {
		off, err := e.outOffset(of(a))
		if err != nil {
			return nil, err
		}
		if at == nil {
			at = b.I32(off)
		} else {
			at = b.Where(b.Eq(ae.head, i), off, at)
		}
	}
	return b.AddPtr(out, at), nil
}

// block is the block of a tensor t ([batch·n rows, d columns] at the
// program's head) at rows r and columns c: a column [R,1] of row numbers
// and a row [1,D] of columns give an R×D block, a row [1,R] and a column
// [D,1] its transpose. Lanes outside n or d are not read and give 0.
func (ae *attnEmit) block(t rowsOf, n, d int, r, c *tile.Value) *tile.Value {
	b := ae.b
	off := b.Add(b.Mul(b.Add(b.Mul(ae.bat, n), r), t.stride), c)
	return ae.e.loadOr0(b.AddPtr(t.p, off), ae.inRange(r, n, c, d))
}

// inRange is r < n && c < d, leaving out the tests that sizes make true
// (nil: every lane).
func (ae *attnEmit) inRange(r *tile.Value, n int, c *tile.Value, d int) *tile.Value {
	var m *tile.Value
	if !divides(r, n) {
		m = ae.b.Lt(r, n)
	}
	if c != nil && !divides(c, d) {
		m = ae.e.and(m, ae.b.Lt(c, d))
	}
	if m == nil || c == nil {
		return m
	}
	s, err := tile.BroadcastShapes(r.Type.Shape, c.Type.Shape)
	if err != nil {
		return m
	}
	return ae.b.BroadcastTo(m, s)
}

// divides reports whether the coordinates r, a block of numel lanes,
// cover n exactly in whole blocks (no lane is ever out of range): n is a
// multiple of the block.
func divides(r *tile.Value, n int) bool {
	lanes := 1
	for _, d := range r.Type.Shape.Dims[:r.Type.Shape.Rank] {
		lanes *= d
	}
	return n%lanes == 0
}

// rows is a block of n row numbers from start: a column [n,1], or a row
// [1,n] where asRow.
func (ae *attnEmit) rows(start *tile.Value, n int, asRow bool) *tile.Value {
	r := ae.b.Add(ae.b.Arange(0, n), start)
	if asRow {
		return ae.b.ExpandDims(r, 0)
	}
	return ae.b.ExpandDims(r, 1)
}

// setTile makes (qi, kj) the score tile's coordinates and computes the
// tile's flat indices and range mask.
func (ae *attnEmit) setTile(qi, kj *tile.Value) {
	b, a := ae.b, ae.a
	ae.qi, ae.kj = qi, kj
	ae.idx = b.Add(b.Mul(b.Add(b.Mul(ae.bat, a.sq), qi), a.sk), kj)
	ae.valid = ae.e.and(ae.maybeLt(qi, a.sq), ae.maybeLt(kj, a.sk))
	if ae.valid != nil {
		ae.valid = b.BroadcastTo(ae.valid, ae.idx.Type.Shape)
	}
	ae.e.mask = ae.valid
	clear(ae.tiles)
}

func (ae *attnEmit) maybeLt(x *tile.Value, n int) *tile.Value {
	if divides(x, n) {
		return nil
	}
	return ae.b.Lt(x, n)
}

// scores computes f(scores) at the tile, −∞ on keys out of range.
func (ae *attnEmit) scores() (*tile.Value, error) {
	x, err := ae.e.gen(ae.a.sm.Inputs[0], ae.idx)
	if err != nil {
		return nil, err
	}
	if m := ae.maybeLt(ae.kj, ae.a.sk); m != nil {
		x = ae.b.Where(m, x, -inf)
	}
	return x, nil
}

// expDiff is e^(x − m), m a row's maximum or log-sum-exp (broadcast along
// the rows of x). Where the products run on the tensor cores at TF32 or
// bf16, whose next product rounds P to 10 or 7 bits, it is
// FlashAttention-2's 2^(x·log₂e − m·log₂e): one FMA (ptxas contracts the
// product and the difference) and ex2.approx, relative error about
// (|x|+|m|)·2⁻²⁴ + 2⁻²², within 1e-5 for scores below 100 against TF32's
// 2⁻¹¹ rounding; ieee and 3xTF32 keep the correctly rounded e^x (expf in
// codegen: ten more instructions an element, a third of the forward's
// instructions besides the products at 64×64 tiles). Its results below
// 2⁻¹²⁶ may be 0 (Exp2Flush: ex2.approx.ftz, 3 instructions fewer an
// element): P is at most 1, a row's sum (forward) has a term of 1 to which
// they add nothing, and in the products their terms are below 2⁻¹²⁶ of
// the values they weigh, where the products round P itself at 2⁻¹¹ or
// 2⁻⁸.
func (ae *attnEmit) expDiff(x, m *tile.Value) *tile.Value {
	b := ae.b
	if p := ae.e.prec; p != tile.PrecTF32 && p != tile.PrecBF16 {
		return b.Exp(b.Sub(x, m))
	}
	// x·c·log₂e as x·(c·log₂e) where x is a product by a constant c (the
	// backward's scores, S·scale): one multiply fewer an element
	xs, c := peelScale(x)
	return b.Exp2Flush(b.Sub(b.Mul(xs, b.Const(c*math.Log2E, x.Type.DType)), b.Mul(m, b.Const(math.Log2E, x.Type.DType))))
}

// peelScale is v as x·c: x and the constant c where v multiplies a value
// by a constant (through splat, either order), else v and 1.
func peelScale(v *tile.Value) (*tile.Value, float64) {
	if v.Op != tile.OpMul || len(v.Args) != 2 || !v.Type.DType.IsFloat() {
		return v, 1
	}
	for i := range 2 {
		c := v.Args[i]
		for c.Op == tile.OpSplat {
			c = c.Args[0]
		}
		if c.Op == tile.OpConst && c.Type.DType.IsFloat() {
			return v.Args[1-i], c.AuxF
		}
	}
	return v, 1
}

// hoistScale reports whether a dot accumulating c·A·B over a loop may
// accumulate A·B and scale the sum by c after the loop: c a power of two
// (the same values, barring overflow), or products rounded to TF32 or
// bf16, whose own rounding is far above the reassociation's.
func (ae *attnEmit) hoistScale(c float64) bool {
	if c == 1 || c == 0 || math.IsInf(c, 0) || math.IsNaN(c) {
		return false
	}
	if p := ae.e.prec; p == tile.PrecTF32 || p == tile.PrecBF16 {
		return true
	}
	frac, _ := math.Frexp(math.Abs(c))
	return frac == 0.5
}

// zeroOut is x on the tile's lanes in range, 0 elsewhere.
func (ae *attnEmit) zeroOut(x *tile.Value) *tile.Value {
	if ae.valid == nil {
		return x
	}
	return ae.b.Where(ae.valid, x, 0.0)
}

// keyEnd is where a block of queries from q0 stops reading keys: all of
// them, or with a causal mask that contributes nothing above the
// diagonal, the keys up to its last query.
func (ae *attnEmit) keyEnd(q0 *tile.Value, bm int) any {
	if !ae.a.skipsBlocks() {
		return ae.a.sk
	}
	return ae.b.Minimum(ae.b.Add(q0, bm), ae.a.sk)
}

// attnDot is the precision of an attention kernel's dots where the graph's
// products have precision p: TF32 as tile.PrecTF32TB, which rounds A and
// truncates B. Each of the kernels' dots holds A in registers (Q, dO, K or
// V resident, or P and dS computed from the scores) and streams B through
// shared memory (K, V, Q, dO), where wgmma reads it as it lies (TF32:
// truncated), so nothing is converted there: PrecTF32's B, rounded, took a
// pass over each stage's copies (a load, a conversion and a store a word).
func attnDot(p tile.Precision) tile.Precision {
	if p == tile.PrecTF32 {
		return tile.PrecTF32TB
	}
	return p
}

// emitAttention: program (i, b) computes rows [i·BM, (i+1)·BM) of batch
// b's output, looping over blocks of keys with an online softmax; in a
// training graph it also writes each row's log-sum-exp.
func emitAttention(e *emitter, out *tile.Value, k *Kernel) error {
	ae, err := newAttnEmit(e)
	if err != nil {
		return err
	}
	b, a := e.b, ae.a
	bm, err := e.param("BLOCK_M")
	if err != nil {
		return err
	}
	bn, err := e.param("BLOCK_N")
	if err != nil {
		return err
	}
	var ts [4]rowsOf // q, k, v, O
	for i, which := range []byte("qkvo") {
		if ts[i], err = ae.operand(which, out); err != nil {
			return err
		}
	}
	qp, kp, vp, op := ts[0], ts[1], ts[2], ts[3]
	dt := a.pv.Info.DType
	q0 := b.Mul(b.ProgramID(0), bm)
	rm := ae.rows(q0, bm, false)                                             // [BM,1] queries
	qt := ae.block(qp, a.sq, a.hk, rm, b.ExpandDims(b.Arange(0, ae.bdk), 0)) // [BM,BDK]
	if a.scale != nil {
		qt = b.Mul(qt, b.Const(a.scaleC, dt)) // the scale folded into Q's block
	}
	rdkCol := b.ExpandDims(b.Arange(0, ae.bdk), 1) // [BDK,1]
	rdv := b.ExpandDims(b.Arange(0, ae.bdv), 0)    // [1,BDV]
	init := []*tile.Value{b.Full(-inf, dt, bm, 1), b.Zeros(dt, bm, 1), b.Zeros(dt, bm, ae.bdv)}
	res := b.For(0, ae.keyEnd(q0, bm), bn, init, func(n0 *tile.Value, c []*tile.Value) []*tile.Value {
		mi, li, acc := c[0], c[1], c[2]
		rn := ae.rows(n0, bn, true)                // [1,BN] keys
		kt := ae.block(kp, a.sk, a.hk, rn, rdkCol) // [BDK,BN]
		ae.setTile(rm, rn)
		s := b.Dot(qt, kt, nil, attnDot(e.prec))
		if a.scale != nil {
			ae.tiles[a.scale] = s
		} else {
			ae.tiles[a.qk] = s
		}
		sv, err := ae.scores()
		if err != nil {
			e.err = err
			return c
		}
		mNew := b.Maximum(mi, b.Max(sv, 1, tile.KeepDims))
		ms := b.Where(b.Eq(mNew, -inf), 0.0, mNew)
		alpha := ae.expDiff(mi, ms)
		pt := ae.expDiff(sv, ms)
		rnCol := ae.rows(n0, bn, false)            // [BN,1]
		vt := ae.block(vp, a.sk, a.hv, rnCol, rdv) // [BN,BDV]
		li = b.Add(b.Mul(li, alpha), b.Sum(pt, 1, tile.KeepDims))
		acc = b.Dot(pt, vt, b.Mul(acc, alpha), attnDot(e.prec))
		return []*tile.Value{mNew, li, acc}
	})
	if e.err != nil {
		return e.err
	}
	// a row whose scores are all −∞ has l = 0 and gives 0/0 = NaN, as
	// softmax followed by the product does
	o := b.Div(res[2], res[1])
	rowOff := b.Add(b.Mul(ae.bat, a.sq), rm)
	b.Store(b.AddPtr(op.p, b.Add(b.Mul(rowOff, op.stride), rdv)), o, ae.inRange(rm, a.sq, rdv, a.hv))
	if a.lse != nil {
		lp, err := ae.vec(a.lse, out)
		if err != nil {
			return err
		}
		b.Store(b.AddPtr(lp, rowOff), b.Add(res[0], b.Log(res[1])), ae.inRange(rm, a.sq, nil, 0))
	}
	k.Grid = ae.grid(tile.CDiv(a.sq, bm))
	return nil
}

// grid is the kernels' grid: blocks along the sequence, the batch, and the
// heads where there are several.
func (ae *attnEmit) grid(blocks int) tile.Grid {
	g := tile.Grid{blocks, ae.a.nb}
	if hs := ae.e.grp.heads; hs != nil {
		g[2] = hs.h
	}
	return g
}

// backwardTiles computes, at the score tile, the probabilities from the
// log-sum-exp, and from dP = dO×Vᵀ the SoftmaxDiff P∘(dP − D) (D =
// rowsum(dO∘O) = rowsum(P∘dP)), and records them with the scores as the
// values the chain to dS is computed from; it returns P and dS, 0 on lanes
// out of range.
//
// Where dS is a product by a constant c (the gradient of the scores'
// scale) that hoistScale allows, ds is dS/c and scale c: the dot that
// accumulates ds scales its sum by c after the loop, one multiply a
// result element instead of one an element of every iteration's dS.
func (ae *attnEmit) backwardTiles(s, lse, dp, delta *tile.Value) (p, ds *tile.Value, scale float64, err error) {
	b, a := ae.b, ae.a
	ae.tiles[a.qk] = s
	x, err := ae.scores()
	if err != nil {
		return nil, nil, 1, err
	}
	p = ae.zeroOut(ae.expDiff(x, lse))
	ae.tiles[a.sm] = p
	ae.tiles[a.dp] = dp
	ae.tiles[a.sd] = b.Mul(p, b.Sub(dp, delta))
	if ds, err = ae.e.gen(a.ds, ae.idx); err != nil {
		return nil, nil, 1, err
	}
	scale = 1
	if u, c := peelScale(ds); ae.hoistScale(c) {
		ds, scale = u, c
	}
	return p, ae.zeroOut(ds), scale, nil
}

// scaled is v·c, or v where c is 1.
func (ae *attnEmit) scaled(v *tile.Value, c float64) *tile.Value {
	if c == 1 {
		return v
	}
	return ae.b.Mul(v, ae.b.Const(c, v.Type.DType))
}

// emitAttentionDQ: program (i, b) holds batch b's queries [i·BM, (i+1)·BM),
// computes D = rowsum(dO∘O) for them, and loops over blocks of keys:
// scores, P from the log-sum-exp, dP, dS, and dQ += dS×K (and the row sums
// of the Σ outputs' operands). It writes dQ, D and the row sums.
func emitAttentionDQ(e *emitter, out *tile.Value, k *Kernel) error {
	ae, err := newAttnEmit(e)
	if err != nil {
		return err
	}
	b, a := e.b, ae.a
	bm, err := e.param("BLOCK_M")
	if err != nil {
		return err
	}
	bn, err := e.param("BLOCK_N")
	if err != nil {
		return err
	}
	var ts [5]rowsOf // q, k, v, dO, O
	for i, which := range []byte("qkvdo") {
		if ts[i], err = ae.operand(which, out); err != nil {
			return err
		}
	}
	qp, kp, vp, dop, op := ts[0], ts[1], ts[2], ts[3], ts[4]
	lp, err := ae.vec(a.lse, out)
	if err != nil {
		return err
	}
	dt := a.pv.Info.DType
	q0 := b.Mul(b.ProgramID(0), bm)
	rm := ae.rows(q0, bm, false) // [BM,1] queries
	rdk, rdv := b.ExpandDims(b.Arange(0, ae.bdk), 0), b.ExpandDims(b.Arange(0, ae.bdv), 0)
	rdkCol, rdvCol := b.ExpandDims(b.Arange(0, ae.bdk), 1), b.ExpandDims(b.Arange(0, ae.bdv), 1)
	qt := ae.block(qp, a.sq, a.hk, rm, rdk)   // [BM,BDK]
	dot := ae.block(dop, a.sq, a.hv, rm, rdv) // [BM,BDV]
	ot := ae.block(op, a.sq, a.hv, rm, rdv)   // [BM,BDV]
	delta := b.Sum(b.Mul(dot, ot), 1, tile.KeepDims)
	rowOff := b.Add(b.Mul(ae.bat, a.sq), rm)
	rowMask := ae.inRange(rm, a.sq, nil, 0)
	lse := e.loadOr0(b.AddPtr(lp, rowOff), rowMask)
	init := []*tile.Value{b.Zeros(dt, bm, ae.bdk)}
	for range a.sums {
		init = append(init, b.Zeros(dt, bm, 1))
	}
	scale := 1.0 // dS's constant factor, taken out of the loop (backwardTiles)
	res := b.For(0, ae.keyEnd(q0, bm), bn, init, func(n0 *tile.Value, c []*tile.Value) []*tile.Value {
		rn := ae.rows(n0, bn, true)                // [1,BN] keys
		kt := ae.block(kp, a.sk, a.hk, rn, rdkCol) // [BDK,BN]
		vt := ae.block(vp, a.sk, a.hv, rn, rdvCol) // [BDV,BN]
		ae.setTile(rm, rn)
		s := b.Dot(qt, kt, nil, attnDot(e.prec))
		dp := b.Dot(dot, vt, nil, attnDot(e.prec))
		_, ds, sc, err := ae.backwardTiles(s, lse, dp, delta)
		if err != nil {
			e.err = err
			return c
		}
		scale = sc
		next := []*tile.Value{b.Dot(ds, b.Trans(kt), c[0], attnDot(e.prec))}
		for i, sum := range a.sums {
			x, err := e.gen(sum.Inputs[0], ae.idx)
			if err != nil {
				e.err = err
				return c
			}
			next = append(next, b.Add(c[1+i], b.Sum(ae.zeroOut(x), 1, tile.KeepDims)))
		}
		return next
	})
	if e.err != nil {
		return e.err
	}
	dqp, err := ae.output(func(a *attention) *Node { return a.dq }, out)
	if err != nil {
		return err
	}
	b.Store(b.AddPtr(dqp, b.Add(b.Mul(rowOff, a.hk), rdk)), ae.scaled(res[0], scale), ae.inRange(rm, a.sq, rdk, a.hk))
	dpp, err := ae.vec(a.delta, out)
	if err != nil {
		return err
	}
	b.Store(b.AddPtr(dpp, rowOff), delta, rowMask)
	for i, r := range a.rowSums {
		rp, err := ae.vec(r, out)
		if err != nil {
			return err
		}
		b.Store(b.AddPtr(rp, rowOff), res[1+i], rowMask)
	}
	k.Grid = ae.grid(tile.CDiv(a.sq, bm))
	return nil
}

// emitAttentionDKV: program (j, b) holds batch b's keys [j·BN, (j+1)·BN)
// and their values, and loops over blocks of queries: the scores
// transposed (keys × queries), Pᵀ from the log-sum-exp, dV += Pᵀ×dO, dPᵀ,
// dSᵀ, dK += dSᵀ×Q. Program (0, 0) also adds up the row sums into each Σ
// output.
func emitAttentionDKV(e *emitter, out *tile.Value, k *Kernel) error {
	ae, err := newAttnEmit(e)
	if err != nil {
		return err
	}
	b, a := e.b, ae.a
	bm, err := e.param("BLOCK_M")
	if err != nil {
		return err
	}
	bn, err := e.param("BLOCK_N")
	if err != nil {
		return err
	}
	var ts [4]rowsOf // q, k, v, dO
	for i, which := range []byte("qkvd") {
		if ts[i], err = ae.operand(which, out); err != nil {
			return err
		}
	}
	qp, kp, vp, dop := ts[0], ts[1], ts[2], ts[3]
	lp, err := ae.vec(a.lse, out)
	if err != nil {
		return err
	}
	dlp, err := ae.vec(a.delta, out)
	if err != nil {
		return err
	}
	dt := a.pv.Info.DType
	k0 := b.Mul(b.ProgramID(0), bn)
	rn := ae.rows(k0, bn, false) // [BN,1] keys
	rdk, rdv := b.ExpandDims(b.Arange(0, ae.bdk), 0), b.ExpandDims(b.Arange(0, ae.bdv), 0)
	rdkCol := b.ExpandDims(b.Arange(0, ae.bdk), 1)
	kt := ae.block(kp, a.sk, a.hk, rn, rdk) // [BN,BDK]
	vt := ae.block(vp, a.sk, a.hv, rn, rdv) // [BN,BDV]
	var lo any = 0
	if a.skipsBlocks() { // the first block of queries with one at or below the diagonal
		lo = b.Mul(b.Div(k0, bm), bm)
	}
	init := []*tile.Value{b.Zeros(dt, bn, ae.bdk), b.Zeros(dt, bn, ae.bdv)}
	scale := 1.0 // dS's constant factor, taken out of the loop (backwardTiles)
	res := b.For(lo, a.sq, bm, init, func(m0 *tile.Value, c []*tile.Value) []*tile.Value {
		rmT := ae.rows(m0, bm, true)                 // [1,BM] queries
		rmCol := ae.rows(m0, bm, false)              // [BM,1]
		qT := ae.block(qp, a.sq, a.hk, rmT, rdkCol)  // [BDK,BM]
		dot := ae.block(dop, a.sq, a.hv, rmCol, rdv) // [BM,BDV]
		rowOff := b.Add(b.Mul(ae.bat, a.sq), rmT)
		rowMask := ae.inRange(rmT, a.sq, nil, 0)
		lse := e.loadOr0(b.AddPtr(lp, rowOff), rowMask)
		delta := e.loadOr0(b.AddPtr(dlp, rowOff), rowMask)
		ae.setTile(rmT, rn) // [BN,BM]
		s := b.Dot(kt, qT, nil, attnDot(e.prec))
		dp := b.Dot(vt, b.Trans(dot), nil, attnDot(e.prec))
		p, ds, sc, err := ae.backwardTiles(s, lse, dp, delta)
		if err != nil {
			e.err = err
			return c
		}
		scale = sc
		return []*tile.Value{b.Dot(ds, b.Trans(qT), c[0], attnDot(e.prec)), b.Dot(p, dot, c[1], attnDot(e.prec))}
	})
	if e.err != nil {
		return e.err
	}
	keyOff := b.Add(b.Mul(ae.bat, a.sk), rn)
	for i, of := range []func(a *attention) *Node{func(a *attention) *Node { return a.dk }, func(a *attention) *Node { return a.dv }} {
		p, err := ae.output(of, out)
		if err != nil {
			return err
		}
		d, cols := a.hk, rdk
		if i == 1 {
			d, cols = a.hv, rdv
		}
		r := res[i]
		if i == 0 {
			r = ae.scaled(r, scale)
		}
		b.Store(b.AddPtr(p, b.Add(b.Mul(keyOff, d), cols)), r, ae.inRange(rn, a.sk, cols, d))
	}
	if len(a.sums) > 0 {
		if err := ae.finishSums(out); err != nil {
			return err
		}
	}
	k.Grid = ae.grid(tile.CDiv(a.sk, bn))
	return nil
}

// finishSums: program (0, 0) adds up each Σ output's row sums (the other
// programs' loops run no step); the same order every run.
func (ae *attnEmit) finishSums(out *tile.Value) error {
	b, a, e := ae.b, ae.a, ae.e
	br, err := e.param("BLOCK_R")
	if err != nil {
		return err
	}
	n := a.nb * a.sq
	first := b.And(b.Eq(b.ProgramID(0), 0), b.Eq(ae.bat, 0))
	dt := a.pv.Info.DType
	for i := range a.sums {
		rp, err := ae.vec(a.rowSums[i], out)
		if err != nil {
			return err
		}
		acc := b.For(0, b.Where(first, n, 0), br, []*tile.Value{b.Zeros(dt, br)}, func(i0 *tile.Value, c []*tile.Value) []*tile.Value {
			off := b.Add(b.Arange(0, br), i0)
			return []*tile.Value{b.Add(c[0], e.loadOr0(b.AddPtr(rp, off), b.Lt(off, n)))}
		})
		sp, err := ae.output(func(a *attention) *Node { return a.sums[i] }, out)
		if err != nil {
			return err
		}
		b.Store(sp, b.Sum(acc[0], 0), first)
	}
	return nil
}
