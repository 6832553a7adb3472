package native

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// The frame: one per worker, reached through RDI for the whole call. It
// starts with the header the Go side fills in (Launch), then the scalar
// slots, vector slots and blocks the generated code uses.
const (
	hProgLo   = 0   // first program (linear index) of this call
	hProgHi   = 8   // one past the last
	hGrid     = 16  // grid dimensions x, y, z (3 × 8)
	hFaultOp  = 40  // the value ID of a faulting access
	hFaultAt  = 48  // unused by the code; Go's side of a fault report
	hLinear   = 56  // the current program's linear index
	hPid      = 64  // the current program's coordinates (3 × 8)
	hOuter    = 88  // outer loop counters of the phase being run (2 × 8)
	hParams   = 128 // per parameter: base address (or scalar value), end address (16 bytes)
	paramSize = 16
)

// Return codes of the generated code.
const (
	retOK    = 0
	retFault = 1 // an access outside its buffer: Go reruns the launch on the executor for its error
	retBail  = 2 // i32 index arithmetic would wrap: Go reruns the launch on the executor
)

// GPRs of the generated code. RDI is the frame throughout; RSI the lane
// index j of the innermost loop; RAX and RDX are temporaries; the rest
// hold the row bases of memory accesses.
var baseRegs = []amd64.Reg{amd64.RBX, amd64.RCX, amd64.R8, amd64.R9, amd64.R10, amd64.R11, amd64.R12, amd64.R13, amd64.R14}

const (
	rF   = amd64.RDI
	rJ   = amd64.RSI
	rT0  = amd64.RAX
	rT1  = amd64.RDX
	lane = 8 // f32 lanes of a ymm register

	blockAlign = 64 // frame blocks start on a cache line (zmm loads of whole lines)
)

type gen struct {
	nt bool // a store past the caches was emitted (ntStore): SFENCE before returning
	// direct: products' operands that their pack phases leave where they
	// lie when in bounds (dot.go: directOps); aFrom: while a product's
	// direct form is emitted, the frame slot holding a's address
	direct map[*tile.Value]*directOperand
	aFrom  int32
	bFrom  *directOperand // while a product is emitted, its b where its pack phase left it
	p      *plan
	a      amd64.Asm
	avx512 bool // products in zmm registers (dot.go: dotZ)
	dq     bool // AVX512DQ's VRANGEPS for exp's clamp in zmm (ops.go: expCore32)
	sum32  bool // the current paired zmm loop sums in 32 partial sums (fast.go: sum32)
	// divRcp: the current zmm loop's divisions by a uniform, each with its
	// frame splats of the reciprocal and of the smallest |dividend| the
	// corrections take (ops.go: divFMA)
	divRcp map[*tile.Value][2]int32
	// nanDetect: the current paired zmm loop's max and min only detect
	// NaNs (fast.go: nanDetectOK; body.go: reduce)
	nanDetect bool

	// a phase's unmasked loop in zmm registers (vec.go): set while its
	// body is emitted; the opmask each vector register's mask came from
	zmm    bool
	kOf    [16]amd64.KReg
	nextK  int
	zmmBad string // a ymm-only instruction reached in a zmm loop (vec.go)
	// pairs (vec.go): each instruction of the zmm body twice, for the
	// vectors at lanes j and j+16 (zc 0 and 1: registers +16, opmasks +3,
	// whole vectors in memory +64 bytes); zfixed: one bank, zc, only
	zpair  bool
	zfixed bool
	zc     int

	frameSize int32
	slot      map[int]int32 // scalar value ID → frame offset of its 8-byte slot
	vslot     map[int]int32 // scalar value ID → frame offset of its 32-byte broadcast
	block     map[int]int32 // materialized value or block reduction → frame offset
	consts    map[[32]byte]amd64.Label
	consts64  map[[64]byte]amd64.Label
	sxDone    map[*sx]bool
	fault     amd64.Label
	bail      amd64.Label
	stubs     []stubAt // fault exits of accesses, emitted after the code
	// zh: where set, the f64 math functions emit through it (zasm.go: a
	// half of a pair without AVX-512); halfFrame its frame area (0: none
	// yet)
	zh        *halfAsm
	halfFrame int32
}

// storeIV stores rT0, a loop's counter, as the loop's induction value iv
// in its slot (sign-extended from its low 32 bits where iv is i32, as the
// reference wraps it).
func (g *gen) storeIV(iv *tile.Value, slot int32) {
	if iv.Type.DType == tile.I32 {
		g.a.MOVSXD(rT0, rT0)
	}
	g.a.MOVQstore(fr(slot), rT0)
}

// sxScope notes the expressions computed so far and returns the function
// that forgets those computed since (code inside a loop's body or a
// branch: not computed where the code after it runs).
func (g *gen) sxScope() (forget func()) {
	before := make(map[*sx]bool, len(g.sxDone))
	for s := range g.sxDone {
		before[s] = true
	}
	return func() {
		for s := range g.sxDone {
			if !before[s] {
				delete(g.sxDone, s)
			}
		}
	}
}

func (g *gen) alloc(size, align int32) int32 {
	g.frameSize = (g.frameSize + align - 1) / align * align
	off := g.frameSize
	g.frameSize += size
	return off
}

// constVec is a 32-byte constant of the pool: eight copies of bits.
func (g *gen) constVec(bits uint32) amd64.Mem {
	var b [32]byte
	for i := 0; i < 8; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], bits)
	}
	return g.constBytes(b)
}

func (g *gen) constBytes(b [32]byte) amd64.Mem {
	l, ok := g.consts[b]
	if !ok {
		l = g.a.Data(b[:], 32)
		g.consts[b] = l
	}
	return amd64.At(l)
}

func (g *gen) constF32(x float32) amd64.Mem { return g.constVec(math.Float32bits(x)) }

// constF64 is a 32-byte constant of four float64 copies.
func (g *gen) constF64(x float64) amd64.Mem {
	var b [32]byte
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return g.constBytes(b)
}

func (g *gen) constI64(x int64) amd64.Mem {
	var b [32]byte
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return g.constBytes(b)
}

// iota is the constant vector (0, s, 2s, …, 7s) of int32 lanes.
func (g *gen) iota(s int64) amd64.Mem {
	var b [32]byte
	for i := 0; i < 8; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(int64(i)*s)))
	}
	return g.constBytes(b)
}

// iota16 is the 64-byte constant vector (0, s, 2s, …, 15s) of int32
// lanes.
func (g *gen) iota16(s int64) amd64.Mem {
	var b [64]byte
	for i := 0; i < 16; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(int64(i)*s)))
	}
	l, ok := g.consts64[b]
	if !ok {
		l = g.a.Data(b[:], 64)
		g.consts64[b] = l
	}
	return amd64.At(l)
}

// laneMask is the constant vector whose first w lanes are all ones.
func (g *gen) laneMask(w int) amd64.Mem {
	var b [32]byte
	for i := 0; i < w; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], 0xffffffff)
	}
	return g.constBytes(b)
}

// sfence orders the stores past the caches (ntStore) before the return,
// where the code has any.
func (g *gen) sfence() {
	if g.nt {
		g.a.SFENCE()
	}
}

func fr(off int32) amd64.Mem { return amd64.Ptr(rF, off) }

func paramBase(i int) int32 { return hParams + paramSize*int32(i) }
func paramEnd(i int) int32  { return hParams + paramSize*int32(i) + 8 }

// generate emits the whole function: the program loop around the
// segments and phases.
func generate(p *plan) (code []byte, frame int32, err error) {
	g := &gen{p: p, avx512: p.avx512, dq: p.avx512 && useRangeClamp.Load(), slot: map[int]int32{}, vslot: map[int]int32{}, block: map[int]int32{},
		consts: map[[32]byte]amd64.Label{}, consts64: map[[64]byte]amd64.Label{}, sxDone: map[*sx]bool{}}
	g.frameSize = hParams + paramSize*int32(len(p.k.Params))
	a := &g.a
	g.fault, g.bail = a.NewLabel(), a.NewLabel()

	// the program coordinates of the first program
	a.MOVQload(rT0, fr(hProgLo))
	a.MOVQstore(fr(hLinear), rT0)
	a.CQO()
	a.MOVQload(amd64.RCX, fr(hGrid))
	a.IDIVQ(amd64.RCX) // RAX = lo / gx, RDX = lo % gx
	a.MOVQstore(fr(hPid), rT1)
	a.CQO()
	a.MOVQload(amd64.RCX, fr(hGrid+8))
	a.IDIVQ(amd64.RCX)
	a.MOVQstore(fr(hPid+8), rT1)
	a.MOVQstore(fr(hPid+16), rT0)

	// values the same in every program: once per call
	for _, rg := range p.regions {
		for _, v := range rg.scalars {
			if in := p.in(v); in.invar && in.segment == 0 {
				if err := g.scalar(v); err != nil {
					return nil, 0, err
				}
			}
		}
	}
	top, done := a.NewLabel(), a.NewLabel()
	a.Bind(top)
	a.MOVQload(rT0, fr(hLinear))
	a.CMPQload(rT0, fr(hProgHi))
	a.Jcc(amd64.CondGE, done)

	if err := g.program(); err != nil {
		return nil, 0, err
	}

	// next program: linear+1, coordinates with carry
	next := a.NewLabel()
	a.ADDQstoreImm(fr(hLinear), 1)
	a.ADDQstoreImm(fr(hPid), 1)
	a.MOVQload(rT0, fr(hPid))
	a.CMPQload(rT0, fr(hGrid))
	a.Jcc(amd64.CondL, next)
	a.MOVQstoreImm(fr(hPid), 0)
	a.ADDQstoreImm(fr(hPid+8), 1)
	a.MOVQload(rT0, fr(hPid+8))
	a.CMPQload(rT0, fr(hGrid+8))
	a.Jcc(amd64.CondL, next)
	a.MOVQstoreImm(fr(hPid+8), 0)
	a.ADDQstoreImm(fr(hPid+16), 1)
	a.Bind(next)
	a.JMP(top)

	a.Bind(done)
	g.sfence()
	a.VZEROUPPER()
	a.XORL(rT0, rT0)
	a.RET()
	a.Bind(g.fault) // RAX holds the faulting value's ID
	a.MOVQstore(fr(hFaultOp), rT0)
	g.sfence()
	a.VZEROUPPER()
	a.MOVLimm(rT0, retFault)
	a.RET()
	a.Bind(g.bail)
	g.sfence()
	a.VZEROUPPER()
	a.MOVLimm(rT0, retBail)
	a.RET()
	for _, s := range g.stubs {
		a.Bind(s.l)
		a.MOVLimm(rT0, uint32(s.id))
		a.JMP(g.fault)
	}
	code, err = a.Finish()
	if err != nil {
		return nil, 0, fmt.Errorf("native: %s: %w", p.k.Name, err)
	}
	return code, (g.frameSize + 63) &^ 31, nil
}

// program emits one program: its regions and loops in order.
func (g *gen) program() error { return g.items(g.p.items) }

// items emits regions and loops in order (the top level, or a loop's body).
func (g *gen) items(items []item) error {
	for _, it := range items {
		var err error
		if it.rg != nil {
			err = g.region(it.rg)
		} else {
			err = g.loopCode(it.loop)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// region emits a region: its prologue scalars and checks, then per level
// the scalars that level makes available and its phases.
func (g *gen) region(rg *region) error {
	p := g.p
	if err := g.regionPrologue(rg); err != nil {
		return err
	}
	pi := 0
	for level := 0; level < rg.levels; level++ {
		if level > 0 {
			for _, v := range rg.scalars {
				if p.in(v).segment == level {
					if err := g.scalar(v); err != nil {
						return err
					}
				}
			}
		}
		for _, v := range rg.trans {
			if p.in(v).avail == level {
				g.transCode(v)
			}
		}
		for _, d := range rg.dots {
			if p.in(d).avail == level {
				if err := g.dotCode(d); err != nil {
					return err
				}
			}
		}
		for ; pi < len(rg.phases) && rg.phases[pi].level == level; pi++ {
			if err := g.phase(rg.phases[pi]); err != nil {
				return err
			}
		}
	}
	return nil
}

// regionPrologue emits the scalars of a region's first segment and its
// checks of i32 lanes.
func (g *gen) regionPrologue(rg *region) error {
	for _, v := range rg.scalars {
		if in := g.p.in(v); !in.invar && in.segment == 0 {
			if err := g.scalar(v); err != nil {
				return err
			}
		}
	}
	return g.wrapChecks(rg)
}

// loopCode emits a counted loop: the carried storage given its initial
// values, then for iv = lo; iv < hi; iv += step the body, the yields made
// the carried values (through temporaries where they are not written in
// place). A step ≤ 0 where lo < hi is a fault, as in the reference.
func (g *gen) loopCode(lp *loopPlan) error {
	a := &g.a
	v := lp.v
	for i := range lp.carries {
		c := &lp.carries[i]
		if c.induced {
			continue // no storage: an affine form of the iteration (plan: inducedPointer)
		}
		if c.block {
			off := g.alloc(int32(c.arg.Type.Shape.Numel())<<shiftOf(c.arg.Type.DType), blockAlign)
			g.block[c.arg.ID] = off
			if c.result != nil {
				g.block[c.result.ID] = off
			}
			continue
		}
		off := g.slotOf(c.arg)
		if c.result != nil {
			g.slot[c.result.ID] = off
		}
		g.scalarBits(rT0, c.init)
		a.MOVQstore(fr(off), rT0)
	}
	// the blocks' initial values: one phase per shape
	var inits []*phase
	for i, c := range lp.carries {
		if !c.block || c.induced {
			continue
		}
		var ph *phase
		for _, q := range inits {
			if q.shape == c.arg.Type.Shape {
				ph = q
			}
		}
		if ph == nil {
			ph = &phase{shape: c.arg.Type.Shape, rg: g.p.in(v).rg}
			inits = append(inits, ph)
		}
		ph.inits = append(ph.inits, yieldWrite{lp, i})
	}
	for _, ph := range inits {
		if err := g.phase(ph); err != nil {
			return err
		}
	}
	// column loops in registers where their rows stream well (colloop.go),
	// else (frame) the loop below
	var frame amd64.Label
	if terms := g.colLoopTerms(lp); terms != nil {
		frame = a.NewLabel()
		past := a.NewLabel()
		if err := g.colLoop(lp, terms, frame); err != nil {
			return err
		}
		a.JMP(past)
		a.Bind(frame)
		defer a.Bind(past)
	}
	// the counter (int64, as the reference counts) and the bounds
	counter, hiSlot, stepSlot := g.alloc(8, 8), g.alloc(8, 8), g.alloc(8, 8)
	g.scalarIntReg(rT0, v.Args[0])
	a.MOVQstore(fr(counter), rT0)
	g.scalarIntReg(rT1, v.Args[1])
	a.MOVQstore(fr(hiSlot), rT1)
	g.scalarIntReg(amd64.RCX, v.Args[2])
	a.MOVQstore(fr(stepSlot), amd64.RCX)
	top, done := a.NewLabel(), a.NewLabel()
	a.CMPQ(rT0, rT1)
	a.Jcc(amd64.CondGE, done)
	a.TESTQ(amd64.RCX, amd64.RCX)
	a.Jcc(amd64.CondLE, g.stub(v.ID))
	iv := v.Body.Args[0]
	ivSlot := g.slotOf(iv)
	a.Bind(top)
	a.MOVQload(rT0, fr(counter))
	a.CMPQload(rT0, fr(hiSlot))
	a.Jcc(amd64.CondGE, done)
	g.storeIV(iv, ivSlot)
	// expressions first computed in the body are recomputed after it
	forget := g.sxScope()
	if err := g.items(lp.items); err != nil {
		return err
	}
	forget()
	// the yields become the carried values: scalars through temporaries
	// (a yield may be another carried value), blocks copied from theirs
	var tmps []int32
	for _, c := range lp.carries {
		if c.block || c.induced {
			continue
		}
		t := g.alloc(8, 8)
		g.scalarBits(rT0, c.yield)
		a.MOVQstore(fr(t), rT0)
		tmps = append(tmps, t)
	}
	j := 0
	for i, c := range lp.carries {
		if c.induced {
			continue
		}
		if c.block {
			if !c.inPlace {
				g.copyBlock(g.block[c.arg.ID], g.yieldBlock(lp, i), c.arg.Type.Shape.Numel()<<(shiftOf(c.arg.Type.DType)-2))
			}
			continue
		}
		a.MOVQload(rT0, fr(tmps[j]))
		a.MOVQstore(fr(g.slotOf(c.arg)), rT0)
		j++
	}
	a.MOVQload(rT0, fr(counter))
	a.ADDQload(rT0, fr(stepSlot))
	a.MOVQstore(fr(counter), rT0)
	a.JMP(top)
	a.Bind(done)
	return a.Err()
}

// scalarBits loads scalar v's slot (its 8 bytes: an integer, an f32's
// bits or an f64's) into r; constants as their bits.
func (g *gen) scalarBits(r amd64.Reg, v *tile.Value) {
	if v.Op == tile.OpConst {
		switch v.Type.DType {
		case tile.F32:
			g.a.MOVLimm(r, math.Float32bits(float32(v.AuxF)))
			return
		case tile.F64:
			g.a.MOVQimm(r, int64(math.Float64bits(v.AuxF)))
			return
		}
		g.a.MOVQimm(r, v.Aux)
		return
	}
	g.a.MOVQload(r, fr(g.slotOf(v)))
}

// yieldBlock is where the yield of carry i writes: the carried block
// itself, or a block of its own copied at the end of the iteration.
func (g *gen) yieldBlock(lp *loopPlan, i int) int32 {
	c := lp.carries[i]
	if c.inPlace {
		return g.block[c.arg.ID]
	}
	key := -1 - c.arg.ID // a key no value has
	if off, ok := g.block[key]; ok {
		return off
	}
	off := g.alloc(int32(c.arg.Type.Shape.Numel())<<shiftOf(c.arg.Type.DType), blockAlign)
	g.block[key] = off
	return off
}

// copyBlock copies n f32 (n/2 f64) from the frame at from to the frame at to.
func (g *gen) copyBlock(to, from int32, n int) {
	a := &g.a
	i := 0
	for ; i+lane <= n; i += lane {
		a.VMOVUPS(0, fr(from+int32(4*i)))
		a.VMOVUPSstore(fr(to+int32(4*i)), 0)
	}
	for ; i < n; i++ {
		a.VMOVSSload(0, fr(from+int32(4*i)))
		a.VMOVSSstore(fr(to+int32(4*i)), 0)
	}
}

// ---- scalar integer expressions ----

// sxReg loads s into r (computing it into a slot first where it is an
// expression).
func (g *gen) sxReg(r amd64.Reg, s *sx) {
	a := &g.a
	switch s.op {
	case sxConst:
		a.MOVQimm(r, s.k)
	case sxVal:
		g.scalarIntReg(r, s.v)
	default:
		g.sxSlot(s)
		a.MOVQload(r, fr(int32(s.slot)))
	}
}

// sxSlot computes s into its frame slot (once per program: the prologue
// computes every expression the phases use).
func (g *gen) sxSlot(s *sx) int32 {
	if g.sxDone[s] {
		return int32(s.slot)
	}
	a := &g.a
	switch s.op {
	case sxConst:
		s.slot = int(g.alloc(8, 8))
		a.MOVQimm(rT0, s.k)
	case sxVal:
		s.slot = int(g.slot[s.v.ID])
		g.sxDone[s] = true
		return int32(s.slot)
	case sxAdd:
		g.sxSlot(s.a)
		g.sxSlot(s.b)
		s.slot = int(g.alloc(8, 8))
		a.MOVQload(rT0, fr(int32(s.a.slot)))
		a.ADDQload(rT0, fr(int32(s.b.slot)))
	case sxMul:
		g.sxSlot(s.a)
		g.sxSlot(s.b)
		s.slot = int(g.alloc(8, 8))
		a.MOVQload(rT0, fr(int32(s.a.slot)))
		a.MOVQload(rT1, fr(int32(s.b.slot)))
		a.IMULQ(rT0, rT1)
	case sxNeg:
		g.sxSlot(s.a)
		s.slot = int(g.alloc(8, 8))
		a.MOVQload(rT0, fr(int32(s.a.slot)))
		a.NEGQ(rT0)
	case sxClamp32:
		g.sxSlot(s.a)
		s.slot = int(g.alloc(8, 8))
		a.MOVQload(rT0, fr(int32(s.a.slot)))
		a.MOVQimm(amd64.RCX, math.MinInt32)
		a.CMPQ(rT0, amd64.RCX)
		a.CMOVQ(amd64.CondL, rT0, amd64.RCX)
		a.MOVQimm(amd64.RCX, math.MaxInt32)
		a.CMPQ(rT0, amd64.RCX)
		a.CMOVQ(amd64.CondG, rT0, amd64.RCX)
	case sxDiv, sxRem:
		g.sxSlot(s.a)
		s.slot = int(g.alloc(8, 8))
		a.MOVQload(rT0, fr(int32(s.a.slot)))
		a.MOVQimm(amd64.RCX, s.k)
		a.CQO()
		a.IDIVQ(amd64.RCX)
		if s.op == sxRem {
			a.MOVQ(rT0, rT1)
		}
	}
	a.MOVQstore(fr(int32(s.slot)), rT0)
	g.sxDone[s] = true
	return int32(s.slot)
}

// wrapChecks: an i32 offset whose lanes leave the int32 range would wrap
// in the reference but not here; such a program bails out (the launch
// reruns on the executor). Each check computes the smallest and largest
// lane of c + Σ coef[d]·q[d] in 64 bits.
func (g *gen) wrapChecks(rg *region) error {
	a := &g.a
	seen := map[*aff]bool{}
	for _, w := range g.p.needWrap {
		af := w.x
		if seen[af] || w.rg != rg {
			continue
		}
		seen[af] = true
		// lo in RAX, hi in RDX
		g.sxReg(rT0, af.c)
		a.MOVQ(rT1, rT0)
		for d := 0; d < af.shape.Rank; d++ {
			n := int64(af.shape.Dims[d] - 1)
			if n == 0 || af.coef[d].isConst(0) {
				continue
			}
			if af.coef[d].op == sxConst {
				span := af.coef[d].k * n
				if span > 0 {
					a.MOVQimm(amd64.RCX, span)
					a.ADDQ(rT1, amd64.RCX)
				} else {
					a.MOVQimm(amd64.RCX, span)
					a.ADDQ(rT0, amd64.RCX)
				}
				continue
			}
			// span = coef·n of either sign: add min(span, 0) to lo, max to hi
			g.sxReg(amd64.RCX, af.coef[d])
			a.IMULQimm(amd64.RCX, amd64.RCX, int32(n))
			a.XORL(amd64.R8, amd64.R8)
			a.MOVQ(amd64.R9, amd64.R8)
			a.CMPQ(amd64.RCX, amd64.R8)
			a.CMOVQ(amd64.CondL, amd64.R8, amd64.RCX) // R8 = min(span, 0)
			a.CMOVQ(amd64.CondG, amd64.R9, amd64.RCX) // R9 = max(span, 0)
			a.ADDQ(rT0, amd64.R8)
			a.ADDQ(rT1, amd64.R9)
		}
		a.MOVQimm(amd64.RCX, math.MinInt32)
		a.CMPQ(rT0, amd64.RCX)
		a.Jcc(amd64.CondL, g.bail)
		a.MOVQimm(amd64.RCX, math.MaxInt32)
		a.CMPQ(rT1, amd64.RCX)
		a.Jcc(amd64.CondG, g.bail)
	}
	// integer division of lanes: every lane in the same multiple of d
	for _, dc := range g.p.needDiv {
		if dc.rg != rg {
			continue
		}
		g.sxReg(rT0, dc.x.c)
		a.TESTQ(rT0, rT0)
		a.Jcc(amd64.CondL, g.bail)
		a.MOVQimm(amd64.RCX, dc.d)
		a.CQO()
		a.IDIVQ(amd64.RCX)
		a.MOVQimm(amd64.RCX, dc.d-dc.span)
		a.CMPQ(rT1, amd64.RCX)
		a.Jcc(amd64.CondGE, g.bail)
	}
	return a.Err()
}

// ---- scalars ----

// scalarIntReg loads integer or i1 scalar v into r (sign-extended).
func (g *gen) scalarIntReg(r amd64.Reg, v *tile.Value) {
	if v.Op == tile.OpConst {
		g.a.MOVQimm(r, v.Aux)
		return
	}
	g.a.MOVQload(r, fr(g.slotOf(v)))
}

// slotOf is the frame offset of scalar v's slot.
func (g *gen) slotOf(v *tile.Value) int32 {
	if off, ok := g.slot[v.ID]; ok {
		return off
	}
	var off int32
	switch v.Op {
	case tile.OpParam:
		off = paramBase(int(v.Aux))
	case tile.OpProgramID:
		off = hPid + 8*int32(v.Aux)
	case tile.OpNumPrograms:
		off = hGrid + 8*int32(v.Aux)
	default:
		off = g.alloc(8, 8)
	}
	g.slot[v.ID] = off
	return off
}

// scalar computes scalar v into its slot, and its broadcast into a vector
// slot where a phase reads it as a vector.
func (g *gen) scalar(v *tile.Value) error {
	in := g.p.in(v)
	switch in.kind {
	case kScalarInt, kScalarBool:
		if err := g.scalarInt(v); err != nil {
			return err
		}
		if in.kind == kScalarBool {
			// its vector: all-ones lanes where true
			off := g.alloc(32, 32)
			g.vslot[v.ID] = off
			g.a.MOVQload(rT0, fr(g.slotOf(v)))
			g.a.NEGQ(rT0)
			g.a.VMOVDfromGPR(0, rT0)
			g.a.VPBROADCASTD(0, amd64.VReg(0))
			g.a.VMOVUPSstore(fr(off), 0)
		}
	case kScalarFloat:
		if err := g.scalarFloat(v); err != nil {
			return err
		}
	}
	return g.a.Err()
}

func is32(d tile.DType) bool { return d == tile.I32 }

func (g *gen) scalarInt(v *tile.Value) error {
	a := &g.a
	switch v.Op {
	case tile.OpParam, tile.OpProgramID, tile.OpNumPrograms, tile.OpBlockArg, tile.OpForResult:
		g.slotOf(v)
		return nil
	case tile.OpConst:
		a.MOVQimm(rT0, v.Aux)
		a.MOVQstore(fr(g.slotOf(v)), rT0)
		return nil
	case tile.OpAtomicAdd:
		g.scalarAtomicOld(v)
		return nil
	}
	x := v.Args[0]
	dst := g.slotOf(v)
	w32 := is32(v.Type.DType)
	if v.Type.DType == tile.I1 {
		w32 = false
	}
	switch {
	case v.Op == tile.OpCast:
		g.scalarIntReg(rT0, x)
		if w32 {
			a.MOVSXD(rT0, rT0)
		}
		if v.Type.DType == tile.I1 {
			// x != 0
			a.MOVQimm(amd64.RCX, 1)
			a.XORL(rT1, rT1)
			a.TESTQ(rT0, rT0)
			a.CMOVQ(amd64.CondNE, rT1, amd64.RCX)
			a.MOVQ(rT0, rT1)
		}
	case v.Op == tile.OpNeg:
		g.scalarIntReg(rT0, x)
		a.NEGQ(rT0)
	case v.Op == tile.OpNot:
		g.scalarIntReg(rT0, x)
		if v.Type.DType == tile.I1 {
			a.XORQ(rT1, rT1)
			a.ADDQimm(rT1, 1)
			a.XORQ(rT0, rT1)
		} else {
			a.NOTQ(rT0)
		}
	case v.Op == tile.OpSelect:
		g.scalarIntReg(amd64.RCX, v.Args[0])
		g.scalarIntReg(rT0, v.Args[2])
		g.scalarIntReg(rT1, v.Args[1])
		a.TESTQ(amd64.RCX, amd64.RCX)
		a.CMOVQ(amd64.CondNE, rT0, rT1)
	case v.Op.IsCompare():
		if x.Type.DType == tile.F32 {
			return g.scalarFloatCompare(v)
		}
		if x.Type.DType == tile.F64 {
			return g.scalarF64Compare(v)
		}
		g.scalarIntReg(amd64.RCX, x)
		g.scalarIntReg(rT1, v.Args[1])
		a.MOVQimm(amd64.R8, 1)
		a.XORL(rT0, rT0)
		a.CMPQ(amd64.RCX, rT1)
		a.CMOVQ(map[tile.Op]amd64.Cond{tile.OpEq: amd64.CondE, tile.OpNe: amd64.CondNE, tile.OpLt: amd64.CondL,
			tile.OpLe: amd64.CondLE, tile.OpGt: amd64.CondG, tile.OpGe: amd64.CondGE}[v.Op], rT0, amd64.R8)
	case v.Op == tile.OpDiv || v.Op == tile.OpRem:
		g.scalarDivRem(v)
	case v.Op == tile.OpLoad: // i32: checked, or other (0 without one) where the mask is false
		off, done := g.scalarLoadAddr(v, 2)
		a.MOVSXDload(rT0, amd64.Ptr(rT0, 0))
		a.JMP(done)
		a.Bind(off)
		a.XORL(rT0, rT0)
		if len(v.Args) == 3 {
			a.MOVQimm(rT0, v.Args[2].Aux)
		}
		a.Bind(done)
	default:
		g.scalarIntReg(rT0, x)
		g.scalarIntReg(amd64.RCX, v.Args[1])
		switch v.Op {
		case tile.OpAdd:
			a.ADDQ(rT0, amd64.RCX)
		case tile.OpSub:
			a.SUBQ(rT0, amd64.RCX)
		case tile.OpMul:
			a.IMULQ(rT0, amd64.RCX)
		case tile.OpAnd:
			a.ANDQ(rT0, amd64.RCX)
		case tile.OpOr:
			a.ORQ(rT0, amd64.RCX)
		case tile.OpXor:
			a.XORQ(rT0, amd64.RCX)
		case tile.OpMin:
			a.CMPQ(amd64.RCX, rT0)
			a.CMOVQ(amd64.CondL, rT0, amd64.RCX)
		case tile.OpMax:
			a.CMPQ(amd64.RCX, rT0)
			a.CMOVQ(amd64.CondG, rT0, amd64.RCX)
		default:
			return unsupported(v, "scalar integer %v", v.Op)
		}
	}
	if w32 {
		a.MOVSXD(rT0, rT0) // wrap to int32, as the reference does
	}
	a.MOVQstore(fr(dst), rT0)
	return nil
}

// scalarDivRem: truncated division as the reference defines it: x/0 = -1,
// x%0 = x, and MinInt/-1 wraps (x86's IDIV would trap on both).
func (g *gen) scalarDivRem(v *tile.Value) {
	a := &g.a
	w32 := is32(v.Type.DType)
	if d := v.Args[1]; w32 && d.Op == tile.OpConst && d.Aux >= 1 && d.Aux <= math.MaxInt32 {
		g.scalarDivConst(v, d.Aux)
		return
	}
	g.scalarIntReg(rT0, v.Args[0])
	g.scalarIntReg(amd64.RCX, v.Args[1])
	zero, minus1, done := a.NewLabel(), a.NewLabel(), a.NewLabel()
	a.TESTQ(amd64.RCX, amd64.RCX)
	a.Jcc(amd64.CondE, zero)
	a.CMPQimm(amd64.RCX, -1)
	a.Jcc(amd64.CondE, minus1)
	if w32 {
		a.CDQ()
		a.IDIVL(amd64.RCX)
		a.MOVSXD(rT0, rT0)
		a.MOVSXD(rT1, rT1)
	} else {
		a.CQO()
		a.IDIVQ(amd64.RCX)
	}
	if v.Op == tile.OpRem {
		a.MOVQ(rT0, rT1)
	}
	a.JMP(done)
	a.Bind(zero)
	if v.Op == tile.OpDiv {
		a.MOVQimm(rT0, -1)
	}
	a.JMP(done)
	a.Bind(minus1)
	if v.Op == tile.OpDiv {
		a.NEGQ(rT0)
	} else {
		a.XORL(rT0, rT0)
	}
	a.Bind(done)
}

// scalarDivConst is scalarDivRem of an i32 by a constant d ≥ 1 without a
// division: q = ⌊|n|·M / 2^s⌋ with s = 31 + ⌈log₂ d⌉ and M = ⌈2^s/d⌉ (M <
// 2^32, so |n|·M < 2^63 for every |n| ≤ 2^31), exact because |n|·(M·d −
// 2^s) < 2^31·d ≤ 2^s; then the sign of n (truncation) and, for a
// remainder, n − q·d (Go's and the reference's, with the sign of n). The
// quotient or remainder is left in RAX; RDX, RCX and R8 are clobbered.
func (g *gen) scalarDivConst(v *tile.Value, d int64) {
	a := &g.a
	g.scalarIntReg(rT0, v.Args[0])
	if d == 1 {
		if v.Op == tile.OpRem {
			a.XORL(rT0, rT0)
		}
		return
	}
	l := bits.Len64(uint64(d - 1))
	s := 31 + l
	m := (int64(1)<<s + d - 1) / d
	a.MOVQ(rT1, rT0) // n
	a.MOVQ(amd64.RCX, rT0)
	a.SARQ(amd64.RCX, 63) // n's sign: 0 or −1
	a.XORQ(rT0, amd64.RCX)
	a.SUBQ(rT0, amd64.RCX) // |n|
	a.MOVQimm(amd64.R8, m)
	a.IMULQ(rT0, amd64.R8)
	a.SHRQ(rT0, uint8(s)) // ⌊|n|/d⌋
	a.XORQ(rT0, amd64.RCX)
	a.SUBQ(rT0, amd64.RCX) // trunc(n/d)
	if v.Op == tile.OpRem {
		a.IMULQimm(rT0, rT0, int32(d))
		a.SUBQ(rT1, rT0)
		a.MOVQ(rT0, rT1)
	}
}

// scalarFloat computes an f32 scalar with the vector code on broadcast
// operands, lane 0 stored.
func (g *gen) scalarFloat(v *tile.Value) error {
	a := &g.a
	if v.Op == tile.OpAtomicAdd {
		g.scalarAtomicOld(v)
		return g.broadcastSlot(v)
	}
	if v.Type.DType == tile.F64 {
		return g.scalarF64(v)
	}
	switch v.Op {
	case tile.OpParam, tile.OpBlockArg, tile.OpForResult:
		g.slotOf(v)
		return g.broadcastSlot(v)
	case tile.OpConst:
		off := g.slotOf(v)
		a.MOVLimm(rT0, math.Float32bits(float32(v.AuxF)))
		a.MOVQstore(fr(off), rT0)
		return g.broadcastSlot(v)
	case tile.OpLoad:
		// checked, or other (0 without one) where the mask is false
		off, done := g.scalarLoadAddr(v, 2)
		a.VMOVSSload(0, amd64.Ptr(rT0, 0))
		a.JMP(done)
		a.Bind(off)
		if len(v.Args) == 3 {
			a.VMOVSSload(0, fr(g.floatSlot(v.Args[2])))
		} else {
			a.VXORPS(0, 0, amd64.VReg(0))
		}
		a.Bind(done)
		a.VMOVSSstore(fr(g.slotOf(v)), 0)
		return g.broadcastSlot(v)
	case tile.OpCast:
		g.scalarIntReg(rT0, v.Args[0])
		a.VMOVDfromGPR(0, rT0)
		a.VCVTDQ2PS(0, amd64.VReg(0))
		a.VMOVSSstore(fr(g.slotOf(v)), 0)
		return g.broadcastSlot(v)
	}
	srcs := make([]opnd, len(v.Args))
	for i, x := range v.Args {
		r := amd64.VReg(i)
		switch g.p.in(x).kind {
		case kScalarBool:
			// all ones where true, for select
			g.scalarIntReg(rT0, x)
			a.NEGQ(rT0)
			a.VMOVDfromGPR(r, rT0)
			a.VPBROADCASTD(r, r)
		default:
			a.VBROADCASTSS(r, fr(g.floatSlot(x)))
		}
		srcs[i] = opnd{reg: r}
	}
	tmps := []amd64.VReg{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	if err := g.floatOp(v, 3, srcs, tmps); err != nil {
		return err
	}
	a.VMOVSSstore(fr(g.slotOf(v)), 3)
	return g.broadcastSlot(v)
}

// floatSlot is the slot of an f32 scalar (a value or a reduction's result).
func (g *gen) floatSlot(x *tile.Value) int32 {
	if x.Op == tile.OpConst {
		if _, ok := g.slot[x.ID]; !ok {
			off := g.slotOf(x)
			g.a.MOVLimm(rT0, math.Float32bits(float32(x.AuxF)))
			g.a.MOVQstore(fr(off), rT0)
		}
	}
	return g.slotOf(x)
}

// scalarFloatCompare: an f32 comparison of scalars, 0 or 1.
func (g *gen) scalarFloatCompare(v *tile.Value) error {
	a := &g.a
	a.VBROADCASTSS(0, fr(g.floatSlot(v.Args[0])))
	a.VBROADCASTSS(1, fr(g.floatSlot(v.Args[1])))
	g.floatCompare(v.Op, 2, 0, opnd{reg: 1})
	a.VMOVMSKPS(rT0, 2)
	a.ANDQimm(rT0, 1)
	a.MOVQstore(fr(g.slotOf(v)), rT0)
	return nil
}

// broadcastSlot writes the 32-byte broadcast of f32 scalar v where phases
// read it as a vector operand.
func (g *gen) broadcastSlot(v *tile.Value) error {
	if v.Type.DType == tile.F64 { // read as {1to8} or vbroadcastsd: the slot itself
		g.vslot[v.ID] = g.slotOf(v)
		return nil
	}
	off := g.alloc(32, 32)
	g.vslot[v.ID] = off
	g.a.VBROADCASTSS(0, fr(g.slotOf(v)))
	g.a.VMOVUPSstore(fr(off), 0)
	return nil
}

// scalarLoadAddr emits the address of scalar load v's element (of 1<<shift
// bytes) into rT0, checked against its buffer's range (out of it: v's
// stub); where v's mask is false it jumps to off instead. The caller
// loads from rT0, jumps to done, binds off (the other value) and done.
func (g *gen) scalarLoadAddr(v *tile.Value, shift int) (off, done amd64.Label) {
	a := &g.a
	ptr := g.p.in(v.Args[0]).aff
	off, done = a.NewLabel(), a.NewLabel()
	if len(v.Args) >= 2 {
		g.scalarIntReg(rT0, v.Args[1])
		a.TESTQ(rT0, rT0)
		a.Jcc(amd64.CondE, off)
	}
	g.sxReg(rT0, ptr.c)
	a.SHLQ(rT0, uint8(shift))
	a.ADDQload(rT0, fr(paramBase(ptr.root)))
	bad := g.stub(v.ID)
	a.CMPQload(rT0, fr(paramBase(ptr.root)))
	a.Jcc(amd64.CondB, bad)
	a.LEAQ(rT1, amd64.Ptr(rT0, 1<<shift))
	a.CMPQload(rT1, fr(paramEnd(ptr.root)))
	a.Jcc(amd64.CondA, bad)
	return off, done
}
