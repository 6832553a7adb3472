package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Tensor-core layouts and shared-memory operand tiles for mma.sync.
//
// The fragments of mma.sync.m16n8k8 (.tf32) by the PTX ISA, with g = lane/4
// and t = lane%4 (verified on the H200 by the TF32 conformance matmuls):
//
//	A (16×8, row): a0..a3 at (g,t) (g+8,t) (g,t+4) (g+8,t+4)
//	B (8×8, col):  b0, b1 at (t,g) (t+4,g)
//	C (16×8):      c0..c3 at (g,2t) (g,2t+1) (g+8,2t) (g+8,2t+1)
//
// C is a Blocked layout with a register level inside the warp tile
// (mmaLayout): along rows 8 lanes (g), then 2·mt registers 8 rows apart
// (c0/c2 and the warp's mt instruction tiles), then the warps; along
// columns 2 registers (2t, 2t+1), 4 lanes (t), nt registers 8 columns
// apart, then the warps. So the accumulator is an ordinary value of the
// lowerer: the epilogue (bias, activation, residual, stores) runs on it in
// registers, and broadcasts of a bias row into it are free.

// mmaLayout is the accumulator layout of an m×n block computed by wm×wn
// warps, each holding a contiguous (m/wm)×(n/wn) warp tile of m16n8 tiles.
func mmaLayout(m, n, wm, wn int) *Blocked {
	mt, nt := m/(16*wm), n/(8*wn)
	return &Blocked{Shape: []int{m, n}, SPT: []int{1, 2}, TPW: []int{8, 4}, WRep: []int{2 * mt, nt}, WPC: []int{wm, wn}}
}

// mmaWarps splits numWarps into wm×wn warps for an m×n accumulator so that
// every warp has whole m16n8 tiles, with warp tiles as square as possible
// (ties: taller, which loads fewer B fragments). ok is false when the block
// is too small for the warps.
func mmaWarps(m, n, numWarps int) (wm, wn int, ok bool) {
	best := -1
	for w := 1; w <= numWarps; w *= 2 {
		v := numWarps / w
		if m%(16*w) != 0 || n%(8*v) != 0 {
			continue
		}
		score := log2(m/w) - log2(n/v)
		if score < 0 {
			score = -score
		}
		if best < 0 || score < best {
			best, wm, wn = score, w, v
		}
	}
	return wm, wn, best >= 0
}

// swizzle permutes the 16-byte chunks of each row of a shared-memory tile,
// as Triton's shared encoding does with a vector of 4 words: chunk c of row
// r is stored at chunk c ^ phase(r), phase(r) = (r/PerPhase·Mul) mod
// MaxPhase. A permutation within each aligned group of 8 chunks, it keeps
// 16-byte copies whole and conflict-free; chosen so that fragment reads
// are conflict-free too (chooseSwizzle).
type swizzle struct{ PerPhase, Mul, MaxPhase int }

func (s swizzle) phase(r int) int { return (r / s.PerPhase * s.Mul) % s.MaxPhase }

// period is the number of rows after which the phases repeat.
func (s swizzle) period() int {
	return s.PerPhase * s.MaxPhase / gcdInt(s.Mul, s.MaxPhase)
}

func (s swizzle) String() string {
	if s.MaxPhase == 1 {
		return "none"
	}
	return fmt.Sprintf("chunk^((row/%d*%d)%%%d)", s.PerPhase, s.Mul, s.MaxPhase)
}

func gcdInt(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// smemTile is an operand tile in shared memory: Rows×Cols f32 elements,
// row-major, at byte Off of a pipeline stage, rows swizzled by Swz.
type smemTile struct {
	Off        int
	Rows, Cols int
	Swz        swizzle
}

func (t smemTile) rowBytes() int { return 4 * t.Cols }
func (t smemTile) bytes() int    { return t.Rows * t.rowBytes() }

// addr is the byte offset of element (r, c) in the stage.
func (t smemTile) addr(r, c int) int {
	ch := c / 4
	if ch < t.swizzled() {
		ch ^= t.Swz.phase(r)
	}
	return t.Off + r*t.rowBytes() + 16*ch + 4*(c%4)
}

// swizzled is the number of a row's chunks that the swizzle permutes: all
// of them but those past the last whole group of MaxPhase (the 33rd chunk
// of a realigned B's rows: realign.go).
func (t smemTile) swizzled() int {
	n := t.Cols / 4
	if t.Swz.MaxPhase > 1 {
		n -= n % t.Swz.MaxPhase
	}
	return n
}

// slotAddr is addr of the element at value coordinates vc of a load
// whose tile is t: (vc[0], vc[1]), or (vc[1], vc[0]) where the tile holds
// the operand transposed (tileSlot).
func (t smemTile) slotAddr(vc []int, trans bool) int {
	if trans {
		return t.addr(vc[1], vc[0])
	}
	return t.addr(vc[0], vc[1])
}

func (t smemTile) String() string {
	return fmt.Sprintf("[%d][%d]f32 at +%d, swizzle %v", t.Rows, t.Cols, t.Off, t.Swz)
}

// access is one shared-memory access of a lane: Words consecutive 4-byte
// words at element (R, C) of a tile.
type access struct{ R, C, Words int }

// conflicts counts the bank conflicts of the accesses of one instruction
// (or one 8-row phase of an ldmatrix): the extra wavefronts, 0 when every
// word falls in a bank of its own.
func (t smemTile) conflicts(acc []access) int {
	var banks [32]int
	for _, a := range acc {
		w := t.addr(a.R, a.C) / 4
		for i := 0; i < a.Words; i++ {
			banks[(w+i)%32]++
		}
	}
	worst := 0
	for _, n := range banks {
		worst = max(worst, n)
	}
	return max(0, worst-1)
}

// chooseSwizzle picks the first swizzle, from the most spread out, under
// which each group of accesses is conflict-free, among those whose phases
// repeat within every `period` rows (so that row offsets that are multiples
// of period keep the thread's phase); no swizzle if none is.
func chooseSwizzle(t smemTile, groups [][]access, period int) swizzle {
	chunks := t.Cols / 4
	best, bestN := swizzle{1, 1, 1}, -1
	for _, mp := range []int{8, 4, 2} {
		if mp > chunks {
			continue
		}
		for _, pp := range []int{1, 2, 4, 8} {
			for _, mul := range []int{1, 2} {
				s := swizzle{pp, mul, mp}
				if period%s.period() != 0 {
					continue
				}
				t.Swz = s
				n := 0
				for _, g := range groups {
					n += t.conflicts(g)
				}
				if bestN < 0 || n < bestN {
					best, bestN = s, n
				}
				if n == 0 {
					return s
				}
			}
		}
	}
	t.Swz = swizzle{1, 1, 1}
	n := 0
	for _, g := range groups {
		n += t.conflicts(g)
	}
	if bestN < 0 || n <= bestN {
		return swizzle{1, 1, 1}
	}
	return best
}

// ldmatrixGroups are the accesses of ldmatrix.x4 loading A fragments
// (16 rows × 8 words at row r0, word column c0): four 8-row phases of
// 16-byte rows.
func ldmatrixGroups(r0, c0 int) [][]access {
	var out [][]access
	for j := 0; j < 4; j++ {
		var g []access
		for i := 0; i < 8; i++ {
			g = append(g, access{r0 + i + 8*(j%2), c0 + 4*(j/2), 4})
		}
		out = append(out, g)
	}
	return out
}

// bFragGroups are the accesses of the two ld.shared.b32 that load a B
// fragment of an 8×8 tile at (k0, n0): lane (g, t) reads (k0+t, n0+g) and
// (k0+t+4, n0+g).
func bFragGroups(k0, n0 int) [][]access {
	var out [][]access
	for h := 0; h < 2; h++ {
		var g []access
		for lane := 0; lane < 32; lane++ {
			g = append(g, access{k0 + lane%4 + 4*h, n0 + lane/4, 1})
		}
		out = append(out, g)
	}
	return out
}

// operandTiles lays out one pipeline stage: A (m×k) at 0, B (k×n) after it,
// each swizzled so that its fragment reads are conflict-free.
func operandTiles(m, n, k int) (a, b smemTile) {
	a = smemTile{Off: 0, Rows: m, Cols: k}
	var ga [][]access
	for r := 0; r < m; r += 16 {
		for c := 0; c < k; c += 8 {
			ga = append(ga, ldmatrixGroups(r, c)...)
		}
	}
	a.Swz = chooseSwizzle(a, ga, 16)
	b = smemTile{Off: a.bytes(), Rows: k, Cols: n}
	var gb [][]access
	for r := 0; r < k; r += 8 {
		for c := 0; c < n; c += 8 {
			gb = append(gb, bFragGroups(r, c)...)
		}
	}
	b.Swz = chooseSwizzle(b, gb, 4)
	return a, b
}

// isZero reports whether v is the constant 0 (or a block of it).
func isZero(v *tile.Value) bool {
	for v.Op == tile.OpSplat || v.Op == tile.OpBroadcast {
		v = v.Args[0]
	}
	return v.Op == tile.OpConst && v.Aux == 0 && v.AuxF == 0
}

// ---- emission ----

// mmaRegs are the per-thread shared-memory addresses of a pipelined dot's
// fragments, relative to a stage: A's ldmatrix rows and B's columns, one
// register per residue of the static chunk offset mod 8 (see fragAddr).
type mmaRegs struct {
	aBase, bBase map[int]string
}

// swizzledBase emits, in the prologue, tile.Off + row·rowBytes +
// 16·((chunk + res) ^ phase(row)) + inChunk·4 + smem for registers row,
// chunk and inChunk ("" for 0).
func (l *lowerer) swizzledBase(t smemTile, row, chunk, inChunk string, res int) string {
	key := fmt.Sprintf("swz|%v|%s|%s|%s|%d", t, row, chunk, inChunk, res)
	return l.geo(key, func(w *strings.Builder) string {
		ph := l.phase(w, t.Swz, row)
		c := l.reg("r")
		emit(w, "add.s32 %s, %s, %d", c, chunk, res)
		emit(w, "xor.b32 %s, %s, %s", c, c, ph)
		return l.tileAddr(w, t, row, c, inChunk)
	})
}

// tileAddr emits the shared address of word inChunk ("" for 0) of the
// (swizzled) 16-byte chunk ch of tile t's row row.
func (l *lowerer) tileAddr(w *strings.Builder, t smemTile, row, ch, inChunk string) string {
	a := l.reg("r")
	emit(w, "mad.lo.s32 %s, %s, %d, %s", a, row, t.rowBytes(), l.smemAddr())
	emit(w, "mad.lo.s32 %s, %s, 16, %s", a, ch, a)
	if inChunk != "" {
		emit(w, "mad.lo.s32 %s, %s, 4, %s", a, inChunk, a)
	}
	if t.Off != 0 {
		emit(w, "add.s32 %s, %s, %d", a, a, t.Off)
	}
	return a
}

// shiftAnd emits (x >> sh) & mask into a prologue register.
func (l *lowerer) shiftAnd(key, x string, sh, mask int) string {
	return l.geo(key, func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, %d", r, x, sh)
		emit(w, "and.b32 %s, %s, %d", r, r, mask)
		return r
	})
}

// aFragGeometry are the prologue registers of ldmatrix.x4's A rows: lane L
// gives the address of row (L%8) + 8·(L/8 %2) of its warp's m16 tile, and
// of 16-byte chunk L/16 of the k8 step.
func (l *lowerer) aFragGeometry(p *pipe) (row, chunk string) {
	b, lane := p.acc, l.laneID()
	row = l.geo("mma|arow|"+b.key(), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "and.b32 %s, %s, 7", r, lane)
		t := l.reg("r")
		emit(w, "shr.u32 %s, %s, 3", t, lane)
		emit(w, "and.b32 %s, %s, 1", t, t)
		emit(w, "mad.lo.s32 %s, %s, 8, %s", r, t, r)
		emit(w, "mad.lo.s32 %s, %s, %d, %s", r, l.warpAlong(b, 0), b.warpTile(0), r)
		return r
	})
	return row, l.shiftAnd("mma|achunk", lane, 4, 1)
}

// mmaStep emits the tensor-core work of one pipeline stage: for each k step
// of 8, the warp's A fragments by ldmatrix.x4 and B fragments by
// ld.shared.b32 from the stage at byte offset stage (a register), A's
// truncated to TF32 (and.b32) and B's rounded (roundTF32), as the interpreter
// sees a TF32 dot's operands, then an mma.sync per m16n8 tile
// of the warp into the accumulator registers acc (held in p.acc's layout).
func (l *lowerer) mmaStep(p *pipe, stage string, acc *lval) {
	w := &l.body
	l.newStep()
	b := p.acc
	mt, nt := b.wrep(0)/2, b.wrep(1)
	lane := l.laneID()
	aRow, aChunk := l.aFragGeometry(p)
	// B: lane (g, t) reads row t, column wn·8nt + g: chunk (wn·8nt + g)/4, word g%4
	bRow := l.shiftAnd("mma|t", lane, 0, 3)
	bCol := l.geo("mma|bcol|"+b.key(), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, 2", r, lane)
		emit(w, "mad.lo.s32 %s, %s, %d, %s", r, l.warpAlong(b, 1), b.warpTile(1), r)
		return r
	})
	bChunk := l.shiftAnd("mma|bchunk|"+b.key(), bCol, 2, (1<<30)-1)
	bIn := l.shiftAnd("mma|bin|"+b.key(), bCol, 0, 3)
	// per stage: the stage offset added to each base once
	aAddr, bAddr := map[int]string{}, map[int]string{}
	at := func(m map[int]string, res int, base string) string {
		if r, ok := m[res]; ok {
			return r
		}
		r := l.reg("r")
		emit(w, "add.s32 %s, %s, %s", r, base, stage)
		m[res] = r
		return r
	}
	// ldA loads m16 tile i's fragment of 8 k at chunk cs (4 words: A's
	// 16×8 f32 as m16n8k8 wants it); ldB the two words of n8 tile j at rows
	// k and k+4
	ldA := func(i, cs int) [4]string {
		if p.aT {
			return l.ldATransposed(p, i, cs, stage)
		}
		base := at(aAddr, cs%8, l.swizzledBase(p.a, aRow, aChunk, "", cs%8))
		off := 16*i*p.a.rowBytes() + 128*(cs/8)
		a := [4]string{l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")}
		emit(w, "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%s, %s, %s, %s}, [%s+%d]", a[0], a[1], a[2], a[3], base, off)
		return a
	}
	ldB := func(j, k int) [2]string {
		if p.bT {
			return l.ldBTransposed(p, j, k, stage)
		}
		cs := 2 * j // column chunk of the n8 tile within the warp tile
		base := at(bAddr, cs%8, l.swizzledBase(p.b, bRow, bChunk, bIn, cs%8))
		off := k*p.b.rowBytes() + 128*(cs/8)
		b := [2]string{l.reg("r"), l.reg("r")}
		emit(w, "ld.shared.b32 %s, [%s+%d]", b[0], base, off)
		emit(w, "ld.shared.b32 %s, [%s+%d]", b[1], base, off+4*p.b.rowBytes())
		return b
	}
	mma := func(shape string, c [4]string, a [4]string, b [2]string) {
		emit(w, "mma.sync.aligned.%s {%s, %s, %s, %s}, {%s, %s, %s, %s}, {%s, %s}, {%s, %s, %s, %s}",
			shape, c[0], c[1], c[2], c[3], a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], c[2], c[3])
	}
	const tf32 = "m16n8k8.row.col.f32.tf32.tf32.f32"
	if p.dot.Prec == tile.PrecBF16 {
		// m16n8k16: k permuted within each 16 (the same for A and B, so the
		// sum is the same): the instruction's k pair (2t, 2t+1) is the
		// stage's (t, t+4), its (2t+8, 2t+9) the stage's (t+8, t+12). So
		// A's pairs pack ldmatrix's words of chunks c and c+1 (and c+2,
		// c+3), B's the words of rows k+t, k+t+4 (k+t+8, k+t+12), each
		// rounded to bf16 by the packing cvt.rn.bf16x2.f32 (hi, lo).
		pack := func(hi, lo string) string {
			r := l.reg("r")
			emit(w, "cvt.rn.bf16x2.f32 %s, %s, %s", r, hi, lo)
			return r
		}
		for kk := 0; kk < p.k; kk += 16 {
			a := make([][4]string, mt)
			for i := range a {
				x, y := ldA(i, kk/4), ldA(i, kk/4+2)
				a[i] = [4]string{pack(x[2], x[0]), pack(x[3], x[1]), pack(y[2], y[0]), pack(y[3], y[1])}
			}
			bf := make([][2]string, nt)
			for j := range bf {
				x, y := ldB(j, kk), ldB(j, kk+8)
				bf[j] = [2]string{pack(x[1], x[0]), pack(y[1], y[0])}
			}
			for i := 0; i < mt; i++ {
				for j := 0; j < nt; j++ {
					mma("m16n8k16.row.col.f32.bf16.bf16.f32", p.accRegs(acc, i, j), a[i], bf[j])
				}
			}
		}
		return
	}
	round := func(x string) { l.roundTF32(w, "", x, x) } // B's words
	for kk := 0; kk < p.k; kk += 8 {
		a := make([][4]string, mt)
		for i := range a {
			a[i] = ldA(i, kk/4)
		}
		bf := make([][2]string, nt)
		for j := range bf {
			bf[j] = ldB(j, kk)
		}
		if p.dot.Prec == tile.PrecTF32x3 {
			// 3xTF32: hi = tf32(x), lo = tf32(x − hi); the small products first
			hiLo := func(x string) (string, string) {
				hi, lo := l.reg("r"), l.reg("r")
				l.roundTF32(w, "", hi, x)
				emit(w, "sub.f32 %s, %s, %s", lo, x, hi)
				l.roundTF32(w, "", lo, lo)
				return hi, lo
			}
			ah, al := make([][4]string, mt), make([][4]string, mt)
			for i := range a {
				for r := range a[i] {
					ah[i][r], al[i][r] = hiLo(a[i][r])
				}
			}
			bh, bl := make([][2]string, nt), make([][2]string, nt)
			for j := range bf {
				for h := range bf[j] {
					bh[j][h], bl[j][h] = hiLo(bf[j][h])
				}
			}
			for i := 0; i < mt; i++ {
				for j := 0; j < nt; j++ {
					c := p.accRegs(acc, i, j)
					mma(tf32, c, al[i], bh[j])
					mma(tf32, c, ah[i], bl[j])
					mma(tf32, c, ah[i], bh[j])
				}
			}
			continue
		}
		for i := range a {
			for j := range a[i] {
				emitTruncTF32(w, "", a[i][j], a[i][j])
			}
		}
		for j := range bf {
			for h := range bf[j] {
				round(bf[j][h])
			}
		}
		for i := 0; i < mt; i++ {
			for j := 0; j < nt; j++ {
				mma(tf32, p.accRegs(acc, i, j), a[i], bf[j])
			}
		}
	}
}

// ldATransposed loads mma.sync's A fragment of m16 tile i of the warp and
// the 8 k from chunk cs (k = 4·cs) from A's tile stored [k][m] (p.aT):
// lane (g, t) reads rows k+t and k+t+4 of columns m+g and m+g+8, one
// ld.shared.b32 each, from bases kept per stage in l.stageBase.
func (l *lowerer) ldATransposed(p *pipe, i, cs int, stage string) [4]string {
	b, lane := p.acc, l.laneID()
	row := l.shiftAnd("mma|t", lane, 0, 3)
	col := l.geo("mma|atcol|"+b.key(), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, 2", r, lane)
		emit(w, "mad.lo.s32 %s, %s, %d, %s", r, l.warpAlong(b, 0), b.warpTile(0), r)
		return r
	})
	chunk := l.shiftAnd("mma|atchunk|"+b.key(), col, 2, (1<<30)-1)
	in := l.shiftAnd("mma|atin|"+b.key(), col, 0, 3)
	k := 4 * cs
	var out [4]string
	for q, rc := range [4][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}} { // (k+4·rc[0], m+8·rc[1])
		res := 4*i + 2*rc[1] // the column's chunk within the warp tile
		base := l.stageBase(fmt.Sprintf("at|%d", res%8), stage, l.swizzledBase(p.a, row, chunk, in, res%8))
		out[q] = l.reg("r")
		emit(&l.body, "ld.shared.b32 %s, [%s+%d]", out[q], base, (k+4*rc[0])*p.a.rowBytes()+128*(res/8))
	}
	return out
}

// ldBTransposed loads mma.sync's B fragment of n8 tile j of the warp at k
// from B's tile stored [n][k] (p.bT): lane (g, t) reads columns k+t and
// k+t+4 of row n+g.
func (l *lowerer) ldBTransposed(p *pipe, j, k int, stage string) [2]string {
	b, lane := p.acc, l.laneID()
	t := l.shiftAnd("mma|t", lane, 0, 3)
	row := l.geo("mma|btrow|"+b.key(), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, 2", r, lane)
		emit(w, "mad.lo.s32 %s, %s, %d, %s", r, l.warpAlong(b, 1), b.warpTile(1), r)
		return r
	})
	var out [2]string
	for h := range out {
		cs := k/4 + h
		base := l.stageBase(fmt.Sprintf("bt|%d", cs%8), stage, l.swizzledBase(p.b, row, l.zeroReg(), t, cs%8))
		out[h] = l.reg("r")
		emit(&l.body, "ld.shared.b32 %s, [%s+%d]", out[h], base, 8*j*p.b.rowBytes()+128*(cs/8))
	}
	return out
}

// stageBase is base + stage, emitted once per key within one step of a
// pipelined loop (newStep clears the memo: the stage register's value
// changes between steps).
func (l *lowerer) stageBase(key, stage, base string) string {
	if l.stageMemo == nil || l.stageMemoReg != stage {
		l.stageMemo, l.stageMemoReg = map[string]string{}, stage
	}
	if r, ok := l.stageMemo[key]; ok {
		return r
	}
	r := l.reg("r")
	emit(&l.body, "add.s32 %s, %s, %s", r, base, stage)
	l.stageMemo[key] = r
	return r
}

// newStep starts a step of a pipelined loop: no fragment base of an
// earlier step is reused.
func (l *lowerer) newStep() { l.stageMemo = nil }

// zeroReg is a prologue register holding 0.
func (l *lowerer) zeroReg() string {
	return l.geo("zero", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "mov.u32 %s, 0", r)
		return r
	})
}
