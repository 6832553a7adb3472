package native

import (
	"fmt"
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// A phase is emitted as a loop nest over its shape's lanes: the outer
// dimensions one row at a time (counters in the frame), the last in
// vectors of eight lanes (RSI the lane index), every value of the phase
// computed per vector in registers. Memory is reached through patterns:
// an address (or an integer) affine in the lane index, whose part for the
// row is computed at the start of each row into a register.

type nodeOp uint8

const (
	opCompute  nodeOp = iota // an elementwise op of its args
	opUniform                // the same vector at every position: a constant or a frame vector slot
	opIntVec                 // an affine integer's lanes
	opLoad                   // a load through a pattern
	opMatRead                // a frame block of an earlier phase (or a reduction's result)
	opStore                  // a store through a pattern
	opMatWrite               // into the frame block of a value later phases read
	opReduce                 // accumulate into a reduction
)

type node struct {
	v    *tile.Value
	op   nodeOp
	args []*node
	mem  amd64.Mem // opUniform
	pat  *pattern  // memory ops and opIntVec
	last int       // position of the last node that reads it, -1: none
	scat bool      // an atomic add through a kScatter pointer: its last arg the offsets (pat the affine base)
	old  *pattern  // an atomic add whose old values are read: their frame block (body.go: atomicAdd)

	// during emission of one body copy
	reg   int   // register, or -1
	spill int32 // frame offset of its spill slot, or -1
}

// pattern is c + Σ_k e[k]·i_k in elements over the phase's lane index i,
// from a parameter's base (root ≥ 0), the frame (root = -1, base the
// block's offset) or nothing (root = -2: an integer's lanes).
type pattern struct {
	root  int
	base  int32
	c     *sx
	e     []*sx
	elast int64 // e of the last dimension, a constant
	sh    uint8 // log2 of the element's size: 2 (f32, i32), 3 (f64)
	// the row part, per row: in reg, or in the frame at slot
	reg     amd64.Reg
	hasReg  bool
	slot    int32
	checked bool // unmasked accesses: the row's range is checked at the row's start
	anyMask bool
	pid     uint8 // body.go: stream (0 not known yet, 1 the row part moves with a program id, 2 not)
}

// esz is the size of the pattern's elements in bytes.
func (p *pattern) esz() int32 { return 1 << p.sh }

// shiftOf is log2 of the size of a dtype's elements in memory.
func shiftOf(d tile.DType) uint8 {
	if d == tile.F64 {
		return 3
	}
	return 2
}

type phaseGen struct {
	divSlots map[*tile.Value][2]int32 // fast.go: divSetup
	g        *gen
	ph       *phase
	rank     int
	last     int // the last dimension
	width    int // active lanes of a vector: min(8, last)
	nodes    []*node
	memo     map[string]*node
	pats     []*pattern
	reds     []*redState
	// register allocation
	owner [16]*node
	busy  [16]bool
	pairs bool      // f64 vectors are ymm pairs: no AVX-512 (f64y.go)
	pos   int       // the node being emitted
	fast  *fastPlan // emitting the unmasked loop (fast.go), or nil
	// uniforms kept in registers in the zmm loop being emitted (pin.go)
	pinned map[*node]amd64.VReg
	off    int // lane offset of the body copy being emitted (0 or 8; 0 or 16 in zmm)

	zmmCounted bool // counted in plan.zmmPhases
}

type redState struct {
	v   *tile.Value
	in  *node
	acc [2]amd64.VReg // last-axis: accumulators of the two body copies
	// last-axis, when the registers are taken: the accumulators in the frame
	inMem bool
	mem   [2]int32
	axis  int
	res   int32 // frame offset of the result (slot or block)
}

func (g *gen) phase(ph *phase) error {
	if ph.shape.IsScalar() {
		return g.scalarPhase(ph)
	}
	pg := &phaseGen{g: g, ph: ph, rank: ph.shape.Rank, memo: map[string]*node{}}
	pg.last = ph.shape.Dims[pg.rank-1]
	pg.width = min(lane, pg.last)
	if err := pg.build(); err != nil {
		return err
	}
	if len(pg.nodes) == 0 { // nothing left to do (a yield a product wrote in place)
		return nil
	}
	return pg.emit()
}

// ---- building the body ----

func (pg *phaseGen) add(n *node) *node {
	n.last, n.reg, n.spill = -1, -1, -1
	for _, a := range n.args {
		a.last = len(pg.nodes)
	}
	pg.nodes = append(pg.nodes, n)
	return n
}

func (pg *phaseGen) build() error {
	if err := pg.buildNodes(); err != nil {
		return err
	}
	// in place (plan.checkInPlace): each load of a buffer the kernel stores
	// to comes before every store to it, as in the program
	if len(pg.g.p.inplace) > 0 {
		for i, n := range pg.nodes {
			if n.op != opLoad || n.pat.root < 0 || !pg.g.p.stored[n.pat.root] {
				continue
			}
			for _, st := range pg.nodes[:i] {
				if st.op == opStore && st.pat.root == n.pat.root {
					return unsupported(n.v, "load from a buffer the kernel also stores to, after a store to it")
				}
			}
		}
	}
	return nil
}

func (pg *phaseGen) buildNodes() error {
	p := pg.g.p
	id := identity(pg.rank)
	for _, v := range pg.ph.ops {
		in := p.in(v)
		switch in.kind {
		case kStore:
			// lanes a constant stride apart are stored lane by lane
			// (scatter, scatterF64)
			var pat *pattern
			var offs *node
			var err error
			if pi := p.in(v.Args[0]); pi.kind == kScatter {
				// an atomic add at an affine base plus loaded offsets
				if pat, err = pg.affPattern(pi.base, pi.base.root, id); err == nil && pat.elast < 0 {
					err = unsupported(v, "atomic add at a base with a stride known only at run time")
				}
				if err == nil {
					offs, err = pg.eval(pi.scat, id)
				}
			} else {
				pat, err = pg.pointer(v.Args[0], id, true)
			}
			if err != nil {
				return err
			}
			val, err := pg.eval(v.Args[1], id)
			if err != nil {
				return err
			}
			args := []*node{val}
			if len(v.Args) == 3 {
				m, err := pg.eval(v.Args[2], id)
				if err != nil {
					return err
				}
				args = append(args, m)
				pat.anyMask = true
			} else {
				pat.checked = true
			}
			if offs != nil {
				args = append(args, offs)
			}
			st := pg.add(&node{v: v, op: opStore, args: args, pat: pat, scat: offs != nil})
			if v.Op == tile.OpAtomicAdd && p.oldRead[v.ID] {
				st.old = pg.framePattern(pg.g.matBlock(v), v.Type, id)
			}
		case kReduce:
			x, err := pg.eval(v.Args[0], identity(v.Args[0].Type.Shape.Rank))
			if err != nil {
				return err
			}
			n := pg.add(&node{v: v, op: opReduce, args: []*node{x}})
			pg.reds = append(pg.reds, &redState{v: v, in: n, axis: int(v.Aux)})
		default:
			n, err := pg.eval(v, id)
			if err != nil {
				return err
			}
			if in.mat {
				off := pg.g.matBlock(v)
				pat := pg.framePattern(off, v.Type, id)
				pg.add(&node{v: v, op: opMatWrite, args: []*node{n}, pat: pat})
			}
		}
	}
	// operands of products, each to its block
	for _, pk := range pg.ph.packs {
		n, err := pg.eval(pk.x, pk.lanes())
		if err != nil {
			return err
		}
		pat := pg.framePattern(pg.g.packBlock(pk), tile.Type{DType: pk.x.Type.DType, Shape: pg.ph.shape}, id)
		pg.add(&node{v: pk.x, op: opMatWrite, args: []*node{n}, pat: pat})
	}
	// loop-carried blocks: every yielded (or initial) value first, then
	// the writes (a yield may read another carried block)
	var vals []*node
	var dsts []int32
	for _, y := range pg.ph.yields {
		c := y.lp.carries[y.i]
		if p.in(c.yield).kind == kDot && p.in(c.yield).accIn {
			continue // the product wrote the carried block
		}
		n, err := pg.eval(c.yield, id)
		if err != nil {
			return err
		}
		vals, dsts = append(vals, n), append(dsts, pg.g.yieldBlock(y.lp, y.i))
	}
	for _, y := range pg.ph.inits {
		c := y.lp.carries[y.i]
		n, err := pg.eval(c.init, id)
		if err != nil {
			return err
		}
		vals, dsts = append(vals, n), append(dsts, pg.g.block[c.arg.ID])
	}
	for i, n := range vals {
		pat := pg.framePattern(dsts[i], tile.Type{DType: n.v.Type.DType, Shape: pg.ph.shape}, id)
		pg.add(&node{v: n.v, op: opMatWrite, args: []*node{n}, pat: pat})
	}
	return nil
}

// matBlock is the frame block of materialized value v (or a reduction's
// result).
func (g *gen) matBlock(v *tile.Value) int32 {
	if off, ok := g.block[v.ID]; ok {
		return off
	}
	// at least 64 bytes, a vector of lanes: a column reduction of rows
	// narrower than one writes whole vectors (body.go: reduce)
	off := g.alloc(max(int32(v.Type.Shape.Numel())<<shiftOf(v.Type.DType), 64), blockAlign)
	g.block[v.ID] = off
	return off
}

// framePattern addresses a frame block of type t read at lanes m.
func (pg *phaseGen) framePattern(off int32, t tile.Type, m lanes) *pattern {
	s := t.Shape
	e := make([]*sx, pg.rank)
	for k := range e {
		e[k] = sConst(0)
	}
	stride := int64(1)
	for d := s.Rank - 1; d >= 0; d-- {
		if m[d] >= 0 && s.Dims[d] > 1 {
			e[m[d]] = sAdd(e[m[d]], sConst(stride))
		}
		stride *= int64(s.Dims[d])
	}
	return pg.intern(&pattern{root: -1, base: off, c: sConst(0), e: e, sh: shiftOf(t.DType)})
}

// affPattern addresses affine a at lanes m.
func (pg *phaseGen) affPattern(a *aff, root int, m lanes) (*pattern, error) {
	e := make([]*sx, pg.rank)
	for k := range e {
		e[k] = sConst(0)
	}
	for d := 0; d < a.shape.Rank; d++ {
		if m[d] >= 0 && a.shape.Dims[d] > 1 {
			e[m[d]] = sAdd(e[m[d]], a.coef[d])
		}
	}
	sh := uint8(2)
	if root >= 0 {
		sh = shiftOf(pg.g.p.k.Params[root].Type.DType)
	}
	return pg.intern(&pattern{root: root, c: a.c, e: e, sh: sh}), nil
}

// intern returns the pattern equal to p already in the phase, or adds p;
// its last dimension's stride must be a constant.
func (pg *phaseGen) intern(p *pattern) *pattern {
	el := p.e[pg.rank-1]
	p.elast = -1
	switch {
	case el.op == sxConst:
		p.elast = el.k
	case el.op == sxVal && el.v.Op == tile.OpParam && p.root >= 0:
		// a stride passed as a parameter (a Triton kernel's stride_k):
		// taken as 1, the common case, and checked at each launch
		// (Kernel.unit: another value falls back to the executor)
		p.elast = 1
		pg.g.p.unit[el.v.Aux] = true
	}
	for _, q := range pg.pats {
		if q.root == p.root && q.base == p.base && q.sh == p.sh && sxEqual(q.c, p.c) && q.elast == p.elast {
			same := true
			for k := range p.e {
				if !sxEqual(p.e[k], q.e[k]) {
					same = false
					break
				}
			}
			if same {
				return q
			}
		}
	}
	pg.pats = append(pg.pats, p)
	return p
}

func sxEqual(a, b *sx) bool {
	if a == b {
		return true
	}
	if a.op != b.op {
		return false
	}
	switch a.op {
	case sxConst:
		return a.k == b.k
	case sxVal:
		return a.v == b.v
	case sxNeg, sxClamp32:
		return sxEqual(a.a, b.a)
	case sxDiv, sxRem:
		return a.k == b.k && sxEqual(a.a, b.a)
	}
	return sxEqual(a.a, b.a) && sxEqual(a.b, b.b)
}

// pointer is the pattern of pointer block v at lanes m; gather allows a
// constant stride of more than one element between lanes (a load: eight
// scalar loads a vector, under a mask those of the active lanes, the
// others then other; a store: eight scalar stores, under a mask those of
// the active lanes).
func (pg *phaseGen) pointer(v *tile.Value, m lanes, gather bool) (*pattern, error) {
	a := pg.g.p.in(v).aff
	if a == nil || a.root < 0 {
		return nil, unsupported(v, "pointer that is not affine")
	}
	pat, err := pg.affPattern(a, a.root, m)
	if err != nil {
		return nil, err
	}
	if pat.elast != 0 && pat.elast != 1 && !(gather && pat.elast > 1 && pat.elast <= math.MaxInt32/int64(pat.esz()*lane)) {
		what := "a stride known only at run time"
		if pat.elast >= 0 {
			what = fmt.Sprintf("a stride of %d elements", pat.elast)
		}
		return nil, unsupported(v, "access with %s between lanes (a gather)", what)
	}
	return pat, nil
}

// eval is the node computing u at lanes m of the phase.
func (pg *phaseGen) eval(u *tile.Value, m lanes) (*node, error) {
	key := fmt.Sprint(u.ID, m.key())
	if n, ok := pg.memo[key]; ok {
		return n, nil
	}
	n, err := pg.evalNew(u, m)
	if err != nil {
		return nil, err
	}
	pg.memo[key] = n
	return n, nil
}

func (pg *phaseGen) evalNew(u *tile.Value, m lanes) (*node, error) {
	g, p := pg.g, pg.g.p
	in := p.in(u)
	switch in.kind {
	case kView:
		src := u.Args[0]
		if src.Type.Shape.IsScalar() {
			return pg.uniform(src)
		}
		return pg.eval(src, through(u, m))
	case kScalarFloat, kScalarBool:
		return pg.uniform(u)
	case kCarry:
		pat := pg.framePattern(g.matBlock(u), u.Type, m)
		return pg.add(&node{v: u, op: opMatRead, pat: pat}), nil
	case kReduce:
		if u.Type.Shape.IsScalar() {
			return pg.uniform(u)
		}
		pat := pg.framePattern(g.matBlock(u), u.Type, m)
		return pg.add(&node{v: u, op: opMatRead, pat: pat}), nil
	case kDot:
		pat := pg.framePattern(g.dotBlock(u), u.Type, m)
		return pg.add(&node{v: u, op: opMatRead, pat: pat}), nil
	case kStore:
		if u.Op != tile.OpAtomicAdd || !p.oldRead[u.ID] {
			return nil, unsupported(u, "a store's value read")
		}
		// an atomic add's old values, written by its phase (atomicAdd)
		pat := pg.framePattern(g.matBlock(u), u.Type, m)
		return pg.add(&node{v: u, op: opMatRead, pat: pat}), nil
	case kRegroup: // its operand's frame block at u's shape (plan.go: regroupFrame)
		src := u.Args[0]
		off := g.matBlock(src)
		if p.in(src).kind == kDot {
			off = g.dotBlock(src)
		}
		pat := pg.framePattern(off, u.Type, m)
		return pg.add(&node{v: u, op: opMatRead, pat: pat}), nil
	case kTrans:
		if pg.ph.level < in.avail { // its pack's phase: the load itself
			return pg.loadNode(u, m)
		}
		pat := pg.framePattern(g.matBlock(u), u.Type, m)
		return pg.add(&node{v: u, op: opMatRead, pat: pat}), nil
	case kAffine:
		if u.Type.DType != tile.I32 {
			return nil, unsupported(u, "%v lanes as a vector", u.Type.DType)
		}
		pat, err := pg.affPattern(in.aff, -2, m)
		if err != nil {
			return nil, err
		}
		if pat.elast < 0 {
			return nil, unsupported(u, "integer lanes with a stride that is not constant")
		}
		return pg.add(&node{v: u, op: opIntVec, pat: pat}), nil
	case kPeriodic:
		x, err := pg.eval(u.Args[0], m)
		if err != nil {
			return nil, err
		}
		return pg.add(&node{v: u, op: opCompute, args: []*node{x}}), nil
	case kFloat, kMask:
		if !in.formula && (in.ph != pg.ph || !m.isIdentity()) {
			if !in.mat { // the plan never had its phase write it: declined, not read unwritten
				return nil, unsupported(u, "a kept value read where the plan did not keep it")
			}
			pat := pg.framePattern(g.matBlock(u), u.Type, m)
			return pg.add(&node{v: u, op: opMatRead, pat: pat}), nil
		}
		if u.Op == tile.OpLoad {
			return pg.loadNode(u, m)
		}
		if in.cmp64 != nil {
			return pg.compare64Node(u, m)
		}
		var args []*node
		for _, a := range u.Args {
			n, err := pg.eval(a, m)
			if err != nil {
				return nil, err
			}
			args = append(args, n)
		}
		return pg.add(&node{v: u, op: opCompute, args: args}), nil
	}
	return nil, unsupported(u, "value of kind %d in a phase", in.kind)
}

// loadNode is load u's node at lanes m: its pointer's pattern, its mask and
// other value.
func (pg *phaseGen) loadNode(u *tile.Value, m lanes) (*node, error) {
	if pi := pg.g.p.in(u.Args[0]); pi.kind == kScatter {
		return pg.gatherNode(u, pi, m)
	}
	pat, err := pg.pointer(u.Args[0], m, true)
	if err != nil {
		return nil, err
	}
	var args []*node
	for _, a := range u.Args[1:] {
		n, err := pg.eval(a, m)
		if err != nil {
			return nil, err
		}
		args = append(args, n)
	}
	if len(args) == 0 {
		pat.checked = true
	} else {
		pat.anyMask = true
	}
	return pg.add(&node{v: u, op: opLoad, args: args, pat: pat}), nil
}

// gatherNode is load u through a kScatter pointer at lanes m: its base's
// pattern, then its mask and other, then the offsets (body.go:
// gatherIdx).
func (pg *phaseGen) gatherNode(u *tile.Value, pi *vinfo, m lanes) (*node, error) {
	pat, err := pg.affPattern(pi.base, pi.base.root, m)
	if err != nil {
		return nil, err
	}
	if pat.elast < 0 {
		return nil, unsupported(u, "load at loaded offsets from a base with a stride known only at run time")
	}
	var args []*node
	for _, a := range append(u.Args[1:], pi.scat) {
		n, err := pg.eval(a, m)
		if err != nil {
			return nil, err
		}
		args = append(args, n)
	}
	return pg.add(&node{v: u, op: opLoad, args: args, pat: pat, scat: true}), nil
}

// uniform is the vector of scalar x in every lane: a pool constant, or the
// frame vector slot its segment wrote.
func (pg *phaseGen) uniform(x *tile.Value) (*node, error) {
	g := pg.g
	var mem amd64.Mem
	switch {
	case x.Op == tile.OpConst && x.Type.DType == tile.F32:
		mem = g.constF32(float32(x.AuxF))
	case x.Op == tile.OpConst && x.Type.DType == tile.F64:
		mem = g.constF64(x.AuxF)
	case x.Op == tile.OpConst && x.Type.DType == tile.I1:
		bits := uint32(0)
		if x.Aux != 0 {
			bits = 0xffffffff
		}
		mem = g.constVec(bits)
	default:
		off, ok := g.vslot[x.ID]
		if !ok {
			return nil, unsupported(x, "scalar read as a vector before it is computed")
		}
		mem = fr(off)
	}
	return pg.add(&node{v: x, op: opUniform, mem: mem}), nil
}

// scalarPhase emits the stores and atomic adds of scalars: checked,
// skipped where the mask is false.
func (g *gen) scalarPhase(ph *phase) error {
	a := &g.a
	for _, v := range ph.ops {
		if v.Op != tile.OpStore && v.Op != tile.OpAtomicAdd {
			return unsupported(v, "scalar %v in a phase", v.Op)
		}
		ptr := g.p.in(v.Args[0]).aff
		x := v.Args[1]
		skip := a.NewLabel()
		if len(v.Args) == 3 {
			g.scalarIntReg(rT0, v.Args[2])
			a.TESTQ(rT0, rT0)
			a.Jcc(amd64.CondE, skip)
		}
		g.scalarElement(v, ptr, x.Type.DType)
		switch {
		case v.Op == tile.OpAtomicAdd:
			g.scalarAtomicAdd(x)
		case x.Type.DType != tile.F64:
			a.VMOVSSload(0, fr(g.floatSlot(x)))
			a.VMOVSSstore(amd64.Ptr(rT0, 0), 0)
		case x.Op == tile.OpConst:
			a.VMOVSDload(0, g.constF64(x.AuxF))
			a.VMOVSDstore(amd64.Ptr(rT0, 0), 0)
		default:
			a.VMOVSDload(0, fr(g.slotOf(x)))
			a.VMOVSDstore(amd64.Ptr(rT0, 0), 0)
		}
		a.Bind(skip)
	}
	return a.Err()
}

// scalarElement puts the address of scalar access v's element (through
// affine pointer ptr, of type d) in RAX, checked against its buffer (out
// of it: v's stub). RDX is clobbered.
func (g *gen) scalarElement(v *tile.Value, ptr *aff, d tile.DType) {
	a := &g.a
	sh, esz := uint8(2), int32(4)
	if d == tile.F64 {
		sh, esz = 3, 8
	}
	g.sxReg(rT0, ptr.c)
	a.SHLQ(rT0, sh)
	a.ADDQload(rT0, fr(paramBase(ptr.root)))
	bad := g.stub(v.ID)
	a.CMPQload(rT0, fr(paramBase(ptr.root)))
	a.Jcc(amd64.CondB, bad)
	a.LEAQ(rT1, amd64.Ptr(rT0, esz))
	a.CMPQload(rT1, fr(paramEnd(ptr.root)))
	a.Jcc(amd64.CondA, bad)
}

// scalarAtomicOld computes scalar atomic add v whose old value is read:
// the add (scalarAtomicAdd) where its mask holds, its slot the element's
// value before it (an i32 sign-extended), or 0 where the mask is false,
// as the reference gives a disabled lane.
func (g *gen) scalarAtomicOld(v *tile.Value) {
	a := &g.a
	off, done := a.NewLabel(), a.NewLabel()
	if len(v.Args) == 3 {
		g.scalarIntReg(rT0, v.Args[2])
		a.TESTQ(rT0, rT0)
		a.Jcc(amd64.CondE, off)
	}
	g.scalarElement(v, g.p.in(v.Args[0]).aff, v.Type.DType)
	g.scalarAtomicAdd(v.Args[1]) // RAX: the old bits
	if v.Type.DType == tile.I32 {
		a.MOVSXD(rT0, rT0)
	}
	a.JMP(done)
	a.Bind(off)
	a.XORL(rT0, rT0)
	a.Bind(done)
	a.MOVQstore(fr(g.slotOf(v)), rT0)
}

// scalarAtomicAdd adds scalar x to the element at RAX atomically: a
// compare-and-swap loop on the element's bits, as body.go's atomicAdd
// does a lane's, leaving the element's old bits in RAX (zero-extended);
// RCX is saved and restored.
func (g *gen) scalarAtomicAdd(x *tile.Value) {
	a := &g.a
	slots := g.alloc(16, 8) // saved RCX, the element's bits
	saved, cur := fr(slots), fr(slots+8)
	a.MOVQstore(saved, amd64.RCX)
	a.MOVQ(rT1, rT0)
	at := amd64.Ptr(rT1, 0)
	f64 := x.Type.DType == tile.F64
	if f64 {
		a.MOVQload(rT0, at)
	} else {
		a.MOVLload(rT0, at)
	}
	retry := a.NewLabel()
	a.Bind(retry)
	switch {
	case x.Type.DType.IsInt(): // i32: old + x, swapped in
		g.scalarIntReg(amd64.RCX, x)
		a.ADDL(amd64.RCX, rT0)
		a.LOCKCMPXCHGL(at, amd64.RCX)
	case f64:
		a.MOVQstore(cur, rT0)
		a.VMOVSDload(0, cur)
		if x.Op == tile.OpConst {
			a.VMOVSDload(1, g.constF64(x.AuxF))
		} else {
			a.VMOVSDload(1, fr(g.slotOf(x)))
		}
		a.VADDSD(0, 0, amd64.VReg(1))
		a.VMOVSDstore(cur, 0)
		a.MOVQload(amd64.RCX, cur)
		a.LOCKCMPXCHGQ(at, amd64.RCX)
	default:
		a.MOVQstore(cur, rT0)
		a.VMOVSSload(0, cur)
		a.VADDSS(0, 0, fr(g.floatSlot(x)))
		a.VMOVSSstore(cur, 0)
		a.MOVLload(amd64.RCX, cur)
		a.LOCKCMPXCHGL(at, amd64.RCX)
	}
	a.Jcc(amd64.CondNE, retry)
	a.MOVQload(amd64.RCX, saved)
}
