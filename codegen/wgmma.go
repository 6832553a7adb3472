package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Hopper's warpgroup MMA for pipelined TF32 K loops (sm_90a).
//
// Each warpgroup (4 consecutive warps) computes 64 rows of the tile with
// wgmma.mma_async.m64nNk8 (N the tile's width, up to 256): A from
// registers, each warp's 16 rows loaded by ldmatrix from the stage and
// truncated to TF32 (and.b32: a TF32 dot's A), B from shared memory
// through a matrix descriptor. TF32 wgmma reads only K-major
// operands, and a product x·W has W N-major, so each stage's B (copied
// N-major by cp.async) is transposed into a K-major tile (bt: N rows of 32
// words) with the 128-byte swizzle, rounded on the way (a TF32 dot's B:
// cvt.rn), fenced for the
// async proxy (fence.proxy.async) and a barrier. The accumulator is the mma
// layout with one warp per 16 rows: wgmma's fragment is mma.sync's m16n8 C
// fragment, tiled across N (d[4j..4j+3] = c0..c3 of n8 block j).

// wgmmaDesc is a matrix descriptor of a K-major operand with the 128-byte
// swizzle but its start address (bits 0-13, as bytes >> 4), as CUTLASS
// makes it (cute make_gmma_desc): leading byte offset 1 (unused by swizzled
// K-major layouts) in bits 16-29, stride byte offset 1024 (8 rows of 128
// bytes) in bits 32-45 (as bytes >> 4), base offset 0 (the tile is
// 1024-aligned), swizzle mode 1 (128 bytes) in bits 62-63.
const wgmmaDesc = 1<<16 | (1024>>4)<<32 | 1<<62

// wgmmaStep emits the tensor-core work of one pipeline stage at byte
// offset stage (a register): the transposition of B into the bt at byte
// offset bsel (while the previous iteration's wgmmas read the other), then,
// once those are done, for each k step of 8 the A fragments and one wgmma
// per warpgroup, committed as one group and left running: the next
// iteration's copies and transposition overlap them.
func (l *lowerer) wgmmaStep(p *pipe, stage, bsel string, acc *lval) {
	w := &l.body
	lane := l.laneID()
	nw := l.opt.NumWarps
	// 1. B (k×n, N-major, rows swizzled chunk ^ k%8) → bt (n×k, K-major,
	// 128-byte swizzle), rounded: lane k reads 4 columns n of its row with
	// one 16-byte load and writes them to rows n of bt, column k
	// (conflict-free both ways: the 8 lanes of a read phase hit 8 chunks,
	// a write's 32 lanes 32 banks)
	// B's rows are swizzled chunk ^ (k % MaxPhase) (PerPhase 1, Mul 1)
	kph := l.shiftAnd(fmt.Sprintf("wg|k%%%d", p.b.Swz.MaxPhase), lane, 0, p.b.Swz.MaxPhase-1)
	lq := l.shiftAnd("wg|k/4", lane, 2, 7)
	// bt row 0, column k: smem + bt.Off + 4·(k%4); the chunk is added per row
	wbase := l.geo(fmt.Sprintf("wg|wr|%v", p.bt), func(w *strings.Builder) string {
		a := l.reg("r")
		emit(w, "and.b32 %s, %s, 3", a, lane)
		emit(w, "mad.lo.s32 %s, %s, 4, %s", a, a, l.smemAddr())
		emit(w, "add.s32 %s, %s, %d", a, a, p.bt.Off)
		return a
	})
	rbase := l.rowBase(p, lane, stage)
	warp := l.warpID()
	chunks := p.n / 4
	for it := 0; it*nw < chunks; it++ {
		// chunk c = warp + it·nw of row k: columns n = 4c..4c+3
		c := l.reg("r")
		emit(w, "add.s32 %s, %s, %d", c, warp, it*nw)
		skip := ""
		if (it+1)*nw > chunks {
			q := l.reg("p")
			skip = l.label("wg_tr")
			emit(w, "setp.ge.s32 %s, %s, %d", q, c, chunks)
			emit(w, "@%s bra %s", q, skip)
		}
		// read at rbase + 16·((c%8) ^ phase(k)) + 128·(c/8)
		src, hi := l.reg("r"), l.reg("r")
		emit(w, "and.b32 %s, %s, 7", src, c)
		emit(w, "xor.b32 %s, %s, %s", src, src, kph)
		emit(w, "mad.lo.s32 %s, %s, 16, %s", src, src, rbase)
		emit(w, "shr.u32 %s, %s, 3", hi, c)
		emit(w, "mad.lo.s32 %s, %s, 128, %s", src, hi, src)
		v := [4]string{l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")}
		emit(w, "ld.shared.v4.b32 {%s, %s, %s, %s}, [%s]", v[0], v[1], v[2], v[3], src)
		// write row n = 4c+e: wbase + 128·n + 16·((k/4) ^ (n%8)), n%8 = 4(c%2) + e
		row, par := l.reg("r"), l.reg("r")
		emit(w, "mad.lo.s32 %s, %s, %d, %s", row, c, 4*p.bt.rowBytes(), wbase)
		emit(w, "add.s32 %s, %s, %s", row, row, bsel)
		emit(w, "and.b32 %s, %s, 1", par, c)
		emit(w, "shl.b32 %s, %s, 2", par, par)
		emit(w, "xor.b32 %s, %s, %s", par, par, lq)
		for e := 0; e < 4; e++ {
			l.roundTF32(w, "", v[e], v[e])
			ch, a := l.reg("r"), l.reg("r")
			emit(w, "xor.b32 %s, %s, %d", ch, par, e)
			emit(w, "mad.lo.s32 %s, %s, 16, %s", a, ch, row)
			emit(w, "st.shared.b32 [%s+%d], %s", a, e*p.bt.rowBytes(), v[e])
		}
		if skip != "" {
			w.WriteString(skip + ":\n")
		}
	}
	emit(w, "fence.proxy.async.shared::cta")
	l.barrier(w)
	// the previous iteration's wgmmas have read their A (registers about to
	// be loaded again) and their bt (the next iteration's to write)
	emit(w, "wgmma.wait_group.sync.aligned 0")
	// 2. A fragments of every k step: ldmatrix.x4 from the stage, truncated
	aRow, aChunk := l.aFragGeometry(p)
	aAddr := map[int]string{}
	var frags [][4]string
	for kk := 0; kk < p.k; kk += 8 {
		cs := kk / 4
		base, ok := aAddr[cs%8]
		if !ok {
			base = l.reg("r")
			emit(w, "add.s32 %s, %s, %s", base, l.swizzledBase(p.a, aRow, aChunk, "", cs%8), stage)
			aAddr[cs%8] = base
		}
		a := [4]string{l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")}
		emit(w, "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%s, %s, %s, %s}, [%s+%d]", a[0], a[1], a[2], a[3], base, 128*(cs/8))
		for j := range a {
			emitTruncTF32(w, "", a[j], a[j])
		}
		frags = append(frags, a)
	}
	// 3. the wgmmas: B's descriptor advances 32 bytes (8 words of K) a step
	// this iteration's bt: the descriptor's start address moves bsel bytes
	d, cur, scaleD := l.wgmmaIssueStart(w, "wg", p.bt, wgmmaDesc, acc, p, p.n/8, bsel)
	for i, a := range frags {
		di := cur
		if i > 0 {
			di = l.reg("rd")
			emit(w, "add.s64 %s, %s, %d", di, cur, 2*i) // 32 bytes >> 4
		}
		emit(w, "wgmma.mma_async.sync.aligned.m64n%dk8.f32.tf32.tf32 %s, {%s, %s, %s, %s}, %s, %s, 1, 1", p.n, d, a[0], a[1], a[2], a[3], di, scaleD)
	}
	emit(w, "wgmma.commit_group.sync.aligned")
}

// rowBase is the prologue register smem + B.Off + lane·rowBytes, plus the
// stage offset, added once per stage (the transposing read's row k = lane).
func (l *lowerer) rowBase(p *pipe, lane, stage string) string {
	base := l.geo(fmt.Sprintf("wg|row|%v", p.b), func(w *strings.Builder) string {
		a := l.reg("r")
		emit(w, "mad.lo.s32 %s, %s, %d, %s", a, lane, p.b.rowBytes(), l.smemAddr())
		if p.b.Off != 0 {
			emit(w, "add.s32 %s, %s, %d", a, a, p.b.Off)
		}
		return a
	})
	r := l.reg("r")
	emit(&l.body, "add.s32 %s, %s, %s", r, base, stage)
	return r
}

// wgmmaSwappedStep emits the tensor-core work of one stage of a swapped
// loop (pipe.swapped) at byte offset stage (a register): for each k step
// of 8, the warp's fragment of Bᵀ (wgmma's A: rows n = 16·warp + g and
// g + 8, columns k + t and k + t + 4, read from B's k×n tile, rounded to
// TF32 (a TF32 dot's B; its A, wgmma's B, is read as it landed: the tensor
// cores truncate it)), then, after wgmma.fence, one wgmma per k step over the stage's A
// tile (wgmma's B, K-major, read by descriptor); committed and left
// running, the previous iteration's wgmmas retired (wait_group 1), so that
// the tensor cores always have the next group queued. Called for two
// iterations in turn, the fragments of each are registers of its own.
// 3xTF32 splits the fragments into high and low parts and runs three
// wgmmas a k step (B's high part with A's low, B's low with A's high, then
// the high parts) into the block accumulator blk, starting from zero.
//
// bf16 runs m64nMk16: the fragment's pairs (k+2t, k+2t+1) of B packed and
// rounded by cvt.rn.bf16x2, wgmma's B the stage's bf16 tile (64-byte
// swizzle).
//
// Where tail is not nil (K a constant no multiple of BLOCK_K: the last
// iteration's stage is zero past K), the last iteration runs only the k
// steps of 8 that start before K (a uniform branch between two whole
// fence … commit sequences), so that K = 33 runs one k step in its
// second iteration, not 4.
func (l *lowerer) wgmmaSwappedStep(p *pipe, stage string, acc *lval, blk []string, tail *kTail) {
	if p.bf16() {
		l.wgmmaSwappedBF16(p, stage, acc)
		return
	}
	var full *fragGuard
	if tail != nil && l.skipsTailCopies(p) {
		// the last iteration's stage holds nothing past its tail.steps
		// k steps (tailCopyLimit): their fragments are loaded only where
		// the iteration is not the last (the predicate swappedIssue's
		// branch takes too)
		t := *tail
		t.last = l.tailLast(p, tail)
		tail = &t
		full = &fragGuard{pred: "!" + t.last, steps: t.steps}
	}
	l.swappedIssue(p, stage, acc, blk, tail, l.swappedFrags(p, stage, nil, full), true)
	emit(&l.body, "wgmma.wait_group.sync.aligned 1")
}

// fragGuard: swappedFrags loads the fragments of the k steps from steps on
// only where pred holds.
type fragGuard struct {
	pred  string
	steps int
}

// swFrags are a swapped step's fragments of Bᵀ, a k step of 8 each (wgmma's
// A operand, four registers): hi, rounded to TF32 (3xTF32's high parts),
// and lo, 3xTF32's low parts (nil otherwise). With wg_ss the hi entries
// hold B's descriptors instead (set by swappedIssue).
type swFrags struct{ hi, lo [][4]string }

// swappedFrags loads and converts this warp's fragments of Bᵀ from the
// stage at byte offset stage (a register): rows n = 16·warp + g and g + 8,
// columns k + t and k + t + 4 of B's k×n tile (or ldmatrix of B stored
// [n][k]). into, if not nil, names the registers to write (a set carried
// around a loop); otherwise they are new.
func (l *lowerer) swappedFrags(p *pipe, stage string, into *swFrags, guard *fragGuard) *swFrags {
	w := &l.body
	l.newStep()
	lane := l.laneID()
	bRow := l.shiftAnd("mma|t", lane, 0, 3)
	bCol := l.geo("wgs|bcol", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, 2", r, lane)
		emit(w, "mad.lo.s32 %s, %s, 16, %s", r, l.warpID(), r)
		return r
	})
	bChunk := l.shiftAnd("wgs|bchunk", bCol, 2, (1<<30)-1)
	bIn := l.shiftAnd("wgs|bin", bCol, 0, 3)
	addr := map[int]string{}
	ld := func(k, cs int) string {
		base, ok := addr[cs%8]
		if !ok {
			base = l.reg("r")
			rel := ""
			switch {
			case p.tmaB != nil:
				rel = l.tmaBFragBase(p, bRow, bCol, cs)
			case p.rb != nil:
				rel = l.realignedFragBase(p, bRow, bCol, cs%8)
			default:
				rel = l.swizzledBase(p.b, bRow, bChunk, bIn, cs%8)
			}
			emit(w, "add.s32 %s, %s, %s", base, rel, stage)
			addr[cs%8] = base
		}
		r, g := l.reg("r"), ""
		if guard != nil && k/8 >= guard.steps {
			g = guardOf(guard.pred)
		}
		imm := k*p.b.rowBytes() + 128*(cs/8)
		if p.tmaB != nil {
			imm = 256 * k // two 128-byte lines a row of k (tmaBFragBase)
		}
		emit(w, "%sld.shared.b32 %s, [%s+%d]", g, r, base, imm)
		return r
	}
	f := &swFrags{}
	if p.ss {
		f.hi = make([][4]string, p.k/8) // B's descriptors, a k step each (swappedIssue)
		return f
	}
	for kk := 0; kk < p.k; kk += 8 {
		i := kk / 8
		// a0..a3 at (g, t) (g+8, t) (g, t+4) (g+8, t+4): B's (k+t, n) ...
		var a [4]string
		if p.bT {
			// ... of B's tile stored [n][k]: ldmatrix.x4, as mma.sync's A
			a = l.ldmatrixT(p, kk/4, stage)
		} else {
			a = [4]string{ld(kk, 0), ld(kk, 2), ld(kk+4, 0), ld(kk+4, 2)}
		}
		if p.x3() {
			var hi, lo [4]string
			for j, x := range a {
				if into != nil {
					hi[j], lo[j] = into.hi[i][j], into.lo[i][j]
				} else {
					hi[j], lo[j] = l.reg("r"), l.reg("r")
				}
				l.roundTF32(w, "", hi[j], x)
				emit(w, "sub.f32 %s, %s, %s", lo[j], x, hi[j])
				l.roundTF32(w, "", lo[j], lo[j])
			}
			f.hi, f.lo = append(f.hi, hi), append(f.lo, lo)
			continue
		}
		for j, r := range a {
			if into != nil {
				l.roundTF32(w, "", into.hi[i][j], r)
				a[j] = into.hi[i][j]
				continue
			}
			l.roundTF32(w, "", r, r)
		}
		f.hi = append(f.hi, a)
	}
	return f
}

// swappedIssue emits a swapped step's wgmmas over the stage at byte offset
// stage with fragments f (swappedFrags): after wgmma.fence, the k steps'
// wgmmas (3xTF32: three each, into blk, from zero where fresh, else onto
// what blk holds), committed as one group and left running.
func (l *lowerer) swappedIssue(p *pipe, stage string, acc *lval, blk []string, tail *kTail, f *swFrags, fresh bool) {
	w := &l.body
	l.newStep()
	frags, lows := f.hi, f.lo
	// wgmma's B: the stage's A tile, K-major with the 128-byte swizzle; the
	// descriptor's start moves by the stage's offset, then 32 bytes a k step
	at := p.a
	if p.staged {
		at = p.ak
	}
	desc := l.wgmmaDescriptor("wgs", at, wgmmaDesc)
	scaleD := l.wgmmaScaleD()
	dregs := blk
	if dregs == nil {
		for j := 0; j < p.m/8; j++ {
			c := p.accRegs(acc, 0, j)
			dregs = append(dregs, c[:]...)
		}
	}
	d := "{" + strings.Join(dregs, ", ") + "}"
	cur := l.movedDesc(w, desc, stage)
	emit(w, "wgmma.fence.sync.aligned")
	mma := func(a [4]string, desc, scale string) {
		emit(w, "wgmma.mma_async.sync.aligned.m64n%dk8.f32.tf32.tf32 %s, {%s, %s, %s, %s}, %s, %s, 1, 1", p.m, d, a[0], a[1], a[2], a[3], desc, scale)
	}
	if p.ss {
		// wgmma's A: the warpgroup's 64 rows n of B's K-major tile in the
		// stage, 32 bytes a k step, as wgmma's B
		base := l.geo("wgs|bdesc", func(w *strings.Builder) string {
			wg, off := l.reg("r"), l.reg("rd")
			emit(w, "shr.u32 %s, %s, 2", wg, l.warpID())
			emit(w, "mul.lo.u32 %s, %s, %d", wg, wg, 64*p.b.rowBytes()>>4)
			emit(w, "cvt.u64.u32 %s, %s", off, wg)
			emit(w, "add.s64 %s, %s, %s", off, off, l.wgmmaDescriptor("wgsb", p.b, wgmmaDesc))
			return off
		})
		bcur := l.reg("rd")
		emit(w, "add.s64 %s, %s, %s", bcur, base, cur)
		emit(w, "sub.s64 %s, %s, %s", bcur, bcur, desc) // base + the stage's offset
		for i := range frags {
			frags[i][0] = bcur
			if i > 0 {
				frags[i][0] = l.reg("rd")
				emit(w, "add.s64 %s, %s, %d", frags[i][0], bcur, 2*i)
			}
		}
		mma = func(a [4]string, desc, scale string) {
			emit(w, "wgmma.mma_async.sync.aligned.m64n%dk8.f32.tf32.tf32 %s, %s, %s, %s, 1, 1", p.m, d, a[0], desc, scale)
		}
	}
	// the k steps' descriptors (32 bytes a step, >> 4) and 3xTF32's low tile
	descs, dlos := make([]string, len(frags)), make([]string, len(frags))
	for i := range frags {
		descs[i] = cur
		if i > 0 {
			descs[i] = l.reg("rd")
			emit(w, "add.s64 %s, %s, %d", descs[i], cur, 2*i)
		}
		if p.x3() {
			dlos[i] = l.reg("rd")
			emit(w, "add.s64 %s, %s, %d", dlos[i], descs[i], (p.alo.Off-at.Off)>>4)
		}
	}
	steps := func(n int) {
		for i, a := range frags[:n] {
			if !p.x3() {
				mma(a, descs[i], scaleD)
				continue
			}
			first := scaleD
			if i == 0 && fresh {
				first = l.geo("wg|zero_d", func(w *strings.Builder) string {
					q := l.reg("p")
					emit(w, "setp.ne.u32 %s, 1, 1", q)
					return q
				})
			}
			mma(a, dlos[i], first)         // B's high part, A's low
			mma(lows[i], descs[i], scaleD) // B's low part, A's high
			mma(a, descs[i], scaleD)       // the high parts
		}
		emit(w, "wgmma.commit_group.sync.aligned")
	}
	if tail == nil || tail.steps >= len(frags) {
		steps(len(frags))
	} else {
		// the last iteration, partial: its first tail.steps k steps only,
		// each path a whole fence … commit sequence
		last := tail.last
		if last == "" {
			last = l.tailLast(p, tail)
		}
		short, join := l.label("wg_ktail"), l.label("wg_kjoin")
		emit(w, "@%s bra.uni %s", last, short)
		steps(len(frags))
		emit(w, "bra.uni %s", join)
		w.WriteString(short + ":\n")
		steps(tail.steps)
		w.WriteString(join + ":\n")
	}
}

// kTail is what wgmmaSwappedStep needs to skip the k steps of a last
// iteration past K: the iteration's induction variable iv (a register of
// class class, PTX integer type ptx), K, the loop's bound hi, and the k
// steps of 8 the last iteration runs.
type kTail struct {
	iv, hi, ptx, class string
	steps              int
	last               string // tailLast's predicate where computed already, else ""
}

// tailLast emits the predicate that the iteration at tail.iv is the last
// (its k + BLOCK_K past K).
func (l *lowerer) tailLast(p *pipe, tail *kTail) string {
	k, last := l.reg(tail.class), l.reg("p")
	emit(&l.body, "add.%s %s, %s, %d", tail.ptx, k, tail.iv, p.k)
	emit(&l.body, "setp.gt.%s %s, %s, %s", tail.ptx, last, k, tail.hi)
	return last
}

// swappedTail is the kTail of swapped loop v (induction variable iv, bound
// hi, of PTX integer type ptx) with the meta-parameter k_tail = 1 (with the
// last iteration's copies past its steps left out, tailCopyLimit, the
// store-bound products' default: graphpass storeBoundMeta, measured on the
// H200) where its bounds and step are constants,
// the step BLOCK_K, and K no multiple of it: a last iteration whose stage
// holds fewer than BLOCK_K rows of k (the copies past K fill zeros). Nil
// otherwise, and for bf16 (k steps of 16).
func (l *lowerer) swappedTail(v *tile.Value, p *pipe, iv, hi, ptx string) *kTail {
	lo, up, st := v.Args[0], v.Args[1], v.Args[2]
	if l.k.Meta["k_tail"] != 1 || p.bf16() || lo.Op != tile.OpConst || up.Op != tile.OpConst || st.Op != tile.OpConst || st.Aux != int64(p.k) ||
		(up.Aux-lo.Aux)%st.Aux == 0 {
		return nil
	}
	rem := int((up.Aux - lo.Aux) % st.Aux)
	return &kTail{iv: iv, hi: hi, ptx: ptx, class: regClass(v.Args[0].Type), steps: (rem + 7) / 8}
}

// wgmmaSwappedBF16 is wgmmaSwappedStep for bf16.
func (l *lowerer) wgmmaSwappedBF16(p *pipe, stage string, acc *lval) {
	w := &l.body
	if p.bss {
		l.wgmmaSwappedBF16Smem(p, stage, acc)
		return
	}
	var frags [][4]string
	if p.bT {
		frags = l.bf16PairFrags(p, stage)
	} else {
		frags = l.bf16Frags(p, stage)
	}
	// the bf16 tile is the stage's: the descriptor moves by the stage
	d, cur, scaleD := l.wgmmaIssueStart(w, "wgs", p.abf, wgmmaDesc64, acc, p, p.m/8, stage)
	for i, a := range frags {
		// 32 bytes (16 k) a step, in 16-byte units
		di := l.reg("rd")
		emit(w, "add.s64 %s, %s, %d", di, cur, (32*i)>>4)
		emit(w, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 %s, {%s, %s, %s, %s}, %s, %s, 1, 1, 0", p.m, d, a[0], a[1], a[2], a[3], di, scaleD)
	}
	emit(w, "wgmma.commit_group.sync.aligned")
	emit(w, "wgmma.wait_group.sync.aligned 1")
}

// bf16PairFrags loads this warp's bf16 fragments of Bᵀ, B stored [n][k]
// (p.bT), from the stage at byte offset stage: for each k step of 16,
// a0..a3 at rows n = 16·warp + g and g + 8, column pairs (k+2t, k+2t+1)
// and (k+2t+8, k+2t+9), each pair one ld.shared.v2 and one cvt.rn.bf16x2
// (the swizzle, bf16PairGroups', keeps the loads conflict-free).
func (l *lowerer) bf16PairFrags(p *pipe, stage string) [][4]string {
	w := &l.body
	lane := l.laneID()
	row := l.geo("wgs|tn|row", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, 2", r, lane)
		emit(w, "mad.lo.s32 %s, %s, 16, %s", r, l.warpID(), r)
		return r
	})
	chunk := l.shiftAnd("wgs|tn|chunk", lane, 1, 1) // t/2
	in := l.geo("wgs|tn|in", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "and.b32 %s, %s, 1", r, lane)
		emit(w, "shl.b32 %s, %s, 1", r, r) // 2·(t%2)
		return r
	})
	addr := map[int]string{}
	var frags [][4]string
	for kk := 0; kk < p.k; kk += 16 {
		var a [4]string
		for i := range a {
			cs := (kk + 8*(i/2)) / 4 // the pair's chunk less t/2
			base, ok := addr[cs%8]
			if !ok {
				base = l.reg("r")
				emit(w, "add.s32 %s, %s, %s", base, l.swizzledBase(p.b, row, chunk, in, cs%8), stage)
				addr[cs%8] = base
			}
			lo, hi, r := l.reg("r"), l.reg("r"), l.reg("r")
			// rows g + 8 keep g's phase (the swizzle's period divides 8)
			emit(w, "ld.shared.v2.b32 {%s, %s}, [%s+%d]", lo, hi, base, 8*(i%2)*p.b.rowBytes()+128*(cs/8))
			emit(w, "cvt.rn.bf16x2.f32 %s, %s, %s", r, hi, lo)
			a[i] = r
		}
		frags = append(frags, a)
	}
	return frags
}

// bf16Frags loads this warp's bf16 fragments of Bᵀ, B stored [k][n], from
// the stage at byte offset stage: for each k step of 16, a0..a3 at columns
// n = 16·warp + g and g + 8, row pairs (k+2t, k+2t+1) and (k+2t+8,
// k+2t+9), each element one ld.shared.b32, each pair one cvt.rn.bf16x2.
func (l *lowerer) bf16Frags(p *pipe, stage string) [][4]string {
	w := &l.body
	lane := l.laneID()
	// rows 2t and 2t+1 of B, each with a base of its own (their phases differ)
	rows := [2]string{
		l.geo("wgs|2t", func(w *strings.Builder) string {
			r := l.reg("r")
			emit(w, "and.b32 %s, %s, 3", r, lane)
			emit(w, "shl.b32 %s, %s, 1", r, r)
			return r
		}),
	}
	rows[1] = l.geo("wgs|2t+1", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "add.s32 %s, %s, 1", r, rows[0])
		return r
	})
	bCol := l.geo("wgs|bcol", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, 2", r, lane)
		emit(w, "mad.lo.s32 %s, %s, 16, %s", r, l.warpID(), r)
		return r
	})
	bChunk := l.shiftAnd("wgs|bchunk", bCol, 2, (1<<30)-1)
	bIn := l.shiftAnd("wgs|bin", bCol, 0, 3)
	addr := map[[2]int]string{}
	ld := func(h, k, cs int) string {
		key := [2]int{h, cs % 8}
		base, ok := addr[key]
		if !ok {
			base = l.reg("r")
			rel := ""
			if p.tmaB != nil {
				rel = l.tmaBF16FragBase(p, rows[h], bCol, cs)
			} else {
				rel = l.swizzledBase(p.b, rows[h], bChunk, bIn, cs%8)
			}
			emit(w, "add.s32 %s, %s, %s", base, rel, stage)
			addr[key] = base
		}
		r := l.reg("r")
		imm := k*p.b.rowBytes() + 128*(cs/8)
		if p.tmaB != nil {
			imm = 128 * k // a 128-byte line a row of a group (tmaBF16Offset); k a multiple of 8 keeps the phase
		}
		emit(w, "ld.shared.b32 %s, [%s+%d]", r, base, imm)
		return r
	}
	pack := func(lo, hi string) string {
		r := l.reg("r")
		emit(w, "cvt.rn.bf16x2.f32 %s, %s, %s", r, hi, lo)
		return r
	}
	var frags [][4]string
	for kk := 0; kk < p.k; kk += 16 {
		// a0..a3: rows g, g+8 (columns n of C), k pairs (2t, 2t+1) and
		// (2t+8, 2t+9)
		var a [4]string
		for i := range a {
			k, cs := kk+8*(i/2), 2*(i%2)
			a[i] = pack(ld(0, k, cs), ld(1, k, cs))
		}
		frags = append(frags, a)
	}
	return frags
}

// accOperand is a wgmma's accumulator operand: the registers of the
// warp's m16n8 tiles (0, 0..tiles-1) of acc, in order, braced.
func (p *pipe) accOperand(acc *lval, tiles int) string {
	var regs []string
	for j := 0; j < tiles; j++ {
		c := p.accRegs(acc, 0, j)
		regs = append(regs, c[:]...)
	}
	return "{" + strings.Join(regs, ", ") + "}"
}

// wgmmaDescMN128 is a wgmma descriptor's bits for an MN-major operand with
// the 128-byte swizzle (swizzle mode 1) whose atoms of 8 k (8 rows of 128
// bytes) are 1024 bytes apart: the stride along K is the SBO of CUTLASS's
// canonical layout; the LBO, the stride past 64 elements along M, is never
// used by an m64 operand of 16-bit elements (one atom wide) and is set to
// the same 1024.
const wgmmaDescMN128 uint64 = (1024>>4)<<16 | (1024>>4)<<32 | 1<<62

// wgmmaSwappedBF16Smem is the bss form's step: the wgmmas read both
// operands from the stage through descriptors, Bᵀ (the A operand) MN-major
// from bbf, each warpgroup its 64 columns n, and A (the B operand) K-major
// from abf; imm-trans-a = 1.
func (l *lowerer) wgmmaSwappedBF16Smem(p *pipe, stage string, acc *lval) {
	w := &l.body
	descB := l.wgmmaDescriptor("wgs", p.abf, wgmmaDesc64)
	descA := l.geo(fmt.Sprintf("wgsb|desc|%v", p.bbf), func(w *strings.Builder) string {
		base := l.wgmmaDescriptor("wgsb0", p.bbf, wgmmaDescMN128)
		g, d := l.reg("r"), l.reg("rd")
		emit(w, "shr.u32 %s, %s, 2", g, l.warpID()) // the warpgroup
		emit(w, "mul.lo.u32 %s, %s, %d", g, g, p.k/8*1024>>4)
		emit(w, "cvt.u64.u32 %s, %s", d, g)
		emit(w, "add.s64 %s, %s, %s", d, d, base)
		return d
	})
	scaleD := l.wgmmaScaleD()
	d := p.accOperand(acc, p.m/8)
	sel, s64, curA, curB := l.reg("r"), l.reg("rd"), l.reg("rd"), l.reg("rd")
	emit(w, "shr.u32 %s, %s, 4", sel, stage)
	emit(w, "cvt.u64.u32 %s, %s", s64, sel)
	emit(w, "add.s64 %s, %s, %s", curA, s64, descA)
	emit(w, "add.s64 %s, %s, %s", curB, s64, descB)
	emit(w, "wgmma.fence.sync.aligned")
	for i := 0; i < p.k/16; i++ {
		// 16 k a step: two atoms of Bᵀ (2048 bytes), 32 bytes of A's rows
		da, db := l.reg("rd"), l.reg("rd")
		emit(w, "add.s64 %s, %s, %d", da, curA, (2048*i)>>4)
		emit(w, "add.s64 %s, %s, %d", db, curB, (32*i)>>4)
		emit(w, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 %s, %s, %s, %s, 1, 1, 1, 0", p.m, d, da, db, scaleD)
	}
	emit(w, "wgmma.commit_group.sync.aligned")
	emit(w, "wgmma.wait_group.sync.aligned 1")
}

// ldmatrixT loads, in the swapped form with B stored [n][k] (p.bT), the
// warp's 16 columns n and the 8 k from chunk cs as wgmma's A fragment:
// ldmatrix.x4 of rows n..n+15, as mma.sync's A fragments are loaded
// (aFragGeometry: the accumulator of Cᵀ has a warp per 16 rows n).
func (l *lowerer) ldmatrixT(p *pipe, cs int, stage string) [4]string {
	row, chunk := l.aFragGeometry(p)
	base := l.stageBase(fmt.Sprintf("ldmt|%d", cs%8), stage, l.swizzledBase(p.b, row, chunk, "", cs%8))
	a := [4]string{l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")}
	emit(&l.body, "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%s, %s, %s, %s}, [%s+%d]", a[0], a[1], a[2], a[3], base, 128*(cs/8))
	return a
}

// wgmmaDescriptor is the matrix descriptor of shared tile t (computed once
// a kernel, under key's prefix): its start address in 16-byte units and
// the layout bits (wgmmaDesc, wgmmaDesc64).
func (l *lowerer) wgmmaDescriptor(key string, t smemTile, bits uint64) string {
	return l.geo(fmt.Sprintf("%s|desc|%v", key, t), func(w *strings.Builder) string {
		a := l.reg("r")
		emit(w, "add.s32 %s, %s, %d", a, l.smemAddr(), t.Off)
		emit(w, "shr.u32 %s, %s, 4", a, a)
		emit(w, "and.b32 %s, %s, %d", a, a, 0x3fff)
		d := l.reg("rd")
		emit(w, "cvt.u64.u32 %s, %s", d, a)
		emit(w, "or.b64 %s, %s, %d", d, d, bits)
		return d
	})
}

// wgmmaIssueStart begins a step's wgmmas whose descriptor operand is tile
// t (descriptor bits bits, prologue key key) moved off bytes (a register:
// the stage's or the buffer's offset): it returns the accumulator operand
// (the first tiles m16n8 tiles of acc), the moved descriptor and scale-d, after
// wgmma.fence.
func (l *lowerer) wgmmaIssueStart(w *strings.Builder, key string, t smemTile, bits uint64, acc *lval, p *pipe, tiles int, off string) (d, cur, scaleD string) {
	desc := l.wgmmaDescriptor(key, t, bits)
	scaleD = l.wgmmaScaleD()
	d = p.accOperand(acc, tiles)
	cur = l.movedDesc(w, desc, off)
	emit(w, "wgmma.fence.sync.aligned")
	return d, cur, scaleD
}

// movedDesc emits matrix descriptor desc moved off bytes (a register, a
// multiple of 16: the stage's or the buffer's offset) along its start
// address.
func (l *lowerer) movedDesc(w *strings.Builder, desc, off string) string {
	sel, cur := l.reg("r"), l.reg("rd")
	emit(w, "shr.u32 %s, %s, 4", sel, off)
	emit(w, "cvt.u64.u32 %s, %s", cur, sel)
	emit(w, "add.s64 %s, %s, %s", cur, cur, desc)
	return cur
}

// wgmmaScaleD is the predicate scale-d of a wgmma that adds into its
// accumulator (true), made once a kernel.
func (l *lowerer) wgmmaScaleD() string {
	return l.geo("wg|scale_d", func(w *strings.Builder) string {
		q := l.reg("p")
		emit(w, "setp.eq.u32 %s, 1, 1", q)
		return q
	})
}
