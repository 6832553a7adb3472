package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Emission of MMA loops (planned in mmaloop.go).

// rename returns x in layout to without moving data where every thread
// holds, in to's slots, elements it holds in x's layout: the two layouts
// distribute each dimension of the value (shape sh) alike. nil where they
// do not. Only layouts with a register level (mma layouts) are renamed:
// other conversions stay what they were.
func (l *lowerer) rename(x *lval, to *Layout, sh tile.Shape) *lval {
	from := x.lay
	if from == nil || to == nil || (from.B.WRep == nil && to.B.WRep == nil) || len(from.Src) != len(to.Src) {
		return nil
	}
	fb, tb := from.B, to.B
	for i := 0; i < sh.Rank; i++ {
		if sh.Dims[i] == 1 {
			continue
		}
		a, b := from.Src[i], to.Src[i]
		if a < 0 || b < 0 || fb.Shape[a] != tb.Shape[b] || fb.SPT[a] != tb.SPT[b] || fb.TPW[a] != tb.TPW[b] ||
			fb.WPC[a] != tb.WPC[b] || fb.wrep(a) != tb.wrep(b) || fb.laneShift(a) != tb.laneShift(b) || fb.warpShift(a) != tb.warpShift(b) {
			return nil
		}
	}
	key := func(lay *Layout, s slot) string {
		var sb strings.Builder
		for i, d := range lay.Src {
			if sh.Dims[i] != 1 {
				fmt.Fprintf(&sb, "%d.%d.%d,", s.Rep[d], s.W[d], s.S[d])
			}
		}
		return sb.String()
	}
	src := map[string]string{}
	for i, s := range fb.slots() {
		if k := key(from, s); src[k] == "" {
			src[k] = x.regs[i]
		}
	}
	out := &lval{lay: to, regs: make([]string, nslots(to))}
	for i, s := range tb.slots() {
		r, ok := src[key(to, s)]
		if !ok {
			return nil
		}
		out.regs[i] = r
	}
	return out
}

// fragSlot is the index of the slot of an mma layout b at register tile
// w0 (rows, 8 apart) and w1 (columns, 8 apart), column s1 of the pair.
func fragSlot(b *Blocked, w0, w1, s1 int) int {
	// slots are row-major over (rep0, w0, s0, rep1, w1, s1); one rep, s0 = 0
	return (w0*b.wrep(1)+w1)*2 + s1
}

// mmaLoopEmit emits MMA loop v by plan ml: the software pipeline of
// pipelinedLoop around a body emitted value by value, its B loads replaced
// by the copies and its dots by mma.sync on register fragments.
func (l *lowerer) mmaLoopEmit(v *tile.Value, ml *mmaLoop) error {
	w := &l.body
	bounds := make([]string, 3)
	for i := range bounds {
		x, err := l.demand(v.Args[i], nil)
		if err != nil {
			return err
		}
		bounds[i] = x.regs[0]
	}
	it := v.Args[0].Type
	inits := v.Args[3:]
	body := v.Body
	lays := l.plan.loops[v.ID]
	carried := make([]*lval, len(inits))
	for i, in := range inits {
		x, err := l.demand(in, lays[i])
		if err != nil {
			return err
		}
		c := &lval{lay: lays[i], regs: make([]string, len(x.regs))}
		for _, cls := range l.classesOf(lays[i]) {
			r := l.reg(regClass(in.Type))
			emit(w, "mov.%s %s, %s", movType(in.Type), r, x.regs[cls[0]])
			for _, j := range cls {
				c.regs[j] = r
			}
		}
		carried[i] = c
	}
	// A operands from before the loop: loaded in their fragment layout,
	// rounded once, or written once into a tile of their own
	aRegion := map[*mmaDot]int{}
	for _, d := range ml.dots {
		if !d.outside {
			continue
		}
		x, err := l.demand(d.v.Args[0], d.a)
		if err != nil {
			return err
		}
		if d.aTile != nil {
			aRegion[d] = (l.ownRegion(d.aTile.bytes()+112) + 127) &^ 127
			l.storeATile(d, x, aRegion[d])
			continue
		}
		l.mma().frags[d.v.ID] = l.aFrags(d, x)
	}
	ring := ml.stages * ml.stageBytes
	var region int
	if ml.wg { // wgmma's swizzle atoms: 1024-aligned
		region = (l.ownRegion(ring+1008) + 1023) &^ 1023
		l.scratchAlign = max(l.scratchAlign, 1024)
		l.wgmma = true
	} else {
		region = (l.ownRegion(ring+112) + 127) &^ 127
	}
	ity, ptx := movType(it), ptxInt(it.DType)
	stepPos := l.reg("p")
	emit(w, "setp.gt.%s %s, %s, 0", ptx, stepPos, bounds[2])
	ivp, sp := l.reg(regClass(it)), l.reg("r")
	emit(w, "mov.%s %s, %s", ity, ivp, bounds[0])
	emit(w, "mov.u32 %s, 0", sp)
	produce := func() error {
		live := l.reg("p")
		emit(w, "setp.lt.%s %s, %s, %s", ptx, live, ivp, bounds[1])
		emit(w, "and.pred %s, %s, %s", live, live, stepPos)
		if err := l.tileCopies(ml, region, ivp, sp, live); err != nil {
			return err
		}
		emit(w, "cp.async.commit_group")
		emit(w, "add.%s %s, %s, %s", ptx, ivp, ivp, bounds[2])
		emit(w, "add.s32 %s, %s, %d", sp, sp, ml.stageBytes)
		wrap := l.reg("p")
		emit(w, "setp.ge.s32 %s, %s, %d", wrap, sp, ring)
		emit(w, "@%s mov.u32 %s, 0", wrap, sp)
		return nil
	}
	for range ml.stages - 1 { // the first stages-1 iterations in flight
		if err := produce(); err != nil {
			return err
		}
	}
	var into map[*mmaDot]*lval
	if ml.wg {
		into = l.wgInPlace(ml, carried, lays)
	}
	iv, sc := l.reg(regClass(it)), l.reg("r")
	emit(w, "mov.%s %s, %s", ity, iv, bounds[0])
	emit(w, "mov.u32 %s, 0", sc)
	head, end := l.label("mma_loop"), l.label("mma_loop_end")
	w.WriteString(head + ":\n")
	stop := l.reg("p")
	emit(w, "setp.ge.%s %s, %s, %s", ptx, stop, iv, bounds[1])
	nonpos := l.reg("p")
	emit(w, "not.pred %s, %s", nonpos, stepPos)
	emit(w, "or.pred %s, %s, %s", stop, stop, nonpos)
	emit(w, "@%s bra.uni %s", stop, end)
	emit(w, "cp.async.wait_group %d", ml.stages-2)
	if ml.wg { // the copies, rounded or converted, for wgmma's reads
		l.prepareTiles(ml, region, sc)
		emit(w, "fence.proxy.async.shared::cta")
		if len(into) > 0 { // the previous iteration's products left in flight (wgInPlace)
			emit(w, "wgmma.wait_group.sync.aligned 0")
		}
	} else {
		l.roundTiles(ml, region, sc)
	}
	l.barrier(w)
	if err := produce(); err != nil {
		return err
	}
	l.memo = append(l.memo, map[string]*lval{})
	l.loopDepth++
	l.remember(body.Args[0], &lval{regs: []string{iv}})
	for i, a := range body.Args[1:] {
		l.remember(a, carried[i])
	}
	mp := l.mma()
	for _, x := range body.Values {
		var err error
		switch {
		case x.Op == tile.OpYield || mp.tiles[x.ID] != nil:
			// the yield follows; the B loads were copied by produce
		case mp.dots[x.ID] != nil && ml.wg:
			err = l.wgmmaDotEmit(mp.dots[x.ID], region, aRegion[mp.dots[x.ID]], sc, into[mp.dots[x.ID]])
		case mp.dots[x.ID] != nil:
			err = l.mmaDotEmit(mp.dots[x.ID], region, aRegion[mp.dots[x.ID]], sc)
		default:
			err = l.block(&tile.Block{Values: []*tile.Value{x}})
		}
		if err != nil {
			return fmt.Errorf("%s: %w", x, err)
		}
	}
	yield := body.Values[len(body.Values)-1]
	var moves []move
	for i, y := range yield.Args {
		x, err := l.demand(y, lays[i])
		if err != nil {
			return err
		}
		for _, cls := range l.classesOf(lays[i]) {
			if src := x.regs[cls[0]]; src != carried[i].regs[cls[0]] {
				moves = append(moves, move{carried[i].regs[cls[0]], src, movType(inits[i].Type)})
			}
		}
	}
	l.parallelMoves(w, moves, carried)
	l.loopDepth--
	l.memo = l.memo[:len(l.memo)-1]
	emit(w, "add.s32 %s, %s, %d", sc, sc, ml.stageBytes)
	wrap := l.reg("p")
	emit(w, "setp.ge.s32 %s, %s, %d", wrap, sc, ring)
	emit(w, "@%s mov.u32 %s, 0", wrap, sc)
	emit(w, "add.%s %s, %s, %s", ptx, iv, iv, bounds[2])
	emit(w, "bra.uni %s", head)
	w.WriteString(end + ":\n")
	if len(into) > 0 {
		emit(w, "wgmma.wait_group.sync.aligned 0") // the last iteration's products
	}
	emit(w, "cp.async.wait_group 0") // copies past the end (zero fills) land before anything else
	for _, r := range forResults(l.k, v) {
		l.remember(r, carried[r.Aux])
	}
	return nil
}

// tileCopies emits, in a scope where the loop's induction variable is ivp,
// the cp.async copies of every tile of ml into the stage at byte offset sp
// of the ring at region (masked-off lanes, or all where live is false, fill
// zeros; a thread holding a copy of another's element copies nothing).
func (l *lowerer) tileCopies(ml *mmaLoop, region int, ivp, sp, live string) error {
	body := ml.loop.Body
	l.memo = append(l.memo, map[string]*lval{})
	l.loopDepth++
	defer func() {
		l.memo = l.memo[:len(l.memo)-1]
		l.loopDepth--
	}()
	l.remember(body.Args[0], &lval{regs: []string{ivp}})
	for _, t := range ml.tiles {
		ld, lay := t.load, t.copy
		n := min(len(ld.Args), 2)
		args, err := l.demandAll(ld.Args[:n], lay)
		if err != nil {
			return err
		}
		l.asyncCopies(args, lay, t.vw, live, sp, l.affineOf(ld.Args[0], map[*tile.Value]*affine{}),
			func(s slot) string { return l.copySlot(t, region, lay, s) }, nil, nil)
	}
	return nil
}

// roundTiles rounds to TF32 (B operands of PrecTF32: to nearest; of
// PrecTF32TB: truncated), in place, this thread's copies into the stage
// at byte offset sc of the tiles of ml that are read by such products only
// (opTile.rounded, opTile.truncated): after the thread's wait for them, before the barrier
// that shows them to the other warps. Zero fills round to zero.
func (l *lowerer) roundTiles(ml *mmaLoop, region int, sc string) {
	w := &l.body
	for _, t := range ml.tiles {
		if !t.rounded && !t.truncated {
			continue
		}
		l.eachCopy(t, region, sc, func(g, a string, _ slot, regs []string) {
			for _, r := range regs {
				if t.truncated {
					emitTruncTF32(w, g, r, r)
				} else {
					l.roundTF32(w, g, r, r)
				}
			}
			emit(w, "%sst.shared%s.b32 [%s], %s", g, vecSuffix(t.vw), a, vecOperand(regs))
		})
	}
}

// eachCopy loads this thread's copies of tile t into the stage at byte
// offset sc, an access group (t.vw words) at a time, into fresh
// registers, and calls f with the group's guard, its shared address, its
// first slot and the registers.
func (l *lowerer) eachCopy(t *opTile, region int, sc string, f func(g, addr string, first slot, regs []string)) {
	w := &l.body
	lay := t.copy
	l.ownedGroups(lay, t.vw, func(_ int, s slot, g string) {
		a := l.reg("r")
		emit(w, "add.s32 %s, %s, %s", a, sc, l.copySlot(t, region, lay, s))
		regs := make([]string, t.vw)
		for j := range regs {
			regs[j] = l.reg("r")
		}
		emit(w, "%sld.shared%s.b32 %s, [%s]", g, vecSuffix(t.vw), vecOperand(regs), a)
		f(g, a, s, regs)
	})
}

// copySlot is the shared address, in stage 0 of the ring at region, of
// slot s of tile t's copy layout lay: a prologue register.
func (l *lowerer) copySlot(t *opTile, region int, lay *Layout, s slot) string {
	row, col := l.valueCoord(lay, s, 1-t.inner), l.valueCoord(lay, s, t.inner)
	key := fmt.Sprintf("mmacopy|%v|%d|%s|%s", t.t, region, row, col)
	return l.geo(key, func(w *strings.Builder) string {
		r, c := regOrZero(w, l, row), regOrZero(w, l, col)
		if t.direct {
			if t.inner == 0 {
				r, c = c, r
			}
			return l.wgSlot(w, t, t.wg[0], region, r, c)
		}
		ph := l.phase(w, t.t.Swz, r)
		ch := l.reg("r")
		emit(w, "shr.u32 %s, %s, 2", ch, c)
		emit(w, "xor.b32 %s, %s, %s", ch, ch, ph)
		in := l.reg("r")
		emit(w, "and.b32 %s, %s, 3", in, c)
		a := l.reg("r")
		emit(w, "mad.lo.s32 %s, %s, %d, %s", a, r, t.t.rowBytes(), l.baseAddr())
		emit(w, "mad.lo.s32 %s, %s, 16, %s", a, ch, a)
		emit(w, "mad.lo.s32 %s, %s, 4, %s", a, in, a)
		emit(w, "add.s32 %s, %s, %d", a, a, region+t.t.Off)
		return a
	})
}

// phase emits the swizzle phase of row r: (r / PerPhase · Mul) mod MaxPhase.
func (l *lowerer) phase(w *strings.Builder, s swizzle, r string) string {
	ph := l.reg("r")
	emit(w, "shr.u32 %s, %s, %d", ph, r, log2(s.PerPhase))
	if s.Mul != 1 {
		emit(w, "mul.lo.s32 %s, %s, %d", ph, ph, s.Mul)
	}
	emit(w, "and.b32 %s, %s, %d", ph, ph, s.MaxPhase-1)
	return ph
}

// laneBits is (lane >> sh) & mask · mul + add, a prologue register.
func (l *lowerer) laneBits(sh, mask, mul, add int) string {
	return l.geo(fmt.Sprintf("mmalane|%d|%d|%d|%d", sh, mask, mul, add), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, %d", r, l.laneID(), sh)
		emit(w, "and.b32 %s, %s, %d", r, r, mask)
		if mul != 1 {
			emit(w, "mul.lo.s32 %s, %s, %d", r, r, mul)
		}
		if add != 0 {
			emit(w, "add.s32 %s, %s, %d", r, r, add)
		}
		return r
	})
}

// bBase is the thread's address, in stage 0, of its B fragment words in
// tile t for a k block of 8 whose chunk (k-major) or n block whose chunk
// (n-major) is res mod 8, and word pair h (n-major: rows 2t+h): a prologue
// register; the rest of the address is a constant (see bWords).
func (l *lowerer) bBase(t *opTile, region int, kMajor bool, h, res int) string {
	key := fmt.Sprintf("mmab|%v|%d|%v|%d|%d", t.t, region, kMajor, h, res)
	return l.geo(key, func(w *strings.Builder) string {
		var row, chunk, in string
		if kMajor { // row g, chunk t/2, byte 8·(t%2)
			row, chunk, in = l.laneBits(2, 7, 1, 0), l.laneBits(1, 1, 1, res), l.laneBits(0, 1, 8, 0)
		} else { // row 2t+h, chunk g/4, byte 4·(g%4)
			row, chunk, in = l.laneBits(0, 3, 2, h), l.laneBits(4, 1, 1, res), l.laneBits(2, 3, 4, 0)
		}
		ph := l.phase(w, t.t.Swz, row)
		c := l.reg("r")
		emit(w, "xor.b32 %s, %s, %s", c, chunk, ph)
		a := l.reg("r")
		emit(w, "mad.lo.s32 %s, %s, %d, %s", a, row, t.t.rowBytes(), l.baseAddr())
		emit(w, "mad.lo.s32 %s, %s, 16, %s", a, c, a)
		emit(w, "add.s32 %s, %s, %s", a, a, in)
		emit(w, "add.s32 %s, %s, %d", a, a, region+t.t.Off)
		return a
	})
}

// bWords loads, for dot d, the two B words of lane (g, t) in the k block
// kb of 8 and the n block j of 8 from the stage at byte offset stage: k
// 8kb+2t and 8kb+2t+1 of column 8j+g (the fragment with k permuted as A's:
// mmaloop.go). at caches the stage's base registers.
func (l *lowerer) bWords(d *mmaDot, region int, at func(string) string, kb, j int) [2]string {
	w := &l.body
	t := d.b
	out := [2]string{l.reg("r"), l.reg("r")}
	if d.bKMajor() {
		cs := 2 * kb // the words' chunk along the row
		base := at(l.bBase(t, region, true, 0, cs%8))
		off := 8*j*t.t.rowBytes() + 128*(cs/8)
		emit(w, "ld.shared.v2.b32 {%s, %s}, [%s+%d]", out[0], out[1], base, off)
		return out
	}
	cs := 2 * j
	for h := range 2 {
		base := at(l.bBase(t, region, false, h, cs%8))
		off := 8*kb*t.t.rowBytes() + 128*(cs/8)
		emit(w, "ld.shared.b32 %s, [%s+%d]", out[h], base, off)
	}
	return out
}

// aFrags are the A fragments of dot d from x (held in d.a), rounded, per
// m16 tile i and k step ks: four .b32 registers (tf32, bf16 packed pairs)
// or eight (3xTF32: the high parts, then the low parts).
func (l *lowerer) aFrags(d *mmaDot, x *lval) [][]string {
	b := d.a.B
	var out [][]string
	for i := 0; i < b.wrep(0)/2; i++ {
		for ks := 0; ks < d.k/d.kstep(); ks++ {
			if d.plainK { // slots (w0, w1): row 8·w0 + g, column 4·w1 + t
				out = append(out, l.aFrag(d, ks, func(h, kb, s int) string { return x.regs[(2*i+h)*b.wrep(1)+2*kb+s] }))
				continue
			}
			out = append(out, l.aFrag(d, ks, func(h, kb, s int) string { return x.regs[fragSlot(b, 2*i+h, kb, s)] }))
		}
	}
	return out
}

func (d *mmaDot) kstep() int {
	if d.v.Prec == tile.PrecBF16 {
		return 16
	}
	return 8
}

// aFrag makes the A fragment of k step ks from the words at(h, kb, s): the
// thread's element of rows 8h+g of the m16 tile, column 8kb+2t+s.
func (l *lowerer) aFrag(d *mmaDot, ks int, at func(h, kb, s int) string) []string {
	w := &l.body
	switch d.v.Prec {
	case tile.PrecBF16:
		return []string{
			l.packBF16(w, at(0, 2*ks, 1), at(0, 2*ks, 0)), l.packBF16(w, at(1, 2*ks, 1), at(1, 2*ks, 0)),
			l.packBF16(w, at(0, 2*ks+1, 1), at(0, 2*ks+1, 0)), l.packBF16(w, at(1, 2*ks+1, 1), at(1, 2*ks+1, 0)),
		}
	case tile.PrecTF32x3:
		raw := []string{at(0, ks, 0), at(1, ks, 0), at(0, ks, 1), at(1, ks, 1)}
		f := make([]string, 8)
		for r, v := range raw {
			f[r], f[4+r] = l.splitTF32(w, v)
		}
		return f
	}
	p := d.v.Prec
	return []string{l.tf32A(w, p, at(0, ks, 0)), l.tf32A(w, p, at(1, ks, 0)), l.tf32A(w, p, at(0, ks, 1)), l.tf32A(w, p, at(1, ks, 1))}
}

// aTileBase is the thread's address of its first A words in dot d's A
// tile at region: row (warp's rows) + g, chunk t/2 + res, byte 8·(t%2).
func (l *lowerer) aTileBase(d *mmaDot, region, res int) string {
	t := *d.aTile
	key := fmt.Sprintf("mmaa|%v|%d|%d|%s", t, region, res, d.c.key())
	return l.geo(key, func(w *strings.Builder) string {
		g := l.laneBits(2, 7, 1, 0)
		ph := l.phase(w, t.Swz, g)
		c := l.reg("r")
		emit(w, "xor.b32 %s, %s, %s", c, l.laneBits(1, 1, 1, res), ph)
		row := l.reg("r")
		emit(w, "mad.lo.s32 %s, %s, %d, %s", row, l.warpAlong(d.c, 0), d.c.warpTile(0), g)
		a := l.reg("r")
		emit(w, "mad.lo.s32 %s, %s, %d, %s", a, row, t.rowBytes(), l.baseAddr())
		emit(w, "mad.lo.s32 %s, %s, 16, %s", a, c, a)
		emit(w, "add.s32 %s, %s, %s", a, a, l.laneBits(0, 1, 8, 0))
		emit(w, "add.s32 %s, %s, %d", a, a, region)
		return a
	})
}

// storeATile writes x (A of dot d, held in d.a) into its tile at region:
// each thread its own pairs of columns (the tile's rows are its warp's);
// converted to TF32 for a TF32 product (tf32A), so that its reads need no
// conversion.
func (l *lowerer) storeATile(d *mmaDot, x *lval, region int) {
	w := &l.body
	b := d.a.B
	word := func(r string) string {
		if !d.v.Prec.IsTF32() {
			return r
		}
		return l.tf32A(w, d.v.Prec, r)
	}
	for i := 0; i < b.wrep(0)/2; i++ {
		for h := range 2 {
			for kb := 0; kb < d.k/8; kb++ {
				cs := 2 * kb
				off := (16*i+8*h)*d.aTile.rowBytes() + 128*(cs/8)
				emit(w, "st.shared.v2.f32 [%s+%d], {%s, %s}", l.aTileBase(d, region, cs%8), off,
					word(x.regs[fragSlot(b, 2*i+h, kb, 0)]), word(x.regs[fragSlot(b, 2*i+h, kb, 1)]))
			}
		}
	}
}

// aTileFrag reads the A fragment of m16 tile i and k step ks of dot d from
// its tile at region.
func (l *lowerer) aTileFrag(d *mmaDot, region, i, ks int) []string {
	w := &l.body
	words := map[[3]int]string{}
	at := func(h, kb, s int) string {
		if r, ok := words[[3]int{h, kb, s}]; ok {
			return r
		}
		cs := 2 * kb
		off := (16*i+8*h)*d.aTile.rowBytes() + 128*(cs/8)
		r0, r1 := l.reg("r"), l.reg("r")
		emit(w, "ld.shared.v2.b32 {%s, %s}, [%s+%d]", r0, r1, l.aTileBase(d, region, cs%8), off)
		words[[3]int{h, kb, 0}], words[[3]int{h, kb, 1}] = r0, r1
		return words[[3]int{h, kb, s}]
	}
	if d.v.Prec.IsTF32() { // converted once by storeATile
		return []string{at(0, ks, 0), at(1, ks, 0), at(0, ks, 1), at(1, ks, 1)}
	}
	return l.aFrag(d, ks, at)
}

// tf32A is x as a TF32 product of precision p reads its A operand, in a
// register of its own: truncated (PrecTF32, tile.TruncTF32: its 13 low
// mantissa bits cleared) or rounded (PrecTF32TB, tile.RoundTF32).
func (l *lowerer) tf32A(w *strings.Builder, p tile.Precision, x string) string {
	r := l.reg("r")
	if p.TruncatesA() {
		emitTruncTF32(w, "", r, x)
	} else {
		l.roundTF32(w, "", r, x)
	}
	return r
}

// tf32Mask clears an f32's 13 low mantissa bits: TF32 towards zero, as the
// tensor cores read an f32 operand themselves (tile.TruncTF32).
const tf32Mask = "0xffffe000"

// emitTruncTF32 writes dst = src truncated to TF32 (g: a guard or ""): a
// PrecTF32 dot's A operand, a PrecTF32TB dot's B.
func emitTruncTF32(w *strings.Builder, g, dst, src string) {
	emit(w, "%sand.b32 %s, %s, %s", g, dst, src, tf32Mask)
}

// roundTF32 writes dst = src rounded to TF32, to nearest with ties to even
// (tile.RoundTF32; g: a guard or ""): a PrecTF32 dot's B operand, a
// PrecTF32TB dot's A, 3xTF32's parts. On sm_90 cvt.rn.tf32.f32, one
// instruction (F2FP.TF32 in SASS, where cvt.rna is a compare and two
// predicated integer ops: the H200, 2026-12-03); sm_80 has cvt.rna only,
// so there the increment 0xfff plus the kept bit 13 is added to finite
// values' bits before the 13 low bits are cleared, and infinities and NaN
// take cvt.rna's result (themselves, NaN quieted).
func (l *lowerer) roundTF32(w *strings.Builder, g, dst, src string) {
	if l.opt.Arch >= 90 {
		emit(w, "%scvt.rn.tf32.f32 %s, %s", g, dst, src)
		return
	}
	inc, e, nf, na := l.reg("r"), l.reg("r"), l.reg("p"), l.reg("r")
	if strings.HasPrefix(src, "%f") { // the integer ops take the bits
		b := l.reg("r")
		emit(w, "%smov.b32 %s, %s", g, b, src)
		src = b
	}
	out := dst
	if strings.HasPrefix(dst, "%f") {
		out = l.reg("r")
		defer emit(w, "%smov.b32 %s, %s", g, dst, out)
	}
	emit(w, "%sshr.u32 %s, %s, 13", g, inc, src)
	emit(w, "%sand.b32 %s, %s, 1", g, inc, inc)
	emit(w, "%sadd.u32 %s, %s, 4095", g, inc, inc)
	emit(w, "%sand.b32 %s, %s, 2139095040", g, e, src) // the exponent, 0x7f800000
	emit(w, "%ssetp.eq.u32 %s, %s, 2139095040", g, nf, e)
	emit(w, "%scvt.rna.tf32.f32 %s, %s", g, na, src)
	emit(w, "%sadd.u32 %s, %s, %s", g, e, src, inc)
	emit(w, "%sand.b32 %s, %s, -8192", g, e, e) // 0xffffe000, written apart from the truncations
	emit(w, "%sselp.b32 %s, %s, %s, %s", g, out, na, e, nf)
}

// splitTF32 is 3xTF32's split: hi = tf32(x), lo = tf32(x − hi).
func (l *lowerer) splitTF32(w *strings.Builder, x string) (hi, lo string) {
	hi, lo = l.reg("r"), l.reg("r")
	l.roundTF32(w, "", hi, x)
	emit(w, "sub.f32 %s, %s, %s", lo, x, hi)
	l.roundTF32(w, "", lo, lo)
	return hi, lo
}

// packBF16 rounds hi and lo to bf16 (nearest even) into one register,
// lo in the lower half.
func (l *lowerer) packBF16(w *strings.Builder, hi, lo string) string {
	r := l.reg("r")
	emit(w, "cvt.rn.bf16x2.f32 %s, %s, %s", r, hi, lo)
	return r
}

// mmaDotEmit emits dot d of an MMA loop, its B tile in the stage at byte
// offset stage (a register) of the ring at region: per k step, the warp's
// B fragments of every n8 block and A fragments of every m16 tile, then
// one mma.sync per m16n8 tile into the result, held in d.c.
func (l *lowerer) mmaDotEmit(d *mmaDot, region, aRegion int, stage string) error {
	w := &l.body
	v := d.v
	c := plain(d.c)
	mt, nt := d.c.wrep(0)/2, d.n/8
	res := &lval{lay: &c, regs: make([]string, nslots(&c))}
	for i := range res.regs {
		res.regs[i] = l.reg("f")
	}
	var acc *lval
	if isZero(v.Args[2]) {
		for _, r := range res.regs {
			emit(w, "mov.f32 %s, 0f00000000", r)
		}
	} else {
		var err error
		if acc, err = l.demand(v.Args[2], &c); err != nil {
			return err
		}
	}
	var frags [][]string
	switch {
	case d.aTile != nil:
		for i := 0; i < mt; i++ {
			for ks := 0; ks < d.k/d.kstep(); ks++ {
				frags = append(frags, l.aTileFrag(d, aRegion, i, ks))
			}
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
	based := map[string]string{}
	at := func(base string) string {
		if r, ok := based[base]; ok {
			return r
		}
		r := l.reg("r")
		emit(w, "add.s32 %s, %s, %s", r, base, stage)
		based[base] = r
		return r
	}
	regs := func(i, j int) (d, c [4]string) {
		for h := range 2 {
			for s := range 2 {
				idx := fragSlot(res.lay.B, 2*i+h, j, s)
				d[2*h+s] = res.regs[idx]
				c[2*h+s] = res.regs[idx]
				if acc != nil {
					c[2*h+s] = acc.regs[idx]
				}
			}
		}
		return
	}
	first := make(map[[2]int]bool)
	mma := func(shape string, i, j int, a []string, b []string) {
		dr, cr := regs(i, j)
		if first[[2]int{i, j}] {
			cr = dr
		}
		first[[2]int{i, j}] = true
		emit(w, "mma.sync.aligned.%s {%s, %s, %s, %s}, {%s, %s, %s, %s}, {%s, %s}, {%s, %s, %s, %s}",
			shape, dr[0], dr[1], dr[2], dr[3], a[0], a[1], a[2], a[3], b[0], b[1], cr[0], cr[1], cr[2], cr[3])
	}
	const tf32 = "m16n8k8.row.col.f32.tf32.tf32.f32"
	if v.Prec == tile.PrecBF16 {
		ks16 := d.k / 16
		for ks := 0; ks < ks16; ks++ {
			bf := make([][]string, nt)
			for j := range bf {
				x, y := l.bWords(d, region, at, 2*ks, j), l.bWords(d, region, at, 2*ks+1, j)
				bf[j] = []string{l.packBF16(w, x[1], x[0]), l.packBF16(w, y[1], y[0])}
			}
			for i := 0; i < mt; i++ {
				for j := 0; j < nt; j++ {
					mma("m16n8k16.row.col.f32.bf16.bf16.f32", i, j, frags[i*ks16+ks], bf[j])
				}
			}
		}
	} else {
		ks8 := d.k / 8
		for ks := 0; ks < ks8; ks++ {
			bf := make([][]string, nt)
			for j := range bf {
				x := l.bWords(d, region, at, ks, j)
				if v.Prec == tile.PrecTF32x3 {
					h0, l0 := l.splitTF32(w, x[0])
					h1, l1 := l.splitTF32(w, x[1])
					bf[j] = []string{h0, h1, l0, l1}
					continue
				}
				switch {
				case d.b.rounded || d.b.truncated:
				case v.Prec.TruncatesB():
					emitTruncTF32(w, "", x[0], x[0])
					emitTruncTF32(w, "", x[1], x[1])
				default:
					l.roundTF32(w, "", x[0], x[0])
					l.roundTF32(w, "", x[1], x[1])
				}
				bf[j] = x[:]
			}
			for i := 0; i < mt; i++ {
				a := frags[i*ks8+ks]
				for j := 0; j < nt; j++ {
					if v.Prec == tile.PrecTF32x3 { // the small products first
						mma(tf32, i, j, a[4:8], bf[j][0:2])
						mma(tf32, i, j, a[0:4], bf[j][2:4])
					}
					mma(tf32, i, j, a[0:4], bf[j][0:2])
				}
			}
		}
	}
	l.remember(v, res)
	return nil
}
