package fusion

import (
	"fmt"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
)

// The readable set is the set of the user's nodes that hold their value
// after RunAll. It is decided once, by planReadable; the partitioner writes
// each of its nodes out of its kernel (as the kernel's root or an extra
// output), and both backends write back exactly this set, no more.
//
// A node is readable when it is not an input or a constant (those hold the
// values the user gave them) and
//   - it is a root of the graph (nothing reads it: an output),
//   - it is the gradient (Deriv, read through w.Grad()) of an input, or of
//     a node that is readable by the other rules: the gradients of values
//     inside kernels have no value either (attention's S×S gradients never
//     exist: the backward kernels recompute them),
//   - it is a scalar (a loss or a metric: writing it costs nothing),
//   - the user named it (gorgonia.WithName: Gorgonia's own names have the
//     form "op(%a, %b)"),
//   - a gorgonia.Read statement reads it, or the user kept it
//     (WithKeep), or
//   - WithReadAll(true) is set: every node is readable.
//
// Everything else is inside a kernel and has no value of its own.

// planReadable is the readable stage.
func planReadable(c *compilation) error {
	keep := map[*G.Node]bool{}
	for i, n := range c.cfg.keep {
		if n == nil {
			return fmt.Errorf("fusion: WithKeep: node %d of %d is nil", i+1, len(c.cfg.keep))
		}
		if c.gr.Lookup(n) == nil {
			return fmt.Errorf("fusion: WithKeep: node %v is not in the graph being compiled (a node of another graph?)", n.Name())
		}
		keep[n] = true
	}
	for _, r := range c.reads {
		keep[r.n] = true
	}
	gradOf := map[*G.Node][]*graphpass.Node{} // a gradient, and the nodes it is the gradient of
	for _, n := range c.gr.Nodes {
		if d := n.G.Deriv(); d != nil {
			gradOf[d] = append(gradOf[d], n)
		}
		for _, of := range n.G.DerivOf() {
			if o := c.gr.Lookup(of); o != nil {
				gradOf[n.G] = append(gradOf[n.G], o)
			}
		}
	}
	base := map[*G.Node]bool{} // by the rules but the gradients'
	for _, n := range c.gr.Nodes {
		g := n.G
		base[g] = c.cfg.readAll || len(n.Users) == 0 || keep[g] || g.IsScalar() || !strings.Contains(g.Name(), "(%")
	}
	c.isRead = map[*G.Node]bool{}
	for _, n := range c.gr.Nodes {
		if n.Info.Kind == ops.Input || isConst(n.G) {
			continue
		}
		read := base[n.G]
		for _, of := range gradOf[n.G] {
			read = read || of.Info.Kind == ops.Input || base[of.G]
		}
		if read {
			c.isRead[n.G] = true
			c.readable = append(c.readable, n)
		}
	}
	return nil
}

// checkReadable: the set and the list agree, and hold imported nodes only.
func checkReadable(c *compilation) error {
	if len(c.isRead) != len(c.readable) {
		return fmt.Errorf("%d readable nodes listed, %d in the set", len(c.readable), len(c.isRead))
	}
	for _, n := range c.readable {
		if !c.isRead[n.G] || c.gr.Lookup(n.G) != n {
			return fmt.Errorf("readable node %v is not in the imported graph", n)
		}
	}
	return nil
}

func dumpReadable(c *compilation) string {
	var sb textBuf
	sb.f("%d of %d nodes readable after a run\n", len(c.readable), len(c.gr.Nodes))
	for _, n := range c.readable {
		sb.f("  %s\n", n.G.Name())
	}
	return sb.String()
}

// textBuf builds a dump's text.
type textBuf struct{ strings.Builder }

func (b *textBuf) f(format string, args ...any) { fmt.Fprintf(&b.Builder, format, args...) }
