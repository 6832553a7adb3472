//go:build tilefuse_cuda

package fusion

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/cuda"
	"github.com/tilefuse/tilefuse/diskcache"
	"github.com/tilefuse/tilefuse/graphpass"
)

func init() {
	newGPUBackend = func() backend { return &gpu{} }
	openDevice = func() error { _, err := sharedDevice(); return err }
	gpuKernelTimer = gpuKernelTime
	gpuTuneRelease = releaseTuneInputs
	gpuPrecompile = func(ks []*graphpass.Kernel, disk *diskcache.Cache) {
		dev, err := sharedDevice()
		if err != nil {
			return
		}
		jobs := make([]cuda.Job, len(ks))
		for i, k := range ks {
			spec := make([]int, len(k.Tile.Params))
			for j, p := range k.Tile.Params {
				if p.Type.Ptr { // device buffers are 256-byte aligned
					spec[j] = 16
				}
			}
			jobs[i] = cuda.Job{Kernel: k.Tile, NumWarps: k.Tile.Meta["num_warps"], Spec: spec}
		}
		dev.CompileMany(jobs, disk) // a kernel that does not compile fails again when timed, with its error
	}
	gpuDevice = func() (string, error) {
		dev, err := sharedDevice()
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s (sm_%d, driver %d)", dev.Name, dev.Arch, dev.Driver), nil
	}
	gpuTarget = func() (graphpass.Target, error) {
		dev, err := sharedDevice()
		if err != nil {
			return graphpass.Target{}, err
		}
		t := graphpass.GPU(dev.SMs, dev.MaxThreads, dev.SharedMemoryOptin)
		t.L2 = dev.L2
		return t, nil
	}
}

// shared is GPU 0, opened once per process: machines share its context and
// its cache of loaded kernels, so a second machine for the same graph pays
// for neither.
var shared struct {
	sync.Mutex
	dev *cuda.Device
	// live counts the prepared machines; when the last one closes, the
	// device's free list of device memory goes back to the driver
	// (Device.Trim), so that closing every machine returns the GPU memory
	// they took, while machines made while another is alive reuse its
	// freed buffers; the page-locked staging memory (a few MiB of host
	// memory) stays for the next machine's stager
	live int
}

func sharedDevice() (*cuda.Device, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.dev != nil {
		return shared.dev, nil
	}
	dev, err := cuda.Open(0)
	if err != nil {
		return nil, fmt.Errorf("fusion: %w", err)
	}
	shared.dev = dev
	return dev, nil
}

// gpu runs a compiled graph on the GPU: values live in device buffers for the
// whole run and from one run to the next; graph inputs go up when the user
// changed them (resident.go), through a Stager (page-locked memory,
// asynchronous), the readable set comes down where the host copy is not
// current, and ops tilefuse does not know run on the CPU with copies
// (counted in Stats).
type gpu struct {
	counted  bool // in shared.live (prepare), until close
	c        *Compiled
	dev      *cuda.Device
	order    G.Nodes // the rewrite's order
	bufs     map[*G.Node]*cuda.Buffer
	loaded   map[*G.Node]*cuda.Function
	host     map[*G.Node]any     // host memory of host ops' operands, reused
	hostVal  map[*G.Node]G.Value // the values made of it
	backHost map[*G.Node]any     // host memory of values written back, reused
	outs     map[*G.Node][]any   // each kernel's output buffers
	launch   map[*G.Node][]any   // each kernel's arguments: operands' buffers, then outputs
	owned    []*cuda.Buffer      // what buffer allocated, to free
	last     Stats               // the last run's host ops and copies
	timer    *cuda.Timer
	devMs    float64 // device time of the last run's compute, ms
	// WithProfile: an event before and after each launch, and the times
	profile map[*G.Node][2]*cuda.Event
	times   []KernelTime
	// residency (resident.go): per input of c.rw.inputs what the device's
	// copy stands for, and which solver steps it (solver_cuda.go)
	held    []held
	inAt    map[*G.Node]int // an input's node in the new graph → its index
	upOrder []int           // the inputs' indices, largest first: the order a run uploads them
	owner   []*gpuSolver
	vers    *memVersions        // device memory versions and host copies
	backVal map[*G.Node]G.Value // user's node → the value last written back
	// gradients a fused solver reads on the device: written back by Sync,
	// not by runs (new graph's node → user's node)
	stepGrad map[*G.Node]*G.Node
	stage    *cuda.Stager
	// the readable values' downloads of a run (and Sync's), enqueued
	// together into pinned memory and waited for once (fetching: download
	// enqueues there; afterFetch runs once the bytes have landed)
	fetch      *cuda.Fetcher
	fetching   bool
	afterFetch []func() error
	// early: per step of the run, the readable values (indices into
	// c.back) whose memory that step writes last: they come down on the
	// fetcher's side stream as soon as it is enqueued, beside the later
	// kernels (side: the copy being made is one; sent: per c.back, this
	// run's)
	early map[int][]int
	side  bool
	sent  []bool
	// pre: the fresh host memory of the values sent early, allocated on
	// other goroutines while the device thread uploads and launches (Go
	// zeroes a new slice: on an H200 host about 170 µs a MB, which in the
	// launch loop kept the device waiting), taken by download
	pre map[*G.Node]chan any
	// speculate: the run has no host op, so its compute may be launched
	// before the hashes of the inputs it keeps are settled (run, redo);
	// stale: the last run's hashes found a kept input changed (a loop that
	// writes into its inputs, as Gorgonia's own solvers do in place), so
	// this run hashes first instead of computing twice
	speculate bool
	stale     bool
	solvers   []*gpuSolver
	// a run's device work in order, made by prepare (steps), and with
	// WithCUDAGraphs its stretches between host ops as graphs (segs)
	isInput map[*G.Node]bool
	steps   []devStep
	segs    []devSeg
	graphAt map[int]graphPos // each launch's node in segs' graphs (twins re-point them)
	// events around the last fused solver step's launches (solver_cuda.go)
	solverEv   [2]*cuda.Event
	solverLast bool // recorded and not read yet
	// stepErr: the error of a solver step's launches, which run on the
	// device's thread after Step returned (Device.Post); touched on that
	// thread only, and reported by the next of this machine's runs, steps,
	// syncs or closes there (takeStepErr)
	stepErr  error
	solverMs float64
	// async: a run returns once the values the user can read have landed
	// and its uploads have been read, its later kernels (a backward pass
	// whose gradients a fused solver takes on the device) still running
	// (WithAsyncRuns; not with host ops or WithProfile); unsettled: the
	// last run returned so, and its device times are read when asked for
	// (settle); upDone: recorded after a run's uploads; runWall: the last
	// run's wall clock, s; runErr: an error of the device found after a
	// run returned, reported as stepErr is
	async     bool
	unsettled bool
	upTimed   bool
	upDone    *cuda.Event
	runWall   float64
	runErr    error
	// twins: inputs that runs upload one after another (a batch), each
	// with a second device buffer (twin.go); copyS: the stream their
	// copies take, copyEv recorded after them; lastUp: the inputs the
	// last run uploaded
	twins  map[int]*twin
	copyS  *cuda.Stream
	copyEv *cuda.Event
	lastUp []bool
	// the load stage's parts, timed (loadPhases)
	phases []StageTime
	// rec recycles the fresh host memory of readable values (recycle.go);
	// nil with WithReuseOutputs or WithRecycle(false)
	rec *recycler
}

// loadPhases are prepare's parts: the buffers (allocAll), the kernels'
// modules (CompileMany: codegen, link and load where not in the device's
// caches), the launch plan (packed arguments, CUDA graphs), the timer's
// events and the stager (its pinned memory from the free list, or pinned
// now).
func (g *gpu) loadPhases() []StageTime { return g.phases }

// lap adds the time since *mark to the load's phases as name.
func (g *gpu) lap(name string, mark *time.Time) {
	now := time.Now()
	g.phases = append(g.phases, StageTime{name, now.Sub(*mark).Seconds()})
	*mark = now
}

// devStep is one step of a run's compute: a kernel's launch with its
// arguments packed (and the zeroing of its outputs first where it
// accumulates into them), or an op left to the CPU.
type devStep struct {
	n    *G.Node
	zero []*cuda.Buffer
	pk   *cuda.Packed // nil: a host op
}

// devSeg is a stretch of steps [from, to): device steps as one graph, or
// (graph nil) one host op.
type devSeg struct {
	from, to int
	graph    *cuda.Graph
}

// prepare allocates every buffer of the graph and loads every kernel now, so
// that a driver or JIT error is an error of NewTapeMachine and the first run
// is as fast as the others.
func (g *gpu) prepare(c *Compiled) error {
	dev, err := sharedDevice()
	if err != nil {
		return err
	}
	g.c, g.dev, g.order = c, dev, c.rw.order
	shared.Lock()
	shared.live++
	shared.Unlock()
	g.counted = true
	g.bufs, g.loaded, g.host, g.outs, g.launch = map[*G.Node]*cuda.Buffer{}, map[*G.Node]*cuda.Function{}, map[*G.Node]any{}, map[*G.Node][]any{}, map[*G.Node][]any{}
	g.held, g.owner, g.inAt = make([]held, len(c.rw.inputs)), make([]*gpuSolver, len(c.rw.inputs)), map[*G.Node]int{}
	g.vers, g.backVal, g.stepGrad = newMemVersions(), map[*G.Node]G.Value{}, map[*G.Node]*G.Node{}
	g.hostVal, g.backHost = map[*G.Node]G.Value{}, map[*G.Node]any{}
	mark := time.Now()
	if err := g.load(c, &mark); err != nil {
		return err
	}
	if err := g.plan(c); err != nil {
		return err
	}
	g.lap("plan", &mark)
	if g.timer, err = dev.NewTimer(); err != nil {
		return fmt.Errorf("fusion: %w", err)
	}
	if g.upDone, err = dev.NewEvent(); err != nil {
		return fmt.Errorf("fusion: %w", err)
	}
	// the staging ring: a quarter of the inputs' bytes a slot, 64 KiB to 1 MiB
	var inBytes int64
	g.upOrder = g.upOrder[:0]
	for i, in := range c.rw.inputs {
		g.inAt[in.nn] = i
		inBytes += g.bufs[in.nn].Bytes
		g.upOrder = append(g.upOrder, i)
	}
	// the largest first, so that a batch's DMA (the longest copy) starts
	// before the host stages the small inputs behind it
	slices.SortStableFunc(g.upOrder, func(a, b int) int {
		return cmp.Compare(g.bufs[c.rw.inputs[b].nn].Bytes, g.bufs[c.rw.inputs[a].nn].Bytes)
	})
	if g.stage, err = dev.NewStager(min(max(inBytes/4, 64<<10), 1<<20), 4); err != nil {
		return fmt.Errorf("fusion: %w", err)
	}
	if os.Getenv("TILEFUSE_LOCK_INPUTS") == "0" { // every upload staged, for A/B
		if err := g.stage.LockRepeated(false); err != nil {
			return fmt.Errorf("fusion: %w", err)
		}
	}
	// the fetcher: every readable value of a run at once (fetcherBytes)
	var backBytes int64
	for _, b := range c.back {
		if buf, ok := g.bufs[b.nn]; ok {
			backBytes += (buf.Bytes + 255) / 256 * 256
		}
	}
	if g.fetch, err = dev.NewFetcher(fetcherBytes(backBytes)); err != nil {
		return fmt.Errorf("fusion: %w", err)
	}
	if !c.cfg.reuse && c.cfg.recycle { // up to recycleLimit of the readable values' host memory
		limit := 0
		for _, b := range c.back {
			if n := hostBytes(b.nn); n >= minRecycled {
				limit += n
			}
		}
		if limit > 0 {
			g.rec = newRecycler(recycleLimit(limit))
		}
	}
	g.lap("stager", &mark)
	if c.cfg.profile {
		g.profile = map[*G.Node][2]*cuda.Event{}
		for n := range g.loaded {
			var ev [2]*cuda.Event
			for i := range ev {
				if ev[i], err = dev.NewEvent(); err != nil {
					return fmt.Errorf("fusion: %w", err)
				}
			}
			g.profile[n] = ev
		}
	}
	return nil
}

// load allocates the buffers and loads the kernels, in graph order; mark
// times its phases.
func (g *gpu) load(c *Compiled, mark *time.Time) error {
	disk := c.cfg.diskCache()
	// the kernels, compiled together at the end (codegen and the driver's
	// linker in parallel: cuda.Device.CompileMany)
	var jobs []cuda.Job
	var jobNodes []*G.Node
	isInput := map[*G.Node]bool{}
	for _, in := range c.rw.inputs {
		isInput[in.nn] = true
	}
	if err := g.allocAll(isInput); err != nil {
		return err
	}
	g.lap("buffers", mark)
	for _, n := range g.order {
		if isInput[n] {
			if _, err := g.buffer(n); err != nil {
				return err
			}
			g.vers.add(n, nil)
			continue
		}
		args := operands(c.Graph, n)
		switch op := n.Op().(type) {
		case nil:
			return fmt.Errorf("fusion: node %v has no op and is not an input", n.Name())
		case *FusedOp:
			dev, err := g.args(args)
			if err != nil {
				return err
			}
			if op.IsView() { // a reshape: the same device memory
				g.bufs[n] = dev[0].(*cuda.Buffer)
				g.vers.add(n, args[0])
				g.vers.add(opKey{n}, n)
				continue
			}
			out, err := g.buffer(n)
			if err != nil {
				return err
			}
			g.vers.add(n, nil)
			g.vers.add(opKey{n}, n)
			// one output, or several stacked or end to end: a slice of the buffer each
			outs := []any{out}
			if op.Outputs() > 1 {
				outs = outs[:0]
				es, err := elemSize(n)
				if err != nil {
					return err
				}
				at := int64(0)
				for _, size := range op.PartSizes() {
					s, err := out.Slice(at, int64(size)*es)
					if err != nil {
						return fmt.Errorf("fusion: %v: %w", n.Name(), err)
					}
					outs = append(outs, s)
					at += int64(size) * es
				}
			}
			g.outs[n] = outs
			g.launch[n] = append(dev, outs...)
			if op.OnePointer() { // the kernel finds each output at its offset
				g.launch[n] = append(dev, out)
			}
			// the warps its target wrote it for (0, a kernel written for a CPU: codegen's 4)
			jobs = append(jobs, cuda.Job{Kernel: op.Kernel(), NumWarps: op.Kernel().Meta["num_warps"], Args: g.launch[n], Text: op.text})
			jobNodes = append(jobNodes, n)
		case *PartOp: // output i of a multi-output kernel: its slice of the buffer
			i, of := op.Part()
			outs, ok := g.outs[args[0]]
			if !ok || len(outs) != of {
				return fmt.Errorf("fusion: %v: part %d of %d of %v, which has %d outputs", n.Name(), i, of, args[0].Name(), len(outs))
			}
			g.bufs[n] = outs[i].(*cuda.Buffer)
			g.vers.add(n, args[0]) // written with its kernel's buffer
			g.vers.add(opKey{n}, n)
		default:
			if !isConst(n) { // a host op: its result goes up into this buffer
				if _, err := g.buffer(n); err != nil {
					return err
				}
				g.vers.add(n, nil)
				g.vers.add(opKey{n}, n)
			}
		}
	}
	g.lap("bind", mark) // views, slices, constants up
	fs, err := g.dev.CompileMany(jobs, disk)
	if err != nil {
		return fmt.Errorf("fusion: %w", err)
	}
	for i, n := range jobNodes {
		g.loaded[n] = fs[i]
	}
	g.lap("modules", mark)
	return nil
}

// allocAll allocates, together (cuda.Device.AllocMany: one hand-over to
// the device's thread, not one per buffer), the buffers load takes with
// buffer: the inputs', each kernel's output but a view's, each host op's.
func (g *gpu) allocAll(isInput map[*G.Node]bool) error {
	var need []*G.Node
	var sizes []int64
	for _, n := range g.order {
		own := isInput[n]
		if !own {
			switch op := n.Op().(type) {
			case nil, *PartOp:
			case *FusedOp:
				own = !op.IsView()
			default:
				own = !isConst(n)
			}
		}
		if !own {
			continue
		}
		es, err := elemSize(n)
		if err != nil {
			return err
		}
		need = append(need, n)
		sizes = append(sizes, es*int64(max(1, n.Shape().TotalSize())))
	}
	bs, err := g.dev.AllocMany(sizes)
	if err != nil {
		return err
	}
	for i, n := range need {
		g.bufs[n] = bs[i]
		g.owned = append(g.owned, bs[i])
	}
	return nil
}

// plan makes the run's steps (each kernel's arguments packed once, in C
// memory) and, with WithCUDAGraphs, the graphs of the stretches of
// launches between host ops.
func (g *gpu) plan(c *Compiled) error {
	g.isInput = map[*G.Node]bool{}
	for _, in := range c.rw.inputs {
		g.isInput[in.nn] = true
	}
	for _, n := range g.order {
		if g.isInput[n] {
			continue
		}
		switch op := n.Op().(type) {
		case *PartOp:
			continue // a slice of its kernel's buffer (load)
		case *FusedOp:
			if op.IsView() { // shares its operand's buffer (load)
				continue
			}
			if op.kernel.Parts > 1 { // the CPU's form: partial results combined by a second kernel
				return fmt.Errorf("fusion: %s writes %d partial results (a CPU target's kernel): not on the device", op.name, op.kernel.Parts)
			}
			st := devStep{n: n}
			if op.Accumulates() { // the kernel adds into its output
				for _, o := range g.outs[n] {
					st.zero = append(st.zero, o.(*cuda.Buffer))
				}
			}
			pk, err := g.dev.Pack(g.loaded[n], op.Kernel(), op.Grid(), g.launch[n]...)
			if err != nil {
				return fmt.Errorf("fusion: %w", err)
			}
			st.pk = pk
			g.steps = append(g.steps, st)
		default:
			if !isConst(n) { // constants went up in load
				g.steps = append(g.steps, devStep{n: n})
			}
		}
	}
	g.planEarly(c)
	if !c.cfg.graphs || c.cfg.profile {
		return nil
	}
	return g.dev.Run(g.buildSegs)
}

// region marks a stretch of a run's work on the device's thread in a Go
// execution trace (`tilefuse bench -trace`, runtime/trace); a no-op
// unless a trace is being taken.
func region(name string) *trace.Region {
	return trace.StartRegion(context.Background(), name)
}

// graphPos is where a step's launch is in the run's CUDA graphs: graph
// seg's step node (cuda.Thread.SetLaunch).
type graphPos struct{ seg, node int }

// buildSegs makes the run's stretches of launches between host ops into
// CUDA graphs (WithCUDAGraphs). The stretch that holds the last kernel to
// write a readable value (the user's, not a fused solver's gradient) is
// cut after it, so that the values' copies, enqueued on the side stream
// behind their graph (sendEarly), start once that kernel is done and not
// behind the kernels after it: a training step returns after its forward
// (async runs) as it does with launches. A run returns once every value
// has landed, so cutting after earlier writers would only add graph
// launches (a small MLP's step: 7 graphs for 10 kernels).
func (g *gpu) buildSegs(t *cuda.Thread) error {
	g.segs, g.graphAt = nil, map[int]graphPos{}
	lastSend := -1
	for i := range g.steps {
		if g.sendsAfter(i) {
			lastSend = i
		}
	}
	var nodes []cuda.GraphStep
	for i := 0; i < len(g.steps); {
		if g.steps[i].pk == nil {
			g.segs = append(g.segs, devSeg{from: i, to: i + 1})
			i++
			continue
		}
		j := i
		nodes = nodes[:0]
		for j < len(g.steps) && g.steps[j].pk != nil {
			for _, z := range g.steps[j].zero {
				nodes = append(nodes, cuda.GraphStep{Zero: z})
			}
			g.graphAt[j] = graphPos{len(g.segs), len(nodes)}
			nodes = append(nodes, cuda.GraphStep{Launch: g.steps[j].pk})
			j++
			if j-1 == lastSend {
				break
			}
		}
		gr, err := t.NewGraph(nodes)
		if err != nil {
			return fmt.Errorf("fusion: WithCUDAGraphs: kernels %d to %d of the run: %w", i+1, j, err)
		}
		g.segs = append(g.segs, devSeg{from: i, to: j, graph: gr})
		i = j
	}
	return nil
}

// sendsAfter reports whether step i is the last writer of a readable value
// that the run sends down early (sendEarly): not a fused solver's gradient.
func (g *gpu) sendsAfter(i int) bool {
	for _, j := range g.early[i] {
		if g.stepGrad[g.c.back[j].nn] == nil {
			return true
		}
	}
	return false
}

// resegment makes the run's graphs again (WithCUDAGraphs) after the set
// of values sent early changed (a fused solver took gradients, or let
// them go): they are cut where those values' copies start.
func (g *gpu) resegment() error {
	if g.segs == nil {
		return nil
	}
	for _, sg := range g.segs {
		if err := g.dev.FreeGraph(sg.graph); err != nil {
			return fmt.Errorf("fusion: %w", err)
		}
	}
	g.segs, g.graphAt = nil, nil
	return g.dev.Run(g.buildSegs)
}

// planEarly finds, for each readable value that a step of the run writes,
// the last step that writes its memory (views and parts of a kernel share
// their kernel's): its copy can start right after that step (sendEarly).
// Not with WithProfile, whose per-kernel events should see no copies
// beside the kernels.
func (g *gpu) planEarly(c *Compiled) {
	g.early, g.sent = map[int][]int{}, make([]bool, len(c.back))
	g.speculate = true
	for _, st := range g.steps {
		if st.pk == nil {
			g.speculate = false
		}
	}
	if c.cfg.profile {
		return
	}
	g.async = g.speculate && c.cfg.asyncRuns
	last := map[int]int{} // memory → the last step writing it
	for i, st := range g.steps {
		if m, ok := g.vers.mem[st.n]; ok {
			last[m] = i
		}
	}
	for j, b := range c.back {
		if isConst(b.nn) {
			continue
		}
		if m, ok := g.vers.mem[b.nn]; ok {
			if i, ok := last[m]; ok {
				g.early[i] = append(g.early[i], j)
			}
		}
	}
}

// sendEarly enqueues, while a run is fetching, the side copies of the
// readable values whose last writer is step i (a fused solver's gradient
// is not written back: Sync brings it).
func (g *gpu) sendEarly(t *cuda.Thread, i int) error {
	if !g.fetching {
		return nil
	}
	for _, j := range g.early[i] {
		b := g.c.back[j]
		if g.stepGrad[b.nn] != nil {
			continue
		}
		g.side = true
		err := g.writeBack(t, b)
		g.side = false
		if err != nil {
			return err
		}
		g.sent[j] = true
	}
	return nil
}

// args are the device buffers of a kernel's operands.
func (g *gpu) args(nodes G.Nodes) ([]any, error) {
	dev := make([]any, 0, len(nodes)+1)
	for _, a := range nodes {
		b, err := g.devBuf(a)
		if err != nil {
			return nil, err
		}
		dev = append(dev, b)
	}
	return dev, nil
}

func elemSize(n *G.Node) (int64, error) {
	switch n.Dtype() {
	case tensor.Float32:
		return 4, nil
	case tensor.Float64:
		return 8, nil
	}
	return 0, fmt.Errorf("fusion: node %v: dtype %v on the GPU backend", n.Name(), n.Dtype())
}

// buffer is n's device buffer, allocated once and reused across runs.
func (g *gpu) buffer(n *G.Node) (*cuda.Buffer, error) {
	if b, ok := g.bufs[n]; ok {
		return b, nil
	}
	es, err := elemSize(n)
	if err != nil {
		return nil, err
	}
	b, err := g.dev.Alloc(es * int64(max(1, n.Shape().TotalSize())))
	if err != nil {
		return nil, err
	}
	g.bufs[n] = b
	g.owned = append(g.owned, b)
	return b, nil
}

// upload copies v into n's buffer: through t inside a Run, else on its own.
// A user's input (input true) goes through Stager.UploadKept: the run
// waits for the stream before it returns, and the user does not write the
// value meanwhile, so that memory uploaded from run after run (a batch
// filled in place, a few taken in turn) is locked once and sent straight
// from where it is.
func (g *gpu) upload(t *cuda.Thread, n *G.Node, v G.Value, input bool) error {
	_, err := g.uploadOn(t, nil, n, v, input)
	return err
}

// uploadOn is upload with a user's input's copy straight from its locked
// memory enqueued on the stream on (nil: the default stream); onStream
// reports that it went there.
func (g *gpu) uploadOn(t *cuda.Thread, on *cuda.Stream, n *G.Node, v G.Value, input bool) (onStream bool, err error) {
	b, ok := g.bufs[n]
	if !ok {
		if t != nil { // allocating here would wait on the thread we are on
			return false, fmt.Errorf("fusion: %v has no buffer from prepare", n.Name())
		}
		var err error
		if b, err = g.buffer(n); err != nil {
			return false, err
		}
	}
	if d, ok := v.(*tensor.Dense); ok && d.IsMaterializable() {
		input = false // a view: its bytes are copied out afresh each run, nothing to lock
	}
	h, err := hostSlice(v)
	if err != nil {
		return false, fmt.Errorf("fusion: %v: %w", n.Name(), err)
	}
	if t == nil {
		return false, g.dev.Upload(b, h)
	}
	g.last.Uploads++
	g.last.BytesUp += b.Bytes
	g.vers.wrote(n)
	if input {
		d := g.stage.Direct
		onStream, err := g.stage.UploadKeptOn(t, on, b, h)
		g.last.BytesUpInPlace += g.stage.Direct - d
		return onStream, err
	}
	return false, g.stage.Upload(t, b, h)
}

// download copies n's buffer into host memory: n's in mem, kept from one
// run to the next and overwritten by the next copy, or fresh memory where
// mem is nil (a value the user reads, unless WithReuseOutputs).
func (g *gpu) download(t *cuda.Thread, n *G.Node, mem map[*G.Node]any) (G.Value, error) {
	b, ok := g.bufs[n]
	if !ok {
		return nil, fmt.Errorf("fusion: %v has no device value", n.Name())
	}
	host, ok := mem[n]
	if !ok {
		if ch, ok := g.pre[n]; ok && mem == nil {
			rg := region("tilefuse: host memory")
			host = <-ch
			rg.End()
			delete(g.pre, n)
		} else {
			rec := g.rec // recycled: the memory of a value the user reads
			if mem != nil {
				rec = nil
			}
			host = hostMem(n, rec)
		}
		if mem != nil {
			mem[n] = host
		}
	}
	if err := g.copyDown(t, host, b); err != nil {
		return nil, err
	}
	g.last.Downloads++
	g.last.BytesDown += b.Bytes
	if n.IsScalar() { // while fetching, its bytes land at endFetch: the value is set then
		if h, ok := host.([]float64); ok {
			v := G.NewF64(h[0])
			if g.fetching {
				g.afterFetch = append(g.afterFetch, func() error { *v = G.F64(h[0]); return nil })
			}
			return v, nil
		}
		h := host.([]float32)
		v := G.NewF32(h[0])
		if g.fetching {
			g.afterFetch = append(g.afterFetch, func() error { *v = G.F32(h[0]); return nil })
		}
		return v, nil
	}
	return tensor.New(tensor.WithShape(n.Shape().Clone()...), tensor.WithBacking(host)), nil
}

// hostMem is fresh host memory for n's value, recycled through rec where
// it is not nil (a download writes every element).
func hostMem(n *G.Node, rec *recycler) any {
	size := max(1, n.Shape().TotalSize())
	if n.Dtype() == tensor.Float64 {
		return recycledSlice[float64](rec, size, false)
	}
	return recycledSlice[float32](rec, size, false)
}

// hostBytes is the size of hostMem(n).
func hostBytes(n *G.Node) int {
	size := max(1, n.Shape().TotalSize())
	if n.Dtype() == tensor.Float64 {
		return 8 * size
	}
	return 4 * size
}

// preallocMin is the least host memory a value sent early has allocated
// on a goroutine of its own (preallocate); a smaller one is allocated by
// the device's thread when its copy is enqueued: on the H200's host the
// device's thread waited 50–70 µs (a goroutine started on a woken core,
// then the thread itself rescheduled) for a loss's 4 bytes in the middle
// of a training step's launches (a Go trace of `tilefuse bench -loop`,
// 2026-12-02), where allocating them costs nanoseconds; larger values
// wait for nothing either way (writeBackLater takes their memory at the
// copy out). TILEFUSE_PREALLOC_MIN gives another bound in bytes, read when
// the process starts, for measuring (0: every value on a goroutine).
var preallocMin = func() int {
	n, err := strconv.Atoi(os.Getenv("TILEFUSE_PREALLOC_MIN"))
	if err != nil || n < 0 {
		return 4096
	}
	return n
}()

// preallocate makes the channels through which the fresh host memory of
// the values a run sends down early comes (g.pre: set before the run is
// handed over, read by the device's thread), and returns the function
// that allocates it, a goroutine a value: called once the device's thread
// has the run, so that the batch's copy does not wait for the goroutines
// to be started (nil: nothing to allocate).
func (g *gpu) preallocate() (start func()) {
	clear(g.pre)
	if g.fetch == nil || g.c.cfg.reuse {
		return nil
	}
	type pre struct {
		n  *G.Node
		ch chan any
	}
	var ps []pre
	for _, js := range g.early {
		for _, j := range js {
			n := g.c.back[j].nn
			if g.stepGrad[n] != nil || isConst(n) || hostBytes(n) < preallocMin {
				continue
			}
			if g.pre == nil {
				g.pre = map[*G.Node]chan any{}
			}
			ch := make(chan any, 1)
			g.pre[n] = ch
			ps = append(ps, pre{n, ch})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	rec := g.rec // not g's field: close may clear it while this runs
	return func() {
		for _, p := range ps {
			go func() { p.ch <- hostMem(p.n, rec) }()
		}
	}
}

// copyDown copies b into host: enqueued on the fetcher while fetching
// (host holds the bytes after endFetch), else at once.
func (g *gpu) copyDown(t *cuda.Thread, host any, b *cuda.Buffer) error {
	switch {
	case g.fetching && g.side:
		return g.fetch.EnqueueSide(t, host, b)
	case g.fetching:
		return g.fetch.Enqueue(t, host, b)
	}
	return t.Download(host, b)
}

// beginFetch makes the downloads that follow enqueue on the fetcher.
func (g *gpu) beginFetch() {
	g.fetching, g.afterFetch = g.fetch != nil, g.afterFetch[:0]
}

// endFetch waits for the downloads enqueued since beginFetch, copies them
// into their host memory and runs what waited for them; with wait false
// (an error on the way) it only drops them.
func (g *gpu) endFetch(t *cuda.Thread, wait bool) error {
	g.fetching = false
	if g.fetch == nil {
		return nil
	}
	if !wait {
		g.fetch.Discard()
		g.afterFetch = g.afterFetch[:0]
		return nil
	}
	if err := g.fetch.Finish(t); err != nil {
		return err
	}
	var first error
	for _, f := range g.afterFetch {
		if err := f(); first == nil {
			first = err
		}
	}
	g.afterFetch = g.afterFetch[:0]
	if first != nil {
		return first
	}
	return nil
}

// devBuf is n's device buffer; a constant goes up the first time it is needed.
func (g *gpu) devBuf(n *G.Node) (*cuda.Buffer, error) {
	if b, ok := g.bufs[n]; ok {
		return b, nil
	}
	if isConst(n) {
		if err := g.upload(nil, n, n.Value(), false); err != nil {
			return nil, err
		}
		return g.bufs[n], nil
	}
	return nil, fmt.Errorf("fusion: %v has no device value", n.Name())
}

// run is one Run on the device's thread: the inputs that changed up, the
// timed compute, the readable set down where the host's copy is stale.
func (g *gpu) run() error {
	c := g.c
	vals := make([]G.Value, len(c.rw.inputs))
	for i, in := range c.rw.inputs {
		vals[i] = in.orig.Value()
		if err := checkInput(in.orig, vals[i]); err != nil {
			return err
		}
	}
	g.last, g.devMs = Stats{}, 0
	start := time.Now()
	alloc := g.preallocate()
	// the inputs kept if their bytes hash as before: hashed on other
	// goroutines while the device thread uploads and launches (on the
	// guess that they did not change), settled before anything comes
	// down; a run with host ops (which read values on the host mid-run)
	// hashes them first
	plan := planInputsLater(g.held, vals, c.cfg.inCheck)
	var sums chan []uint64
	var hashLater [][]byte // hashed by this goroutine once the device's thread has the run
	if len(plan.later) > 0 {
		if g.speculate && !g.stale {
			sums = make(chan []uint64, 1)
			hashLater = plan.laterBytes()
		} else {
			g.stale = len(plan.settle(g.held, hashAll(plan.laterBytes()))) > 0
		}
	}
	if err := g.makeTwins(plan.up); err != nil {
		return err
	}
	ph := &g.last.Phases
	mark := time.Now()
	ph.Check = mark.Sub(start).Seconds()
	lap := func(d *float64) { // the time since the last mark into d
		now := time.Now()
		*d = now.Sub(mark).Seconds()
		mark = now
	}
	wait := g.dev.RunAsync(func(t *cuda.Thread) error {
		lap(&ph.HandOff)
		if g.fetch == nil {
			return fmt.Errorf("fusion: the machine is closed")
		}
		if err := g.takeStepErr(); err != nil {
			return err
		}
		g.unsettled = false // the last run's times: not asked for before this run
		upTimed := slices.Contains(plan.up, true)
		if upTimed {
			if err := g.timer.Before(t); err != nil {
				return err
			}
		}
		beside := false // a copy on the copy stream
		rg := region("tilefuse: upload")
		for _, i := range g.upOrder {
			in := c.rw.inputs[i]
			if !plan.up[i] {
				g.last.Held++
				continue
			}
			g.held[i].ok = false // until the copy is enqueued
			on, err := g.twinFor(t, i)
			if err != nil {
				return err
			}
			went, err := g.uploadOn(t, on, in.nn, vals[i], true)
			if err != nil {
				return err
			}
			beside = beside || went
			g.held[i].took(vals[i], plan.bytes[i], plan.sums[i], plan.hashed[i])
		}
		g.lastUp = append(g.lastUp[:0], plan.up...)
		if beside { // the kernels wait for the copies beside them
			if err := g.copyS.Record(t, g.copyEv); err != nil {
				return err
			}
			if err := t.WaitFor(g.copyEv); err != nil {
				return err
			}
		}
		upWait := upTimed && g.async // upDone recorded: an early return waits for it
		if upWait {
			if err := t.Record(g.upDone); err != nil {
				return err
			}
		}
		rg.End()
		lap(&ph.Upload)
		// the readable values' downloads: each enqueued on the fetcher's
		// side stream right after the kernel that writes it last (compute,
		// sendEarly), the rest behind the kernels; one wait for all, then
		// the copies out of the pinned memory
		g.beginFetch()
		clear(g.sent)
		fetched := false
		defer func() {
			if !fetched {
				g.endFetch(t, false)
				t.Sync() // nothing reads the user's inputs once RunAll returns (UploadKept); a sticky error is the run's already
			}
		}()
		if err := g.timer.Start(t); err != nil {
			return err
		}
		rg = region("tilefuse: launch")
		if err := g.compute(t, c); err != nil {
			return err
		}
		rg.End()
		lap(&ph.Launch)
		if sums != nil {
			rg := region("tilefuse: hashes")
			h := <-sums
			rg.End()
			changed := plan.settle(g.held, h)
			g.stale = len(changed) > 0
			if len(changed) > 0 { // a write into a kept input: up, and again
				if err := g.redo(t, c, vals, &plan, changed); err != nil {
					return err
				}
				upWait = g.async // redo recorded upDone after its uploads
			}
			var waited float64
			lap(&waited)
			ph.Check += waited
		}
		g.last.HashedBytes = plan.hashedB
		if err := g.timer.Mark(t); err != nil {
			return err
		}
		if err := g.twinsRead(t); err != nil {
			return err
		}
		rg = region("tilefuse: write back")
		for j, b := range c.back {
			if g.sent[j] {
				continue // on its way since its kernel
			}
			if isConst(b.nn) { // known on the host (SizeOf, folded constants)
				if v := b.nn.Value(); v != nil {
					if err := G.UnsafeLet(b.orig, v); err != nil {
						return fmt.Errorf("writing back %v: %w", b.orig.Name(), err)
					}
				}
				continue
			}
			if g.stepGrad[b.nn] != nil {
				continue // a fused solver's gradient: Sync writes it back
			}
			if err := g.writeBack(t, b); err != nil {
				return err
			}
		}
		rg.End()
		down := time.Since(mark).Seconds()
		mark = time.Now()
		rg = region("tilefuse: landed")
		// every value the user can read on its way beside the kernels
		// (async): the run returns once they have landed and its uploads
		// have been read, the rest of its kernels still running
		early := g.async && g.fetch.OnSide()
		if err := g.fetch.CopyLanded(t); err != nil { // the early values out while the kernels run
			return err
		}
		if early {
			if upWait {
				if err := t.Wait(g.upDone); err != nil { // the user's input memory read
					return err
				}
			}
			rg.End()
			lap(&ph.Wait)
			g.unsettled, g.upTimed = true, upTimed
			g.last.ReturnedEarly = true
		} else {
			if err := g.fetch.Wait(t); err != nil {
				return err
			}
			rg.End()
			lap(&ph.Wait)
			g.upTimed = upTimed
			if err := g.settle(t); err != nil {
				return err
			}
		}
		fetched = true
		rg = region("tilefuse: copy out")
		if err := g.endFetch(t, true); err != nil {
			return err
		}
		rg.End()
		lap(&ph.Download)
		ph.Launch += down
		return nil
	})
	if alloc != nil {
		alloc()
	}
	if hashLater != nil {
		// the kept inputs' hashes, computed here while the device's thread
		// uploads and launches (a goroutine of their own waited a
		// reschedule behind this one's polling), settled by the thread
		// after its launches; sums holds one, so an early return of the
		// thread leaves the send nothing to wait for
		sums <- hashAll(hashLater)
	}
	err := wait()
	lap(&ph.Return)
	g.runWall = time.Since(start).Seconds()
	if !g.unsettled {
		g.last.HostSeconds = max(0, g.runWall-g.devMs/1e3)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "fusion: ") {
		err = fmt.Errorf("fusion: %w", err)
	}
	return err
}

// redo is the rest of a run whose compute was launched on inputs that
// turned out to have changed on the host (changed, settled after the
// launches): the copies already on their way are waited for and dropped,
// those inputs go up, and the compute runs again (each kernel writes its whole
// output, zeroing first where it accumulates, so the second results
// replace the first).
func (g *gpu) redo(t *cuda.Thread, c *Compiled, vals []G.Value, plan *inputPlan, changed []int) error {
	if err := g.fetch.Wait(t); err != nil { // no side copy still writing the pinned memory
		return err
	}
	g.endFetch(t, false)
	for _, i := range changed {
		in := c.rw.inputs[i]
		g.last.Held--
		g.held[i].ok = false
		if err := g.upload(t, in.nn, vals[i], true); err != nil {
			return err
		}
		g.held[i].took(vals[i], plan.bytes[i], plan.sums[i], plan.hashed[i])
	}
	if g.async { // a run that returns early waits for these uploads too
		if err := t.Record(g.upDone); err != nil {
			return err
		}
	}
	g.beginFetch()
	clear(g.sent)
	return g.compute(t, c)
}

// gpuKernelTime is WithAutotune's measurement on the GPU: k on device
// copies of args (compiled through the disk cache), launched once, its
// outputs downloaded into the last k.Outs of args; then, after 5 ms of
// launches (the clocks up; 1 ms where a measurement ended within the last
// second), 5 batches of 10 launches between events: the median batch's
// time a launch, or the first batch's where it is over limit.
func gpuKernelTime(k *graphpass.Kernel, args []any, limit float64, disk *diskcache.Cache) (float64, error) {
	dev, err := sharedDevice()
	if err != nil {
		return 0, err
	}
	bufs := make([]any, len(args))
	nIn := len(args) - len(tuneOutSizes(k))
	defer func() {
		for _, b := range bufs[nIn:] { // the inputs stay for the text's next candidate
			if b, ok := b.(*cuda.Buffer); ok {
				dev.Free(b)
			}
		}
	}()
	tuneInputs.Lock()
	defer tuneInputs.Unlock()
	for i, a := range args {
		n := int64(0)
		var key tuneInputKey
		switch a := a.(type) {
		case []float32:
			n, key = 4*int64(len(a)), tuneInputKey{unsafe.Pointer(unsafe.SliceData(a)), len(a)}
		case []float64:
			n, key = 8*int64(len(a)), tuneInputKey{unsafe.Pointer(unsafe.SliceData(a)), len(a)}
		default:
			return 0, fmt.Errorf("fusion: tuning @%s: argument %d is %T", k.Tile.Name, i, a)
		}
		if i < nIn {
			if b, ok := tuneInputs.bufs[key]; ok {
				bufs[i] = b
				continue
			}
		}
		b, err := dev.Alloc(n)
		if err != nil {
			return 0, err
		}
		bufs[i] = b
		if i < nIn {
			if tuneInputs.bufs == nil {
				tuneInputs.bufs = map[tuneInputKey]*cuda.Buffer{}
			}
			tuneInputs.bufs[key] = b // freed by gpuTuneRelease
		}
		if err := dev.Upload(b, a); err != nil {
			return 0, err
		}
	}
	_, f, err := dev.CompileCached(k.Tile, k.Tile.Meta["num_warps"], bufs, disk)
	if err != nil {
		return 0, err
	}
	if err := dev.Launch(f, k.Tile, k.Grid, bufs...); err != nil {
		return 0, err
	}
	if err := dev.Sync(); err != nil {
		return 0, fmt.Errorf("fusion: tuning @%s: %w", k.Tile.Name, err)
	}
	for i := len(args) - len(tuneOutSizes(k)); i < len(args); i++ {
		if err := dev.Download(args[i], bufs[i].(*cuda.Buffer)); err != nil {
			return 0, err
		}
	}
	timer, err := dev.NewTimer()
	if err != nil {
		return 0, err
	}
	defer timer.Close()
	const batch = 10
	launch := func() error { return dev.LaunchN(batch, f, k.Tile, k.Grid, bufs...) }
	warm := 5.0 // ms of launches before timing: the clocks up
	tuneWarm.Lock()
	if time.Since(tuneWarm.last) < time.Second {
		warm = 1 // the device ran a measurement just now: still warm
	}
	tuneWarm.Unlock()
	defer func() {
		tuneWarm.Lock()
		tuneWarm.last = time.Now()
		tuneWarm.Unlock()
	}()
	for spent := 0.0; spent < warm; {
		ms, err := timer.Time(launch)
		if err != nil {
			return 0, err
		}
		spent += ms
	}
	ts := make([]float64, 5)
	for i := range ts {
		ms, err := timer.Time(launch)
		if err != nil {
			return 0, err
		}
		ts[i] = ms / 1e3 / batch
		if i == 0 && ts[0] > limit {
			return ts[0], nil // its first batch says it cannot win
		}
	}
	return medianOf(ts), nil
}

// tuneInputs are the device copies of the tuner's input buffers, by the
// host slice's data and length: the candidates of one kernel text (and its
// rematch) read the same inputs, uploaded once, until gpuTuneRelease. A
// kernel that wrote its inputs would spoil the next candidates' outputs,
// which are then rejected as computing otherwise, never chosen.
var tuneInputs struct {
	sync.Mutex
	bufs map[tuneInputKey]*cuda.Buffer
}

type tuneInputKey struct {
	p unsafe.Pointer
	n int
}

// releaseTuneInputs frees tuneInputs (gpuTuneRelease).
func releaseTuneInputs() {
	tuneInputs.Lock()
	defer tuneInputs.Unlock()
	if len(tuneInputs.bufs) == 0 {
		return
	}
	if dev, err := sharedDevice(); err == nil {
		for _, b := range tuneInputs.bufs {
			dev.Free(b)
		}
	}
	clear(tuneInputs.bufs)
}

// tuneWarm is when the last tuning measurement ended: a measurement within
// a second of it warms the device up for 1 ms instead of 5.
var tuneWarm struct {
	sync.Mutex
	last time.Time
}

// deviceTimes runs compute back to back in one Run: untimed for warm of
// wall time (waiting on the device every 8 runs, so that the queue does
// not run far ahead) and once more, so that the device is busy when the
// first event is recorded, then n batches of batch runs with an event
// between each two batches.
func (g *gpu) deviceTimes(n, batch int, warm time.Duration) ([]float64, error) {
	c := g.c
	evs := make([]*cuda.Event, n+1)
	defer func() {
		for _, e := range evs {
			if e != nil {
				g.dev.FreeEvent(e)
			}
		}
	}()
	for i := range evs {
		var err error
		if evs[i], err = g.dev.NewEvent(); err != nil {
			return nil, fmt.Errorf("fusion: %w", err)
		}
	}
	last := g.last // the last RunAll's statistics stay its own
	defer func() { g.last = last }()
	times := make([]float64, n)
	err := g.dev.Run(func(t *cuda.Thread) error {
		for i, t0 := 0, time.Now(); time.Since(t0) < warm; i++ {
			if err := g.compute(t, c); err != nil {
				return err
			}
			if i%8 == 7 {
				if err := t.Record(evs[0]); err != nil {
					return err
				}
				if err := t.Wait(evs[0]); err != nil {
					return err
				}
			}
		}
		if err := g.compute(t, c); err != nil {
			return err
		}
		if err := t.Record(evs[0]); err != nil {
			return err
		}
		for i := range n {
			for range batch {
				if err := g.compute(t, c); err != nil {
					return err
				}
			}
			if err := t.Record(evs[i+1]); err != nil {
				return err
			}
		}
		if err := t.Wait(evs[n]); err != nil {
			return err
		}
		for i := range n {
			ms, err := t.Elapsed(evs[i], evs[i+1])
			if err != nil {
				return err
			}
			times[i] = ms / 1e3 / float64(batch)
		}
		return nil
	})
	if err != nil && !strings.HasPrefix(err.Error(), "fusion: ") {
		err = fmt.Errorf("fusion: %w", err)
	}
	return times, err
}

// writeBack gives the user's node b.orig the value of b.nn: downloaded,
// unless the node still holds the copy of what the device holds now.
func (g *gpu) writeBack(t *cuda.Thread, b binding) error {
	if v := g.backVal[b.orig]; v != nil && b.orig.Value() == v && g.vers.current(b.nn) {
		return nil
	}
	mem := g.backHost // WithReuseOutputs: the value's memory of the last copy
	if !g.c.cfg.reuse {
		mem = nil // fresh memory: a value read after a run is not overwritten
		if ch, ok := g.pre[b.nn]; ok && g.fetching && g.side && !b.nn.IsScalar() {
			return g.writeBackLater(t, b, ch)
		}
	}
	v, err := g.download(t, b.nn, mem)
	if err != nil {
		return err
	}
	if err := G.UnsafeLet(b.orig, v); err != nil {
		return fmt.Errorf("writing back %v: %w", b.orig.Name(), err)
	}
	done := func() error {
		g.backVal[b.orig] = v
		g.vers.copied(b.nn)
		return nil
	}
	if g.fetching { // current once the bytes have landed
		delete(g.backVal, b.orig)
		g.afterFetch = append(g.afterFetch, done)
		return nil
	}
	return done()
}

// writeBackLater is writeBack of a value sent early whose fresh host
// memory is still being allocated on another goroutine (preallocate: Go
// zeroes it, ~170 µs a MB on an H200's host): the copy goes into the
// fetcher's pinned memory now, beside the kernels, and the memory is taken
// from ch, the value made and given to the user's node, only when the copy
// is copied out, so that the launches behind it do not wait for the
// memory (encoder_train's 2 MB prediction held the backward's launches
// back by ~0.3 ms).
func (g *gpu) writeBackLater(t *cuda.Thread, b binding, ch chan any) error {
	buf, ok := g.bufs[b.nn]
	if !ok {
		return fmt.Errorf("fusion: %v has no device value", b.nn.Name())
	}
	delete(g.pre, b.nn)
	var host any
	take := func() any {
		if host == nil {
			rg := region("tilefuse: host memory")
			host = <-ch
			rg.End()
		}
		return host
	}
	if err := g.fetch.EnqueueSideLater(t, buf, int64(hostBytes(b.nn)), take); err != nil {
		return err
	}
	g.last.Downloads++
	g.last.BytesDown += buf.Bytes
	delete(g.backVal, b.orig)
	g.afterFetch = append(g.afterFetch, func() error {
		v := tensor.New(tensor.WithShape(b.nn.Shape().Clone()...), tensor.WithBacking(take()))
		if err := G.UnsafeLet(b.orig, v); err != nil {
			return fmt.Errorf("writing back %v: %w", b.orig.Name(), err)
		}
		g.backVal[b.orig] = v
		g.vers.copied(b.nn)
		return nil
	})
	return nil
}

// operand is n's value on the host for a host op: downloaded unless the
// copy made for an earlier host op is current.
func (g *gpu) operand(t *cuda.Thread, n *G.Node) (G.Value, error) {
	if v := g.hostVal[n]; v != nil && g.vers.current(opKey{n}) {
		return v, nil
	}
	v, err := g.download(t, n, g.host)
	if err != nil {
		return nil, err
	}
	g.hostVal[n] = v
	g.vers.copied(opKey{n})
	return v, nil
}

// compute launches the graph's kernels and runs its host ops, in order
// (the steps plan made); the inputs are on the device. With graphs (plan)
// each stretch of launches is one graph's replay.
func (g *gpu) compute(t *cuda.Thread, c *Compiled) error {
	if g.segs != nil {
		for _, sg := range g.segs {
			if sg.graph == nil {
				if err := g.hostOp(t, c, g.steps[sg.from].n); err != nil {
					return err
				}
				if err := g.sendEarly(t, sg.from); err != nil {
					return err
				}
				continue
			}
			if err := t.LaunchGraph(sg.graph); err != nil {
				return fmt.Errorf("fusion: %w", err)
			}
			g.last.GraphLaunches++
			for _, st := range g.steps[sg.from:sg.to] {
				g.vers.wrote(st.n)
			}
			for i := sg.from; i < sg.to; i++ {
				if err := g.sendEarly(t, i); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for i, st := range g.steps {
		if st.pk == nil {
			if err := g.hostOp(t, c, st.n); err != nil {
				return err
			}
			if err := g.sendEarly(t, i); err != nil {
				return err
			}
			continue
		}
		for _, z := range st.zero {
			if err := t.Zero(z); err != nil {
				return err
			}
		}
		ev, timed := g.profile[st.n]
		if timed {
			if err := t.Record(ev[0]); err != nil {
				return err
			}
		}
		if err := t.LaunchPacked(st.pk); err != nil {
			return fmt.Errorf("fusion: %w", err)
		}
		g.last.Launches++
		g.vers.wrote(st.n)
		if timed {
			if err := t.Record(ev[1]); err != nil {
				return err
			}
		}
		if err := g.sendEarly(t, i); err != nil {
			return err
		}
	}
	return nil
}

// hostOp runs n, an op tilefuse does not know, on the CPU: its operands
// down (where the host's copies are stale), its result up.
func (g *gpu) hostOp(t *cuda.Thread, c *Compiled, n *G.Node) error {
	fetching := g.fetching // the operands come down now, not with the run's values
	g.fetching = false
	defer func() { g.fetching = fetching }()
	args := operands(c.Graph, n)
	vals := make([]G.Value, len(args))
	for i, a := range args {
		if isConst(a) {
			vals[i] = a.Value()
			continue
		}
		v, err := g.operand(t, a)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	v, err := n.Op().Do(vals...)
	if err != nil {
		return fmt.Errorf("fusion: %v on the CPU: %w", n.Name(), err)
	}
	if err := g.upload(t, n, v, false); err != nil {
		return err
	}
	g.last.HostOps++
	return nil
}

// takeStepErr is the error of the last solver step's launches, or of the
// device's work of a run that returned before it ended (async), once (on
// the device's thread).
func (g *gpu) takeStepErr() error {
	err, rerr := g.stepErr, g.runErr
	g.stepErr, g.runErr = nil, nil
	if err != nil {
		return fmt.Errorf("fusion: the last solver step failed on the device: %w", err)
	}
	if rerr != nil {
		return fmt.Errorf("fusion: the last run failed on the device after RunAll returned: %w", rerr)
	}
	return nil
}

// settle reads the last run's device times (on the device's thread),
// waiting for its compute to end: the timer, the uploads' time, and with
// WithProfile each kernel's.
func (g *gpu) settle(t *cuda.Thread) error {
	g.unsettled = false
	ms, err := g.timer.Read(t)
	if err != nil {
		return err
	}
	g.devMs = ms
	if g.upTimed {
		up, err := g.timer.ReadBefore(t)
		if err != nil {
			return err
		}
		g.last.UploadDeviceTime = up / 1e3
	}
	if g.profile != nil { // every event has completed with the timer's
		g.times = g.times[:0]
		for _, n := range g.order {
			ev, ok := g.profile[n]
			if !ok {
				continue
			}
			ms, err := t.Elapsed(ev[0], ev[1])
			if err != nil {
				return err
			}
			op := n.Op().(*FusedOp)
			g.times = append(g.times, KernelTime{Kernel: op.name, Ops: op.ops, Seconds: ms / 1e3, Faults: -1})
		}
	}
	return nil
}

// settleLate settles a run that returned before its compute ended
// (async), when its times are asked for; an error of the device found so
// is the next run's, step's, sync's or close's (runErr), and the times
// stay 0.
func (g *gpu) settleLate() {
	if !g.unsettled || g.dev == nil {
		return
	}
	g.dev.Run(func(t *cuda.Thread) error {
		if err := g.settleNow(t); err != nil {
			g.devMs, g.last.UploadDeviceTime = 0, 0
			if g.runErr == nil {
				g.runErr = err
			}
		}
		return nil
	})
}

// settleNow settles the last run if it returned early and is not settled
// yet (or dropped by a run since), on the device's thread, its host time
// with it.
func (g *gpu) settleNow(t *cuda.Thread) error {
	if !g.unsettled {
		return nil
	}
	if err := g.settle(t); err != nil {
		return err
	}
	g.last.HostSeconds = max(0, g.runWall-g.devMs/1e3)
	return nil
}

// wait blocks until the device has done everything this machine gave it
// (a run that returned early, a solver's step), settles the last run's
// times, and returns an error of that work, once.
func (g *gpu) wait() error {
	if g.dev == nil {
		return nil
	}
	err := g.dev.Run(func(t *cuda.Thread) error {
		if err := t.Sync(); err != nil {
			return err
		}
		if err := g.settleNow(t); err != nil {
			return err
		}
		return g.takeStepErr()
	})
	if err != nil && !strings.HasPrefix(err.Error(), "fusion: ") {
		err = fmt.Errorf("fusion: %w", err)
	}
	return err
}

// deviceTime is the last run's compute on the device, from an event before
// the first launch to one after the last: inputs already up, results not yet
// down.
func (g *gpu) deviceTime() float64 {
	g.settleLate()
	return g.devMs / 1e3
}

func (g *gpu) kernelTimes() []KernelTime {
	if g.profile == nil {
		return nil
	}
	return append([]KernelTime(nil), g.times...)
}

func (g *gpu) stats(s *Stats) {
	g.settleLate()
	runs, dt := s.Runs, s.DeviceTime
	*s = g.last
	s.Runs, s.DeviceTime = runs, dt
	if g.solverLast && g.dev != nil {
		err := g.dev.Run(func(t *cuda.Thread) error {
			if g.stepErr != nil { // left for the next run to report
				return g.stepErr
			}
			if err := t.Wait(g.solverEv[1]); err != nil {
				return err
			}
			ms, err := t.Elapsed(g.solverEv[0], g.solverEv[1])
			g.solverMs = ms
			return err
		})
		g.solverLast = false
		if err != nil {
			g.solverMs = 0 // unknown (Stats has no error: the next run or step reports the device's)
		}
	}
	s.SolverDeviceTime = g.solverMs / 1e3
	s.Recycled, s.Allocated, s.CollectionsAsked, s.RecycledBytes = g.rec.counts()
}

// touch marks input n changed on the host: the next run uploads it.
func (g *gpu) touch(n *G.Node) error {
	for i, in := range g.c.rw.inputs {
		if in.orig == n {
			g.held[i].touched = true
		}
	}
	return nil
}

// close frees the graph's buffers; the shared device stays open.
func (g *gpu) close() error {
	if g.dev == nil {
		return nil
	}
	werr := g.wait() // a run's or a step's work still on the device, and its error
	serr := g.sync() // the learnables the device holds, back to their host tensors
	if werr != nil {
		serr = werr
	}
	g.rec.close()
	g.rec = nil
	for _, s := range g.solvers {
		s.free()
	}
	g.solvers = nil
	if serr != nil {
		serr = fmt.Errorf("fusion: closing: %w", serr)
	}
	for _, b := range g.owned { // views and slices share these
		g.dev.Free(b)
	}
	g.bufs, g.owned = nil, nil
	for _, sg := range g.segs {
		if err := g.dev.FreeGraph(sg.graph); serr == nil && err != nil {
			serr = fmt.Errorf("fusion: closing: %w", err)
		}
	}
	for _, st := range g.steps {
		if st.pk != nil {
			st.pk.Free()
		}
	}
	g.segs, g.steps = nil, nil
	if err := g.stage.Close(); serr == nil && err != nil {
		serr = fmt.Errorf("fusion: closing: %w", err)
	}
	g.stage = nil
	if err := g.fetch.Close(); serr == nil && err != nil {
		serr = fmt.Errorf("fusion: closing: %w", err)
	}
	g.fetch = nil
	for _, ev := range g.profile {
		for _, e := range ev {
			if e != nil {
				g.dev.FreeEvent(e)
			}
		}
	}
	g.profile = nil
	for i, e := range g.solverEv {
		if e != nil {
			g.dev.FreeEvent(e)
			g.solverEv[i] = nil
		}
	}
	g.solverLast = false
	if g.upDone != nil {
		g.dev.FreeEvent(g.upDone)
		g.upDone = nil
	}
	if err := g.closeTwins(); serr == nil && err != nil {
		serr = fmt.Errorf("fusion: closing: %w", err)
	}
	g.unsettled = false
	if g.timer != nil {
		if err := g.timer.Close(); serr == nil {
			serr = err
		}
	}
	if g.counted {
		g.counted = false
		shared.Lock()
		shared.live--
		last := shared.live == 0
		shared.Unlock()
		if last {
			if err := g.dev.Trim(); serr == nil && err != nil {
				serr = fmt.Errorf("fusion: closing: %w", err)
			}
		}
	}
	return serr
}
