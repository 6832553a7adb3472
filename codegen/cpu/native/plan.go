package native

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
)

// ErrUnsupported is wrapped by Compile's error for a kernel that uses
// something the native code generator does not implement yet: the caller
// runs the kernel on the executor instead.
var ErrUnsupported = errors.New("not supported by the native code generator")

func unsupported(v *tile.Value, format string, args ...any) error {
	where := ""
	if v != nil {
		where = fmt.Sprintf("%%%d (%v): ", v.ID, v.Op)
	}
	return fmt.Errorf("native: %s%s: %w", where, fmt.Sprintf(format, args...), ErrUnsupported)
}

// kind is how the generated code holds a value.
type kind uint8

const (
	kDead        kind = iota // not needed (analysis.Live), or a shape op folded into its users
	kScalarInt               // rank 0 i32/i64: a frame slot (i64, i32 sign-extended)
	kScalarFloat             // rank 0 f32: a frame slot
	kScalarBool              // rank 0 i1: a frame slot holding 0 or 1
	kScalarPtr               // rank 0 pointer: its parameter and an element offset (aff)
	kAffine                  // integer or pointer block: an affine function of the lane index (aff)
	kMask                    // i1 block: a vector of all-ones/zero lanes, computed per position
	kFloat                   // f32 block: a vector, computed per position
	kView                    // splat, broadcast, expand_dims, reshape, trans of a vector value
	kReduce                  // reduction: accumulated in its input's phase, result in the frame
	kStore                   // store: a side effect in its phase
	kCarry                   // a loop-carried block (the body's argument, the loop's result): its frame block
	kLoop                    // for, yield: planned as their loop
	kDot                     // matrix product: a register-blocked micro-kernel over frame blocks (dot.go), its result a frame block
	kTrans                   // a transposed load: packed transposed by a phase, turned back at the next level's start (trans.go), its result a frame block
	kPeriodic                // i32 block: an affine one's remainder by a constant (period) its lanes span, computed per position (remconst.go)
	kScatter                 // pointer block: an affine one (base) plus an i32 data block (scat), read by atomic adds and 4-byte loads (ints.go)
	kRegroup                 // a reshape that regroups dimensions of a value held in a frame block (a reduction's result, a product's, a loop-carried block): that block read at the reshape's shape
)

// sx is a scalar integer expression over the program's scalar values,
// folded where its operands are constant; its value is computed into a
// frame slot in the program's prologue.
type sx struct {
	op   sxOp
	k    int64
	v    *tile.Value // sxVal: a kScalarInt value
	a, b *sx
	slot int // frame slot once computed, or -1
}

type sxOp uint8

const (
	sxConst sxOp = iota
	sxVal
	sxAdd
	sxMul
	sxNeg
	sxDiv     // a / k, truncated, k > 0 a constant
	sxRem     // a % k, truncated
	sxClamp32 // a clamped to [MinInt32, MaxInt32]
)

func sConst(k int64) *sx { return &sx{op: sxConst, k: k, slot: -1} }

func (s *sx) isConst(k int64) bool { return s.op == sxConst && s.k == k }

func sAdd(a, b *sx) *sx {
	switch {
	case a.op == sxConst && b.op == sxConst:
		return sConst(a.k + b.k)
	case a.isConst(0):
		return b
	case b.isConst(0):
		return a
	}
	return &sx{op: sxAdd, a: a, b: b, slot: -1}
}

func sMul(a, b *sx) *sx {
	switch {
	case a.op == sxConst && b.op == sxConst:
		return sConst(a.k * b.k)
	case a.isConst(0) || b.isConst(0):
		return sConst(0)
	case a.isConst(1):
		return b
	case b.isConst(1):
		return a
	}
	return &sx{op: sxMul, a: a, b: b, slot: -1}
}

func sNeg(a *sx) *sx {
	if a.op == sxConst {
		return sConst(-a.k)
	}
	return &sx{op: sxNeg, a: a, slot: -1}
}

// sClamp32 is a clamped to the int32 range.
func sClamp32(a *sx) *sx {
	if a.op == sxConst {
		return sConst(min(max(a.k, math.MinInt32), math.MaxInt32))
	}
	return &sx{op: sxClamp32, a: a, slot: -1}
}

func sDivRem(op sxOp, a *sx, k int64) *sx {
	if a.op == sxConst {
		if op == sxDiv {
			return sConst(a.k / k)
		}
		return sConst(a.k % k)
	}
	return &sx{op: op, a: a, k: k, slot: -1}
}

// aff is an integer or pointer value as an affine function of the lane
// index q: c + Σ_d coef[d]·q[d]. For a pointer, root is its parameter and
// the function gives an element offset into it.
type aff struct {
	root  int // parameter index of a pointer, -1 for integers
	dt    tile.DType
	shape tile.Shape
	c     *sx
	coef  [tile.MaxRank]*sx
}

// phase is one loop nest over the lanes of one shape: the vector values
// computed there, the reductions accumulated and the stores made.
type phase struct {
	level  int
	shape  tile.Shape
	ops    []*tile.Value // non-formula values, reductions and stores, in program order
	first  int           // program position of its first op (a tie-break)
	yields []yieldWrite  // loop-carried blocks written here
	packs  []pack        // operands of products written to frame blocks of their own here
	inits  []yieldWrite  // (a loop's prologue) carried blocks given their initial values
	rg     *region
}

// yieldWrite: the yield (or, for inits, the initial value) of carry i of
// loop lp, written to its block.
type yieldWrite struct {
	lp *loopPlan
	i  int
}

// vinfo is what the planner decided for one value.
type vinfo struct {
	kind    kind
	aff     *aff
	cmp64   *aff // a comparison of i64 affine blocks: their difference (cmp64.go)
	formula bool // a block value computed wherever it is used (never stored in the frame)
	avail   int  // the first level whose phases (or segment) may use it
	cost    int  // formula float ops: how many ops recomputing it costs
	ph      *phase
	mat     bool // computed in its phase and kept in the frame for later phases
	segment int  // scalars: the segment (0 the prologue, s after the phases of level s-1)
	invar   bool // scalars: the same in every program (computed once per call)
	rg      *region
	carry   *loopPlan // kCarry, and scalars that are carried: their loop
	reads   []carryRead
	// kCarry: the levels of its region at whose start products read it
	dotReads []int
	// kDot: the product accumulates into its accumulator's block (a
	// carried block the product is the yield of, read by nothing after it)
	accIn bool
	// kDot: operand i (a, b) is packed transposed (its loads are
	// contiguous along its first dimension)
	dotTrans [2]bool
	// kPeriodic: the divisor
	period int64
	// kScatter: the affine pointer and the i32 data block of offsets
	base *aff
	scat *tile.Value
}

// pack is an operand of a product written to a frame block of its own: as
// it is (row-major), or transposed (the block holds its transpose,
// row-major: a phase over the transposed shape, the operand read at
// swapped lanes, so that loads contiguous along its first dimension are
// contiguous along the phase's last).
type pack struct {
	x     *tile.Value
	trans bool
}

// carryRead is where a phase reads a carried block (to decide whether the
// yield may write it in place).
type carryRead struct {
	ph       *phase
	identity bool
}

// plan is the result of planning a kernel: its top level as a sequence of
// regions (straight-line values, planned in levels and phases) and loops
// (whose bodies are such sequences too, run once per iteration).
type plan struct {
	k        *tile.Kernel
	info     []vinfo
	items    []item
	dst      *[]item                   // where the items being planned go: items, or a loop's body
	loops    map[*tile.Value]*loopPlan // by OpFor, nested ones too
	regions  []*region                 // every region, bodies included
	stored   []bool                    // by parameter: the kernel stores through it
	needWrap []wrapCheck               // i32 affine values whose lanes must fit in int32
	needDiv  []divCheck
	inplace  []*tile.Value  // vector loads from buffers the kernel stores to (checkInPlace)
	atomics  []bool         // by parameter: the kernel adds to it atomically (body.go: atomicAdd)
	oldRead  map[int]bool   // by value ID: scalar atomic adds whose old values are read (gen.go: scalarAtomicOld)
	unit     map[int64]bool // integer parameters the code takes as 1 (a stride between lanes: phase.go, intern), by number
	cur      *region        // the region being classified
	// packRole: products' operands packed, by value: bit i set where a
	// product reads it as its argument i (0: a, 1: b, 2: c) packed as it
	// is, bit 4 + i where packed transposed; dot.go's directOps reads it
	packRole map[*tile.Value]uint8

	avx512 bool // zmm code (read once: isa.go); f64 lanes in zmm registers, else ymm pairs (f64y.go)

	fastPhases   int // set by generate: phases with an unmasked row loop (fast.go)
	zmmPhases    int // of which computing in zmm registers (fast.go: zmmOK)
	pairLoops    int // zmm loops emitted in pairs (fast.go: pairOK)
	folds        int // selects and Ands the unmasked loops read as another value (fast.go: fold)
	prefetchesL2 int // strided rows hinted into L2 (body.go: prefetch)
	directA      int // products' a operands read where they lie, not packed (dot.go: directOps)
	directB      int // and b operands
	colLoops     int // carried blocks summed in registers (colloop.go)
	pins         int // uniforms kept in registers in zmm loops (pin.go)
	prefetchesW  int // stores hinted one row on for writing (body.go: prefetchStore)
	ntStores     int // stores past the caches where aligned (body.go: ntStore)
	scalefs      int // exps scaled by VSCALEFPS (ops.go: expCore32)
	ranges       int // exps clamped by VRANGEPS (ops.go: expCore32)
	sum32Loops   int // paired zmm loops summing in 32 partial sums (fast.go: useSum32)
	nanDetects   int // paired zmm max/min loops detecting NaNs first (fast.go: nanDetectOK)
	divFMAs      int // divisions by a uniform by FMA corrections (ops.go: divFMA)
	divNewtons   int // divisions of vectors by Newton's steps (ops.go: divNewton)
	// newton: the kernel's divisions of vectors in zmm loops take Newton's
	// steps (isa.go: newtonFor)
	newton     bool
	transLoads int // transposed loads packed and turned back in the frame (trans.go)
	prefixRows int // phases whose unmasked rows cover a prefix of their lanes (fast.go)
	rowChecked int // masked accesses of unmasked loops checked once a row (fast.go: rowChecked)

	// readAsIs: values a product or a shape op reads (at lanes of their
	// own: not taken as transposed loads, trans.go)
	readAsIs map[*tile.Value]bool
}

// wrapCheck: the lanes of x, computed in region rg, must fit in int32.
type wrapCheck struct {
	x  *aff
	rg *region
}

// region is straight-line code: its scalars in segments, its vector values
// in phases by level. A value of an earlier region (or, in a loop body, of
// the code before the loop) is complete when the region runs: it reads it
// as a scalar slot, a formula or a frame block.
type region struct {
	scalars []*tile.Value
	phases  []*phase
	levels  int
	loop    *loopPlan     // the loop this region is the body of, or nil
	dots    []*tile.Value // products, each run at the start of its level
	trans   []*tile.Value // transposed loads, each turned back at the start of its level
}

// item is one step of the top level: a region or a loop.
type item struct {
	rg   *region
	loop *loopPlan
}

// loopPlan is a counted loop: its body, and per loop-carried value the
// storage it lives in across iterations (a frame block for blocks, a slot
// for scalars), shared by the body's argument and the loop's result. The
// body is items: its first region (body: the counter and the carried
// scalars live there), then, where loops are nested in it, each nested
// loop and the region after it; the last region (tail) writes the yields.
type loopPlan struct {
	v       *tile.Value // the OpFor
	body    *region
	items   []item
	tail    *region
	carries []carry
}

type carry struct {
	arg, init, yield, result *tile.Value // result: the OpForResult, or nil
	block                    bool
	inPlace                  bool // the yield writes the carried block itself
	yieldPh                  *phase
	// induced: a pointer block advanced by the same offset every
	// iteration (Triton's a_ptrs += BLOCK_K·stride): no storage, the body
	// reads it as its initial value's affine form plus the iterations done
	// times the offset (inducedPointer)
	induced bool
}

// divCheck: x / d and x % d of an affine x are affine within the block
// when no two lanes fall in different multiples of d: c ≥ 0 and
// c % d + span < d, span the largest lane offset Σ coef·(dim-1). A program
// where that fails bails out (the launch reruns on the executor).
type divCheck struct {
	x    *aff
	d    int64
	span int64
	rg   *region
}

// maxFormulaCost bounds the float ops recomputed in each phase that uses a
// formula value, instead of storing it in the frame.
const maxFormulaCost = 4

func cheapFloatOp(o tile.Op) bool {
	switch o {
	case tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpNeg, tile.OpAbs, tile.OpMin, tile.OpMax, tile.OpSelect:
		return true
	}
	return false
}

// vectorFloatOp reports whether the code generator computes op o on f32 blocks.
func vectorFloatOp(o tile.Op) bool {
	switch o {
	case tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpDiv, tile.OpMin, tile.OpMax,
		tile.OpNeg, tile.OpAbs, tile.OpSqrt, tile.OpRsqrt, tile.OpExp, tile.OpTanh, tile.OpLog,
		tile.OpSigmoid, tile.OpLog1p, tile.OpExpm1, tile.OpErf, tile.OpLog2, tile.OpExp2, tile.OpSign,
		tile.OpSin, tile.OpCos, tile.OpPow, tile.OpFloor, tile.OpCeil, tile.OpSelect, tile.OpRem:
		return true
	}
	return false
}

// newPlan classifies every value of k, or returns why k is not supported.
func newPlan(k *tile.Kernel) (*plan, error) {
	p := &plan{k: k, info: make([]vinfo, k.NumValues()), stored: make([]bool, len(k.Params)), avx512: useAVX512.Load(), unit: map[int64]bool{}, packRole: map[*tile.Value]uint8{}, readAsIs: map[*tile.Value]bool{}, newton: newtonFor(k)}
	live := analysis.Live(k)
	inv := analysis.Invariant(k, analysis.Launch, nil)
	var err error
	roots := analysis.Roots(k)
	var users [][]*tile.Value // analysis.Users, where the kernel has an atomic add
	p.atomics = make([]bool, len(k.Params))
	p.oldRead = map[int]bool{}
	plain := make([]bool, len(k.Params)) // by parameter: stored to by a store
	// first pass: what the kernel stores through, and what it cannot do
	k.Walk(func(v *tile.Value) {
		if err != nil {
			return
		}
		if v.Op == tile.OpDot || v.Op.IsShape() {
			for _, a := range v.Args {
				p.readAsIs[a] = true
			}
		}
		switch v.Op {
		case tile.OpDot:
			err = dotSupported(v)
		case tile.OpAtomicAdd:
			// the buffer is not also loaded or stored plainly (phases
			// reorder a program's work); old values that are read are
			// kept: a scalar's in its slot, a block's in the frame
			if users == nil {
				users = analysis.Users(k)
			}
			switch r := roots[v.Args[0].ID]; {
			case v.Type.DType != tile.F32 && v.Type.DType != tile.F64 && v.Type.DType != tile.I32:
				err = unsupported(v, "%v atomics", v.Type.DType)
			case r == nil:
				err = unsupported(v, "atomic add through a pointer that is not affine")
			default:
				p.stored[r.Aux] = true
				p.atomics[r.Aux] = true
				if len(users[v.ID]) > 0 {
					// a scalar's: computed as a scalar, its slot the old
					// value (gen.go: scalarAtomicOld); a block's: each
					// lane's old value written to its frame block as the
					// lane is added (body.go: atomicAdd), read a level
					// later
					p.oldRead[v.ID] = true
				}
			}
		case tile.OpStore:
			if r := roots[v.Args[0].ID]; r != nil {
				p.stored[r.Aux] = true
				plain[r.Aux] = true
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for i, a := range p.atomics {
		if a && plain[i] {
			return nil, unsupported(k.Params[i], "plain stores to a buffer the kernel also adds to atomically")
		}
	}
	p.dst, p.loops = &p.items, map[*tile.Value]*loopPlan{}
	p.newRegion(nil)
	one := func(v *tile.Value) error {
		in := p.in(v)
		in.rg = p.cur
		if !live[v.ID] && v.Op != tile.OpParam {
			in.kind = kDead
			return nil
		}
		if err := p.classify(v, inv[v.ID]); err != nil {
			return err
		}
		// a scalar computed once per call: the same in every program, and
		// made only of such scalars (never a reduction's or a loop's)
		if in.invar {
			switch in.kind {
			case kScalarInt, kScalarFloat, kScalarBool, kScalarPtr:
			default:
				in.invar = false
			}
			for _, a := range v.Args {
				in.invar = in.invar && p.in(a).invar
			}
		}
		return nil
	}
	for _, v := range k.Params {
		if err := one(v); err != nil {
			return nil, err
		}
	}
	for _, v := range k.Body.Values {
		if v.Op != tile.OpFor {
			if err := one(v); err != nil {
				return nil, err
			}
			continue
		}
		if err := p.loop(v, one); err != nil {
			return nil, err
		}
	}
	for _, rg := range p.regions {
		if err := p.place(rg); err != nil {
			return nil, err
		}
	}
	if err := p.order(); err != nil {
		return nil, err
	}
	if err := p.checkInPlace(); err != nil {
		return nil, err
	}
	return p, nil
}

// checkInPlace admits vector loads from buffers the kernel also stores to
// (an optimizer's update: w, its gradient and its state read and written
// in place) where no reordering can show: the kernel is one region of one
// one-dimensional phase (no loop, product, reduction or second level),
// and every store to such a buffer has the address of each of its loads,
// one element a lane (so each lane reads and writes its own element, and
// no other lane's); the phase's body must also load before it stores
// (phaseGen.build checks the order of its nodes).
func (p *plan) checkInPlace() error {
	if len(p.inplace) == 0 {
		return nil
	}
	v := p.inplace[0]
	bails := false
	p.k.Walk(func(u *tile.Value) { bails = bails || u.Op == tile.OpSin || u.Op == tile.OpCos })
	if bails { // a launch that bails out part way reruns on the executor over what it stored
		return unsupported(v, "load from a buffer the kernel also stores to, in a kernel whose sin or cos may bail out")
	}
	if len(p.items) != 1 || p.items[0].rg == nil || len(p.regions) != 1 {
		return unsupported(v, "load from a buffer the kernel also stores to, in a kernel with loops")
	}
	rg := p.items[0].rg
	if len(rg.phases) != 1 || len(rg.dots) > 0 || rg.phases[0].shape.Rank != 1 {
		return unsupported(v, "load from a buffer the kernel also stores to, in a kernel of more than one one-dimensional phase")
	}
	ph := rg.phases[0]
	for _, u := range ph.ops {
		if u.Op.IsReduce() || len(ph.yields) > 0 || len(ph.packs) > 0 {
			return unsupported(v, "load from a buffer the kernel also stores to, in a kernel that reduces")
		}
	}
	var stores []*tile.Value
	p.k.Walk(func(u *tile.Value) {
		if u.Op == tile.OpStore {
			stores = append(stores, u)
		}
	})
	for _, l := range p.inplace {
		la := p.in(l.Args[0]).aff
		if la.c == nil || la.coef[0] == nil || la.coef[0].op != sxConst || la.coef[0].k != 1 {
			return unsupported(l, "load from a buffer the kernel also stores to, not one element a lane")
		}
		for _, st := range stores {
			if si := p.in(st.Args[0]); si.kind == kScatter && si.base.root == la.root {
				return unsupported(l, "load from a buffer the kernel stores to at loaded offsets")
			}
			sa := p.in(st.Args[0]).aff
			if sa == nil || sa.root != la.root {
				continue
			}
			if sa.c == nil || sa.coef[0] == nil || !sxEqual(sa.c, la.c) || !sxEqual(sa.coef[0], la.coef[0]) {
				return unsupported(l, "load from a buffer the kernel stores to at other addresses")
			}
		}
	}
	return nil
}

// inducedPointer is the affine form of loop v's carried pointer block c in
// the body: c's initial value plus ((iv - lo)/step)·d, where the yield is
// c + d for d an integer scalar (or its splat) computed from values
// defined before the loop, and lo and step constants (step > 0: the
// iterations done, exactly).
func (p *plan) inducedPointer(v *tile.Value, c *carry, inBody map[*tile.Value]bool) (*aff, error) {
	init := p.in(c.init).aff
	if init == nil || init.root < 0 {
		return nil, unsupported(c.arg, "a loop-carried pointer block whose initial value is not affine")
	}
	y := c.yield
	if y.Op != tile.OpAddPtr || y.Args[0] != c.arg {
		return nil, unsupported(c.arg, "a loop-carried pointer block not advanced by an offset")
	}
	d := y.Args[1]
	for d.Op == tile.OpSplat || d.Op == tile.OpBroadcast || d.Op == tile.OpExpandDims {
		d = d.Args[0]
	}
	ds := p.invariantSx(d, inBody)
	lo, step := v.Args[0], v.Args[2]
	if ds == nil || lo.Op != tile.OpConst || step.Op != tile.OpConst || step.Aux <= 0 {
		return nil, unsupported(c.arg, "a loop-carried pointer block advanced by an offset that changes, or with bounds not constants")
	}
	iters := sDivRem(sxDiv, sAdd(p.scalarOf(v.Body.Args[0]), sConst(-lo.Aux)), step.Aux)
	a := *init
	a.c = sAdd(init.c, sMul(iters, ds))
	return &a, nil
}

// invariantSx is integer scalar x of a loop's body (or before it) as an
// expression of scalars defined before the loop and constants, or nil.
func (p *plan) invariantSx(x *tile.Value, inBody map[*tile.Value]bool) *sx {
	if x.Type.Ptr || !x.Type.Shape.IsScalar() || !x.Type.DType.IsInt() {
		return nil
	}
	if x.Op == tile.OpConst {
		return sConst(x.Aux)
	}
	if !inBody[x] {
		if p.in(x).kind != kScalarInt {
			return nil
		}
		return p.scalarOf(x)
	}
	switch x.Op {
	case tile.OpAdd, tile.OpSub, tile.OpMul:
		a, b := p.invariantSx(x.Args[0], inBody), p.invariantSx(x.Args[1], inBody)
		if a == nil || b == nil {
			return nil
		}
		switch x.Op {
		case tile.OpAdd:
			return sAdd(a, b)
		case tile.OpSub:
			return sAdd(a, sNeg(b))
		}
		return sMul(a, b)
	}
	return nil
}

// newRegion starts a region (a loop's body when lp is set, else the next
// item of the sequence being planned).
func (p *plan) newRegion(lp *loopPlan) *region {
	rg := &region{loop: lp}
	p.regions = append(p.regions, rg)
	if lp == nil {
		*p.dst = append(*p.dst, item{rg: rg})
	}
	p.cur = rg
	return rg
}

// allLoops is every loop of the plan, nested ones after the loop they are in.
func (p *plan) allLoops() []*loopPlan {
	var out []*loopPlan
	var walk func(items []item)
	walk = func(items []item) {
		for _, it := range items {
			if it.loop != nil {
				out = append(out, it.loop)
				walk(it.loop.items)
			}
		}
	}
	walk(p.items)
	return out
}

// loop plans a counted loop: a region of its own for the body (and a loop
// nested in the body, as this one, followed by a region of the body's
// values after it), the values after it in a new region.
func (p *plan) loop(v *tile.Value, one func(*tile.Value) error) error {
	in := p.in(v)
	in.rg, in.kind = p.cur, kLoop
	for _, a := range v.Args[:3] {
		if k := p.in(a).kind; k != kScalarInt {
			return unsupported(v, "loop bounds that are not integer scalars")
		}
	}
	lp := &loopPlan{v: v}
	p.loops[v] = lp
	body := v.Body
	yield := body.Values[len(body.Values)-1]
	inBody := map[*tile.Value]bool{}
	for _, b := range body.Args {
		inBody[b] = true
	}
	for _, b := range body.Values {
		inBody[b] = true
	}
	for i, init := range v.Args[3:] {
		arg := body.Args[i+1]
		c := carry{arg: arg, init: init, yield: yield.Args[i], block: !arg.Type.Shape.IsScalar()}
		if arg.Type.Ptr {
			a, err := p.inducedPointer(v, &c, inBody)
			if err != nil {
				return err
			}
			c.induced = true
			ai := p.in(arg)
			ai.kind, ai.aff, ai.formula = kAffine, a, true
			lp.carries = append(lp.carries, c)
			continue
		}
		if c.block && arg.Type.DType != tile.F32 && arg.Type.DType != tile.F64 && arg.Type.DType != tile.I32 || !c.block && arg.Type.DType != tile.F32 && arg.Type.DType != tile.F64 && !arg.Type.DType.IsInt() {
			return unsupported(arg, "a loop-carried %v", arg.Type)
		}
		if c.block {
			p.matLeaves(init) // the loop's prologue reads it
		}
		lp.carries = append(lp.carries, c)
	}
	lp.body = p.newRegion(lp)
	lp.items = []item{{rg: lp.body}}
	outer := p.dst
	p.dst = &lp.items
	// the induction variable and the carried values
	iv := body.Args[0]
	p.in(iv).rg, p.in(iv).kind = lp.body, kScalarInt
	lp.body.scalars = append(lp.body.scalars, iv)
	for _, c := range lp.carries {
		ai := p.in(c.arg)
		ai.rg, ai.carry = lp.body, lp
		switch {
		case c.induced: // an affine form (above)
		case c.block:
			ai.kind, ai.formula = kCarry, true
		case c.arg.Type.DType == tile.F32 || c.arg.Type.DType == tile.F64:
			ai.kind = kScalarFloat
			lp.body.scalars = append(lp.body.scalars, c.arg)
		default:
			ai.kind = kScalarInt
			lp.body.scalars = append(lp.body.scalars, c.arg)
		}
	}
	for _, b := range body.Values {
		if b.Op == tile.OpYield {
			p.in(b).rg, p.in(b).kind = p.cur, kLoop
			continue
		}
		if b.Op == tile.OpFor {
			if err := p.loop(b, one); err != nil {
				return err
			}
			continue
		}
		if err := one(b); err != nil {
			return err
		}
	}
	p.dst = outer
	lp.tail = lp.items[len(lp.items)-1].rg
	// yields: a block is written in the phase of its shape at its level; a
	// scalar's slot is copied at the end of the iteration
	for i, c := range lp.carries {
		if !c.block || c.induced {
			continue
		}
		yi := p.in(c.yield)
		level := 0
		if yi.rg == lp.tail {
			level = yi.avail
		}
		ph := p.phaseOf(lp.tail, level, c.arg.Type.Shape, len(p.info))
		ph.yields = append(ph.yields, yieldWrite{lp, i})
		lp.carries[i].yieldPh = ph
	}
	*p.dst = append(*p.dst, item{loop: lp})
	p.newRegion(nil) // the loop's results (OpForResult) share the carried storage
	return nil
}

func (p *plan) in(v *tile.Value) *vinfo { return &p.info[v.ID] }

// scalarAtomicOK checks a scalar atomic add whose old value is read: an
// affine pointer, a scalar value and mask.
func (p *plan) scalarAtomicOK(v *tile.Value) error {
	if pi := p.in(v.Args[0]); pi.aff == nil || pi.aff.root < 0 {
		return unsupported(v, "scalar atomic add through a pointer that is not affine")
	}
	switch k := p.in(v.Args[1]).kind; {
	case v.Type.DType == tile.I32 && k == kScalarInt:
	case v.Type.DType != tile.I32 && k == kScalarFloat:
	default:
		return unsupported(v, "scalar atomic add of a value of kind %d", k)
	}
	if len(v.Args) == 3 && p.in(v.Args[2]).kind != kScalarBool {
		return unsupported(v, "scalar atomic add under a mask that is not a scalar")
	}
	return nil
}

// regroupFrame classifies reshape v, which regroups dimensions, as
// kRegroup where its operand is held in a frame block (dense, row-major)
// when it is complete — a reduction's result, a product's, a loop-carried
// block — so that the reshape is that block read at v's shape: its
// elements' row-major order is the reshape's. (Reshapes of loads and of
// elementwise values were sunk to their operands before: tile's
// SinkReshapes; what is left regroups values of these kinds, such as a
// block's rows split in two and reduced along either part.)
func (p *plan) regroupFrame(v *tile.Value) bool {
	src := v.Args[0]
	switch src.Type.DType {
	case tile.F32, tile.F64, tile.I32:
	default:
		return false
	}
	switch p.in(src).kind {
	case kReduce, kDot, kCarry:
		if src.Type.Shape.IsScalar() {
			return false
		}
	default:
		return false
	}
	in := p.in(v)
	in.kind, in.formula = kRegroup, true // read wherever it is used
	return true
}

// matLeaves marks v, where it is a value kept in the frame (not a formula),
// or else each such value its formula reads (through views: transposes,
// broadcasts, reshapes; and cheap ops), as materialized: a loop's prologue
// evaluates a carried block's initial value from them after their phases
// have run. (Until 2026-12-07 only v itself was marked, so an initial
// value trans(exp(x)) read exp(x)'s block unwritten: a random kernel.)
func (p *plan) matLeaves(v *tile.Value) {
	in := p.in(v)
	switch {
	case in.kind == kView:
		p.matLeaves(v.Args[0])
	case (in.kind == kFloat || in.kind == kMask) && !in.formula:
		in.mat = true
	case in.kind == kFloat || in.kind == kMask:
		for _, a := range v.Args {
			p.matLeaves(a)
		}
	}
}

// classify decides v's kind, formula-ness and availability; its operands
// were classified before it (program order).
func (p *plan) classify(v *tile.Value, invar bool) error {
	in := p.in(v)
	t := v.Type
	avail := 0
	for _, a := range v.Args {
		if p.in(a).rg == p.cur {
			avail = max(avail, p.in(a).avail)
		}
	}
	in.avail = avail
	if v.Op == tile.OpForResult {
		// the loop's carried storage, complete after the loop
		lp := p.loopOf(v.Args[0])
		c := &lp.carries[v.Aux]
		c.result = v
		in.carry = lp
		switch {
		case c.induced: // not kept past the loop: a use of it is declined
			in.kind, in.formula = kAffine, true
		case c.block:
			in.kind, in.formula = kCarry, true
		case t.DType == tile.F32 || t.DType == tile.F64:
			in.kind = kScalarFloat
			p.cur.scalars = append(p.cur.scalars, v)
		default:
			in.kind = kScalarInt
			p.cur.scalars = append(p.cur.scalars, v)
		}
		return nil
	}
	if v.Op == tile.OpDot {
		// a product needs all of its operands: its result is a level later,
		// in a frame block
		in.kind, in.formula = kDot, true
		in.avail = avail + 1
		return nil
	}
	if t.Shape.IsScalar() && v.Op != tile.OpStore && (v.Op != tile.OpAtomicAdd || p.oldRead[v.ID]) {
		return p.classifyScalar(v, invar)
	}
	if v.Op == tile.OpAtomicAdd {
		// a store that adds, lane by lane (body.go: atomicAdd)
		in.kind = kStore
		if pi := p.in(v.Args[0]); pi.aff == nil && pi.kind != kScatter {
			return unsupported(v, "atomic add through a pointer that is not affine")
		}
		if p.oldRead[v.ID] {
			// its old values, in the frame once its phase (at level
			// avail) has run
			in.avail = avail + 1
		}
		return nil
	}
	switch {
	case t.Ptr || (t.DType.IsInt() && v.Op != tile.OpLoad && !v.Op.IsReduce()):
		a, err := p.affineOf(v)
		if err != nil {
			if d, ok := p.periodic(v); ok {
				// lanes a vector apart are not affine, but a mask or a
				// cast reads them as a vector (remconst.go)
				in.kind, in.formula, in.period = kPeriodic, true, d
				return nil
			}
			if x, d := v.Args[0], v.Args[len(v.Args)-1]; v.Op == tile.OpAddPtr && !t.Shape.IsScalar() &&
				p.in(x).aff != nil && p.in(x).aff.root >= 0 && p.in(d).kind == kFloat && d.Type.DType == tile.I32 {
				// an affine pointer plus loaded offsets: addresses lane by
				// lane, for atomic adds, stores and loads
				in.kind, in.formula, in.base, in.scat = kScatter, true, p.in(x).aff, d
				return nil
			}
			if src, sk := v.Args[0], p.in(v.Args[0]).kind; v.Op.IsShape() && v.Op != tile.OpTrans && src.Type.DType == tile.I32 && !t.Ptr &&
				(v.Op != tile.OpSplat && (sk == kFloat || sk == kView || sk == kReduce) || v.Op == tile.OpSplat && sk == kReduce) {
				// a broadcast, expand_dims or reshape of an i32 data block
				// or reduction's result, or a splat of a scalar one: read
				// through, as a float block's (a label against a row of
				// classes: a one-hot mask)
				if v.Op == tile.OpReshape && !tile.UnitReshape(src.Type.Shape, t.Shape) {
					if p.regroupFrame(v) {
						return nil
					}
					return unsupported(v, "reshape %v → %v", src.Type.Shape, t.Shape)
				}
				in.kind, in.formula, in.cost = kView, p.in(src).formula, p.in(src).cost
				return nil
			}
			if p.intData(v) {
				// an i32 block computed from loaded integers or a float:
				// a vector per position, as an f32 one (ints.go)
				in.kind = kFloat
				if v.Op != tile.OpDiv && v.Op != tile.OpRem {
					cost := 1
					for _, a := range v.Args {
						cost += p.in(a).cost
					}
					in.formula = p.allFormula(v) && cost <= maxFormulaCost
					in.cost = cost
				}
				return nil
			}
			return err
		}
		in.kind, in.aff, in.formula = kAffine, a, true
		return nil
	case v.Op == tile.OpLoad:
		if t.DType != tile.F32 && t.DType != tile.F64 && t.DType != tile.I32 {
			return unsupported(v, "%v loads", t.DType)
		}
		root := p.in(v.Args[0]).aff
		gathered := false
		if pi := p.in(v.Args[0]); root == nil && pi.kind == kScatter && (t.DType == tile.F32 || t.DType == tile.I32 || t.DType == tile.F64) {
			// an affine base plus loaded offsets: lane by lane (body.go:
			// gatherIdx), computed in its phase
			root, gathered = pi.base, true
		}
		if root == nil {
			return unsupported(v, "load through a pointer that is not affine")
		}
		if p.atomics[root.root] {
			return unsupported(v, "load from a buffer the kernel adds to atomically")
		}
		if gathered {
			if p.stored[root.root] {
				return unsupported(v, "load at loaded offsets from a buffer the kernel stores to")
			}
			in.kind = kFloat
			return nil
		}
		if p.stored[root.root] {
			// phases reorder a program's work: a buffer it reads must not
			// change under it, unless the kernel is one elementwise phase
			// that loads and stores it lane for lane (checkInPlace)
			p.inplace = append(p.inplace, v)
		}
		if p.transLoad(v) {
			in.kind, in.formula, in.avail = kTrans, true, avail+1
			return nil
		}
		// a load from a buffer the kernel never writes reads the same
		// values again in a later phase (Launch checks that no two
		// parameters overlap where one is stored to)
		in.kind = kFloat
		in.formula = p.allFormula(v)
		return nil
	case v.Op == tile.OpStore:
		in.kind = kStore
		if pi := p.in(v.Args[0]); pi.aff == nil && pi.kind != kScatter {
			return unsupported(v, "store through a pointer that is not affine")
		}
		switch d := v.Args[1].Type.DType; {
		case d != tile.F32 && d != tile.F64 && d != tile.I32:
			return unsupported(v, "%v stores", d)
		}
		return nil
	case v.Op.IsReduce():
		if t.DType != tile.F32 && t.DType != tile.F64 && t.DType != tile.I32 {
			return unsupported(v, "%v reductions", t.DType)
		}
		ax := int(v.Aux)
		r := v.Args[0].Type.Shape.Rank
		if ax != r-1 && !(ax == 0 && r == 2) && !(ax < 2 && r == 3) {
			return unsupported(v, "reduction along axis %d of a rank-%d block", ax, r)
		}
		in.kind = kReduce
		in.avail = avail + 1
		in.formula = true // its result is in the frame, read wherever it is used
		return nil
	case v.Op.IsShape():
		src := p.in(v.Args[0])
		if v.Op == tile.OpReshape && !tile.UnitReshape(v.Args[0].Type.Shape, t.Shape) {
			if p.regroupFrame(v) {
				return nil
			}
			return unsupported(v, "reshape %v → %v", v.Args[0].Type.Shape, t.Shape)
		}
		in.kind = kView
		in.formula = src.formula || src.kind == kScalarFloat || src.kind == kScalarBool || src.kind == kReduce
		in.cost = src.cost
		if v.Op == tile.OpTrans && !in.formula && t.Shape == v.Args[0].Type.Shape {
			// a square block's transpose of a value computed in a phase
			// would be read in that same phase (its shape's) at other
			// lanes: it is read a level later, from the value's frame
			// block, as a reduction's result is
			in.avail = avail + 1
		}
		return nil
	case t.DType == tile.I1:
		// masks: comparisons, logic, casts to i1
		switch {
		case v.Op.IsCompare():
			d := v.Args[0].Type.DType
			if d == tile.I64 {
				if err := p.compare64(v); err != nil {
					return err
				}
			} else if d.IsInt() && d != tile.I32 {
				return unsupported(v, "%v comparisons", d)
			}
			if d == tile.I1 {
				return unsupported(v, "i1 comparisons")
			}
		case v.Op == tile.OpAnd || v.Op == tile.OpOr || v.Op == tile.OpXor || v.Op == tile.OpNot:
		case v.Op == tile.OpCast && (v.Args[0].Type.DType == tile.F32 || v.Args[0].Type.DType == tile.F64):
		case v.Op == tile.OpSelect:
		default:
			return unsupported(v, "%v of i1 blocks", v.Op)
		}
		in.kind = kMask
		in.formula = p.allFormula(v)
		return nil
	case t.DType == tile.F32 || t.DType == tile.F64:
		other, floatOp := tile.F64, vectorFloatOp // the cast's other float type; the ops vectors take
		if t.DType == tile.F64 {
			other, floatOp = tile.F32, vectorF64Op
		}
		switch {
		case v.Op == tile.OpCast:
			if s := v.Args[0].Type.DType; s != tile.I1 && s != tile.I32 && s != other {
				return unsupported(v, "cast from %v to %v", s, t.DType)
			}
		case !floatOp(v.Op):
			return unsupported(v, "%v %v", t.DType, v.Op)
		}
		in.kind = kFloat
		if cheapFloatOp(v.Op) || v.Op == tile.OpCast {
			cost := 1
			ok := true
			for _, a := range v.Args {
				ai := p.in(a)
				ok = ok && ai.formula
				cost += ai.cost
			}
			in.formula = ok && cost <= maxFormulaCost
			in.cost = cost
		}
		return nil
	}
	return unsupported(v, "%v blocks", t)
}

// vectorF64Op reports whether the code generator computes op o on f64
// blocks (f64.go): exactly, as the reference does.
func vectorF64Op(o tile.Op) bool {
	switch o {
	case tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpDiv, tile.OpMin, tile.OpMax,
		tile.OpNeg, tile.OpAbs, tile.OpSqrt, tile.OpRsqrt, tile.OpSign, tile.OpFloor, tile.OpCeil, tile.OpSelect,
		tile.OpExp, tile.OpTanh, tile.OpLog, tile.OpSigmoid,
		// written for zmm registers (mathd.go, powd.go), run on ymm halves
		// without AVX-512 (zasm.go)
		tile.OpLog1p, tile.OpExpm1, tile.OpErf, tile.OpSin, tile.OpCos, tile.OpExp2, tile.OpLog2, tile.OpPow, tile.OpRem:
		return true
	}
	return false
}

// intData reports whether v, an integer block that is not affine, is an
// i32 data block the code computes per position (ints.go): an op it has
// whose operands are such blocks, affine i32 lanes, masks, or (a cast) a
// float block, at least one of them not affine (a select's mask counts).
func (p *plan) intData(v *tile.Value) bool {
	t := v.Type
	if t.Ptr || t.DType != tile.I32 || t.Shape.IsScalar() || !intDataOp(v) {
		return false
	}
	data := false
	for _, a := range v.Args {
		ai := p.in(a)
		switch {
		case ai.kind == kFloat && (a.Type.DType == tile.I32 || a.Type.DType == tile.F32):
			data = true
		case ai.kind == kCarry && a.Type.DType == tile.I32:
			data = true // a loop-carried i32 block: its frame block
		case (ai.kind == kReduce || ai.kind == kRegroup) && a.Type.DType == tile.I32:
			data = true // an i32 reduction's result (or its regrouped block): its frame block
		case ai.kind == kStore && p.oldRead[a.ID] && a.Type.DType == tile.I32:
			data = true // an i32 atomic add's old values: its frame block
		case ai.kind == kMask:
			data = data || v.Op == tile.OpCast || v.Op == tile.OpSelect
		case ai.kind == kView && a.Type.DType == tile.I1:
			// a splat or broadcast condition (a loop counter's comparison)
			data = data || v.Op == tile.OpCast || v.Op == tile.OpSelect
		case ai.kind == kAffine && a.Type.DType == tile.I32, ai.kind == kPeriodic:
		case ai.kind == kView && a.Type.DType == tile.I32 && !a.Type.Ptr:
			data = true // a view of an i32 data block
		default:
			return false
		}
	}
	return data
}

func (p *plan) allFormula(v *tile.Value) bool {
	for _, a := range v.Args {
		if !p.in(a).formula {
			return false
		}
	}
	return true
}

func (p *plan) loopOf(v *tile.Value) *loopPlan { return p.loops[v] }

// classifyScalar: rank-0 values.
func (p *plan) classifyScalar(v *tile.Value, invar bool) error {
	in := p.in(v)
	in.invar = invar
	t := v.Type
	switch {
	case t.Ptr:
		if v.Op == tile.OpParam {
			in.kind = kScalarPtr
			in.aff = &aff{root: int(v.Aux), dt: t.DType, c: sConst(0)}
			return nil
		}
		if v.Op != tile.OpAddPtr {
			return unsupported(v, "scalar pointer from %v", v.Op)
		}
		base := p.in(v.Args[0]).aff
		in.kind = kScalarPtr
		in.aff = &aff{root: base.root, dt: t.DType, c: sAdd(base.c, p.scalarOf(v.Args[1]))}
		return nil
	case t.DType == tile.I32 && v.Op.IsReduce():
		// a vector's i32 lanes reduced (body.go: reduceI32): its slot,
		// read as a splat (an integer scalar computed from it is declined)
		if v.Args[0].Type.Shape.Rank != 1 {
			return unsupported(v, "scalar reduction of %v", v.Args[0].Type)
		}
		in.kind = kReduce
		in.avail++
		return nil
	case t.DType.IsInt():
		if in.avail > 0 {
			return unsupported(v, "integer scalar computed from a reduction")
		}
		switch v.Op {
		case tile.OpParam, tile.OpConst, tile.OpProgramID, tile.OpNumPrograms:
		case tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpMin, tile.OpMax, tile.OpAnd, tile.OpOr, tile.OpXor, tile.OpNeg, tile.OpNot:
		case tile.OpDiv, tile.OpRem:
		case tile.OpCast:
			if s := v.Args[0].Type.DType; !s.IsInt() && s != tile.I1 {
				return unsupported(v, "cast from %v to an integer", s)
			}
		case tile.OpSelect:
		case tile.OpAtomicAdd:
			if err := p.scalarAtomicOK(v); err != nil {
				return err
			}
		case tile.OpLoad:
			// an index loaded once a program (an embedding's row, a
			// label): its slot, read by address arithmetic as any scalar
			pi := p.in(v.Args[0])
			switch {
			case t.DType != tile.I32:
				return unsupported(v, "scalar %v load", t.DType)
			case pi.aff == nil || pi.aff.root < 0:
				return unsupported(v, "scalar load through a pointer that is not affine")
			case p.stored[pi.aff.root] || p.atomics[pi.aff.root]:
				return unsupported(v, "load from a buffer the kernel also stores to")
			case len(v.Args) == 3 && v.Args[2].Op != tile.OpConst:
				return unsupported(v, "scalar i32 load whose other is not a constant")
			}
		default:
			return unsupported(v, "scalar %v", v.Op)
		}
		in.kind = kScalarInt
		p.cur.scalars = append(p.cur.scalars, v)
		return nil
	case t.DType == tile.I1:
		switch {
		case v.Op == tile.OpConst, v.Op == tile.OpParam:
		case v.Op.IsCompare():
			if d := v.Args[0].Type.DType; d != tile.F32 && d != tile.F64 && !d.IsInt() {
				return unsupported(v, "%v comparison", d)
			}
		case v.Op == tile.OpAnd || v.Op == tile.OpOr || v.Op == tile.OpXor || v.Op == tile.OpNot:
		default:
			return unsupported(v, "scalar i1 %v", v.Op)
		}
		in.kind = kScalarBool
		in.segment = in.avail
		p.cur.scalars = append(p.cur.scalars, v)
		return nil
	case (t.DType == tile.F32 || t.DType == tile.F64) && v.Op == tile.OpAtomicAdd:
		if err := p.scalarAtomicOK(v); err != nil {
			return err
		}
		in.kind = kScalarFloat
		in.segment = in.avail
		p.cur.scalars = append(p.cur.scalars, v)
		return nil
	case t.DType == tile.F32:
		switch {
		case v.Op == tile.OpParam, v.Op == tile.OpConst:
		case v.Op == tile.OpLoad:
			if p.stored[p.in(v.Args[0]).aff.root] {
				return unsupported(v, "load from a buffer the kernel also stores to")
			}
		case v.Op.IsReduce():
			if v.Type.DType != tile.F32 || v.Args[0].Type.Shape.Rank != 1 {
				return unsupported(v, "scalar reduction of %v", v.Args[0].Type)
			}
			in.kind = kReduce
			in.avail++
			return nil
		case v.Op == tile.OpCast:
			if s := v.Args[0].Type.DType; s != tile.I32 && s != tile.I1 {
				return unsupported(v, "cast from %v to f32", s)
			}
		case vectorFloatOp(v.Op):
		default:
			return unsupported(v, "scalar f32 %v", v.Op)
		}
		in.kind = kScalarFloat
		in.segment = in.avail
		p.cur.scalars = append(p.cur.scalars, v)
		return nil
	case t.DType == tile.F64 && v.Op == tile.OpConst:
		// read only as a splat: a pool constant (uniform); no scalar code
		// computes with f64
		in.kind = kScalarFloat
		return nil
	case t.DType == tile.F64 && v.Op == tile.OpParam:
		// read as a splat: its parameter slot holds the float64's bits
		// (f64.go: scalarF64)
		in.kind = kScalarFloat
		in.segment = in.avail
		p.cur.scalars = append(p.cur.scalars, v)
		return nil
	case t.DType == tile.F64 && v.Op == tile.OpLoad:
		// read only as a splat: its slot (f64.go: scalarF64)
		if p.stored[p.in(v.Args[0]).aff.root] {
			return unsupported(v, "load from a buffer the kernel also stores to")
		}
		if len(v.Args) == 3 && v.Args[2].Op != tile.OpConst {
			return unsupported(v, "scalar f64 load whose other is not a constant")
		}
		in.kind = kScalarFloat
		in.segment = in.avail
		p.cur.scalars = append(p.cur.scalars, v)
		return nil
	case t.DType == tile.F64 && v.Op == tile.OpCast:
		// f64.go: scalarF64Cast
		switch x := v.Args[0]; {
		case x.Type.DType == tile.F32 && p.in(x).kind == kScalarFloat:
		case (x.Type.DType == tile.I32 || x.Type.DType == tile.I64 || x.Type.DType == tile.I1) && (p.in(x).kind == kScalarInt || p.in(x).kind == kScalarBool):
		default:
			return unsupported(v, "scalar cast from %v to f64", x.Type.DType)
		}
		in.kind = kScalarFloat
		in.segment = in.avail
		p.cur.scalars = append(p.cur.scalars, v)
		return nil
	case t.DType == tile.F64 && vectorF64Op(v.Op):
		// computed by the vector code on broadcast operands (f64.go)
		in.kind = kScalarFloat
		in.segment = in.avail
		p.cur.scalars = append(p.cur.scalars, v)
		return nil
	case t.DType == tile.F64 && v.Op.IsReduce():
		if v.Args[0].Type.Shape.Rank != 1 {
			return unsupported(v, "scalar reduction of %v", v.Args[0].Type)
		}
		in.kind = kReduce
		in.avail++
		return nil
	}
	return unsupported(v, "scalar %v", t)
}

// scalarOf is the integer scalar v as an expression.
func (p *plan) scalarOf(v *tile.Value) *sx {
	if v.Op == tile.OpConst {
		return sConst(v.Aux)
	}
	if v.Op == tile.OpCast && v.Type.DType == tile.I64 && v.Type.Shape.IsScalar() {
		if d := v.Args[0].Type.DType; d == tile.I32 || d == tile.I1 {
			// a widening cast: the operand's slot holds it already (an
			// i32 sign-extended), and a parameter seen through it is
			// one Specialize may make a constant (a row stride of a
			// kernel indexing in 64 bits)
			return p.scalarOf(v.Args[0])
		}
	}
	return &sx{op: sxVal, v: v, slot: -1}
}

// affineOf is the affine form of an integer or pointer block, or why it
// has none.
func (p *plan) affineOf(v *tile.Value) (*aff, error) {
	t := v.Type
	r := t.Shape.Rank
	zero := func() *aff {
		a := &aff{root: -1, dt: t.DType, shape: t.Shape, c: sConst(0)}
		for d := 0; d < r; d++ {
			a.coef[d] = sConst(0)
		}
		return a
	}
	arg := func(i int) *aff { return p.in(v.Args[i]).aff }
	switch v.Op {
	case tile.OpArange:
		a := zero()
		a.c, a.coef[0] = sConst(v.Aux), sConst(1)
		return a, nil
	case tile.OpSplat:
		s := v.Args[0]
		a := zero()
		if s.Type.Ptr {
			sa := p.in(s).aff
			a.root, a.c = sa.root, sa.c
			return a, nil
		}
		if p.in(s).kind != kScalarInt {
			return nil, unsupported(v, "splat of %v", s.Type)
		}
		a.c = p.scalarOf(s)
		return a, nil
	case tile.OpBroadcast, tile.OpExpandDims, tile.OpReshape, tile.OpTrans:
		src := arg(0)
		if src == nil {
			return nil, unsupported(v, "%v of a value that is not affine", v.Op)
		}
		a := zero()
		a.root, a.c = src.root, src.c
		m, ok := viewMap(v)
		if !ok {
			// a reshape that splits dimensions (or merges ones whose
			// coefficients are contiguous) is affine in the result's lanes
			if v.Op == tile.OpReshape {
				if cs, ok := regroup(src, v.Args[0].Type.Shape, t.Shape); ok {
					a.coef = cs
					return a, nil
				}
			}
			return nil, unsupported(v, "reshape %v → %v", v.Args[0].Type.Shape, t.Shape)
		}
		// a[d] of the result = src at index m(d): each source dimension's
		// coefficient goes to the result dimension it comes from
		for sd, rd := range m {
			if rd >= 0 && v.Args[0].Type.Shape.Dims[sd] > 1 {
				a.coef[rd] = sAdd(a.coef[rd], src.coef[sd])
			}
		}
		return a, nil
	case tile.OpAdd, tile.OpSub, tile.OpAddPtr:
		x, y := arg(0), arg(1)
		if x == nil || y == nil {
			return nil, unsupported(v, "%v of values that are not affine", v.Op)
		}
		if v.Op == tile.OpAddPtr && y.dt == tile.I32 {
			p.needWrap = append(p.needWrap, wrapCheck{y, p.cur})
		}
		a := zero()
		a.root = x.root
		neg := func(s *sx) *sx { return s }
		if v.Op == tile.OpSub {
			neg = sNeg
		}
		a.c = sAdd(x.c, neg(y.c))
		for d := 0; d < r; d++ {
			a.coef[d] = sAdd(x.coef[d], neg(y.coef[d]))
		}
		return a, nil
	case tile.OpMul:
		x, y := arg(0), arg(1)
		if x == nil || y == nil {
			return nil, unsupported(v, "mul of values that are not affine")
		}
		// one operand must be the same in every lane
		if !uniform(y) {
			x, y = y, x
		}
		if !uniform(y) {
			return nil, unsupported(v, "product of two lane-dependent integers")
		}
		a := zero()
		a.c = sMul(x.c, y.c)
		for d := 0; d < r; d++ {
			a.coef[d] = sMul(x.coef[d], y.c)
		}
		return a, nil
	case tile.OpDiv, tile.OpRem:
		x, y := arg(0), arg(1)
		if x == nil || y == nil || x.root >= 0 {
			return nil, unsupported(v, "%v of values that are not affine", v.Op)
		}
		if !uniform(y) || y.c.op != sxConst || y.c.k <= 0 {
			return nil, unsupported(v, "integer %v by a divisor that is not a positive constant", v.Op)
		}
		d := y.c.k
		if d == 1 { // x/1 = x, x%1 = 0 in every lane
			if v.Op == tile.OpDiv {
				a := *x
				return &a, nil
			}
			return zero(), nil
		}
		span := int64(0)
		for dim := 0; dim < r; dim++ {
			c := x.coef[dim]
			if c.op != sxConst || c.k < 0 {
				return nil, unsupported(v, "integer %v of lanes with a coefficient that is not a constant ≥ 0", v.Op)
			}
			span += c.k * int64(t.Shape.Dims[dim]-1)
		}
		if span >= d {
			return nil, unsupported(v, "integer %v whose lanes span more than the divisor", v.Op)
		}
		if x.dt == tile.I32 {
			p.needWrap = append(p.needWrap, wrapCheck{x, p.cur})
		}
		p.needDiv = append(p.needDiv, divCheck{x, d, span, p.cur})
		a := zero()
		if v.Op == tile.OpDiv {
			a.c = sDivRem(sxDiv, x.c, d) // the same in every lane
			return a, nil
		}
		a.c = sDivRem(sxRem, x.c, d)
		a.coef = x.coef
		return a, nil
	case tile.OpCast:
		x := arg(0)
		if x == nil {
			return nil, unsupported(v, "cast of a value that is not affine")
		}
		if x.dt == tile.I32 && t.DType == tile.I64 {
			p.needWrap = append(p.needWrap, wrapCheck{x, p.cur})
		} else if x.dt != t.DType {
			return nil, unsupported(v, "cast from %v to %v", x.dt, t.DType)
		}
		a := *x
		a.dt = t.DType
		return &a, nil
	}
	return nil, unsupported(v, "integer %v blocks", v.Op)
}

func uniform(a *aff) bool {
	for d := 0; d < a.shape.Rank; d++ {
		if !a.coef[d].isConst(0) {
			return false
		}
	}
	return true
}

// regroup gives the coefficients of src, an affine block of shape s,
// reshaped to t (row-major order kept), where that is affine: where the
// dimensions of size more than 1 fall into groups of equal extent, each
// either one dimension of s split into dimensions of t (index q of s is
// Σ q[j]·stride[j] over the group's dimensions j of t) or dimensions of s
// merged into one of t whose constant coefficients are those of one
// index running over them (c[i] = c[last]·the extent after i).
func regroup(src *aff, s, t tile.Shape) (cs [tile.MaxRank]*sx, ok bool) {
	for d := 0; d < t.Rank; d++ {
		cs[d] = sConst(0)
	}
	var sd, td []int // the dimensions of size more than 1
	for d := 0; d < s.Rank; d++ {
		if s.Dims[d] > 1 {
			sd = append(sd, d)
		}
	}
	for d := 0; d < t.Rank; d++ {
		if t.Dims[d] > 1 {
			td = append(td, d)
		}
	}
	i, j := 0, 0
	for i < len(sd) && j < len(td) {
		i0, j0 := i, j
		ps, pt := s.Dims[sd[i]], t.Dims[td[j]]
		i++
		j++
		for ps != pt {
			if ps < pt {
				if i == len(sd) {
					return cs, false
				}
				ps *= s.Dims[sd[i]]
				i++
			} else {
				if j == len(td) {
					return cs, false
				}
				pt *= t.Dims[td[j]]
				j++
			}
		}
		switch {
		case i-i0 == 1: // one dimension of s split over t's j0..j-1
			stride := int64(1)
			for jj := j - 1; jj >= j0; jj-- {
				cs[td[jj]] = sMul(src.coef[sd[i0]], sConst(stride))
				stride *= int64(t.Dims[td[jj]])
			}
		case j-j0 == 1: // s's i0..i-1 merged into one of t
			last := src.coef[sd[i-1]]
			if last.op != sxConst {
				return cs, false
			}
			stride := int64(1)
			for ii := i - 1; ii >= i0; ii-- {
				if c := src.coef[sd[ii]]; c.op != sxConst || c.k != last.k*stride {
					return cs, false
				}
				stride *= int64(s.Dims[sd[ii]])
			}
			cs[td[j0]] = last
		default:
			return cs, false
		}
	}
	return cs, i == len(sd) && j == len(td)
}

// viewMap says, for each dimension of a shape op's operand, which
// dimension of the result it is indexed by (-1: none, the operand's
// dimension has size 1).
func viewMap(v *tile.Value) ([]int, bool) {
	src, dst := v.Args[0].Type.Shape, v.Type.Shape
	m := make([]int, src.Rank)
	switch v.Op {
	case tile.OpSplat:
		return m, true
	case tile.OpBroadcast:
		for d := range m {
			m[d] = d
			if src.Dims[d] == 1 {
				m[d] = -1
			}
		}
		return m, true
	case tile.OpExpandDims:
		ax := int(v.Aux)
		for d := range m {
			m[d] = d
			if d >= ax {
				m[d] = d + 1
			}
		}
		return m, true
	case tile.OpTrans:
		m[0], m[1] = 1, 0
		return m, true
	case tile.OpReshape:
		if !tile.UnitReshape(src, dst) {
			return nil, false
		}
		j := 0
		for d := range m {
			if src.Dims[d] == 1 {
				m[d] = -1
				continue
			}
			for dst.Dims[j] == 1 {
				j++
			}
			m[d] = j
			j++
		}
		return m, true
	}
	return nil, false
}

// phaseOf is region rg's phase of shape s at level, made at program
// position pos if new.
func (p *plan) phaseOf(rg *region, level int, s tile.Shape, pos int) *phase {
	for _, ph := range rg.phases {
		if ph.level == level && ph.shape == s {
			return ph
		}
	}
	ph := &phase{level: level, shape: s, first: pos, rg: rg}
	rg.phases = append(rg.phases, ph)
	rg.levels = max(rg.levels, level+1)
	return ph
}

// place assigns region rg's levels and phases: a non-formula vector value,
// a reduction's accumulation or a store runs in the phase of its shape at
// the first level where all it uses is available.
func (p *plan) place(rg *region) error {
	pos := 0
	p.k.Walk(func(v *tile.Value) {
		pos++
		in := p.in(v)
		if in.rg != rg {
			return
		}
		switch in.kind {
		case kFloat, kMask:
			if in.formula {
				return
			}
			in.ph = p.phaseOf(rg, in.avail, v.Type.Shape, pos)
			in.ph.ops = append(in.ph.ops, v)
		case kReduce:
			src := v.Args[0]
			in.ph = p.phaseOf(rg, in.avail-1, src.Type.Shape, pos)
			in.ph.ops = append(in.ph.ops, v)
		case kStore:
			lvl := in.avail
			if p.oldRead[v.ID] {
				lvl-- // an atomic add whose old values are read: they are available a level later
			}
			in.ph = p.phaseOf(rg, lvl, v.Args[0].Type.Shape, pos)
			in.ph.ops = append(in.ph.ops, v)
		case kTrans:
			rg.trans = append(rg.trans, v)
			s := v.Type.Shape
			ph := p.phaseOf(rg, in.avail-1, tile.Shp(s.Dims[1], s.Dims[0]), pos)
			ph.packs = append(ph.packs, pack{v, true})
		case kDot:
			rg.dots = append(rg.dots, v)
			for i, x := range v.Args {
				xi := p.in(x)
				switch {
				case i == 2 && zeroSplat(x):
				case xi.kind == kCarry:
					xi.dotReads = append(xi.dotReads, in.avail)
				case xi.kind == kDot:
				case xi.kind == kFloat && !xi.formula:
					xi.mat = true // written to its block in its phase
				default: // written to a block of its own before the product
					pk := pack{x, i < 2 && p.transposedLoad(x)}
					s := x.Type.Shape
					if pk.trans {
						s = tile.Shp(s.Dims[1], s.Dims[0])
						in.dotTrans[i] = true
					}
					ph := p.phaseOf(rg, in.avail-1, s, pos)
					if pk.trans {
						p.packRole[x] |= 1 << (4 + i)
					} else {
						p.packRole[x] |= 1 << i
					}
					if !slices.Contains(ph.packs, pk) {
						ph.packs = append(ph.packs, pk)
					}
				}
			}
		}
		if in.kind != kDead && in.kind != kLoop {
			rg.levels = max(rg.levels, in.avail+1)
		}
	})
	return nil
}

// lanes maps a value's dimensions to the dimensions of the phase it is
// evaluated in: lanes[d] is the phase dimension that indexes dimension d
// of the value, or -1 (the value's dimension has size 1, index 0).
type lanes []int

func identity(r int) lanes {
	m := make(lanes, r)
	for d := range m {
		m[d] = d
	}
	return m
}

func (m lanes) isIdentity() bool {
	for d, x := range m {
		if x != d {
			return false
		}
	}
	return true
}

func (m lanes) key() string { return fmt.Sprint([]int(m)) }

// through is the lanes of a shape op's operand when the shape op is
// evaluated with lanes m.
func through(v *tile.Value, m lanes) lanes {
	vm, _ := viewMap(v)
	src := make(lanes, len(vm))
	for sd, rd := range vm {
		src[sd] = -1
		if rd >= 0 && v.Args[0].Type.Shape.Dims[sd] > 1 {
			src[sd] = m[rd]
		}
	}
	return src
}

// order finds which values are kept in the frame for later phases, orders
// each region's phases, and decides which loop-carried blocks the yield
// writes in place.
func (p *plan) order() error {
	for _, rg := range p.regions {
		if err := p.orderRegion(rg); err != nil {
			return err
		}
	}
	// a yield writes its carried block in place when every read of the
	// block in the body comes in an earlier phase, or in the yield's phase
	// at the same lanes
	// (reads in the body's regions before its tail, nested loops' bodies
	// among them, all come before the tail's phases)
	for _, lp := range p.allLoops() {
		for i := range lp.carries {
			c := &lp.carries[i]
			if !c.block || c.induced {
				continue
			}
			c.inPlace = true
			at := slices.Index(lp.tail.phases, c.yieldPh)
			for _, r := range p.in(c.arg).reads {
				ri := slices.Index(lp.tail.phases, r.ph)
				if ri > at || ri == at && !r.identity {
					c.inPlace = false
				}
			}
			// a product reads the whole block at the start of its level
			for _, l := range p.in(c.arg).dotReads {
				if c.yieldPh.level < l {
					c.inPlace = false
				}
			}
			// a product that is the yield accumulates in the carried block
			// itself when nothing reads the block after the product starts
			d := c.yield
			if !c.inPlace || d.Op != tile.OpDot || d.Args[2] != c.arg || p.in(d).rg != lp.tail {
				continue
			}
			di := p.in(d)
			ok := len(p.in(c.arg).dotReads) == 1
			for _, r := range p.in(c.arg).reads {
				ok = ok && (r.ph.rg != lp.tail || r.ph.level < di.avail)
			}
			di.accIn = ok
		}
	}
	return nil
}

// orderRegion orders rg's phases: by level, and within a level so that a
// phase comes after those whose values it reads, and stores through one
// parameter keep their program order. A region whose phases cannot be
// ordered so is not supported.
func (p *plan) orderRegion(rg *region) error {
	idx := map[*phase]int{}
	for i, ph := range rg.phases {
		idx[ph] = i
	}
	n := len(rg.phases)
	after := make([][]bool, n) // after[b][a]: b runs after a
	for i := range after {
		after[i] = make([]bool, n)
	}
	dep := func(ph, on *phase) {
		if on != nil && on != ph && on.rg == rg {
			after[idx[ph]][idx[on]] = true
		}
	}
	var err error
	var walk func(ph *phase, u *tile.Value, m lanes)
	walk = func(ph *phase, u *tile.Value, m lanes) {
		if err != nil {
			return
		}
		ui := p.in(u)
		switch {
		case ui.kind == kView:
			walk(ph, u.Args[0], through(u, m))
		case ui.kind == kReduce, ui.kind == kStore && p.oldRead[u.ID]:
			dep(ph, ui.ph)
		case ui.kind == kCarry:
			ui.reads = append(ui.reads, carryRead{ph, m.isIdentity() && u.Type.Shape == ph.shape})
		case ui.kind == kRegroup: // its operand's whole frame block, at other lanes
			src := u.Args[0]
			switch si := p.in(src); si.kind {
			case kReduce:
				dep(ph, si.ph)
			case kCarry:
				si.reads = append(si.reads, carryRead{ph, false})
			}
		case (ui.kind == kFloat || ui.kind == kMask) && !ui.formula:
			if ui.ph == ph {
				if !m.isIdentity() || u.Type.Shape != ph.shape {
					err = unsupported(u, "a value read in its own phase at other lanes")
				}
				return
			}
			ui.mat = true
			dep(ph, ui.ph)
		case ui.kind == kFloat || ui.kind == kMask:
			for _, a := range u.Args {
				walk(ph, a, m)
			}
		}
	}
	for _, ph := range rg.phases {
		for _, v := range ph.ops {
			in := p.in(v)
			switch in.kind {
			case kReduce:
				walk(ph, v.Args[0], identity(v.Args[0].Type.Shape.Rank))
			default:
				for _, a := range v.Args {
					walk(ph, a, identity(ph.shape.Rank))
				}
			}
		}
		for _, y := range ph.yields {
			walk(ph, y.lp.carries[y.i].yield, identity(ph.shape.Rank))
		}
		for _, pk := range ph.packs {
			if p.in(pk.x).kind == kTrans { // the load itself, in the pack's phase
				for _, a := range pk.x.Args {
					walk(ph, a, pk.lanes())
				}
				continue
			}
			walk(ph, pk.x, pk.lanes())
		}
	}
	if err != nil {
		return err
	}
	// stores through one parameter in program order
	var last [64]*phase
	roots := analysis.Roots(p.k)
	p.k.Walk(func(v *tile.Value) {
		if v.Op != tile.OpStore || p.in(v).kind != kStore || p.in(v).rg != rg {
			return
		}
		r := roots[v.Args[0].ID]
		if r == nil || r.Aux >= int64(len(last)) {
			return
		}
		if prev := last[r.Aux]; prev != nil && prev != p.in(v).ph {
			after[idx[p.in(v).ph]][idx[prev]] = true
		}
		last[r.Aux] = p.in(v).ph
	})
	// Kahn's algorithm, lowest (level, first position) first
	done := make([]bool, n)
	var out []*phase
	for len(out) < n {
		best := -1
		for i, ph := range rg.phases {
			if done[i] {
				continue
			}
			ready := true
			for j := range n {
				if after[i][j] && !done[j] {
					ready = false
					break
				}
			}
			if !ready {
				continue
			}
			if best < 0 || ph.level < rg.phases[best].level || ph.level == rg.phases[best].level && ph.first < rg.phases[best].first {
				best = i
			}
		}
		if best < 0 {
			return unsupported(nil, "phases that depend on each other")
		}
		done[best] = true
		out = append(out, rg.phases[best])
	}
	// a level's phases must all run before the next level's (reductions
	// complete at the end of their phase)
	for i := 1; i < len(out); i++ {
		if out[i].level < out[i-1].level {
			return unsupported(nil, "phases out of level order")
		}
	}
	rg.phases = out
	return nil
}
