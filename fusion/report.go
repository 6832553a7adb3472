package fusion

import (
	"fmt"
	"strings"
)

// Report says what a compilation did.
type Report struct {
	Backend Backend
	Fused   bool // false: fusion was turned off
	Groups  []GroupInfo
	Unfused []Unfused
	// HostOps counts, on the GPU backend, the launches of unknown ops that
	// ran on the CPU with copies in the last run.
	HostOps int
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
	if r.Backend == CUDA {
		fmt.Fprintf(&sb, "  ops run on the CPU with copies in the last run: %d\n", r.HostOps)
	}
	return sb.String()
}
