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
//     form (mmaloop.go), unchanged (CUTLASS's statement of the PTX ISA's
//     fragments, cute/atom/mma_traits_sm90_gmma.hpp: ALayout_64x8, thread
//     (t, g, warp) strides (64, 1, 16) and values (8, 256) over m + 64·k,
//     is a0..a3 at (g, t) (g+8, t) (g, t+4) (g+8, t+4) of warp w's rows
//     16w..16w+15; bf16's ALayout_64x16 = CLayout_64x16, pairs (2t, 2t+1)
//     as m16n8k16's; the transposing wgmma form's products, measured on
//     the H200, load A so too);
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
//     wgmma.fence, issues one wgmma per k step, commits and waits for the
//     group (wait_group 0) before anything reads the result; except a dot
//     whose result only becomes a carried value (P·V into O: wgInPlace),
//     which accumulates in the carried registers and is left in flight
//     into the next iteration, retired after that iteration's copies are
//     prepared and before its barrier. The stage a dot reads is rewritten
//     only by copies issued after a later iteration's barrier, by which
//     time every warp's wgmmas that read it have retired.

// wgmmaLoop reports whether MMA loop ml can run its dots as wgmma, and if
// so plans its tiles' views and copies (see above): TF32 or bf16 dots (one
// precision) of 16 rows a warp over whole warpgroups, N a multiple of 8 up
// to 256, each view's n rows a multiple of 8 and k rows of 32, 64 or a
// multiple of 128 bytes.
func (l *lowerer) wgmmaLoop(ml *mmaLoop) bool {
	nw := l.opt.NumWarps
	if nw%4 != 0 {
		return false
	}
	prec := ml.dots[0].v.Prec
	if !prec.IsTF32() && prec != tile.PrecBF16 && prec != tile.PrecTF32x3 {
		return false
	}
	bf, x3 := prec == tile.PrecBF16, prec == tile.PrecTF32x3
	views := map[*opTile][]*wgView{}
	dview := map[*mmaDot]*wgView{}
	for _, d := range ml.dots {
		if d.v.Prec != prec || d.m != 16*nw || d.n%8 != 0 || d.n > 256 || d.k%d.kstep() != 0 {
			return false
		}
		k := 0 // B's k is dimension 0 of the load, or 1 of a transposed one
		if d.bTrans {
			k = 1
		}
		perm := !d.outside && !bf
		var v *wgView
		for _, x := range views[d.b] {
			if x.k == k && x.perm == perm {
				v = x
			}
		}
		if v == nil {
			v = &wgView{k: k, perm: perm, bf: bf, x3: x3}
			views[d.b] = append(views[d.b], v)
		}
		dview[d] = v
	}
	for _, t := range ml.tiles {
		if len(views[t]) == 0 {
			return false
		}
		for _, v := range views[t] {
			n, kw, _, _, e := t.wgGeom(v)
			if b := e * kw; n%8 != 0 || (b != 32 && b != 64 && b%128 != 0) {
				return false
			}
		}
	}
	if !bf { // TF32 tiles of two views: one is copied into, the other transposed from it
		// (prepareTiles); of one view: copied into it, or with the
		// meta-parameter wg_stage = 1 a view that is transposed or
		// permuted is transposed from the copies as the second view is
		for _, t := range ml.tiles {
			if vs := views[t]; len(vs) > 1 && !(len(vs) == 2 && vs[0].k != vs[1].k) {
				return false
			}
			if vs := views[t]; len(vs) == 2 && !((vs[0].k == t.inner && !vs[0].perm) || (vs[1].k == t.inner && !vs[1].perm)) {
				return false
			}
		}
	}
	for _, d := range ml.dots {
		d.view = dview[d]
		if d.outside && !bf { // the true A fragment: (g, t) (g+8, t) (g, t+4) (g+8, t+4)
			d.plainK = true
			d.a = &Layout{B: l.intern(&Blocked{Shape: []int{d.m, d.k}, SPT: []int{1, 1}, TPW: []int{8, 4}, WRep: []int{2, d.k / 4}, WPC: []int{nw, 1}}), Src: []int{0, 1}}
		}
	}
	for _, t := range ml.tiles {
		t.wg = views[t]
		if bf {
			continue // copied in f32 as planned, converted into each view
		}
		if len(t.wg) > 1 { // copied into the view whose k is contiguous, unpermuted
			for i, v := range t.wg {
				if v.k == t.inner && !v.perm {
					t.wg[0], t.wg[i] = t.wg[i], t.wg[0]
					t.direct = true
				}
			}
			continue
		}
		if v := t.wg[0]; v.k == t.inner && !v.perm {
			t.direct = true
			continue
		}
		if l.k.Meta["wg_stage"] == 1 && t.wg[0].k != t.inner { // copied 16 bytes wide as planned, transposed by the copying threads
			continue
		}
		t.direct = true
		// transposing (or permuting) copies: 4 bytes, lanes 8 along the
		// contiguous dimension × 4 along the other, warps along the other
		// first
		sh := t.load.Type.Shape.Slice()
		other := 1 - t.inner
		b := &Blocked{Shape: append([]int(nil), sh...), SPT: []int{1, 1}, TPW: make([]int, 2), WPC: []int{1, 1}}
		b.TPW[t.inner], b.TPW[other] = 8, 4
		warps := nw
		for _, d := range []int{other, t.inner} {
			room := max(1, sh[d]/b.TPW[d])
			w := min(warps, room&-room)
			b.WPC[d] = w
			warps /= w
		}
		b.WPC[other] *= warps
		c := plain(l.intern(b))
		t.copy, t.vw = &c, 1
	}
	return true
}

// wgGeom is view v of tile t: n rows of row bytes holding k elements of e
// bytes each (kw of them in all, in kw·e/row atoms of n rows).
func (t *opTile) wgGeom(v *wgView) (n, kw, row, atom, e int) {
	sh := t.load.Type.Shape.Slice()
	n, kw, e = sh[1-v.k], sh[v.k], 4
	if v.bf {
		e = 2
	}
	row = min(128, e*kw)
	return n, kw, row, n * row, e
}

// wgBytes is the size of view v of tile t.
func (t *opTile) wgBytes(v *wgView) int {
	n, kw, _, _, e := t.wgGeom(v)
	return n * kw * e
}

// wgSlot is the shared address, in stage 0 of the ring at region, of
// element (row, col) of view v of tile t (coordinates of its load's first
// and second dimension): atom k/(row/e), row n, element k%(row/e) (k
// permuted where v is), the swizzle XORing address bits [4, 4+log2(row/16))
// with bits [7, ...) (atoms are 1024-aligned, so the view's offsets are
// the absolute address's bits).
func (l *lowerer) wgSlot(w *strings.Builder, t *opTile, v *wgView, region int, row, col string) string {
	n, k := row, col
	if v.k == 0 {
		n, k = col, row
	}
	if v.perm { // word k of 8 at position k/2 + 4·(k%2), as A's k
		p, q := l.reg("r"), l.reg("r")
		emit(w, "and.b32 %s, %s, -8", p, k)
		emit(w, "bfe.u32 %s, %s, 1, 2", q, k)
		emit(w, "or.b32 %s, %s, %s", p, p, q)
		q = l.reg("r")
		emit(w, "and.b32 %s, %s, 1", q, k)
		emit(w, "mad.lo.s32 %s, %s, 4, %s", p, q, p)
		k = p
	}
	_, _, rb, atom, e := t.wgGeom(v)
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
	emit(w, "add.s32 %s, %s, %d", a, a, region+v.off)
	return a
}

// wgDesc is the matrix descriptor of view v of tile t in stage 0 of the ring
// at region (a prologue register): its start address in 16-byte units,
// leading byte offset 1 (unused by swizzled K-major layouts), stride byte
// offset 8 rows, and the swizzle of its rows (128, 64 or 32 bytes: modes
// 1, 2, 3), as CUTLASS's make_gmma_desc makes it.
func (l *lowerer) wgDesc(t *opTile, v *wgView, region int) string {
	_, _, rb, _, _ := t.wgGeom(v)
	mode := map[int]uint64{128: 1, 64: 2, 32: 3}[rb]
	bits := uint64(1)<<16 | uint64(8*rb>>4)<<32 | mode<<62
	return l.geo(fmt.Sprintf("mmawg|desc|%d|%d|%d", region, v.off, rb), func(w *strings.Builder) string {
		a := l.reg("r")
		emit(w, "add.s32 %s, %s, %d", a, l.baseAddr(), region+v.off)
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
func (l *lowerer) wgmmaDotEmit(d *mmaDot, region, aRegion int, stage string, into *lval) error {
	w := &l.body
	v := d.v
	c := plain(d.c)
	res := &lval{lay: &c, regs: make([]string, nslots(&c))}
	for i := range res.regs {
		res.regs[i] = l.reg("f")
	}
	if into != nil {
		copy(res.regs, into.regs)
	}
	zero := isZero(v.Args[2])
	if !zero {
		acc, err := l.demand(v.Args[2], &c)
		if err != nil {
			return err
		}
		for i, r := range res.regs {
			if r != acc.regs[i] {
				emit(w, "mov.f32 %s, %s", r, acc.regs[i])
			}
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
	_, _, rb, atom, _ := d.b.wgGeom(d.view)
	sel, cur := l.reg("r"), l.reg("rd")
	emit(w, "shr.u32 %s, %s, 4", sel, stage)
	emit(w, "cvt.u64.u32 %s, %s", cur, sel)
	emit(w, "add.s64 %s, %s, %s", cur, cur, l.wgDesc(d.b, d.view, region))
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
		if d.v.Prec == tile.PrecTF32x3 { // the small products first: A's low parts by B's high, A's high by B's low, then the high parts
			dlo := l.reg("rd")
			emit(w, "add.s64 %s, %s, %d", dlo, di, (d.view.lo-d.view.off)>>4)
			for _, p := range [][2]string{{"lo", di}, {"hi", dlo}, {"hi", di}} {
				f := a[0:4]
				if p[0] == "lo" {
					f = a[4:8]
				}
				emit(w, "wgmma.mma_async.sync.aligned.m64n%dk8.f32.tf32.tf32 %s, {%s, %s, %s, %s}, %s, %s, 1, 1", d.n, dl, f[0], f[1], f[2], f[3], p[1], scale)
				scale = scaleD
			}
			continue
		}
		if d.v.Prec == tile.PrecBF16 {
			emit(w, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 %s, {%s, %s, %s, %s}, %s, %s, 1, 1, 0", d.n, dl, a[0], a[1], a[2], a[3], di, scale)
			continue
		}
		emit(w, "wgmma.mma_async.sync.aligned.m64n%dk8.f32.tf32.tf32 %s, {%s, %s, %s, %s}, %s, %s, 1, 1", d.n, dl, a[0], a[1], a[2], a[3], di, scale)
	}
	emit(w, "wgmma.commit_group.sync.aligned")
	if into == nil {
		emit(w, "wgmma.wait_group.sync.aligned 0")
	}
	l.remember(v, res)
	return nil
}

// wgInPlace picks the dots of wgmma loop ml whose wgmmas can be left in
// flight into the next iteration, accumulating straight into the
// registers of the carried value they become (P·V into O): the result's
// only reader is the yield, in the carried value's layout, and every
// reader of the carried value in the body comes before the dot (acc·α),
// so that nothing touches those registers until the next iteration's
// wait, which mmaLoopEmit places after the copies are prepared and before
// the barrier: the stage the wgmmas read is rewritten only after that
// barrier (by the copies issued then), and the next iteration's products
// find their registers retired. After the loop a wait retires the last.
func (l *lowerer) wgInPlace(ml *mmaLoop, carried []*lval, lays []*Layout) map[*mmaDot]*lval {
	body := ml.loop.Body
	yield := body.Values[len(body.Values)-1]
	pos := map[*tile.Value]int{}
	for i, x := range body.Values {
		pos[x] = i
	}
	out := map[*mmaDot]*lval{}
	for _, d := range ml.dots {
		if us := l.users[d.v.ID]; len(us) != 1 || us[0] != yield {
			continue
		}
		for i, y := range yield.Args {
			if y != d.v || lays[i] == nil || lays[i].String() != plain(d.c).String() || len(carried[i].regs) != nslots(lays[i]) {
				continue
			}
			arg := body.Args[1+i]
			readers := l.users[arg.ID]
			ok := len(readers) > 0
			for _, u := range readers {
				if p, in := pos[u]; !in || p >= pos[d.v] {
					ok = false
				}
			}
			seen := map[string]bool{}
			for _, r := range carried[i].regs {
				ok = ok && !seen[r]
				seen[r] = true
			}
			if ok {
				out[d] = carried[i]
			}
		}
	}
	return out
}

// prepareTiles makes this thread's copies of ml's tiles in the stage at
// byte offset sc ready for wgmma, once they have landed (after its
// cp.async.wait_group, before the fence and the barrier): it loads each
// copy, rounds it to TF32 (roundTF32: the tiles are B operands, which a TF32
// dot rounds) and stores it back where the copies land in a view (direct),
// or splits it (3xTF32), and writes it into every other view of the tile:
// TF32 views there are transposed (wgmmaLoop), a word a
// row; bf16 rounded by cvt.rn.bf16x2 (nearest even, as the interpreter),
// packed words where the copy's elements run along the view's k, a half a
// row where they run along n. Rows n+j of a copy are at the first one's
// address plus j rows with the swizzle's chunk bits flipped by
// ((j·row) >> 7) (the copy's first n is a multiple of its width, so no
// carry crosses them).
func (l *lowerer) prepareTiles(ml *mmaLoop, region int, sc string) {
	w := &l.body
	for _, t := range ml.tiles {
		var views []*wgView
		for i, v := range t.wg {
			if i > 0 || !t.direct {
				views = append(views, v)
			}
		}
		x3 := len(t.wg) > 0 && t.wg[0].x3
		if len(views) == 0 && !t.rounded && !x3 {
			continue
		}
		lay := t.copy
		l.eachCopy(t, region, sc, func(g, src string, first slot, x []string) {
			var lo []string // 3xTF32: x becomes the high parts, lo the low ones
			if x3 {
				for j, r := range x {
					x[j], lo = l.reg("r"), append(lo, l.reg("r"))
					l.roundTF32(w, g, x[j], r)
					emit(w, "%ssub.f32 %s, %s, %s", g, lo[j], r, x[j])
					l.roundTF32(w, g, lo[j], lo[j])
				}
				if t.direct {
					v := t.wg[0]
					emit(w, "%sst.shared%s.b32 [%s], %s", g, vecSuffix(t.vw), src, vecOperand(x))
					emit(w, "%sst.shared%s.b32 [%s+%d], %s", g, vecSuffix(t.vw), src, v.lo-v.off, vecOperand(lo))
				}
			}
			if t.rounded {
				for _, r := range x {
					l.roundTF32(w, g, r, r)
				}
				if t.direct {
					emit(w, "%sst.shared%s.b32 [%s], %s", g, vecSuffix(t.vw), src, vecOperand(x))
				}
			}
			for _, v := range views {
				_, _, rb, _, _ := t.wgGeom(v)
				dst := l.reg("r")
				emit(w, "add.s32 %s, %s, %s", dst, sc, l.wgCopySlot(t, v, region, lay, first))
				// the element j rows after the first
				row := func(j int) string {
					if flip := ((j * rb) >> 7) & (rb/16 - 1); flip != 0 {
						a := l.reg("r")
						emit(w, "%sxor.b32 %s, %s, %d", g, a, dst, flip<<4)
						return a
					}
					return dst
				}
				if !v.bf { // TF32: a transposed view (wgmmaLoop), a word a row
					for j := range x {
						a := row(j)
						emit(w, "%sst.shared.b32 [%s+%d], %s", g, a, j*rb, x[j])
						if x3 {
							emit(w, "%sst.shared.b32 [%s+%d], %s", g, a, j*rb+v.lo-v.off, lo[j])
						}
					}
					continue
				}
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
				if v.k == t.inner { // packed words, contiguous
					emit(w, "%sst.shared%s.b32 [%s], %s", g, vecSuffix(len(words)), dst, vecOperand(words))
					continue
				}
				for j := 0; j < t.vw; j++ { // a half a row
					h := words[j/2]
					if j%2 == 1 {
						h = l.reg("r")
						emit(w, "%sshr.u32 %s, %s, 16", g, h, words[j/2])
					}
					emit(w, "%sst.shared.b16 [%s+%d], %s", g, row(j), j*rb, h)
				}
			}
		})
	}
}

// wgCopySlot is the shared address, in stage 0 of the ring at region, in
// view v of tile t of slot s of its copy layout lay: a prologue register.
func (l *lowerer) wgCopySlot(t *opTile, v *wgView, region int, lay *Layout, s slot) string {
	r0, r1 := l.valueCoord(lay, s, 0), l.valueCoord(lay, s, 1)
	key := fmt.Sprintf("mmawgcopy|%d|%d|%s|%s", region, v.off, r0, r1)
	return l.geo(key, func(w *strings.Builder) string {
		return l.wgSlot(w, t, v, region, regOrZero(w, l, r0), regOrZero(w, l, r1))
	})
}
