package fusion

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// Compiled is a graph after fusion.
type Compiled struct {
	// Graph is the rewritten graph: one FusedOp node per group.
	Graph  *G.ExprGraph
	Report *Report
	rw     *graphpass.Rewritten
	cfg    config
	read   map[*G.Node]bool // original nodes the user can read
	log    *kernelLog       // the CPU backend's kernel times (WithProfile)
	reads  []read           // gorgonia.Read statements of the user's graph
}

// read is a gorgonia.Read(n, into) of the user's graph: after each run the
// machine writes n's value into *into, as Gorgonia's machine does.
type read struct {
	n    *G.Node
	into *G.Value
}

// Compile fuses g: it imports it, partitions it, writes a kernel per group
// and replays it into a new graph. g itself is not changed. Call it after
// gorgonia.Grad, so that the backward pass fuses too.
func Compile(g *G.ExprGraph, opts ...Option) (c *Compiled, err error) {
	defer recoverTo(&err, "compiling")
	cfg := config{fuse: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.backend == CUDA && newGPUBackend == nil {
		return nil, Available(CUDA)
	}
	var reads []read
	for _, n := range g.AllNodes() {
		if ops.IsSet(n.Op()) {
			return nil, fmt.Errorf("fusion: %v: gorgonia.Set statements are not supported (Gorgonia v0.9.18's own tape machine leaves the node unchanged); Let new values between runs, or use a solver", n.Name())
		}
		if into, ok := ops.ReadTarget(n.Op()); ok {
			ch := g.From(n.ID())
			if !ch.Next() {
				return nil, fmt.Errorf("fusion: %v reads no node", n.Name())
			}
			x := ch.Node().(*G.Node)
			reads = append(reads, read{x, into})
			cfg.keep = append(cfg.keep, x) // it must have a value of its own
		}
	}
	gr, err := graphpass.Import(g)
	if err != nil {
		return nil, fmt.Errorf("fusion: %w", err)
	}
	matmul := cfg.backend == CUDA || tile.VectorDot()
	if cfg.matmul != nil {
		matmul = *cfg.matmul
	}
	groups := graphpass.Partition(gr, graphpass.Options{WriteOut: writeOut(gr, cfg.keep), MaxGroup: cfg.maxGroup, Off: !cfg.fuse, MatMul: matmul})
	kernels := map[*graphpass.Group]*graphpass.Kernel{}
	rep := &Report{Backend: cfg.backend, Fused: cfg.fuse}
	for _, grp := range groups {
		k, err := graphpass.Emit(grp, cfg.precision)
		if err != nil {
			return nil, fmt.Errorf("fusion: %w", err)
		}
		kernels[grp] = k
		if cfg.dumpDir != "" {
			if err := dumpKernel(cfg.dumpDir, k.Tile); err != nil {
				return nil, err
			}
		}
		gi := GroupInfo{ID: grp.ID, Kind: grp.Kind.String(), Kernel: k.Tile.Name, Root: grp.Root.G.Name()}
		for _, m := range grp.Members {
			gi.Ops = append(gi.Ops, m.Info.Name)
		}
		for _, x := range grp.Extra {
			gi.Extra = append(gi.Extra, x.G.Name())
		}
		rep.Groups = append(rep.Groups, gi)
	}
	for _, n := range gr.Nodes {
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
	var log *kernelLog
	if cfg.profile && cfg.backend == CPU {
		log = &kernelLog{}
	}
	rw, err := graphpass.Rewrite(gr, groups, kernels, func(grp *graphpass.Group, k *graphpass.Kernel) (G.Op, error) {
		op, err := newFusedOp(grp, k)
		if op != nil && !op.view {
			op.log = log
		}
		return op, err
	}, newPartOp, func(grp *graphpass.Group, k *graphpass.Kernel) (G.Value, error) {
		op, err := newFusedOp(grp, k) // constants only: evaluate it once, now
		if err != nil {
			return nil, err
		}
		return op.Do()
	}, guard)
	if err != nil {
		return nil, fmt.Errorf("fusion: %w", err)
	}
	return &Compiled{Graph: rw.Graph, Report: rep, rw: rw, cfg: cfg, read: readSet(gr, cfg), log: log, reads: reads}, nil
}

// writeOut is what the partition writes out even where it could fuse: what
// the user keeps (WithKeep, gorgonia.Read) or named, gradients (read
// through w.Grad()) and the nodes they are gradients of, scalars (losses
// and metrics, which cost nothing to write), and the graph's outputs.
func writeOut(gr *graphpass.Graph, kept []*G.Node) map[*G.Node]bool {
	keep := map[*G.Node]bool{}
	for _, n := range kept {
		keep[n] = true
	}
	for _, n := range gr.Nodes {
		if d := n.G.Deriv(); d != nil {
			keep[d] = true
		}
		if len(n.G.DerivOf()) > 0 {
			keep[n.G] = true
		}
	}
	out := map[*G.Node]bool{}
	for _, n := range gr.Nodes {
		if keep[n.G] || userNamed(n.G) || len(n.Info.Shape) == 0 || len(n.Users) == 0 {
			out[n.G] = true
		}
	}
	return out
}

// userNamed reports whether the node carries a name the user gave it
// (Gorgonia's own names have the form "op(%a, %b)").
func userNamed(n *G.Node) bool {
	return !strings.Contains(n.Name(), "(%") && n.Op() != nil && !ops.IsConst(n.Op()) && !ops.IsSizeOf(n.Op())
}

// readSet is what the user can read after a run: the graph's outputs,
// gradients, kept and named nodes, and scalars.
func readSet(gr *graphpass.Graph, cfg config) map[*G.Node]bool {
	keep := map[*G.Node]bool{}
	for _, n := range cfg.keep {
		keep[n] = true
	}
	out := map[*G.Node]bool{}
	for _, n := range gr.Nodes {
		g := n.G
		if n.Info.Kind == ops.Input {
			continue
		}
		if len(n.Users) == 0 || keep[g] || len(g.DerivOf()) > 0 || g.IsScalar() || !strings.Contains(g.Name(), "(%") {
			out[g] = true
		}
		if d := g.Deriv(); d != nil {
			out[d] = true
		}
	}
	return out
}

// gpuBackend runs a compiled graph on a GPU (the tilefuse_cuda build sets newGPUBackend).
type gpuBackend interface {
	run(c *Compiled) error
	deviceTime() float64
	kernelTimes() []KernelTime
	close() error
}

// KernelTime is one kernel's time in a run (WithProfile): device time on
// the GPU, wall time on the CPU.
type KernelTime struct {
	Kernel  string
	Ops     []string // the ops it runs
	Seconds float64
}

var (
	newGPUBackend func(c *Compiled) (gpuBackend, error)
	openDevice    func() error // opens the shared GPU (tilefuse_cuda build)
)

// Available says whether backend b can run here: the CPU always can; CUDA
// needs the tagged build and a GPU. For CUDA it creates the process's GPU
// context now (once; machines share it), so that the first NewTapeMachine
// does not pay for it.
func Available(b Backend) error {
	if b != CUDA {
		return nil
	}
	if openDevice == nil {
		return errors.New("fusion: the CUDA backend needs the tagged build: go build -tags tilefuse_cuda (see README)")
	}
	return openDevice()
}

// Machine runs a fused graph: a drop-in for Gorgonia's tape machine.
type Machine struct {
	orig *G.ExprGraph
	c    *Compiled
	cpu  *cpuPlan
	gpu  gpuBackend
	err  error
}

// NewTapeMachine compiles g and returns a machine that runs it. A compile
// error is kept and returned by RunAll (and Err), never a panic.
func NewTapeMachine(g *G.ExprGraph, opts ...Option) *Machine {
	m := &Machine{orig: g}
	c, err := Compile(g, opts...)
	if err != nil {
		m.err = err
		return m
	}
	m.c = c
	if c.cfg.backend == CUDA {
		gb, err := newGPUBackend(c)
		if err != nil {
			m.err = err
			return m
		}
		m.gpu = gb
		return m
	}
	if m.cpu, err = newCPUPlan(c); err != nil {
		m.err = err
	}
	return m
}

// Err is the compile error, if any.
func (m *Machine) Err() error { return m.err }

// Report says what fused (nil if compilation failed).
func (m *Machine) Report() *Report {
	if m.c == nil {
		return nil
	}
	return m.c.Report
}

// Compiled is the fused graph (nil if compilation failed).
func (m *Machine) Compiled() *Compiled { return m.c }

// Let binds a value to an input node of the user's graph (as gorgonia.Let).
func (m *Machine) Let(n *G.Node, v interface{}) error { return G.Let(n, v) }

// RunAll runs the graph: the user's input values go in, and afterwards
// every node of the user's graph that has a value in the fused graph holds it.
func (m *Machine) RunAll() (err error) {
	defer recoverTo(&err, "running")
	if m.err != nil {
		return m.err
	}
	if m.gpu != nil {
		err = m.gpu.run(m.c)
	} else {
		if m.c.log != nil {
			m.c.log.reset()
		}
		err = m.cpu.run()
	}
	if err != nil {
		return err
	}
	for _, r := range m.c.reads {
		*r.into = r.n.Value()
	}
	return nil
}

// DeviceTime is, on the CUDA backend, the device time of the last run's
// compute, measured with events from before the first kernel to after the
// last: inputs already on the device, results not yet copied back (host ops
// and their copies in between count). ok is false on the CPU backend or
// before a run.
func (m *Machine) DeviceTime() (seconds float64, ok bool) {
	if m.gpu == nil {
		return 0, false
	}
	t := m.gpu.deviceTime()
	return t, t > 0
}

// KernelTimes is, with WithProfile, each kernel's time in the last run, in
// launch order: device time between events on the CUDA backend, wall time of
// the op (output allocation included) on the CPU. It is nil without
// WithProfile.
func (m *Machine) KernelTimes() []KernelTime {
	switch {
	case m.gpu != nil:
		return m.gpu.kernelTimes()
	case m.c != nil && m.c.log != nil:
		return m.c.log.get()
	}
	return nil
}

// Reset readies the machine for another run. Every run starts afresh, so
// there is nothing to undo; it is here so that the machine drops in for
// Gorgonia's.
func (m *Machine) Reset() {}

// Close releases the machine.
func (m *Machine) Close() error {
	if m.gpu != nil {
		return m.gpu.close()
	}
	m.cpu = nil
	return nil
}

// dumpKernel writes a generated kernel's IR to dir/<kernel>.tile; with
// TILEFUSE_DUMP set, codegen writes its later stages beside it.
func dumpKernel(dir string, k *tile.Kernel) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fusion: dump: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, k.Name+".tile"), []byte(k.String()), 0o644); err != nil {
		return fmt.Errorf("fusion: dump: %w", err)
	}
	return nil
}

// recoverTo turns a panic below the API on this goroutine (Gorgonia panics in
// places, as in NewConstant) into an error. A panic inside an op that
// Gorgonia's tape machine runs happens on that machine's own goroutine and
// cannot be caught here.
func recoverTo(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("fusion: %s: %v", what, r)
	}
}
