package native

import (
	"os"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// Column loops in registers (issue 16): graphpass's column sums are a
// counted loop over rows whose carried [BLOCK_R, BLOCK_O] tile takes each
// step's rows elementwise, acc = acc + load(rows). Planned as any loop,
// each iteration's phase loads the tile from the frame, adds the rows and
// stores it back: two loads and a store a vector of sixteen columns. Where
// every phase of the body is of that form (colLoopTerms), colLoop runs the
// loop in blocks of a few iterations (colBlockRows rows of the input a
// block) and, within a block, strip by strip of the tile's vectors (up to
// 28 zmm registers): a strip is loaded once, the block's iterations add
// their rows into it (one load a vector), and it is stored once. Each lane
// adds the same values in the same order as the loop it replaces (the
// adds' operands in the IR's order), so the sums are the same bits. The
// loads' addresses are affine in the counter, so the body's scalars, its
// i32 checks and the rows' ranges are computed at the first and the last
// iteration (an affine range's extremes) and at the second (the step
// between iterations' rows); a row outside its buffer is a fault stub
// (the launch falls back), as in the frame loop. Which form runs is chosen
// at run time: loops reading up to colRegsBytes, and larger ones whose
// rows are whole pages apart, take the strips (hinting each strip's lines
// a block ahead from colPrefetchBytes on); larger loops over rows that
// share pages take the frame loop, emitted after (read strip by strip,
// such rows defeat the hardware's stream prefetchers).

// colAccs is how many zmm registers a strip of the carried tile takes.
const colAccs = 28

// colBlockRows is how many rows of the input a block of iterations reads
// (at least two iterations: a strip stays in registers over the block);
// the strips of a block take turns over its rows, which stay in L1 after
// the first strip (more rows 4 KB apart than L1's ways contend). colPrefetch
// (TILEFUSE_NATIVE_COLPF=0 turns it off) hints each strip's lines a block on.
var (
	colBlockRows = max(1, int(envInt("TILEFUSE_NATIVE_COLBLK", 6)))
	colPrefetch  = envInt("TILEFUSE_NATIVE_COLPF", 1) != 0
)

// colPrefetchBytes: a column loop reading at least this many bytes hints
// its strips' lines a block ahead.
const colPrefetchBytes = 128 << 10

// colRegsBytes: a column loop reading more than this many bytes takes the
// strips only where its rows are whole pages apart (colLoop).
var colRegsBytes = int32(min(envInt("TILEFUSE_NATIVE_COLBYTES", 256<<10), 1<<30))

// noColLoops turns colLoop off (tests: export_test.go; measuring:
// TILEFUSE_NATIVE_COLREGS=0).
var noColLoops atomic.Bool

// colTerm is one carried block of a column loop: acc = acc + load (or
// load + acc: first is the load), the load's pattern and the block.
type colTerm struct {
	pg         *phaseGen
	load       *node
	loadFirst  bool
	block      int32
	rows, cols int   // the carried tile's shape ([1, cols] for rank 1)
	rowBytes   int64 // the bytes from one of its rows to the next where a constant, else 0
}

// colLoopTerms is the body of lp as column terms, or nil where the loop is
// not of that form: every carry an f32 block written in place, rank 1 or
// 2 with a last dimension of whole zmm vectors; the body one region (no
// loop nested in it) of one level of
// phases without products, packs, stores or reductions, each phase's
// nodes the carried block's read, one unmasked contiguous load of a
// parameter and their sum written back to the block.
func (g *gen) colLoopTerms(lp *loopPlan) []colTerm {
	if noColLoops.Load() || !g.avx512 {
		return nil
	}
	body := lp.body
	if len(lp.items) != 1 || body.levels != 1 || len(body.dots) > 0 || len(body.phases) == 0 {
		return nil
	}
	for _, c := range lp.carries {
		s := c.arg.Type.Shape
		if c.induced || !c.block || !c.inPlace || c.arg.Type.DType != tile.F32 || s.Rank < 1 || s.Rank > 2 || s.Dims[s.Rank-1]%16 != 0 {
			return nil
		}
	}
	iv := lp.v.Body.Args[0]
	for _, dc := range g.p.needDiv {
		if dc.rg == body {
			return nil
		}
	}
	for _, w := range g.p.needWrap {
		if w.rg != body {
			continue
		}
		if !g.sxAffine(w.x.c, iv, body) {
			return nil
		}
		for d := 0; d < w.x.shape.Rank; d++ {
			if !g.ivFree(w.x.coef[d], iv, body) {
				return nil
			}
		}
	}
	var terms []colTerm
	for _, ph := range body.phases {
		if len(ph.packs) > 0 || len(ph.inits) > 0 || len(ph.yields) != 1 || ph.shape.IsScalar() {
			return nil
		}
		pg := &phaseGen{g: g, ph: ph, rank: ph.shape.Rank, memo: map[string]*node{}}
		pg.last = ph.shape.Dims[pg.rank-1]
		pg.width = min(lane, pg.last)
		if err := pg.build(); err != nil || len(pg.nodes) != 4 || len(pg.reds) > 0 {
			return nil
		}
		y := ph.yields[0]
		c := y.lp.carries[y.i]
		if c.arg.Type.Shape != ph.shape {
			return nil
		}
		block := g.block[c.arg.ID]
		var rd, ld, sum, wr *node
		for _, n := range pg.nodes {
			switch {
			case n.op == opMatRead && n.v == c.arg && n.pat.root == -1 && n.pat.base == block:
				rd = n
			case n.op == opLoad && len(n.args) == 0 && n.pat.root >= 0 && n.pat.elast == 1 && n.pat.sh == 2:
				ld = n
			case n.op == opCompute && n.v.Op == tile.OpAdd && n.v == c.yield && len(n.args) == 2:
				sum = n
			case n.op == opMatWrite && n.pat.root == -1 && n.pat.base == block && len(n.args) == 1:
				wr = n
			}
		}
		if rd == nil || ld == nil || sum == nil || wr == nil || wr.args[0] != sum || !identityPat(rd.pat, ph.shape) || !identityPat(wr.pat, ph.shape) {
			return nil
		}
		t := colTerm{pg: pg, load: ld, block: block, rows: 1, cols: pg.last}
		if pg.rank == 2 {
			t.rows = ph.shape.Dims[0]
		}
		// rows a constant stride apart share one pointer (their
		// displacements fit an int32), else each has its own (four)
		if e := ld.pat.e[0]; t.rows > 1 && e.op == sxConst && int64(t.rows)*e.k*4 < 1<<30 && e.k*4 > -1<<30 {
			t.rowBytes = 4 * e.k
		} else if t.rows > 4 {
			return nil
		}
		if t.rows > colAccs || !g.sxAffine(ld.pat.c, iv, body) || t.rows > 1 && !g.ivFree(ld.pat.e[0], iv, body) {
			return nil
		}
		switch {
		case sum.args[0] == rd && sum.args[1] == ld:
		case sum.args[0] == ld && sum.args[1] == rd:
			t.loadFirst = true
		default:
			return nil
		}
		terms = append(terms, t)
	}
	return terms
}

// identityPat: a frame pattern that reads a block of shape s row-major at
// the phase's own lanes.
func identityPat(p *pattern, s tile.Shape) bool {
	if !p.c.isConst(0) || p.elast != 1 {
		return false
	}
	if s.Rank == 2 {
		return p.e[0].isConst(int64(s.Dims[1]))
	}
	return true
}

// colLoop emits lp's counter loop interchanged with its phases' lanes
// (terms from colLoopTerms; the carried blocks hold their initial values):
// per term, per strip of the tile's vectors, the strip in registers across
// every iteration. The loads' addresses are affine in the counter
// (colLoopTerms: sxAffine), so the body's scalars, its checks of i32
// lanes and the rows' ranges are computed at the first and the last
// iteration (an affine range's extremes; the checks hold in between where
// they hold there) and at the second (the step between iterations'
// addresses); the strips then only move their row pointers.
func (g *gen) colLoop(lp *loopPlan, terms []colTerm, frame amd64.Label) error {
	a := &g.a
	v := lp.v
	loSlot, hiSlot, stepSlot, nSlot, lastSlot := g.alloc(8, 8), g.alloc(8, 8), g.alloc(8, 8), g.alloc(8, 8), g.alloc(8, 8)
	g.scalarIntReg(rT0, v.Args[0])
	a.MOVQstore(fr(loSlot), rT0)
	g.scalarIntReg(rT1, v.Args[1])
	a.MOVQstore(fr(hiSlot), rT1)
	g.scalarIntReg(amd64.RCX, v.Args[2])
	a.MOVQstore(fr(stepSlot), amd64.RCX)
	done := a.NewLabel()
	a.CMPQ(rT0, rT1)
	a.Jcc(amd64.CondGE, done)
	a.TESTQ(amd64.RCX, amd64.RCX)
	a.Jcc(amd64.CondLE, g.stub(v.ID))
	// q = (hi − lo − 1) / step: n = q + 1 iterations, the last at lo + q·step
	a.MOVQ(rT0, rT1)
	a.SUBQload(rT0, fr(loSlot))
	a.SUBQimm(rT0, 1)
	a.CQO()
	a.IDIVQ(amd64.RCX)
	a.MOVQ(rT1, rT0)
	a.ADDQimm(rT1, 1)
	a.MOVQstore(fr(nSlot), rT1)
	a.IMULQload(rT0, fr(stepSlot))
	a.ADDQload(rT0, fr(loSlot))
	a.MOVQstore(fr(lastSlot), rT0)
	iv := v.Body.Args[0]
	ivSlot := g.slotOf(iv)
	// per term: the first row's address at the first and the second
	// iteration, and the bytes from one tile row to the next
	first, second, rowStep := make([]int32, len(terms)), make([]int32, len(terms)), make([]int32, len(terms))
	for i := range terms {
		first[i], second[i], rowStep[i] = g.alloc(8, 8), g.alloc(8, 8), g.alloc(8, 8)
	}
	// at iteration from's slot plus add·step: the scalars, the checks and
	// each term's rows (whole rows checked; the first's address to at[i])
	eval := func(from int32, add bool, at []int32) error {
		a.MOVQload(rT0, fr(from))
		if add {
			a.ADDQload(rT0, fr(stepSlot))
		}
		g.storeIV(iv, ivSlot)
		forget := g.sxScope()
		if err := g.regionPrologue(lp.body); err != nil {
			return err
		}
		for i, t := range terms {
			pat := t.load.pat
			g.sxSlot(pat.c)
			if t.rows > 1 {
				g.sxSlot(pat.e[0])
				a.MOVQload(rT0, fr(int32(pat.e[0].slot)))
				a.SHLQ(rT0, 2)
				a.MOVQstore(fr(rowStep[i]), rT0)
			}
			bad := t.pg.faultStub(pat)
			a.MOVQload(rT0, fr(int32(pat.c.slot)))
			a.SHLQ(rT0, 2)
			a.ADDQload(rT0, fr(paramBase(pat.root)))
			if at != nil {
				a.MOVQstore(fr(at[i]), rT0)
			}
			for r := 0; r < t.rows; r++ {
				if r > 0 {
					a.ADDQload(rT0, fr(rowStep[i]))
				}
				a.CMPQload(rT0, fr(paramBase(pat.root)))
				a.Jcc(amd64.CondB, bad)
				a.LEAQ(rT1, amd64.Ptr(rT0, int32(4*t.cols)))
				a.CMPQload(rT1, fr(paramEnd(pat.root)))
				a.Jcc(amd64.CondA, bad)
			}
		}
		forget()
		return a.Err()
	}
	if err := eval(lastSlot, false, nil); err != nil {
		return err
	}
	one := a.NewLabel()
	a.MOVQload(rT0, fr(nSlot))
	a.CMPQimm(rT0, 1)
	a.Jcc(amd64.CondE, one)
	if err := eval(loSlot, true, second); err != nil {
		return err
	}
	a.Bind(one)
	if err := eval(loSlot, false, first); err != nil {
		return err
	}
	// where the loop reads more than colRegsBytes, only rows that start
	// pages of their own (strides of whole 4 KB) take the strips: rows
	// that share pages, read strip by strip, defeat the hardware's stream
	// prefetchers (1000×777 from memory: 25% slower than the frame form
	// in the bench's runs after a collection)
	for i, t := range terms {
		a.MOVQload(rT1, fr(nSlot))
		a.IMULQimm(rT1, rT1, int32(t.rows*t.cols*4))
		a.CMPQimm(rT1, colRegsBytes)
		next := a.NewLabel()
		a.Jcc(amd64.CondLE, next)
		// the step between iterations, and between tile rows, whole pages
		a.MOVQload(rT1, fr(nSlot))
		a.CMPQimm(rT1, 1)
		one := a.NewLabel()
		a.Jcc(amd64.CondE, one)
		a.MOVQload(rT1, fr(second[i]))
		a.SUBQload(rT1, fr(first[i]))
		wholePages(a, rT1, frame)
		a.Bind(one)
		if t.rows > 1 {
			a.MOVQload(rT1, fr(rowStep[i]))
			wholePages(a, rT1, frame)
		}
		a.Bind(next)
	}
	bases := []amd64.Reg{amd64.R8, amd64.R9, amd64.R10, amd64.R11}
	const rDelta, rAhead, rN, rLeft, rCur = amd64.R12, amd64.R13, amd64.RCX, amd64.R14, amd64.RBX
	for i, t := range terms {
		// R12 = the step between iterations' rows (0 where there is one
		// iteration: not used), R13 the prefetch distance (a block of
		// iterations on), R14 the iterations left, RBX the block's rows
		a.XORL(rDelta, rDelta)
		a.MOVQload(rLeft, fr(nSlot))
		a.CMPQimm(rLeft, 1)
		skip := a.NewLabel()
		a.Jcc(amd64.CondE, skip)
		a.MOVQload(rDelta, fr(second[i]))
		a.SUBQload(rDelta, fr(first[i]))
		a.Bind(skip)
		blk := max(2, colBlockRows/t.rows) // iterations a block
		a.IMULQimm(rAhead, rDelta, int32(blk))
		a.MOVQload(rCur, fr(first[i]))
		vecs := t.cols / 16
		most := colAccs / t.rows // vectors of a tile row a strip may take
		strips := (vecs + most - 1) / most
		per := (vecs + strips - 1) / strips
		// blocks of blk iterations (the last shorter): each strip of the
		// tile in registers over the block's rows; with pf, each strip's
		// lines hinted a block on (loops reading more than colPrefetchBytes:
		// their rows come from memory more often than from L2)
		blocks := func(pf bool) {
			blockTop := a.NewLabel()
			a.Bind(blockTop)
			for s0 := 0; s0 < vecs; s0 += per {
				n := min(per, vecs-s0)
				reg := func(r, k int) amd64.ZReg { return amd64.ZReg(r*n + k) }
				for r := 0; r < t.rows; r++ {
					for k := 0; k < n; k++ {
						a.VMOVUPSZ(reg(r, k), fr(t.block+int32(4*(r*t.cols+16*(s0+k)))))
					}
				}
				a.LEAQ(bases[0], amd64.Ptr(rCur, int32(64*s0)))
				ptrs := 1 // row r at bases[0] + r·rowBytes
				if t.rowBytes == 0 {
					ptrs = t.rows // row r at bases[r]
					for r := 1; r < t.rows; r++ {
						a.MOVQ(bases[r], bases[r-1])
						a.ADDQload(bases[r], fr(rowStep[i]))
					}
				}
				row := func(r, k int) (amd64.Reg, int32) {
					if t.rowBytes == 0 {
						return bases[r], int32(64 * k)
					}
					return bases[0], int32(int64(r)*t.rowBytes + int64(64*k))
				}
				// RCX = min(left, blk)
				a.MOVQimm(rN, int64(blk))
				a.CMPQ(rLeft, rN)
				a.CMOVQ(amd64.CondL, rN, rLeft)
				top := a.NewLabel()
				a.Bind(top)
				for r := 0; r < t.rows; r++ {
					if pf {
						for k := 0; k < n; k++ {
							b, d := row(r, k)
							a.PREFETCHT0(amd64.PtrIdx(b, rAhead, 1, d))
						}
					}
					for k := 0; k < n; k++ {
						b, d := row(r, k)
						m := amd64.Ptr(b, d)
						if t.loadFirst {
							a.VMOVUPSZ(colAccs, m)
							a.VADDPSZ(reg(r, k), colAccs, reg(r, k))
						} else {
							a.VADDPSZ(reg(r, k), reg(r, k), m)
						}
					}
				}
				for r := 0; r < ptrs; r++ {
					a.ADDQ(bases[r], rDelta)
				}
				a.SUBQimm(rN, 1)
				a.Jcc(amd64.CondNE, top)
				for r := 0; r < t.rows; r++ {
					for k := 0; k < n; k++ {
						a.VMOVUPSstoreZ(fr(t.block+int32(4*(r*t.cols+16*(s0+k)))), reg(r, k))
					}
				}
			}
			a.ADDQ(rCur, rAhead)
			a.SUBQimm(rLeft, int32(blk))
			a.Jcc(amd64.CondG, blockTop)
		}
		plain, end := a.NewLabel(), a.NewLabel()
		if colPrefetch {
			a.MOVQload(rT0, fr(nSlot))
			a.IMULQimm(rT0, rT0, int32(t.rows*t.cols*4))
			a.CMPQimm(rT0, colPrefetchBytes)
			a.Jcc(amd64.CondL, plain)
			blocks(true)
			a.JMP(end)
		}
		a.Bind(plain)
		blocks(false)
		a.Bind(end)
		g.p.colLoops++
	}
	a.Bind(done)
	return a.Err()
}

// sxAffine: s is affine in the loop's counter iv (a constant, a value
// affine in it, sums, negations, products with one factor free of iv;
// divisions and remainders only of what is free of it).
func (g *gen) sxAffine(s *sx, iv *tile.Value, body *region) bool {
	switch s.op {
	case sxConst:
		return true
	case sxVal:
		return g.valAffine(s.v, iv, body)
	case sxAdd:
		return g.sxAffine(s.a, iv, body) && g.sxAffine(s.b, iv, body)
	case sxNeg:
		return g.sxAffine(s.a, iv, body)
	case sxMul:
		return g.sxAffine(s.a, iv, body) && g.sxAffine(s.b, iv, body) && (g.ivFree(s.a, iv, body) || g.ivFree(s.b, iv, body))
	}
	return g.ivFree(s, iv, body)
}

// ivFree: s is the same at every iteration of the loop.
func (g *gen) ivFree(s *sx, iv *tile.Value, body *region) bool {
	switch s.op {
	case sxConst:
		return true
	case sxVal:
		return g.valFree(s.v, iv, body)
	case sxNeg, sxDiv, sxRem, sxClamp32:
		return g.ivFree(s.a, iv, body)
	}
	return g.ivFree(s.a, iv, body) && g.ivFree(s.b, iv, body)
}

// valAffine: integer scalar v is affine in iv: iv, a value from before the
// body, or the body's sums, differences and products (one factor free of
// iv) of such values.
func (g *gen) valAffine(v, iv *tile.Value, body *region) bool {
	if v == iv || g.valFree(v, iv, body) {
		return true
	}
	if g.p.in(v).rg != body || g.p.in(v).kind != kScalarInt {
		return false
	}
	switch v.Op {
	case tile.OpAdd, tile.OpSub:
		return g.valAffine(v.Args[0], iv, body) && g.valAffine(v.Args[1], iv, body)
	case tile.OpMul:
		return g.valAffine(v.Args[0], iv, body) && g.valAffine(v.Args[1], iv, body) &&
			(g.valFree(v.Args[0], iv, body) || g.valFree(v.Args[1], iv, body))
	}
	return false
}

// valFree: scalar v does not depend on iv (a value from before the body,
// or the body's constants and ops of such values).
func (g *gen) valFree(v, iv *tile.Value, body *region) bool {
	if v == iv {
		return false
	}
	if g.p.in(v).rg != body {
		return true
	}
	if v.Body != nil || g.p.in(v).kind != kScalarInt {
		return false
	}
	for _, a := range v.Args {
		if !g.valFree(a, iv, body) {
			return false
		}
	}
	return true
}

func init() { noColLoops.Store(os.Getenv("TILEFUSE_NATIVE_COLREGS") == "0") }

// wholePages jumps to otherwise unless r, a step in bytes, is a multiple of
// 4 KB (RCX clobbered).
func wholePages(a *amd64.Asm, r amd64.Reg, otherwise amd64.Label) {
	a.MOVQimm(amd64.RCX, 4095)
	a.TESTQ(r, amd64.RCX)
	a.Jcc(amd64.CondNE, otherwise)
}
