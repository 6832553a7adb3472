package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// reduce lowers a reduction along one axis: within each thread, then across
// the lanes of a warp with butterfly shuffles, then across warps through
// shared memory. The result's layout leaves the reduced dimension out, so
// every thread along it holds the result and broadcasting it back is free.
func (l *lowerer) reduce(v *tile.Value) error {
	x := v.Args[0]
	lay := l.layoutOf(x)
	in, err := l.demand(x, lay)
	if err != nil {
		return err
	}
	d := lay.Src[v.Aux]
	outLay := l.natural[v.ID] // reducedLayout(lay, v)
	w := &l.body
	t := v.Type
	if d < 0 { // the axis has size 1: nothing to combine
		res := &lval{lay: outLay, regs: in.regs}
		if outLay == nil {
			res.regs = in.regs[:1]
		}
		l.remember(v, res)
		return nil
	}
	b := lay.B
	slots := b.slots()
	sptN, tpwN, wpcN := b.distinct(d)

	// group the operand's slots by the result element they hold
	keyOf := func(s slot) string {
		var sb strings.Builder
		for _, e := range lay.Src {
			if e >= 0 && e != d {
				fmt.Fprintf(&sb, "%d.%d.%d,", s.Rep[e], s.W[e], s.S[e])
			}
		}
		return sb.String()
	}
	order := []string{}
	groups := map[string][]int{}
	for _, cls := range l.classesOf(lay) {
		s := slots[cls[0]]
		if s.S[d] >= sptN || s.W[d]*b.SPT[d]*b.TPW[d] >= b.Shape[d] {
			continue // a wrapped copy along the reduced dimension
		}
		k := keyOf(s)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], cls[0])
	}
	partial := map[string]string{}
	for _, k := range order {
		g := groups[k]
		acc := in.regs[g[0]]
		for _, i := range g[1:] {
			acc = l.combine(w, v.Op, t.DType, acc, in.regs[i])
		}
		for j := 0; 1<<j < tpwN; j++ {
			other := l.shuffleXor(w, t.DType, acc, 1<<(b.laneShift(d)+j))
			acc = l.combine(w, v.Op, t.DType, acc, other)
		}
		partial[k] = acc
	}
	if wpcN > 1 {
		size := elemBytes(t)
		var rshape tile.Shape
		if outLay != nil {
			rshape = v.Type.Shape
		}
		rsize := max(1, rshape.Numel())
		region := l.ownRegion(wpcN * rsize * size)
		wd := l.reg("r")
		emit(w, "and.b32 %s, %s, %d", wd, l.warpAlong(b, d), wpcN-1)
		for _, k := range order {
			s := slots[groups[k][0]]
			idx := "0"
			if outLay != nil {
				idx = l.flatIndex(outLay, rshape, s)
			}
			cell := l.reg("r")
			emit(w, "mad.lo.s32 %s, %s, %d, %s", cell, wd, rsize, idx)
			a := l.reg("r")
			emit(w, "mad.lo.s32 %s, %s, %d, %s", a, cell, size, l.baseAddr())
			emit(w, "st.shared.%s [%s+%d], %s", memType(t), a, region, partial[k])
		}
		l.barrier(w)
		for _, k := range order {
			s := slots[groups[k][0]]
			idx := "0"
			if outLay != nil {
				idx = l.flatIndex(outLay, rshape, s)
			}
			a := l.reg("r")
			if idx == "0" {
				emit(w, "mov.u32 %s, %s", a, l.baseAddr())
			} else {
				emit(w, "mad.lo.s32 %s, %s, %d, %s", a, idx, size, l.baseAddr())
			}
			var acc string
			for wi := 0; wi < wpcN; wi++ {
				r := l.reg(regClass(t))
				emit(w, "ld.shared.%s %s, [%s+%d]", memType(t), r, a, region+wi*rsize*size)
				if acc == "" {
					acc = r
				} else {
					acc = l.combine(w, v.Op, t.DType, acc, r)
				}
			}
			partial[k] = acc
		}
		if l.loopDepth > 0 {
			l.barrier(w) // the next iteration writes the region again
		}
	}
	res := &lval{lay: outLay, regs: make([]string, nslots(outLay))}
	if outLay == nil {
		res.regs[0] = partial[order[0]]
	} else {
		for _, cls := range l.classesOf(outLay) {
			s := slots[cls[0]]
			var sb strings.Builder
			for _, e := range outLay.Src {
				if e >= 0 {
					fmt.Fprintf(&sb, "%d.%d.%d,", s.Rep[e], s.W[e], s.S[e])
				}
			}
			r, ok := partial[sb.String()]
			if !ok {
				return fmt.Errorf("internal: reduction lost result class %q", sb.String())
			}
			for _, i := range cls {
				res.regs[i] = r
			}
		}
	}
	l.remember(v, res)
	return nil
}

// combine applies a reduction's binary op.
func (l *lowerer) combine(w *strings.Builder, op tile.Op, d tile.DType, a, b string) string {
	var bop tile.Op
	switch op {
	case tile.OpReduceSum:
		bop = tile.OpAdd
	case tile.OpReduceMax:
		bop = tile.OpMax
	default:
		bop = tile.OpMin
	}
	r, _ := l.binary(w, bop, d, a, b)
	return r
}

// shuffleXor returns a's value from the lane whose id differs in the bits of mask.
func (l *lowerer) shuffleXor(w *strings.Builder, d tile.DType, a string, mask int) string {
	r := l.reg(regClass(tile.ScalarOf(d)))
	if d == tile.F64 || d == tile.I64 {
		lo, hi := l.reg("r"), l.reg("r")
		emit(w, "mov.b64 {%s, %s}, %s", lo, hi, a)
		emit(w, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1", lo, lo, mask)
		emit(w, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1", hi, hi, mask)
		emit(w, "mov.b64 %s, {%s, %s}", r, lo, hi)
		return r
	}
	emit(w, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1", r, a, mask)
	return r
}

// dot lowers acc + a·b on CUDA cores: both operands are staged in shared
// memory, then each thread accumulates its elements of the result with one
// FMA per k, in order. With TF32 (bf16) precision the operands are first
// rounded to TF32 (bf16), which makes each product exact in f32, as in the
// interpreter. 3xTF32 dots outside pipelined loops take exact f32 products
// here (more accurate than the spec's three TF32 products, within its
// tolerances).
func (l *lowerer) dot(v *tile.Value) error {
	a, bv, acc := v.Args[0], v.Args[1], v.Args[2]
	m, k, n := a.Type.Shape.Dims[0], a.Type.Shape.Dims[1], bv.Type.Shape.Dims[1]
	t := v.Type
	size := elemBytes(t)
	accLay := l.layoutOf(acc)
	for _, x := range []*tile.Value{a, bv} {
		if _, err := l.demand(x, l.layoutOf(x)); err != nil {
			return err
		}
	}
	accv, err := l.demand(acc, accLay)
	if err != nil {
		return err
	}
	w := &l.body
	// A at [0, m*lda), B after it; rows padded against bank conflicts (for the
	// tensor-core fragments: A rows 4 words apart mod 32 banks, B rows 8)
	lda, ldb := k, n+1
	mmaLda, mmaLdb := k+4, n+8
	// on the tensor cores where the operands, so padded, and C's m×n fit
	// the target's shared memory beside the reductions' regions (a
	// 128×128×128 product needs 198 KB so, more than sm_80's 163); else by
	// FMAs on the same converted operands, which need no room for C
	mma := v.Prec.IsTF32() && t.DType == tile.F32 &&
		l.scratchOffset()+(m*mmaLda+k*mmaLdb+m*n)*size <= maxSmem(l.opt.Arch)
	// f32 on CUDA cores, with whole runs of 4 columns per thread: 16-byte
	// shared loads of 4 k of A's rows and 4 columns of B's (dotVec)
	d1 := -1
	if accLay != nil && len(accLay.Src) > 1 {
		d1 = accLay.Src[1]
	}
	vec := !mma && t.DType == tile.F32 && k%4 == 0 && n%4 == 0 && d1 >= 0 && accLay.B.SPT[d1]%4 == 0 && !accLay.B.wraps(d1)
	switch {
	case mma:
		lda, ldb = mmaLda, mmaLdb
	case vec:
		ldb = n + 4 // rows 16-byte aligned
	}
	bOff := m * lda * size
	cOff := bOff + k*ldb*size
	if mma {
		l.needSmem(cOff + m*n*size)
	} else {
		l.needSmem(cOff)
	}
	l.barrier(w)
	for _, op := range []struct {
		x      *tile.Value
		isA    bool // the operand's role: a and bv may be one value (dot(x, x))
		off    int
		stride int
	}{{a, true, 0, lda}, {bv, false, bOff, ldb}} {
		lay := l.layoutOf(op.x)
		xv, _ := l.demand(op.x, lay)
		slots := lay.B.slots()
		for _, cls := range l.classesOf(lay) {
			s := slots[cls[0]]
			r, c := l.valueCoord(lay, s, 0), l.valueCoord(lay, s, 1)
			idx := l.reg("r")
			emit(w, "mad.lo.s32 %s, %s, %d, %s", idx, regOrZero(w, l, r), op.stride, regOrZero(w, l, c))
			addr := l.smemSlot(w, idx, size, op.off)
			val := xv.regs[cls[0]]
			if v.Prec.IsTF32() && t.DType == tile.F32 {
				// as a TF32 dot sees them: PrecTF32's A truncated and B
				// rounded, PrecTF32TB's the other way round
				rt := l.reg("r")
				if op.isA == v.Prec.TruncatesA() {
					emitTruncTF32(w, "", rt, val)
				} else {
					l.roundTF32(w, "", rt, val)
				}
				emit(w, "st.shared.b32 [%s], %s", addr, rt)
			} else if v.Prec == tile.PrecBF16 && t.DType == tile.F32 {
				// rounded to bf16 and back (the upper half of an f32):
				// the FMAs' products are then exact, as the tensor cores'
				rt := l.reg("r")
				emit(w, "cvt.rn.bf16x2.f32 %s, %s, %s", rt, val, val)
				emit(w, "and.b32 %s, %s, -65536", rt, rt)
				emit(w, "st.shared.b32 [%s], %s", addr, rt)
			} else {
				emit(w, "st.shared.%s [%s], %s", memType(t), addr, val)
			}
		}
	}
	l.barrier(w)
	if mma {
		return l.dotMMA(v, accv, accLay, m, n, k, lda, ldb, bOff, cOff)
	}
	if vec {
		return l.dotVec(v, accv, accLay, k, ldb, bOff, d1)
	}
	ft := ptxFloat(t.DType)
	var rows, cols smemAddrs[string]
	type elem struct{ row, col, r string }
	var elems []elem
	res := l.dotAcc(w, accv, accLay, t, func(s slot, r string) {
		ri, ci := l.valueCoord(accLay, s, 0), l.valueCoord(accLay, s, 1)
		rows.at(l, w, ri, func() string { return regOrZero(w, l, ri) }, k*size, 0)
		cols.at(l, w, ci, func() string { return regOrZero(w, l, ci) }, size, bOff)
		elems = append(elems, elem{ri, ci, r})
	})
	// the k loop: one shared load per distinct row and column, one FMA per element
	kk := l.reg("r")
	emit(w, "mov.u32 %s, 0", kk)
	head := l.label("dot")
	w.WriteString(head + ":\n")
	av, bvals := map[string]string{}, map[string]string{}
	for _, ri := range rows.order {
		x := l.reg(regClass(t))
		emit(w, "ld.shared.%s %s, [%s]", ft, x, rows.reg[ri])
		av[ri] = x
	}
	for _, ci := range cols.order {
		x := l.reg(regClass(t))
		emit(w, "ld.shared.%s %s, [%s]", ft, x, cols.reg[ci])
		bvals[ci] = x
	}
	for _, e := range elems {
		emit(w, "fma.rn.%s %s, %s, %s, %s", ft, e.r, av[e.row], bvals[e.col], e.r)
	}
	rows.step(w, size)
	cols.step(w, ldb*size)
	l.dotLoopEnd(v, res, accLay, kk, 1, k, head)
	return nil
}

// smemAddrs is one shared-memory address register per key (a row's
// coordinate, a column, a run of columns), made at first use and kept in
// that order, so that the code emitted does not depend on map order.
type smemAddrs[K comparable] struct {
	reg   map[K]string
	order []K
}

// at makes k's register if it has none: coord()·scale + off past the
// scratch region's start (coord is called after the register is taken, as
// the emitted code has always numbered them).
func (a *smemAddrs[K]) at(l *lowerer, w *strings.Builder, k K, coord func() string, scale, off int) {
	if a.reg == nil {
		a.reg = map[K]string{}
	}
	if _, ok := a.reg[k]; ok {
		return
	}
	r := l.reg("r")
	emit(w, "mad.lo.s32 %s, %s, %d, %s", r, coord(), scale, l.smemAddr())
	if off != 0 {
		emit(w, "add.s32 %s, %s, %d", r, r, off)
	}
	a.reg[k] = r
	a.order = append(a.order, k)
}

// step advances every register by bytes (the k loop's step).
func (a *smemAddrs[K]) step(w *strings.Builder, bytes int) {
	for _, k := range a.order {
		emit(w, "add.s32 %s, %s, %d", a.reg[k], a.reg[k], bytes)
	}
}

// dotAcc copies a dot's accumulator into a register per distinct element
// of the result, calling each with the element's slot and register.
func (l *lowerer) dotAcc(w *strings.Builder, accv *lval, accLay *Layout, t tile.Type, each func(s slot, r string)) *lval {
	slots := accLay.B.slots()
	res := &lval{lay: accLay, regs: make([]string, nslots(accLay))}
	for _, cls := range l.classesOf(accLay) {
		r := l.reg(regClass(t))
		emit(w, "mov.%s %s, %s", ptxFloat(t.DType), r, accv.regs[cls[0]])
		for _, i := range cls {
			res.regs[i] = r
		}
		each(slots[cls[0]], r)
	}
	return res
}

// dotLoopEnd closes a dot's k loop (kk += step while below k) and names its
// result.
func (l *lowerer) dotLoopEnd(v *tile.Value, res *lval, accLay *Layout, kk string, step, k int, head string) {
	w := &l.body
	emit(w, "add.s32 %s, %s, %d", kk, kk, step)
	p := l.reg("p")
	emit(w, "setp.lt.s32 %s, %s, %d", p, kk, k)
	emit(w, "@%s bra.uni %s", p, head)
	l.barrier(w)
	l.natural[v.ID] = accLay
	l.remember(v, res)
}

// dotVec is the CUDA-core dot of f32 operands staged in shared memory (A
// at 0 with rows of k, B at bOff with rows of ldb), for an accumulator
// layout whose columns come in aligned runs of 4 per thread (d1 is that
// layout dimension). The k loop takes 4 steps at a time: one 16-byte load
// of 4 k per distinct row of A, one per run of 4 columns and k of B, then
// the FMAs, each element's in order of k as in dot's loop. Against dot's
// one 4-byte load per distinct row and column per k, that is a quarter of
// the shared-memory instructions, which bound the loop.
func (l *lowerer) dotVec(v *tile.Value, accv *lval, accLay *Layout, k, ldb, bOff, d1 int) error {
	w := &l.body
	const size = 4
	type elem struct {
		row         string
		group, lane int
		r           string
	}
	var rows smemAddrs[string]
	var groups smemAddrs[int]
	var elems []elem
	res := l.dotAcc(w, accv, accLay, v.Type, func(s slot, r string) {
		ri := l.valueCoord(accLay, s, 0)
		off := s.Off[d1]
		g := off - off%4
		rows.at(l, w, ri, func() string { return regOrZero(w, l, ri) }, k*size, 0)
		groups.at(l, w, g, func() string { return l.coord(accLay.B, d1, g) }, size, bOff)
		elems = append(elems, elem{ri, g, off % 4, r})
	})
	quad := func() [4]string {
		return [4]string{l.reg("f"), l.reg("f"), l.reg("f"), l.reg("f")}
	}
	kk := l.reg("r")
	emit(w, "mov.u32 %s, 0", kk)
	head := l.label("dot")
	w.WriteString(head + ":\n")
	av := map[string][4]string{}
	for _, ri := range rows.order {
		x := quad()
		emit(w, "ld.shared.v4.f32 {%s, %s, %s, %s}, [%s]", x[0], x[1], x[2], x[3], rows.reg[ri])
		av[ri] = x
	}
	bvals := map[int][4][4]string{} // per run of columns: per k step, the 4 columns
	for _, g := range groups.order {
		var per [4][4]string
		for j := range 4 {
			per[j] = quad()
			emit(w, "ld.shared.v4.f32 {%s, %s, %s, %s}, [%s+%d]", per[j][0], per[j][1], per[j][2], per[j][3], groups.reg[g], j*ldb*size)
		}
		bvals[g] = per
	}
	for j := range 4 {
		for _, e := range elems {
			emit(w, "fma.rn.f32 %s, %s, %s, %s", e.r, av[e.row][j], bvals[e.group][j][e.lane], e.r)
		}
	}
	rows.step(w, 4*size)
	groups.step(w, 4*ldb*size)
	l.dotLoopEnd(v, res, accLay, kk, 4, k, head)
	return nil
}

// regOrZero turns the constant coordinate "0" into a register.
func regOrZero(w *strings.Builder, l *lowerer, r string) string {
	if r != "0" {
		return r
	}
	z := l.reg("r")
	emit(w, "mov.u32 %s, 0", z)
	return z
}

// dotMMA finishes a TF32 dot on the tensor cores, its operands already in
// shared memory (rounded to TF32): each warp computes 16×8 tiles of A·B with
// mma.sync.m16n8k8 (tiles dealt round-robin to warps), writes them to shared
// memory at cOff, and every thread adds its elements to the accumulator.
// Fragments (PTX ISA, m16n8k8 .tf32), g = lane/4, t = lane%4:
// A a0..a3 at (g,t) (g+8,t) (g,t+4) (g+8,t+4); B b0,b1 at (t,g) (t+4,g);
// C c0..c3 at (g,2t) (g,2t+1) (g+8,2t) (g+8,2t+1).
func (l *lowerer) dotMMA(v *tile.Value, accv *lval, accLay *Layout, m, n, k, lda, ldb, bOff, cOff int) error {
	w := &l.body
	const size = 4
	tilesN := n / 8
	tiles := (m / 16) * tilesN
	warps := l.opt.NumWarps
	g, tq := l.reg("r"), l.reg("r")
	emit(w, "shr.u32 %s, %s, 2", g, l.laneID())
	emit(w, "and.b32 %s, %s, 3", tq, l.laneID())
	for j := 0; j*warps < tiles; j++ {
		tileID, skip, p := l.reg("r"), l.label("mma_skip"), l.reg("p")
		emit(w, "add.s32 %s, %s, %d", tileID, l.warpID(), j*warps)
		emit(w, "setp.ge.s32 %s, %s, %d", p, tileID, tiles)
		emit(w, "@%s bra %s", p, skip)
		row0, col0 := l.reg("r"), l.reg("r")
		emit(w, "div.u32 %s, %s, %d", row0, tileID, tilesN)
		emit(w, "mul.lo.s32 %s, %s, 16", row0, row0)
		emit(w, "rem.u32 %s, %s, %d", col0, tileID, tilesN)
		emit(w, "mul.lo.s32 %s, %s, 8", col0, col0)
		// addresses of this thread's fragment elements at k = 0
		ar, bc := l.reg("r"), l.reg("r")
		emit(w, "add.s32 %s, %s, %s", ar, row0, g)            // A row g
		emit(w, "mad.lo.s32 %s, %s, %d, %s", ar, ar, lda, tq) // + column t
		emit(w, "mad.lo.s32 %s, %s, %d, %s", ar, ar, size, l.smemAddr())
		emit(w, "add.s32 %s, %s, %s", bc, col0, g)            // B column g
		emit(w, "mad.lo.s32 %s, %s, %d, %s", bc, tq, ldb, bc) // + row t
		emit(w, "mad.lo.s32 %s, %s, %d, %s", bc, bc, size, l.smemAddr())
		c := [4]string{l.reg("f"), l.reg("f"), l.reg("f"), l.reg("f")}
		for _, r := range c {
			emit(w, "mov.f32 %s, 0f00000000", r)
		}
		for kk := 0; kk < k; kk += 8 {
			a := [4]string{l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")}
			bb := [2]string{l.reg("r"), l.reg("r")}
			emit(w, "ld.shared.b32 %s, [%s+%d]", a[0], ar, kk*size)
			emit(w, "ld.shared.b32 %s, [%s+%d]", a[1], ar, (8*lda+kk)*size)
			emit(w, "ld.shared.b32 %s, [%s+%d]", a[2], ar, (kk+4)*size)
			emit(w, "ld.shared.b32 %s, [%s+%d]", a[3], ar, (8*lda+kk+4)*size)
			emit(w, "ld.shared.b32 %s, [%s+%d]", bb[0], bc, bOff+kk*ldb*size)
			emit(w, "ld.shared.b32 %s, [%s+%d]", bb[1], bc, bOff+(kk+4)*ldb*size)
			emit(w, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%s, %s, %s, %s}, {%s, %s, %s, %s}, {%s, %s}, {%s, %s, %s, %s}",
				c[0], c[1], c[2], c[3], a[0], a[1], a[2], a[3], bb[0], bb[1], c[0], c[1], c[2], c[3])
		}
		// C tile to shared memory, row-major m×n at cOff
		cr := l.reg("r")
		emit(w, "add.s32 %s, %s, %s", cr, row0, g)
		emit(w, "mul.lo.s32 %s, %s, %d", cr, cr, n)
		t2 := l.reg("r")
		emit(w, "mad.lo.s32 %s, %s, 2, %s", t2, tq, col0)
		emit(w, "add.s32 %s, %s, %s", cr, cr, t2)
		emit(w, "mad.lo.s32 %s, %s, %d, %s", cr, cr, size, l.smemAddr())
		emit(w, "st.shared.v2.f32 [%s+%d], {%s, %s}", cr, cOff, c[0], c[1])
		emit(w, "st.shared.v2.f32 [%s+%d], {%s, %s}", cr, cOff+8*n*size, c[2], c[3])
		w.WriteString(skip + ":\n")
	}
	l.barrier(w)
	slots := accLay.B.slots()
	res := &lval{lay: accLay, regs: make([]string, nslots(accLay))}
	shape := tile.Shp(m, n)
	for _, cls := range l.classesOf(accLay) {
		a := l.smemSlot(w, l.flatIndex(accLay, shape, slots[cls[0]]), size, cOff)
		x, r := l.reg("f"), l.reg("f")
		emit(w, "ld.shared.f32 %s, [%s]", x, a)
		emit(w, "add.f32 %s, %s, %s", r, accv.regs[cls[0]], x)
		for _, i := range cls {
			res.regs[i] = r
		}
	}
	l.barrier(w)
	l.natural[v.ID] = accLay
	l.remember(v, res)
	return nil
}
