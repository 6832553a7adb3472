//go:build tilefuse_cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/diskcache"
	"github.com/tilefuse/tilefuse/tile"
)

// Launch runs f, generated from kernel k, over grid. Arguments follow k's
// parameters: a *Buffer for each pointer, a Go number for each scalar.
// It does not wait for the kernel to finish.
func (d *Device) Launch(f *Function, k *tile.Kernel, grid tile.Grid, args ...any) error {
	return d.LaunchN(1, f, k, grid, args...)
}

// LaunchN enqueues n launches of f back to back from the driver's thread, so
// that the host's submission overlaps the GPU's work (for timing kernels
// without launch gaps).
func (d *Device) LaunchN(n int, f *Function, k *tile.Kernel, grid tile.Grid, args ...any) error {
	return d.Run(func(t *Thread) error { return t.launchN(n, f, k, grid, args) })
}

// Thread is the device's own OS thread, inside Device.Run: calls through it
// go straight to the driver, without the hand-over to that thread that each
// Device method makes. It is valid only during the Run that made it.
type Thread struct {
	d    *Device
	live bool
}

// Run runs f on the device's thread, with a Thread for its driver calls: a
// sequence of launches and copies in one Run reaches the GPU without gaps
// between them.
func (d *Device) Run(f func(t *Thread) error) error { return d.RunAsync(f)() }

// RunAsync is Run handed over without waiting: it returns at once with
// the function that waits for f and returns its error (to be called
// once), so that the caller's goroutine can work beside the device's
// thread meanwhile (fusion hashes the inputs it kept while the thread
// launches the run's kernels).
func (d *Device) RunAsync(f func(t *Thread) error) (wait func() error) {
	t := &Thread{d: d}
	return d.work.start(func() error {
		t.live = true
		defer func() { t.live = false }()
		return f(t)
	})
}

// Post hands f to the device's thread and returns at once, without a way
// to wait for it: f runs after the work handed over before it and before
// the work handed over after it, and must keep its own error for a later
// Run to report (fusion's solver steps: their launches are enqueued
// beside the caller's next work instead of before it returns).
func (d *Device) Post(f func(t *Thread)) {
	t := &Thread{d: d}
	d.work.post(func() {
		t.live = true
		defer func() { t.live = false }()
		f(t)
	})
}

func (t *Thread) check() error {
	if !t.live {
		return fmt.Errorf("cuda: a Thread used outside its Device.Run")
	}
	return nil
}

// Launch enqueues f, generated from kernel k, over grid (as Device.Launch).
func (t *Thread) Launch(f *Function, k *tile.Kernel, grid tile.Grid, args ...any) error {
	return t.launchN(1, f, k, grid, args)
}

func (t *Thread) launchN(n int, f *Function, k *tile.Kernel, grid tile.Grid, args []any) error {
	if err := t.check(); err != nil {
		return err
	}
	if len(args) != len(k.Params) {
		return fmt.Errorf("cuda: @%s: %d arguments for %d parameters", k.Name, len(args), len(k.Params))
	}
	if err := f.clusterGrid(grid); err != nil {
		return fmt.Errorf("cuda: @%s: %w", k.Name, err)
	}
	if len(f.tmaps) > 0 {
		// parameters of 128 bytes (tensor maps): cu.Launch copies 8 a
		// parameter, so through a packed launch
		p, err := t.d.Pack(f, k, grid, args...)
		if err != nil {
			return err
		}
		defer p.Free()
		for range n {
			if err := t.LaunchPacked(p); err != nil {
				return err
			}
		}
		return nil
	}
	slots := make([]uint64, len(args)) // each parameter in 8 bytes, as cu.Launch copies them
	for i, p := range k.Params {
		v, err := paramBits(p.Type, args[i])
		if err != nil {
			return fmt.Errorf("cuda: @%s: argument %d (%s): %w", k.Name, i, p.Name, err)
		}
		slots[i] = v
	}
	params := make([]unsafe.Pointer, len(slots))
	for i := range slots {
		params[i] = unsafe.Pointer(&slots[i])
	}
	g := grid
	if g[1] == 0 {
		g[1] = 1
	}
	if g[2] == 0 {
		g[2] = 1
	}
	if g[0] == 0 {
		return nil
	}
	for i := 0; i < n; i++ {
		if err := f.fn.Launch(g[0], g[1], g[2], f.Threads, 1, 1, f.DynShared, cu.Stream{}, params); err != nil {
			return fmt.Errorf("cuda: @%s: launch grid %v: %w", k.Name, g, err)
		}
	}
	return nil
}

// clusterGrid reports a grid the driver would refuse: more than 65535
// programs on axis 1 or 2 (CUDA's gridDim.y and z; graphpass flattens such
// grids: tile.Kernel.FlattenGrid), or not whole clusters of f's.
func (f *Function) clusterGrid(grid tile.Grid) error {
	if grid[1] > maxGridYZ || grid[2] > maxGridYZ {
		return fmt.Errorf("grid %v: a launch holds at most %d programs on axes 1 and 2 (flatten it: tile.Kernel.FlattenGrid)", grid, maxGridYZ)
	}
	if f.cluster == [3]int{} {
		return nil
	}
	for i, c := range f.cluster {
		g := max(grid[i], 1)
		if c > 0 && g%c != 0 {
			return fmt.Errorf("grid %v is not whole clusters of %v CTAs", grid, f.cluster)
		}
	}
	return nil
}

// paramBits encodes one argument as the bits of its parameter type (scalars
// by every backend's rules, tile.ConvertScalar).
func paramBits(t tile.Type, x any) (uint64, error) {
	if t.Ptr {
		b, ok := x.(*Buffer)
		if !ok {
			return 0, fmt.Errorf("%T for a pointer: want *cuda.Buffer", x)
		}
		return uint64(b.Ptr), nil
	}
	v, err := tile.ConvertScalar(x, t.DType)
	if err != nil {
		return 0, err
	}
	switch v := v.(type) {
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	case int32:
		return uint64(uint32(v)), nil
	case int64:
		return uint64(v), nil
	case float32:
		return uint64(math.Float32bits(v)), nil
	case float64:
		return math.Float64bits(v), nil
	}
	return 0, fmt.Errorf("parameter type %v", t)
}

// Spec derives the divisibility specialisation of a launch from its
// arguments, as Triton does: integers divisible by 16 and pointers aligned to
// 16 bytes are marked so.
func Spec(k *tile.Kernel, args []any) []int {
	spec := make([]int, len(k.Params))
	for i, p := range k.Params {
		if i >= len(args) {
			break
		}
		switch {
		case p.Type.Ptr:
			if b, ok := args[i].(*Buffer); ok && uint64(b.Ptr)%16 == 0 {
				spec[i] = 16
			}
		case p.Type.DType.IsInt():
			v, err := tile.ConvertScalar(args[i], tile.I64)
			if n, ok := v.(int64); err == nil && ok && n%16 == 0 {
				spec[i] = 16
			}
		}
	}
	return spec
}

// Compile generates and loads k for a launch with these arguments.
func (d *Device) Compile(k *tile.Kernel, numWarps int, args []any) (*codegen.Kernel, *Function, error) {
	return d.CompileCached(k, numWarps, args, nil)
}

// Job is a kernel to compile for a launch with these arguments (or,
// where Spec is set, for arguments of that specialisation).
type Job struct {
	Kernel   *tile.Kernel
	NumWarps int
	Args     []any
	Spec     []int
	// Text, if not empty, is Kernel.Anonymous(), which the caller has
	// written already (a graph's kernels' texts are written once, at
	// compile time): not written again to look the kernel up.
	Text string
}

func (j Job) text() string {
	if j.Text != "" {
		return j.Text
	}
	return j.Kernel.Anonymous()
}

func (j Job) spec() []int {
	if j.Spec != nil {
		return j.Spec
	}
	return Spec(j.Kernel, j.Args)
}

// CompileMany is CompileCached for many kernels at once, the way a
// graph's kernels are prepared: codegen in parallel goroutines, the
// modules neither loaded nor on disk linked in parallel (LinkAhead), then
// each loaded. The functions are in the jobs' order.
func (d *Device) CompileMany(jobs []Job, c *diskcache.Cache) ([]*Function, error) {
	type gen struct {
		ck  *codegen.Kernel
		err error
	}
	keys := make([]string, len(jobs))
	gens := map[string]*gen{}
	var todo []int // a job of each key codegen has not made
	d.mu.Lock()
	for i, j := range jobs {
		keys[i] = fmt.Sprint(j.NumWarps, j.spec()) + "\n" + j.text()
		if _, ok := gens[keys[i]]; ok {
			continue
		}
		g := &gen{}
		gens[keys[i]] = g
		if ck, ok := d.ptx[keys[i]]; ok {
			g.ck = ck
		} else {
			todo = append(todo, i)
		}
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, i := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			j := jobs[i]
			g := gens[keys[i]]
			g.ck, g.err = codegen.Compile(j.Kernel, codegen.Options{NumWarps: j.NumWarps, Arch: d.Target(), Spec: j.spec()})
		}()
	}
	wg.Wait()
	var cks []*codegen.Kernel
	d.mu.Lock()
	for k, g := range gens {
		if g.err == nil {
			d.ptx[k] = g.ck
			cks = append(cks, g.ck)
		}
	}
	d.mu.Unlock()
	d.LinkAhead(cks, c, 0)
	fs := make([]*Function, len(jobs))
	for i := range jobs {
		g := gens[keys[i]]
		if g.err != nil {
			return nil, g.err
		}
		f, err := d.LoadCached(g.ck, c)
		if err != nil {
			return nil, err
		}
		fs[i] = f
	}
	return fs, nil
}

// CompileCached is Compile with compiled modules on disk in c
// (LoadCached). A kernel whose IR without its name (tile.Kernel.Anonymous),
// warps and specialisation were compiled before in this process takes
// that PTX (named after the first such kernel) without running codegen.
func (d *Device) CompileCached(k *tile.Kernel, numWarps int, args []any, c *diskcache.Cache) (*codegen.Kernel, *Function, error) {
	spec := Spec(k, args)
	key := fmt.Sprint(numWarps, spec) + "\n" + k.Anonymous()
	d.mu.Lock()
	ck, ok := d.ptx[key]
	d.mu.Unlock()
	if !ok {
		var err error
		if ck, err = codegen.Compile(k, codegen.Options{NumWarps: numWarps, Arch: d.Target(), Spec: spec}); err != nil {
			return nil, nil, err
		}
		d.mu.Lock()
		d.ptx[key] = ck
		d.mu.Unlock()
	}
	f, err := d.LoadCached(ck, c)
	return ck, f, err
}

// Timer measures device time with events.
type Timer struct {
	d          *Device
	start, end cu.Event
	pre        cu.Event // Before's, made by its first call
	hasPre     bool
}

// NewTimer creates the two events.
func (d *Device) NewTimer() (*Timer, error) {
	t := &Timer{d: d}
	err := d.Do(func() error {
		var err error
		if t.start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			return err
		}
		t.end, err = cu.MakeEvent(cu.DefaultEvent)
		return err
	})
	return t, err
}

// Start records the first event (on the device's thread, inside Run).
func (t *Timer) Start(th *Thread) error {
	if err := th.check(); err != nil {
		return err
	}
	return t.start.Record(cu.Stream{})
}

// Before records an event ahead of Start (on the device's thread, inside
// Run), for timing the work enqueued between them: ReadBefore.
func (t *Timer) Before(th *Thread) error {
	if err := th.check(); err != nil {
		return err
	}
	if !t.hasPre {
		ev, err := cu.MakeEvent(cu.DefaultEvent)
		if err != nil {
			return err
		}
		t.pre, t.hasPre = ev, true
	}
	return t.pre.Record(cu.Stream{})
}

// ReadBefore is the device time from Before to Start in ms, once Start's
// event has completed (after Read, Stop or Sync): the work enqueued between
// them, from the moment the device reached it (an event's time is when the
// stream gets to it, after the work queued before it).
func (t *Timer) ReadBefore(th *Thread) (float64, error) {
	if err := th.check(); err != nil {
		return 0, err
	}
	if !t.hasPre {
		return 0, errors.New("cuda: Timer.ReadBefore without Before")
	}
	return t.pre.Elapsed(t.start)
}

// Stop records the second event, waits for it and returns the device time
// since Start in ms.
func (t *Timer) Stop(th *Thread) (float64, error) {
	if err := th.check(); err != nil {
		return 0, err
	}
	if err := t.end.Record(cu.Stream{}); err != nil {
		return 0, err
	}
	if err := t.end.Synchronize(); err != nil {
		return 0, err
	}
	return t.start.Elapsed(t.end)
}

// Mark records the second event without waiting for it: read the time
// with Read once the device has finished it (a Fetcher's Wait or Finish,
// Device.Sync).
func (t *Timer) Mark(th *Thread) error {
	if err := th.check(); err != nil {
		return err
	}
	return t.end.Record(cu.Stream{})
}

// Done reports, without waiting, whether the work before Mark (or Stop)
// has completed on the device.
func (t *Timer) Done(th *Thread) (bool, error) {
	if err := th.check(); err != nil {
		return false, err
	}
	return eventDone(t.end)
}

// Read is the device time from Start to Mark in ms, waiting for the
// second event if it has not completed yet.
func (t *Timer) Read(th *Thread) (float64, error) {
	if err := th.check(); err != nil {
		return 0, err
	}
	if err := t.end.Synchronize(); err != nil {
		return 0, err
	}
	return t.start.Elapsed(t.end)
}

// Time runs f between the events and returns the elapsed device time in ms.
func (t *Timer) Time(f func() error) (float64, error) {
	if err := t.d.Do(func() error { return t.start.Record(cu.Stream{}) }); err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	var ms float64
	err := t.d.Do(func() error {
		if err := t.end.Record(cu.Stream{}); err != nil {
			return err
		}
		if err := t.end.Synchronize(); err != nil {
			return err
		}
		var err error
		ms, err = t.start.Elapsed(t.end)
		return err
	})
	return ms, err
}

// Event marks a point in the device's work, for timing a sequence of
// launches piece by piece.
type Event struct{ ev cu.Event }

// NewEvent creates an event.
func (d *Device) NewEvent() (*Event, error) {
	e := &Event{}
	err := d.Do(func() error {
		var err error
		e.ev, err = cu.MakeEvent(cu.DefaultEvent)
		return err
	})
	return e, err
}

// FreeEvent destroys e.
func (d *Device) FreeEvent(e *Event) error {
	return d.Do(func() error { return cu.DestroyEvent(&e.ev) })
}

// Record records e after the work enqueued so far.
func (t *Thread) Record(e *Event) error {
	if err := t.check(); err != nil {
		return err
	}
	return e.ev.Record(cu.Stream{})
}

// Wait blocks until the work before e's last Record has completed.
func (t *Thread) Wait(e *Event) error {
	if err := t.check(); err != nil {
		return err
	}
	return e.ev.Synchronize()
}

// Elapsed is the device time from a to b in ms, once b has completed
// (after a Timer's Stop, or Sync).
func (t *Thread) Elapsed(a, b *Event) (float64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return a.ev.Elapsed(b.ev)
}

// Close destroys the events.
func (t *Timer) Close() error {
	return t.d.Do(func() error {
		if t.hasPre {
			t.hasPre = false
			if err := cu.DestroyEvent(&t.pre); err != nil {
				return err
			}
		}
		if err := cu.DestroyEvent(&t.start); err != nil {
			return err
		}
		return cu.DestroyEvent(&t.end)
	})
}

// Launcher runs kernels on host buffers: it uploads every pointer argument,
// launches, waits, and downloads them back (a tiletest.Launcher). A kernel's
// num_warps meta-parameter, where it has one, wins over NumWarps (the
// swapped wgmma form needs a warp per 16 columns).
type Launcher struct {
	Dev      *Device
	NumWarps int
}

func (l *Launcher) Name() string { return "cuda:" + l.Dev.Name }

func (l *Launcher) Launch(k *tile.Kernel, grid tile.Grid, args ...any) error {
	if len(args) != len(k.Params) {
		return fmt.Errorf("cuda: @%s: %d arguments for %d parameters", k.Name, len(args), len(k.Params))
	}
	dev := make([]any, len(args))
	var bufs []*Buffer
	defer func() {
		for _, b := range bufs {
			l.Dev.Free(b)
		}
	}()
	for i, p := range k.Params {
		if !p.Type.Ptr {
			dev[i] = args[i]
			continue
		}
		_, n, err := hostBytes(args[i])
		if err != nil {
			return fmt.Errorf("cuda: @%s: argument %d (%s): %w", k.Name, i, p.Name, err)
		}
		b, err := l.Dev.Alloc(n)
		if err != nil {
			return err
		}
		bufs = append(bufs, b)
		if err := l.Dev.Upload(b, args[i]); err != nil {
			return err
		}
		dev[i] = b
	}
	warps := l.NumWarps
	if w := k.Meta["num_warps"]; w > 0 {
		warps = w
	}
	_, f, err := l.Dev.Compile(k, warps, dev)
	if err != nil {
		return err
	}
	if err := l.Dev.Launch(f, k, grid, dev...); err != nil {
		return err
	}
	if err := l.Dev.Sync(); err != nil {
		return fmt.Errorf("cuda: @%s: running: %w", k.Name, err)
	}
	for i, p := range k.Params {
		if p.Type.Ptr {
			if err := l.Dev.Download(args[i], dev[i].(*Buffer)); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxGridYZ is CUDA's bound on a launch's second and third grid axes.
const maxGridYZ = 65535
