// Package bench measures what fusion buys: a graph run by Gorgonia's own
// tape machine, by tilefuse with fusion off (one kernel per op, same
// backend) and by tilefuse fused, side by side in one process, each result
// checked against the unfused one before it is reported.
//
// Graph measures any ExprGraph with its inputs; Workloads are the standard
// ones (cmd/tilefuse bench runs them).
package bench

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// The modes, in the order they are measured.
const (
	Gorgonia = "gorgonia" // Gorgonia's tape machine
	Unfused  = "unfused"  // tilefuse, fusion off: one kernel per op
	Fused    = "fused"    // tilefuse
	Native   = "native"   // Options.Native: tilefuse with its CPU kernels as machine code, Fused then on the executor
)

// Modes lists the modes (Native only where Options.Native asks for it).
var Modes = []string{Gorgonia, Unfused, Fused, Native}

// Options configure a measurement.
type Options struct {
	Backend fusion.Backend
	Runs    int           // timed runs per mode (default 10)
	WarmUp  time.Duration // untimed runs first, at least one (default 100 ms)
	// Rotate is how many copies of the inputs to cycle through, so that a
	// small working set is not measured from cache (default: 4 when the
	// inputs take less than 64 MiB, else 1)
	Rotate int
	// Tol is the tolerance of the check against the unfused run:
	// |a-b| ≤ Tol·(1+|b|) (default 1e-3 for float32 graphs, 1e-9 for float64)
	Tol float64
	// Progress, if set, is told before each mode is compiled, checked and
	// warmed up (the timed runs then take turns between the modes).
	Progress func(mode string)
	// FusionOptions are passed to tilefuse (after the backend).
	FusionOptions []fusion.Option
	// SkipGorgonia leaves Gorgonia's own machine out (the Peer size: a run
	// of it takes seconds to minutes on the CPU); the tilefuse modes are
	// measured and checked as ever.
	SkipGorgonia bool
	// Native adds the mode Native: the fused graph with its kernels as
	// machine code (fusion.WithNativeCPU(true), the default), timed in turn
	// with the others, while Fused runs them on the executor
	// (fusion.WithNativeCPU(false)): the two side by side (the CPU backend
	// only).
	Native bool
	// Profile runs each tilefuse mode again with fusion.WithProfile after
	// the timed runs (one warm-up run, then as many as Runs, 3 to 15): each
	// kernel's median time over them (device time on the GPU, wall time on
	// the CPU) goes into Result.Profile (the timed runs are not slowed by
	// it).
	Profile bool
	// ColdCPU times each CPU run right after the collection that precedes
	// it, as before 2026-12-02: the pool's workers parked (the collection
	// outlasts their watch) and the caches as the collection left them.
	// By default one untimed run of the mode comes between the collection
	// and the timed run (on the input set the mode's previous timed run
	// had, so that the timed run still binds inputs anew), as PyTorch's
	// timed calls follow one another (bench/torch: a loop after warm-up).
	ColdCPU bool
	// Loop times each mode's runs back to back, one mode after the other,
	// with one collection before each mode's runs and none between them, as
	// a user's loop of RunAll runs: the memory of values a run drops comes
	// back to tilefuse's recycler only when a collection happens to run
	// (by default each timed run follows a collection, which gives it back).
	// A training step (Spec.Train) is timed loopSteps steps at a time, the
	// device waited for at the end of them only.
	Loop bool
	// DeviceBatch is, on the GPU, how many of the graph's runs back to back
	// each device time spans (fusion.Machine.DeviceTimesBatch: the mean of
	// DeviceBatch runs between two events, as the copy roofline is timed);
	// 0 or 1: an event between every two runs.
	DeviceBatch int
}

// Measurement is one mode's timing.
type Measurement struct {
	Mode    string  `json:"mode"`
	Median  float64 `json:"median_s"`
	Min     float64 `json:"min_s"`
	Max     float64 `json:"max_s"`
	Runs    int     `json:"runs"`
	Kernels int     `json:"kernels,omitempty"` // tilefuse modes: kernels (and host ops) per run
	// KernelBytes, tilefuse modes: the bytes the kernels move per run, each
	// one's inputs read once and outputs written once (fusion.Report.KernelBytes)
	KernelBytes int64 `json:"kernel_bytes,omitempty"`
	// OnExecutor, tilefuse modes on the CPU: the kernels that run on the
	// executor rather than as machine code (fusion.Report.OnExecutor),
	// and why (each kernel's name and reason, fusion.GroupInfo.Executor)
	OnExecutor  int      `json:"on_executor,omitempty"`
	ExecutorWhy []string `json:"executor_why,omitempty"`
	// ExecutorLaunches, tilefuse modes on the CPU: the launches of kernels
	// that are machine code which the machine code handed to the executor
	// at run time (fusion.Stats.ExecutorLaunches) over the mode's
	// StatsRuns runs (every run the bench made of it, untimed ones too)
	ExecutorLaunches int `json:"executor_launches,omitempty"`
	StatsRuns        int `json:"stats_runs,omitempty"`
	// UntimedRuns, on the CPU: the untimed runs (training steps) made
	// between a collection and a timed run, one before each timed run
	// unless ColdCPU or the mode's warm-up run took warmLong or more
	UntimedRuns int `json:"untimed_runs,omitempty"`
	// Device times, tilefuse modes on the GPU: the graph's compute run
	// back to back on the device (fusion.Machine.DeviceTimes: Runs runs
	// after 50 ms of untimed ones, events between them, nothing copied), as
	// PyTorch's are timed, without the copies of inputs up and results down
	// that Median includes
	DeviceMedian float64 `json:"device_median_s,omitempty"`
	// DeviceBatch is the runs each of those device times spans
	// (Options.DeviceBatch; 0 where there are none)
	DeviceBatch int     `json:"device_batch,omitempty"`
	DeviceMin   float64 `json:"device_min_s,omitempty"`
	DeviceMax   float64 `json:"device_max_s,omitempty"`
	// DeviceInRun is the median device time of the compute within the
	// timed runs (fusion.Machine.DeviceTime): each follows that run's
	// uploads, during which the GPU idles and its clocks drop (the bench's
	// device time before 2026-12-01)
	DeviceInRun float64 `json:"device_in_run_s,omitempty"`
	// compile time of tilefuse modes: the first NewTapeMachine of this graph
	// in the process (cold: partition, emission, and on the GPU codegen and
	// the driver's JIT), and a second one, which takes the kernels'
	// compiled form (CPU) or loaded module (CUDA) from a cache;
	// partitioning and emission run again
	CompileCold   float64 `json:"compile_cold_s,omitempty"`
	CompileCached float64 `json:"compile_cached_s,omitempty"`
	// StagesCold and StagesCached: each of those compiles by stage
	// (fusion.Report.Stages)
	StagesCold   []fusion.StageTime `json:"compile_stages_cold,omitempty"`
	StagesCached []fusion.StageTime `json:"compile_stages_cached,omitempty"`
	// Copies: tilefuse modes on the GPU, the host↔device copies of the last
	// timed run (of a training step: the run, the solver's step and the
	// loss read; fusion.Machine.Stats), the bytes hashed to tell held
	// inputs unchanged, and HostMedian, the median over the timed runs of
	// each run's wall time outside its device time (Stats.HostSeconds)
	Copies     *Copies `json:"copies,omitempty"`
	HostMedian float64 `json:"host_median_s,omitempty"`
	// SolverDevice is, for a training step on the GPU (Spec.Train, the fused
	// mode), the median device time of the fused solver's kernels
	// (fusion.Stats.SolverDeviceTime): the step's kernels take DeviceInRun
	// plus SolverDevice on the device
	SolverDevice float64 `json:"solver_device_s,omitempty"`
	// UploadDevice is, for a training step on the GPU (the fused mode), the
	// median device time of the step's uploads (the batch's DMA:
	// fusion.Stats.UploadDeviceTime)
	UploadDevice float64 `json:"upload_device_s,omitempty"`
	// Phases is, for a training step on the GPU (the fused mode), the median
	// over the timed steps of each phase of the step's host wall clock
	// (fusion.Stats.Phases)
	Phases *fusion.RunPhases `json:"phases,omitempty"`
	// MaxErr is the largest |a-b|/(1+|b|) against the unfused run (0 for it)
	MaxErr float64 `json:"max_err"`
	// GBps and GFLOPs are per Time(): the device time where there is one
	GBps   float64 `json:"gb_per_s,omitempty"`
	GFLOPs float64 `json:"gflop_per_s,omitempty"`
}

// Copies are a run's host↔device copies (fusion.Stats).
type Copies struct {
	Uploads     int   `json:"uploads"`
	Downloads   int   `json:"downloads"`
	BytesUp     int64 `json:"bytes_up"`
	BytesDown   int64 `json:"bytes_down"`
	Held        int   `json:"held"` // inputs the device held: not uploaded
	HashedBytes int64 `json:"hashed_bytes"`
	// kernels launched one by one and CUDA graphs replayed (fusion.WithCUDAGraphs)
	Launches      int `json:"launches"`
	GraphLaunches int `json:"graph_launches"`
}

// statser is a machine with statistics (fusion's).
type statser interface{ Stats() fusion.Stats }

// copiesOf records vm's copies of the run just made into m, and its host
// time into host; only where vm is fusion's machine on the GPU.
func copiesOf(vm any, m *Measurement, host *[]float64) {
	sm, ok := vm.(statser)
	if !ok {
		return
	}
	st := sm.Stats()
	if st.DeviceTime == 0 { // the CPU backend: nothing is copied
		return
	}
	m.Copies = &Copies{st.Uploads, st.Downloads, st.BytesUp, st.BytesDown, st.Held, st.HashedBytes, st.Launches, st.GraphLaunches}
	*host = append(*host, st.HostSeconds)
}

// Time is the median the rates are computed from: the device time on the
// GPU, else the wall time.
func (m *Measurement) Time() float64 {
	if m.DeviceMedian > 0 {
		return m.DeviceMedian
	}
	return m.Median
}

// Result is one graph's measurements.
type Result struct {
	Name    string         `json:"name"`
	Size    string         `json:"size,omitempty"`
	Backend string         `json:"backend"`
	Bytes   int64          `json:"bytes"` // inputs read and outputs written, once
	Flops   int64          `json:"flops,omitempty"`
	Modes   []*Measurement `json:"modes"`
	// Train: each run was a training step (Spec.Train): batch up, RunAll,
	// the solver's step, the loss read
	Train bool `json:"train,omitempty"`
	// CopyGBps is the memory copy bandwidth measured in the same run (host
	// memory for the CPU backend), the roofline of memory-bound graphs.
	CopyGBps float64 `json:"copy_gb_per_s,omitempty"`
	// Profile is each tilefuse mode's kernels with their median times over
	// a few runs (Options.Profile).
	Profile map[string][]fusion.KernelTime `json:"profile,omitempty"`
}

// Mode returns the measurement of mode m, or nil.
func (r *Result) Mode(m string) *Measurement {
	for _, x := range r.Modes {
		if x.Mode == m {
			return x
		}
	}
	return nil
}

// Speedup is Gorgonia's median time over mode m's (0 when either is missing).
func (r *Result) Speedup(m string) float64 {
	g, x := r.Mode(Gorgonia), r.Mode(m)
	if g == nil || x == nil || x.Median == 0 {
		return 0
	}
	return g.Median / x.Median
}

// DeviceSpeedup is the unfused device time over mode m's, what fusion buys
// on the GPU (0 without device times).
func (r *Result) DeviceSpeedup(m string) float64 {
	u, x := r.Mode(Unfused), r.Mode(m)
	if u == nil || x == nil || u.DeviceMedian == 0 || x.DeviceMedian == 0 {
		return 0
	}
	return u.DeviceMedian / x.DeviceMedian
}

// Roofline is mode m's bandwidth as a fraction of the copy bandwidth (0 when
// unknown).
func (r *Result) Roofline(m string) float64 {
	x := r.Mode(m)
	if x == nil || r.CopyGBps == 0 {
		return 0
	}
	return x.GBps / r.CopyGBps
}

// Spec is a graph to measure.
type Spec struct {
	Name  string
	Size  string
	Graph *G.ExprGraph
	// Inputs bind every input node; Outputs are the values checked (the
	// graph's outputs, gradients).
	Inputs  map[*G.Node]tensor.Tensor
	Outputs []*G.Node
	// Flops is the work of one run, for GFLOP/s (0: report GB/s only)
	Flops int64
	// Train, if set, makes each run a training step (train.go)
	Train *Train
}

// machine is what the three modes have in common.
type machine interface {
	RunAll() error
	Reset()
	Close() error
}

// Graph measures s in every mode.
func Graph(s Spec, o Options) (res *Result, err error) {
	defer func() { // a panicking op must not end the caller's program
		if r := recover(); r != nil {
			err = fmt.Errorf("bench: %s: panic: %v", s.Name, r)
		}
	}()
	if s.Graph == nil || len(s.Outputs) == 0 {
		return nil, errors.New("bench: a spec needs a graph and at least one output")
	}
	for i, n := range s.Outputs {
		switch {
		case n == nil:
			return nil, fmt.Errorf("bench: %s: output %d is nil", s.Name, i+1)
		case n.Graph() != s.Graph:
			return nil, fmt.Errorf("bench: %s: output %d (%s) is a node of another graph than Spec.Graph", s.Name, i+1, n.Name())
		}
	}
	for n := range s.Inputs {
		if n != nil && n.Graph() != s.Graph {
			return nil, fmt.Errorf("bench: %s: input %s is a node of another graph than Spec.Graph", s.Name, n.Name())
		}
	}
	if err := fusion.Available(o.Backend); err != nil { // and the GPU context, before anything is timed
		return nil, fmt.Errorf("bench: %w", err)
	}
	if o.Runs <= 0 {
		o.Runs = 10
	}
	if o.WarmUp <= 0 {
		o.WarmUp = 100 * time.Millisecond
	}
	var inBytes int64
	f32 := false
	for n, v := range s.Inputs {
		if n == nil || v == nil {
			return nil, fmt.Errorf("bench: %s: a nil input", s.Name)
		}
		if !slices.Equal([]int(n.Shape()), []int(v.Shape())) && !(n.IsScalar() && v.Shape().IsScalar()) {
			return nil, fmt.Errorf("bench: %s: input %s has shape %v, its value %v", s.Name, n.Name(), n.Shape(), v.Shape())
		}
		inBytes += int64(v.MemSize())
		f32 = f32 || v.Dtype() == tensor.Float32
	}
	if o.Tol <= 0 {
		o.Tol = 1e-9
		if f32 {
			o.Tol = 1e-3
		}
	}
	if o.Rotate <= 0 {
		o.Rotate = 1
		if inBytes < 64<<20 {
			o.Rotate = 4
		}
	}
	if s.Train != nil {
		return trainGraph(s, o)
	}
	sets := make([]map[*G.Node]tensor.Tensor, o.Rotate)
	for i := range sets {
		sets[i] = map[*G.Node]tensor.Tensor{}
		for n, v := range s.Inputs {
			if i == 0 {
				sets[i][n] = v
			} else {
				sets[i][n] = v.Clone().(tensor.Tensor)
			}
		}
	}
	bind := func(i int) error {
		for n, v := range sets[i%len(sets)] {
			if err := G.Let(n, v); err != nil {
				return fmt.Errorf("bench: %s: binding %s: %w", s.Name, n.Name(), err)
			}
		}
		return nil
	}
	res = &Result{Name: s.Name, Size: s.Size, Backend: o.Backend.String(), Flops: s.Flops}
	type modeRun struct {
		m          *Measurement
		vm         machine
		times, dev []float64
		host       []float64 // Stats.HostSeconds of the timed runs (GPU)
		// warm: the last warm-up run's wall time (how long a run takes)
		warm time.Duration
	}
	var runs []*modeRun
	defer func() {
		for _, r := range runs {
			r.vm.Close()
		}
	}()
	run := func(vm machine, i int) error {
		if err := bind(i); err != nil {
			return err
		}
		vm.Reset()
		return vm.RunAll()
	}
	var ref [][]float64                                               // the unfused outputs
	for _, mode := range []string{Unfused, Gorgonia, Fused, Native} { // unfused first: the reference
		if mode == Gorgonia && o.SkipGorgonia || mode == Native && (!o.Native || o.Backend != fusion.CPU) {
			continue
		}
		if o.Progress != nil {
			o.Progress(mode)
		}
		m := &Measurement{Mode: mode, Runs: o.Runs}
		var vm machine
		switch mode {
		case Gorgonia:
			vm = G.NewTapeMachine(s.Graph)
		default:
			fused := mode == Fused || mode == Native
			opts := []fusion.Option{fusion.WithBackend(o.Backend), fusion.WithFusion(fused)}
			if o.Native && o.Backend == fusion.CPU {
				opts = append(opts, fusion.WithNativeCPU(mode == Native))
			}
			opts = append(opts, o.FusionOptions...)
			t0 := time.Now()
			fm := fusion.NewTapeMachine(s.Graph, opts...)
			m.CompileCold = time.Since(t0).Seconds()
			if err := fm.Err(); err != nil {
				return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, mode, err)
			}
			m.StagesCold = fm.Report().Stages
			fm.Close()
			t0 = time.Now()
			fm = fusion.NewTapeMachine(s.Graph, opts...)
			m.CompileCached = time.Since(t0).Seconds()
			m.StagesCached = fm.Report().Stages
			if err := fm.Err(); err != nil {
				fm.Close()
				return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, mode, err)
			}
			m.Kernels = fm.Report().Kernels() + len(fm.Report().Unfused)
			m.KernelBytes = fm.Report().KernelBytes()
			m.OnExecutor = fm.Report().OnExecutor()
			for _, g := range fm.Report().Groups {
				if g.Executor != "" {
					m.ExecutorWhy = append(m.ExecutorWhy, g.Kernel+": "+g.Executor)
				}
			}
			vm = fm
		}
		runs = append(runs, &modeRun{m: m, vm: vm})
		// the first run's outputs, checked; then the warm-up
		if err := run(vm, 0); err != nil {
			return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, mode, err)
		}
		got := make([][]float64, len(s.Outputs))
		for i, n := range s.Outputs {
			v, err := floats(n)
			if err != nil {
				return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, mode, err)
			}
			got[i] = v
		}
		if mode == Unfused {
			ref = got
		}
		var err error
		m.MaxErr, err = compare(got, ref, o.Tol)
		if err != nil && (mode == Fused || mode == Native) { // a wrong fused result is never reported
			return nil, fmt.Errorf("bench: %s: %s result differs from the unfused one: %w", s.Name, mode, err)
		}
		for i, t0 := 1, time.Now(); time.Since(t0) < o.WarmUp; i++ {
			t1 := time.Now()
			if err := run(vm, i); err != nil {
				return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, mode, err)
			}
			runs[len(runs)-1].warm = time.Since(t1)
		}
	}
	// timed is one timed run of r (input set i)
	timed := func(r *modeRun, i int) error {
		t0 := time.Now()
		if err := run(r.vm, i); err != nil {
			return fmt.Errorf("bench: %s: %s: %w", s.Name, r.m.Mode, err)
		}
		r.times = append(r.times, time.Since(t0).Seconds())
		copiesOf(r.vm, r.m, &r.host)
		if dt, ok := r.vm.(deviceTimer); ok {
			if d, ok := dt.DeviceTime(); ok {
				r.dev = append(r.dev, d)
			}
		}
		return nil
	}
	if o.Loop {
		// each mode's runs back to back, one mode after the other, with no
		// collection between them (one before each mode's): a user's loop
		for _, r := range runs {
			runtime.GC()
			for i := range o.Runs {
				if err := timed(r, i); err != nil {
					return nil, err
				}
			}
		}
	}
	// the timed runs, the modes taking turns, so that a machine that slows
	// down or speeds up meanwhile moves all three alike; each timed run
	// follows a collection (no mode pays for another's garbage) and, on the
	// GPU, untimed runs of its own mode for gpuWarm (one for Gorgonia's), so
	// that it finds the device's caches and clocks as a loop of its own runs
	// would: the SM clock drops to 345 MHz while Gorgonia's turn keeps the
	// GPU idle, and one run of a few ms did not bring it back up; on the
	// CPU one untimed run (unless ColdCPU), so that it finds the pool's
	// workers awake and the caches as a loop of its runs leaves them. The
	// untimed runs take the input set before the timed run's, so that the
	// timed run's inputs are new to the machine and go up (until
	// 2026-12-02 the GPU's untimed runs took the timed run's own set, which
	// the device then held: no upload was timed). A CPU run that took
	// warmLong or more in the warm-up follows the collection directly:
	// what an untimed run warms (the pool's workers, the caches) is a
	// small part of it, and those untimed runs were half the main job's
	// time on the 2-core VM (Gorgonia's runs of the large training graphs,
	// 0.4–1 s each)
	turns := o.Runs
	if o.Loop {
		turns = 0 // timed above
	}
	for i := range turns {
		for _, r := range runs {
			runtime.GC()
			if untimedFirst(o, r.warm) {
				if err := run(r.vm, i+len(sets)-1); err != nil {
					return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, r.m.Mode, err)
				}
				r.m.UntimedRuns++
			}
			if o.Backend == fusion.CUDA {
				warm := time.Duration(0)
				if r.m.Mode != Gorgonia {
					warm = gpuWarm
				}
				for t0 := time.Now(); ; {
					if err := run(r.vm, i+len(sets)-1); err != nil {
						return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, r.m.Mode, err)
					}
					if time.Since(t0) >= warm {
						break
					}
				}
				if w, ok := r.vm.(waiter); ok { // the timed run starts with the device idle (fusion.WithAsyncRuns)
					if err := w.Wait(); err != nil {
						return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, r.m.Mode, err)
					}
				}
			}
			if err := timed(r, i); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range runs {
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
		if fm, ok := r.vm.(*fusion.Machine); ok && o.Backend != fusion.CUDA {
			st := fm.Stats()
			m.ExecutorLaunches, m.StatsRuns = st.ExecutorLaunches, st.Runs
		}
		if dl, ok := r.vm.(deviceLooper); ok {
			dev, ok, err := dl.DeviceTimesBatch(o.Runs, max(o.DeviceBatch, 1), gpuWarm)
			if err != nil {
				return nil, fmt.Errorf("bench: %s: %s: %w", s.Name, m.Mode, err)
			}
			if ok {
				slices.Sort(dev)
				m.DeviceMedian, m.DeviceMin, m.DeviceMax = median(dev), dev[0], dev[len(dev)-1]
				m.DeviceBatch = max(o.DeviceBatch, 1)
			}
		}
		m.GBps = float64(inBytes+outBytes(s.Outputs)) / m.Time() / 1e9
		if s.Flops > 0 {
			m.GFLOPs = float64(s.Flops) / m.Time() / 1e9
		}
		res.Modes = append(res.Modes, m)
	}
	if o.Profile {
		res.Profile = map[string][]fusion.KernelTime{}
		for _, mode := range []string{Unfused, Fused} {
			opts := append([]fusion.Option{fusion.WithBackend(o.Backend), fusion.WithFusion(mode == Fused), fusion.WithProfile(true)}, o.FusionOptions...)
			fm := fusion.NewTapeMachine(s.Graph, opts...)
			err := fm.Err()
			var times [][]fusion.KernelTime
			for i := 0; i <= profileRuns(o.Runs) && err == nil; i++ { // the first run warms up
				if err = run(fm, i); err == nil && i > 0 {
					times = append(times, fm.KernelTimes())
				}
			}
			res.Profile[mode] = medianKernelTimes(times)
			fm.Close()
			if err != nil {
				return nil, fmt.Errorf("bench: %s: profiling %s: %w", s.Name, mode, err)
			}
		}
	}
	// report in the order of Modes
	slices.SortFunc(res.Modes, func(a, b *Measurement) int { return slices.Index(Modes, a.Mode) - slices.Index(Modes, b.Mode) })
	res.Bytes = inBytes + outBytes(s.Outputs)
	return res, nil
}

// profileRuns is how many runs Options.Profile times after its warm-up
// run: the timed runs' count, at least 3 and at most 15. One run alone
// (as before 2026-12-06) put its outputs in new memory, whose page faults
// came into the kernels that wrote them: a 2.9 MB weight gradient took
// 670 µs on 16 cores in it.
func profileRuns(runs int) int { return min(max(runs, 3), 15) }

// medianKernelTimes is each kernel's median time and median page faults
// over runs (each run's kernels in launch order, the same in every run;
// where a run's list differs from the first's, the first run's list alone).
func medianKernelTimes(runs [][]fusion.KernelTime) []fusion.KernelTime {
	if len(runs) == 0 {
		return nil
	}
	out := slices.Clone(runs[0])
	for _, r := range runs[1:] {
		if len(r) != len(out) {
			return out
		}
		for i := range r {
			if r[i].Kernel != out[i].Kernel {
				return out
			}
		}
	}
	ts := make([]float64, len(runs))
	fs := make([]int64, len(runs))
	for i := range out {
		for j, r := range runs {
			ts[j], fs[j] = r[i].Seconds, r[i].Faults
		}
		slices.Sort(ts)
		slices.Sort(fs)
		out[i].Seconds = ts[len(ts)/2]
		out[i].Faults = fs[len(fs)/2] // the upper median: -1 only where most runs had no count
		if len(ts)%2 == 0 {
			out[i].Seconds = (ts[len(ts)/2-1] + ts[len(ts)/2]) / 2
		}
	}
	return out
}

// deviceLooper is a machine that times its compute back to back (fusion
// on the GPU).
type deviceLooper interface {
	DeviceTimesBatch(n, batch int, warm time.Duration) ([]float64, bool, error)
}

// deviceTimer is a machine that measures its device time (fusion on the GPU).
type deviceTimer interface {
	DeviceTime() (float64, bool)
}

func floats(n *G.Node) ([]float64, error) {
	v := n.Value()
	if v == nil {
		return nil, fmt.Errorf("%s has no value after the run", n.Name())
	}
	switch d := v.Data().(type) {
	case []float64:
		return slices.Clone(d), nil
	case []float32:
		r := make([]float64, len(d))
		for i, x := range d {
			r[i] = float64(x)
		}
		return r, nil
	case float64:
		return []float64{d}, nil
	case float32:
		return []float64{float64(d)}, nil
	}
	return nil, fmt.Errorf("%s: values of type %T", n.Name(), v.Data())
}

func outBytes(outputs []*G.Node) int64 {
	var b int64
	for _, n := range outputs {
		if v := n.Value(); v != nil {
			b += int64(v.MemSize())
		}
	}
	return b
}

// compare returns the largest |a-b|/(1+|b|), and an error naming the first
// value beyond tol (NaN matches NaN).
func compare(got, want [][]float64, tol float64) (float64, error) {
	worst := 0.0
	var first error
	for i := range want {
		if len(got[i]) != len(want[i]) {
			return math.Inf(1), fmt.Errorf("output %d: %d values, want %d", i, len(got[i]), len(want[i]))
		}
		for j, w := range want[i] {
			g := got[i][j]
			if math.IsNaN(g) && math.IsNaN(w) || g == w {
				continue
			}
			e := math.Abs(g-w) / (1 + math.Abs(w))
			if math.IsNaN(e) {
				e = math.Inf(1)
			}
			worst = max(worst, e)
			if e > tol && first == nil {
				first = fmt.Errorf("output %d [%d] = %v, want %v (tolerance %g)", i, j, g, w, tol)
			}
		}
	}
	return worst, first
}

// gpuWarm is how long a tilefuse mode runs untimed on the GPU before each
// of its timed runs.
const gpuWarm = 50 * time.Millisecond

// warmLong: on the CPU, a mode whose warm-up run took this long or more
// times each run right after the collection, without an untimed run of
// its own before it (a variable for tests).
var warmLong = 20 * time.Millisecond

// untimedFirst reports whether a timed run (training step) of a mode whose
// warm-up run took warm follows an untimed one of its own after the
// collection: on the CPU, unless ColdCPU or warm is warmLong or more.
func untimedFirst(o Options, warm time.Duration) bool {
	return o.Backend != fusion.CUDA && !o.ColdCPU && warm < warmLong
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// HostCopyGBps measures a memory copy of n bytes on the host, over all
// cores as the CPU backend uses them: bytes read plus bytes written per
// second, the median of runs.
func HostCopyGBps(n int) float64 {
	workers := runtime.GOMAXPROCS(0)
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	chunk := (n + workers - 1) / workers
	cp := func() {
		done := make(chan struct{}, workers)
		for w := range workers {
			go func() {
				lo, hi := min(w*chunk, n), min((w+1)*chunk, n)
				copy(dst[lo:hi], src[lo:hi])
				done <- struct{}{}
			}()
		}
		for range workers {
			<-done
		}
	}
	cp()
	times := make([]float64, 15)
	for i := range times {
		t0 := time.Now()
		cp()
		times[i] = time.Since(t0).Seconds()
	}
	slices.Sort(times)
	return 2 * float64(n) / median(times) / 1e9
}
