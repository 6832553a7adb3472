package fusion

import (
	"errors"
	"fmt"
	"math"
	"reflect"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
)

// Solver applies one of Gorgonia's solvers as fused kernels: one kernel
// launch per parameter tensor on the CPU, one per element type over every
// parameter tensor on the GPU, reads the value, the gradient and the
// optimizer state once and writes the new value and state, where Gorgonia's
// Step runs a dozen tensor operations, each a pass over memory. It
// satisfies gorgonia.Solver, so a training loop keeps calling
// s.Step(gorgonia.NodesToValueGrads(learnables)).
//
// The update is exactly Gorgonia v0.9.18's for its *tensor.Dense
// parameters, in the same order of operations and in the parameter's element
// type (float32 or float64), with the options it was built with: learn rate,
// L1 and L2 regularisation, batch size, clipping, eps, the betas (Adam),
// rho (RMSProp) and momentum, and Adam's bias correction. Like Gorgonia's,
// Step leaves every gradient zeroed. Scalar parameters (*gorgonia.F32,
// *gorgonia.F64 values, which Gorgonia updates by a different rule) are
// handed to the Gorgonia solver given to NewSolver, which keeps their state.
//
// The solver owns the optimizer state (Adam's means and variances of the
// gradients, the momentum's velocity, RMSProp's and AdaGrad's sums of
// squared gradients), created at the first Step and kept across steps;
// State reads it. Parameters are matched to their state by position in the
// model, as in Gorgonia: pass the same learnables in the same order at
// every step (a changed count, shape or type is an error).
//
// Where values live: on the CPU backend (and with a nil machine) the
// kernels run on the CPU executor over the parameters' own host memory, so
// n.Value() is current after every Step. On the CUDA backend they run on
// the GPU, on the machine's own buffers of the parameters and their
// gradients, with the state on the GPU too; from the first Step the device
// holds the parameters and their gradients (the learnables must be inputs
// of the machine's graph): a run neither uploads the parameters nor writes
// their gradients back, and both are brought to the host lazily, by
// m.Sync() and by m.Close(). Read a parameter's value or gradient after
// m.Sync() (after a Step the gradients are zero, as Gorgonia's Step leaves
// them). To change a parameter, Let a new tensor into its node, or write
// into its tensor after m.Sync(): the next run uploads it (a write is seen
// under the default WithInputCheck(CheckContents); under CheckLet call
// m.Touch). Between a Step and the next Sync the host tensor is stale and
// a write into it is not seen. m.Sync() is always safe to call and copies
// only what changed on the device since it last came down.
//
// On the CUDA backend Step returns once its launches are handed to the
// device's thread, not once they are enqueued: the host's next work (the
// loss read, the next batch) goes on beside them. An error enqueueing them
// (rare: the launches were prepared when the solver was bound) is returned
// by the machine's next RunAll, Step, Sync, Wait or Close. With a fused
// solver a run's gradients stay on the device, so the run itself returns
// once its loss and predictions have landed, its backward still running
// (WithAsyncRuns): a loop of Let, RunAll, Step and the loss read keeps the
// device busy from one step to the next, and m.Wait() waits for it.
//
// A Solver is not safe for concurrent use; Step it from the goroutine that
// runs the machine.
type Solver struct {
	cfg    solverConfig
	gs     G.Solver // the user's Gorgonia solver: steps the scalar parameters
	m      *Machine
	iter   int           // steps taken
	params []solverParam // by position in the model, from the first Step
	execs  map[tile.DType]*solverExec
	multis map[tile.DType]*tile.Kernel // the GPU's multi-tensor kernels
	closed bool
	// launch, if set, runs the kernels in place of the CPU executor (tests:
	// the PTX simulator, or a GPU through host buffers)
	launch func(k *tile.Kernel, grid tile.Grid, args ...any) error
	// dev: the machine's backend keeps values on a device and runs the
	// kernels there (bound at the first Step)
	dev   solverDevice
	bound deviceSolver
	nodes []*G.Node // the learnables bound to the device, by position
}

// solverDevice is a backend that keeps the machine's values on a device
// (the GPU backend): the solver's kernels run there, on its own buffers.
type solverDevice interface {
	// bindSolver takes over the learnables (inputs of the machine's graph):
	// from then on the device holds their values (see Solver).
	bindSolver(ps []deviceParam) (deviceSolver, error)
	// sync brings the host tensors of the values the device holds up to
	// date.
	sync() error
}

// deviceParam is a learnable for bindSolver with its kernels: the
// per-tensor one (a host-memory device's), and the multi-tensor one
// (buildSolverMultiKernel) of its element type, shared by the learnables of
// that type, with the configuration that builds its table.
type deviceParam struct {
	node   *G.Node
	kernel *tile.Kernel
	multi  *tile.Kernel
	cfg    solverConfig
	states int
}

// deviceSolver is a solver's learnables and state on a device.
type deviceSolver interface {
	// step launches every learnable's kernel with the scalars of its dtype
	step(scalars func(tile.DType) []any) error
	// state is a copy of learnable i's state
	state(i int) ([]tensor.Tensor, error)
	// close syncs the learnables' host values and frees the state; the
	// machine uploads them again at its runs
	close() error
}

// solverExec is a solver kernel compiled for the CPU executor.
type solverExec struct {
	k    *tile.Kernel
	exec *cpu.Exec
}

// solverParam is one parameter of the model, as seen at the first Step.
type solverParam struct {
	name   string
	dtype  tensor.Dtype
	shape  tensor.Shape
	scalar bool  // a scalar value: stepped by the Gorgonia solver
	state  []any // []float32 or []float64 per state tensor, zeros at first
}

// NewSolver returns a solver that applies gs's update rule, with gs's
// configuration, as fused kernels on m's backend. gs must be a fresh
// *gorgonia.VanillaSolver, *gorgonia.Momentum, *gorgonia.AdamSolver,
// *gorgonia.RMSPropSolver or *gorgonia.AdaGradSolver (one that has not
// stepped yet: its state is not carried over); anything else is an error.
// gs is kept to step scalar parameters, if the model has any: do not step it
// yourself. m may be nil: the solver then runs on the CPU over the host
// values, beside any machine (Gorgonia's own included).
func NewSolver(m *Machine, gs G.Solver) (*Solver, error) {
	cfg, err := readSolver(gs)
	if err != nil {
		return nil, err
	}
	if m != nil && m.err != nil {
		return nil, fmt.Errorf("fusion: NewSolver: the machine did not compile: %w", m.err)
	}
	sol := &Solver{cfg: cfg, gs: gs, m: m, execs: map[tile.DType]*solverExec{}}
	if m != nil {
		sol.dev, _ = m.be.(solverDevice)
	}
	return sol, nil
}

// Backend is where the solver's kernels run: the machine's backend.
func (s *Solver) Backend() Backend {
	if s.dev != nil {
		return CUDA
	}
	return CPU
}

// Step applies one update to every parameter of model, from its gradient,
// and zeroes the gradients, as the Gorgonia solver's Step does.
func (s *Solver) Step(model []G.ValueGrad) (err error) {
	defer recoverTo(&err, "solver step")
	if s.closed {
		return errors.New("fusion: solver step: the solver is closed")
	}
	if s.dev != nil {
		return s.stepDevice(model)
	}
	if s.params == nil {
		if err := s.bind(model); err != nil {
			return err
		}
	} else if len(model) != len(s.params) {
		return fmt.Errorf("fusion: solver step: %d parameters, the first step had %d: pass the same learnables in the same order at every step", len(model), len(s.params))
	}
	var scalars []G.ValueGrad
	type launch struct {
		p    *solverParam
		w, g any
	}
	launches := make([]launch, 0, len(model))
	for i, vg := range model {
		p := &s.params[i]
		wv, gv, err := weightGrad(vg)
		if err != nil {
			return err
		}
		if p.scalar {
			if _, ok := wv.(tensor.Tensor); ok {
				return fmt.Errorf("fusion: solver step: parameter %d (%s) was a scalar at the first step and is now %T", i, p.name, wv)
			}
			scalars = append(scalars, vg)
			continue
		}
		w, err := denseData(wv, p, i, vg, "value")
		if err != nil {
			return err
		}
		g, err := denseData(gv, p, i, vg, "gradient")
		if err != nil {
			return err
		}
		launches = append(launches, launch{p, w, g})
	}
	if len(scalars) > 0 {
		if err := s.gs.Step(scalars); err != nil {
			return fmt.Errorf("fusion: solver step: the scalar parameters, by %T: %w", s.gs, err)
		}
	}
	s.iter++
	args := map[tile.DType][]any{}
	// the learnables of each element type in one dispatch on the worker
	// pool (cpu.Exec.LaunchAll), as PyTorch's multi-tensor apply: a
	// model's many small ones (biases, heads) pay one wake-up of the
	// workers, not one each
	batches := map[tile.DType][]native.Launch1{}
	names := map[tile.DType][]string{}
	var order []tile.DType
	for _, l := range launches {
		d := tileDType(l.p.dtype)
		e, err := s.exec(d)
		if err != nil {
			return err
		}
		if args[d] == nil {
			args[d] = s.cfg.scalars(d, s.iter)
			order = append(order, d)
		}
		n := l.p.shape.TotalSize()
		a := append(append(append([]any{l.w, l.g}, l.p.state...), n), args[d]...)
		grid := tile.Grid{tile.CDiv(n, solverBlock)}
		if s.launch != nil {
			if err := s.launch(e.k, grid, a...); err != nil {
				return fmt.Errorf("fusion: solver step: %s: %w", l.p.name, err)
			}
			continue
		}
		batches[d] = append(batches[d], native.Launch1{Grid: grid, Args: a})
		names[d] = append(names[d], l.p.name)
	}
	for _, d := range order {
		if len(batches[d]) == 0 {
			continue
		}
		if i, err := s.execs[d].exec.LaunchAll(batches[d]); err != nil {
			return fmt.Errorf("fusion: solver step: %s: %w", names[d][i], err)
		}
	}
	return nil
}

// stepDevice is Step where the machine's backend holds the learnables.
func (s *Solver) stepDevice(model []G.ValueGrad) error {
	if s.m.be == nil {
		return errors.New("fusion: solver step: the machine is closed")
	}
	if s.params == nil {
		if err := s.bindDevice(model); err != nil {
			return err
		}
	} else if len(model) != len(s.params) {
		return fmt.Errorf("fusion: solver step: %d parameters, the first step had %d: pass the same learnables in the same order at every step", len(model), len(s.params))
	}
	var scalars []G.ValueGrad
	for i, vg := range model {
		p := &s.params[i]
		if n, ok := vg.(*G.Node); !ok || n != s.nodes[i] {
			return fmt.Errorf("fusion: solver step: parameter %d is %s, but %s at the first step: pass the same learnables in the same order at every step", i, describe(vg), p.name)
		}
		if p.scalar {
			scalars = append(scalars, vg)
		}
	}
	if len(scalars) > 0 {
		if err := s.gs.Step(scalars); err != nil {
			return fmt.Errorf("fusion: solver step: the scalar parameters, by %T: %w", s.gs, err)
		}
	}
	s.iter++
	byType := map[tile.DType][]any{}
	return s.bound.step(func(d tile.DType) []any {
		if byType[d] == nil {
			byType[d] = s.cfg.scalars(d, s.iter)
		}
		return byType[d]
	})
}

// bindDevice records the learnables at the first step and binds them to
// the machine's device: nodes of its graph, dense ones stepped there,
// scalars by the Gorgonia solver on the host (the machine uploads those at
// every run).
func (s *Solver) bindDevice(model []G.ValueGrad) error {
	var ps []deviceParam
	s.nodes = make([]*G.Node, len(model))
	params := make([]solverParam, len(model))
	for i, vg := range model {
		n, ok := vg.(*G.Node)
		if !ok {
			return fmt.Errorf("fusion: solver: parameter %d is a %T: on the %v backend the learnables are nodes of the machine's graph", i, vg, s.Backend())
		}
		s.nodes[i] = n
		p := &params[i]
		p.name = fmt.Sprintf("parameter %d (%s)", i, n.Name())
		switch v := n.Value().(type) {
		case *G.F32, *G.F64:
			p.scalar = true
			continue
		case *tensor.Dense:
			p.dtype, p.shape = v.Dtype(), v.Shape().Clone()
		default:
			return fmt.Errorf("fusion: solver: %s: a value of type %T: want a float32 or float64 *tensor.Dense", p.name, n.Value())
		}
		if p.dtype != tensor.Float32 && p.dtype != tensor.Float64 {
			return fmt.Errorf("fusion: solver: %s: %v elements: the fused solvers take float32 and float64", p.name, p.dtype)
		}
		e, err := s.exec(tileDType(p.dtype))
		if err != nil {
			return err
		}
		mk, err := s.multiKernel(tileDType(p.dtype))
		if err != nil {
			return err
		}
		ps = append(ps, deviceParam{node: n, kernel: e.k, multi: mk, cfg: s.cfg, states: s.cfg.kind.states()})
	}
	b, err := s.dev.bindSolver(ps)
	if err != nil {
		return err
	}
	s.bound, s.params = b, params
	return nil
}

// bind records the model's parameters at the first step and allocates their
// state.
func (s *Solver) bind(model []G.ValueGrad) error {
	params := make([]solverParam, len(model))
	for i, vg := range model {
		p := &params[i]
		p.name = fmt.Sprintf("parameter %d", i)
		if nm, ok := vg.(G.Namer); ok {
			p.name = fmt.Sprintf("parameter %d (%s)", i, nm.Name())
		}
		wv, _, err := weightGrad(vg)
		if err != nil {
			return err
		}
		t, ok := wv.(tensor.Tensor)
		if !ok {
			switch wv.(type) {
			case *G.F32, *G.F64:
				p.scalar = true
				continue
			}
			return fmt.Errorf("fusion: solver: %s: a value of type %T: want a float32 or float64 *tensor.Dense", p.name, wv)
		}
		p.dtype, p.shape = t.Dtype(), t.Shape().Clone()
		if p.dtype != tensor.Float32 && p.dtype != tensor.Float64 {
			return fmt.Errorf("fusion: solver: %s: %v elements: the fused solvers take float32 and float64", p.name, p.dtype)
		}
		if n := p.shape.TotalSize(); n > math.MaxInt32 {
			return fmt.Errorf("fusion: solver: %s: %d elements: at most %d per tensor", p.name, n, math.MaxInt32)
		}
		for range s.cfg.kind.states() {
			if p.dtype == tensor.Float32 {
				p.state = append(p.state, make([]float32, p.shape.TotalSize()))
			} else {
				p.state = append(p.state, make([]float64, p.shape.TotalSize()))
			}
		}
	}
	s.params = params
	return nil
}

// exec is the solver's kernel for elements of type d, built at first use.
func (s *Solver) exec(d tile.DType) (*solverExec, error) {
	if e := s.execs[d]; e != nil {
		return e, nil
	}
	k, err := buildSolverKernel(s.cfg, d)
	if err != nil {
		return nil, err
	}
	// as machine code where the machine's kernels are (WithNativeCPU; on by
	// default, so also without a machine): every op of the update is one
	// native code computes bit for bit as the reference does
	native := true
	if s.m != nil && s.m.c != nil {
		native = s.m.c.cfg.native
	}
	ex, err := cpuKernels.get(k.String(), k, native)
	if err != nil {
		return nil, fmt.Errorf("fusion: solver kernel %s: %w", k.Name, err)
	}
	e := &solverExec{k: k, exec: ex}
	s.execs[d] = e
	return e, nil
}

// multiKernel is the solver's multi-tensor kernel for elements of type d
// (the GPU's: one launch over every learnable of that type), built at
// first use.
func (s *Solver) multiKernel(d tile.DType) (*tile.Kernel, error) {
	if k := s.multis[d]; k != nil {
		return k, nil
	}
	k, err := buildSolverMultiKernel(s.cfg, d)
	if err != nil {
		return nil, err
	}
	if s.multis == nil {
		s.multis = map[tile.DType]*tile.Kernel{}
	}
	s.multis[d] = k
	return k, nil
}

// Kernels are the solver's kernels, for float32 and for float64 parameters:
// their IR, for inspection (tilefuse's dump format).
func (s *Solver) Kernels() ([]*tile.Kernel, error) {
	var ks []*tile.Kernel
	for _, d := range []tile.DType{tile.F32, tile.F64} {
		e, err := s.exec(d)
		if err != nil {
			return nil, err
		}
		ks = append(ks, e.k)
	}
	return ks, nil
}

// State is a copy of the optimizer state of parameter i (its position in
// the model), each tensor the parameter's shape: Adam's means and variances
// of the gradients, in that order; the momentum's velocity; RMSProp's and
// AdaGrad's running sums of squared gradients; nothing for the vanilla
// solver. Before the first Step there is none; a scalar parameter's state is
// kept by the Gorgonia solver and is not given here.
func (s *Solver) State(i int) ([]tensor.Tensor, error) {
	switch {
	case s.closed:
		return nil, errors.New("fusion: solver state: the solver is closed")
	case s.params == nil:
		return nil, errors.New("fusion: solver state: no state before the first Step")
	case i < 0 || i >= len(s.params):
		return nil, fmt.Errorf("fusion: solver state: parameter %d of %d", i, len(s.params))
	case s.params[i].scalar:
		return nil, fmt.Errorf("fusion: solver state: %s is a scalar: its state is kept by the Gorgonia solver", s.params[i].name)
	}
	if s.bound != nil { // on the device: the dense learnables in order
		j := 0
		for _, p := range s.params[:i] {
			if !p.scalar {
				j++
			}
		}
		return s.bound.state(j)
	}
	p := &s.params[i]
	var out []tensor.Tensor
	for _, st := range p.state {
		var back any
		switch st := st.(type) {
		case []float32:
			back = append([]float32(nil), st...)
		case []float64:
			back = append([]float64(nil), st...)
		}
		out = append(out, tensor.New(tensor.WithShape(p.shape.Clone()...), tensor.WithBacking(back)))
	}
	return out, nil
}

// Close releases the optimizer state; Step and State fail afterwards. The
// parameters' host values are brought up to date first where the device
// held them, and the machine uploads them at its runs again.
func (s *Solver) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.params = nil
	if s.bound != nil {
		return s.bound.close()
	}
	return nil
}

// Sync brings the host values up to date where the backend holds newer
// ones: on the CUDA backend the learnables a fused solver steps and their
// gradients (see Solver), each copied only if it changed on the device
// since it last came down. On the CPU backend the host values are the
// values: Sync does nothing.
func (m *Machine) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if sd, ok := m.be.(solverDevice); ok {
		return sd.sync()
	}
	return nil
}

// weightGrad is a parameter's value and gradient, with context on errors.
func weightGrad(vg G.ValueGrad) (w, g G.Value, err error) {
	w = vg.Value()
	if w == nil {
		return nil, nil, fmt.Errorf("fusion: solver step: %s has no value", describe(vg))
	}
	if g, err = vg.Grad(); err != nil {
		return nil, nil, fmt.Errorf("fusion: solver step: %s has no gradient: %w", describe(vg), err)
	}
	if g == nil {
		return nil, nil, fmt.Errorf("fusion: solver step: %s has no gradient", describe(vg))
	}
	return w, g, nil
}

func describe(vg G.ValueGrad) string {
	if nm, ok := vg.(G.Namer); ok {
		return nm.Name()
	}
	return fmt.Sprintf("a %T", vg)
}

// denseData is the contiguous host memory of v, checked against the
// parameter as it was at the first step.
func denseData(v G.Value, p *solverParam, i int, vg G.ValueGrad, what string) (any, error) {
	name := fmt.Sprintf("parameter %d (%s)", i, describe(vg))
	t, ok := v.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("fusion: solver step: %s: its %s is a %T: want a *tensor.Dense", name, what, v)
	}
	if t.Dtype() != p.dtype || t.Shape().TotalSize() != p.shape.TotalSize() {
		return nil, fmt.Errorf("fusion: solver step: %s: its %s is %v %v, but %s was %v %v at the first step: pass the same learnables in the same order at every step", name, what, t.Dtype(), t.Shape(), p.name, p.dtype, p.shape)
	}
	if t.IsMaterializable() {
		return nil, fmt.Errorf("fusion: solver step: %s: its %s is a view of another tensor: the solver updates contiguous tensors in place", name, what)
	}
	switch d := t.Data().(type) {
	case []float32:
		return d, nil
	case []float64:
		return d, nil
	}
	return nil, fmt.Errorf("fusion: solver step: %s: its %s holds %T", name, what, t.Data())
}

func tileDType(d tensor.Dtype) tile.DType {
	if d == tensor.Float32 {
		return tile.F32
	}
	return tile.F64
}

// readSolver reads a Gorgonia solver's configuration. Its fields are
// unexported: they are read by reflection, by the names Gorgonia v0.9.18
// gives them, and a missing field is an error rather than a guess.
func readSolver(gs G.Solver) (solverConfig, error) {
	var c solverConfig
	var floats map[string]*float64
	var bools map[string]*bool
	switch gs.(type) {
	case *G.VanillaSolver:
		c.kind = solverVanilla
	case *G.Momentum:
		c.kind = solverMomentum
	case *G.AdamSolver:
		c.kind = solverAdam
	case *G.RMSPropSolver:
		c.kind = solverRMSProp
	case *G.AdaGradSolver:
		c.kind = solverAdaGrad
	case nil:
		return c, errors.New("fusion: NewSolver: no Gorgonia solver given")
	default:
		return c, fmt.Errorf("fusion: NewSolver: %T is not supported: the fused solvers are Gorgonia's VanillaSolver, Momentum, AdamSolver, RMSPropSolver and AdaGradSolver", gs)
	}
	v := reflect.ValueOf(gs)
	if v.IsNil() {
		return c, fmt.Errorf("fusion: NewSolver: a nil %T", gs)
	}
	v = v.Elem()
	switch c.kind {
	case solverVanilla, solverMomentum, solverAdam:
		floats = map[string]*float64{"eta": &c.eta, "clip": &c.clip, "l1reg": &c.l1reg, "l2reg": &c.l2reg, "batch": &c.batch}
		bools = map[string]*bool{"useClip": &c.useClip, "useL1Reg": &c.useL1, "useL2Reg": &c.useL2}
		switch c.kind {
		case solverMomentum:
			floats["momentum"] = &c.momentum
		case solverAdam:
			floats["eps"], floats["beta1"], floats["beta2"] = &c.eps, &c.beta1, &c.beta2
		}
	case solverRMSProp:
		floats = map[string]*float64{"eta": &c.eta, "eps": &c.eps, "decay": &c.decay, "clip": &c.clip, "l2reg": &c.l2reg}
		bools = map[string]*bool{"useClip": &c.useClip, "useL2Reg": &c.useL2}
	case solverAdaGrad:
		floats = map[string]*float64{"eta": &c.eta, "eps": &c.eps, "clip": &c.clip, "l2reg": &c.l2reg}
		bools = map[string]*bool{"useClip": &c.useClip, "useL2Reg": &c.useL2}
	}
	field := func(name string, k reflect.Kind) (reflect.Value, error) {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != k {
			return f, fmt.Errorf("fusion: NewSolver: %T has no %v field %s: tilefuse reads the configuration of Gorgonia v0.9.18's solvers", gs, k, name)
		}
		return f, nil
	}
	for name, p := range floats {
		f, err := field(name, reflect.Float64)
		if err != nil {
			return c, err
		}
		*p = f.Float()
		if math.IsNaN(*p) {
			return c, fmt.Errorf("fusion: NewSolver: %T: %s is NaN", gs, name)
		}
	}
	for name, p := range bools {
		f, err := field(name, reflect.Bool)
		if err != nil {
			return c, err
		}
		*p = f.Bool()
	}
	// state: a solver that has stepped has moments the fused solver does not
	// take over
	if c.kind != solverVanilla {
		f, err := field("cache", reflect.Slice)
		if err != nil {
			return c, err
		}
		stepped := f.Len() > 0
		if c.kind == solverAdam {
			it, err := field("iter", reflect.Int)
			if err != nil {
				return c, err
			}
			stepped = stepped || it.Int() != 0
		}
		if stepped {
			return c, fmt.Errorf("fusion: NewSolver: the %T has stepped already: give a fresh one (its state is not carried over)", gs)
		}
	}
	return c, nil
}
