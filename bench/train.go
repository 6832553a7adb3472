package bench

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// Train makes a Spec a training step, timed whole as a user writes it: the
// batch bound (gorgonia.Let), RunAll, the solver's Step over the
// learnables, and the loss read. Gorgonia's machine and the unfused
// machine step with the Gorgonia solver itself; the fused machine with
// fusion.NewSolver over the same configuration (one kernel launch per element type on the GPU).
// Each mode trains its own copy of the learnables from the same start, so
// the first run's outputs (loss and gradients, before any step) are
// checked against the unfused ones as in Graph.
type Train struct {
	Learnables G.Nodes         // inputs of the spec that the solver updates
	Loss       *G.Node         // read at every step
	Solver     func() G.Solver // a fresh Gorgonia solver of the configuration
}

// trainMode is one mode's machine, solver and learnables.
type trainMode struct {
	m          *Measurement
	vm         machine
	solver     G.Solver
	params     map[*G.Node]tensor.Tensor // this mode's learnables
	times, dev []float64
	host       []float64 // Stats.HostSeconds of the timed steps (GPU)
	solverDev  []float64 // Stats.SolverDeviceTime of the timed steps (GPU, fused)
	upDev      []float64 // Stats.UploadDeviceTime of the same steps
	phases     []fusion.RunPhases
	warm       time.Duration // the last warm-up step's time (Graph's modeRun.warm)
}

// trainGraph is Graph for a training step (s.Train set).
func trainGraph(s Spec, o Options) (res *Result, err error) {
	tr := s.Train
	if tr.Loss == nil || len(tr.Learnables) == 0 || tr.Solver == nil {
		return nil, fmt.Errorf("bench: %s: a training step needs its loss, learnables and solver", s.Name)
	}
	learnable := map[*G.Node]bool{}
	for _, n := range tr.Learnables {
		if _, ok := s.Inputs[n]; !ok {
			return nil, fmt.Errorf("bench: %s: learnable %s is not an input of the spec", s.Name, n.Name())
		}
		learnable[n] = true
	}
	// the batch (every other input) rotates through copies, as in Graph
	var inBytes int64
	for n, v := range s.Inputs {
		if n == nil || v == nil {
			return nil, fmt.Errorf("bench: %s: a nil input", s.Name)
		}
		inBytes += int64(v.MemSize())
	}
	sets := make([]map[*G.Node]tensor.Tensor, o.Rotate)
	for i := range sets {
		sets[i] = map[*G.Node]tensor.Tensor{}
		for n, v := range s.Inputs {
			if learnable[n] {
				continue
			}
			if i > 0 {
				v = v.Clone().(tensor.Tensor)
			}
			sets[i][n] = v
		}
	}
	res = &Result{Name: s.Name, Size: s.Size, Backend: o.Backend.String(), Flops: s.Flops, Train: true}
	var modes []*trainMode
	defer func() {
		for _, r := range modes {
			r.vm.Close()
			if c, ok := r.solver.(interface{ Close() error }); ok {
				c.Close()
			}
		}
	}()
	// step is one training step of mode r as the user writes it: the batch
	// up, RunAll, (check), the solver's step, the loss read
	step := func(r *trainMode, i int, check func() error) error {
		for n, v := range r.params { // the mode's own learnables (the modes share the graph)
			if err := G.Let(n, v); err != nil {
				return err
			}
		}
		for n, v := range sets[i%len(sets)] {
			if err := G.Let(n, v); err != nil {
				return err
			}
		}
		r.vm.Reset()
		if err := r.vm.RunAll(); err != nil {
			return err
		}
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		if err := r.solver.Step(G.NodesToValueGrads(tr.Learnables)); err != nil {
			return err
		}
		if l := scalarOf(tr.Loss.Value()); math.IsNaN(l) {
			return fmt.Errorf("the loss is NaN")
		}
		return nil
	}
	var ref [][]float64
	for _, mode := range []string{Unfused, Gorgonia, Fused} {
		if mode == Gorgonia && o.SkipGorgonia {
			continue
		}
		if o.Progress != nil {
			o.Progress(mode)
		}
		r := &trainMode{m: &Measurement{Mode: mode, Runs: o.Runs}, params: map[*G.Node]tensor.Tensor{}}
		for _, n := range tr.Learnables {
			r.params[n] = s.Inputs[n].Clone().(tensor.Tensor)
		}
		switch mode {
		case Gorgonia:
			r.vm, r.solver = G.NewTapeMachine(s.Graph), tr.Solver()
		default:
			opts := append([]fusion.Option{fusion.WithBackend(o.Backend), fusion.WithFusion(mode == Fused)}, o.FusionOptions...)
			t0 := time.Now()
			fm := fusion.NewTapeMachine(s.Graph, opts...)
			r.m.CompileCold = time.Since(t0).Seconds()
			if err := fm.Err(); err != nil {
				return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, mode, err)
			}
			r.m.StagesCold = fm.Report().Stages
			fm.Close() // and again, from the caches (as Graph measures it)
			t0 = time.Now()
			fm = fusion.NewTapeMachine(s.Graph, opts...)
			r.m.CompileCached = time.Since(t0).Seconds()
			r.m.StagesCached = fm.Report().Stages
			if err := fm.Err(); err != nil {
				return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, mode, err)
			}
			r.m.Kernels = fm.Report().Kernels() + len(fm.Report().Unfused)
			r.vm, r.solver = fm, tr.Solver()
			if mode == Fused {
				fs, err := fusion.NewSolver(fm, tr.Solver())
				if err != nil {
					fm.Close()
					return nil, fmt.Errorf("bench: %s: %w", s.Name, err)
				}
				r.solver = fs
			}
		}
		modes = append(modes, r)
		check := func() error {
			got := make([][]float64, len(s.Outputs))
			for i, n := range s.Outputs {
				v, err := floats(n)
				if err != nil {
					return err
				}
				got[i] = v
			}
			if mode == Unfused {
				ref = got
			}
			var err error
			r.m.MaxErr, err = compare(got, ref, o.Tol)
			if err != nil && mode == Fused {
				return fmt.Errorf("fused result differs from the unfused one: %w", err)
			}
			return nil
		}
		if err := step(r, 0, check); err != nil {
			return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, mode, err)
		}
		for i, t0 := 1, time.Now(); time.Since(t0) < o.WarmUp; i++ {
			t1 := time.Now()
			if err := step(r, i, nil); err != nil {
				return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, mode, err)
			}
			r.warm = time.Since(t1)
		}
	}
	// timed is k timed steps of r back to back (input sets i to i+k-1),
	// until the device has finished them (a fused machine's RunAll may
	// return while its backward kernels and the solver's step still run:
	// fusion.WithAsyncRuns): the time a step is their wall clock over k;
	// the statistics are the last step's
	timed := func(r *trainMode, i, k int) error {
		t0 := time.Now()
		for j := range k {
			if err := step(r, i+j, nil); err != nil {
				return fmt.Errorf("bench: %s: %s: %w", s.Name, r.m.Mode, err)
			}
		}
		if w, ok := r.vm.(waiter); ok {
			if err := w.Wait(); err != nil {
				return fmt.Errorf("bench: %s: %s: %w", s.Name, r.m.Mode, err)
			}
		}
		r.times = append(r.times, time.Since(t0).Seconds()/float64(k))
		copiesOf(r.vm, r.m, &r.host)
		if sm, ok := r.vm.(statser); ok && r.m.Mode == Fused {
			st := sm.Stats()
			if d := st.SolverDeviceTime; d > 0 {
				r.solverDev = append(r.solverDev, d)
				r.upDev = append(r.upDev, st.UploadDeviceTime)
				r.phases = append(r.phases, st.Phases)
			}
		}
		if dt, ok := r.vm.(deviceTimer); ok {
			if d, ok := dt.DeviceTime(); ok {
				r.dev = append(r.dev, d)
			}
		}
		return nil
	}
	turns := o.Runs
	if o.Loop { // each mode's steps back to back, as a user's loop (Options.Loop), timed loopSteps at a time
		for _, r := range modes {
			runtime.GC()
			for i := range o.Runs {
				if err := timed(r, i*loopSteps, loopSteps); err != nil {
					return nil, err
				}
			}
		}
		turns = 0
	}
	// timed steps, the modes taking turns (see Graph: on the CPU one
	// untimed step between the collection and the timed one, unless
	// ColdCPU or the mode's warm-up step took warmLong or more: the
	// untimed steps of Gorgonia's encoder_train large, ~1 s each on the
	// 2-core VM, were ~5 s of the main job's ~55)
	for i := range turns {
		for _, r := range modes {
			runtime.GC()
			if untimedFirst(o, r.warm) {
				if err := step(r, i+len(sets)-1, nil); err != nil {
					return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, r.m.Mode, err)
				}
				r.m.UntimedRuns++
			}
			if o.Backend == fusion.CUDA && r.m.Mode != Gorgonia {
				for t0 := time.Now(); time.Since(t0) < gpuWarm; { // the set before the timed step's, as Graph's
					if err := step(r, i+len(sets)-1, nil); err != nil {
						return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, r.m.Mode, err)
					}
				}
				if w, ok := r.vm.(waiter); ok { // the timed step starts with the device idle
					if err := w.Wait(); err != nil {
						return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, r.m.Mode, err)
					}
				}
			}
			if err := timed(r, i, 1); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range modes {
		m := r.m
		slices.Sort(r.times)
		m.Median, m.Min, m.Max = median(r.times), r.times[0], r.times[len(r.times)-1]
		if len(r.host) > 0 {
			slices.Sort(r.host)
			m.HostMedian = median(r.host)
		}
		if len(r.dev) == len(r.times) {
			slices.Sort(r.dev)
			m.DeviceMedian, m.DeviceMin, m.DeviceMax = median(r.dev), r.dev[0], r.dev[len(r.dev)-1]
			m.DeviceInRun = m.DeviceMedian
		}
		if len(r.solverDev) == len(r.times) {
			slices.Sort(r.solverDev)
			m.SolverDevice = median(r.solverDev)
			slices.Sort(r.upDev)
			m.UploadDevice = median(r.upDev)
			m.Phases = medianPhases(r.phases)
		}
		m.GBps = float64(inBytes+outBytes(s.Outputs)) / m.Time() / 1e9
		if s.Flops > 0 {
			m.GFLOPs = float64(s.Flops) / m.Time() / 1e9
		}
		res.Modes = append(res.Modes, m)
	}
	slices.SortFunc(res.Modes, func(a, b *Measurement) int { return slices.Index(Modes, a.Mode) - slices.Index(Modes, b.Mode) })
	res.Bytes = inBytes + outBytes(s.Outputs)
	return res, nil
}

// loopSteps is how many steps a timed stretch of a training loop has
// (Options.Loop): the device waited for at its end only, so that a step's
// kernels may run while the host prepares the next, as in a user's loop.
const loopSteps = 10

// waiter is a machine whose device work may outlast its calls
// (fusion.Machine.Wait).
type waiter interface{ Wait() error }

// medianPhases is the median of each phase over ps.
func medianPhases(ps []fusion.RunPhases) *fusion.RunPhases {
	var m fusion.RunPhases
	for _, f := range []func(*fusion.RunPhases) *float64{
		func(p *fusion.RunPhases) *float64 { return &p.Check },
		func(p *fusion.RunPhases) *float64 { return &p.HandOff },
		func(p *fusion.RunPhases) *float64 { return &p.Upload },
		func(p *fusion.RunPhases) *float64 { return &p.Launch },
		func(p *fusion.RunPhases) *float64 { return &p.Wait },
		func(p *fusion.RunPhases) *float64 { return &p.Download },
		func(p *fusion.RunPhases) *float64 { return &p.Return },
		func(p *fusion.RunPhases) *float64 { return &p.Solver },
	} {
		xs := make([]float64, len(ps))
		for i := range ps {
			xs[i] = *f(&ps[i])
		}
		slices.Sort(xs)
		*f(&m) = median(xs)
	}
	return &m
}

// scalarOf is a scalar value as a float64 (NaN for anything else).
func scalarOf(v G.Value) float64 {
	if v == nil {
		return math.NaN()
	}
	switch x := v.Data().(type) {
	case float32:
		return float64(x)
	case float64:
		return x
	}
	return math.NaN()
}

// mlpTrain is mlp_step's graph trained with Adam (learn rate 1e-3).
func mlpTrain(size string) (Spec, error) {
	b, loss, learnables, grads, flops, err := mlpGraph(size)
	if err != nil {
		return Spec{}, err
	}
	s := b.spec("mlp_train", size, flops, append(G.Nodes{loss}, grads...)...)
	s.Train = &Train{Learnables: learnables, Loss: loss, Solver: func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(1e-3)) }}
	return s, nil
}
