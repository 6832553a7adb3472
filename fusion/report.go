package fusion

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/ops"
)

// Report says what a compilation did.
type Report struct {
	Backend Backend
	Fused   bool // false: fusion was turned off
	Groups  []GroupInfo
	Unfused []Unfused
}

// GroupInfo is one kernel.
type GroupInfo struct {
	ID     int
	Kind   string
	Kernel string
	Root   string
	Extra  []string // further outputs: values other kernels or the user read
	Ops    []string
}

// Unfused is a node that runs as Gorgonia runs it, and why.
type Unfused struct {
	Node, Op, Why string
}

// Kernels is the number of tile kernels.
func (r *Report) Kernels() int { return len(r.Groups) }

// FusedOps is the number of ops inside kernels.
func (r *Report) FusedOps() int {
	n := 0
	for _, g := range r.Groups {
		n += len(g.Ops)
	}
	return n
}

func (r *Report) String() string {
	var sb strings.Builder
	mode := "fused"
	if !r.Fused {
		mode = "fusion off"
	}
	fmt.Fprintf(&sb, "tilefuse report (%v, %s): %d ops in %d kernels; %d nodes left to Gorgonia\n", r.Backend, mode, r.FusedOps(), r.Kernels(), len(r.Unfused))
	for _, g := range r.Groups {
		outs := g.Root
		if len(g.Extra) > 0 {
			outs += " (and " + strings.Join(g.Extra, ", ") + ")"
		}
		fmt.Fprintf(&sb, "  kernel %s (%s) → %s: %s\n", g.Kernel, g.Kind, outs, strings.Join(g.Ops, ", "))
	}
	for _, u := range r.Unfused {
		fmt.Fprintf(&sb, "  not fused: %s [%s]: %s\n", u.Node, u.Op, u.Why)
	}
	return sb.String()
}

// buildReport is the report of a compilation, made once.
func buildReport(c *compilation) *Report {
	rep := &Report{Backend: c.cfg.backend, Fused: c.cfg.fuse}
	for _, grp := range c.groups {
		gi := GroupInfo{ID: grp.ID, Kind: grp.Kind.String(), Kernel: c.kernels[grp].Tile.Name, Root: grp.Root.G.Name()}
		for _, m := range grp.Members {
			gi.Ops = append(gi.Ops, m.Info.Name)
		}
		for _, x := range grp.Extra {
			gi.Extra = append(gi.Extra, x.String())
		}
		rep.Groups = append(rep.Groups, gi)
	}
	for _, n := range c.gr.Nodes {
		why := n.Info.Why
		switch {
		case n.Group != nil || n.Info.Kind == ops.Input || n.Info.Kind == ops.Constant:
			continue
		case n.Info.Kind == ops.MatMul:
			why = "a matrix product left to Gorgonia (WithMatMulFusion: off by default on a CPU without AVX2 and FMA, where BLAS is faster)"
		case n.Info.Kind == ops.BatchedMatMul:
			why = "a batched product left to Gorgonia (WithMatMulFusion: off by default on a CPU without AVX2 and FMA, where BLAS is faster; under it, 3-D products fuse, attention into one kernel)"
		case why == "":
			why = "not fused: " + n.Info.Kind.String()
		}
		rep.Unfused = append(rep.Unfused, Unfused{Node: n.G.Name(), Op: n.Info.Name, Why: why})
	}
	return rep
}
