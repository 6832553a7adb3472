package native

import (
	"math"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// The body: the phase's nodes for one vector position, registers
// allocated in one linear scan (a value leaves its register after its
// last use; when none is free, the value used furthest ahead is spilled
// to a frame slot and reloaded where it is next needed).

// opnd is an instruction operand: a register or a 32-byte memory vector.
type opnd struct {
	reg   amd64.VReg
	mem   amd64.Mem
	isMem bool
}

func (o opnd) rm() amd64.Operand {
	if o.isMem {
		return o.mem
	}
	return o.reg
}

// temps each op needs besides its operands and result (newton: the
// kernel's divisions of vectors take Newton's steps).
func tempsFor(n *node, newton bool) int {
	switch n.op {
	case opCompute:
		if n.v.Type.DType == tile.I32 && !n.v.Type.Ptr && n.v.Op != tile.OpRem {
			return intTemps(n.v) // ints.go
		}
		switch n.v.Op {
		case tile.OpExp, tile.OpTanh, tile.OpLog, tile.OpSigmoid, tile.OpLog1p, tile.OpExpm1, tile.OpErf, tile.OpLog2, tile.OpExp2,
			tile.OpSin, tile.OpCos:
			if n.v.Op == tile.OpLog2 && isF64(n) {
				return 12 // mathd.go: log2F64
			}
			return 10
		case tile.OpRsqrt:
			return 3
		case tile.OpRem:
			switch n.v.Type.DType {
			case tile.F32:
				return rem32Temps // rem.go
			case tile.F64:
				return 12 // rem.go: remF64
			}
			return intTemps(n.v) // ints.go, and remconst.go's 3
		case tile.OpPow:
			return 12 // ops.go: pow32, and its operands loaded from memory; powd.go: powF64
		case tile.OpDiv:
			if newton && !isF64(n) && n.args[1].op != opUniform {
				return 4 // ops.go: divNewton
			}
			if useDivFMA.Load() && !isF64(n) {
				return 2 // ops.go: divFMA
			}
		case tile.OpSign:
			if isF64(n) {
				return 2 // a ymm pair's form (f64y.go)
			}
			return 3
		case tile.OpMin, tile.OpMax:
			return 3
		case tile.OpSelect, tile.OpEq, tile.OpNe, tile.OpLt, tile.OpLe, tile.OpGt, tile.OpGe:
			return 2
		case tile.OpCast:
			if n.v.Type.DType == tile.I1 && n.v.Args[0].Type.DType == tile.F64 {
				return 3 // f64Compare's two and the zero
			}
		}
		return 1
	case opLoad:
		if n.scat {
			return 4 // gatherIdx: the offsets
		}
		if n.pat != nil && n.pat.sh == 3 && n.pat.elast > 1 && len(n.args) == 2 && !isZeroConst(n.v.Args[2]) {
			return 4 // an f64 gather under a mask whose other is not 0: gathered into t[3], blended
		}
		return 3
	case opReduce:
		return 4
	case opStore, opMatWrite, opMatRead:
		if n.scat {
			return 3 // atomicAdd: the offsets
		}
		return 2
	}
	return 1
}

func producesValue(n *node) bool {
	switch n.op {
	case opStore, opMatWrite, opReduce, opUniform:
		return false
	}
	return true
}

// body emits body copy c (lane offset pg.off).
func (pg *phaseGen) body(c int) error {
	for i := range pg.owner {
		pg.owner[i] = nil
	}
	for _, n := range pg.nodes {
		n.reg = -1
	}
	for i, n := range pg.nodes {
		if pg.fast != nil && !pg.fast.live[i] {
			continue // a mask the unmasked loop does not need
		}
		pg.pos = i
		if err := pg.emitNode(n, c); err != nil {
			return err
		}
	}
	// free what is left (values read by no later node of this copy)
	for i := range pg.owner {
		pg.owner[i] = nil
	}
	return pg.g.a.Err()
}

func (pg *phaseGen) freeReg(protect []*node) (amd64.VReg, error) {
	for r := 0; r < 16; r++ {
		if !pg.busy[r] && pg.owner[r] == nil {
			return amd64.VReg(r), nil
		}
	}
	// spill the value next used furthest ahead
	victim := -1
	for r := 0; r < 16; r++ {
		o := pg.owner[r]
		if pg.busy[r] || o == nil || o == tempOwner || contains(protect, o) {
			continue
		}
		if victim < 0 || o.last > pg.owner[victim].last {
			victim = r
		}
	}
	if victim < 0 {
		return 0, unsupported(nil, "not enough vector registers")
	}
	o := pg.owner[victim]
	if o.spill < 0 {
		size, align := int32(32), int32(32)
		switch {
		case pg.g.avx512: // a zmm loop may spill it too (fast.go: zmmOK), in pairs
			size, align = 128, 64
		case pg.pairs: // an f64 ymm pair (f64y.go)
			size, align = 64, 64
		}
		o.spill = pg.g.alloc(size, align)
	}
	if isF64(o) && pg.pairs {
		pg.g.storeF64Y(fr(o.spill), amd64.VReg(victim), 0, false, 0)
	} else if isF64(o) {
		pg.g.a.VMOVUPDstoreZ(fr(o.spill), 0, z(amd64.VReg(victim)))
	} else {
		pg.g.va().VMOVUPSstore(fr(o.spill), amd64.VReg(victim))
	}
	o.reg = -1
	pg.owner[victim] = nil
	return amd64.VReg(victim), nil
}

// tempOwner marks a register taken by a temporary.
var tempOwner = &node{}

func contains(ns []*node, n *node) bool {
	for _, x := range ns {
		if x == n {
			return true
		}
	}
	return false
}

// operand brings arg into a register (reloading a spilled value), or, if
// mem is allowed, gives a memory operand for a uniform value.
func (pg *phaseGen) operand(arg *node, protect []*node, memOK bool) (opnd, error) {
	if arg.op == opUniform {
		if r, ok := pg.pinned[arg]; ok { // pin.go: read, never written
			return opnd{reg: r}, nil
		}
		if memOK {
			return opnd{mem: arg.mem, isMem: true}, nil
		}
		r, err := pg.freeReg(protect)
		if err != nil {
			return opnd{}, err
		}
		pg.owner[r] = tempOwner
		if arg.v.Type.DType == tile.F64 {
			pg.g.splatF64(r, arg.mem)
		} else {
			pg.g.va().vbcst(r, arg.mem)
		}
		return opnd{reg: r}, nil
	}
	if arg.reg >= 0 {
		return opnd{reg: amd64.VReg(arg.reg)}, nil
	}
	if arg.spill < 0 {
		return opnd{}, unsupported(arg.v, "value used before it is computed in the body")
	}
	r, err := pg.freeReg(protect)
	if err != nil {
		return opnd{}, err
	}
	if isF64(arg) && pg.pairs {
		pg.g.a.VMOVUPD(r, fr(arg.spill))
		pg.g.a.VMOVUPD(hi(r), fr(arg.spill+32))
	} else if isF64(arg) {
		pg.g.a.VMOVUPDZ(z(r), 0, fr(arg.spill))
	} else {
		pg.g.va().VMOVUPS(r, fr(arg.spill))
	}
	arg.reg = int(r)
	pg.owner[r] = arg
	return opnd{reg: r}, nil
}

// memOK says which operands of n may be memory: the r/m operand of its
// instruction.
func memOK(n *node, i int) bool {
	if n.op != opCompute || f64Phase(n) {
		return false // f64 operands: always registers (f64.go)
	}
	switch n.v.Op {
	case tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpDiv, tile.OpAnd, tile.OpOr, tile.OpXor:
		return i == 1
	case tile.OpMin, tile.OpMax, tile.OpEq, tile.OpNe, tile.OpLt, tile.OpLe, tile.OpGt, tile.OpGe:
		return i == 1 && n.v.Args[0].Type.DType == tile.F32
	case tile.OpSelect:
		return i == 1
	case tile.OpSqrt, tile.OpFloor, tile.OpCeil, tile.OpNeg, tile.OpAbs, tile.OpCast:
		return i == 0
	}
	return false
}

func (pg *phaseGen) emitNode(n *node, c int) error {
	if n.op == opUniform {
		return nil
	}
	pg.g.clearK()
	args := pg.fast.args(n) // all of them but in the unmasked loop
	srcs := make([]opnd, len(args))
	var tmpRegs []amd64.VReg
	release := func() {
		for _, r := range tmpRegs {
			pg.owner[r] = nil
		}
	}
	for i, a := range args {
		o, err := pg.operand(a, args, memOK(n, i))
		if err != nil {
			return err
		}
		if _, pinned := pg.pinned[a]; !o.isMem && a.op == opUniform && !pinned {
			tmpRegs = append(tmpRegs, o.reg)
		}
		srcs[i] = o
	}
	nt := tempsFor(n, pg.g.p.newton)
	if pg.pairs && n.op == opCompute && isF64(n) {
		switch n.v.Op {
		case tile.OpExp, tile.OpTanh, tile.OpLog, tile.OpSigmoid:
			nt = mathTempsPairs // and their high halves (mathdy.go)
		case tile.OpLog1p, tile.OpExpm1, tile.OpErf, tile.OpSin, tile.OpCos, tile.OpExp2, tile.OpLog2, tile.OpPow, tile.OpRem:
			nt = 0 // every register saved and used (zasm.go: mathF64Pairs)
		}
	}
	for range nt {
		r, err := pg.freeReg(args)
		if err != nil {
			return err
		}
		pg.owner[r] = tempOwner
		tmpRegs = append(tmpRegs, r)
	}
	temps := tmpRegs[len(tmpRegs)-nt:]
	// operands read for the last time give up their registers: the result
	// may take one (every op writes its result last)
	for _, a := range args {
		if a.last == pg.pos && a.reg >= 0 {
			pg.owner[a.reg] = nil
			a.reg = -1
		}
	}
	var dst amd64.VReg
	if producesValue(n) {
		r, err := pg.freeReg(args)
		if err != nil {
			return err
		}
		dst = r
	}
	var err error
	switch n.op {
	case opCompute:
		switch {
		case pg.g.p.in(n.v).kind == kPeriodic:
			pg.g.remConst(dst, srcs[0].reg, pg.g.p.in(n.v).period, temps)
		case n.v.Type.DType == tile.I32:
			err = pg.g.intOp(n.v, dst, srcs, temps)
		case n.v.Type.DType == tile.I1 && n.v.Op.IsCompare() && n.v.Args[0].Type.DType == tile.F64:
			err = pg.g.f64Compare(n.v, dst, srcs, temps)
		case n.v.Type.DType == tile.I1 && n.v.Op == tile.OpCast && n.v.Args[0].Type.DType == tile.F64:
			// x ≠ 0 (NaN too), as the reference casts: against a zeroed register
			pg.g.zeroF64(temps[2])
			err = pg.g.f64Compare(n.v, dst, []opnd{srcs[0], {reg: temps[2]}}, temps)
		case n.v.Type.DType == tile.I1:
			err = pg.g.maskOp(n.v, dst, srcs, temps)
		case n.v.Type.DType == tile.F64:
			err = pg.g.f64Op(n.v, dst, srcs, temps)
		default:
			err = pg.g.floatOp(n.v, dst, srcs, temps)
		}
	case opIntVec:
		pg.intVec(n, dst)
	case opLoad:
		err = pg.load(n, dst, srcs, temps)
	case opMatRead:
		pg.matRead(n, dst, temps)
	case opStore:
		err = pg.store(n, srcs, temps)
	case opMatWrite:
		pg.matWrite(n, srcs[0], temps)
	case opReduce:
		err = pg.reduce(n, c, srcs[0], temps)
	}
	release()
	if err != nil {
		return err
	}
	if producesValue(n) {
		if n.last > pg.pos {
			pg.owner[dst] = n
			n.reg = int(dst)
		}
	}
	return nil
}

// rowBase is the pattern's row part as a register (RDX when it lives in
// the frame).
func (pg *phaseGen) rowBase(pat *pattern) amd64.Reg {
	if pat.hasReg {
		return pat.reg
	}
	pg.g.a.MOVQload(rT1, fr(pat.slot))
	return rT1
}

// addr is the memory operand of the pattern's vector at the current
// position (the element at lane 0; for a broadcast address, the one).
func (pg *phaseGen) addr(pat *pattern) amd64.Mem {
	b := pg.rowBase(pat)
	if pat.elast == 0 {
		return amd64.Ptr(b, 0)
	}
	return amd64.PtrIdx(b, rJ, uint8(pat.esz()), pat.esz()*int32(pg.off))
}

// intVec: lanes row + e·(j + off + l) of an i32 affine value.
func (pg *phaseGen) intVec(n *node, dst amd64.VReg) {
	a := pg.g.va()
	pat := n.pat
	if k, ok := pg.constLanes(pat); ok { // the same constant in every lane: from the pool
		a.vbcst(dst, pg.g.constVec(uint32(int32(k))))
		return
	}
	b := pg.rowBase(pat)
	switch pat.elast {
	case 0:
		a.MOVQ(rT0, b)
	case 1, 2, 4, 8:
		a.LEAQ(rT0, amd64.PtrIdx(b, rJ, uint8(pat.elast), int32(pat.elast)*int32(pg.off)))
	default:
		a.LEAQ(rT0, amd64.Ptr(rJ, int32(pg.off)))
		a.IMULQimm(rT0, rT0, int32(pat.elast))
		a.ADDQ(rT0, b)
	}
	a.VMOVDfromGPR(dst, rT0)
	a.VPBROADCASTD(dst, dst)
	switch {
	case pat.elast == 0:
	case pg.g.zmm: // the 16 lanes' steps: a whole vector, not a uniform
		a.Asm.VPADDDZ(zr(dst), zr(dst), pg.g.iota16(pat.elast))
	default:
		a.VPADDD(dst, dst, pg.g.iota(pat.elast))
	}
}

// constLanes reports whether an integer's lanes are one constant k in
// every row and lane (a bound an index is compared with, splat into a
// block), which fits int32 as the lanes are.
func (pg *phaseGen) constLanes(pat *pattern) (int64, bool) {
	if pat.root != -2 || pat.elast != 0 || pat.c == nil || pat.c.op != sxConst ||
		pat.c.k < math.MinInt32 || pat.c.k > math.MaxInt32 {
		return 0, false
	}
	for k := 0; k < pg.rank-1 && k < len(pat.e); k++ {
		if !pat.e[k].isConst(0) {
			return 0, false
		}
	}
	return pat.c.k, true
}

// activeMask is the mask of a memory access: the op's mask (if any) and,
// when a vector has fewer lanes than eight, the lanes it has. ok is false
// when every lane is active.
func (pg *phaseGen) activeMask(m *opnd, t amd64.VReg) (amd64.VReg, bool) {
	a := pg.g.va()
	switch {
	case m == nil && pg.width == lane:
		return 0, false
	case m == nil:
		a.VMOVUPS(t, pg.g.laneMask(pg.width))
	case pg.width < lane:
		a.VANDPS(t, pg.laneMaskReg(t), m.rm())
	case m.isMem:
		a.vbcst(t, m.mem)
	default:
		return m.reg, true
	}
	return t, true
}

func (pg *phaseGen) laneMaskReg(t amd64.VReg) amd64.VReg {
	pg.g.a.VMOVUPS(t, pg.g.laneMask(pg.width))
	return t
}

// checkLanes checks the active lanes of a masked access through pat
// against its parameter's buffer: the first and last active lanes' elements
// must lie within it. RAX and RDX are clobbered.
func (pg *phaseGen) checkLanes(n *node, pat *pattern, mask amd64.VReg) {
	if pat.root < 0 {
		return
	}
	a := pg.g.va()
	ok := a.NewLabel()
	bad := pg.g.stub(n.v.ID)
	a.VMOVMSKPS(rT0, mask)
	a.TESTL(rT0, rT0)
	a.Jcc(amd64.CondE, ok)
	if pat.elast == 0 {
		b := pg.rowBase(pat)
		a.MOVQ(rT0, b)
		a.CMPQload(rT0, fr(paramBase(pat.root)))
		a.Jcc(amd64.CondB, bad)
		a.ADDQimm(rT0, pat.esz())
		a.CMPQload(rT0, fr(paramEnd(pat.root)))
		a.Jcc(amd64.CondA, bad)
		a.Bind(ok)
		return
	}
	// the element of lane r (r holds the lane's index in the vector):
	// r = row + 4·(j + off + r), for a gather row + 4·elast·(j + off + r)
	laneAddr := func(r amd64.Reg) {
		a.ADDQ(r, rJ)
		a.ADDQimm(r, int32(pg.off))
		if pat.elast > 1 {
			a.IMULQimm(r, r, pat.esz()*int32(pat.elast))
		} else {
			a.SHLQ(r, pat.sh)
		}
		if pat.hasReg {
			a.ADDQ(r, pat.reg)
		} else {
			a.ADDQload(r, fr(pat.slot))
		}
	}
	// the whole vector's lanes first: where all of them lie within the
	// buffer the active ones do (most rows of a window op's border-masked
	// reads: a lane off at an image's edge reads the row before it, still
	// in the buffer); else the active lanes' own range
	if span := int64(pat.esz()) * (pat.elast*int64(pg.width-1) + 1); pat.elast > 0 && span <= math.MaxInt32 {
		exact := a.NewLabel()
		a.XORL(rT1, rT1)
		laneAddr(rT1)
		a.CMPQload(rT1, fr(paramBase(pat.root)))
		a.Jcc(amd64.CondB, exact)
		a.ADDQimm(rT1, int32(span))
		a.CMPQload(rT1, fr(paramEnd(pat.root)))
		a.Jcc(amd64.CondBE, ok)
		a.Bind(exact)
	}
	// the first active lane's element, then the last one's end
	a.BSFL(rT1, rT0)
	laneAddr(rT1)
	a.CMPQload(rT1, fr(paramBase(pat.root)))
	a.Jcc(amd64.CondB, bad)
	a.BSRL(rT0, rT0)
	laneAddr(rT0)
	a.ADDQimm(rT0, pat.esz())
	a.CMPQload(rT0, fr(paramEnd(pat.root)))
	a.Jcc(amd64.CondA, bad)
	a.Bind(ok)
}

// load: a vector load, masked (masked-off lanes never read: they take
// other, or 0), from a buffer or a broadcast address.
func (pg *phaseGen) load(n *node, dst amd64.VReg, srcs []opnd, t []amd64.VReg) error {
	if n.scat {
		pg.gatherIdx(n, dst, srcs, t)
		return nil
	}
	a := pg.g.va()
	var m *opnd
	if len(srcs) > 0 {
		m = &srcs[0]
	}
	mask, masked := pg.activeMask(m, t[0])
	rowChecked := pg.fast != nil && pg.fast.rowChecked[n] // fastPlan.rowChecked
	if masked && m != nil && !rowChecked {
		pg.checkLanes(n, n.pat, mask)
	}
	if n.pat.elast > 1 { // a gather (unmasked: the row's range was checked; masked: the active lanes')
		switch {
		case n.pat.sh == 3 && masked && len(srcs) == 2 && !isZeroConst(n.v.Args[2]):
			// the active lanes gathered, then the others take other
			pg.gatherF64Masked(n.pat, t[3], t[1], t[2], mask)
			pg.blendOtherF64(dst, srcs[1].reg, t[3], t[2], mask)
		case n.pat.sh == 3 && masked:
			pg.gatherF64Masked(n.pat, dst, t[1], t[2], mask)
		case n.pat.sh == 3:
			pg.gatherF64(n.pat, dst, t[1], t[2])
		case masked && rowChecked:
			// every lane read (the row lies in the buffer: fastCheck), the
			// masked-off ones then +0 (or other), as gatherMasked gives them
			pg.gather(n.pat, t[2], t[1])
			if len(srcs) == 2 && !isZeroConst(n.v.Args[2]) {
				mr := toReg(pg, *m, t[0])
				or := toReg(pg, srcs[1], t[1])
				a.VBLENDVPS(dst, or, t[2], mr)
			} else {
				a.VANDPS(dst, mask, amd64.VReg(t[2]))
			}
		case masked:
			other := len(srcs) == 2 && !isZeroConst(n.v.Args[2])
			into := dst
			if other {
				into = t[2]
			}
			pg.gatherMasked(n.pat, into, t[1], mask)
			if other {
				mr := toReg(pg, *m, t[0])
				or := toReg(pg, srcs[1], t[1])
				a.VBLENDVPS(dst, or, t[2], mr)
			}
		default:
			pg.gather(n.pat, dst, t[1])
		}
		return nil
	}
	at := pg.addr(n.pat)
	if n.pat.sh == 3 {
		pg.loadF64(n, dst, srcs, t, at, mask, masked)
		return nil
	}
	other := len(srcs) == 2 && !isZeroConst(n.v.Args[2])
	into := dst
	if other {
		into = t[2] // the result is written last: dst may be an operand's register
	}
	switch {
	case !masked && n.pat.elast == 0:
		a.VBROADCASTSS(into, at)
	case !masked:
		pg.prefetch(n.pat, at)
		a.VMOVUPS(into, at)
	case n.pat.elast == 0:
		// one address: load it (if any lane is active) and keep the active lanes
		a.VBROADCASTSS(t[1], pg.guardedScalar(at, mask))
		a.VANDPS(into, mask, amd64.VReg(t[1]))
	case rowChecked:
		a.VMASKMOVPSload(into, mask, at)
	default:
		// no lane active (a block's rows past a buffer's end): no load.
		// A masked load whose masked-off lanes lie where a load would
		// fault takes a microcode assist of hundreds of cycles even with
		// no lane on (colsum small, 1000 rows in blocks of 32: 24 rows
		// past the end a program, 45% of the CPU samples after these
		// loads, 0.55–0.69 ms a run against 0.08 for 1024 rows)
		skip, done := a.NewLabel(), a.NewLabel()
		a.VMOVMSKPS(rT0, mask)
		a.TESTL(rT0, rT0)
		a.Jcc(amd64.CondE, skip)
		a.VMASKMOVPSload(into, mask, at)
		a.JMP(done)
		a.Bind(skip)
		a.VXORPS(into, into, into) // the lanes vmaskmovps gives off: +0
		a.Bind(done)
	}
	if other {
		// lanes whose mask is off take other
		mr := toReg(pg, *m, t[0])
		or := toReg(pg, srcs[1], t[1])
		a.VBLENDVPS(dst, or, t[2], mr)
	}
	return nil
}

// prefetch hints the same stream one row on (4·last bytes past at: the
// next program's row, where programs tile a buffer row after row) into
// the caches, in zmm loops of one-row phases whose load pattern moves
// with the program id (the rows the bench's row kernels stream); one line
// per 16 lanes, so the row's loads wait less on memory while the phase
// computes. In a two-dimensional phase that packs nothing, a load whose
// rows lie a constant stride apart (wider than the row: the column form's
// [BLOCK_R, BLOCK_O] tile of a column sum, its rows 4 KB apart at 1024
// columns) hints the same columns prefetchRows rows on into L2
// (prefetcht1; the next step's tile where the loop walks the rows a tile
// at a time): rows a page or more apart defeat the hardware prefetchers,
// and hints into L1 (prefetcht0) evicted the tile and its accumulator.
// A prefetch never faults: past a buffer's end it is only a wasted line.
func (pg *phaseGen) prefetch(pat *pattern, at amd64.Mem) {
	g := pg.g
	if !g.zmm || pat.root < 0 || pat.elast != 1 {
		return
	}
	ahead, l2 := int64(0), false
	switch {
	case pg.rank == 1 && pg.stream(pat):
		ahead = 4 * int64(pg.last)
	case pg.rank == 2 && len(pg.ph.packs) == 0 && pat.e[0].op == sxConst && pat.e[0].k > int64(pg.last):
		ahead, l2 = int64(pat.esz())*pat.e[0].k*int64(min(pg.ph.shape.Dims[0], prefetchRows)), true
	}
	if ahead == 0 || ahead > 1<<30 {
		return
	}
	g.hintLines(at, ahead, func(m amd64.Mem) {
		if l2 {
			g.a.PREFETCHT1(m)
			g.p.prefetchesL2++
		} else {
			g.a.PREFETCHT0(m)
		}
	})
}

// hintLines emits hint for the line ahead bytes past at, and the one after
// it where the loop moves two zmm vectors a step (zpair).
func (g *gen) hintLines(at amd64.Mem, ahead int64, hint func(amd64.Mem)) {
	lines := 1
	if g.zpair {
		lines = 2
	}
	for c := range lines {
		m := at
		m.Disp += int32(ahead) + int32(64*c)
		hint(m)
	}
}

// prefetchStore hints a zmm loop's unmasked store of a one-row phase whose
// row moves with the program id one row on, for writing (prefetchw): the
// next program's output lines arrive owned while this row computes, so
// its stores do not wait on a read for ownership each.
func (pg *phaseGen) prefetchStore(pat *pattern, at amd64.Mem) {
	g := pg.g
	if noStoreHints.Load() || !g.zmm || pat.root < 0 || pat.elast != 1 || pg.rank != 1 || !pg.stream(pat) {
		return
	}
	ahead := int64(pat.esz()) * int64(pg.last)
	if ahead > 1<<30 {
		return
	}
	g.hintLines(at, ahead, func(m amd64.Mem) {
		g.a.PREFETCHW(m)
		g.p.prefetchesW++
	})
}

// noStoreHints turns prefetchStore off (tests: export_test.go).
var noStoreHints atomic.Bool

// prefetchRows is how many rows on a two-dimensional phase's strided
// loads are hinted (prefetch). Column sums, one core of the 2-core VM
// (BenchmarkColSum, load 4.7–5, 8192×1024 in 128- and 32-column
// programs, ms): none 2.6–3.7 and 4.0–4.7; 32 rows on 1.3–2.1 and
// 2.3–3.6; 64 and 128 rows alike within the noise; 8 and 16 rows less
// gain (1.5–2.6, 2.6–3.8); prefetcht0 at 32 rows 1.8–1.9 and 4.0–4.4.
const prefetchRows = 32

// stream reports whether pattern pat's row part depends on a program id.
func (pg *phaseGen) stream(pat *pattern) bool {
	if pat.pid == 0 {
		pat.pid = 2
		if sxHasPID(pat.c, map[*tile.Value]bool{}) {
			pat.pid = 1
		}
	}
	return pat.pid == 1
}

func sxHasPID(e *sx, seen map[*tile.Value]bool) bool {
	if e == nil {
		return false
	}
	if e.op == sxVal && valueHasPID(e.v, seen) {
		return true
	}
	return sxHasPID(e.a, seen) || sxHasPID(e.b, seen)
}

func valueHasPID(v *tile.Value, seen map[*tile.Value]bool) bool {
	if v == nil || seen[v] {
		return false
	}
	seen[v] = true
	if v.Op == tile.OpProgramID {
		return true
	}
	for _, a := range v.Args {
		if valueHasPID(a, seen) {
			return true
		}
	}
	return false
}

// gather loads the vector's lanes of a pattern with a constant stride s
// of more than one element (the row's active lanes, the others zero):
// scalar loads inserted lane by lane, the high half through t.
func (pg *phaseGen) gather(pat *pattern, dst, t amd64.VReg) {
	a := pg.g.va()
	pg.gatherBase(pat, 4)
	s := int32(4 * pat.elast)
	half := func(r amd64.VReg, from, n int) {
		a.VMOVSSload(r, amd64.Ptr(rT0, int32(from)*s))
		for l := 1; l < n; l++ {
			a.VINSERTPS(r, r, amd64.Ptr(rT0, int32(from+l)*s), uint8(l<<4))
		}
	}
	half(dst, 0, min(4, pg.width)) // VMOVSS clears the lanes above
	if pg.width > 4 {
		half(t, 4, pg.width-4)
		a.VINSERTF128(dst, dst, t, 1)
	}
}

// laneValues stores vector val's lanes to the frame at off (64 bytes): f32
// or i32 lanes, or f64 ones (a zmm register, or a ymm pair without
// AVX-512), for code that reads them lane by lane.
func (g *gen) laneValues(off int32, val amd64.VReg, f64 bool) {
	switch {
	case f64 && g.avx512:
		g.a.VMOVUPDstoreZ(fr(off), 0, z(val))
	case f64:
		g.storeF64Y(fr(off), val, 0, false, 0)
	default:
		g.va().VMOVUPSstore(fr(off), val)
	}
}

// skipLaneOff jumps to skip where lane l's bit of the mask bits saved at
// bits is clear (the lane is off). RDX is clobbered.
func (pg *phaseGen) skipLaneOff(bits amd64.Mem, l int, skip amd64.Label) {
	a := &pg.g.a
	a.MOVQload(rT1, bits)
	a.SHRQ(rT1, uint8(l+1))
	a.Jcc(amd64.CondAE, skip) // carry clear: lane l is off
}

// laneElement puts into RDX the address of lane l's element of n, an
// access through a kScatter pointer: the lane's base (base holds lane 0's
// address, lanes esz·elast bytes apart) plus its offset (the i32 at frame
// offset offs + 4l) in elements, jumping to bad where the element leaves
// its buffer (a fault falls back). RAX is clobbered.
func (pg *phaseGen) laneElement(n *node, l int, base amd64.Mem, offs, esz int32, bad amd64.Label) {
	a := &pg.g.a
	a.MOVSXDload(rT1, fr(offs+4*int32(l)))
	a.SHLQ(rT1, n.pat.sh)
	a.ADDQload(rT1, base)
	if d := int32(l) * esz * int32(n.pat.elast); d != 0 {
		a.ADDQimm(rT1, d)
	}
	a.CMPQload(rT1, fr(paramBase(n.pat.root)))
	a.Jcc(amd64.CondB, bad)
	a.LEAQ(rT0, amd64.Ptr(rT1, esz))
	a.CMPQload(rT0, fr(paramEnd(n.pat.root)))
	a.Jcc(amd64.CondA, bad)
}

// laneSlots begins a lane-by-lane access through kScatter pointer n.pat
// (elements of esz bytes): the offsets (eight i32 lanes in offs), the
// active lanes' mask bits (where masked) and lane 0's element address
// go to frame slots, for laneElement and skipLaneOff. RAX and RDX are
// clobbered.
func (pg *phaseGen) laneSlots(n *node, offs, mask amd64.VReg, masked bool, esz int32) (offSlots int32, base, bits amd64.Mem) {
	a := &pg.g.a
	slots := pg.g.alloc(48, 32) // the offsets, the lane-0 address, the mask's bits
	offSlots, base, bits = slots, fr(slots+32), fr(slots+40)
	a.VMOVUPSstore(fr(offSlots), offs)
	pg.bitsAndBase(n, mask, masked, esz, bits, base)
	return offSlots, base, bits
}

// bitsAndBase stores the mask's lane bits (where masked) to bits and lane
// 0's element address to base, for a lane-by-lane access (laneSlots,
// atomicAdd). RAX and RDX are clobbered.
func (pg *phaseGen) bitsAndBase(n *node, mask amd64.VReg, masked bool, esz int32, bits, base amd64.Mem) {
	a := &pg.g.a
	if masked {
		a.VMOVMSKPS(rT0, mask)
		a.MOVQstore(bits, rT0)
	}
	pg.gatherBase(n.pat, esz) // RAX: lane 0's element (RDX clobbered)
	a.MOVQstore(base, rT0)
}

// gatherIdx is a load of 4-byte elements through a kScatter pointer:
// each active lane's element, its base's lane plus its offset, checked
// against the buffer (a fault falls back) and inserted into the vector,
// the others +0, then other blended in where the load has one. srcs are
// the mask and other (as the load has them) and the offsets, last.
func (pg *phaseGen) gatherIdx(n *node, dst amd64.VReg, srcs []opnd, t []amd64.VReg) {
	g := pg.g
	a := g.va()
	offs := toReg(pg, srcs[len(srcs)-1], t[3])
	srcs = srcs[:len(srcs)-1]
	var m *opnd
	if len(srcs) > 0 {
		m = &srcs[0]
	}
	mask, masked := pg.activeMask(m, t[0])
	if n.pat.sh == 3 {
		offSlots, base, bits := pg.laneSlots(n, offs, mask, masked, 8)
		pg.gatherIdxF64(n, dst, srcs, mask, masked, offSlots, base, bits, t)
		return
	}
	offSlots, base, bits := pg.laneSlots(n, offs, mask, masked, 4)
	other := len(srcs) == 2 && !isZeroConst(n.v.Args[2])
	into := dst
	if other {
		into = t[2] // dst may be an operand's register: written last
	}
	a.VXORPS(into, into, into)
	if pg.width > 4 {
		a.VXORPS(t[1], t[1], t[1])
	}
	bad := g.stub(n.v.ID)
	for l := 0; l < pg.width; l++ {
		r, ll := into, l
		if l >= 4 {
			r, ll = t[1], l-4
		}
		skip := a.NewLabel()
		if masked {
			pg.skipLaneOff(bits, l, skip)
		}
		pg.laneElement(n, l, base, offSlots, 4, bad)
		a.VINSERTPS(r, r, amd64.Ptr(rT1, 0), uint8(ll<<4))
		a.Bind(skip)
	}
	if pg.width > 4 {
		a.VINSERTF128(into, into, t[1], 1)
	}
	if other {
		mr := toReg(pg, *m, t[0])
		or := toReg(pg, srcs[1], t[1])
		a.VBLENDVPS(dst, or, into, mr)
	}
}

// gatherIdxF64 is gatherIdx's end for f64 elements (srcs the mask and
// other, as the load has them; laneSlots done): each active lane's
// element, checked, copied to a frame vector whose other lanes are +0,
// which is then loaded as the f64 vector (a zmm register, or a ymm pair:
// f64y.go), other blended in where the load has one.
func (pg *phaseGen) gatherIdxF64(n *node, dst amd64.VReg, srcs []opnd, mask amd64.VReg, masked bool, offSlots int32, base, bits amd64.Mem, t []amd64.VReg) {
	g := pg.g
	a := &g.a
	vals := g.alloc(64, 64)
	a.VXORPS(t[1], t[1], t[1])
	a.VMOVUPSstore(fr(vals), t[1])
	a.VMOVUPSstore(fr(vals+32), t[1])
	bad := g.stub(n.v.ID)
	for l := 0; l < pg.width; l++ {
		skip := a.NewLabel()
		if masked {
			pg.skipLaneOff(bits, l, skip)
		}
		pg.laneElement(n, l, base, offSlots, 8, bad)
		a.MOVQload(rT0, amd64.Ptr(rT1, 0))
		a.MOVQstore(fr(vals+8*int32(l)), rT0)
		a.Bind(skip)
	}
	other := len(srcs) == 2 && !isZeroConst(n.v.Args[2])
	into := dst
	if other {
		into = t[3] // dst may be the mask's or other's register: written last
	}
	if g.avx512 {
		a.VMOVUPDZ(z(into), 0, fr(vals))
	} else {
		a.VMOVUPD(into, fr(vals))
		a.VMOVUPD(hi(into), fr(vals+32))
	}
	if other {
		pg.blendOtherF64(dst, srcs[1].reg, into, t[2], mask)
	}
}

// scatterIdx is a store through a kScatter pointer: each active lane's
// value to its base's lane plus its offset, lane by lane in order,
// checked against the buffer (a fault falls back). srcs are the value,
// the mask (where the store has one and the row is not unmasked) and the
// offsets, last.
func (pg *phaseGen) scatterIdx(n *node, srcs []opnd, t []amd64.VReg) {
	g := pg.g
	a := g.va()
	f64 := n.pat.sh == 3
	esz := int32(4)
	if f64 {
		esz = 8
	}
	offs := toReg(pg, srcs[len(srcs)-1], t[2])
	srcs = srcs[:len(srcs)-1]
	val := toReg(pg, srcs[0], t[1])
	var m *opnd
	if len(srcs) > 1 {
		m = &srcs[1]
	}
	mask, masked := pg.activeMask(m, t[0])
	vals := g.alloc(64, 64)
	g.laneValues(vals, val, f64)
	offSlots, base, bits := pg.laneSlots(n, offs, mask, masked, esz)
	bad := g.stub(n.v.ID)
	for l := 0; l < pg.width; l++ {
		skip := a.NewLabel()
		if masked {
			pg.skipLaneOff(bits, l, skip)
		}
		pg.laneElement(n, l, base, offSlots, esz, bad)
		if f64 {
			a.MOVQload(rT0, fr(vals+int32(l)*esz))
			a.MOVQstore(amd64.Ptr(rT1, 0), rT0)
		} else {
			a.MOVLload(rT0, fr(vals+int32(l)*esz))
			a.MOVLstore(amd64.Ptr(rT1, 0), rT0)
		}
		a.Bind(skip)
	}
}

// gatherMasked is gather under a mask: a lane whose mask is off is +0
// and its element is not read (its address may lie past the buffer). The
// mask's bits go to RDX, shifted out lane by lane into the carry.
func (pg *phaseGen) gatherMasked(pat *pattern, dst, t, mask amd64.VReg) {
	a := pg.g.va()
	pg.gatherBase(pat, 4)
	a.VMOVMSKPS(rT1, mask) // before dst is written: it may be the mask's register
	a.VXORPS(dst, dst, dst)
	if pg.width > 4 {
		a.VXORPS(t, t, t)
	}
	s := int32(4 * pat.elast)
	for l := 0; l < pg.width; l++ {
		r, ll := dst, l
		if l >= 4 {
			r, ll = t, l-4
		}
		skip := a.NewLabel()
		a.SHRQ(rT1, 1)
		a.Jcc(amd64.CondAE, skip) // carry clear: lane l is off
		a.VINSERTPS(r, r, amd64.Ptr(rT0, int32(l)*s), uint8(ll<<4))
		a.Bind(skip)
	}
	if pg.width > 4 {
		a.VINSERTF128(dst, dst, t, 1)
	}
}

// scatter stores the vector's f32 lanes to a pattern with a constant
// stride of more than one element, lane by lane (VEXTRACTPS), the high
// half through t; under a mask only the active lanes (the others'
// addresses may lie past the buffer), the mask's bits shifted out of RDX
// as gatherMasked does. t may be the mask's register: the bits are taken
// before t is written.
func (pg *phaseGen) scatter(pat *pattern, val, t, mask amd64.VReg, masked bool) {
	a := pg.g.va()
	pg.gatherBase(pat, 4)
	if masked {
		a.VMOVMSKPS(rT1, mask)
	}
	s := int32(4 * pat.elast)
	for l := 0; l < pg.width; l++ {
		r, ll := val, l
		if l >= 4 {
			if l == 4 {
				a.VEXTRACTF128(t, val, 1)
			}
			r, ll = t, l-4
		}
		var skip amd64.Label
		if masked {
			skip = a.NewLabel()
			a.SHRQ(rT1, 1)
			a.Jcc(amd64.CondAE, skip) // carry clear: lane l is off
		}
		a.VEXTRACTPS(amd64.Ptr(rT0, int32(l)*s), r, uint8(ll))
		if masked {
			a.Bind(skip)
		}
	}
}

// gatherBase puts the address of the vector's lane 0 of gather pattern
// pat (esz-byte elements) in RAX; RDX is clobbered.
func (pg *phaseGen) gatherBase(pat *pattern, esz int32) {
	a := &pg.g.a
	b := pg.rowBase(pat)
	a.LEAQ(rT0, amd64.Ptr(rJ, int32(pg.off)))
	a.IMULQimm(rT0, rT0, esz*int32(pat.elast))
	a.ADDQ(rT0, b)
}

func toReg(pg *phaseGen, o opnd, t amd64.VReg) amd64.VReg {
	if o.isMem {
		pg.g.va().vbcst(t, o.mem)
		return t
	}
	return o.reg
}

func isZeroConst(v *tile.Value) bool {
	for v.Op == tile.OpSplat || v.Op == tile.OpBroadcast {
		v = v.Args[0]
	}
	return v.Op == tile.OpConst && v.AuxF == 0 && v.Aux == 0
}

// guardedScalar is the address of a broadcast load under a mask: when no
// lane is active the load must not happen, so it reads a zero constant
// instead.
func (pg *phaseGen) guardedScalar(at amd64.Mem, mask amd64.VReg) amd64.Mem {
	a := pg.g.va()
	zero := pg.g.scratch(32)
	ok := a.NewLabel()
	a.LEAQ(rT0, at)
	a.VMOVMSKPS(rT1, mask)
	a.TESTL(rT1, rT1)
	a.Jcc(amd64.CondNE, ok)
	a.LEAQ(rT0, fr(zero))
	a.Bind(ok)
	return amd64.Ptr(rT0, 0)
}

// store: a vector store, masked. In an unmasked row over a prefix of its
// lanes (fast.go) a store that runs over it stores this copy's lanes
// before the prefix's end only: a lane stride apart, those lanes; else
// under the constant mask of those lanes.
func (pg *phaseGen) store(n *node, srcs []opnd, t []amd64.VReg) error {
	if n.v.Op == tile.OpAtomicAdd {
		return pg.atomicAdd(n, srcs, t)
	}
	if n.scat {
		pg.scatterIdx(n, srcs, t)
		return nil
	}
	a := pg.g.va()
	if fp := pg.fast; fp != nil && fp.prefixed[n] {
		active := min(lane, fp.prefix-pg.off)
		if active <= 0 {
			return nil
		}
		if active < lane {
			w := pg.width
			pg.width = active
			defer func() { pg.width = w }()
			if n.pat.elast > 1 {
				val := toReg(pg, srcs[0], t[1])
				if n.pat.sh == 3 {
					pg.scatterF64(n.pat, val, t[0], 0, false)
				} else {
					pg.scatter(n.pat, val, t[0], 0, false)
				}
				return nil
			}
		}
	}
	val := toReg(pg, srcs[0], t[1])
	var m *opnd
	if len(srcs) > 1 {
		m = &srcs[1]
	}
	mask, masked := pg.activeMask(m, t[0])
	rowChecked := pg.fast != nil && pg.fast.rowChecked[n] // fastPlan.rowChecked
	if masked && m != nil && !rowChecked {
		pg.checkLanes(n, n.pat, mask)
	}
	if n.pat.elast > 1 { // a scatter (unmasked: the row's range was checked; masked: the active lanes')
		if n.pat.sh == 3 {
			pg.scatterF64(n.pat, val, t[0], mask, masked)
			return nil
		}
		pg.scatter(n.pat, val, t[0], mask, masked)
		return nil
	}
	at := pg.addr(n.pat)
	if !masked && pg.streamed(n, at, val) {
		return nil
	}
	if n.pat.sh == 3 {
		switch {
		case n.pat.elast == 0 && pg.last > 1:
			// every lane to one address: the last active lane's value
			skip := a.NewLabel()
			if masked {
				a.VMOVMSKPS(rT0, mask)
				a.TESTL(rT0, rT0)
				a.Jcc(amd64.CondE, skip)
				a.BSRL(rT0, rT0)
			} else {
				a.MOVLimm(rT0, uint32(pg.width-1))
			}
			tmp := pg.g.alloc(64, 64)
			if pg.g.avx512 {
				pg.g.a.VMOVUPDstoreZ(fr(tmp), 0, z(val))
			} else {
				pg.g.storeF64Y(fr(tmp), val, 0, false, 0)
			}
			a.VMOVSDload(t[0], amd64.PtrIdx(rF, rT0, 8, tmp))
			a.VMOVSDstore(at, t[0])
			a.Bind(skip)
		case !pg.g.avx512:
			pg.g.storeF64Y(at, val, mask, masked, t[1])
		case masked:
			skip := a.NewLabel() // no lane active: no store (see load)
			k := pg.g.kMask(mask)
			a.VMOVMSKPS(rT0, mask)
			a.TESTL(rT0, rT0)
			a.Jcc(amd64.CondE, skip)
			pg.g.a.VMOVUPDstoreZ(at, k, z(val))
			a.Bind(skip)
		default:
			pg.g.a.VMOVUPDstoreZ(at, 0, z(val))
		}
		return nil
	}
	if n.pat.elast == 0 && pg.last > 1 {
		// every lane to one address (a value per row, stored by the lane
		// a mask picks): the last active lane's value, the reference's
		// last write
		skip := a.NewLabel()
		if masked {
			a.VMOVMSKPS(rT0, mask)
			a.TESTL(rT0, rT0)
			a.Jcc(amd64.CondE, skip)
			a.BSRL(rT0, rT0)
		} else {
			a.MOVLimm(rT0, uint32(pg.width-1))
		}
		tmp := pg.g.scratch(32)
		a.VMOVUPSstore(fr(tmp), val)
		a.VMOVSSload(t[0], amd64.PtrIdx(rF, rT0, 4, tmp))
		a.VMOVSSstore(at, t[0])
		a.Bind(skip)
		return nil
	}
	if masked && rowChecked {
		a.VMASKMOVPSstore(at, mask, val)
	} else if masked {
		skip := a.NewLabel() // no lane active: no store (see load)
		a.VMOVMSKPS(rT0, mask)
		a.TESTL(rT0, rT0)
		a.Jcc(amd64.CondE, skip)
		a.VMASKMOVPSstore(at, mask, val)
		a.Bind(skip)
	} else {
		pg.prefetchStore(n.pat, at)
		a.VMOVUPSstore(at, val)
	}
	return nil
}

// atomicAdd adds each active lane's value to its element, lane by lane,
// each by a compare-and-swap loop (LOCK CMPXCHG on the element's bits: a
// NaN or -0 compares as its bits, so the loop ends), as other programs on
// other workers may add to the same elements. The lanes' values and the
// mask's bits go to the frame first; RAX holds the expected bits, RDX the
// vector's lane-0 address, RCX the new bits (saved and restored: it may
// hold a row base). Only outside the unmasked loops (planFast declines a
// phase with an atomic add), so f32 vectors are ymm registers.
func (pg *phaseGen) atomicAdd(n *node, srcs []opnd, t []amd64.VReg) error {
	g := pg.g
	a := g.va()
	f64 := n.pat.sh == 3
	esz := int32(4)
	if f64 {
		esz = 8
	}
	val := toReg(pg, srcs[0], t[1])
	var m *opnd
	var offs amd64.VReg
	nm := len(srcs)
	if n.scat {
		offs, nm = toReg(pg, srcs[nm-1], t[2]), nm-1
	}
	if nm > 1 {
		m = &srcs[1]
	}
	mask, masked := pg.activeMask(m, t[0])
	if masked && m != nil && !n.scat {
		pg.checkLanes(n, n.pat, mask)
	}
	vals := g.alloc(64, 64)
	slots := g.alloc(40, 8) // mask bits, lane-0 address, saved RCX, the element's bits, lane 0's old value's place
	bits, base, saved, cur, oldAt := fr(slots), fr(slots+8), fr(slots+16), fr(slots+24), fr(slots+32)
	if n.old != nil {
		// where this vector's old values go: lanes next to each other in
		// the frame block (before gatherBase, which clobbers RDX)
		a.LEAQ(rT0, pg.addr(n.old))
		a.MOVQstore(oldAt, rT0)
	}
	g.laneValues(vals, val, f64)
	var offSlots int32
	if n.scat {
		offSlots = g.alloc(32, 32)
		a.VMOVUPSstore(fr(offSlots), offs)
	}
	pg.bitsAndBase(n, mask, masked, esz, bits, base)
	a.MOVQstore(saved, amd64.RCX)
	x := t[0]
	var bad amd64.Label
	if n.scat {
		bad = g.stub(n.v.ID)
	}
	// keepOld writes the lane's old value (RAX, where the compare-and-swap
	// found it), or 0 for a lane masked off, to its place in the frame
	keepOld := func(l int, off amd64.Label) {
		if n.old == nil {
			a.Bind(off)
			return
		}
		done := a.NewLabel()
		a.JMP(done)
		a.Bind(off)
		a.XORL(rT0, rT0)
		a.Bind(done)
		a.MOVQload(amd64.RCX, oldAt)
		if f64 {
			a.MOVQstore(amd64.Ptr(amd64.RCX, int32(l)*esz), rT0)
		} else {
			a.MOVLstore(amd64.Ptr(amd64.RCX, int32(l)*esz), rT0)
		}
	}
	for l := 0; l < pg.width; l++ {
		skip, retry := a.NewLabel(), a.NewLabel()
		if masked {
			pg.skipLaneOff(bits, l, skip)
		}
		var at amd64.Mem
		if n.scat {
			pg.laneElement(n, l, base, offSlots, esz, bad)
			at = amd64.Ptr(rT1, 0)
		} else {
			a.MOVQload(rT1, base)
			at = amd64.Ptr(rT1, int32(l)*esz*int32(n.pat.elast))
		}
		if f64 {
			a.MOVQload(rT0, at)
		} else {
			a.MOVLload(rT0, at)
		}
		a.Bind(retry)
		if n.v.Type.DType == tile.I32 { // an integer add: old + val, swapped in
			a.MOVLload(amd64.RCX, fr(vals+int32(l)*esz))
			a.ADDL(amd64.RCX, rT0)
			a.LOCKCMPXCHGL(at, amd64.RCX)
			a.Jcc(amd64.CondNE, retry)
			keepOld(l, skip)
			continue
		}
		a.MOVQstore(cur, rT0)
		if f64 {
			a.VMOVSDload(x, cur)
			a.VADDSD(x, x, fr(vals+int32(l)*esz))
			a.VMOVSDstore(cur, x)
			a.MOVQload(amd64.RCX, cur)
			a.LOCKCMPXCHGQ(at, amd64.RCX)
		} else {
			a.VMOVSSload(x, cur)
			a.VADDSS(x, x, fr(vals+int32(l)*esz))
			a.VMOVSSstore(cur, x)
			a.MOVLload(amd64.RCX, cur)
			a.LOCKCMPXCHGL(at, amd64.RCX)
		}
		a.Jcc(amd64.CondNE, retry)
		keepOld(l, skip)
	}
	a.MOVQload(amd64.RCX, saved)
	return nil
}

// streamed writes an unmasked store with the streaming hint past the
// caches where ntStore can, reporting whether it did.
func (pg *phaseGen) streamed(n *node, at amd64.Mem, val amd64.VReg) bool {
	return tile.CacheHint(n.v.Aux) == tile.CacheStreaming && pg.ntStore(n.pat, at, val)
}

// ntStore writes the whole vector of a store with the streaming hint past
// the caches (VMOVNTPS: no read for ownership, the line not kept in them)
// where its address is aligned to the vector's size, as VMOVNTPS requires,
// and with a plain store where it is not: each vector's address is tested
// (rows whose width is no multiple of the vector start at every alignment;
// the branch goes the same way along a row). f32 vectors are a ymm or zmm
// register (zmm pairs alike); f64 ones a zmm register, or two ymm halves
// (f64y.go), both 32-byte aligned where the first is. The code returns
// through an SFENCE (gen.nt), so that the stores are ordered before the
// pool's handshake that ends the call. It emits nothing and reports false
// where the store is not contiguous lanes of a parameter's buffer.
func (pg *phaseGen) ntStore(pat *pattern, at amd64.Mem, val amd64.VReg) bool {
	g := pg.g
	if pat.root < 0 || pat.elast != 1 {
		return false
	}
	v, a := g.va(), &g.a
	f64 := pat.sh == 3
	align := int32(32) // a ymm register, or an f64 vector's ymm halves
	if f64 && g.avx512 || !f64 && g.zmm {
		align = 64
	}
	a.LEAQ(rT0, at)
	a.MOVQ(rT1, rT0)
	a.ANDQimm(rT1, align-1)
	plain, done := a.NewLabel(), a.NewLabel()
	a.Jcc(amd64.CondNE, plain)
	to := amd64.Ptr(rT0, 0)
	switch {
	case f64 && g.avx512:
		a.VMOVNTPSstoreZ(to, z(val))
	case f64:
		a.VMOVNTPSstore(to, half(val, 0))
		a.VMOVNTPSstore(memHalf(to, 1), half(val, 1))
	case g.zmm:
		v.each(func() { a.VMOVNTPSstoreZ(v.zm(to), v.z(val)) })
	default:
		a.VMOVNTPSstore(to, val)
	}
	a.JMP(done)
	a.Bind(plain)
	switch {
	case f64 && g.avx512:
		a.VMOVUPDstoreZ(to, 0, z(val))
	case f64:
		g.storeF64Y(to, val, 0, false, 0)
	default:
		v.VMOVUPSstore(to, val)
	}
	a.Bind(done)
	g.nt = true
	g.p.ntStores++
	return true
}

func (pg *phaseGen) matRead(n *node, dst amd64.VReg, t []amd64.VReg) {
	a := pg.g.va()
	if n.pat.elast > 1 {
		// the block read across its rows (a transpose of a product's
		// result or of a kept value): its lanes a constant stride apart,
		// loaded lane by lane as a buffer's strided lanes are (addr would
		// read them as contiguous ones: until 2026-12-07 such a read took
		// the block's next elements, silently wrong)
		if n.pat.sh == 3 {
			pg.gatherF64(n.pat, dst, t[0], t[1])
		} else {
			pg.gather(n.pat, dst, t[0])
		}
		return
	}
	at := pg.addr(n.pat)
	if n.pat.sh == 3 {
		pg.matReadF64(n, dst, t, at)
		return
	}
	switch {
	case n.pat.elast == 0:
		a.VBROADCASTSS(dst, at)
	case pg.width < lane:
		a.VMASKMOVPSload(dst, pg.laneMaskReg(t[0]), at)
	default:
		a.VMOVUPS(dst, at)
	}
}

func (pg *phaseGen) matWrite(n *node, v opnd, t []amd64.VReg) {
	a := pg.g.va()
	val := toReg(pg, v, t[1])
	at := pg.addr(n.pat)
	if n.pat.sh == 3 && !pg.g.avx512 {
		m := amd64.VReg(0)
		if pg.width < lane {
			m = pg.laneMaskReg(t[0])
		}
		pg.g.storeF64Y(at, val, m, pg.width < lane, t[1])
		return
	}
	if n.pat.sh == 3 {
		var k amd64.KReg
		if pg.width < lane {
			k = pg.g.kMask(pg.laneMaskReg(t[0]))
		}
		pg.g.a.VMOVUPDstoreZ(at, k, z(val))
		return
	}
	if pg.width < lane {
		a.VMASKMOVPSstore(at, pg.laneMaskReg(t[0]), val)
		return
	}
	a.VMOVUPSstore(at, val)
}

// reduce accumulates one vector into a reduction.
func (pg *phaseGen) reduce(n *node, c int, x opnd, t []amd64.VReg) error {
	a := pg.g.va()
	var r *redState
	for _, s := range pg.reds {
		if s.in == n {
			r = s
		}
	}
	xr := toReg(pg, x, t[2])
	if isF64Red(r) {
		return pg.reduceF64(r, c, xr, t)
	}
	if r.v.Type.DType == tile.I32 {
		return pg.reduceI32(r, c, xr, t)
	}
	if r.axis == r.v.Args[0].Type.Shape.Rank-1 && r.inMem {
		// the accumulator in the frame (more reductions than registers)
		acc := fr(r.mem[c])
		if pg.g.zmm { // both halves, as the one accumulator in registers
			acc = fr(r.mem[0])
		}
		switch {
		case pg.last <= lane:
			a.VMOVUPSstore(acc, xr)
		case r.v.Op == tile.OpReduceSum && pg.g.zmm:
			// the frame's vector is no uniform: loaded, not broadcast
			a.VMOVUPS(t[0], acc)
			a.VADDPS(t[0], xr, amd64.Operand(t[0]))
			a.VMOVUPSstore(acc, t[0])
		case r.v.Op == tile.OpReduceSum:
			a.VADDPS(t[0], xr, acc)
			a.VMOVUPSstore(acc, t[0])
		default:
			a.VMOVUPS(t[0], acc)
			pg.g.maxStep(r.v.Op, t[0], xr, t[1], t[3])
			a.VMOVUPSstore(acc, t[0])
		}
		return nil
	}
	if r.axis == r.v.Args[0].Type.Shape.Rank-1 {
		acc := r.acc[c]
		if pg.g.zmm { // one accumulator of 16 lanes (fast.go: innerZmm)
			acc = r.acc[0]
		}
		switch {
		case pg.last <= lane:
			a.VMOVAPS(acc, xr) // one vector a row: its lanes are combined in order
		case pg.g.zpair: // the pair's vectors in turn, into the one accumulator
			g := pg.g
			g.zfixed = true
			for c := range 2 {
				g.zc = c
				switch {
				case r.v.Op == tile.OpReduceSum && c == 1 && g.sum32:
					// the second vector's own partial sums (fast.go: sum32)
					a.Asm.VADDPSZ(nanOf(acc), nanOf(acc), a.z(xr))
				case r.v.Op == tile.OpReduceSum:
					a.Asm.VADDPSZ(zr(acc), zr(acc), a.z(xr))
				case g.nanDetect: // the scan's steps but NaNs (fast.go: nanDetectOK)
					if r.v.Op == tile.OpReduceMin {
						a.Asm.VMINPSZ(zr(acc), a.z(xr), zr(acc))
					} else {
						a.Asm.VMAXPSZ(zr(acc), a.z(xr), zr(acc))
					}
					a.wrote(acc)
				default:
					g.maxStepZ(r.v.Op, acc, xr)
				}
			}
			g.zfixed, g.zc = false, 0
			if g.nanDetect && r.v.Op != tile.OpReduceSum {
				// lanes where either vector of the pair is NaN, into kNaNs
				k := a.newK()
				a.Asm.VCMPPSZ(k, zr(xr), zr(xr)+16, amd64.CmpUNORD)
				a.Asm.KORW(kNaNs, kNaNs, k)
			}
		case r.v.Op == tile.OpReduceSum:
			a.VADDPS(acc, acc, xr)
		case pg.g.zmm:
			pg.g.maxStepZ(r.v.Op, acc, xr)
		default:
			pg.g.maxStep(r.v.Op, acc, xr, t[0], t[1])
		}
		return nil
	}
	// along another axis (0 of a rank-2 block, 0 or 1 of a rank-3 one):
	// the first row along the axis stores, the others combine in order
	pg.offAxisReduce(r, xr, t, func() {
		if r.v.Op == tile.OpReduceSum {
			a.VADDPS(t[0], t[0], xr)
		} else {
			pg.g.maxStep(r.v.Op, t[0], xr, t[1], t[3]) // xr may be t[2]
		}
	})
	return nil
}

// offAxisReduce is a vector of a reduction along an axis other than the
// last (offAxis): the row's vector of the result block loaded into t[0],
// combined with xr by step (into t[0]) and stored back, or xr stored where
// the row is the first along the axis. A rank-3 block's result rows
// narrower than a vector lie next to each other: theirs are read and
// written under the row's lane mask (t[3]).
func (pg *phaseGen) offAxisReduce(r *redState, xr amd64.VReg, t []amd64.VReg, step func()) {
	a := pg.g.va()
	at, first := pg.offAxis(r, 4)
	done := a.NewLabel()
	narrow := r.v.Args[0].Type.Shape.Rank == 3 && pg.width < lane
	store := func(x amd64.VReg) {
		if narrow {
			a.VMASKMOVPSstore(at, pg.laneMaskReg(t[3]), x)
		} else {
			a.VMOVUPSstore(at, x)
		}
	}
	if narrow {
		a.VMASKMOVPSload(t[0], pg.laneMaskReg(t[3]), at)
	} else {
		a.VMOVUPS(t[0], at)
	}
	step()
	store(t[0])
	a.JMP(done)
	a.Bind(first)
	store(xr)
	a.Bind(done)
}

// reduceI32 accumulates the vector of i32 lanes in xr into reduction r
// (ymm loops only: zmmOK): a sum wraps as the reference's int32 sum does,
// so in any order the same bits, and max and min are exact, so the lanes
// and rows may combine in any order.
func (pg *phaseGen) reduceI32(r *redState, c int, xr amd64.VReg, t []amd64.VReg) error {
	a := &pg.g.a
	if r.axis == r.v.Args[0].Type.Shape.Rank-1 {
		switch {
		case r.inMem:
			return unsupported(r.v, "i32 reductions past the accumulator registers")
		case pg.last <= lane:
			a.VMOVAPS(r.acc[c], xr) // one vector a row: rowEnd combines its lanes
		default:
			i32Step(a, r.v.Op, r.acc[c], xr)
		}
		return nil
	}
	pg.offAxisReduce(r, xr, t, func() { i32Step(a, r.v.Op, t[0], xr) })
	return nil
}

// i32Step is acc = acc op x lane by lane for an i32 reduction op.
func i32Step(a *amd64.Asm, op tile.Op, acc amd64.VReg, x amd64.Operand) {
	switch op {
	case tile.OpReduceSum:
		a.VPADDD(acc, acc, x)
	case tile.OpReduceMax:
		a.VPMAXSD(acc, acc, x)
	default:
		a.VPMINSD(acc, acc, x)
	}
}

// offAxis begins a reduction along an axis other than the last (axis 0 of
// a rank-2 block, 0 or 1 of a rank-3 one), whose result block accumulates
// in the frame: it returns the address of the row's vector being emitted
// in the result block (elements of esz bytes; the row part of a rank-3
// block's in RDX) and jumps to first where this row is the first along
// the axis (the reference's order: the rows along the axis in turn, the
// outer loop counters counting them). RAX and RDX are clobbered.
func (pg *phaseGen) offAxis(r *redState, esz int32) (amd64.Mem, amd64.Label) {
	a := &pg.g.a
	at := amd64.PtrIdx(rF, rJ, uint8(esz), r.res+esz*int32(pg.off))
	if r.v.Args[0].Type.Shape.Rank == 3 {
		// the result's row: the outer counter of the axis kept
		s := r.v.Args[0].Type.Shape
		kept := 1 - r.axis
		a.MOVQload(rT1, fr(hOuter+8*int32(kept)))
		a.IMULQimm(rT1, rT1, esz*int32(s.Dims[2]))
		a.ADDQ(rT1, rF)
		at = amd64.PtrIdx(rT1, rJ, uint8(esz), r.res+esz*int32(pg.off))
	}
	first := a.NewLabel()
	a.MOVQload(rT0, fr(hOuter+8*int32(r.axis)))
	a.TESTQ(rT0, rT0)
	a.Jcc(amd64.CondE, first)
	return at, first
}

// nanOf is the register that holds, in a zmm loop, the last NaN of each
// lane of the max or min accumulated in acc (maxStepZ): Z16–Z31 are no
// body's registers.
func nanOf(acc amd64.VReg) amd64.ZReg { return amd64.ZReg(16 + acc) }

// maxStepZ is maxStep on an accumulator in a zmm register, in two
// chains: acc = vmaxps(x, acc), the larger where neither is NaN and acc
// where one is (so acc holds the first maximum of the lane's numbers),
// and nanOf(acc) = x where x is NaN (the lane's last NaN); after the loop
// nanFold makes acc the NaN where the lane saw one. That is the scan's
// result in every lane, bit for bit: the scan keeps the first of equal
// maxima (x > acc is false for ±0 against ∓0) and takes every NaN, and
// once it holds a NaN only a later NaN replaces it. acc's chain is one
// instruction (maxStep's zmm form was two: vmaxps, then the blend).
func (g *gen) maxStepZ(op tile.Op, acc, x amd64.VReg) {
	a := g.va()
	xz := a.z(x) // the pair's vector being emitted (pairs: reduce)
	if op == tile.OpReduceMin {
		a.Asm.VMINPSZ(zr(acc), xz, zr(acc))
	} else {
		a.Asm.VMAXPSZ(zr(acc), xz, zr(acc))
	}
	k := a.zk(a.newK())
	a.Asm.VCMPPSZ(k, xz, xz, amd64.CmpUNORD)
	n := nanOf(acc)
	a.Asm.VBLENDMPSZ(n, k, n, xz)
	a.wrote(acc)
}

// nanFold ends a zmm loop's max or min in acc (maxStepZ): the lanes
// whose NaN register holds a NaN take it. K1 is clobbered.
func (g *gen) nanFold(acc amd64.VReg) {
	a := &g.a
	n := nanOf(acc)
	a.VCMPPSZ(1, n, n, amd64.CmpUNORD)
	a.VBLENDMPSZ(zr(acc), 1, zr(acc), n)
}

// maxStep: acc = (x > acc || x != x) ? x : acc, lane by lane (the
// reference's scan; min with <).
func (g *gen) maxStep(op tile.Op, acc, x, t0, t1 amd64.VReg) {
	a := g.va()
	if g.zmm {
		// vmaxps(x, acc) is x > acc ? x : acc (acc where either is NaN), then
		// x where x is NaN: the same per lane, one step shorter on the
		// accumulator's chain
		if op == tile.OpReduceMin {
			a.Asm.VMINPSZ(zr(acc), zr(x), zr(acc))
		} else {
			a.Asm.VMAXPSZ(zr(acc), zr(x), zr(acc))
		}
		k := a.newK()
		a.Asm.VCMPPSZ(k, zr(x), zr(x), amd64.CmpUNORD)
		a.Asm.VBLENDMPSZ(zr(acc), k, zr(acc), zr(x))
		a.wrote(acc)
		return
	}
	pred := amd64.CmpGT
	if op == tile.OpReduceMin {
		pred = amd64.CmpLT
	}
	a.VCMPPS(t0, x, acc, pred)
	a.VCMPPS(t1, x, x, amd64.CmpUNORD)
	a.VORPS(t0, t0, t1)
	a.VBLENDVPS(acc, acc, x, t0)
}
