package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// MMA loops on Hopper's warpgroup MMA (meta-parameter wgmma = 1, sm_90a),
// FlashAttention-3's products in FlashAttention-2's loop:
//
//   - each warpgroup (4 consecutive warps) computes 64 rows of every dot
//     with wgmma.mma_async.m64nNk8 (TF32), so a dot's m is 16 rows a warp,
//     as in the mma.sync form: the accumulator fragment of a warp in
//     wgmma's m64nN is mma.sync's m16n8 fragment tiled across N (d[4j..4j+3]
//     = c0..c3 of n8 block j), and the A fragment from registers is
//     mma.sync's m16n8k8 A fragment (a0..a3 at (g, t) (g+8, t) (g, t+4)
//     (g+8, t+4)), so the accumulator layout, the k permutation and P's
//     hand-over from one product to the next are those of the mma.sync
//     form (mmaloop.go), unchanged;
//   - B comes from shared memory through a matrix descriptor: TF32 wgmma
//     reads only K-major operands, so each B tile is stored in the
//     canonical K-major layout (rows of n, k along a row, 128-byte rows
//     with the 128-byte swizzle, k beyond 32 words in further atoms of n
//     rows; 64- or 32-byte rows and swizzles for 16 or 8 words). A tile
//     whose k is its contiguous dimension in memory (K in Q·Kᵀ) is copied
//     straight into it by 16-byte cp.async; one whose n is (V in P·V) is
//     transposed by 4-byte cp.async, a warp's copies 8 n × 4 k (32-byte
//     sectors in memory, 32 banks in shared memory). Each thread rounds
//     its copies to TF32 in place once they land (as the mma.sync form
//     does: the tensor cores would truncate), fence.proxy.async makes them
//     visible to wgmma, and the iteration's one barrier follows;
//   - a dot writes its A fragments and accumulator registers (the product
//     with alpha for P·V; scale-d false for a zero accumulator) before
//     wgmma.fence, issues one wgmma per k step of 8, commits and waits for
//     the group (wait_group 0) before anything reads the result. The stage
//     read is rewritten only after every warp has passed a later
//     iteration's barrier, by which time its wgmmas have retired.

// wgmmaLoop reports whether MMA loop ml can run its dots as wgmma, and if
// so marks its tiles and plans their copies (see above): TF32 dots of 16
// rows a warp over whole warpgroups, N a multiple of 8 up to 256, each
// tile read with one k dimension, n rows a multiple of 8 and k of 8, 16 or
// a multiple of 32 words.
func (l *lowerer) wgmmaLoop(ml *mmaLoop) bool {
	nw := l.opt.NumWarps
	if nw%4 != 0 {
		return false
	}
	prec := ml.dots[0].v.Prec
	if prec != tile.PrecTF32 && prec != tile.PrecBF16 {
		return false
	}
	bf := prec == tile.PrecBF16
	kdim, perm := map[*opTile]int{}, map[*opTile]bool{}
	for _, d := range ml.dots {
		if d.v.Prec != prec || d.m != 16*nw || d.n%8 != 0 || d.n > 256 || d.k%d.kstep() != 0 {
			return false
		}
		k := 0 // B's k is dimension 0 of the load, or 1 of a transposed one
		if d.bTrans {
			k = 1
		}
		if prev, ok := kdim[d.b]; ok && (prev != k || perm[d.b] != !d.outside) {
			return false
		}
		kdim[d.b], perm[d.b] = k, !d.outside && !bf
	}
	for _, t := range ml.tiles {
		k, ok := kdim[t]
		if !ok {
			return false
		}
		sh := t.load.Type.Shape.Slice()
		n, kw := sh[1-k], sh[k]
		e := 4
		if bf {
			e = 2
		}
		if b := e * kw; n%8 != 0 || (b != 32 && b != 64 && b%128 != 0) { // rows of 32, 64 or 128 bytes
			return false
		}
	}
	if bf { // bf16 tiles beside the f32 copies, which are planned as for mma.sync
		for _, t := range ml.tiles {
			t.wg, t.wgK, t.wgBF = true, kdim[t], true
		}
		return true
	}
	for _, d := range ml.dots {
		if d.outside { // the true A fragment: (g, t) (g+8, t) (g, t+4) (g+8, t+4)
			d.plainK = true
			d.a = &Layout{B: l.intern(&Blocked{Shape: []int{d.m, d.k}, SPT: []int{1, 1}, TPW: []int{8, 4}, WRep: []int{2, d.k / 4}, WPC: []int{nw, 1}}), Src: []int{0, 1}}
		}
	}
	for _, t := range ml.tiles {
		t.wg, t.wgK, t.wgPerm = true, kdim[t], perm[t]
		if t.wgK == t.inner && !t.wgPerm {
			continue
		}
		// transposing copies: 4 bytes, lanes 8 along n (contiguous in
		// memory) × 4 along k, warps along k first
		sh := t.load.Type.Shape.Slice()
		b := &Blocked{Shape: append([]int(nil), sh...), SPT: []int{1, 1}, TPW: make([]int, 2), WPC: []int{1, 1}}
		b.TPW[t.inner], b.TPW[t.wgK] = 8, 4
		warps := nw
		for _, d := range []int{t.wgK, t.inner} {
			room := max(1, sh[d]/b.TPW[d])
			w := min(warps, room&-room)
			b.WPC[d] = w
			warps /= w
		}
		b.WPC[t.wgK] *= warps
		c := plain(l.intern(b))
		t.copy, t.vw = &c, 1
	}
	return true
}

// wgGeom is tile t's wgmma layout: n rows of row bytes holding k elements
// of e bytes each (kw of them in all, in kw·e/row atoms of n rows).
func (t *opTile) wgGeom() (n, kw, row, atom, e int) {
	sh := t.load.Type.Shape.Slice()
	n, kw, e = sh[1-t.wgK], sh[t.wgK], 4
	if t.wgBF {
		e = 2
	}
	row = min(128, e*kw)
	return n, kw, row, n * row, e
}

// wgBytes is the size of tile t's bf16 tile (wgBF).
func (t *opTile) wgBytes() int {
	n, kw, _, _, e := t.wgGeom()
	return n * kw * e
}

// wgSlot is the shared address, in stage 0 of the ring at region, of
// element (row, col) of wgmma tile t (coordinates of its load's first and
// second dimension): atom k/(row/4), row n, word k%(row/4), the swizzle
// XORing address bits [4, 4+log2(row/16)) with bits [7, ...) (atoms are
// 1024-aligned, so the tile's offsets are the absolute address's bits).
func (l *lowerer) wgSlot(w *strings.Builder, t *opTile, region int, row, col string) string {
	n, k := row, col
	if t.wgK == 0 {
		n, k = col, row
	}
	if t.wgPerm { // word k of 8 at position k/2 + 4·(k%2), as A's k
		p, q := l.reg("r"), l.reg("r")
		emit(w, "and.b32 %s, %s, -8", p, k)
		emit(w, "bfe.u32 %s, %s, 1, 2", q, k)
		emit(w, "or.b32 %s, %s, %s", p, p, q)
		q = l.reg("r")
		emit(w, "and.b32 %s, %s, 1", q, k)
		emit(w, "mad.lo.s32 %s, %s, 4, %s", p, q, p)
		k = p
	}
	_, _, rb, atom, e := t.wgGeom()
	kw := rb / e
	a := l.reg("r")
	emit(w, "mul.lo.s32 %s, %s, %d", a, n, rb)
	q := l.reg("r")
	emit(w, "shr.u32 %s, %s, %d", q, k, log2(kw))
	emit(w, "mad.lo.s32 %s, %s, %d, %s", a, q, atom, a)
	r := l.reg("r")
	emit(w, "and.b32 %s, %s, %d", r, k, kw-1)
	emit(w, "mad.lo.s32 %s, %s, %d, %s", a, r, e, a)
	sw := l.reg("r")
	emit(w, "shr.u32 %s, %s, 7", sw, a)
	emit(w, "and.b32 %s, %s, %d", sw, sw, rb/16-1)
	emit(w, "shl.b32 %s, %s, 4", sw, sw)
	emit(w, "xor.b32 %s, %s, %s", a, a, sw)
	emit(w, "add.s32 %s, %s, %s", a, a, l.baseAddr())
	emit(w, "add.s32 %s, %s, %d", a, a, region+t.wgOff)
	return a
}

// wgDesc is the matrix descriptor of wgmma tile t in stage 0 of the ring
// at region (a prologue register): its start address in 16-byte units,
// leading byte offset 1 (unused by swizzled K-major layouts), stride byte
// offset 8 rows, and the swizzle of its rows (128, 64 or 32 bytes: modes
// 1, 2, 3), as CUTLASS's make_gmma_desc makes it.
func (l *lowerer) wgDesc(t *opTile, region int) string {
	_, _, rb, _, _ := t.wgGeom()
	mode := map[int]uint64{128: 1, 64: 2, 32: 3}[rb]
	bits := uint64(1)<<16 | uint64(8*rb>>4)<<32 | mode<<62
	return l.geo(fmt.Sprintf("mmawg|desc|%d|%d|%d", region, t.wgOff, rb), func(w *strings.Builder) string {
		a := l.reg("r")
		emit(w, "add.s32 %s, %s, %d", a, l.baseAddr(), region+t.wgOff)
		emit(w, "shr.u32 %s, %s, 4", a, a)
		emit(w, "and.b32 %s, %s, %d", a, a, 0x3fff)
		d := l.reg("rd")
		emit(w, "cvt.u64.u32 %s, %s", d, a)
		emit(w, "or.b64 %s, %s, %d", d, d, bits)
		return d
	})
}

// wgmmaDotEmit emits dot d of a wgmma MMA loop, its B tile in the stage at
// byte offset stage (a register) of the ring at region: the A fragments
// and the accumulator's registers (a copy of the C operand, or nothing
// where it is zero: the first wgmma's scale-d is false), wgmma.fence, one
// wgmma.mma_async m64nNk8 per k step of 8, commit, and the wait that
// retires them before the result is read.
func (l *lowerer) wgmmaDotEmit(d *mmaDot, region, aRegion int, stage string) error {
	w := &l.body
	v := d.v
	c := plain(d.c)
	res := &lval{lay: &c, regs: make([]string, nslots(&c))}
	for i := range res.regs {
		res.regs[i] = l.reg("f")
	}
	zero := isZero(v.Args[2])
	if !zero {
		acc, err := l.demand(v.Args[2], &c)
		if err != nil {
			return err
		}
		for i, r := range res.regs {
			emit(w, "mov.f32 %s, %s", r, acc.regs[i])
		}
	}
	var frags [][]string
	ks8 := d.k / d.kstep() // k steps of 8 (tf32) or 16 (bf16)
	switch {
	case d.aTile != nil:
		for ks := 0; ks < ks8; ks++ {
			frags = append(frags, l.aTileFrag(d, aRegion, 0, ks))
		}
	case d.outside:
		frags = l.mma().frags[v.ID]
	default:
		x, err := l.demand(v.Args[0], d.a)
		if err != nil {
			return err
		}
		frags = l.aFrags(d, x)
	}
	var dregs []string
	for j := 0; j < d.n/8; j++ {
		for h := range 2 {
			for s := range 2 {
				dregs = append(dregs, res.regs[fragSlot(res.lay.B, h, j, s)])
			}
		}
	}
	dl := "{" + strings.Join(dregs, ", ") + "}"
	_, _, rb, atom, _ := d.b.wgGeom()
	sel, cur := l.reg("r"), l.reg("rd")
	emit(w, "shr.u32 %s, %s, 4", sel, stage)
	emit(w, "cvt.u64.u32 %s, %s", cur, sel)
	emit(w, "add.s64 %s, %s, %s", cur, cur, l.wgDesc(d.b, region))
	scaleD := l.wgmmaScaleD()
	emit(w, "wgmma.fence.sync.aligned")
	for ks := 0; ks < ks8; ks++ {
		// k step ks: 32 bytes into a row, rows of rb bytes in atoms
		off := (32*ks/rb)*atom + (32*ks)%rb
		di := cur
		if off != 0 {
			di = l.reg("rd")
			emit(w, "add.s64 %s, %s, %d", di, cur, off>>4)
		}
		scale := scaleD
		if zero && ks == 0 {
			scale = l.geo("wg|zero_d", func(w *strings.Builder) string {
				q := l.reg("p")
				emit(w, "setp.ne.u32 %s, 1, 1", q)
				return q
			})
		}
		a := frags[ks]
		if d.v.Prec == tile.PrecBF16 {
			emit(w, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 %s, {%s, %s, %s, %s}, %s, %s, 1, 1, 0", d.n, dl, a[0], a[1], a[2], a[3], di, scale)
			continue
		}
		emit(w, "wgmma.mma_async.sync.aligned.m64n%dk8.f32.tf32.tf32 %s, {%s, %s, %s, %s}, %s, %s, 1, 1", d.n, dl, a[0], a[1], a[2], a[3], di, scale)
	}
	emit(w, "wgmma.commit_group.sync.aligned")
	emit(w, "wgmma.wait_group.sync.aligned 0")
	l.remember(v, res)
	return nil
}

// convertTiles writes, for each bf16 wgmma tile of ml (opTile.wgBF), this
// thread's copies in the stage at byte offset sc, once they have landed
// (after its cp.async.wait_group, before the fence and the barrier),
// rounded to bf16 (cvt.rn.bf16x2: nearest even, as the interpreter) into
// the tile's K-major layout: a copy's elements consecutive along k as
// packed words (st.shared.b32 or .v2), consecutive along n as halves
// (st.shared.b16) at rows n+j, whose addresses are the first one's plus
// j rows with the swizzle's chunk bits flipped by ((j·row) >> 7) (the
// copy's first n is a multiple of its width, so no carry crosses them).
func (l *lowerer) convertTiles(ml *mmaLoop, region int, sc string) {
	w := &l.body
	for _, t := range ml.tiles {
		if !t.wgBF {
			continue
		}
		_, _, rb, _, _ := t.wgGeom()
		lay := t.copy
		slots := lay.B.slots()
		classes := l.classesOf(lay)
		for ci := 0; ci < len(classes); ci += t.vw {
			first := classes[ci][0]
			own, never := l.owner(lay, slots[first])
			if never {
				continue
			}
			g := guardOf(own)
			src := l.reg("r")
			emit(w, "add.s32 %s, %s, %s", src, sc, l.copySlot(t, region, lay, slots[first]))
			x := make([]string, t.vw)
			for j := range x {
				x[j] = l.reg("f")
			}
			emit(w, "%sld.shared%s.f32 %s, [%s]", g, vecSuffix(t.vw), vecOperand(x), src)
			dst := l.reg("r")
			emit(w, "add.s32 %s, %s, %s", dst, sc, l.wgCopySlot(t, region, lay, slots[first]))
			pack := func(hi, lo string) string {
				r := l.reg("r")
				emit(w, "%scvt.rn.bf16x2.f32 %s, %s, %s", g, r, hi, lo)
				return r
			}
			if t.vw == 1 {
				emit(w, "%sst.shared.b16 [%s], %s", g, dst, pack(x[0], x[0]))
				continue
			}
			var words []string
			for j := 0; j < t.vw; j += 2 {
				words = append(words, pack(x[j+1], x[j]))
			}
			if t.inner == t.wgK { // along k: packed words, contiguous
				emit(w, "%sst.shared%s.b32 [%s], %s", g, vecSuffix(len(words)), dst, vecOperand(words))
				continue
			}
			for j := 0; j < t.vw; j++ { // along n: a half a row
				h := words[j/2]
				if j%2 == 1 {
					h = l.reg("r")
					emit(w, "%sshr.u32 %s, %s, 16", g, h, words[j/2])
				}
				a := dst
				if flip := ((j * rb) >> 7) & (rb/16 - 1); flip != 0 {
					a = l.reg("r")
					emit(w, "%sxor.b32 %s, %s, %d", g, a, dst, flip<<4)
				}
				emit(w, "%sst.shared.b16 [%s+%d], %s", g, a, j*rb, h)
			}
		}
	}
}

// wgCopySlot is the shared address, in stage 0 of the ring at region, in
// tile t's bf16 tile of slot s of its copy layout lay: a prologue register.
func (l *lowerer) wgCopySlot(t *opTile, region int, lay *Layout, s slot) string {
	r0, r1 := l.valueCoord(lay, s, 0), l.valueCoord(lay, s, 1)
	key := fmt.Sprintf("mmawgcopy|%d|%d|%s|%s", region, t.wgOff, r0, r1)
	return l.geo(key, func(w *strings.Builder) string {
		return l.wgSlot(w, t, region, regOrZero(w, l, r0), regOrZero(w, l, r1))
	})
}
