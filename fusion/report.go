package fusion

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
)

// Report says what a compilation did, in the user's terms: nodes by the
// names the user gave them (else by the op and its operands' names), ops
// as the Gorgonia functions the user called (ops.Info.Describe). It is made
// once, at compile time, and never changes: what runs did is Machine.Stats.
type Report struct {
	Backend Backend
	Fused   bool // false: fusion was turned off
	Groups  []GroupInfo
	Unfused []Unfused
	// NoValue are the nodes of the forward pass (the ones the user wrote)
	// that have no value after a run: inside a kernel, or not in the
	// readable set. WithKeep(node) or WithReadAll(true) gives them one.
	NoValue []string
	// NotComputed are the nodes nothing reads (not readable, their users
	// not computed either), which no kernel computes: Gorgonia's unsummed
	// contributions to an undifferentiated operand's gradient (readable.go).
	NotComputed []string
	// Recomputed are the nodes that no kernel writes: each kernel that
	// reads them computes them again from what it reads (a kernel whose
	// every value its readers can compute again so, exactly where a
	// comparison reads them, is no kernel: graphpass's rematerialisation;
	// a convolution's ReLU after its transpose to NCHW, which its max pool
	// and the pool's backward compute from the convolution's output).
	// FusedOps counts them.
	Recomputed []string
	// BytesSaved is the memory traffic a run saves by keeping
	// intermediates inside kernels: each value a kernel keeps to itself
	// would, unfused, be written once and read once.
	BytesSaved int64
	// Tuning is what WithAutotune chose, per kernel text (nil without it).
	Tuning []TuneResult
	// Stages are the compile's stages (fingerprint, import, readable,
	// partition, emit, verify, prepare, rewrite and, for a machine, load:
	// the backend's buffers and modules) in order, with the wall time each
	// took; on a hit of the front-end cache (Cached) fingerprint, rewrite
	// and load alone.
	Stages []StageTime
	// Cached: the stages from import to prepare came from the front-end
	// cache, an earlier compile of an identical graph in this process
	// (WithCompileCache).
	Cached bool
}

// StageTime is the wall time a stage of a compile took.
type StageTime struct {
	Stage   string
	Seconds float64
}

// GroupInfo is one kernel.
type GroupInfo struct {
	ID     int
	Kind   string
	Kernel string
	Root   string   // the node whose value the kernel computes
	Extra  []string // further outputs: values other kernels or the user read
	Ops    []string // the ops it runs, as the user called them, in order
	Nodes  []string // their nodes, in the same order
	// NoValue are the kernel's nodes of the forward pass that have no
	// value after a run (a subset of Nodes).
	NoValue []string
	// Recompute are values of other kernels that this one computes again
	// from what it reads instead of reading them (graphpass's
	// rematerialisation; attention's backward recomputes the scores).
	Recompute []string
	// Bytes is what the kernel moves per run: its inputs read once and its
	// outputs written once (a model: a product reads its operands' tiles
	// more than once, from cache).
	Bytes int64
	// Executor is, on the CPU backend, why the kernel runs on the
	// executor (codegen/cpu: several times slower) rather than as machine
	// code: what the code generator does not take in it, or that machine
	// code is off (WithNativeCPU(false), or a CPU or build without it).
	// Empty where it is machine code, and on the GPU backend.
	Executor string
}

// Unfused is a node that runs as Gorgonia runs it, and why.
type Unfused struct {
	Node, Op, Why string
}

// Kernels is the number of tile kernels.
func (r *Report) Kernels() int { return len(r.Groups) }

// FusedOps is the number of ops inside kernels: their members and the
// nodes only the kernels that read them compute (Recomputed).
func (r *Report) FusedOps() int {
	n := len(r.Recomputed)
	for _, g := range r.Groups {
		n += len(g.Ops)
	}
	return n
}

// KernelBytes is the memory traffic of the kernels per run: each one's
// inputs read once and its outputs written once (GroupInfo.Bytes).
func (r *Report) KernelBytes() int64 {
	var n int64
	for _, g := range r.Groups {
		n += g.Bytes
	}
	return n
}

// OnExecutor is the number of kernels that run on the CPU's executor
// rather than as machine code (GroupInfo.Executor).
func (r *Report) OnExecutor() int {
	n := 0
	for _, g := range r.Groups {
		if g.Executor != "" {
			n++
		}
	}
	return n
}

// ExtraOutputs is the number of values kernels write besides their roots.
func (r *Report) ExtraOutputs() int {
	n := 0
	for _, g := range r.Groups {
		n += len(g.Extra)
	}
	return n
}

// Summary is the report's first line: kernels, ops fused and left to
// Gorgonia, extra outputs, memory traffic saved per run.
func (r *Report) Summary() string {
	mode := "fused"
	if !r.Fused {
		mode = "fusion off"
	}
	s := fmt.Sprintf("tilefuse (%v, %s): %d kernels run %d ops; %d ops left to Gorgonia; %d extra outputs; the kernels move %s per run; %s less memory traffic per run",
		r.Backend, mode, r.Kernels(), r.FusedOps(), len(r.Unfused), r.ExtraOutputs(), bytesString(r.KernelBytes()), bytesString(r.BytesSaved))
	if n := r.OnExecutor(); n > 0 {
		s += fmt.Sprintf("; %d kernels on the CPU's executor, not machine code", n)
	}
	return s
}

func (r *Report) String() string {
	var sb strings.Builder
	sb.WriteString(r.Summary() + "\n")
	for _, g := range r.Groups {
		outs := g.Root
		if len(g.Extra) > 0 {
			outs += " (and " + strings.Join(g.Extra, ", ") + ")"
		}
		fmt.Fprintf(&sb, "  kernel %s (%s) → %s: %s\n", g.Kernel, g.Kind, outs, strings.Join(g.Ops, ", "))
		if len(g.Recompute) > 0 {
			fmt.Fprintf(&sb, "      computes again instead of reading: %s\n", strings.Join(g.Recompute, ", "))
		}
		if len(g.NoValue) > 0 {
			fmt.Fprintf(&sb, "      no value after a run: %s\n", strings.Join(g.NoValue, ", "))
		}
		if g.Executor != "" {
			fmt.Fprintf(&sb, "      on the executor, not machine code: %s\n", g.Executor)
		}
	}
	if len(r.Recomputed) > 0 {
		fmt.Fprintf(&sb, "  computed again by each kernel that reads them, written by none: %s\n", strings.Join(r.Recomputed, ", "))
	}
	for _, u := range r.Unfused {
		fmt.Fprintf(&sb, "  left to Gorgonia: %s (%s): %s\n", u.Node, u.Op, u.Why)
	}
	if len(r.NoValue) > 0 {
		fmt.Fprintf(&sb, "  %d of your nodes have no value after a run (listed per kernel, or above as computed again); keep one with fusion.WithKeep(node), or all with fusion.WithReadAll(true)\n", len(r.NoValue))
	}
	for _, t := range r.Tuning {
		fmt.Fprintf(&sb, "  autotuned %s\n", t)
	}
	if len(r.NotComputed) > 0 {
		fmt.Fprintf(&sb, "  not computed, as nothing reads them (gradients Gorgonia never sums; keep one with fusion.WithKeep): %s\n", strings.Join(r.NotComputed, ", "))
	}
	return sb.String()
}

func bytesString(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// buildReport is the report of a compilation, made once.
func buildReport(c *compilation) *Report {
	rep := &Report{Backend: c.cfg.backend, Fused: c.cfg.fuse}
	for _, r := range c.tuning {
		rep.Tuning = append(rep.Tuning, *r)
	}
	noValue := func(n *graphpass.Node) bool {
		return !c.isRead[n.G] && c.forward[n] && n.Info.Kind != ops.Input && n.Info.Kind != ops.Constant && !broadcastHelper(n)
	}
	for _, grp := range c.groups {
		gi := GroupInfo{ID: grp.ID, Kind: grp.Kind.String(), Kernel: c.kernels[grp].Tile.Name, Root: label(grp.Root)}
		if c.cfg.backend == CPU {
			gi.Executor = executorWhy(c.cfg.native, c.prepared[grp])
		}
		outs := map[*graphpass.Node]bool{grp.Root: true}
		for _, x := range grp.Extra {
			gi.Extra = append(gi.Extra, label(x))
			outs[x] = true
		}
		for _, x := range grp.Recompute {
			gi.Recompute = append(gi.Recompute, label(x))
		}
		for _, in := range grp.Inputs {
			gi.Bytes += nodeBytes(in)
		}
		for x := range outs {
			gi.Bytes += nodeBytes(x)
		}
		for _, m := range grp.Members {
			gi.Ops = append(gi.Ops, m.Info.Describe())
			gi.Nodes = append(gi.Nodes, label(m))
			if noValue(m) {
				gi.NoValue = append(gi.NoValue, label(m))
				rep.NoValue = append(rep.NoValue, label(m))
			}
			if !outs[m] && m.Info.Kind != ops.Reshape && m.Info.Kind != ops.Constant {
				rep.BytesSaved += 2 * int64(numel(m.Info.Shape)*max(1, m.Info.DType.Size()))
			}
		}
		rep.Groups = append(rep.Groups, gi)
	}
	for _, n := range c.gr.Nodes {
		if n.Dead() {
			rep.NotComputed = append(rep.NotComputed, label(n))
			continue
		}
		if n.Recomputed() { // inside the kernels that read it (a dissolved group's)
			rep.Recomputed = append(rep.Recomputed, label(n))
			if noValue(n) {
				rep.NoValue = append(rep.NoValue, label(n))
			}
			if n.Info.Kind != ops.Reshape {
				rep.BytesSaved += 2 * nodeBytes(n)
			}
			continue
		}
		if n.Group != nil || n.Info.Kind == ops.Input || n.Info.Kind == ops.Constant {
			continue
		}
		rep.Unfused = append(rep.Unfused, Unfused{Node: label(n), Op: n.Info.Describe(), Why: whyUnfused(c, n)})
		if noValue(n) {
			rep.NoValue = append(rep.NoValue, label(n))
		}
	}
	return rep
}

// nodeBytes is the size of n's value.
func nodeBytes(n *graphpass.Node) int64 {
	return int64(numel(n.Info.Shape) * max(1, n.Info.DType.Size()))
}

// broadcastHelper reports whether n is one of the nodes Gorgonia's
// Broadcast* functions insert (a Repeat, or a Reshape that only Repeats
// read): the user holds no handle on them.
func broadcastHelper(n *graphpass.Node) bool {
	switch n.Info.Kind {
	case ops.Repeat:
		return true
	case ops.Reshape:
		for _, u := range n.Users {
			if u.Info.Kind != ops.Repeat {
				return false
			}
		}
		return len(n.Users) > 0
	}
	return false
}

// whyUnfused is the one-line reason node n runs as Gorgonia runs it.
func whyUnfused(c *compilation, n *graphpass.Node) string {
	matmul, explicit := c.cfg.backend == CUDA || cpu.VectorDot(), c.cfg.matmul != nil
	if explicit {
		matmul = *c.cfg.matmul
	}
	if _, ok := graphpass.Oversized(n); ok {
		return n.Info.Why
	}
	switch k := n.Info.Kind; {
	case k == ops.Opaque:
		return "not in tilefuse's catalogue: " + n.Info.Why
	case !c.cfg.fuse:
		return "fusion is off (WithFusion(false)), and this op has no kernel of its own"
	case k.Product() && !matmul && explicit:
		return "matrix products are left to Gorgonia's BLAS: WithMatMulFusion(false)"
	case k.Product() && !matmul:
		return "matrix products are left to Gorgonia's BLAS by default on a CPU without AVX2 and FMA, where it is faster; WithMatMulFusion(true) fuses them"
	case k == ops.BatchedMatMul:
		return "a batched product whose operands are not 3-D with one batch size"
	case !graphpass.KernelOn(n, c.target) && k == ops.Transpose:
		return "on this CPU kernels run on the executor (not as machine code: no AVX2 and FMA, or -tags purego), which is not faster than Gorgonia at transposes"
	case !graphpass.KernelOn(n, c.target):
		return "on this CPU kernels run on the executor (not as machine code: no AVX2 and FMA, or -tags purego), which is far slower than Gorgonia at a window op's index arithmetic"
	case k == ops.SoftmaxGrad:
		return "the softmax's gradient over rows too long for one block (walked in blocks, it has no kernel yet)"
	}
	return fmt.Sprintf("no group kind takes a %v op here", n.Info.Kind)
}

// label names node n for the user: the name the user gave it, else its op
// as the user called it over its operands' names ("Mul(x, w)"), an operand
// without a name of its own as its op ("Tanh(…)").
func label(n *graphpass.Node) string {
	if n.Internal() {
		return n.String() + " (tilefuse's own)"
	}
	if named(n) {
		return n.G.Name()
	}
	args := make([]string, len(n.Inputs))
	for i, in := range n.Inputs {
		switch {
		case in.Internal():
			args[i] = in.String()
		case named(in):
			args[i] = in.G.Name()
		case in.Info.Kind == ops.Constant:
			args[i] = in.Info.Describe()
		default:
			args[i] = in.Info.Func() + "(…)"
		}
	}
	return n.Info.Func() + "(" + strings.Join(args, ", ") + ")"
}

// named reports whether n carries a name the user gave it (Gorgonia's own
// names have the form "op(%a, %b)"), or is an input.
func named(n *graphpass.Node) bool {
	return n.Info.Kind == ops.Input || !strings.Contains(n.G.Name(), "(%") && n.Info.Kind != ops.Constant
}

// executorWhy is GroupInfo.Executor for a kernel prepared as p on the
// CPU, where native asked for machine code (WithNativeCPU).
func executorWhy(native bool, p prepared) string {
	why := func(e *cpu.Exec) string {
		switch {
		case e == nil || e.Native():
			return ""
		case !native:
			return "machine code is off (WithNativeCPU(false))"
		case e.NativeErr() != nil:
			return e.NativeErr().Error()
		}
		return "no machine code for it"
	}
	if w := why(p.exec); w != "" {
		return w
	}
	if w := why(p.combine); w != "" {
		return "its combining kernel: " + w
	}
	return ""
}
