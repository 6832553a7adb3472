package codegen

import (
	"fmt"

	"github.com/tilefuse/tilefuse/tile"
)

// Late loads: the loads of a kernel's last store, emitted slot group by
// slot group inside it (the meta-parameter late_loads).
//
// Loads are anchors, emitted whole in program order: a row kernel that
// holds its row (LayerNorm: x − mean, 64 registers a thread at 32768 on
// 16 warps) and then loads γ and β for its output held all three at once
// (192 registers: ptxas 11.8 spilled 2.4 KB a thread). With late_loads = d
// > 0, the loads after the kernel's last reduction, dot or loop that the
// kernel's only store reads in its own layout are not emitted in program
// order: the store is emitted slot by slot (demandAt), each such load's
// access group issued d groups of the store ahead of the group that uses
// it, so that d groups of each are in flight and nothing else of them is
// held. A load asked for otherwise (whole, or in another layout) is
// emitted whole where it is first asked for. Only a load through another
// kernel parameter than the store's is moved (a store through the same
// parameter may write what it reads), and only in a kernel of one store or
// atomic, after which nothing else reads memory.

// In a kernel whose only store is in the body of a top-level loop (a
// persistent row kernel: a row an iteration), the same holds of that body:
// its loads after its last reduction, the next row's among them, are
// issued in the store; a load the loop carries to the next iteration is
// asked for whole after the store (lateWhole).

// lateLoad is a load emitted group by group inside the last store.
type lateLoad struct {
	v       *tile.Value
	lay     *Layout
	vw      int
	classes [][]int
	group   []int // slot → the index of its access group's first class
	x       *lval // the registers of the groups loaded so far
	issued  map[int]bool
	whole   bool // asked for otherwise: loaded whole
}

// planLate finds the late loads of the kernel's top-level block and its
// last store (nil where late_loads is not set or nothing qualifies).
func (l *lowerer) planLate(b *tile.Block) {
	d := l.k.Meta["late_loads"]
	if d <= 0 || l.wgmma {
		return
	}
	stores := 0
	l.k.Walk(func(v *tile.Value) {
		if v.Op == tile.OpStore || v.Op == tile.OpAtomicAdd {
			stores++
		}
	})
	if stores != 1 {
		return
	}
	last := -1 // the store's position
	for i, v := range b.Values {
		if v.Op == tile.OpStore {
			last = i
		}
	}
	if last < 0 {
		return
	}
	st := b.Values[last]
	lay := l.plan.access[st.ID]
	root := ptrRoot(st.Args[0])
	if lay == nil || root == nil {
		return
	}
	late := map[int]*lateLoad{}
	for i := last - 1; i >= 0; i-- {
		v := b.Values[i]
		if isAnchor(v) && v.Op != tile.OpLoad || v.Op == tile.OpFor {
			break // only loads after the last reduction, dot and loop
		}
		if v.Op != tile.OpLoad || layKey(l.plan.access[v.ID]) != layKey(lay) {
			continue
		}
		if r := ptrRoot(v.Args[0]); r == nil || r == root {
			continue
		}
		var mask *tile.Value
		if len(v.Args) > 1 {
			mask = v.Args[1]
		}
		ll := &lateLoad{v: v, lay: lay, vw: l.vecWidth(lay, v.Args[0], mask, elemBytes(v.Type)), classes: l.classesOf(lay),
			x: &lval{lay: lay, regs: make([]string, nslots(lay))}, issued: map[int]bool{}}
		ll.group = make([]int, nslots(lay))
		for ci, cls := range ll.classes {
			for _, s := range cls {
				ll.group[s] = ci - ci%ll.vw
			}
		}
		late[v.ID] = ll
	}
	if len(late) > 0 {
		l.late, l.lateStore, l.lateAhead, l.lateBlock = late, st, d, b
	}
}

// lateWhole emits late load v whole where it is asked for otherwise than
// slot by slot in its layout; false if v is no late load not yet emitted.
// A load the store has issued groups of (a persistent row kernel's next
// row, which the store does not read and its loop carries) has its other
// groups issued and is the registers of all of them.
func (l *lowerer) lateWhole(v *tile.Value) (bool, error) {
	ll := l.late[v.ID]
	if ll == nil || ll.whole {
		return false, nil
	}
	ll.whole = true
	if len(ll.issued) == 0 {
		return true, l.load(v)
	}
	for ci := 0; ci < len(ll.classes); ci += ll.vw {
		if err := l.lateIssue(ll, ci); err != nil {
			return false, err
		}
	}
	l.remember(v, ll.x)
	return true, nil
}

// lateAt is the register of slot i of late load ll, its group issued if
// it is not yet.
func (l *lowerer) lateAt(ll *lateLoad, i int) (string, error) {
	if err := l.lateIssue(ll, ll.group[i]); err != nil {
		return "", err
	}
	return ll.x.regs[i], nil
}

// lateIssue emits the access of ll's group from class ci (once).
func (l *lowerer) lateIssue(ll *lateLoad, ci int) error {
	if ll.issued[ci] || ci >= len(ll.classes) {
		return nil
	}
	ll.issued[ci] = true
	v, t := ll.v, ll.v.Type
	group := ll.classes[ci:min(ci+ll.vw, len(ll.classes))]
	first := group[0][0]
	args := make([]string, len(v.Args))
	for j, a := range v.Args {
		r, err := l.demandAt(a, ll.lay, first)
		if err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		args[j] = r
	}
	w := &l.body
	regs := make([]string, len(group))
	for j, cls := range group {
		regs[j] = l.reg(regClass(t))
		for _, s := range cls {
			ll.x.regs[s] = regs[j]
		}
	}
	pred := ""
	if len(args) > 1 {
		pred = args[1]
		for j, cls := range group {
			other := zeroLit(t.DType)
			if len(args) > 2 {
				r, err := l.demandAt(v.Args[2], ll.lay, cls[0])
				if err != nil {
					return fmt.Errorf("%s: %w", v, err)
				}
				other = r
			}
			emit(w, "mov.%s %s, %s", selType(t), regs[j], other)
		}
	}
	qual, hintArg := l.loadHint(v)
	emit(w, "%sld.global%s%s.%s %s, [%s]%s", guardOf(pred), qual, vecSuffix(len(regs)), memType(t), vecOperand(regs), args[0], hintArg)
	if len(l.laidOut[v.ID]) == 0 {
		l.laidOut[v.ID] = append(l.laidOut[v.ID], layKey(ll.lay)+fmt.Sprintf(" (late, %d groups ahead)", l.lateAhead))
	}
	return nil
}

// lateAheadOf issues the late loads' groups up to d groups of the store
// after the one from class ci.
func (l *lowerer) lateAheadOf(ci, vw int) error {
	for _, ll := range l.lateOrder() {
		if ll.whole {
			continue
		}
		for c := ci; c < len(ll.classes) && c <= ci+l.lateAhead*vw; c += ll.vw {
			if err := l.lateIssue(ll, c-c%ll.vw); err != nil {
				return err
			}
		}
	}
	return nil
}

// lateOrder is the late loads in program order.
func (l *lowerer) lateOrder() []*lateLoad {
	var out []*lateLoad
	for _, v := range l.lateBlock.Values {
		if ll := l.late[v.ID]; ll != nil {
			out = append(out, ll)
		}
	}
	return out
}
