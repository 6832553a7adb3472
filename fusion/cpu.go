package fusion

import (
	"fmt"
	"sync"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	nativegen "github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// cpuBackend runs a compiled graph on the CPU in the caller's goroutine, op
// by op in the rewrite's order, without Gorgonia's tape machine. That
// machine hands each run to a goroutine of its own on a locked OS thread
// (about 40 µs a run on the 2-core development VM, most of a small graph's
// time once it is fused) and allocates every value anew. Here a kernel
// writes into its own output of the previous run, as the CUDA backend does
// with its buffers: a value read after a run is overwritten by the next run.
// Ops tilefuse does not know run as Gorgonia's Do runs them.
type cpuBackend struct {
	steps  []cpuStep
	vals   []G.Value // by position in the rewrite's order
	inputs []cpuBinding
	back   []cpuBinding // the readable set, written back to the user's nodes
	// WithProfile: each kernel's wall time in the last run
	profile bool
	times   []KernelTime
	// rec recycles the fresh memory of readable values (recycle.go); nil
	// with WithReuseOutputs or WithRecycle(false)
	rec *recycler
}

type cpuStep struct {
	n    *G.Node
	at   int   // where its value goes
	args []int // where its operands' values are
	argv []G.Value
	// a Gorgonia matrix product: it writes into its value of the last run
	// (UsePreallocDo), as the kernels do, instead of a new zeroed matrix
	prealloc G.UsePreallocDoer
	// fresh: the value is one the user reads (or shares its memory), so it
	// goes into fresh memory each run
	fresh bool
	// viewsFresh: a part (PartOp) of a kernel whose value is fresh: its
	// elements differ every run, and a header kept would hold them
	viewsFresh bool
	boxes      boxes // a kernel's arguments boxed, kept between runs
}

// cpuBinding ties a node of the user's graph to a position of the plan
// (and, for inputs, to its node in the rewritten graph).
type cpuBinding struct {
	orig *G.Node
	at   int
	nn   *G.Node
}

func (p *cpuBackend) prepare(c *Compiled) error {
	order := c.rw.order
	p.vals = make([]G.Value, len(order))
	p.profile = c.cfg.profile
	pos := make(map[*G.Node]int, len(order))
	isInput := map[*G.Node]bool{}
	for _, in := range c.rw.inputs {
		isInput[in.nn] = true
	}
	for i, n := range order {
		pos[n] = i
		switch {
		case isInput[n]:
		case n.Op() == nil:
			return fmt.Errorf("fusion: node %v has no op and is not an input", n.Name())
		case isConst(n):
			p.vals[i] = n.Value()
		default:
			args := operands(c.Graph, n)
			st := cpuStep{n: n, at: i, args: make([]int, len(args)), argv: make([]G.Value, len(args))}
			if pd, ok := n.Op().(G.UsePreallocDoer); ok && ops.IsMatMul(n.Op()) {
				st.prealloc = pd
			}
			for j, a := range args {
				at, ok := pos[a]
				if !ok {
					return fmt.Errorf("fusion: %v reads %v before it is computed", n.Name(), a.Name())
				}
				st.args[j] = at
			}
			p.steps = append(p.steps, st)
		}
	}
	for _, in := range c.rw.inputs {
		p.inputs = append(p.inputs, cpuBinding{in.orig, pos[in.nn], in.nn})
	}
	if !c.cfg.reuse {
		fresh := make([]bool, len(order))
		for _, b := range c.back {
			if at, ok := pos[b.nn]; ok {
				fresh[at] = true
			}
		}
		for i := len(order) - 1; i >= 0; i-- { // users first: a view passes it on to what it views
			if n := order[i]; fresh[i] && n.Op() != nil && n.Op().ReturnsPtr() {
				for _, a := range operands(c.Graph, n) {
					fresh[pos[a]] = true
				}
			}
		}
		limit := 0
		for i := range p.steps {
			st := &p.steps[i]
			st.fresh = fresh[st.at]
			if _, ok := st.n.Op().(*PartOp); ok && len(st.args) == 1 {
				st.viewsFresh = fresh[st.args[0]]
			}
			if b := freshBytes(st); st.fresh && b >= minRecycled {
				limit += b
			}
		}
		if c.cfg.recycle && limit > 0 {
			p.rec = newRecycler(recycleLimit(limit))
		}
	}
	for _, b := range c.back {
		at, ok := pos[b.nn]
		switch {
		case ok:
		case isConst(b.nn): // a constant no op reads: not in the graph (rewrite.go)
			at = len(p.vals)
			p.vals = append(p.vals, b.nn.Value())
		default:
			return fmt.Errorf("fusion: %v has no node in the rewritten graph's order", b.orig.Name())
		}
		p.back = append(p.back, cpuBinding{b.orig, at, nil})
	}
	return nil
}

// run runs the graph once: the user's input values in, the readable set out.
func (p *cpuBackend) run() error {
	for _, in := range p.inputs {
		v := in.orig.Value()
		if err := checkInput(in.orig, v); err != nil {
			return err
		}
		p.vals[in.at] = v
		if err := let(in.nn, v); err != nil {
			return fmt.Errorf("fusion: input %v: %w", in.orig.Name(), err)
		}
	}
	p.times = p.times[:0]
	for i := range p.steps {
		st := &p.steps[i]
		for j, a := range st.args {
			st.argv[j] = p.vals[a]
		}
		var v G.Value
		var err error
		switch op := st.n.Op().(type) {
		case *FusedOp:
			var start time.Time
			var faults int64
			if p.profile && !op.view {
				faults = minorFaults()
				start = time.Now()
			}
			reuse := p.vals[st.at]
			if st.fresh {
				reuse = nil
			}
			if v, err = op.do(reuse, &st.boxes, p.rec, st.argv...); err != nil {
				return err // it names the kernel
			}
			if p.profile && !op.view {
				k := KernelTime{Kernel: op.name, Ops: op.ops, Seconds: time.Since(start).Seconds(), Faults: -1}
				if f := minorFaults(); f >= 0 && faults >= 0 {
					k.Faults = f - faults
				}
				p.times = append(p.times, k)
			}
		case *PartOp:
			if st.fresh || st.viewsFresh || len(st.argv) != 1 {
				v, err = op.Do(st.argv...)
			} else {
				v, err = op.reused(&st.boxes, st.argv[0]) // one operand: the kernel's value
			}
			if err != nil {
				return err // it names the part
			}
		default:
			if prev := p.vals[st.at]; st.prealloc != nil && prev != nil && !st.fresh {
				v, err = st.prealloc.UsePreallocDo(prev, st.argv...)
			} else if t := recycledValue(p.rec, st); t != nil {
				v, err = st.prealloc.UsePreallocDo(t, st.argv...) // it overwrites every element
			} else {
				v, err = op.Do(st.argv...)
			}
			if err != nil {
				return fmt.Errorf("fusion: %v (%v): %w", st.n.Name(), op, err)
			}
		}
		p.vals[st.at] = v
		if err := let(st.n, v); err != nil { // the rewritten graph holds its values, as under Gorgonia's machine
			return fmt.Errorf("fusion: %v: %w", st.n.Name(), err)
		}
	}
	for _, b := range p.back {
		if v := p.vals[b.at]; v != nil {
			if err := let(b.orig, v); err != nil {
				return fmt.Errorf("fusion: writing back %v: %w", b.orig.Name(), err)
			}
		}
	}
	return nil
}

// let binds v to n (gorgonia.UnsafeLet) unless n holds v already: a run
// that reuses its memory binds the same tensors every time, and
// UnsafeLet allocates (it compares copies of the shapes).
func let(n *G.Node, v G.Value) error {
	switch v := v.(type) {
	case *tensor.Dense:
		if cur, ok := n.Value().(*tensor.Dense); ok && cur == v {
			return nil
		}
	case *G.F32:
		if cur, ok := n.Value().(*G.F32); ok && cur == v {
			return nil
		}
	case *G.F64:
		if cur, ok := n.Value().(*G.F64); ok && cur == v {
			return nil
		}
	}
	return G.UnsafeLet(n, v)
}

// checkInput: input n has a value v (its shape is n's: gorgonia.Let and
// UnsafeLet refuse any other).
func checkInput(n *G.Node, v G.Value) error {
	if v == nil {
		return fmt.Errorf("fusion: input %v has no value: Let it first", n.Name())
	}
	return nil
}

func (p *cpuBackend) deviceTime() float64 { return 0 }

func (p *cpuBackend) kernelTimes() []KernelTime {
	if !p.profile {
		return nil
	}
	return append([]KernelTime(nil), p.times...)
}

func (p *cpuBackend) stats(s *Stats) {
	s.Recycled, s.Allocated, s.CollectionsAsked, s.RecycledBytes = p.rec.counts()
	for _, st := range p.steps {
		if op, ok := st.n.Op().(*FusedOp); ok && op.fell != nil {
			s.ExecutorLaunches += int(op.fell.Load())
		}
	}
}

func (p *cpuBackend) close() error {
	p.rec.close()
	p.steps, p.vals, p.inputs, p.back, p.rec = nil, nil, nil, nil, nil
	return nil
}

// freshBytes is the size of the memory st's value is given when fresh: a
// kernel's whole value (its outputs end to end), a Gorgonia matrix
// product's; 0 for a view, a scalar or another op.
func freshBytes(st *cpuStep) int {
	switch op := st.n.Op().(type) {
	case *FusedOp:
		if op.view || op.outs == 1 && len(op.kernel.Out) == 0 {
			return 0
		}
		return op.total() * op.kernel.DType.Size()
	}
	if st.prealloc != nil && !st.n.IsScalar() {
		return st.n.Shape().TotalSize() * int(st.n.Dtype().Size())
	}
	return 0
}

// recycledValue is memory from rec for the fresh value of st, a Gorgonia
// matrix product, as a tensor of its shape; nil where there is none to give
// (no recycler, not such a step, too small to recycle).
func recycledValue(rec *recycler, st *cpuStep) G.Value {
	if rec == nil || st.prealloc == nil || !st.fresh || freshBytes(st) < minRecycled {
		return nil
	}
	n := st.n.Shape().TotalSize()
	var d any
	switch st.n.Dtype() {
	case tensor.Float32:
		d = recycledSlice[float32](rec, n, false)
	case tensor.Float64:
		d = recycledSlice[float64](rec, n, false)
	default:
		return nil
	}
	return tensor.New(tensor.WithShape(st.n.Shape().Clone()...), tensor.WithBacking(d))
}

// cpuKernels is the CPU backend's kernel cache: the executor's compiled
// form of kernels by their IR text without their names
// (tile.Kernel.Anonymous), so that compiling a graph again, another graph
// with the same kernels, or a graph's identical layers skips that step. An
// Exec is safe for concurrent launches; it names the kernel it was
// compiled from in its errors (FusedOp renames them).
var cpuKernels = &execCache{m: map[string]*cpu.Exec{}}

type execCache struct {
	mu sync.Mutex
	m  map[string]*cpu.Exec
}

// maxExecs bounds the cache; when full it starts again.
const maxExecs = 4096

// get is k's executable form; text is k.Anonymous(); native asks for
// machine code (cpu.WithNative), compiled for the vector width the native
// code generator takes now (native.SetAVX512 turns zmm off and on: each
// has its own entries).
func (c *execCache) get(text string, k *tile.Kernel, native bool) (*cpu.Exec, error) {
	key := text
	if native {
		key = "native\n" + text
		if nativegen.AVX512() {
			key = "native zmm\n" + text
		}
	}
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return e, nil
	}
	e, err := cpu.NewExec(k, cpu.WithNative(native))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= maxExecs {
		clear(c.m)
	}
	c.m[key] = e
	c.mu.Unlock()
	return e, nil
}

func isConst(n *G.Node) bool { return ops.IsConst(n.Op()) }

// operands are n's operands in order.
func operands(cg *G.ExprGraph, n *G.Node) G.Nodes {
	var out G.Nodes
	ch := cg.From(n.ID())
	for ch.Next() {
		out = append(out, ch.Node().(*G.Node))
	}
	return out
}
