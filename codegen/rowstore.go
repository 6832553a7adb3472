package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Row stores (the swapped form's epilogue through shared memory where the
// output's rows are not 16-byte aligned; meta-parameter row_stores = 1).
//
// With rows of N = 4097 words the epilogue read the accumulator back in
// runs of one element and stored it a word at a time: 64 scalar st.global
// a thread at 128×128, four times the aligned rows' 16-byte stores, and
// the stores' queue stalled the warps (ncu on the H200, 2026-12-04, r24d:
// 540 K store instructions against 135 K at N = 4100, lg_throttle 7.8
// stalls an issue against 0.4, 31.0 µs against 24.7). Here the
// accumulator goes into the [m][n+4] tile with row r shifted by its phase
// ph_r = (r·ldc) mod 4 words (the output's rows ldc words apart, its
// tile's first element 16-byte aligned), so that each row's 16-byte
// aligned run of columns [c0, c1), c0 = (4 − ph_r) mod 4, is 16-byte
// aligned in shared memory too, and one thread a row writes that run by
// one bulk copy (cp.async.bulk.global.shared::cta), and the at most 3 + 3
// columns before and after it by scalar stores.
//
// The store must be of the loop's result itself (no epilogue op between),
// f32, its pointer affine with columns 4 bytes apart, and its mask (if
// any) a conjunction of factors constant along the row and at most one
// column prefix X < Y (as realign.go's): rows' and columns' flags are
// written to shared memory beside the tile by the threads that hold
// column 0 and row 0 of them, and each row's thread finds the columns'
// limit by a binary search of the flags.

// rowStore is the plan of a swapped epilogue's store by rows.
type rowStore struct {
	st   *tile.Value   // the store of the loop's result
	ldc  int64         // the output's row stride in bytes
	col  *tile.Value   // the mask's column factor, nil where none
	rows []*tile.Value // the mask's row factors
}

// planRowStore returns the row stores of loop result r of pipe p, or nil
// where they do not apply.
func (l *lowerer) planRowStore(p *pipe, r *tile.Value) *rowStore {
	if !p.swapped || !p.epiSmem || l.k.Meta["row_stores"] != 1 || l.barThreads > 0 || l.opt.Arch < 90 || r.Type.DType != tile.F32 {
		return nil
	}
	us := l.users[r.ID]
	if len(us) != 1 || us[0].Op != tile.OpStore || us[0].Args[1] != r {
		return nil
	}
	st := us[0]
	memo := map[*tile.Value]*affine{}
	a := l.affineOf(st.Args[0], memo)
	if a == nil || len(a.Coef) != 2 || a.Coef[1] != 4 || a.Coef[0] <= 0 || a.Coef[0]%4 != 0 || a.Coef[0]%16 == 0 || a.Div < 16 {
		return nil
	}
	rs := &rowStore{st: st, ldc: a.Coef[0]}
	if len(st.Args) > 2 {
		var split func(v *tile.Value) bool
		split = func(v *tile.Value) bool {
			switch {
			case v.Op == tile.OpAnd:
				return split(v.Args[0]) && split(v.Args[1])
			case l.runs(v, 1, memo) >= int64(p.n):
				rs.rows = append(rs.rows, v)
				return true
			case rs.col == nil && l.columnPrefix(v, memo):
				rs.col = v
				return true
			}
			return false
		}
		if !split(st.Args[2]) {
			return nil
		}
	}
	return rs
}

// rowStores emits the epilogue of pipe p's accumulator acc by plan rs: the
// accumulator into the shifted tile, the flags, then the bulk copies and
// the fringes' scalar stores; to is the loop result's layout, in which the
// store's pointer and mask are read.
func (l *lowerer) rowStores(p *pipe, acc *lval, to *Layout, rs *rowStore) error {
	w := &l.body
	stride := p.n + epiPad
	tileBytes := p.m * stride * 4
	colFlags, rowFlags := tileBytes, tileBytes+p.n
	l.needSmem(rowFlags + p.m)
	cw := int(rs.ldc/4) & 3
	ph := func(r int) int { return r * cw & 3 }
	// the accumulator, row r at +ph_r words
	elem := func(vc []int) int64 { return int64(4 * (vc[0]*stride + vc[1] + ph(vc[0]))) }
	var bases copyBases
	slots := acc.lay.B.slots()
	for _, cls := range l.classesOf(acc.lay) {
		s := slots[cls[0]]
		a := bases.addr(acc.lay, s, elem, func() string {
			row, col := l.valueCoord(acc.lay, s, 0), l.valueCoord(acc.lay, s, 1)
			i := l.reg("r")
			emit(w, "mad.lo.s32 %s, %s, %d, %s", i, regOrZero(w, l, row), stride, regOrZero(w, l, col))
			q := l.reg("r")
			emit(w, "mul.lo.s32 %s, %s, %d", q, regOrZero(w, l, row), cw)
			emit(w, "and.b32 %s, %s, 3", q, q)
			emit(w, "add.s32 %s, %s, %s", i, i, q)
			return l.smemSlot(w, i, 4, 0)
		})
		emit(w, "st.shared.f32 [%s], %s", a, acc.regs[cls[0]])
	}
	// the flags: rows' where the thread holds their column 0, columns'
	// where it holds their row 0
	tslots := to.B.slots()
	flag := func(fs []*tile.Value, dim int, at int) error {
		var xs []*lval
		for _, f := range fs {
			x, err := l.demand(f, to)
			if err != nil {
				return err
			}
			xs = append(xs, x)
		}
		other := 1 - dim
		is0 := map[string]string{}
		for _, cls := range l.classesOf(to) {
			s := tslots[cls[0]]
			if d := to.Src[other]; d >= 0 && s.Off[d] != 0 {
				continue // not the thread's first coordinate along the other dimension
			}
			oc := l.valueCoord(to, s, other)
			q, ok := is0[oc]
			if !ok {
				q = l.reg("p")
				emit(w, "setp.eq.s32 %s, %s, 0", q, regOrZero(w, l, oc))
				is0[oc] = q
			}
			pr := xs[0].regs[cls[0]]
			for _, x := range xs[1:] {
				r := l.reg("p")
				emit(w, "and.pred %s, %s, %s", r, pr, x.regs[cls[0]])
				pr = r
			}
			v := l.reg("r")
			emit(w, "selp.u32 %s, 1, 0, %s", v, pr)
			a := l.reg("r")
			emit(w, "add.s32 %s, %s, %s", a, l.smemAddr(), regOrZero(w, l, l.valueCoord(to, s, dim)))
			emit(w, "@%s st.shared.u8 [%s+%d], %s", q, a, at, v)
		}
		return nil
	}
	if len(rs.rows) > 0 {
		if err := flag(rs.rows, 0, rowFlags); err != nil {
			return err
		}
	}
	if rs.col != nil {
		if err := flag([]*tile.Value{rs.col}, 1, colFlags); err != nil {
			return err
		}
	}
	// the origin: the store's pointer at the tile's element (0, 0)
	ptr, err := l.demand(rs.st.Args[0], to)
	if err != nil {
		return err
	}
	s0 := tslots[l.classesOf(to)[0][0]]
	r0, c0 := regOrZero(w, l, l.valueCoord(to, s0, 0)), regOrZero(w, l, l.valueCoord(to, s0, 1))
	origin, t64 := l.reg("rd"), l.reg("rd")
	emit(w, "mul.wide.s32 %s, %s, %d", t64, r0, rs.ldc)
	emit(w, "sub.s64 %s, %s, %s", origin, ptr.regs[l.classesOf(to)[0][0]], t64)
	emit(w, "mul.wide.s32 %s, %s, 4", t64, c0)
	emit(w, "sub.s64 %s, %s, %s", origin, origin, t64)
	emit(w, "fence.proxy.async.shared::cta") // the tile, read by the bulk copies
	l.barrier(w)
	// the columns' limit: the first column whose flag is 0 (a prefix)
	hi := fmt.Sprint(p.n)
	if rs.col != nil {
		lo, n := l.reg("r"), l.reg("r")
		emit(w, "mov.u32 %s, 0", lo)
		emit(w, "mov.u32 %s, %d", n, p.n)
		// invariant: flags [0, lo) are 1, [lo+n, p.n) are 0
		for step := p.n; step > 1; {
			half := step / 2
			mid, f, q := l.reg("r"), l.reg("r"), l.reg("p")
			emit(w, "add.u32 %s, %s, %d", mid, lo, half-1)
			emit(w, "add.u32 %s, %s, %s", f, l.smemAddr(), mid)
			emit(w, "ld.shared.u8 %s, [%s+%d]", f, f, colFlags)
			emit(w, "setp.ne.u32 %s, %s, 0", q, f)
			emit(w, "@%s add.u32 %s, %s, %d", q, lo, lo, half)
			step -= half
		}
		// lo is the last candidate: its own flag decides
		f, q := l.reg("r"), l.reg("p")
		emit(w, "min.u32 %s, %s, %d", f, lo, p.n-1)
		emit(w, "add.u32 %s, %s, %s", f, l.smemAddr(), f)
		emit(w, "ld.shared.u8 %s, [%s+%d]", f, f, colFlags)
		emit(w, "setp.ne.u32 %s, %s, 0", q, f)
		emit(w, "@%s add.u32 %s, %s, 1", q, lo, lo)
		emit(w, "min.u32 %s, %s, %d", lo, lo, p.n)
		hi = lo
	}
	threads := 32 * l.opt.NumWarps
	tid := l.tid()
	for base := 0; base < p.m; base += threads {
		row := l.reg("r")
		emit(w, "add.u32 %s, %s, %d", row, tid, base)
		ok := l.reg("p")
		emit(w, "setp.lt.u32 %s, %s, %d", ok, row, p.m)
		if len(rs.rows) > 0 {
			f, q := l.reg("r"), l.reg("p")
			emit(w, "min.u32 %s, %s, %d", f, row, p.m-1)
			emit(w, "add.u32 %s, %s, %s", f, l.smemAddr(), f)
			emit(w, "ld.shared.u8 %s, [%s+%d]", f, f, rowFlags)
			emit(w, "setp.ne.and.u32 %s, %s, 0, %s", q, f, ok)
			ok = q
		}
		// ph, c0 = (4 − ph) mod 4, the aligned run's end c1 = c0 + ⌊(hi − c0)/4⌋·4
		phr, cs, ce, n := l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")
		emit(w, "mul.lo.s32 %s, %s, %d", phr, row, cw)
		emit(w, "and.b32 %s, %s, 3", phr, phr)
		emit(w, "neg.s32 %s, %s", cs, phr)
		emit(w, "and.b32 %s, %s, 3", cs, cs)
		emit(w, "sub.s32 %s, %s, %s", n, hi, cs)
		emit(w, "max.s32 %s, %s, 0", n, n)
		emit(w, "and.b32 %s, %s, -4", n, n)
		emit(w, "add.s32 %s, %s, %s", ce, cs, n)
		// shared: tile + 4·(row·stride + c + ph); global: origin + row·ldc + 4·c
		sRow, gRow := l.reg("r"), l.reg("rd")
		emit(w, "mad.lo.s32 %s, %s, %d, %s", sRow, row, stride, phr)
		emit(w, "shl.b32 %s, %s, 2", sRow, sRow)
		emit(w, "add.s32 %s, %s, %s", sRow, sRow, l.smemAddr())
		emit(w, "mul.wide.u32 %s, %s, %d", gRow, row, rs.ldc)
		emit(w, "add.s64 %s, %s, %s", gRow, gRow, origin)
		at := func(c string) (sh, gl string) {
			sh, gl = l.reg("r"), l.reg("rd")
			emit(w, "mad.lo.s32 %s, %s, 4, %s", sh, c, sRow)
			emit(w, "mul.wide.s32 %s, %s, 4", gl, c)
			emit(w, "add.s64 %s, %s, %s", gl, gl, gRow)
			return sh, gl
		}
		sh, gl := at(cs)
		bytes, q := l.reg("r"), l.reg("p")
		emit(w, "shl.b32 %s, %s, 2", bytes, n)
		emit(w, "setp.gt.and.s32 %s, %s, 0, %s", q, n, ok)
		emit(w, "@%s cp.async.bulk.global.shared::cta.bulk_group [%s], [%s], %s", q, gl, sh, bytes)
		// the fringes: columns [0, c0) and [c1, hi), at most 3 each
		for _, from := range []string{"", ce} {
			for k := range 3 {
				c := l.reg("r")
				if from == "" {
					emit(w, "mov.u32 %s, %d", c, k)
				} else {
					emit(w, "add.s32 %s, %s, %d", c, from, k)
				}
				v := l.reg("p")
				emit(w, "setp.lt.and.s32 %s, %s, %s, %s", v, c, hi, ok)
				if from == "" {
					emit(w, "setp.lt.and.s32 %s, %s, %s, %s", v, c, cs, v)
				}
				sh, gl := at(c)
				x := l.reg("f")
				emit(w, "@%s ld.shared.f32 %s, [%s]", v, x, sh)
				emit(w, "@%s st.global.f32 [%s], %s", v, gl, x)
			}
		}
	}
	emit(w, "cp.async.bulk.commit_group")
	emit(w, "cp.async.bulk.wait_group.read 0")
	l.barrier(w) // the scratch region is free again
	if l.skipStore == nil {
		l.skipStore = map[int]bool{}
	}
	l.skipStore[rs.st.ID] = true
	return nil
}

// rowStoreNote describes rs for the pipeline dump.
func (rs *rowStore) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stored by rows: a bulk copy of each row's 16-byte aligned run (rows %d bytes apart), scalar stores of its ends", rs.ldc)
	if rs.col != nil {
		b.WriteString(", columns masked by a prefix")
	}
	return b.String()
}
