package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// plan is what the layout pass decides before anything is emitted: the
// layout every anchor is computed in (its natural layout, in
// lowerer.natural), the layout each memory access and dot takes its
// operands in, and the layouts of each loop's carried values. Emission
// reads it and converts, through shared memory, wherever a consumer asks
// for another layout (lowerer.convert).
type plan struct {
	access map[int]*Layout   // loads, stores, atomics: the layout they access memory in (nil: scalar)
	loops  map[int][]*Layout // for loops: the layout of each carried value
	order  []*tile.Value     // the planned values, in program order (for the dump)
}

// assignLayouts is the layout pass: it walks the kernel in program order
// and decides each anchor's layout as its emission will use it. Loads take
// the layout of their pointer, else the one in which a consumer meets
// another operand's natural layout (a bias row over a tile), else the
// canonical blocked layout of their shape; reductions and dots follow their
// operands; loop-carried values take their initial value's layout.
func (l *lowerer) assignLayouts(b *tile.Block) error {
	for _, v := range b.Values {
		switch v.Op {
		case tile.OpLoad:
			lay := l.naturalOf(v.Args[0]) // nil for a scalar, and then so is canonical's
			if x := l.mmaLoadLayout(v); x != nil {
				lay = x // a B operand's copies, or an A operand loaded as a fragment
			}
			if x := l.pipeCopy[v.ID]; x != nil {
				lay = x // a pipelined operand's copies along its contiguous dimension
			}
			if lay == nil && !v.Type.Shape.IsScalar() {
				lay = l.consumerLayout(v)
			}
			if lay == nil {
				lay = l.canonical(v.Type.Shape)
			}
			l.plan.access[v.ID] = lay
			l.natural[v.ID] = lay
		case tile.OpStore, tile.OpAtomicAdd:
			lay := l.naturalOf(v.Args[1]) // nil for a scalar, and then so is layoutOf's
			if lay == nil {
				lay = l.layoutOf(v.Args[0]) // the same shape as the value
			}
			if x := l.coalescedStore(v, lay); x != nil {
				lay = x // the value converted through shared memory
			}
			l.plan.access[v.ID] = lay
			if v.Op == tile.OpAtomicAdd {
				l.natural[v.ID] = lay
			}
		case tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin:
			l.natural[v.ID] = reducedLayout(l.layoutOf(v.Args[0]), v)
		case tile.OpDot:
			for _, x := range v.Args[:2] {
				l.layoutOf(x)
			}
			if l.mma().dots[v.ID] == nil { // else preset: the mma layout
				l.natural[v.ID] = l.layoutOf(v.Args[2])
			}
		case tile.OpFor:
			inits := v.Args[3:]
			lays := make([]*Layout, len(inits))
			for i, in := range inits {
				lays[i] = l.layoutOf(in)
			}
			if l.mma().loops[v.ID] != nil {
				l.mmaCarried(v, lays)
			}
			if p := l.matchPipe(v); p != nil {
				// a K loop for the tensor cores: the accumulator lives in
				// registers in the mma layout, before, in and after the loop
				l.pipes[v.ID] = p
				l.wsKernel = l.wsKernel || p.invariantsInPrologue()
				l.epiLate = l.chooseEpiLate(v, p)
				p.epiLate = l.epiLate
				for i, c := range p.copy {
					if c == nil {
						c = p.wsCopy[i]
					}
					if c != nil {
						l.pipeCopy[p.loads[i].ID] = c
					}
				}
				acc := p.accLayout()
				lays[p.accIdx] = &acc
			}
			l.plan.loops[v.ID] = lays
			for i, a := range v.Body.Args[1:] {
				l.natural[a.ID] = lays[i]
			}
			if err := l.assignLayouts(v.Body); err != nil {
				return err
			}
			for _, r := range forResults(l.k, v) {
				l.natural[r.ID] = lays[r.Aux]
				if p := l.pipes[v.ID]; p != nil && p.epiSmem && int(r.Aux) == p.accIdx {
					// the epilogue in the row-major layout, through shared memory
					l.natural[r.ID] = l.epiSmemLayout(b, r)
				}
			}
		default:
			continue
		}
		l.plan.order = append(l.plan.order, v)
	}
	return nil
}

// epiSmemLayout is the row-major layout of the [m, n] block into which
// epilogueThroughSmem reads the swapped form's accumulator back (loop
// result r, in block b): runs of as many consecutive elements of a row a
// thread as the widest access the epilogue's writes allow, 4 (16-byte
// stores) where every write that depends on r may be 16 bytes wide, else
// 2 or 1. A write that cannot be 16 bytes wide (rows not 16-byte aligned:
// n = 4097; atomic adds) in runs of 4 would be scalar stores 16 bytes
// apart, a warp's store spanning 512 bytes; with runs of 1 the 32 lanes
// of a warp hold 32 consecutive columns and its scalar store covers 128
// contiguous bytes.
func (l *lowerer) epiSmemLayout(b *tile.Block, r *tile.Value) *Layout {
	vec := 4
	for _, w := range b.Values {
		if w.Op != tile.OpStore && w.Op != tile.OpAtomicAdd || !dependsOn(w.Args[1], r) {
			continue
		}
		vec = min(vec, l.writeWidth(w))
	}
	lay := plain(l.intern(newBlocked(r.Type.Shape.Slice(), l.opt.NumWarps, vec)))
	return &lay
}

// writeWidth is how many consecutive elements of a row one access of
// store or atomic add w may cover at most (a power of two up to 16 bytes):
// the pointer's contiguity and alignment and the mask's constancy along
// the last dimension (accessWidth); atomic adds are scalar.
func (l *lowerer) writeWidth(w *tile.Value) int {
	if w.Op == tile.OpAtomicAdd || w.Args[1].Type.Shape.IsScalar() {
		return 1
	}
	var mask *tile.Value
	if len(w.Args) > 2 {
		mask = w.Args[2]
	}
	size := elemBytes(w.Args[1].Type)
	return l.accessWidth(w.Args[0], mask, size, 16/size)
}

// reducedLayout is the layout of reduction v's result when its operand is
// held in lay: the reduced dimension is left out (or kept as a dimension of
// size 1), so that every thread along it holds the result.
func reducedLayout(lay *Layout, v *tile.Value) *Layout {
	if v.Type.Shape.IsScalar() {
		return nil
	}
	axis := int(v.Aux)
	src := append([]int(nil), lay.Src...)
	if v.Aux2 != 0 {
		src[axis] = -1
	} else {
		src = append(src[:axis], src[axis+1:]...)
	}
	return &Layout{B: lay.B, Src: src}
}

// checkLayouts is the layout check: every planned layout has one source
// dimension per dimension of its value, and each used dimension of the
// blocked layout has the value's size there.
func (l *lowerer) checkLayouts() error {
	check := func(v *tile.Value, what string, lay *Layout, s tile.Shape) error {
		if s.IsScalar() {
			if lay != nil {
				return fmt.Errorf("%s: %s: a scalar with layout %v", v, what, lay)
			}
			return nil
		}
		if lay == nil {
			return fmt.Errorf("%s: %s: a block %v without a layout", v, what, s)
		}
		if len(lay.Src) != s.Rank {
			return fmt.Errorf("%s: %s: layout %v for rank %d", v, what, lay, s.Rank)
		}
		for i, d := range lay.Src {
			switch {
			case d < 0 && s.Dims[i] != 1:
				return fmt.Errorf("%s: %s: dimension %d of %v is not in layout %v", v, what, i, s, lay)
			case d >= lay.B.rank():
				return fmt.Errorf("%s: %s: layout %v has no dimension %d", v, what, lay, d)
			case d >= 0 && lay.B.Shape[d] != s.Dims[i]:
				return fmt.Errorf("%s: %s: dimension %d of %v held in layout %v of another size", v, what, i, s, lay)
			}
		}
		return nil
	}
	for _, v := range l.plan.order {
		switch v.Op {
		case tile.OpLoad, tile.OpAtomicAdd:
			if err := check(v, "access", l.plan.access[v.ID], v.Type.Shape); err != nil {
				return err
			}
		case tile.OpStore:
			if err := check(v, "access", l.plan.access[v.ID], v.Args[1].Type.Shape); err != nil {
				return err
			}
		case tile.OpFor:
			for i, in := range v.Args[3:] {
				if err := check(v, fmt.Sprintf("carried value %d", i), l.plan.loops[v.ID][i], in.Type.Shape); err != nil {
					return err
				}
			}
		}
		if isAnchor(v) {
			if err := check(v, "result", l.natural[v.ID], v.Type.Shape); err != nil {
				return err
			}
		}
	}
	return nil
}

// planDump is the layout pass's result: each anchor, memory access and
// loop with the layouts chosen for it.
func (l *lowerer) planDump() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "// @%s: planned layouts (num_warps=%d, sm_%d)\n", l.k.Name, l.opt.NumWarps, l.opt.Arch)
	for _, v := range l.plan.order {
		line := v.String()
		if i := strings.Index(line, "\n"); i >= 0 {
			line = line[:i] + " ..."
		}
		sb.WriteString(line + "\n")
		if lay, ok := l.plan.access[v.ID]; ok {
			fmt.Fprintf(&sb, "    // access: %s\n", layKey(lay))
		}
		if isAnchor(v) {
			fmt.Fprintf(&sb, "    // result: %s\n", layKey(l.natural[v.ID]))
		}
		for i, lay := range l.plan.loops[v.ID] {
			fmt.Fprintf(&sb, "    // carried #%d: %s\n", i, layKey(lay))
		}
	}
	return sb.String()
}

// coalescedStore is the layout a store of a 2-D block takes instead of its
// value's natural layout lay where lay's lanes walk the dimension that is
// not contiguous in memory (a transpose: t loaded with lanes along its
// rows and stored as tᵀ, whose rows are t's columns), so that each store
// of a warp would touch one word of 32 rows: the canonical layout of the
// value's shape, with lanes along the contiguous last dimension and runs
// of 4 a thread (16-byte stores where alignment allows); the value is
// converted to it through shared memory (lowerer.convert, rows padded).
// nil where lay is kept: a scalar or a block of another rank, a
// register-level (tensor-core) layout, an atomic add, lanes already along
// the contiguous dimension, memory contiguous along neither, or a thread
// that already holds 4 consecutive elements of a row.
func (l *lowerer) coalescedStore(v *tile.Value, lay *Layout) *Layout {
	if v.Op != tile.OpStore || lay == nil || v.Args[1].Type.Shape.Rank != 2 || lay.B.WRep != nil {
		return nil
	}
	if l.axes[v.Args[0].ID].Contig < 4 {
		return nil // not known to be contiguous along the last dimension
	}
	if laneDim(lay) != 0 {
		return nil
	}
	if d := lay.Src[1]; d >= 0 && lay.B.SPT[d] >= 4 {
		return nil
	}
	return l.canonical(v.Args[1].Type.Shape)
}

// chooseEpiLate is epi_late for a kernel whose loop f is pipe p (lowerer.
// inPrologue, loopDone): the meta-parameter where the kernel has it; else,
// for the swapped form alone in its kernel (not warp-specialised), 1 where
// the masks of the stores after the loop are the same in every row of the
// block (its rows whole tiles), 2 where they are not and the loop runs at
// most twice (store-bound products), and 0 otherwise. Measured on the
// H200 (2026-12-04, r25n, `tilefuse peer`, TFLOP/s, 0 → 1 / 2): rows whole
// tiles: 4096×4097×32 33.4 → 34.3 / 24.4 (with 2 ptxas orders the stores a
// column of the tile at a time), 4096³ 309.7 → 317.1 / 312.6, gelu(x·W+b)
// 4096³ 298.0 → 299.6 / 291.9, 4096×50257×768 bf16 188.7 → 194.4 / 193.8,
// 3xTF32 79.7 → 82.0 / 81.6, TF32 225.9 → 225.1 / 225.2; rows not whole
// tiles: 4095×4097×32 30.4 → 25.9 / 33.0 (0 spilled 56 bytes: the rows'
// masks held across the loop), 4095×4097×33 TF32 27.8 → 19.3 / 28.0, bf16
// 10.1 → 17.5 / 17.6 (0 spilled 200 bytes), 3xTF32 9.5 → 11.3 / 14.1,
// 4000×3072×768 258.6 → 262.1 / 261.6, 1000³ (32 iterations) 100.0 →
// 96.5 / 97.5. With this choice against none (r25o, the same call):
// 4096×4097×32 31.9 → 34.0, 4095×4097×32 30.2 → 33.0, 4095×4097×33 TF32
// 27.8 → 27.9, bf16 10.2 → 17.6, 3xTF32 9.5 → 14.2, 4096³ 303.4 → 314.9,
// gelu(x·W+b) 4096³ 293.1 → 296.7, 4096×50257×768 bf16 189.5 → 194.4,
// 3xTF32 79.5 → 82.0 (1000³ and 4000×3072×768 take none: their PTX is
// unchanged).
//
// Only in a kernel whose one dot is the loop's: a dot emitted after the
// loop without a pipe (dotMMA) branches around its tiles, and a value
// first asked for inside such a branch would not be defined past it,
// where the prologue's always was.
func (l *lowerer) chooseEpiLate(f *tile.Value, p *pipe) int {
	if l.k.Count(tile.OpDot) != 1 {
		return 0
	}
	if e, ok := l.k.Meta["epi_late"]; ok {
		return e
	}
	if !p.swapped || p.invariantsInPrologue() || l.k.Count(tile.OpFor) != 1 {
		return 0
	}
	memo := map[*tile.Value]*affine{}
	whole := true
	after := false
	for _, v := range l.k.Body.Values {
		if v == f {
			after = true
			continue
		}
		if after && v.Op == tile.OpStore && len(v.Args) > 2 && v.Args[2].Type.Shape.Rank == 2 &&
			l.runs(v.Args[2], 0, memo) < int64(v.Args[2].Type.Shape.Dims[0]) {
			whole = false
		}
	}
	if whole {
		return 1
	}
	lo, hi, step := f.Args[0], f.Args[1], f.Args[2]
	if lo.Op == tile.OpConst && hi.Op == tile.OpConst && step.Op == tile.OpConst && step.Aux > 0 &&
		(hi.Aux-lo.Aux+step.Aux-1)/step.Aux <= 2 {
		return 2
	}
	return 0
}
