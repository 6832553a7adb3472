package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Realigned copies of B (the swapped TF32 form; meta-parameter realign_b
// = 1, where it applies; by default, and with 0, B's copies are as wide as
// its rows' alignment allows).
//
// Where B's rows are not 16-byte aligned (N = 4097: row k starts at word
// k·N of the buffer) its copies were 4 bytes wide, four times the cp.async
// of an aligned B through the load/store unit's queue. Instead each row of
// the tile is copied in 16-byte chunks from the aligned address at or below
// its first element: row k's elements start ph_k = (k·N) mod 4 words into
// its first chunk (the buffer and the tile's first column 16-byte aligned,
// the loop's step of k a multiple of 4), so that element (k, c) lands at
// word c + ph_k of the tile's row, which is BLOCK_N + 4 words long for the
// 33rd chunk a row needs where ph_k > 0 (issued by the thread whose group
// is the row's last; the chunks past BLOCK_N/4 are not swizzled:
// smemTile.addr). The fragment loads of Bᵀ read rows k0 + t and k0 + t + 4
// (swappedFrags), whose phases are both (t·N) mod 4: each thread's
// fragment addresses are shifted by its phase once, in the prologue.
//
// Masks: a chunk covers the last ph_k elements of the group of 4 before it
// and the first 4 − ph_k of its own, so its zero fill (cp.async's
// src-size) must stop at the first element the mask leaves out. That is
// known where the mask is a conjunction of factors constant along the
// row (k < K: the row copied or not) and at most one factor X < Y with X
// the column (coefficient 1 along n, 0 along k) and Y uniform: valid
// columns are a prefix of each row. From the number pc of valid elements
// of a thread's own group and pc' of the group before it (the lane before,
// shfl.sync.up, computed once before the loop: the column factor does not
// change in the loop), the chunk's count is min(4, pc + ph) where pc > 0,
// else max(0, pc' + ph − 4); the 33rd chunk's is max(0, pc + ph − 4) of the
// row's last group. Words before the tile's first column (row k's first
// chunk) are read but land where no fragment reads; they are in the
// buffer, below the row's first element in the same 16-byte block.

// realignB is the plan of realigned copies of a pipe's B.
type realignB struct {
	nw   int           // B's row stride in words, mod 4 (1, 2 or 3)
	col  *tile.Value   // the mask's column factor, nil where none
	rows []*tile.Value // the mask's factors constant along the row
	// set before the loop (realignSetup), per column coordinate register
	// of a thread's group: the byte counts of its chunk and of the row's
	// 33rd chunk; last: the group is the row's last (its thread copies the
	// 33rd chunk); g33: last and the phase's copies of the 33rd chunk (8
	// bytes where ph ≥ 2, 4 where ph = 1, 4 at +8 where ph = 3); full33:
	// the 33rd chunk's tile columns valid (else they are zeros)
	cnt, cnt32, last, full33 map[string]string
	g33                      map[string][3]string
	ph                       string // this thread's rows' phase, u32
	ph4                      string // 4·ph, u64
	// slow: the warp-uniform predicate that some chunk of the warp is
	// partial (a count neither 0 nor 16, or a 33rd chunk's neither 0 nor
	// 4·ph: a boundary tile's); "" where none can be (no column factor)
	slow string
}

// planRealignB decides whether p's B is copied realigned, and widens its
// tile by the 33rd chunk where it is.
func (l *lowerer) planRealignB(p *pipe) {
	if !p.swapped || p.dot.Prec != tile.PrecTF32 || p.copyPass() || p.ws || p.bT || p.ss || p.copy[1] != nil ||
		l.perSlotAddr() || p.n%32 != 0 {
		return
	}
	if l.k.Meta["realign_b"] != 1 {
		return
	}
	ld := p.loads[1]
	a := l.affineOf(ld.Args[0], map[*tile.Value]*affine{})
	if a == nil || len(a.Coef) != 2 || a.Coef[1] != 4 || a.Coef[0]%4 != 0 || a.Coef[0]%16 == 0 || a.Div < 16 {
		return
	}
	rb := &realignB{nw: int(a.Coef[0]/4) & 3}
	if len(ld.Args) > 1 {
		var factors []*tile.Value
		var split func(v *tile.Value)
		split = func(v *tile.Value) {
			if v.Op == tile.OpAnd {
				split(v.Args[0])
				split(v.Args[1])
				return
			}
			factors = append(factors, v)
		}
		split(ld.Args[1])
		body := p.loop.Body
		memo := map[*tile.Value]*affine{}
		for _, f := range factors {
			if l.runs(f, 1, memo) >= int64(p.n) {
				rb.rows = append(rb.rows, f)
				continue
			}
			if rb.col != nil || !l.columnPrefix(f, memo) {
				return
			}
			for _, x := range body.Args {
				if dependsOn(f, x) {
					return
				}
			}
			rb.col = f
		}
	}
	p.rb = rb
	p.b.Cols += 4
	var gb [][]access
	for r := 0; r < p.k; r += 8 {
		for c := 0; c < p.n; c += 8 {
			gb = append(gb, rb.fragGroups(r, c)...)
		}
	}
	p.b.Swz = chooseSwizzle(p.b, gb, 4)
}

// fragGroups are bFragGroups with each row's phase.
func (rb *realignB) fragGroups(k0, n0 int) [][]access {
	g := bFragGroups(k0, n0)
	for _, x := range g {
		for i := range x {
			x[i].C += x[i].R * rb.nw % 4
		}
	}
	return g
}

// columnPrefix reports whether the i1 block f (through broadcasts) is
// X < Y (or X ≤ Y, Y > X, Y ≥ X) with X the column plus a constant along
// the row (coefficient 1 along dimension 1, 0 along 0) and Y uniform: a
// prefix of each row's columns.
func (l *lowerer) columnPrefix(f *tile.Value, memo map[*tile.Value]*affine) bool {
	for f.Op == tile.OpBroadcast {
		f = f.Args[0]
	}
	var x, y *tile.Value
	switch f.Op {
	case tile.OpLt, tile.OpLe:
		x, y = f.Args[0], f.Args[1]
	case tile.OpGt, tile.OpGe:
		x, y = f.Args[1], f.Args[0]
	default:
		return false
	}
	ax, ay := l.affineOf(x, memo), l.affineOf(y, memo)
	return ax != nil && ay != nil && len(ax.Coef) == 2 && ax.Coef[0] == 0 && ax.Coef[1] == 1 && ay.uniform()
}

// realignCheck reports why the load layout lay of B does not suit the
// realigned copies ("" where it does): each thread's groups of 4 columns
// start at multiples of 4 and are copied by it alone, the group before
// each (4 columns left in the same row) is the same slots' of the lane
// before, the row's first group lane 0's, and a thread's rows have one
// phase.
func (rb *realignB) realignCheck(l *lowerer, lay *Layout) string {
	if lay == nil || lay.B.rank() != 2 || len(lay.Src) != 2 || lay.Src[0] != 0 || lay.Src[1] != 1 {
		return "B's copies not in a 2-d layout of [k][n]"
	}
	slots := lay.B.slots()
	classes := l.classesOf(lay)
	if len(classes)%4 != 0 {
		return "slots not in groups of 4"
	}
	warps := 1
	for _, n := range lay.B.WPC {
		warps *= n
	}
	for ci := 0; ci < len(classes); ci += 4 {
		if own, never := l.owner(lay, slots[classes[ci][0]]); own != "" || never {
			return "copies shared between threads"
		}
	}
	for w := 0; w < warps; w++ {
		for ln := 0; ln < 32; ln++ {
			ph := -1
			for ci := 0; ci < len(classes); ci += 4 {
				c := lay.B.coordOf(ln, w, slots[classes[ci][0]])
				if c[1]%4 != 0 {
					return "a group not at a multiple of 4 columns"
				}
				for j := 1; j < 4; j++ {
					d := lay.B.coordOf(ln, w, slots[classes[ci+j][0]])
					if d[0] != c[0] || d[1] != c[1]+j {
						return "a group's slots not consecutive columns"
					}
				}
				if q := c[0] * rb.nw % 4; ph < 0 {
					ph = q
				} else if q != ph {
					return "a thread's rows of different phases"
				}
				switch {
				case c[1] == 0 && ln != 0:
					return "a row's first group not lane 0's"
				case c[1] > 0:
					if ln == 0 {
						return "lane 0's group not a row's first"
					}
					d := lay.B.coordOf(ln-1, w, slots[classes[ci][0]])
					if d[0] != c[0] || d[1] != c[1]-4 {
						return "the group before not the lane before's"
					}
				}
			}
		}
	}
	return ""
}

// realignSetup readies p's realigned copies before its loop: the checks
// of the copy layout (p.rb dropped where it fails: the copies are then
// the old ones, the tile's extra chunk unused), each thread's phase, the
// byte counts of its chunks and whether its warp copies a partial one.
func (l *lowerer) realignSetup(p *pipe) error {
	rb := p.rb
	lay := l.plan.access[p.loads[1].ID]
	if why := rb.realignCheck(l, lay); why != "" {
		p.rb, p.rbDeclined = nil, why
		return nil
	}
	w := &l.body
	slots := lay.B.slots()
	classes := l.classesOf(lay)
	first := slots[classes[0][0]]
	row := l.valueCoord(lay, first, 0)
	rb.ph = l.geo(fmt.Sprintf("realign|ph|%d|%s", rb.nw, row), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "mul.lo.s32 %s, %s, %d", r, regOrZero(w, l, row), rb.nw)
		emit(w, "and.b32 %s, %s, 3", r, r)
		return r
	})
	rb.ph4 = l.geo("realign|ph4|"+rb.ph, func(w *strings.Builder) string {
		r := l.reg("rd")
		emit(w, "mul.wide.u32 %s, %s, 4", r, rb.ph)
		return r
	})
	ph4w := l.reg("r")
	emit(w, "shl.b32 %s, %s, 2", ph4w, rb.ph)
	var phIs [4]string // ph == 1, ph ≥ 2, ph == 3
	for i, c := range []string{"eq.u32 %s, %s, 1", "ge.u32 %s, %s, 2", "eq.u32 %s, %s, 3"} {
		phIs[i] = l.reg("p")
		emit(w, "setp."+c, phIs[i], rb.ph)
	}
	rb.cnt, rb.cnt32, rb.last, rb.full33 = map[string]string{}, map[string]string{}, map[string]string{}, map[string]string{}
	rb.g33 = map[string][3]string{}
	var col *lval
	if rb.col != nil {
		var err error
		if col, err = l.demand(rb.col, lay); err != nil {
			return err
		}
	}
	part := ""
	for ci := 0; ci < len(classes); ci += 4 {
		s := slots[classes[ci][0]]
		key := l.valueCoord(lay, s, 1)
		if _, ok := rb.cnt[key]; ok {
			continue
		}
		last := l.reg("p")
		emit(w, "setp.eq.s32 %s, %s, %d", last, regOrZero(w, l, key), p.n-4)
		rb.last[key] = last
		var g [3]string
		for i, q := range []string{phIs[1], phIs[0], phIs[2]} {
			g[i] = l.reg("p")
			emit(w, "and.pred %s, %s, %s", g[i], last, q)
		}
		rb.g33[key] = g
		if col == nil {
			// every column: full chunks, and the 33rd the row's last ph
			rb.cnt[key], rb.cnt32[key] = "16", ph4w
			rb.full33[key] = last
			continue
		}
		pc := l.reg("r")
		emit(w, "selp.u32 %s, 1, 0, %s", pc, col.regs[classes[ci][0]])
		for j := 1; j < 4; j++ {
			t := l.reg("r")
			emit(w, "selp.u32 %s, 1, 0, %s", t, col.regs[classes[ci+j][0]])
			emit(w, "add.u32 %s, %s, %s", pc, pc, t)
		}
		prev, in := l.reg("r"), l.reg("p")
		emit(w, "shfl.sync.up.b32 %s|%s, %s, 1, 0, -1", prev, in, pc)
		emit(w, "selp.u32 %s, %s, 0, %s", prev, prev, in)
		// min(4, pc + ph) where pc > 0, else max(0, pc' + ph − 4); ×4
		a, b, c := l.reg("r"), l.reg("r"), l.reg("r")
		emit(w, "add.u32 %s, %s, %s", a, pc, rb.ph)
		emit(w, "min.u32 %s, %s, 4", a, a)
		emit(w, "add.s32 %s, %s, %s", b, prev, rb.ph)
		emit(w, "sub.s32 %s, %s, 4", b, b)
		emit(w, "max.s32 %s, %s, 0", b, b)
		q := l.reg("p")
		emit(w, "setp.gt.u32 %s, %s, 0", q, pc)
		emit(w, "selp.u32 %s, %s, %s, %s", c, a, b, q)
		emit(w, "shl.b32 %s, %s, 2", c, c)
		rb.cnt[key] = c
		c32 := l.reg("r")
		emit(w, "add.s32 %s, %s, %s", c32, pc, rb.ph)
		emit(w, "sub.s32 %s, %s, 4", c32, c32)
		emit(w, "max.s32 %s, %s, 0", c32, c32)
		emit(w, "shl.b32 %s, %s, 2", c32, c32)
		rb.cnt32[key] = c32
		f := l.reg("p")
		emit(w, "setp.ne.u32 %s, %s, 0", f, c32)
		emit(w, "and.pred %s, %s, %s", f, f, last)
		rb.full33[key] = f
		// partial: 0 < cnt < 16, or the row's last with 0 < cnt32 < 4·ph
		x, y := l.reg("p"), l.reg("p")
		emit(w, "setp.ne.u32 %s, %s, 0", x, c)
		emit(w, "setp.ne.u32 %s, %s, 16", y, c)
		emit(w, "and.pred %s, %s, %s", x, x, y)
		emit(w, "setp.ne.u32 %s, %s, %s", y, c32, ph4w)
		emit(w, "and.pred %s, %s, %s", y, y, f)
		emit(w, "or.pred %s, %s, %s", x, x, y)
		if part != "" {
			emit(w, "or.pred %s, %s, %s", x, x, part)
		}
		part = x
	}
	if part != "" {
		rb.slow = l.reg("p")
		emit(w, "vote.sync.any.pred %s, %s, -1", rb.slow, part)
	}
	return nil
}

// plusImm is the address a ("reg" or "reg+imm", copyBases') d bytes on.
func plusImm(a string, d int) string {
	if d == 0 {
		return a
	}
	reg, imm := a, 0
	if i := strings.IndexByte(a, '+'); i >= 0 {
		reg = a[:i]
		fmt.Sscan(a[i+1:], &imm)
	}
	if imm+d == 0 {
		return reg
	}
	return fmt.Sprintf("%s+%d", reg, imm+d)
}

// realignedCopies issues the copies of p's B (load ld in layout lay) of
// the iteration whose predicate is live into the stage at sp: a 16-byte
// chunk a group from the aligned address below it (count: realignSetup),
// and the row's 33rd chunk's ph words from the thread whose group is its
// last (8 and 4 bytes, each whole or zeros); need as asyncCopies'. Where
// the warp copies a partial chunk (rb.slow: a boundary tile) it takes
// another path, where such a chunk is four 4-byte copies and the 33rd
// chunk's words 4-byte copies too, so that no copy's range passes the
// valid columns (where B's last row ends its buffer, compute-sanitizer's
// memcheck reports a 16-byte copy past the end whatever its src-size).
func (l *lowerer) realignedCopies(p *pipe, ld *tile.Value, lay *Layout, live, sp string, need func(s slot) string) error {
	w := &l.body
	rb, t := p.rb, p.b
	args, err := l.demandAll(ld.Args[:1], lay)
	if err != nil {
		return err
	}
	var rows []*lval
	for _, f := range rb.rows {
		x, err := l.demand(f, lay)
		if err != nil {
			return err
		}
		rows = append(rows, x)
	}
	ptr := l.affineOf(ld.Args[0], map[*tile.Value]*affine{})
	type chunk struct {
		key, pred, q       string // q: the k tail's guard ("" none)
		sa, da, sa32, da32 string
	}
	var cs []chunk
	var src, dst, dst32 copyBases
	l.ownedGroups(lay, 4, func(first int, s slot, _ string) {
		c := chunk{key: l.valueCoord(lay, s, 1), pred: live}
		for _, x := range rows {
			r := l.reg("p")
			emit(w, "and.pred %s, %s, %s", r, c.pred, x.regs[first])
			c.pred = r
		}
		if need != nil {
			c.q = need(s)
		}
		base := func() string {
			r := l.reg("rd")
			emit(w, "sub.s64 %s, %s, %s", r, args[0].regs[first], rb.ph4)
			return r
		}
		c.sa = src.addr(lay, s, ptr.step, base)
		c.da = dst.addr(lay, s, func(vc []int) int64 { return int64(t.slotAddr(vc, false)) }, func() string {
			r := l.reg("r")
			emit(w, "add.s32 %s, %s, %s", r, sp, l.tileSlot(t, lay, s, false))
			return r
		})
		c.sa32 = src.addr(lay, s, func(c []int) int64 { return ptr.step(c) + 16 }, base)
		c.da32 = dst32.addr(lay, s, func(vc []int) int64 { return int64(t.Off + vc[0]*t.rowBytes() + 4*p.n) }, func() string {
			row := l.valueCoord(lay, s, 0)
			off := l.geo(fmt.Sprintf("realign|row|%v|%s", t, row), func(w *strings.Builder) string {
				r := l.reg("r")
				emit(w, "mad.lo.s32 %s, %s, %d, %s", r, regOrZero(w, l, row), t.rowBytes(), l.smemAddr())
				emit(w, "add.s32 %s, %s, %d", r, r, t.Off+4*p.n)
				return r
			})
			r := l.reg("r")
			emit(w, "add.s32 %s, %s, %s", r, sp, off)
			return r
		})
		cs = append(cs, c)
	})
	// and: a ∧ b as a predicate register ("" stands for true)
	and := func(a, b string) string {
		switch {
		case a == "":
			return b
		case b == "":
			return a
		}
		r := l.reg("p")
		emit(w, "and.pred %s, %s, %s", r, a, b)
		return r
	}
	size := func(n any, pred string) string {
		r := l.reg("r")
		emit(w, "selp.u32 %s, %v, 0, %s", r, n, pred)
		return r
	}
	fast := func() {
		for _, c := range cs {
			emit(w, "%scp.async.cg.shared.global [%s], [%s], 16, %s", guardOf(c.q), c.da, c.sa, size(rb.cnt[c.key], c.pred))
			// the 33rd chunk: its ph words whole (or zeros)
			g, f := rb.g33[c.key], and(c.pred, rb.full33[c.key])
			s8, s4 := size(8, f), size(4, f)
			emit(w, "@%s cp.async.ca.shared.global [%s], [%s], 8, %s", and(g[0], c.q), c.da32, c.sa32, s8)
			emit(w, "@%s cp.async.ca.shared.global [%s], [%s], 4, %s", and(g[1], c.q), c.da32, c.sa32, s4)
			emit(w, "@%s cp.async.ca.shared.global [%s], [%s], 4, %s", and(g[2], c.q), plusImm(c.da32, 8), plusImm(c.sa32, 8), s4)
		}
	}
	if rb.slow == "" {
		fast()
		return nil
	}
	slow, done := l.label("realign_slow"), l.label("realign_done")
	emit(w, "@%s bra.uni %s", rb.slow, slow)
	fast()
	emit(w, "bra.uni %s", done)
	w.WriteString(slow + ":\n")
	for _, c := range cs {
		cnt := rb.cnt[c.key]
		x, y := l.reg("p"), l.reg("p")
		emit(w, "setp.eq.u32 %s, %s, 0", x, cnt)
		emit(w, "setp.eq.u32 %s, %s, 16", y, cnt)
		emit(w, "or.pred %s, %s, %s", x, x, y) // whole (or nothing): one copy
		emit(w, "not.pred %s, %s", y, x)
		emit(w, "@%s cp.async.cg.shared.global [%s], [%s], 16, %s", and(x, c.q), c.da, c.sa, size(cnt, c.pred))
		part := and(y, c.q)
		for i := range 4 {
			v := l.reg("p")
			emit(w, "setp.gt.u32 %s, %s, %d", v, cnt, 4*i)
			emit(w, "@%s cp.async.ca.shared.global [%s], [%s], 4, %s", part, plusImm(c.da, 4*i), plusImm(c.sa, 4*i), size(4, and(c.pred, v)))
		}
		for i := range 3 {
			v, g := l.reg("p"), l.reg("p")
			emit(w, "setp.gt.u32 %s, %s, %d", v, rb.cnt32[c.key], 4*i)
			emit(w, "setp.gt.u32 %s, %s, %d", g, rb.ph, i)
			emit(w, "@%s cp.async.ca.shared.global [%s], [%s], 4, %s", and(and(g, rb.last[c.key]), c.q), plusImm(c.da32, 4*i), plusImm(c.sa32, 4*i), size(4, and(c.pred, v)))
		}
	}
	w.WriteString(done + ":\n")
	return nil
}

// realignedFragBase is swizzledBase for B's realigned tile: the fragment
// column col shifted by the phase of the thread's rows (row: t, whose
// rows t + 4i share it), its chunk (plus res) swizzled where it is one of
// the row's first n/4.
func (l *lowerer) realignedFragBase(p *pipe, row, col string, res int) string {
	t, rb := p.b, p.rb
	key := fmt.Sprintf("rfrag|%v|%d|%s|%s|%d", t, rb.nw, row, col, res)
	return l.geo(key, func(w *strings.Builder) string {
		ph, c := l.reg("r"), l.reg("r")
		emit(w, "mul.lo.s32 %s, %s, %d", ph, row, rb.nw)
		emit(w, "and.b32 %s, %s, 3", ph, ph)
		emit(w, "add.s32 %s, %s, %s", c, col, ph)
		ch, in := l.reg("r"), l.reg("r")
		emit(w, "shr.u32 %s, %s, 2", ch, c)
		emit(w, "add.s32 %s, %s, %d", ch, ch, res)
		emit(w, "and.b32 %s, %s, 3", in, c)
		sw := l.phase(w, t.Swz, row)
		whole := l.reg("p")
		emit(w, "setp.lt.u32 %s, %s, %d", whole, ch, t.swizzled())
		emit(w, "selp.u32 %s, %s, 0, %s", sw, sw, whole)
		emit(w, "xor.b32 %s, %s, %s", ch, ch, sw)
		return l.tileAddr(w, t, row, ch, in)
	})
}
