package codegen

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
)

// lval is a value as one thread holds it: one register per slot of its
// layout (slots of one class share a register), or one register for a scalar.
type lval struct {
	lay  *Layout // nil for scalars
	regs []string
}

// lowerer turns one verified kernel into PTX. Values are emitted on demand
// in the layout a consumer asks for (memoised per layout); anchors (loads,
// reductions, dots, atomics, loop-carried values) are emitted once, in
// program order, in their natural layout, and converted through shared
// memory when asked for in another. Values that depend only on parameters,
// program ids and thread geometry go to the prologue, computed once per thread.
type lowerer struct {
	k    *tile.Kernel
	opt  Options
	axes []analysis.AxisInfo
	inv  []bool // kernel-invariant: computed in the prologue
	// invAll: kernel-invariant, a loop's need or not (loopDone)
	invAll []bool

	pro, body strings.Builder
	nreg      map[string]int
	nlabel    int
	policy    string // the register of the keep hint's L2 cache policy (keepPolicy)

	memo    []map[string]*lval // scopes; memo[0] holds prologue values
	natural map[int]*Layout    // anchors' natural layouts, by value ID
	blocked map[string]*Blocked
	// layoutErr: the first layout interned that cannot hold its shape
	// (Blocked.tilesExactly), reported after emit
	layoutErr error
	classes   map[string][][]int
	geometry  map[string]string // thread-geometry registers, by key

	smem    int // bytes of the reused scratch region (conversions, dots)
	ownSmem int // bytes of regions owned by one reduction each, before the scratch
	// the scratch region's alignment (16, or 1024 where wgmma reads a
	// 128-byte-swizzled tile, whose swizzle is of the absolute address)
	scratchAlign int
	loopDepth    int
	laidOut      map[int][]string // value ID → layouts it was emitted in (for the dump)
	users        map[int][]*tile.Value
	plan         plan
	pipes        map[int]*pipe   // software-pipelined loops, by the loop's value ID
	pipeCopy     map[int]*Layout // their transposed operands' loads: the layout they copy in
	// stageMemo: a tensor-core step's fragment bases plus its stage
	// register (stageBase), cleared at the start of each step
	stageMemo    map[string]string
	stageMemoReg string
	mmaPlan      *mmaPlan // loops whose dots run on register fragments (mmaloop.go)
	wgmma        bool     // the kernel uses wgmma: .version 8.0, .target sm_90a
	// producerWarps: warps beside the NumWarps of the layouts that a
	// warp-specialised loop adds as its producer (wsLoop); barThreads:
	// once they have exited, the threads that barriers wait for
	producerWarps int
	// tmaps: the tensor maps the kernel takes after its own parameters
	// (tma.go), in order
	tmaps []TensorMap
	// cluster: the CTAs of a cluster along x, y, z (.reqnctapercluster;
	// Kernel.Cluster), zero without one (tma.go: A's tensor copies
	// multicast over a cluster of 2 along program axis 1)
	cluster    [3]int
	barThreads int
	regSplit   [2]int            // setmaxnreg's counts (Kernel.RegSplit)
	slotMemo   map[string]string // values emitted slot by slot (slotwise.go)
	// late loads (lateload.go): by value ID, the store they are emitted
	// in and how many of its groups ahead
	late map[int]*lateLoad
	// loops: the kernel's loops (analyze); loopsDone: those emitted
	// (inPrologue)
	loops, loopsDone int
	wsKernel         bool // a warp-specialised loop: every invariant value in the prologue
	epiLate          int  // the meta-parameter epi_late, or its choice (chooseEpiLate)
	lateStore        *tile.Value
	lateAhead        int
	lateBlock        *tile.Block // the block of lateStore and the late loads
	lating           bool        // emitting lateStore
	carry            *carries    // loads carried through shared memory (smemcarry.go); nil: none
	result           *Kernel     // the print stage's result
}

func newLowerer(k *tile.Kernel, opt Options) *lowerer {
	return &lowerer{
		k: k, opt: opt,
		nreg:     map[string]int{},
		memo:     []map[string]*lval{{}},
		natural:  map[int]*Layout{},
		blocked:  map[string]*Blocked{},
		classes:  map[string][][]int{},
		geometry: map[string]string{},
		laidOut:  map[int][]string{},
		plan:     plan{access: map[int]*Layout{}, loops: map[int][]*Layout{}},
		pipes:    map[int]*pipe{},
		pipeCopy: map[int]*Layout{},
	}
}

// analyze is the analysis stage (package tile/analysis): axis information,
// users and invariance. Values invariant over the program go to the
// prologue; in kernels with loops only those a loop needs, so that the
// epilogue's invariant values (output offsets, masks) are computed after the
// loop instead of holding registers across it.
func (l *lowerer) analyze() error {
	k := l.k
	l.axes = analysis.Axes(k, l.opt.Spec)
	l.users = map[int][]*tile.Value{}
	for id, us := range analysis.Users(k) {
		if len(us) > 0 {
			l.users[id] = us
		}
	}
	l.inv = analysis.Invariant(k, analysis.Program, func(v *tile.Value) bool {
		switch v.Op {
		case tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin, tile.OpDot:
			return true // emitted in program order
		}
		return false
	})
	l.loops = k.Count(tile.OpFor)
	hasLoop := l.loops > 0
	needs := analysis.LoopNeeds(k)
	l.invAll = slices.Clone(l.inv)
	for i := range l.inv {
		l.inv[i] = l.inv[i] && (!hasLoop || needs[i])
	}
	return nil
}

// axesDump is the analysis stage's result: each value's axis information
// along its last dimension, and whether it is computed in the prologue.
func (l *lowerer) axesDump() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "// @%s: contig, div, const along the last dimension; invariant values go to the prologue\n", l.k.Name)
	l.k.Walk(func(v *tile.Value) {
		if v.Type.DType == tile.Void {
			return
		}
		line := v.String()
		if i := strings.Index(line, "\n"); i >= 0 {
			line = line[:i] + " ..."
		}
		a := l.axes[v.ID]
		inv := ""
		if l.inv[v.ID] {
			inv = " invariant"
		}
		fmt.Fprintf(&sb, "%s\n    // contig=%d div=%d const=%d%s\n", line, a.Contig, a.Div, a.Const, inv)
	})
	return sb.String()
}

// ---- registers, labels, emission ----

var regDecl = map[string]string{"p": ".pred", "h": ".b16", "r": ".b32", "rd": ".b64", "f": ".f32", "fd": ".f64"}

func regClass(t tile.Type) string {
	if t.Ptr {
		return "rd"
	}
	switch t.DType {
	case tile.I1:
		return "p"
	case tile.I32:
		return "r"
	case tile.I64:
		return "rd"
	case tile.F32:
		return "f"
	case tile.F64:
		return "fd"
	}
	return "r"
}

func (l *lowerer) reg(class string) string {
	l.nreg[class]++
	return fmt.Sprintf("%%%s%d", class, l.nreg[class])
}

func (l *lowerer) label(what string) string {
	l.nlabel++
	return fmt.Sprintf("$L_%s_%d", what, l.nlabel)
}

// out is where v's code goes: the prologue for kernel-invariant values.
func (l *lowerer) out(v *tile.Value) *strings.Builder {
	if v != nil && l.inPrologue(v) {
		return &l.pro
	}
	return &l.body
}

// inPrologue reports whether v, kernel-invariant, goes to the prologue
// where it is emitted now. With the meta-parameter epi_late (1 or 2; not
// in a warp-specialised kernel, whose setmaxnreg split is sized on the
// registers the launch gives, which ptxas lowers where fewer are live)
// not once every loop of the kernel has been emitted, so that what only
// the epilogue asks for (a loop's mask in the epilogue's layout: the rows
// of an odd M, 16 predicates a thread at 128×128) is computed after the
// loops, not held across them.
func (l *lowerer) inPrologue(v *tile.Value) bool {
	if v.ID >= len(l.inv) || !l.inv[v.ID] {
		return false
	}
	return l.epiLate == 0 || l.wsKernel || l.loops == 0 || l.loopsDone < l.loops
}

// loopDone counts loop f as emitted. With epi_late = 1, after the
// kernel's last loop it asks, in the layouts their stores take, for the
// invariant pointers and masks of the stores of the kernel's top-level
// block that come after f (not a store with late loads, whose pointers
// and masks are computed slot by slot; invariant values read no load,
// reduction or loop result, which are emitted in program order), so that
// they are computed there, before the epilogue's other work, as they were
// in the prologue; with
// epi_late = 2 they are computed where the stores ask for them. On the
// H200 (2026-12-04, r25n) masks asked for only at the stores let ptxas
// reorder a warp's stores by mask, a column of the tile at a time instead
// of a row at a time (4096×4097×32 33.4 → 24.4 TFLOP/s; 34.3 with
// epi_late = 1), while asking for them whole before the epilogue holds
// them across it (4095×4097×32 30.4 → 25.9; 33.0 with epi_late = 2).
func (l *lowerer) loopDone(f *tile.Value) error {
	l.loopsDone++
	if l.loopsDone != l.loops || l.wsKernel || l.epiLate != 1 {
		return nil
	}
	vals := l.k.Body.Values
	i := slices.Index(vals, f)
	if i < 0 {
		return nil
	}
	for _, st := range vals[i+1:] {
		if st.Op != tile.OpStore || st == l.lateStore {
			continue
		}
		lay := l.plan.access[st.ID]
		for j, a := range st.Args {
			if j == 1 || !l.invAll[a.ID] {
				continue
			}
			if _, err := l.demand(a, lay); err != nil {
				return err
			}
		}
	}
	return nil
}

func emit(w *strings.Builder, format string, args ...any) {
	w.WriteString("\t")
	fmt.Fprintf(w, format, args...)
	w.WriteString(";\n")
}

// ---- memo scopes ----

func layKey(lay *Layout) string {
	if lay == nil {
		return "scalar"
	}
	return lay.String()
}

func (l *lowerer) lookup(v *tile.Value, lay *Layout) *lval {
	key := fmt.Sprintf("%d|%s", v.ID, layKey(lay))
	for i := len(l.memo) - 1; i >= 0; i-- {
		if x, ok := l.memo[i][key]; ok {
			return x
		}
	}
	return nil
}

func (l *lowerer) remember(v *tile.Value, x *lval) {
	key := fmt.Sprintf("%d|%s", v.ID, layKey(x.lay))
	scope := l.memo[len(l.memo)-1]
	if l.inPrologue(v) {
		scope = l.memo[0]
	}
	scope[key] = x
	l.laidOut[v.ID] = append(l.laidOut[v.ID], layKey(x.lay))
}

// ---- layouts ----

func (l *lowerer) intern(b *Blocked) *Blocked {
	if x, ok := l.blocked[b.key()]; ok {
		return x
	}
	l.blocked[b.key()] = b
	if err := b.tilesExactly(); err != nil && l.layoutErr == nil {
		l.layoutErr = err
	}
	return b
}

// canonical is the layout chosen for a value of shape s with no natural one.
func (l *lowerer) canonical(s tile.Shape) *Layout {
	if s.IsScalar() {
		return nil
	}
	lay := plain(l.intern(newBlocked(s.Slice(), l.opt.NumWarps, 4)))
	return &lay
}

// classesOf groups the slots of lay by class (slots holding the same element).
func (l *lowerer) classesOf(lay *Layout) [][]int {
	if lay == nil {
		return [][]int{{0}}
	}
	key := lay.String()
	if c, ok := l.classes[key]; ok {
		return c
	}
	idx := map[string]int{}
	var out [][]int
	for i, s := range lay.B.slots() {
		k := lay.classKey(s)
		j, ok := idx[k]
		if !ok {
			j = len(out)
			idx[k] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], i)
	}
	l.classes[key] = out
	return out
}

func nslots(lay *Layout) int {
	if lay == nil {
		return 1
	}
	return len(lay.B.slots())
}

// natural is the layout a value is best computed in, derived forward from
// the anchors it depends on; nil when it has none (it adapts to consumers).
func (l *lowerer) naturalOf(v *tile.Value) *Layout {
	if v.Type.Shape.IsScalar() {
		return nil
	}
	if lay, ok := l.natural[v.ID]; ok {
		return lay
	}
	var lay *Layout
	switch {
	case v.Op == tile.OpBroadcast:
		if in := l.naturalOf(v.Args[0]); in != nil {
			lay = broadcastLayout(in, v.Args[0].Type.Shape, v.Type.Shape)
		}
	case v.Op == tile.OpExpandDims:
		if in := l.naturalOf(v.Args[0]); in != nil {
			src := append([]int(nil), in.Src[:v.Aux]...)
			src = append(append(src, -1), in.Src[v.Aux:]...)
			lay = &Layout{B: in.B, Src: src}
		}
	case v.Op == tile.OpTrans:
		if in := l.naturalOf(v.Args[0]); in != nil {
			lay = &Layout{B: in.B, Src: []int{in.Src[1], in.Src[0]}}
		}
	case v.Op.IsElementwise() || v.Op == tile.OpAddPtr:
		for _, a := range v.Args {
			if n := l.naturalOf(a); n != nil {
				lay = n
				break
			}
		}
	}
	l.natural[v.ID] = lay
	return lay
}

// layoutOf is the layout v is best used in: its natural layout, else the
// canonical one for its shape (nil for scalars).
func (l *lowerer) layoutOf(v *tile.Value) *Layout {
	if v.Type.Shape.IsScalar() {
		return nil
	}
	if lay := l.naturalOf(v); lay != nil {
		return lay
	}
	return l.canonical(v.Type.Shape)
}

// broadcastLayout finds, for a value of shape out broadcast from in held in
// layout lay, the layout that makes the broadcast free: each broadcast
// dimension takes an unused dimension of lay's blocked shape of its size.
func broadcastLayout(lay *Layout, in, out tile.Shape) *Layout {
	src := append([]int(nil), lay.Src...)
	used := map[int]bool{}
	for _, s := range src {
		if s >= 0 {
			used[s] = true
		}
	}
	for i := 0; i < out.Rank; i++ {
		if in.Dims[i] == out.Dims[i] {
			continue
		}
		found := -1
		for d, n := range lay.B.Shape {
			if !used[d] && n == out.Dims[i] {
				found = d
				break
			}
		}
		if found < 0 {
			return nil
		}
		src[i] = found
		used[found] = true
	}
	return &Layout{B: lay.B, Src: src}
}

// inputLayout is the layout an operand of shape in must have so that a
// broadcast to a value held in out is free.
func inputLayout(out *Layout, in tile.Shape) *Layout {
	src := make([]int, len(out.Src))
	for i, s := range out.Src {
		if in.Dims[i] == 1 {
			src[i] = -1
		} else {
			src[i] = s
		}
	}
	return &Layout{B: out.B, Src: src}
}

// ---- thread geometry ----

func (l *lowerer) geo(key string, make func(w *strings.Builder) string) string {
	if r, ok := l.geometry[key]; ok {
		return r
	}
	r := make(&l.pro)
	l.geometry[key] = r
	return r
}

func (l *lowerer) tid() string {
	return l.geo("tid", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "mov.u32 %s, %%tid.x", r)
		return r
	})
}

func (l *lowerer) laneID() string {
	return l.geo("lane", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "and.b32 %s, %s, 31", r, l.tid())
		return r
	})
}

func (l *lowerer) warpID() string {
	return l.geo("warp", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, 5", r, l.tid())
		return r
	})
}

// laneAlong and warpAlong are the thread's lane and warp index along d.
func (l *lowerer) laneAlong(b *Blocked, d int) string {
	return l.geo(fmt.Sprintf("lane|%s|%d", b.key(), d), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, %d", r, l.laneID(), b.laneShift(d))
		emit(w, "and.b32 %s, %s, %d", r, r, b.TPW[d]-1)
		return r
	})
}

func (l *lowerer) warpAlong(b *Blocked, d int) string {
	return l.geo(fmt.Sprintf("warp|%s|%d", b.key(), d), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "shr.u32 %s, %s, %d", r, l.warpID(), b.warpShift(d))
		emit(w, "and.b32 %s, %s, %d", r, r, b.WPC[d]-1)
		return r
	})
}

// base is the thread's unwrapped coordinate of slot offset 0 along d.
func (l *lowerer) base(b *Blocked, d int) string {
	return l.geo(fmt.Sprintf("base|%s|%d", b.key(), d), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "mul.lo.s32 %s, %s, %d", r, l.warpAlong(b, d), b.warpTile(d))
		t := l.reg("r")
		emit(w, "mul.lo.s32 %s, %s, %d", t, l.laneAlong(b, d), b.SPT[d])
		emit(w, "add.s32 %s, %s, %s", r, r, t)
		return r
	})
}

// coord is the coordinate along d of slot offset off (wrapped).
func (l *lowerer) coord(b *Blocked, d, off int) string {
	return l.geo(fmt.Sprintf("coord|%s|%d|%d", b.key(), d, off), func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "add.s32 %s, %s, %d", r, l.base(b, d), off)
		if b.wraps(d) {
			emit(w, "and.b32 %s, %s, %d", r, r, b.Shape[d]-1)
		}
		return r
	})
}

// valueCoord is the coordinate of value dimension i at slot s of lay ("0"
// for a dimension of size 1).
func (l *lowerer) valueCoord(lay *Layout, s slot, i int) string {
	d := lay.Src[i]
	if d < 0 {
		return "0"
	}
	return l.coord(lay.B, d, s.Off[d])
}

// flatIndex is the row-major element index of slot s of a value of shape sh
// in layout lay, as an i32 register (or constant).
func (l *lowerer) flatIndex(lay *Layout, sh tile.Shape, s slot) string {
	key := fmt.Sprintf("flat|%s|%v|%v", lay, sh, s.Off)
	return l.geo(key, func(w *strings.Builder) string {
		acc := ""
		stride := 1
		for i := sh.Rank - 1; i >= 0; i-- {
			c := l.valueCoord(lay, s, i)
			if c != "0" {
				t := l.reg("r")
				emit(w, "mul.lo.s32 %s, %s, %d", t, c, stride)
				if acc == "" {
					acc = t
				} else {
					emit(w, "add.s32 %s, %s, %s", t, t, acc)
					acc = t
				}
			}
			stride *= sh.Dims[i]
		}
		if acc == "" {
			r := l.reg("r")
			emit(w, "mov.u32 %s, 0", r)
			return r
		}
		return acc
	})
}

// pitchedIndex is flatIndex of a 2-D value whose rows are pitch elements
// apart (0: the value's own row length).
func (l *lowerer) pitchedIndex(lay *Layout, sh tile.Shape, s slot, pitch int) string {
	if pitch == 0 || sh.Rank != 2 {
		return l.flatIndex(lay, sh, s)
	}
	key := fmt.Sprintf("pitched|%s|%v|%v|%d", lay, sh, s.Off, pitch)
	return l.geo(key, func(w *strings.Builder) string {
		r, c := l.valueCoord(lay, s, 0), l.valueCoord(lay, s, 1)
		t := l.reg("r")
		switch {
		case r == "0" && c == "0":
			emit(w, "mov.u32 %s, 0", t)
		case r == "0":
			emit(w, "mov.u32 %s, %s", t, c)
		case c == "0":
			emit(w, "mul.lo.s32 %s, %s, %d", t, r, pitch)
		default:
			emit(w, "mad.lo.s32 %s, %s, %d, %s", t, r, pitch, c)
		}
		return t
	})
}

// laneDim is the dimension of a value that consecutive lanes of a warp
// walk in layout lay (its blocked layout's last dimension with more than
// one lane), or -1 where no lane varies along one the value has.
func laneDim(lay *Layout) int {
	if lay == nil {
		return -1
	}
	for d := lay.B.rank() - 1; d >= 0; d-- {
		if lay.B.TPW[d] > 1 && lay.B.Shape[d] > lay.B.SPT[d] {
			for i, s := range lay.Src {
				if s == d {
					return i
				}
			}
			return -1
		}
	}
	return -1
}

// owner is a predicate register true where this thread holds the canonical
// copy of slot s's element (so that replicated values are stored or added
// once), or "" when every copy is canonical.
func (l *lowerer) owner(lay *Layout, s slot) (pred string, never bool) {
	if lay == nil {
		p := l.geo("owner|scalar", func(w *strings.Builder) string {
			p := l.reg("p")
			emit(w, "setp.eq.u32 %s, %s, 0", p, l.tid())
			return p
		})
		return p, false
	}
	b := lay.B
	var conds []string
	for d := range b.Shape {
		switch {
		case !lay.uses(d):
			if s.Off[d] != 0 {
				return "", true
			}
			if b.TPW[d]*b.WPC[d] > 1 {
				conds = append(conds, fmt.Sprintf("eq|%d", d))
			}
		case b.wraps(d):
			conds = append(conds, fmt.Sprintf("lt|%d|%d", d, s.Off[d]))
		}
	}
	if len(conds) == 0 {
		return "", false
	}
	key := fmt.Sprintf("owner|%s|%v", b.key(), conds)
	return l.geo(key, func(w *strings.Builder) string {
		acc := ""
		for _, c := range conds {
			var d, off int
			p := l.reg("p")
			if strings.HasPrefix(c, "eq|") {
				fmt.Sscanf(c, "eq|%d", &d)
				emit(w, "setp.eq.s32 %s, %s, 0", p, l.base(b, d))
			} else {
				fmt.Sscanf(c, "lt|%d|%d", &d, &off)
				t := l.reg("r")
				emit(w, "add.s32 %s, %s, %d", t, l.base(b, d), off)
				emit(w, "setp.lt.s32 %s, %s, %d", p, t, b.Shape[d])
			}
			if acc == "" {
				acc = p
			} else {
				emit(w, "and.pred %s, %s, %s", p, p, acc)
				acc = p
			}
		}
		return acc
	}), false
}

// ---- shared memory ----

// Shared memory holds, first, one region per reduction (so that a
// reduction needs one barrier, between its writes and its reads) and then a
// scratch region reused by conversions and dots, which fence it with
// barriers before and after. The scratch offset is known only at the end:
// its uses read the register that scratchAddr sets from a placeholder.

const scratchPlaceholder = "{{SCRATCH_OFFSET}}"

func (l *lowerer) needSmem(bytes int) {
	l.smem = max(l.smem, bytes)
}

// ownRegion reserves bytes for one reduction and returns its offset.
func (l *lowerer) ownRegion(bytes int) int {
	off := l.ownSmem
	l.ownSmem += (bytes + 15) &^ 15
	return off
}

func (l *lowerer) baseAddr() string {
	return l.geo("smembase", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "mov.u32 %s, smem", r)
		return r
	})
}

// smemAddr is the shared address of the scratch region.
func (l *lowerer) smemAddr() string {
	return l.geo("smem", func(w *strings.Builder) string {
		r := l.reg("r")
		emit(w, "add.u32 %s, %s, %s", r, l.baseAddr(), scratchPlaceholder)
		return r
	})
}

// totalSmem is the dynamic shared memory a launch needs.
func (l *lowerer) totalSmem() int {
	if l.smem == 0 {
		return l.ownSmem
	}
	return l.scratchOffset() + l.smem
}

// scratchOffset is where the scratch region starts: after the reductions'
// regions, aligned.
func (l *lowerer) scratchOffset() int {
	a := max(16, l.scratchAlign)
	return (l.ownSmem + a - 1) / a * a
}

// smemSlot returns a register with the shared address smem + off + idx*size.
func (l *lowerer) smemSlot(w *strings.Builder, idx string, size, off int) string {
	a := l.reg("r")
	if idx == "0" {
		emit(w, "add.s32 %s, %s, %d", a, l.smemAddr(), off)
		return a
	}
	emit(w, "mad.lo.s32 %s, %s, %d, %s", a, idx, size, l.smemAddr())
	if off != 0 {
		emit(w, "add.s32 %s, %s, %d", a, a, off)
	}
	return a
}

// barrier synchronises the CTA's threads: every thread (bar.sync 0), or,
// after a warp-specialised loop whose producer warps have exited
// (wsLoop), its consumer threads only: named barrier 1 with their count.
func (l *lowerer) barrier(w *strings.Builder) {
	if l.barThreads > 0 {
		emit(w, "bar.sync 1, %d", l.barThreads)
		return
	}
	emit(w, "bar.sync 0")
}

// memType is the PTX type of t's elements in memory and for moves.
func memType(t tile.Type) string {
	if t.Ptr {
		return "u64"
	}
	switch t.DType {
	case tile.I32:
		return "b32"
	case tile.I64:
		return "b64"
	case tile.F32:
		return "f32"
	case tile.F64:
		return "f64"
	case tile.I1:
		return "u8"
	}
	return "b32"
}

func elemBytes(t tile.Type) int {
	if t.Ptr {
		return 8
	}
	if t.DType == tile.I1 {
		return 1
	}
	return t.DType.Size()
}

// convert moves x (a value of type xt held in x.lay) into layout to of a
// value of shape toShape with the same elements in row-major order, through
// shared memory.
//
// Where a 2-D value changes the dimension its lanes run along (a
// transpose: written by lanes along one dimension, read by lanes along
// the other), its rows are one element longer in shared memory than in
// the value, so that a warp's reads of one column fall in different
// banks (a row of 64 words unpadded puts a column in one bank: 32-way
// conflicts; TestTransposeThroughSmem). Rows of an odd length already
// put a column's words in 32 banks.
func (l *lowerer) convert(x *lval, xt tile.Type, to *Layout, toShape tile.Shape) *lval {
	w := &l.body
	size := elemBytes(xt)
	pitch := 0 // the row length in shared memory: the value's own, or padded
	if xt.Shape.Rank == 2 && toShape.Rank == 2 && xt.Shape.Dims == toShape.Dims && xt.Shape.Dims[1]%2 == 0 && laneDim(x.lay) != laneDim(to) {
		pitch = xt.Shape.Dims[1] + 1
	}
	if pitch > 0 {
		l.needSmem(xt.Shape.Dims[0] * pitch * size)
	} else {
		l.needSmem(xt.Shape.Numel() * size)
	}
	l.barrier(w)
	slots := x.lay.B.slots()
	for _, cls := range l.classesOf(x.lay) {
		s := slots[cls[0]]
		a := l.smemSlot(w, l.pitchedIndex(x.lay, xt.Shape, s, pitch), size, 0)
		l.stShared(w, xt, a, x.regs[cls[0]])
	}
	l.barrier(w)
	out := &lval{lay: to, regs: make([]string, nslots(to))}
	tslots := to.B.slots()
	for _, cls := range l.classesOf(to) {
		s := tslots[cls[0]]
		a := l.smemSlot(w, l.pitchedIndex(to, toShape, s, pitch), size, 0)
		r := l.ldShared(w, xt, a)
		for _, i := range cls {
			out.regs[i] = r
		}
	}
	l.barrier(w)
	return out
}

func (l *lowerer) stShared(w *strings.Builder, t tile.Type, addr, r string) {
	if t.DType == tile.I1 && !t.Ptr {
		b := l.reg("r")
		emit(w, "selp.u32 %s, 1, 0, %s", b, r)
		emit(w, "st.shared.u8 [%s], %s", addr, b)
		return
	}
	emit(w, "st.shared.%s [%s], %s", memType(t), addr, r)
}

func (l *lowerer) ldShared(w *strings.Builder, t tile.Type, addr string) string {
	if t.DType == tile.I1 && !t.Ptr {
		b, p := l.reg("r"), l.reg("p")
		emit(w, "ld.shared.u8 %s, [%s]", b, addr)
		emit(w, "setp.ne.u32 %s, %s, 0", p, b)
		return p
	}
	r := l.reg(regClass(t))
	emit(w, "ld.shared.%s %s, [%s]", memType(t), r, addr)
	return r
}

// ---- demand ----

// demand returns v held in layout lay (nil for scalars), emitting it if needed.
func (l *lowerer) demand(v *tile.Value, lay *Layout) (*lval, error) {
	if v.Type.Shape.IsScalar() {
		lay = nil
	} else if lay == nil {
		return nil, fmt.Errorf("a block value %v was asked for without a layout", v.Type)
	}
	if x := l.lookup(v, lay); x != nil {
		return x, nil
	}
	if isAnchor(v) {
		nat := l.natural[v.ID]
		x := l.lookup(v, nat)
		if x == nil {
			if ok, err := l.lateWhole(v); err != nil {
				return nil, err
			} else if ok {
				x = l.lookup(v, nat)
			}
		}
		if x == nil {
			return nil, fmt.Errorf("internal: %%%d used before it was emitted", v.ID)
		}
		if layKey(x.lay) == layKey(lay) { // a late load just emitted (lateWhole)
			return x, nil
		}
		y := l.rename(x, lay, v.Type.Shape)
		if y == nil {
			y = l.convert(x, v.Type, lay, v.Type.Shape)
		}
		l.remember(v, y)
		return y, nil
	}
	x, err := l.compute(v, lay)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", v, err)
	}
	l.remember(v, x)
	return x, nil
}

func isAnchor(v *tile.Value) bool {
	switch v.Op {
	case tile.OpLoad, tile.OpAtomicAdd, tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin,
		tile.OpDot, tile.OpForResult, tile.OpBlockArg:
		return true
	}
	return false
}

// perClass computes one register per class with f and fills every slot.
// Given operands, classes whose operands are held in the same registers
// share one result (a value computed from broadcast operands is computed
// once per distinct element, not once per slot).
func (l *lowerer) perClass(lay *Layout, f func(i int) (string, error), operands ...*lval) (*lval, error) {
	x := &lval{lay: lay, regs: make([]string, nslots(lay))}
	done := map[string]string{}
	for _, cls := range l.classesOf(lay) {
		key := ""
		if len(operands) > 0 {
			var sb strings.Builder
			for _, o := range operands {
				sb.WriteString(o.regs[cls[0]])
				sb.WriteByte(',')
			}
			key = sb.String()
		}
		r, ok := done[key]
		if !ok || key == "" {
			var err error
			if r, err = f(cls[0]); err != nil {
				return nil, err
			}
			if key != "" {
				done[key] = r
			}
		}
		for _, i := range cls {
			x.regs[i] = r
		}
	}
	return x, nil
}

// compute emits a non-anchor value in layout lay.
func (l *lowerer) compute(v *tile.Value, lay *Layout) (*lval, error) {
	w := l.out(v)
	switch v.Op {
	case tile.OpParam, tile.OpConst, tile.OpProgramID, tile.OpNumPrograms:
		return l.source(v, w)
	case tile.OpArange:
		slots := lay.B.slots()
		return l.perClass(lay, func(i int) (string, error) {
			c := l.valueCoord(lay, slots[i], 0)
			r := l.reg("r")
			emit(w, "add.s32 %s, %s, %d", r, c, v.Aux)
			return r, nil
		})
	case tile.OpSplat:
		s, err := l.demand(v.Args[0], nil)
		if err != nil {
			return nil, err
		}
		return l.perClass(lay, func(int) (string, error) { return s.regs[0], nil })
	case tile.OpBroadcast:
		in, err := l.demand(v.Args[0], inputLayout(lay, v.Args[0].Type.Shape))
		if err != nil {
			return nil, err
		}
		return &lval{lay: lay, regs: in.regs}, nil
	case tile.OpExpandDims:
		src := append(append([]int(nil), lay.Src[:v.Aux]...), lay.Src[v.Aux+1:]...)
		in, err := l.demand(v.Args[0], &Layout{B: lay.B, Src: src})
		if err != nil {
			return nil, err
		}
		return &lval{lay: lay, regs: in.regs}, nil
	case tile.OpTrans:
		in, err := l.demand(v.Args[0], &Layout{B: lay.B, Src: []int{lay.Src[1], lay.Src[0]}})
		if err != nil {
			return nil, err
		}
		return &lval{lay: lay, regs: in.regs}, nil
	case tile.OpReshape:
		return l.reshape(v, lay)
	case tile.OpAddPtr:
		return l.addPtr(v, lay, w)
	case tile.OpSelect:
		args, err := l.demandAll(v.Args, lay)
		if err != nil {
			return nil, err
		}
		return l.perClass(lay, func(i int) (string, error) {
			r := l.reg(regClass(v.Type))
			if v.Type.DType == tile.I1 {
				// d = (c && a) || (!c && b)
				t := l.reg("p")
				emit(w, "and.pred %s, %s, %s", r, args[0].regs[i], args[1].regs[i])
				emit(w, "not.pred %s, %s", t, args[0].regs[i])
				emit(w, "and.pred %s, %s, %s", t, t, args[2].regs[i])
				emit(w, "or.pred %s, %s, %s", r, r, t)
				return r, nil
			}
			emit(w, "selp.%s %s, %s, %s, %s", selType(v.Type), r, args[1].regs[i], args[2].regs[i], args[0].regs[i])
			return r, nil
		}, args...)
	case tile.OpCast:
		a, err := l.demand(v.Args[0], lay)
		if err != nil {
			return nil, err
		}
		return l.perClass(lay, func(i int) (string, error) { return l.cast(w, v.Args[0].Type.DType, v.Type.DType, a.regs[i]), nil }, a)
	}
	switch {
	case v.Op.IsBinary() || v.Op.IsCompare():
		args, err := l.demandAll(v.Args, lay)
		if err != nil {
			return nil, err
		}
		return l.perClass(lay, func(i int) (string, error) {
			return l.binary(w, v.Op, v.Args[0].Type.DType, args[0].regs[i], args[1].regs[i])
		}, args...)
	case v.Op.IsUnary():
		a, err := l.demand(v.Args[0], lay)
		if err != nil {
			return nil, err
		}
		return l.perClass(lay, func(i int) (string, error) { return l.unaryOf(w, v, a.regs[i]) }, a)
	}
	return nil, fmt.Errorf("codegen has no rule for %v", v.Op)
}

func (l *lowerer) demandAll(vs []*tile.Value, lay *Layout) ([]*lval, error) {
	out := make([]*lval, len(vs))
	for i, a := range vs {
		x, err := l.demand(a, lay)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

func selType(t tile.Type) string {
	if t.Ptr {
		return "b64"
	}
	switch t.DType {
	case tile.I32:
		return "b32"
	case tile.I64:
		return "b64"
	case tile.F32:
		return "f32"
	case tile.F64:
		return "f64"
	}
	return "b32"
}

// source emits a parameter, constant or program id (scalars, prologue).
func (l *lowerer) source(v *tile.Value, w *strings.Builder) (*lval, error) {
	w = &l.pro
	r := l.reg(regClass(v.Type))
	switch v.Op {
	case tile.OpParam:
		if v.Type.Ptr {
			t := l.reg("rd")
			emit(w, "ld.param.u64 %s, [%s]", t, paramName(v))
			emit(w, "cvta.to.global.u64 %s, %s", r, t)
		} else if v.Type.DType == tile.I1 {
			t := l.reg("r")
			emit(w, "ld.param.u32 %s, [%s]", t, paramName(v))
			emit(w, "setp.ne.u32 %s, %s, 0", r, t)
		} else {
			emit(w, "ld.param.%s %s, [%s]", paramType(v.Type), r, paramName(v))
		}
	case tile.OpConst:
		switch v.Type.DType {
		case tile.I1:
			emit(w, "setp.ne.u32 %s, %d, 0", r, v.Aux)
		case tile.I32:
			emit(w, "mov.u32 %s, %d", r, uint32(int32(v.Aux)))
		case tile.I64:
			emit(w, "mov.u64 %s, %d", r, uint64(v.Aux))
		case tile.F32:
			emit(w, "mov.f32 %s, %s", r, f32Lit(v.AuxF))
		case tile.F64:
			emit(w, "mov.f64 %s, %s", r, f64Lit(v.AuxF))
		}
	case tile.OpProgramID:
		emit(w, "mov.u32 %s, %%ctaid.%s", r, "xyz"[v.Aux:v.Aux+1])
	case tile.OpNumPrograms:
		emit(w, "mov.u32 %s, %%nctaid.%s", r, "xyz"[v.Aux:v.Aux+1])
	}
	return &lval{regs: []string{r}}, nil
}

func paramName(v *tile.Value) string { return "param_" + v.Name }

func paramType(t tile.Type) string {
	if t.Ptr {
		return "u64"
	}
	switch t.DType {
	case tile.I32, tile.I1:
		return "u32"
	case tile.I64:
		return "u64"
	case tile.F32:
		return "f32"
	case tile.F64:
		return "f64"
	}
	return "u32"
}

func (l *lowerer) addPtr(v *tile.Value, lay *Layout, w *strings.Builder) (*lval, error) {
	args, err := l.demandAll(v.Args, lay)
	if err != nil {
		return nil, err
	}
	size := v.Type.DType.Size()
	return l.perClass(lay, func(i int) (string, error) {
		t, r := l.reg("rd"), l.reg("rd")
		if v.Args[1].Type.DType == tile.I32 {
			emit(w, "mul.wide.s32 %s, %s, %d", t, args[1].regs[i], size)
		} else {
			emit(w, "mul.lo.s64 %s, %s, %d", t, args[1].regs[i], size)
		}
		emit(w, "add.s64 %s, %s, %s", r, args[0].regs[i], t)
		return r, nil
	}, args...)
}

// reshape is free when it only adds or removes dimensions of size 1;
// otherwise it goes through shared memory.
func (l *lowerer) reshape(v *tile.Value, lay *Layout) (*lval, error) {
	in, out := v.Args[0].Type.Shape, v.Type.Shape
	var inNon, outNon []int
	for i := 0; i < in.Rank; i++ {
		if in.Dims[i] != 1 {
			inNon = append(inNon, i)
		}
	}
	for i := 0; i < out.Rank; i++ {
		if out.Dims[i] != 1 {
			outNon = append(outNon, i)
		}
	}
	same := len(inNon) == len(outNon)
	for j := 0; same && j < len(inNon); j++ {
		same = in.Dims[inNon[j]] == out.Dims[outNon[j]]
	}
	if same {
		src := make([]int, in.Rank)
		for i := range src {
			src[i] = -1
		}
		for j := range inNon {
			src[inNon[j]] = lay.Src[outNon[j]]
		}
		x, err := l.demand(v.Args[0], &Layout{B: lay.B, Src: src})
		if err != nil {
			return nil, err
		}
		return &lval{lay: lay, regs: x.regs}, nil
	}
	x, err := l.demand(v.Args[0], l.layoutOf(v.Args[0]))
	if err != nil {
		return nil, err
	}
	return l.convert(x, v.Args[0].Type, lay, out), nil
}

// ---- elementwise instructions ----

func ptxInt(d tile.DType) string {
	if d == tile.I64 {
		return "s64"
	}
	return "s32"
}

func ptxFloat(d tile.DType) string {
	if d == tile.F64 {
		return "f64"
	}
	return "f32"
}

func (l *lowerer) binary(w *strings.Builder, op tile.Op, d tile.DType, a, b string) (string, error) {
	if op.IsCompare() {
		p := l.reg("p")
		var cmp string
		switch op {
		case tile.OpEq:
			cmp = "eq"
		case tile.OpNe:
			cmp = "ne"
			if d.IsFloat() {
				cmp = "neu" // true when either is NaN
			}
		case tile.OpLt:
			cmp = "lt"
		case tile.OpLe:
			cmp = "le"
		case tile.OpGt:
			cmp = "gt"
		case tile.OpGe:
			cmp = "ge"
		}
		switch {
		case d == tile.I1:
			t := l.reg("p")
			emit(w, "xor.pred %s, %s, %s", t, a, b)
			if op == tile.OpEq {
				emit(w, "not.pred %s, %s", p, t)
			} else {
				emit(w, "mov.pred %s, %s", p, t)
			}
		case d.IsFloat():
			emit(w, "setp.%s.%s %s, %s, %s", cmp, ptxFloat(d), p, a, b)
		default:
			emit(w, "setp.%s.%s %s, %s, %s", cmp, ptxInt(d), p, a, b)
		}
		return p, nil
	}
	r := l.reg(regClass(tile.ScalarOf(d)))
	if d == tile.I1 {
		switch op {
		case tile.OpAnd:
			emit(w, "and.pred %s, %s, %s", r, a, b)
		case tile.OpOr:
			emit(w, "or.pred %s, %s, %s", r, a, b)
		case tile.OpXor:
			emit(w, "xor.pred %s, %s, %s", r, a, b)
		default:
			return "", fmt.Errorf("%v on i1", op)
		}
		return r, nil
	}
	if d.IsInt() {
		t := ptxInt(d)
		bits := "b32"
		if d == tile.I64 {
			bits = "b64"
		}
		switch op {
		case tile.OpAdd:
			emit(w, "add.%s %s, %s, %s", t, r, a, b)
		case tile.OpSub:
			emit(w, "sub.%s %s, %s, %s", t, r, a, b)
		case tile.OpMul:
			emit(w, "mul.lo.%s %s, %s, %s", t, r, a, b)
		case tile.OpDiv:
			emit(w, "div.%s %s, %s, %s", t, r, a, b)
		case tile.OpRem:
			emit(w, "rem.%s %s, %s, %s", t, r, a, b)
		case tile.OpMin:
			emit(w, "min.%s %s, %s, %s", t, r, a, b)
		case tile.OpMax:
			emit(w, "max.%s %s, %s, %s", t, r, a, b)
		case tile.OpAnd:
			emit(w, "and.%s %s, %s, %s", bits, r, a, b)
		case tile.OpOr:
			emit(w, "or.%s %s, %s, %s", bits, r, a, b)
		case tile.OpXor:
			emit(w, "xor.%s %s, %s, %s", bits, r, a, b)
		default:
			return "", fmt.Errorf("%v on %v", op, d)
		}
		return r, nil
	}
	t := ptxFloat(d)
	switch op {
	case tile.OpAdd:
		emit(w, "add.%s %s, %s, %s", t, r, a, b)
	case tile.OpSub:
		emit(w, "sub.%s %s, %s, %s", t, r, a, b)
	case tile.OpMul:
		emit(w, "mul.%s %s, %s, %s", t, r, a, b)
	case tile.OpDiv:
		emit(w, "div.rn.%s %s, %s, %s", t, r, a, b)
	case tile.OpMin, tile.OpMax:
		mm := "min"
		if op == tile.OpMax {
			mm = "max"
		}
		if d == tile.F32 {
			emit(w, "%s.NaN.f32 %s, %s, %s", mm, r, a, b)
		} else {
			nan, s := l.reg("p"), l.reg("fd")
			emit(w, "%s.f64 %s, %s, %s", mm, r, a, b)
			emit(w, "setp.nan.f64 %s, %s, %s", nan, a, b)
			emit(w, "add.f64 %s, %s, %s", s, a, b)
			emit(w, "selp.f64 %s, %s, %s, %s", r, s, r, nan)
		}
	case tile.OpRem:
		return l.frem(w, d, a, b)
	case tile.OpPow:
		return l.pow(w, d, a, b)
	default:
		return "", fmt.Errorf("%v on %v", op, d)
	}
	return r, nil
}

func (l *lowerer) cast(w *strings.Builder, from, to tile.DType, a string) string {
	r := l.reg(regClass(tile.ScalarOf(to)))
	switch {
	case from == tile.I1:
		switch to {
		case tile.I32:
			emit(w, "selp.u32 %s, 1, 0, %s", r, a)
		case tile.I64:
			emit(w, "selp.u64 %s, 1, 0, %s", r, a)
		case tile.F32:
			emit(w, "selp.f32 %s, 0f3F800000, 0f00000000, %s", r, a)
		case tile.F64:
			emit(w, "selp.f64 %s, 0d3FF0000000000000, 0d0000000000000000, %s", r, a)
		}
	case to == tile.I1:
		if from.IsFloat() {
			emit(w, "setp.neu.%s %s, %s, %s", ptxFloat(from), r, a, map[tile.DType]string{tile.F32: "0f00000000", tile.F64: "0d0000000000000000"}[from])
		} else {
			emit(w, "setp.ne.%s %s, %s, 0", ptxInt(from), r, a)
		}
	case from.IsFloat() && to.IsFloat():
		if to == tile.F64 {
			emit(w, "cvt.f64.f32 %s, %s", r, a)
		} else {
			emit(w, "cvt.rn.f32.f64 %s, %s", r, a)
		}
	case from.IsFloat():
		emit(w, "cvt.rzi.%s.%s %s, %s", ptxInt(to), ptxFloat(from), r, a)
	case to.IsFloat():
		emit(w, "cvt.rn.%s.%s %s, %s", ptxFloat(to), ptxInt(from), r, a)
	default:
		if to == tile.I64 {
			emit(w, "cvt.s64.s32 %s, %s", r, a)
		} else {
			emit(w, "cvt.u32.u64 %s, %s", r, a)
		}
	}
	return r
}

// ---- program order: anchors, stores, loops ----

func (l *lowerer) block(b *tile.Block) error {
	if b == l.k.Body || l.loopDepth == 1 && l.late == nil {
		l.planLate(b) // the kernel's, or a top-level loop's (a persistent row kernel)
	}
	done := map[*tile.Value]bool{}
	for i, v := range b.Values {
		if done[v] {
			continue
		}
		var err error
		switch v.Op {
		case tile.OpLoad:
			switch {
			case l.carry != nil && l.carry.byInit[v.ID] != nil: // copied by its loop
			case l.carry != nil && l.carry.byNext[v.ID] != nil:
				err = l.carryNext(l.carry.byNext[v.ID])
			case l.late[v.ID] == nil: // late loads: in the store (lateload.go)
				err = l.load(v)
			}
		case tile.OpStore, tile.OpAtomicAdd:
			if run := l.storeRun(b.Values[i:]); len(run) > 1 {
				for _, x := range run {
					done[x] = true
				}
				err = l.storeGroup(run)
				break
			}
			err = l.store(v)
		case tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin:
			err = l.reduce(v)
		case tile.OpDot:
			err = l.dot(v)
		case tile.OpFor:
			if p, ok := l.pipes[v.ID]; ok {
				err = l.pipelinedLoop(v, p) // counted in pipeResults
			} else if ml := l.mma().loops[v.ID]; ml != nil {
				err = l.mmaLoopEmit(v, ml)
				l.loopsDone++
			} else {
				err = l.forLoop(v)
				l.loopsDone++
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
	}
	return nil
}

// vecWidth is how many consecutive slots of a plain layout one access may
// cover: bounded by the run each thread holds, the pointer's contiguity and
// alignment, the mask's constancy and 16 bytes.
func (l *lowerer) vecWidth(lay *Layout, ptr, mask *tile.Value, size int) int {
	if lay == nil {
		return 1
	}
	last := len(lay.Src) - 1
	if lay.Src[last] != lay.B.rank()-1 || lay.B.wraps(last) {
		return 1
	}
	return l.accessWidth(ptr, mask, size, lay.B.SPT[last])
}

// accessWidth is the most consecutive elements of size bytes one access
// through ptr under mask (nil: none) may cover, at most most: a power of
// two up to 16 bytes that the pointer's contiguity and alignment and the
// mask's constancy along the last dimension allow.
func (l *lowerer) accessWidth(ptr, mask *tile.Value, size, most int) int {
	pi := l.axes[ptr.ID]
	v := min(most, pi.Contig, 16/size, max(1, pi.Div/size))
	if mask != nil {
		v = min(v, l.axes[mask.ID].Const)
	}
	w := 1
	for w*2 <= v {
		w *= 2
	}
	return w
}

func vecSuffix(n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(".v%d", n)
}

// dependsOn reports whether x is computed from v.
func dependsOn(x, v *tile.Value) bool {
	seen := map[*tile.Value]bool{}
	var walk func(y *tile.Value) bool
	walk = func(y *tile.Value) bool {
		if y == v {
			return true
		}
		if seen[y] {
			return false
		}
		seen[y] = true
		for _, a := range y.Args {
			if walk(a) {
				return true
			}
		}
		return false
	}
	return walk(x)
}

// consumerLayout is a layout for a load whose pointer has none: the one in
// which an elementwise consumer, directly or through a broadcast, meets an
// operand that has a natural layout (a bias row broadcast over a tile), so
// that no conversion is needed.
func (l *lowerer) consumerLayout(v *tile.Value) *Layout {
	try := func(through, e *tile.Value) *Layout {
		if !e.Op.IsElementwise() && e.Op != tile.OpAddPtr {
			return nil
		}
		for _, o := range e.Args {
			if o == through || dependsOn(o, v) {
				continue
			}
			if n := l.naturalOf(o); n != nil {
				return inputLayout(n, v.Type.Shape)
			}
		}
		return nil
	}
	for _, u := range l.users[v.ID] {
		if lay := try(v, u); lay != nil {
			return lay
		}
		if u.Op == tile.OpBroadcast {
			for _, e := range l.users[u.ID] {
				if lay := try(u, e); lay != nil {
					return lay
				}
			}
		}
	}
	return nil
}

func (l *lowerer) load(v *tile.Value) error {
	ptr := v.Args[0]
	lay := l.plan.access[v.ID]
	args, err := l.demandAll(v.Args, lay)
	if err != nil {
		return err
	}
	var mask *tile.Value
	if len(v.Args) > 1 {
		mask = v.Args[1]
	}
	w := &l.body
	t := v.Type
	vw := l.vecWidth(lay, ptr, mask, elemBytes(t))
	x := &lval{lay: lay, regs: make([]string, nslots(lay))}
	classes := l.classesOf(lay)
	loaded := map[string][]string{} // by the operands' registers: one load per distinct address
	for ci := 0; ci < len(classes); ci += vw {
		group := classes[ci : ci+vw]
		var key strings.Builder
		for _, cls := range group {
			for _, a := range args {
				key.WriteString(a.regs[cls[0]])
				key.WriteByte(',')
			}
		}
		if regs, ok := loaded[key.String()]; ok {
			for j, cls := range group {
				for _, i := range cls {
					x.regs[i] = regs[j]
				}
			}
			continue
		}
		regs := make([]string, vw)
		for j, cls := range group {
			regs[j] = l.reg(regClass(t))
			for _, i := range cls {
				x.regs[i] = regs[j]
			}
		}
		loaded[key.String()] = regs
		first := group[0][0]
		pred := ""
		if mask != nil {
			pred = args[1].regs[first]
			for j := range regs {
				if len(args) > 2 {
					emit(w, "mov.%s %s, %s", selType(t), regs[j], args[2].regs[group[j][0]])
				} else {
					emit(w, "mov.%s %s, %s", selType(t), regs[j], zeroLit(t.DType))
				}
			}
		}
		qual, hintArg := l.loadHint(v)
		emit(w, "%sld.global%s%s.%s %s, [%s]%s", guardOf(pred), qual, vecSuffix(vw), memType(t), vecOperand(regs), args[0].regs[first], hintArg)
	}
	l.remember(v, x)
	return nil
}

// guardOf is the predicate prefix of an instruction ("" for none).
func guardOf(pred string) string {
	if pred == "" {
		return ""
	}
	return "@" + pred + " "
}

// vecOperand is a register, or a {r0, r1, …} vector of them.
func vecOperand(regs []string) string {
	if len(regs) == 1 {
		return regs[0]
	}
	return "{" + strings.Join(regs, ", ") + "}"
}

// store lowers store and atomic_add: in the value's natural layout when it
// has one, so that nothing is converted; only the canonical copy of a
// replicated element is written.
func (l *lowerer) store(v *tile.Value) error {
	s, err := l.storePrep(v)
	if err != nil {
		return err
	}
	l.lating = v == l.lateStore
	defer func() { l.lating = false }()
	for ci := 0; ci < len(s.classes); ci += s.vw {
		if l.lating {
			if err := l.lateAheadOf(ci, s.vw); err != nil {
				return err
			}
		}
		if err := l.storeAt(s, ci); err != nil {
			return err
		}
	}
	if s.atomic {
		l.remember(v, s.old)
	}
	return nil
}

// storeEmit is a store (or atomic_add) being emitted group by group of
// vw classes of its layout.
type storeEmit struct {
	v        *tile.Value
	lay      *Layout
	args     []*lval
	mask     *tile.Value
	vw       int
	slots    []slot
	classes  [][]int
	atomic   bool
	slotwise bool  // operands asked for group by group (slotwise.go)
	old      *lval // atomic_add's result
	// ptr: the pointer as an affine block (nil: not known to be one), so
	// that a store addresses from an earlier store's register plus an
	// immediate offset where their slots' coordinates differ by constants
	// (bases, as asyncCopies' copies do)
	ptr   *affine
	bases copyBases
}

// storePrep demands store v's operands (all slots, or none yet where they
// are asked for slot by slot) and its access width.
func (l *lowerer) storePrep(v *tile.Value) (*storeEmit, error) {
	ptr, val := v.Args[0], v.Args[1]
	s := &storeEmit{v: v, lay: l.plan.access[v.ID], vw: 1, atomic: v.Op == tile.OpAtomicAdd}
	lay := s.lay
	s.slotwise = (l.slotwise(lay) || v == l.lateStore) && v.Op == tile.OpStore
	if s.slotwise {
		// filled slot by slot, as each group is stored
		s.args = make([]*lval, len(v.Args))
		for i := range s.args {
			s.args[i] = &lval{lay: lay, regs: make([]string, nslots(lay))}
		}
	} else {
		var err error
		if s.args, err = l.demandAll(v.Args, lay); err != nil {
			return nil, err
		}
	}
	if len(v.Args) > 2 {
		s.mask = v.Args[2]
	}
	if !s.atomic {
		s.vw = l.vecWidth(lay, ptr, s.mask, elemBytes(val.Type))
	}
	if lay != nil {
		s.slots = lay.B.slots()
	}
	if s.atomic {
		s.old = &lval{lay: lay, regs: make([]string, nslots(lay))}
	} else if lay != nil && !l.perSlotAddr() {
		s.ptr = l.affineOf(ptr, map[*tile.Value]*affine{})
	}
	s.classes = l.classesOf(lay)
	return s, nil
}

// storeAt emits the access of the vw classes of s from class ci.
func (l *lowerer) storeAt(s *storeEmit, ci int) error {
	v, lay, args := s.v, s.lay, s.args
	w := &l.body
	t := v.Args[1].Type
	group := s.classes[ci : ci+s.vw]
	first := group[0][0]
	if s.slotwise {
		for _, cls := range group {
			for j, a := range v.Args {
				r, err := l.demandAt(a, lay, cls[0])
				if err != nil {
					return err
				}
				args[j].regs[cls[0]] = r
			}
		}
	}
	var own string
	never := false
	if lay == nil {
		own, never = l.owner(nil, slot{})
	} else {
		own, never = l.owner(lay, s.slots[first])
	}
	if s.atomic {
		r := l.reg(regClass(t))
		emit(w, "mov.%s %s, %s", selType(t), r, zeroLit(t.DType))
		for _, i := range group[0] {
			s.old.regs[i] = r
		}
	}
	if never {
		return nil
	}
	pred := own
	if s.mask != nil {
		m := args[2].regs[first]
		if pred == "" {
			pred = m
		} else {
			p := l.reg("p")
			emit(w, "and.pred %s, %s, %s", p, pred, m)
			pred = p
		}
	}
	guard := guardOf(pred)
	if s.atomic {
		at := map[tile.DType]string{tile.F32: "add.f32", tile.F64: "add.f64", tile.I32: "add.u32"}[t.DType]
		emit(w, "%satom.global.%s %s, [%s], %s", guard, at, s.old.regs[first], args[0].regs[first], args[1].regs[first])
		return nil
	}
	regs := make([]string, s.vw)
	for j, cls := range group {
		regs[j] = args[1].regs[cls[0]]
	}
	addr := args[0].regs[first]
	if s.ptr != nil {
		addr = s.bases.addr(lay, s.slots[first], s.ptr.step, func() string { return addr })
	}
	emit(w, "%sst.global%s%s.%s [%s], %s", guard, cacheOp(v), vecSuffix(s.vw), memType(t), addr, vecOperand(regs))
	return nil
}

// storeRun is the run of stores from vals[0] that are emitted together,
// group by group of their layout (storeGroup): slot-wise stores (after the
// loops of a wgmma kernel) in one layout and width, through pointers into
// distinct kernel parameters, with nothing but values emitted on demand
// between them. Store by store, a later store's chain re-read the earlier
// ones' intermediates of every slot, all live at once (the encoder's
// gelu(x·W+b) with its 6 intermediates kept for the backward spilled
// 2.7 KB a thread); group by group, a slot's chains end in its stores.
func (l *lowerer) storeRun(vals []*tile.Value) []*tile.Value {
	v := vals[0]
	lay := l.plan.access[v.ID]
	if v.Op != tile.OpStore || !l.slotwise(lay) {
		return nil
	}
	root := ptrRoot(v.Args[0])
	if root == nil {
		return nil
	}
	run := []*tile.Value{v}
	roots := map[*tile.Value]bool{root: true}
	for _, x := range vals[1:] {
		if x.Op != tile.OpStore {
			if isAnchor(x) || x.Op == tile.OpFor {
				break
			}
			continue // emitted on demand
		}
		r := ptrRoot(x.Args[0])
		xl := l.plan.access[x.ID]
		if r == nil || roots[r] || layKey(xl) != layKey(lay) || !l.slotwise(xl) || len(x.Args) != len(v.Args) {
			break
		}
		roots[r] = true
		run = append(run, x)
	}
	return run
}

// ptrRoot is the kernel parameter a block of pointers is offset from
// (through addptr, splat and broadcast), or nil.
func ptrRoot(p *tile.Value) *tile.Value {
	for {
		switch p.Op {
		case tile.OpParam:
			return p
		case tile.OpAddPtr, tile.OpSplat, tile.OpBroadcast, tile.OpExpandDims:
			p = p.Args[0]
		default:
			return nil
		}
	}
}

// storeGroup emits the stores of run (storeRun) group by group: each one's
// access of classes ci.. in turn, then the next group.
func (l *lowerer) storeGroup(run []*tile.Value) error {
	var ss []*storeEmit
	for _, v := range run {
		s, err := l.storePrep(v)
		if err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		if len(ss) > 0 && (s.vw != ss[0].vw || len(s.classes) != len(ss[0].classes)) {
			// widths differ: one after the other
			for _, v := range run {
				if err := l.store(v); err != nil {
					return fmt.Errorf("%s: %w", v, err)
				}
			}
			return nil
		}
		ss = append(ss, s)
	}
	for ci := 0; ci < len(ss[0].classes); ci += ss[0].vw {
		for _, s := range ss {
			if err := l.storeAt(s, ci); err != nil {
				return fmt.Errorf("%s: %w", s.v, err)
			}
		}
	}
	return nil
}

// cacheOp is the PTX cache operator of a store's hint.
func cacheOp(v *tile.Value) string {
	if tile.CacheHint(v.Aux) == tile.CacheStreaming {
		return ".cs"
	}
	return ""
}

// loadHint is a load's hint in PTX: the qualifiers after ld.global and the
// operand after the address. The keep hint is Triton's evict_last: L1's
// evict_last priority and an L2 evict_last policy, made once in the
// prologue by createpolicy (keepPolicy).
func (l *lowerer) loadHint(v *tile.Value) (qual, operand string) {
	switch tile.CacheHint(v.Aux) {
	case tile.CacheStreaming:
		return ".cs", ""
	case tile.CacheKeep:
		return ".L1::evict_last.L2::cache_hint", ", " + l.keepPolicy()
	}
	return "", ""
}

// keepPolicy is the register of the L2 evict_last cache policy, created in
// the prologue on first use.
func (l *lowerer) keepPolicy() string {
	if l.policy == "" {
		l.policy = l.reg("rd")
		emit(&l.pro, "createpolicy.fractional.L2::evict_last.b64 %s, 1.0", l.policy)
	}
	return l.policy
}

func zeroLit(d tile.DType) string {
	switch d {
	case tile.F32:
		return "0f00000000"
	case tile.F64:
		return "0d0000000000000000"
	}
	return "0"
}

// forLoop lowers a counted loop; loop-carried values live in fixed registers.
func (l *lowerer) forLoop(v *tile.Value) error {
	bounds := make([]string, 3)
	for i := range bounds {
		x, err := l.demand(v.Args[i], nil)
		if err != nil {
			return err
		}
		bounds[i] = x.regs[0]
	}
	it := v.Args[0].Type
	inits := v.Args[3:]
	body := v.Body
	lays := l.plan.loops[v.ID]
	carried := make([]*lval, len(inits))
	w := &l.body
	var viaSmem map[int]*carry // by carried index (smemcarry.go)
	if l.carry != nil && len(l.carry.byLoop[v.ID]) > 0 {
		viaSmem = map[int]*carry{}
		par := l.reg("r")
		emit(w, "mov.u32 %s, 0", par)
		l.carry.parity[v.ID] = par
		for _, c := range l.carry.byLoop[v.ID] {
			viaSmem[c.idx] = c
			if err := l.carryCopies(c, c.init, l.carryBase(c)); err != nil {
				return err
			}
		}
	}
	for i, in := range inits {
		if viaSmem[i] != nil {
			continue
		}
		lay := lays[i]
		x, err := l.demand(in, lay)
		if err != nil {
			return err
		}
		c := &lval{lay: lay, regs: make([]string, len(x.regs))}
		for _, cls := range l.classesOf(lay) {
			r := l.reg(regClass(in.Type))
			emit(w, "mov.%s %s, %s", movType(in.Type), r, x.regs[cls[0]])
			for _, j := range cls {
				c.regs[j] = r
			}
		}
		carried[i] = c
	}
	iv := l.reg(regClass(it))
	emit(w, "mov.%s %s, %s", movType(it), iv, bounds[0])
	head, end := l.label("for"), l.label("end")
	stop := l.reg("p")
	w.WriteString(head + ":\n")
	emit(w, "setp.ge.%s %s, %s, %s", ptxInt(it.DType), stop, iv, bounds[1])
	nonpos := l.reg("p")
	emit(w, "setp.le.%s %s, %s, 0", ptxInt(it.DType), nonpos, bounds[2])
	emit(w, "or.pred %s, %s, %s", stop, stop, nonpos)
	emit(w, "@%s bra.uni %s", stop, end)

	l.memo = append(l.memo, map[string]*lval{})
	l.loopDepth++
	defer func() { l.loopDepth-- }()
	l.remember(body.Args[0], &lval{regs: []string{iv}})
	for i, a := range body.Args[1:] {
		if viaSmem[i] == nil { // else read from shared memory in the body
			l.remember(a, carried[i])
		}
	}
	if err := l.block(body); err != nil {
		return err
	}
	yield := body.Values[len(body.Values)-1]
	next := make([]*lval, len(yield.Args))
	for i, y := range yield.Args {
		if viaSmem[i] != nil {
			continue
		}
		x, err := l.demand(y, lays[i])
		if err != nil {
			return err
		}
		next[i] = x
	}
	// copy the next values in, as one parallel assignment
	var moves []move
	for i, c := range carried {
		if viaSmem[i] != nil {
			continue
		}
		for _, cls := range l.classesOf(lays[i]) {
			if src := next[i].regs[cls[0]]; src != c.regs[cls[0]] {
				moves = append(moves, move{c.regs[cls[0]], src, movType(inits[i].Type)})
			}
		}
	}
	l.parallelMoves(w, moves, carried)
	if viaSmem != nil {
		par := l.carry.parity[v.ID]
		emit(w, "xor.b32 %s, %s, 1", par, par)
	}
	emit(w, "add.%s %s, %s, %s", ptxInt(it.DType), iv, iv, bounds[2])
	emit(w, "bra.uni %s", head)
	w.WriteString(end + ":\n")
	l.memo = l.memo[:len(l.memo)-1]
	if viaSmem != nil { // the last iteration's copies (of no row: zeros)
		emit(w, "cp.async.wait_all")
	}

	// results: the carried registers, in the enclosing scope (none of
	// those carried through shared memory is used)
	for _, r := range forResults(l.k, v) {
		if carried[r.Aux] != nil {
			l.remember(r, carried[r.Aux])
		}
	}
	return nil
}

func movType(t tile.Type) string {
	if t.Ptr {
		return "b64"
	}
	switch t.DType {
	case tile.I1:
		return "pred"
	case tile.I32:
		return "b32"
	case tile.I64:
		return "b64"
	case tile.F32:
		return "f32"
	case tile.F64:
		return "f64"
	}
	return "b32"
}

func regClassOfMov(m string) string {
	return map[string]string{"pred": "p", "b32": "r", "b64": "rd", "f32": "f", "f64": "fd"}[m]
}

// forResults lists the for_result values of loop f.
func forResults(k *tile.Kernel, f *tile.Value) []*tile.Value {
	var out []*tile.Value
	k.Walk(func(v *tile.Value) {
		if v.Op == tile.OpForResult && v.Args[0] == f {
			out = append(out, v)
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Aux < out[j].Aux })
	return out
}
