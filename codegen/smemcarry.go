package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Loads a loop carries through shared memory (the meta-parameter
// smem_carry = 1).
//
// A persistent row kernel (graphpass's PERSIST) carries the next row from
// one iteration to the next: the row's load before the loop, and in the
// loop's body the load of the row after the current one, yielded. Carried
// in registers, the next row holds as many registers as the row itself
// until the current row is stored, so that an SM runs half the programs
// (or the next row is loaded only in the store: late loads). Carried
// through shared memory, each such load is a set of cp.async copies into
// one of two stages of a region of the load's own, the first row's before
// the loop into stage 0, the next row's as the iteration starts into the
// other stage; the copies land while the current row is reduced and
// stored, and hold no register. The iteration then waits for the copies
// of its own row (cp.async.wait_group: every group but those of the next
// rows just issued) and reads them into registers (ld.shared, as wide as
// the copies). Each thread copies exactly the elements it reads back, to
// an address of its own (copy j of thread t at (j·threads + t)·bytes in
// the stage: a warp's copies and reads are consecutive), so that no
// barrier is needed: a thread's cp.async.wait_group makes its own copies
// visible to itself, and a stage is rewritten only by the thread that
// read it an iteration before, into registers its row's computation has
// consumed.
//
// A carried value qualifies where: it is a load (no other value for masked
// lanes: they read zeros, as cp.async fills them) before a top-level loop
// used by the loop alone; the value it is given in the body is a load of
// the body's block used by the yield alone, before every use of the
// carried value in the body; both have the carried value's layout and
// access width, of 4, 8 or 16 bytes; the loop's result for it is unused;
// and the kernel has no other cp.async (no pipelined loop). Other carried
// values stay in registers.

// carry is a load carried through shared memory.
type carry struct {
	loop       *tile.Value
	idx        int         // among the loop's carried values
	init, next *tile.Value // the load before the loop, the load in its body
	lay        *Layout
	vw         int // elements a copy
	bytes      int // bytes a copy: 4, 8 or 16
	copies     int // copies a thread: groups of vw of the layout's classes
	stageBytes int
	region     int    // offset of its two stages in shared memory
	order      int    // among the loop's carries, in the body's order
	base       string // prologue register: smem + region + tid·bytes
}

// carries are the loads carried through shared memory: by the ID of the
// load before the loop, of the load in its body, and of the loop (in the
// body's order); parity: the loop's register of the stage its iteration
// reads (0 or 1).
type carries struct {
	byInit, byNext map[int]*carry
	byLoop         map[int][]*carry
	parity         map[int]string
}

// planCarries finds the loads carried through shared memory (the
// pipeline stage): none without smem_carry.
func (l *lowerer) planCarries() {
	if l.k.Meta["smem_carry"] <= 0 || len(l.pipes) > 0 || l.wgmma || len(l.mma().loops) > 0 || l.opt.Arch < 80 {
		return
	}
	cs := carries{byInit: map[int]*carry{}, byNext: map[int]*carry{}, byLoop: map[int][]*carry{}, parity: map[int]string{}}
	threads := l.opt.NumWarps * 32
	for _, v := range l.k.Body.Values {
		if v.Op != tile.OpFor {
			continue
		}
		body := v.Body
		yield := body.Values[len(body.Values)-1]
		lays := l.plan.loops[v.ID]
		used := map[int]bool{}
		for _, r := range forResults(l.k, v) {
			if len(l.users[r.ID]) > 0 {
				used[int(r.Aux)] = true
			}
		}
		var found []*carry
		for i, in := range v.Args[3:] {
			nx := yield.Args[i]
			if used[i] || in.Op != tile.OpLoad || nx.Op != tile.OpLoad || len(in.Args) > 2 || len(nx.Args) > 2 ||
				len(l.users[in.ID]) != 1 || len(l.users[nx.ID]) != 1 {
				continue
			}
			lay := lays[i]
			if lay == nil || layKey(l.plan.access[in.ID]) != layKey(lay) || layKey(l.plan.access[nx.ID]) != layKey(lay) {
				continue
			}
			pos := indexOf(body.Values, nx)
			if pos < 0 || usedBefore(body.Values[:pos], body.Args[1+i]) {
				continue
			}
			size := elemBytes(in.Type)
			vw := min(l.vecWidth(lay, in.Args[0], argOr(in.Args, 1), size), l.vecWidth(lay, nx.Args[0], argOr(nx.Args, 1), size))
			classes := l.classesOf(lay)
			if b := vw * size; b != 4 && b != 8 && b != 16 || len(classes)%vw != 0 {
				continue
			}
			c := &carry{loop: v, idx: i, init: in, next: nx, lay: lay, vw: vw, bytes: vw * size, copies: len(classes) / vw}
			c.stageBytes = c.copies * threads * c.bytes
			found = append(found, c)
		}
		// in the body's order: the k-th waits for all but the k+1 groups
		// of next rows issued before it in the iteration
		for _, x := range body.Values {
			for _, c := range found {
				if c.next == x {
					c.order = len(cs.byLoop[v.ID])
					cs.byLoop[v.ID] = append(cs.byLoop[v.ID], c)
				}
			}
		}
		for _, c := range found {
			c.region = l.ownRegion(2 * c.stageBytes)
			cs.byInit[c.init.ID], cs.byNext[c.next.ID] = c, c
		}
	}
	if len(cs.byInit) > 0 {
		l.carry = &cs
	}
}

// carryDump lists the carries (the pipeline stage's dump).
func (l *lowerer) carryDump() string {
	if l.carry == nil {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "// @%s: loads carried through shared memory (smem_carry)\n", l.k.Name)
	l.k.Walk(func(v *tile.Value) {
		for _, c := range l.carry.byLoop[v.ID] {
			fmt.Fprintf(&sb, "for %%%d: carried %d: %%%d then %%%d, %d copies of %d bytes a thread, two stages of %d bytes at %d\n",
				v.ID, c.idx, c.init.ID, c.next.ID, c.copies, c.bytes, c.stageBytes, c.region)
		}
	})
	return sb.String()
}

func indexOf(vs []*tile.Value, x *tile.Value) int {
	for i, v := range vs {
		if v == x {
			return i
		}
	}
	return -1
}

// usedBefore reports whether a value of vs, or of a loop body among them,
// takes a as an operand.
func usedBefore(vs []*tile.Value, a *tile.Value) bool {
	for _, v := range vs {
		for _, x := range v.Args {
			if x == a {
				return true
			}
		}
		if v.Op == tile.OpFor && usedBefore(v.Body.Values, a) {
			return true
		}
	}
	return false
}

func argOr(args []*tile.Value, i int) *tile.Value {
	if i < len(args) {
		return args[i]
	}
	return nil
}

// carryBase is c's prologue register: smem + region + tid·bytes.
func (l *lowerer) carryBase(c *carry) string {
	if c.base == "" {
		r := l.reg("r")
		emit(&l.pro, "mad.lo.s32 %s, %s, %d, %s", r, l.tid(), c.bytes, l.baseAddr())
		emit(&l.pro, "add.s32 %s, %s, %d", r, r, c.region)
		c.base = r
	}
	return c.base
}

// carryCopies issues the cp.async copies of load x (c's load before the
// loop or in its body) to the stage at shared address stage (a register),
// and commits them as one group.
func (l *lowerer) carryCopies(c *carry, x *tile.Value, stage string) error {
	w := &l.body
	args, err := l.demandAll(x.Args, c.lay)
	if err != nil {
		return err
	}
	classes := l.classesOf(c.lay)
	threads := l.opt.NumWarps * 32
	cache := "ca"
	if c.bytes == 16 {
		cache = "cg"
	}
	for j := range c.copies {
		first := classes[j*c.vw][0]
		size := ""
		if m := maskReg(args, first); m != "" {
			r := l.reg("r")
			emit(w, "selp.u32 %s, %d, 0, %s", r, c.bytes, m)
			size = ", " + r
		}
		emit(w, "cp.async.%s.shared.global [%s+%d], [%s], %d%s", cache, stage, j*threads*c.bytes, args[0].regs[first], c.bytes, size)
	}
	emit(w, "cp.async.commit_group")
	return nil
}

// carryNext emits c's load in the loop's body: the next row's copies into
// the stage the iteration does not read, then the current row read from
// the other, which becomes the carried value's registers.
func (l *lowerer) carryNext(c *carry) error {
	w := &l.body
	par := l.carry.parity[c.loop.ID]
	base := l.carryBase(c)
	cur, nxt := l.reg("r"), l.reg("r")
	emit(w, "mad.lo.s32 %s, %s, %d, %s", cur, par, c.stageBytes, base)
	emit(w, "mad.lo.s32 %s, %s, %d, %s", nxt, par, -c.stageBytes, base)
	emit(w, "add.s32 %s, %s, %d", nxt, nxt, c.stageBytes)
	if err := l.carryCopies(c, c.next, nxt); err != nil {
		return err
	}
	emit(w, "cp.async.wait_group %d", c.order+1)
	t := c.next.Type
	classes := l.classesOf(c.lay)
	threads := l.opt.NumWarps * 32
	x := &lval{lay: c.lay, regs: make([]string, nslots(c.lay))}
	for j := range c.copies {
		regs := make([]string, c.vw)
		for k := range regs {
			regs[k] = l.reg(regClass(t))
			for _, s := range classes[j*c.vw+k] {
				x.regs[s] = regs[k]
			}
		}
		emit(w, "ld.shared%s.%s %s, [%s+%d]", vecSuffix(c.vw), memType(t), vecOperand(regs), cur, j*threads*c.bytes)
	}
	l.remember(c.loop.Body.Args[1+c.idx], x)
	return nil
}
