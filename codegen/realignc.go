package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Realigned stores of C (the swapped form's epilogue through shared memory,
// meta-parameter realign_c = 1, where it applies).
//
// Where the output's rows are not 16-byte aligned (N = 4097: row i starts
// at word i·N of the buffer) the epilogue's stores are 4 bytes wide, four
// times the store instructions of an aligned output through the load/store
// unit's queue (the H200, 4096×4097×32: 540 K against 135 K, the store
// queue's stalls 7.8 an issue against 0.4). Instead the accumulator is
// stored into the epilogue's tile shifted by each row's phase: element
// (i, j) of the block at word i·S + j + ph_i, ph_i = (i·N) mod 4 (the
// pointer's origin 16-byte aligned, rows S = BLOCK_N + 4 words apart), so
// that the 16-byte chunks of row i in memory, which start ph_i elements
// before the row's first, are 16-byte aligned chunks of the tile: chunk q
// at word i·S + 4q holds columns 4q − ph_i … 4q − ph_i + 3. Chunks 1 to
// BLOCK_N/4 − 1 lie inside the row; they are stored by every thread in
// turn, 32 consecutive chunks a warp (the interior). Chunk 0's last 4 − ph_i
// elements and chunk BLOCK_N/4's first ph_i (the fringe) are stored a row a
// thread, by narrower stores predicated on the row's phase: 7 stores a warp
// for 32 rows. A warp's stores of 32 rows are then 31 + 7 instructions
// where scalar stores take 128 (and 32 where rows are aligned).
//
// Masks: the store's mask must be a conjunction of bounds X < Y (≤, >, ≥)
// with X the row (coefficient 1 along dimension 0, 0 along 1) or the column
// (0, 1) and Y uniform, so that valid rows and columns are prefixes of the
// block, counted once from the values at the block's origin (originOf).
// A block whose columns are all valid takes the chunks; the last block of
// columns (some invalid) takes scalar stores, a warp a row (still from the
// shifted tile).

// realignC is the plan of a realigned store of C.
type realignC struct {
	st   *tile.Value // the store: of the loop's result, its only use
	nw   int         // the rows' stride in words, mod 4 (1, 2 or 3)
	rowB int64       // the rows' stride in bytes
	rows []bound     // the mask's bounds on the row
	cols []bound     // and on the column
}

// bound says that a mask factor is valid where X < Y (X ≤ Y where le).
type bound struct {
	x, y *tile.Value
	le   bool
}

// planRealignC decides whether the epilogue of p (loop f) stores C
// realigned: the swapped form through shared memory, not warp-specialised,
// the accumulator's only use one f32 store whose pointer is an affine
// block of 4-byte columns and rows not 16-byte aligned (its origin
// 16-byte aligned), its mask bounds on rows and columns.
func (l *lowerer) planRealignC(p *pipe, f *tile.Value) {
	if !p.swapped || !p.epiSmem || p.ws || l.k.Meta["realign_c"] != 1 {
		return
	}
	var r *tile.Value
	for _, x := range forResults(l.k, f) {
		if int(x.Aux) == p.accIdx {
			r = x
		}
	}
	if r == nil || r.Type.DType != tile.F32 {
		return
	}
	us := l.users[r.ID]
	if len(us) != 1 || us[0].Op != tile.OpStore || us[0].Args[1] != r || us[0].Args[0] == r {
		return
	}
	st := us[0]
	memo := map[*tile.Value]*affine{}
	a := l.affineOf(st.Args[0], memo)
	if a == nil || len(a.Coef) != 2 || a.Coef[1] != 4 || a.Coef[0]%4 != 0 || a.Coef[0]%16 == 0 || a.Div < 16 ||
		a.Coef[0] <= 0 || a.Coef[0] > 1<<24 || !originKnown(st.Args[0]) {
		return
	}
	rc := &realignC{st: st, nw: int(a.Coef[0]/4) & 3, rowB: a.Coef[0]}
	if len(st.Args) > 2 {
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
		split(st.Args[2])
		for _, x := range factors {
			b, dim, ok := l.boundOf(x, memo)
			if !ok {
				return
			}
			if dim == 0 {
				rc.rows = append(rc.rows, b)
			} else {
				rc.cols = append(rc.cols, b)
			}
		}
	}
	p.rc = rc // its store is left out of program order once the pipe is taken (assign.go)
}

// boundOf is mask factor f (through broadcasts) as a bound on dimension
// dim: X < Y (or X ≤ Y, Y > X, Y ≥ X) with X the coordinate along dim
// plus a uniform value and Y uniform, both computable at the origin.
func (l *lowerer) boundOf(f *tile.Value, memo map[*tile.Value]*affine) (bound, int, bool) {
	for f.Op == tile.OpBroadcast {
		f = f.Args[0]
	}
	var b bound
	switch f.Op {
	case tile.OpLt, tile.OpLe:
		b = bound{x: f.Args[0], y: f.Args[1], le: f.Op == tile.OpLe}
	case tile.OpGt, tile.OpGe:
		b = bound{x: f.Args[1], y: f.Args[0], le: f.Op == tile.OpGe}
	default:
		return b, 0, false
	}
	if b.x.Type.DType != tile.I32 || b.y.Type.DType != tile.I32 || !originKnown(b.x) || !originKnown(b.y) {
		return b, 0, false
	}
	ax, ay := l.affineOf(b.x, memo), l.affineOf(b.y, memo)
	if ax == nil || ay == nil || len(ax.Coef) != 2 || !ay.uniform() {
		return b, 0, false
	}
	switch {
	case ax.Coef[0] == 1 && ax.Coef[1] == 0:
		return b, 0, true
	case ax.Coef[0] == 0 && ax.Coef[1] == 1:
		return b, 1, true
	}
	return b, 0, false
}

// originKnown reports whether originOf can compute v: integer (i32) and
// pointer blocks built from scalars, ranges and constants by shape
// operations, additions, subtractions, multiplications and addptr.
func originKnown(v *tile.Value) bool {
	if v.Type.Shape.IsScalar() {
		return v.Type.Ptr || v.Type.DType == tile.I32
	}
	if !v.Type.Ptr && v.Type.DType != tile.I32 {
		return false
	}
	switch v.Op {
	case tile.OpArange:
		return true
	case tile.OpSplat, tile.OpBroadcast, tile.OpExpandDims, tile.OpTrans:
		return originKnown(v.Args[0])
	case tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpAddPtr:
		return originKnown(v.Args[0]) && originKnown(v.Args[1])
	}
	return false
}

// originOf emits block v's element at the block's origin (every
// coordinate 0) into a register: for the uniform part of an affine block.
func (l *lowerer) originOf(w *strings.Builder, v *tile.Value, memo map[*tile.Value]string) (string, error) {
	if r, ok := memo[v]; ok {
		return r, nil
	}
	var r string
	if v.Type.Shape.IsScalar() {
		x, err := l.demand(v, nil)
		if err != nil {
			return "", err
		}
		r = x.regs[0]
		memo[v] = r
		return r, nil
	}
	arg := func(i int) (string, error) { return l.originOf(w, v.Args[i], memo) }
	switch v.Op {
	case tile.OpArange:
		r = l.reg("r")
		emit(w, "mov.u32 %s, %d", r, uint32(int32(v.Aux)))
	case tile.OpSplat, tile.OpBroadcast, tile.OpExpandDims, tile.OpTrans:
		var err error
		if r, err = arg(0); err != nil {
			return "", err
		}
	case tile.OpAdd, tile.OpSub, tile.OpMul:
		a, err := arg(0)
		if err != nil {
			return "", err
		}
		b, err := arg(1)
		if err != nil {
			return "", err
		}
		r = l.reg("r")
		op := map[tile.Op]string{tile.OpAdd: "add.s32", tile.OpSub: "sub.s32", tile.OpMul: "mul.lo.s32"}[v.Op]
		emit(w, "%s %s, %s, %s", op, r, a, b)
	case tile.OpAddPtr:
		p, err := arg(0)
		if err != nil {
			return "", err
		}
		off, err := arg(1)
		if err != nil {
			return "", err
		}
		t := l.reg("rd")
		emit(w, "mul.wide.s32 %s, %s, %d", t, off, v.Type.DType.Size())
		r = l.reg("rd")
		emit(w, "add.s64 %s, %s, %s", r, p, t)
	default:
		return "", fmt.Errorf("internal: the origin of %v", v)
	}
	memo[v] = r
	return r, nil
}

// validCount emits how many of the block's first lanes along a dimension
// bounds bs leave valid, clamped to [0, size].
func (l *lowerer) validCount(w *strings.Builder, bs []bound, size int, memo map[*tile.Value]string) (string, error) {
	n := l.reg("r")
	emit(w, "mov.u32 %s, %d", n, size)
	for _, b := range bs {
		x, err := l.originOf(w, b.x, memo)
		if err != nil {
			return "", err
		}
		y, err := l.originOf(w, b.y, memo)
		if err != nil {
			return "", err
		}
		c := l.reg("r")
		emit(w, "sub.s32 %s, %s, %s", c, y, x)
		if b.le {
			emit(w, "add.s32 %s, %s, 1", c, c)
		}
		emit(w, "min.s32 %s, %s, %s", n, n, c)
	}
	emit(w, "max.s32 %s, %s, 0", n, n)
	return n, nil
}

// rcPhase is the word offset of element (i, j) of the block in the
// shifted tile (rows stride words apart).
func (rc *realignC) word(i, j, stride int) int {
	return i*stride + j + i*rc.nw%4
}

// storeRealigned emits p's realigned store of C from the shifted tile at
// the scratch region (rows stride words apart; the accumulator stored,
// the barrier passed).
func (l *lowerer) storeRealigned(p *pipe, stride int) error {
	rc := p.rc
	w := &l.body
	if l.lateStore == rc.st || l.rcStores[rc.st] != "planned" {
		return fmt.Errorf("internal: a realigned store with late loads or not planned")
	}
	l.rcStores[rc.st] = "stored"
	memo := map[*tile.Value]string{}
	u, err := l.originOf(w, rc.st.Args[0], memo)
	if err != nil {
		return err
	}
	rows, err := l.validCount(w, rc.rows, p.m, memo)
	if err != nil {
		return err
	}
	cols, err := l.validCount(w, rc.cols, p.n, memo)
	if err != nil {
		return err
	}
	threads := 32 * l.opt.NumWarps
	tid := l.tid()
	slow, done := l.label("rc_slow"), l.label("rc_done")
	part := l.reg("p")
	emit(w, "setp.lt.s32 %s, %s, %d", part, cols, p.n)
	emit(w, "@%s bra.uni %s", part, slow)
	// the row's aligned start in memory, 16·⌊i·N/4⌋ bytes past the origin
	rowStart := func(row string) string {
		g := l.reg("rd")
		emit(w, "mul.wide.u32 %s, %s, %d", g, row, rc.rowB)
		emit(w, "and.b64 %s, %s, -16", g, g)
		emit(w, "add.s64 %s, %s, %s", g, g, u)
		return g
	}
	// the fringe: a row a thread
	for r0 := 0; r0 < p.m; r0 += threads {
		row := l.reg("r")
		emit(w, "add.u32 %s, %s, %d", row, tid, r0)
		ok := l.reg("p")
		emit(w, "setp.lt.s32 %s, %s, %s", ok, row, rows)
		if r0+threads > p.m {
			in := l.reg("p")
			emit(w, "setp.lt.u32 %s, %s, %d", in, row, p.m)
			emit(w, "and.pred %s, %s, %s", ok, ok, in)
		}
		ph := l.reg("r")
		emit(w, "mul.lo.u32 %s, %s, %d", ph, row, rc.nw)
		emit(w, "and.b32 %s, %s, 3", ph, ph)
		var is [4]string
		for k := range is {
			is[k] = l.reg("p")
			emit(w, "setp.eq.and.u32 %s, %s, %d, %s", is[k], ph, k, ok)
		}
		p12, p23 := l.reg("p"), l.reg("p")
		emit(w, "or.pred %s, %s, %s", p12, is[1], is[2])
		emit(w, "or.pred %s, %s, %s", p23, is[2], is[3])
		s := l.smemSlot(w, row, 4*stride, 0)
		g := rowStart(row)
		// each piece read from the tile and stored: only the row's words
		// are read (the tile's others were never written)
		for _, x := range []struct {
			pred string
			off  int
			n    int
		}{
			{is[0], 0, 4}, {is[1], 4, 1}, {p12, 8, 2}, {is[3], 12, 1}, // chunk 0
			{is[1], 4 * p.n, 1}, {p23, 4 * p.n, 2}, {is[3], 4*p.n + 8, 1}, // chunk n/4
		} {
			v := l.regs("f", x.n)
			vec, list := "", v[0]
			if x.n > 1 {
				vec, list = fmt.Sprintf(".v%d", x.n), "{"+strings.Join(v, ", ")+"}"
			}
			emit(w, "@%s ld.shared%s.f32 %s, [%s+%d]", x.pred, vec, list, s, x.off)
			emit(w, "@%s st.global%s.f32 [%s+%d], %s", x.pred, vec, g, x.off, list)
		}
	}
	// the interior: chunks 1 … n/4−1 of every row, thread tid taking
	// chunk x = tid + k·threads (row x / q, chunk 1 + x mod q) in round k
	q := p.n/4 - 1
	total := p.m * q
	row, c16 := l.reg("r"), l.reg("r") // c16: 16·(x mod q)
	emit(w, "div.u32 %s, %s, %d", row, tid, q)
	emit(w, "rem.u32 %s, %s, %d", c16, tid, q)
	emit(w, "shl.b32 %s, %s, 4", c16, c16)
	lim := l.reg("r")
	emit(w, "min.s32 %s, %s, %d", lim, rows, p.m)
	base := l.reg("r") // the tile's chunk 1
	emit(w, "add.u32 %s, %s, 16", base, l.smemAddr())
	u16 := l.reg("rd")
	emit(w, "add.s64 %s, %s, 16", u16, u)
	for x0 := 0; x0 < total; x0 += threads {
		if x0 > 0 {
			emit(w, "add.u32 %s, %s, %d", row, row, threads/q)
			emit(w, "add.u32 %s, %s, %d", c16, c16, 16*(threads%q))
			wrap := l.reg("p")
			emit(w, "setp.ge.u32 %s, %s, %d", wrap, c16, 16*q)
			emit(w, "@%s sub.u32 %s, %s, %d", wrap, c16, c16, 16*q)
			emit(w, "@%s add.u32 %s, %s, 1", wrap, row, row)
		}
		ok := l.reg("p")
		emit(w, "setp.lt.s32 %s, %s, %s", ok, row, lim)
		s := l.reg("r")
		emit(w, "mad.lo.s32 %s, %s, %d, %s", s, row, 4*stride, base)
		emit(w, "add.u32 %s, %s, %s", s, s, c16)
		g := l.reg("rd")
		emit(w, "mul.wide.u32 %s, %s, %d", g, row, rc.rowB)
		emit(w, "and.b64 %s, %s, -16", g, g)
		emit(w, "add.s64 %s, %s, %s", g, g, u16)
		c := l.reg("rd")
		emit(w, "cvt.u64.u32 %s, %s", c, c16)
		emit(w, "add.s64 %s, %s, %s", g, g, c)
		v := l.regs("f", 4)
		emit(w, "@%s ld.shared.v4.f32 {%s}, [%s]", ok, strings.Join(v, ", "), s)
		emit(w, "@%s st.global.v4.f32 [%s], {%s}", ok, g, strings.Join(v, ", "))
	}
	emit(w, "bra.uni %s", done)
	// a block of columns not all valid: a warp a row, lane by lane
	w.WriteString(slow + ":\n")
	warps := l.opt.NumWarps
	lane, warp := l.laneID(), l.warpID()
	for r0 := 0; r0 < p.m; r0 += warps {
		row := l.reg("r")
		emit(w, "add.u32 %s, %s, %d", row, warp, r0)
		ok := l.reg("p")
		emit(w, "setp.lt.s32 %s, %s, %s", ok, row, rows)
		if r0+warps > p.m {
			in := l.reg("p")
			emit(w, "setp.lt.u32 %s, %s, %d", in, row, p.m)
			emit(w, "and.pred %s, %s, %s", ok, ok, in)
		}
		ph := l.reg("r")
		emit(w, "mul.lo.u32 %s, %s, %d", ph, row, rc.nw)
		emit(w, "and.b32 %s, %s, 3", ph, ph)
		// word row·stride + lane + ph; byte 4·(row·N + lane) of the origin
		i := l.reg("r")
		emit(w, "mad.lo.s32 %s, %s, %d, %s", i, row, stride, ph)
		emit(w, "add.u32 %s, %s, %s", i, i, lane)
		s := l.smemSlot(w, i, 4, 0)
		g := l.reg("rd")
		emit(w, "mul.wide.u32 %s, %s, %d", g, row, rc.rowB)
		emit(w, "add.s64 %s, %s, %s", g, g, u)
		lb := l.reg("rd")
		emit(w, "mul.wide.u32 %s, %s, 4", lb, lane)
		emit(w, "add.s64 %s, %s, %s", g, g, lb)
		for j := 0; j < p.n; j += 32 {
			in := l.reg("p")
			emit(w, "setp.lt.and.s32 %s, %s, %s, %s", in, lane, l.minus(w, cols, j), ok)
			v := l.reg("f")
			emit(w, "@%s ld.shared.f32 %s, [%s+%d]", in, v, s, 4*j)
			emit(w, "@%s st.global.f32 [%s+%d], %s", in, g, 4*j, v)
		}
	}
	w.WriteString(done + ":\n")
	return nil
}

// minus emits r − c (r itself where c is 0).
func (l *lowerer) minus(w *strings.Builder, r string, c int) string {
	if c == 0 {
		return r
	}
	x := l.reg("r")
	emit(w, "sub.s32 %s, %s, %d", x, r, c)
	return x
}

// regs is n new registers of class.
func (l *lowerer) regs(class string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = l.reg(class)
	}
	return out
}
