package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// recycleGraph is a graph whose readable value is big enough to recycle
// (rows×cols float32, 76.8 KB at 64×300): out is the node the user reads,
// want its value from x's elements in float64.
type recycleGraph struct {
	g    *G.ExprGraph
	x    *G.Node
	out  *G.Node
	want func(x []float32) []float64
	// check: the compiled graph has the structure the case is about
	check func(c *fusion.Compiled) error
}

const recRows, recCols = 64, 300

// etx is exp(tanh(v)), the value the recycle graphs compute.
func etx(v float32) float64 { return math.Exp(math.Tanh(float64(v))) }

func recycleGraphs(t *testing.T) map[string]func() recycleGraph {
	t.Helper()
	input := func(g *G.ExprGraph) *G.Node {
		return G.NewMatrix(g, tensor.Float32, G.WithShape(recRows, recCols), G.WithName("x"))
	}
	return map[string]func() recycleGraph{
		// one kernel, its output read
		"kernel output": func() recycleGraph {
			g := G.NewGraph()
			x := input(g)
			y := G.Must(G.Exp(G.Must(G.Tanh(x))))
			return recycleGraph{g: g, x: x, out: y, want: func(x []float32) []float64 {
				w := make([]float64, len(x))
				for i, v := range x {
					w[i] = etx(v)
				}
				return w
			}}
		},
		// a reshape of a kernel's output: the view's memory is the kernel's
		"reshape of a kernel output": func() recycleGraph {
			g := G.NewGraph()
			x := input(g)
			a := G.Must(G.Exp(G.Must(G.Tanh(x))))
			G.WithName("a")(a) // read too: the kernel writes it, the reshape views it
			y := G.Must(G.Reshape(a, tensor.Shape{recRows * recCols}))
			return recycleGraph{g: g, x: x, out: y, want: func(x []float32) []float64 {
				w := make([]float64, len(x))
				for i, v := range x {
					w[i] = etx(v)
				}
				return w
			}, check: func(c *fusion.Compiled) error {
				for _, n := range c.Graph.AllNodes() {
					if f, ok := n.Op().(*fusion.FusedOp); ok && f.IsView() {
						return nil
					}
				}
				return fmt.Errorf("no view op")
			}}
		},
		// the second output of a kernel with two: the user's value starts
		// inside the allocation
		"second part of a multi-output kernel": func() recycleGraph {
			g := G.NewGraph()
			x := input(g)
			a := G.Must(G.Tanh(x))
			G.WithName("a")(a) // read too: the kernel writes both
			y := G.Must(G.Add(G.Must(G.Exp(a)), a))
			G.WithName("y")(y)
			return recycleGraph{g: g, x: x, out: y, want: func(x []float32) []float64 {
				w := make([]float64, len(x))
				for i, v := range x {
					w[i] = etx(v) + math.Tanh(float64(v))
				}
				return w
			}, check: func(c *fusion.Compiled) error {
				for _, n := range c.Graph.AllNodes() {
					if p, ok := n.Op().(*fusion.PartOp); ok {
						if i, _ := p.Part(); i > 0 {
							return nil
						}
					}
				}
				return fmt.Errorf("no part after the first of a multi-output kernel")
			}}
		},
	}
}

// holders are the ways a user keeps a value past later runs; each returns
// what it reads the kept elements back with.
var holders = []struct {
	name string
	hold func(v G.Value) func() []float32
}{
	{"the Data slice", func(v G.Value) func() []float32 {
		d := v.Data().([]float32)
		return func() []float32 { return d }
	}},
	{"a subslice", func(v G.Value) func() []float32 {
		d := v.Data().([]float32)
		d = d[len(d)/3 : len(d)/3+777]
		return func() []float32 { return d }
	}},
	{"the tensor", func(v G.Value) func() []float32 {
		t := v.(*tensor.Dense)
		return func() []float32 { return t.Data().([]float32) }
	}},
	{"an unsafe.Pointer into it", func(v G.Value) func() []float32 {
		d := v.Data().([]float32)
		p, n := unsafe.Pointer(&d[len(d)/2]), len(d)-len(d)/2
		return func() []float32 { return unsafe.Slice((*float32)(p), n) }
	}},
}

// TestRecycleNeverOverwritesHeldValues: by default a run gives a readable
// value memory recycled from earlier runs once the Go runtime has found it
// unreachable. A user who keeps the first run's value, as its Data slice, a
// subslice, the tensor or an unsafe.Pointer into it, of a kernel's output,
// a view of one, or a part of a multi-output kernel, sees it unchanged
// after eight more runs on new inputs with a collection after each; the
// other runs' values were recycled meanwhile (Stats.Recycled), and each
// run's value is exp(tanh(x)) of its inputs (float64 reference, 1e-6
// relative). Recycling that ignored reachability fails it.
func TestRecycleNeverOverwritesHeldValues(t *testing.T) {
	for gname, build := range recycleGraphs(t) {
		for _, h := range holders {
			t.Run(gname+"/"+h.name, func(t *testing.T) {
				rg := build()
				vm := fusion.NewTapeMachine(rg.g)
				defer vm.Close()
				if err := vm.Err(); err != nil {
					t.Fatal(err)
				}
				if rg.check != nil {
					if err := rg.check(vm.Compiled()); err != nil {
						t.Fatalf("the graph does not cover the case: %v\n%v", err, vm.Report())
					}
				}
				rng := rand.New(rand.NewPCG(11, 3))
				var read func() []float32
				var kept []float32
				for run := range 9 {
					x := make([]float32, recRows*recCols)
					for i := range x {
						x[i] = rng.Float32()*4 - 2
					}
					if err := G.Let(rg.x, tensor.New(tensor.WithShape(recRows, recCols), tensor.WithBacking(x))); err != nil {
						t.Fatal(err)
					}
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
					got := rg.out.Value().Data().([]float32)
					for i, w := range rg.want(x) {
						if !(math.Abs(float64(got[i])-w) <= 1e-6*(1+math.Abs(w))) {
							t.Fatalf("run %d: [%d] = %v, want %v", run, i, got[i], w)
						}
					}
					if run == 0 {
						read = h.hold(rg.out.Value())
						kept = append([]float32(nil), read()...)
					}
					fusion.WaitFinalizers()
				}
				if s := vm.Stats(); s.Recycled == 0 {
					t.Fatalf("no value was recycled (%+v): the test does not cover recycling", s)
				}
				got := read()
				for i := range kept {
					if got[i] != kept[i] {
						t.Fatalf("the kept value changed: [%d] = %v, was %v", i, got[i], kept[i])
					}
				}
			})
		}
	}
}

// softmaxMachine is a machine over a rows×cols softmax of x (seeded
// values in [−3, 3), let into x), closed when t ends, and its output node.
func softmaxMachine(t *testing.T, rows, cols int, seed uint64, opts ...fusion.Option) (*fusion.Machine, *G.Node) {
	t.Helper()
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("x"))
	y := G.Must(G.SoftMax(x))
	vm := fusion.NewTapeMachine(g, opts...)
	t.Cleanup(func() { vm.Close() })
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, seed))
	d := make([]float32, rows*cols)
	for i := range d {
		d[i] = rng.Float32()*6 - 3
	}
	if err := G.Let(x, tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(d))); err != nil {
		t.Fatal(err)
	}
	return vm, y
}

// sameRuns runs a machine and checks that y holds the first run's values
// after every run (the recycled memory each run takes holds nothing of
// another run's).
type sameRuns struct {
	t     *testing.T
	vm    *fusion.Machine
	y     *G.Node
	first []float32
	n     int
}

// run is one RunAll, checked; it returns y's values.
func (r *sameRuns) run() []float32 {
	r.t.Helper()
	if err := r.vm.RunAll(); err != nil {
		r.t.Fatal(err)
	}
	got := r.y.Value().Data().([]float32)
	if r.first == nil {
		r.first = append([]float32(nil), got...)
	} else if !slices.Equal(got, r.first) {
		r.t.Fatalf("run %d: not the first run's values", r.n)
	}
	r.n++
	return got
}

// TestRecycleReusesDroppedValues: a loop that drops each run's value (a
// 4 MB softmax) and collects after each run gets it recycled from the
// third run on: no new memory, a few KB allocated per run as machine code
// (about 80 KB on the executor, -tags purego: its own, the same at 512 KB
// and 4 MB) against the value's bytes with WithRecycle(false);
// WithReuseOutputs(true) recycles nothing (it needs nothing new) and
// allocates little too. Results stay those of the first run.
func TestRecycleReusesDroppedValues(t *testing.T) {
	const rows, cols = 2048, 512
	const bytes = rows * cols * 4
	cases := []struct {
		name      string
		opts      []fusion.Option
		recycles  bool
		wantBytes func(perRun float64) bool
		want      string
	}{
		{"default", nil, true, func(b float64) bool { return b < bytes/8 }, "under an eighth of the value's"},
		{"WithRecycle(false)", []fusion.Option{fusion.WithRecycle(false)}, false, func(b float64) bool { return b >= bytes }, "at least the value's"},
		{"WithReuseOutputs(true)", []fusion.Option{fusion.WithReuseOutputs(true)}, false, func(b float64) bool { return b < bytes/8 }, "under an eighth of the value's"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vm, y := softmaxMachine(t, rows, cols, 8, c.opts...)
			var first []float32
			var ms0, ms1 runtime.MemStats
			var total float64
			const runs, warm = 10, 2
			for run := range runs {
				before := vm.Stats()
				runtime.ReadMemStats(&ms0)
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&ms1)
				after := vm.Stats()
				got := y.Value().Data().([]float32)
				if run == 0 {
					first = append([]float32(nil), got...)
				} else {
					for i := range got {
						if got[i] != first[i] {
							t.Fatalf("run %d: [%d] = %v, the first run's %v", run, i, got[i], first[i])
						}
					}
				}
				if run >= warm {
					total += float64(ms1.TotalAlloc - ms0.TotalAlloc)
					if c.recycles && after.Recycled != before.Recycled+1 {
						t.Fatalf("run %d: recycled %d values, want 1 (%+v)", run, after.Recycled-before.Recycled, after)
					}
				}
				if !c.recycles && (after.Recycled != 0 || after.Allocated != 0) {
					t.Fatalf("run %d: counts %+v, want none", run, after)
				}
				got = nil
				fusion.WaitFinalizers()
			}
			perRun := total / (runs - warm)
			t.Logf("%.0f bytes allocated per run (the value: %d)", perRun, bytes)
			if !c.wantBytes(perRun) {
				t.Fatalf("%.0f bytes allocated per run, want %s (%d)", perRun, c.want, bytes)
			}
		})
	}
}

// TestRecycleWithoutCollections: with the collector's pacing off
// (SetGCPercent(-1): no collection runs unless asked for), a loop that
// drops each run's 4 MB softmax and never collects gets most of its runs'
// values recycled because a miss asks for a collection in the background;
// with the asks off nothing ever comes back. A loop that keeps every value
// asks after 1, 2, 4, 8, … runs in which nothing came back, not every run. Results stay
// those of the first run. It runs in a process of its own, as
// TestRecycleUnderOneProc does: in CI's run of the whole package (a
// loaded 2-core VM, 2026-12-03) 12 of the 40 values came back where alone
// 35–37 do.
func TestRecycleWithoutCollections(t *testing.T) {
	if ranAlone(t) {
		return
	}
	const rows, cols = 2048, 512
	const runs = 40
	for _, c := range []struct {
		name       string
		ask, keep  bool
		minRecycle int // of the runs after the first
		maxAsks    int
	}{
		{"asks, values dropped", true, false, runs / 3, runs},
		{"no asks, values dropped", false, false, 0, 0},
		{"asks, values kept", true, true, 0, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer fusion.SetAskCollections(c.ask)()
			fusion.WaitFinalizers() // nothing of earlier tests in flight
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			vm, y := softmaxMachine(t, rows, cols, 9)
			r := &sameRuns{t: t, vm: vm, y: y}
			var kept [][]float32
			for range runs {
				got := r.run()
				if c.keep {
					kept = append(kept, got)
				}
				time.Sleep(time.Millisecond) // the rest of a user's loop
			}
			s := vm.Stats()
			t.Logf("%d runs: %d recycled, %d allocated, %d collections asked for", runs, s.Recycled, s.Allocated, s.CollectionsAsked)
			if s.Recycled < c.minRecycle || (c.minRecycle == 0 && s.Recycled != 0) {
				t.Errorf("%d values recycled, want %d or more (0 where nothing may come back)", s.Recycled, c.minRecycle)
			}
			if s.CollectionsAsked > c.maxAsks || (c.ask && s.CollectionsAsked == 0) {
				t.Errorf("%d collections asked for, want 1 to %d (0 without asks)", s.CollectionsAsked, c.maxAsks)
			}
			runtime.KeepAlive(kept)
		})
	}
}

// TestRecycleUnderOneProc: under GOMAXPROCS=1 a loop that drops its
// values and never blocks (collections started by its own allocations:
// SetGCPercent(5), a 512 KB softmax, under askGCBytes, so no collection is
// asked for) still gets values recycled: the finalizer goroutine needs the
// loop's P, and a take that finds its list empty while finalizers are
// queued yields it once. Before, what the collections found came back only
// when the scheduler preempted the loop, or a collection's assist let the
// finalizers run: 24–38 of the 300 runs here (2-core VM), against 176–178
// now (a third asserted). Results stay those of the first run. It runs
// in a process of its own (the test binary again, this test alone): in a
// run of the whole package the heap the earlier tests left live (about 70
// MB) slowed the collections and their finalizers enough that 17–88 of
// the 300 came back, and CI failed about half the time.
func TestRecycleUnderOneProc(t *testing.T) {
	if ranAlone(t) {
		return
	}
	const rows, cols, runs = 256, 512, 300
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	fusion.WaitFinalizers() // nothing of earlier tests in flight
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	vm, y := softmaxMachine(t, rows, cols, 11)
	r := &sameRuns{t: t, vm: vm, y: y}
	for range runs {
		r.run()
	}
	s := vm.Stats()
	t.Logf("%d runs: %d recycled, %d allocated, %d collections asked for", runs, s.Recycled, s.Allocated, s.CollectionsAsked)
	if s.CollectionsAsked != 0 {
		t.Fatalf("%d collections asked for, want none (the value is under askGCBytes)", s.CollectionsAsked)
	}
	if s.Recycled < runs/3 {
		t.Fatalf("%d of %d runs recycled, want %d or more", s.Recycled, runs, runs/3)
	}
}

// TestRecycleSmallValuesDeep: a machine whose readable value is small
// (a 256 KiB softmax) keeps up to 128 runs' worth (32 MiB) on its free
// list: 100 runs that drop their values without a collection (the
// collector's pacing off), then one collection, and the next 99 runs all
// take memory that came back (the 100th run's value is still the node's).
// With 32 runs' worth, as before 2026-12-06, 32 came back; with 4, as for
// every machine before 2026-12-02, 4. Results stay those of the first run.
func TestRecycleSmallValuesDeep(t *testing.T) {
	const rows, cols, runs = 128, 512, 100
	fusion.WaitFinalizers() // nothing of earlier tests in flight
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	vm, y := softmaxMachine(t, rows, cols, 12)
	r := &sameRuns{t: t, vm: vm, y: y}
	for range runs {
		r.run()
	}
	fusion.WaitFinalizers()
	s0 := vm.Stats()
	for range runs - 1 {
		r.run()
	}
	s1 := vm.Stats()
	if got := s1.Recycled - s0.Recycled; got != runs-1 {
		t.Fatalf("%d of the %d runs after the collection recycled, want all (%+v)", got, runs-1, s1)
	}
}

// TestRecycledOutputAKernelAddsInto: a readable column sum that a kernel
// accumulates into (split over programs, written for the H200 target) is
// zeroed when its memory is recycled: with recycled buffers poisoned with
// NaN, six runs on new inputs with a collection between each give the sum
// of each column (float64, 1e-9 relative), and the value was recycled.
func TestRecycledOutputAKernelAddsInto(t *testing.T) {
	defer fusion.SetRecycling(16, true)()
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(20000, 6), G.WithName("x"))
	col := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Tanh(x)))), 0))
	vm := fusion.NewTapeMachine(g, fusion.WithTarget(graphpass.H200))
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	accumulates := false
	for _, n := range vm.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok && f.Accumulates() {
			accumulates = true
		}
	}
	if !accumulates {
		t.Fatalf("no kernel adds into its output: the test does not cover zeroing\n%v", vm.Report())
	}
	rng := rand.New(rand.NewPCG(2, 9))
	for run := range 6 {
		d := make([]float64, 20000*6)
		for i := range d {
			d[i] = rng.Float64()*2 - 1
		}
		if err := G.Let(x, tensor.New(tensor.WithShape(20000, 6), tensor.WithBacking(d))); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		want := make([]float64, 6)
		for i, v := range d {
			th := math.Tanh(v)
			want[i%6] += th * th
		}
		closeTo(t, fmt.Sprintf("run %d", run), floats(col.Value()), want, 1e-9)
		fusion.WaitFinalizers()
	}
	if s := vm.Stats(); s.Recycled == 0 {
		t.Fatalf("nothing was recycled (%+v): the test does not cover it", s)
	}
}

// TestRecycledFuzzSeeds: FuzzFusion's seed graphs (products fused or not,
// the H200 target where the seed asks for it), each run three times on new
// inputs with a collection between runs, every value of 16 bytes or more
// recycled and each recycled buffer poisoned with NaN unless zeroed, give
// what the same machine gives with WithRecycle(false) (itself checked
// against float64 by FuzzFusion): equal within 1e-5 relative in float32,
// 1e-12 in float64, NaN where and only where it has NaN. An element a
// kernel does not write, or an accumulator not zeroed, shows as NaN.
func TestRecycledFuzzSeeds(t *testing.T) {
	defer fusion.SetRecycling(16, true)()
	recycled := 0
	for i, data := range fzSeeds(true) {
		fg, err := fzBuild(data, tensor.Dtype{})
		if err != nil || fg.zero {
			continue // FuzzFusion covers what the generator refuses and empty tensors
		}
		dt := fg.prog
		for _, mm := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed %d matmul %v", i, mm), func(t *testing.T) {
				opts := []fusion.Option{fusion.WithMatMulFusion(mm)}
				if fg.target {
					opts = append(opts, fusion.WithTarget(graphpass.H200))
				}
				on := fzRun(t, data, fzLeg{name: "recycled", dt: dt, opts: opts, collect: true}, 3, 0)
				off := fzRun(t, data, fzLeg{name: "new memory", dt: dt, opts: append(opts, fusion.WithRecycle(false)), collect: true}, 3, 0)
				for _, o := range []*fzOut{on, off} {
					if o.err != nil {
						t.Fatalf("%s: %v\n%s", o.leg.name, o.err, fg)
					}
				}
				recycled += on.stats.Recycled
				tol := 1e-12
				if dt == tensor.Float32 {
					tol = 1e-5
				}
				for r := range on.vals {
					for k := range on.vals[r] {
						a, b := on.vals[r][k], off.vals[r][k]
						if len(a) != len(b) {
							t.Fatalf("run %d, value %d: %d elements, want %d\n%s", r, k, len(a), len(b), fg)
						}
						for j := range a {
							if math.IsNaN(a[j]) != math.IsNaN(b[j]) || !math.IsNaN(b[j]) && !(math.Abs(a[j]-b[j]) <= tol*(1+math.Abs(b[j]))) {
								t.Fatalf("run %d, value %d [%d]: %v, want %v\n%s", r, k, j, a[j], b[j], fg)
							}
						}
					}
				}
			})
		}
	}
	if recycled == 0 {
		t.Fatal("no value was recycled: the test does not cover recycling")
	}
	t.Logf("%d values recycled", recycled)
}

// TestMachinesInParallelRecycling: machines in parallel (checkMachinesInParallel's
// models) while another goroutine collects garbage without pause, values of
// 16 bytes or more recycled and poisoned: finalizers hand buffers back on
// their own goroutine while runs take them (run it under -race).
func TestMachinesInParallelRecycling(t *testing.T) {
	defer fusion.SetRecycling(16, true)()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	checkMachinesInParallel(t)
}

// ranAlone runs test t again in a process of its own (the test binary,
// that test alone) unless this is that process, and reports whether it
// did: the caller returns then. The recycler's tests measure how many
// values the collector's finalizers give back, which the heap that the
// package's earlier tests leave live slows.
func ranAlone(t *testing.T) bool {
	t.Helper()
	if os.Getenv("TILEFUSE_RECYCLE_ALONE") == t.Name() {
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TILEFUSE_RECYCLE_ALONE="+t.Name())
	out, err := cmd.CombinedOutput()
	t.Logf("in a process of its own:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a process of its own: %v", err)
	}
	return true
}
