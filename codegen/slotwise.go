package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Slot-wise emission of a wgmma kernel's epilogue.
//
// Values are normally emitted op by op over all the slots of their layout
// (perClass), which keeps every intermediate of every slot live at once:
// with a 128-register wgmma accumulator, a gelu(x·W + b) epilogue held
// several times 128 values and spilled (728 B a thread on the H200). A
// store after the loops of a kernel that uses wgmma instead asks for its
// pointer, value and mask one slot at a time (demandAt): elementwise
// values, broadcasts and pointer arithmetic are computed per slot from
// their operands' registers at that slot, so each slot's chain ends in its
// store before the next one starts. Results are memoised per slot and per
// operand registers (a value of broadcast operands is computed once per
// distinct element, as perClass does); anchors, invariant values and
// anything else come from the ordinary, whole-layout demand.

// slotwise reports whether store v's operands are emitted slot by slot.
func (l *lowerer) slotwise(lay *Layout) bool {
	return l.wgmma && l.loopDepth == 0 && lay != nil
}

// demandAt is the register holding slot i of v in layout lay.
func (l *lowerer) demandAt(v *tile.Value, lay *Layout, i int) (string, error) {
	if v.Type.Shape.IsScalar() {
		x, err := l.demand(v, nil)
		if err != nil {
			return "", err
		}
		return x.regs[0], nil
	}
	elementwise := v.Op == tile.OpSelect || v.Op == tile.OpCast || v.Op == tile.OpAddPtr ||
		v.Op.IsBinary() || v.Op.IsCompare() || v.Op.IsUnary()
	// in a store with late loads, invariant pointers and masks too are
	// computed slot by slot, in the body, even where the prologue has them
	// whole: there they were held across the kernel (lateload.go)
	recompute := l.lating && elementwise && l.inv[v.ID]
	if x := l.lookup(v, lay); x != nil && !recompute {
		return x.regs[i], nil
	}
	if ll := l.late[v.ID]; ll != nil && !ll.whole && layKey(lay) == layKey(ll.lay) {
		return l.lateAt(ll, i)
	}
	if isAnchor(v) || l.inv[v.ID] && !recompute {
		x, err := l.demand(v, lay)
		if err != nil {
			return "", err
		}
		return x.regs[i], nil
	}
	// operands at slot i; renamings take the slot's register as it is
	var in *Layout
	switch v.Op {
	case tile.OpBroadcast:
		in = inputLayout(lay, v.Args[0].Type.Shape)
	case tile.OpExpandDims:
		in = &Layout{B: lay.B, Src: append(append([]int(nil), lay.Src[:v.Aux]...), lay.Src[v.Aux+1:]...)}
	case tile.OpTrans:
		in = &Layout{B: lay.B, Src: []int{lay.Src[1], lay.Src[0]}}
	}
	if in != nil {
		return l.demandAt(v.Args[0], in, i)
	}
	if !elementwise {
		x, err := l.demand(v, lay)
		if err != nil {
			return "", err
		}
		return x.regs[i], nil
	}
	args := make([]string, len(v.Args))
	var key strings.Builder
	fmt.Fprintf(&key, "slot|%d|%s", v.ID, layKey(lay))
	for j, a := range v.Args {
		r, err := l.demandAt(a, lay, i)
		if err != nil {
			return "", err
		}
		args[j] = r
		key.WriteString("|" + r)
	}
	if r, ok := l.slotMemo[key.String()]; ok {
		return r, nil
	}
	if l.slotMemo == nil {
		l.slotMemo = map[string]string{}
	}
	if len(l.laidOut[v.ID]) == 0 {
		l.laidOut[v.ID] = append(l.laidOut[v.ID], layKey(lay)+" (slot by slot)")
	}
	w := l.out(v)
	if l.lating {
		w = &l.body
	}
	var r string
	var err error
	switch {
	case v.Op == tile.OpAddPtr:
		t := l.reg("rd")
		r = l.reg("rd")
		if v.Args[1].Type.DType == tile.I32 {
			emit(w, "mul.wide.s32 %s, %s, %d", t, args[1], v.Type.DType.Size())
		} else {
			emit(w, "mul.lo.s64 %s, %s, %d", t, args[1], v.Type.DType.Size())
		}
		emit(w, "add.s64 %s, %s, %s", r, args[0], t)
	case v.Op == tile.OpSelect:
		r = l.reg(regClass(v.Type))
		if v.Type.DType == tile.I1 {
			t := l.reg("p")
			emit(w, "and.pred %s, %s, %s", r, args[0], args[1])
			emit(w, "not.pred %s, %s", t, args[0])
			emit(w, "and.pred %s, %s, %s", t, t, args[2])
			emit(w, "or.pred %s, %s, %s", r, r, t)
		} else {
			emit(w, "selp.%s %s, %s, %s, %s", selType(v.Type), r, args[1], args[2], args[0])
		}
	case v.Op == tile.OpCast:
		r = l.cast(w, v.Args[0].Type.DType, v.Type.DType, args[0])
	case v.Op.IsBinary() || v.Op.IsCompare():
		r, err = l.binary(w, v.Op, v.Args[0].Type.DType, args[0], args[1])
	default:
		r, err = l.unaryOf(w, v, args[0])
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", v, err)
	}
	l.slotMemo[key.String()] = r
	return r, nil
}
