package fusion

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/ops"
)

// cpuPlan runs a compiled graph on the CPU backend in the caller's
// goroutine, op by op in graph order, without Gorgonia's tape machine. That
// machine hands each run to a goroutine of its own on a locked OS thread
// (about 40 µs a run on the 2-core development VM, most of a small graph's
// time once it is fused) and allocates every value anew. Here a kernel
// writes into its own output of the previous run, as the CUDA backend does
// with its buffers: a value read after a run is overwritten by the next run.
// Ops tilefuse does not know run as Gorgonia's Do runs them.
type cpuPlan struct {
	steps  []cpuStep
	vals   []G.Value // by position in the graph order
	inputs []binding // the user's inputs, into the new graph
	back   []binding // values written back to the user's nodes
}

type cpuStep struct {
	n    *G.Node
	at   int   // where its value goes
	args []int // where its operands' values are
	argv []G.Value
	// a Gorgonia matrix product: it writes into its value of the last run
	// (UsePreallocDo), as the kernels do, instead of a new zeroed matrix
	prealloc G.UsePreallocDoer
}

// binding ties a node of the user's graph to a position of the plan (and,
// for inputs, to its node in the rewritten graph).
type binding struct {
	orig *G.Node
	at   int
	nn   *G.Node
}

func newCPUPlan(c *Compiled) (*cpuPlan, error) {
	sorted, err := G.Sort(c.Graph)
	if err != nil {
		return nil, fmt.Errorf("fusion: %w", err)
	}
	p := &cpuPlan{vals: make([]G.Value, len(sorted))}
	pos := make(map[*G.Node]int, len(sorted))
	isInput := map[*G.Node]bool{}
	for _, in := range c.rw.Inputs {
		isInput[c.rw.New[in]] = true
	}
	for i := range sorted {
		n := sorted[len(sorted)-1-i] // G.Sort lists users first
		pos[n] = i
		switch {
		case isInput[n]:
		case n.Op() == nil:
			return nil, fmt.Errorf("fusion: node %v has no op and is not an input", n.Name())
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
					return nil, fmt.Errorf("fusion: %v reads %v before it is computed", n.Name(), a.Name())
				}
				st.args[j] = at
			}
			p.steps = append(p.steps, st)
		}
	}
	for _, in := range c.rw.Inputs {
		p.inputs = append(p.inputs, binding{in, pos[c.rw.New[in]], c.rw.New[in]})
	}
	for orig, nn := range c.rw.New {
		switch at, ok := pos[nn]; {
		case isInput[nn]:
		case ok:
			p.back = append(p.back, binding{orig, at, nil})
		default: // folded into a value at compile time, and not in the new graph
			p.vals = append(p.vals, nn.Value())
			p.back = append(p.back, binding{orig, len(p.vals) - 1, nil})
		}
	}
	return p, nil
}

// run runs the graph once: the user's input values in, every value the
// user's graph has a node for out.
func (p *cpuPlan) run() error {
	for _, in := range p.inputs {
		v := in.orig.Value()
		if v == nil {
			return fmt.Errorf("fusion: input %v has no value: Let it first", in.orig.Name())
		}
		p.vals[in.at] = v
		if err := G.UnsafeLet(in.nn, v); err != nil {
			return fmt.Errorf("fusion: input %v: %w", in.orig.Name(), err)
		}
	}
	for i := range p.steps {
		st := &p.steps[i]
		for j, a := range st.args {
			st.argv[j] = p.vals[a]
		}
		var v G.Value
		var err error
		switch op := st.n.Op().(type) {
		case *FusedOp:
			if v, err = op.do(p.vals[st.at], st.argv...); err != nil {
				return err // it names the kernel
			}
		default:
			if prev := p.vals[st.at]; st.prealloc != nil && prev != nil {
				v, err = st.prealloc.UsePreallocDo(prev, st.argv...)
			} else {
				v, err = op.Do(st.argv...)
			}
			if err != nil {
				return fmt.Errorf("fusion: %v (%v): %w", st.n.Name(), op, err)
			}
		}
		p.vals[st.at] = v
		if err := G.UnsafeLet(st.n, v); err != nil { // the rewritten graph holds its values, as under Gorgonia's machine
			return fmt.Errorf("fusion: %v: %w", st.n.Name(), err)
		}
	}
	for _, b := range p.back {
		if v := p.vals[b.at]; v != nil {
			if err := G.UnsafeLet(b.orig, v); err != nil {
				return fmt.Errorf("fusion: writing back %v: %w", b.orig.Name(), err)
			}
		}
	}
	return nil
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
