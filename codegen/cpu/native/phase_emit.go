package native

import (
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// emit writes the phase's loop nest.
func (pg *phaseGen) emit() error {
	g := pg.g
	a := &g.a
	// every expression the patterns need, computed before the loops
	for _, pat := range pg.pats {
		g.sxSlot(pat.c)
		for _, e := range pat.e[:pg.rank-1] {
			g.sxSlot(e)
		}
	}
	// row parts in registers while there are registers, else in the frame
	for i, pat := range pg.pats {
		if i < len(baseRegs) {
			pat.reg, pat.hasReg = baseRegs[i], true
		} else {
			pat.slot = g.alloc(8, 8)
		}
	}
	// accumulators of last-axis reductions: fixed registers
	nextAcc, lowest := 15, 6
	if !g.avx512 {
		for _, n := range pg.nodes {
			pg.pairs = pg.pairs || f64Phase(n)
		}
	}
	if pg.pairs {
		// f64 vectors are ymm pairs (f64y.go): Y8–Y15 their high halves
		for r := 8; r < 16; r++ {
			pg.busy[r] = true
		}
		nextAcc, lowest = 7, 5
	}
	for _, r := range pg.reds {
		switch {
		case r.axis == r.v.Args[0].Type.Shape.Rank-1 && pg.pairs && isF64Red(r) && r.v.Op == tile.OpReduceSum:
			// one ymm accumulator of four lanes for both copies (f64.go)
			if nextAcc < lowest {
				r.inMem = true // declined (reduceF64)
			} else {
				r.acc[0], r.acc[1] = amd64.VReg(nextAcc), amd64.VReg(nextAcc)
				pg.busy[nextAcc] = true
				nextAcc--
			}
			if r.v.Type.Shape.IsScalar() {
				r.res = g.slotOf(r.v)
			} else {
				r.res = g.matBlock(r.v)
			}
		case r.axis == r.v.Args[0].Type.Shape.Rank-1:
			if nextAcc-1 < lowest { // registers 0–5 (pairs: 0–4) stay for the body: the frame
				r.inMem = true
				// one 64-byte block: in a zmm loop (fast.go) one accumulator
				m := g.alloc(64, 64)
				r.mem[0], r.mem[1] = m, m+32
			} else {
				r.acc[0] = amd64.VReg(nextAcc)
				r.acc[1] = amd64.VReg(nextAcc - 1)
				pg.busy[nextAcc], pg.busy[nextAcc-1] = true, true
				nextAcc -= 2
			}
			if r.v.Type.Shape.IsScalar() {
				r.res = g.slotOf(r.v)
			} else {
				r.res = g.matBlock(r.v)
			}
		default: // axis 0 of a rank-2 block: the result block accumulates in memory
			r.res = g.matBlock(r.v)
		}
	}
	copies := 1
	if pg.last >= 2*lane {
		copies = 2
	}
	// rows whose masks are all true run unmasked (fast.go): every row
	// where the checks hold over the whole phase, else row by row
	fp := pg.planFast(copies)
	if noFastRows.Load() {
		fp = nil
	}
	if fp == nil {
		if err := pg.nest(copies, nil, false); err != nil {
			return err
		}
	} else {
		g.p.fastPhases++
		g.p.folds += len(fp.fold)
		g.p.rowChecked += len(fp.rowChecked)
		if fp.prefix > 0 {
			g.p.prefixRows++
		}
		rowwise, done := a.NewLabel(), a.NewLabel()
		ops, rest := pg.directOps(fp)
		pg.blockCheck(fp, rowwise)
		// the whole block in bounds and unmasked: the products read the
		// operands of ops where they lie, from their first elements; the
		// phase's other packs as before
		for _, op := range ops {
			pg.cornerValue(rT0, op.pat, 0)
			a.MOVQstore(fr(op.addr), rT0)
			if op.strided() {
				a.MOVQstoreImm(fr(op.stride), op.rowBytes)
			} else {
				a.MOVQstoreImm(fr(op.flag), 1)
			}
			fp.live[op.nodes[0]], fp.live[op.nodes[1]] = false, false
		}
		var err error
		if rest {
			err = pg.nest(copies, fp, true)
		}
		for _, op := range ops {
			fp.live[op.nodes[0]], fp.live[op.nodes[1]] = true, true
		}
		if err != nil {
			return err
		}
		a.JMP(done)
		a.Bind(rowwise)
		for _, op := range ops {
			if op.strided() {
				a.LEAQ(rT0, fr(g.packBlock(op.pk)))
				a.MOVQstore(fr(op.addr), rT0)
				a.MOVQstoreImm(fr(op.stride), int32(4*op.pk.x.Type.Shape.Dims[1]))
			} else {
				a.MOVQstoreImm(fr(op.flag), 0)
			}
		}
		if err := pg.nest(copies, fp, false); err != nil {
			return err
		}
		a.Bind(done)
	}
	// scalar reductions: broadcast for the phases after
	for _, r := range pg.reds {
		if r.v.Type.Shape.IsScalar() {
			g.broadcastSlot(r.v)
		}
	}
	return a.Err()
}

// nest emits the loop nest over the phase's rows: the masked loop per
// row (fp nil), the unmasked one (whole: blockCheck passed for every row),
// or either per row as fastCheck says.
func (pg *phaseGen) nest(copies int, fp *fastPlan, whole bool) error {
	a := &pg.g.a
	outer := pg.rank - 1
	var rowTop [2]amd64.Label
	for k := 0; k < outer; k++ {
		a.MOVQstoreImm(fr(hOuter+8*int32(k)), 0)
		rowTop[k] = a.NewLabel()
		a.Bind(rowTop[k])
	}
	var only *fastPlan
	if whole {
		only = fp
	}
	if err := pg.rowStart(only); err != nil {
		return err
	}
	switch {
	case fp == nil:
		if err := pg.inner(copies); err != nil {
			return err
		}
	case whole:
		if err := pg.innerFast(fp, copies); err != nil {
			return err
		}
	default:
		slow, done := a.NewLabel(), a.NewLabel()
		pg.fastCheck(fp, slow)
		if err := pg.innerFast(fp, copies); err != nil {
			return err
		}
		a.JMP(done)
		a.Bind(slow)
		if err := pg.inner(copies); err != nil {
			return err
		}
		a.Bind(done)
	}
	if err := pg.rowEnd(); err != nil {
		return err
	}
	for k := outer - 1; k >= 0; k-- {
		a.ADDQstoreImm(fr(hOuter+8*int32(k)), 1)
		a.MOVQload(rT0, fr(hOuter+8*int32(k)))
		a.CMPQimm(rT0, int32(pg.ph.shape.Dims[k]))
		a.Jcc(amd64.CondL, rowTop[k])
		if k > 0 {
			a.MOVQstoreImm(fr(hOuter+8*int32(k)), 0)
		}
	}
	return a.Err()
}

// innerFast is inner with the nodes of fp's unmasked loop.
func (pg *phaseGen) innerFast(fp *fastPlan, copies int) error {
	if pg.movesZ(fp) {
		return pg.innerZ(fp)
	}
	pg.fast = fp
	slowLast := make([]int, len(pg.nodes))
	for i, n := range pg.nodes {
		slowLast[i], n.last = n.last, fp.last[i]
	}
	var err error
	if pg.zmmOK(fp) {
		err = pg.innerZmm()
	} else {
		err = pg.inner(copies)
	}
	for i, n := range pg.nodes {
		n.last = slowLast[i]
	}
	pg.fast = nil
	return err
}

// inner emits the loop over a row's vectors: body copies of the phase's
// nodes (those of the unmasked loop where pg.fast is set).
func (pg *phaseGen) inner(copies int) error {
	a := &pg.g.a
	a.XORL(rJ, rJ)
	top := a.NewLabel()
	if pg.last > lane {
		a.Bind(top)
	}
	for c := 0; c < copies; c++ {
		pg.off = c * lane
		if err := pg.body(c); err != nil {
			return err
		}
	}
	if pg.last > lane {
		a.ADDQimm(rJ, int32(copies*lane))
		a.CMPQimm(rJ, int32(pg.last))
		a.Jcc(amd64.CondL, top)
	}
	return a.Err()
}

// rowStart computes each pattern's row part, checks the row's range of
// every unmasked access, and clears the accumulators; with fp, only the
// row parts its unmasked loop reads, unchecked (blockCheck checked them
// for every row).
func (pg *phaseGen) rowStart(fp *fastPlan) error {
	g := pg.g
	a := &g.a
	for _, pat := range pg.pats {
		if fp != nil && !containsPat(fp.pats, pat) {
			continue
		}
		// RAX = c + Σ e[k]·i_k (elements)
		a.MOVQload(rT0, fr(int32(pat.c.slot)))
		for k := 0; k < pg.rank-1; k++ {
			e := pat.e[k]
			if e.isConst(0) {
				continue
			}
			a.MOVQload(rT1, fr(hOuter+8*int32(k)))
			switch {
			case e.isConst(1):
			case e.op == sxConst && e.k >= math.MinInt32 && e.k <= math.MaxInt32:
				a.IMULQimm(rT1, rT1, int32(e.k))
			default:
				a.IMULQload(rT1, fr(int32(e.slot)))
			}
			a.ADDQ(rT0, rT1)
		}
		switch pat.root {
		case -2: // an integer: its lanes' row part as is
		case -1:
			a.LEAQ(rT0, amd64.PtrIdx(rF, rT0, uint8(pat.esz()), pat.base))
		default:
			a.SHLQ(rT0, pat.sh)
			a.ADDQload(rT0, fr(paramBase(pat.root)))
		}
		if pat.root >= 0 && pat.checked && fp == nil {
			// the row's lanes: [B, B + esz·n) with n the last dimension (1 for a broadcast address)
			n := int32(pg.last)
			switch {
			case pat.elast == 0:
				n = 1
			case pat.elast > 1: // a gather: lane l at l·elast
				n = int32(pat.elast)*(n-1) + 1
			}
			bad := pg.faultStub(pat)
			a.CMPQload(rT0, fr(paramBase(pat.root)))
			a.Jcc(amd64.CondB, bad)
			a.LEAQ(rT1, amd64.Ptr(rT0, pat.esz()*n))
			a.CMPQload(rT1, fr(paramEnd(pat.root)))
			a.Jcc(amd64.CondA, bad)
		}
		if pat.hasReg {
			a.MOVQ(pat.reg, rT0)
		} else {
			a.MOVQstore(fr(pat.slot), rT0)
		}
	}
	for _, r := range pg.reds {
		if r.axis != r.v.Args[0].Type.Shape.Rank-1 {
			continue
		}
		if isF64Red(r) {
			if r.inMem {
				return unsupported(r.v, "f64 reductions past the accumulator registers")
			}
			g.splatF64(r.acc[0], pg.redInitF64(r))
			g.splatF64(r.acc[1], pg.redInitF64(r))
			continue
		}
		init := pg.redInit(r)
		if r.inMem {
			a.VMOVUPS(0, init)
			a.VMOVUPSstore(fr(r.mem[0]), 0)
			a.VMOVUPSstore(fr(r.mem[1]), 0)
			continue
		}
		a.VMOVUPS(r.acc[0], init)
		a.VMOVUPS(r.acc[1], init)
	}
	return a.Err()
}

// redInit is a reduction's initial value: a uniform in the pool.
func (pg *phaseGen) redInit(r *redState) amd64.Mem {
	if r.v.Type.DType == tile.I32 {
		switch r.v.Op {
		case tile.OpReduceMax:
			return pg.g.constVec(1 << 31) // math.MinInt32
		case tile.OpReduceMin:
			return pg.g.constVec(1<<31 - 1)
		}
		return pg.g.constVec(0)
	}
	switch r.v.Op {
	case tile.OpReduceMax:
		return pg.g.constF32(float32(math.Inf(-1)))
	case tile.OpReduceMin:
		return pg.g.constF32(float32(math.Inf(1)))
	}
	return pg.g.constF32(0)
}

// faultStub is a label that reports a faulting access through pat (the
// value ID of its first user) to the fault exit.
func (pg *phaseGen) faultStub(pat *pattern) amd64.Label {
	id := 0
	for _, n := range pg.nodes {
		if n.pat == pat && (n.op == opLoad || n.op == opStore) {
			id = n.v.ID
			break
		}
	}
	return pg.g.stub(id)
}

// stub is a label past the code that sets RAX = id and jumps to the fault
// exit.
func (g *gen) stub(id int) amd64.Label {
	l := g.a.NewLabel()
	g.stubs = append(g.stubs, stubAt{l, id})
	return l
}

type stubAt struct {
	l  amd64.Label
	id int
}

// rowEnd finishes the row's last-axis reductions: the two copies'
// accumulators combined as the executor's row sum combines its sixteen
// partial sums (or, for eight lanes or fewer, the lanes added in order),
// the result stored in its slot or its block at the row's index.
func (pg *phaseGen) rowEnd() error {
	g := pg.g
	a := &g.a
	for _, r := range pg.reds {
		if r.axis != r.v.Args[0].Type.Shape.Rank-1 {
			continue
		}
		if isF64Red(r) {
			pg.rowEndF64(r)
			if r.v.Type.Shape.IsScalar() {
				a.VMOVSDstore(fr(r.res), 0)
				continue
			}
			a.MOVQload(rT0, fr(hOuter))
			if pg.rank == 3 {
				a.IMULQimm(rT0, rT0, int32(pg.ph.shape.Dims[1]))
				a.ADDQload(rT0, fr(hOuter+8))
			}
			a.VMOVSDstore(amd64.PtrIdx(rF, rT0, 8, r.res), 0)
			continue
		}
		if r.v.Type.DType == tile.I32 {
			// the lanes of both copies, in any order (reduceI32): X0
			tmp := g.scratch(64)
			a.VMOVUPSstore(fr(tmp), r.acc[0])
			n := pg.width
			if pg.last >= 2*lane {
				a.VMOVUPSstore(fr(tmp+32), r.acc[1])
				n = 2 * lane
			}
			a.VMOVSSload(0, fr(tmp))
			for l := 1; l < n; l++ {
				a.VMOVSSload(1, fr(tmp+int32(4*l)))
				i32Step(a, r.v.Op, 0, amd64.VReg(1))
			}
		} else {
			pg.rowEndF32(r)
		}
		// store lane 0 of X0: a scalar's slot, or the block at the row index
		if r.v.Type.Shape.IsScalar() {
			a.VMOVSSstore(fr(r.res), 0)
			continue
		}
		// row index: the outer counters in row-major order
		a.MOVQload(rT0, fr(hOuter))
		if pg.rank == 3 {
			a.IMULQimm(rT0, rT0, int32(pg.ph.shape.Dims[1]))
			a.ADDQload(rT0, fr(hOuter+8))
		}
		a.VMOVSSstore(amd64.PtrIdx(rF, rT0, 4, r.res), 0)
	}
	return a.Err()
}

// rowEndF32 combines the two copies' accumulators of f32 reduction r into
// lane 0 of X0 (rowEnd).
func (pg *phaseGen) rowEndF32(r *redState) {
	g := pg.g
	a := &g.a
	x, y := r.acc[0], r.acc[1]
	if r.inMem { // into registers 4 and 5: free at a row's end (accumulators are 6 and up)
		x, y = 4, 5
		if pg.pairs { // accumulators are 4–7, high halves free at a row's end
			x, y = 8, 9
		}
		a.VMOVUPS(x, fr(r.mem[0]))
		a.VMOVUPS(y, fr(r.mem[1]))
	}
	switch {
	case r.v.Op != tile.OpReduceSum && pg.last >= 2*lane:
		pg.maxTree(r.v.Op, x, y)
	case r.v.Op == tile.OpReduceSum && pg.last >= 2*lane:
		a.VADDPS(x, x, y)
		a.VEXTRACTF128(0, x, 1)
		a.VADDPSX(x, x, amd64.VReg(0))
		a.VMOVHLPS(0, x, x)
		a.VADDPSX(x, x, amd64.VReg(0))
		a.VMOVSHDUP(0, x)
		a.VADDSS(0, x, amd64.VReg(0))
	default:
		// lanes in order: the copies' lanes (copy 0's vectors are the
		// even ones: for max and min which of ±0, or which NaN, comes
		// out may differ from an in-order scan)
		tmp := g.scratch(64)
		a.VMOVUPSstore(fr(tmp), x)
		n := pg.width
		if pg.last >= 2*lane {
			a.VMOVUPSstore(fr(tmp+32), y)
			n = 2 * lane
		}
		a.VMOVSSload(0, fr(tmp))
		for l := 1; l < n; l++ {
			at := fr(tmp + int32(4*l))
			switch r.v.Op {
			case tile.OpReduceSum:
				a.VADDSS(0, 0, at)
			default:
				// r = (p > r || p != p) ? p : r, as the reference scans
				a.VMOVSSload(1, at)
				pred := amd64.CmpGT
				if r.v.Op == tile.OpReduceMin {
					pred = amd64.CmpLT
				}
				a.VCMPPS(2, 1, amd64.VReg(0), pred)
				a.VCMPPS(3, 1, amd64.VReg(1), amd64.CmpUNORD)
				a.VORPS(2, 2, amd64.VReg(3))
				a.VBLENDVPS(0, 0, amd64.VReg(1), 2)
			}
		}
	}
}

// maxTree combines the sixteen lanes of a row's max (min) — lanes 0–7 in
// x, 8–15 in y, each the scan of its elements — into lane 0 of X0 as the
// in-order combination does (lane 0, then 1, …, then 15, each step
// r = (p > r || p != p) ? p : r), in a tree of four levels: that step is
// associative (it keeps the first of equal maxima and the last NaN of a
// sequence however the sequence is bracketed), so each level combines
// neighbours, the earlier first: (0,1) (2,3) …, then (0–1,2–3) …, and the
// result is the in-order one bit for bit, at four steps' latency instead
// of fifteen. X0–X3 are clobbered.
func (pg *phaseGen) maxTree(op tile.Op, x, y amd64.VReg) {
	a := &pg.g.a
	pred := amd64.CmpGT
	if op == tile.OpReduceMin {
		pred = amd64.CmpLT
	}
	// X0 = step(X0, X1) lane by lane: X0 the earlier lanes, X1 the later
	step := func() {
		a.VCMPPS(2, 1, amd64.VReg(0), pred)
		a.VCMPPS(3, 1, amd64.VReg(1), amd64.CmpUNORD)
		a.VORPS(2, 2, amd64.VReg(3))
		a.VBLENDVPS(0, 0, amd64.VReg(1), 2)
	}
	// lanes 0,2 | 8,10 | 4,6 | 12,14 against 1,3 | 9,11 | 5,7 | 13,15
	a.VSHUFPS(1, x, y, 0xdd)
	a.VSHUFPS(0, x, y, 0x88)
	step() // X0: 0–1, 2–3, 8–9, 10–11 | 4–5, 6–7, 12–13, 14–15
	a.VSHUFPS(1, 0, amd64.VReg(0), 0xdd)
	a.VSHUFPS(0, 0, amd64.VReg(0), 0x88)
	step() // X0: 0–3, 8–11 | 4–7, 12–15
	a.VEXTRACTF128(1, 0, 1)
	step() // 0–7, 8–15
	a.VMOVSHDUP(1, amd64.VReg(0))
	step() // 0–15
}

// scratch is a frame area for one phase's temporary use.
func (g *gen) scratch(n int32) int32 { return g.alloc(n, 32) }
