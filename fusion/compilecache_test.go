package fusion_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// cacheGraph is a small training graph: x·w through tanh, scaled by a
// scalar constant, times a constant mask, summed along an axis, its mean
// the cost, w's gradient asked for. Each field of the variant changes one
// thing of it.
type cacheVariant struct {
	rows     int     // x's rows (6: as many as columns, so that both sums have one shape)
	axis     int     // the Sum's axis
	scale    float32 // the scalar constant
	mask00   float32 // the mask's first element (the others are 1)
	readH    bool    // a gorgonia.Read of the tanh
	keepH    bool    // WithKeep(the tanh)
	opts     []fusion.Option
	optsName string
}

type cacheGraph struct {
	g        *G.ExprGraph
	x, w     *G.Node
	h        *G.Node
	out      []*G.Node
	hv       G.Value
	xv, wv   tensor.Tensor
	machOpts []fusion.Option
}

const cacheCols = 6

func buildCacheGraph(t *testing.T, v cacheVariant) *cacheGraph {
	t.Helper()
	cg := &cacheGraph{g: G.NewGraph()}
	g := cg.g
	cg.x = G.NewMatrix(g, tensor.Float32, G.WithShape(v.rows, cacheCols), G.WithName("x"))
	cg.w = G.NewMatrix(g, tensor.Float32, G.WithShape(cacheCols, cacheCols), G.WithName("w"))
	cg.h = G.Must(G.Tanh(G.Must(G.Mul(cg.x, cg.w))))
	scaled := G.Must(G.Mul(cg.h, G.NewConstant(v.scale)))
	mask := make([]float32, v.rows*cacheCols)
	for i := range mask {
		mask[i] = 1
	}
	mask[0] = v.mask00
	// named: Gorgonia names a constant by its value printed (%v) otherwise,
	// which would tell the variants apart without looking at the value
	masked := G.Must(G.HadamardProd(scaled, G.NewConstant(tensor.New(tensor.WithShape(v.rows, cacheCols), tensor.WithBacking(mask)), G.WithName("mask"))))
	s := G.Must(G.Sum(masked, v.axis))
	cost := G.Must(G.Mean(s))
	if _, err := G.Grad(cost, cg.w); err != nil {
		t.Fatal(err)
	}
	if v.readH {
		G.Read(cg.h, &cg.hv)
	}
	cg.out = []*G.Node{s, cost}
	rng := rand.New(rand.NewPCG(7, 11))
	xs := make([]float32, v.rows*cacheCols)
	ws := make([]float32, cacheCols*cacheCols)
	for i := range xs {
		xs[i] = float32(rng.Float64()*2 - 1)
	}
	for i := range ws {
		ws[i] = float32(rng.Float64()*2 - 1)
	}
	cg.xv = tensor.New(tensor.WithShape(v.rows, cacheCols), tensor.WithBacking(xs))
	cg.wv = tensor.New(tensor.WithShape(cacheCols, cacheCols), tensor.WithBacking(ws))
	cg.machOpts = append([]fusion.Option(nil), v.opts...)
	if v.keepH {
		cg.machOpts = append(cg.machOpts, fusion.WithKeep(cg.h))
	}
	return cg
}

// run compiles cg into a machine with opts, runs it once on its seeded
// inputs (the outputs poisoned first) and returns the report and every
// value it checks: the outputs, w's gradient and, where read, the tanh.
func (cg *cacheGraph) run(t *testing.T, opts ...fusion.Option) (*fusion.Report, [][]float64) {
	t.Helper()
	for n, v := range map[*G.Node]tensor.Tensor{cg.x: cg.xv, cg.w: cg.wv} {
		if err := G.Let(n, v); err != nil {
			t.Fatal(err)
		}
	}
	vm := fusion.NewTapeMachine(cg.g, append(append([]fusion.Option(nil), cg.machOpts...), opts...)...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	var vals [][]float64
	for _, n := range cg.out {
		vals = append(vals, floats(n.Value()))
	}
	gw, err := cg.w.Grad()
	if err != nil {
		t.Fatal(err)
	}
	vals = append(vals, floats(gw))
	if cg.hv != nil {
		vals = append(vals, floats(cg.hv))
	}
	return vm.Report(), vals
}

func sameValues(t *testing.T, what string, got, want [][]float64) {
	t.Helper()
	closeValues(t, what, got, want, 0) // the same kernels on the CPU: bit for bit
}

func closeValues(t *testing.T, what string, got, want [][]float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		closeTo(t, fmt.Sprintf("%s: value %d", what, i), got[i], want[i], tol)
	}
}

var cacheBase = cacheVariant{rows: cacheCols, axis: 1, scale: 0.5, mask00: 1}

// TestCompileCacheHitAndMisses: a graph built again exactly as before
// hits the front-end cache (its report says so, and lists the
// fingerprint, the rewrite and the load alone) and computes what a
// compile without the cache computes, bit for bit; a graph that differs
// from the cached one in one shape, one op's parameter, one constant's
// value (a scalar, one element of a tensor), one readable node (a Read, a
// WithKeep) or one option misses, and computes what it computes compiled
// without the cache.
func TestCompileCacheHitAndMisses(t *testing.T) {
	with := func(f func(*cacheVariant)) cacheVariant {
		v := cacheBase
		f(&v)
		return v
	}
	cases := []struct {
		name string
		v    cacheVariant
		hit  bool
	}{
		{"the same graph built again", cacheBase, true},
		{"one shape", with(func(v *cacheVariant) { v.rows = cacheCols + 1 }), false},
		{"one op's parameter (the sum's axis)", with(func(v *cacheVariant) { v.axis = 0 }), false},
		{"one scalar constant's value", with(func(v *cacheVariant) { v.scale = 0.25 }), false},
		{"one element of a tensor constant", with(func(v *cacheVariant) { v.mask00 = 2 }), false},
		{"one readable node (a Read)", with(func(v *cacheVariant) { v.readH = true }), false},
		{"one readable node (WithKeep)", with(func(v *cacheVariant) { v.keepH = true }), false},
		{"one option (WithMaxGroup)", with(func(v *cacheVariant) { v.opts = []fusion.Option{fusion.WithMaxGroup(2)} }), false},
		{"one option (WithReadAll)", with(func(v *cacheVariant) { v.opts = []fusion.Option{fusion.WithReadAll(true)} }), false},
		{"one option (WithFusion)", with(func(v *cacheVariant) { v.opts = []fusion.Option{fusion.WithFusion(false)} }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fusion.ResetCompileCache()
			if rep, _ := buildCacheGraph(t, cacheBase).run(t); rep.Cached {
				t.Fatal("the first compile after ResetCompileCache is a hit")
			}
			rep, got := buildCacheGraph(t, tc.v).run(t)
			if rep.Cached != tc.hit {
				t.Fatalf("Report.Cached = %v, want %v (stages %v)", rep.Cached, tc.hit, rep.Stages)
			}
			if tc.hit {
				var names []string
				for _, st := range rep.Stages {
					names = append(names, st.Stage)
				}
				if fmt.Sprint(names) != "[fingerprint rewrite load]" {
					t.Fatalf("a hit's stages are %v, want fingerprint, rewrite and load", names)
				}
			}
			wantRep, want := buildCacheGraph(t, tc.v).run(t, fusion.WithCompileCache(false))
			if wantRep.Cached {
				t.Fatal("WithCompileCache(false) reports a hit")
			}
			sameValues(t, tc.name, got, want)
			if rep.Summary() != wantRep.Summary() || rep.String() != wantRep.String() {
				t.Fatalf("the report differs from the uncached compile's:\n%s\nwant\n%s", rep, wantRep)
			}
		})
	}
}

// TestCompileCacheKeyHoldsTheTarget: compiles for targets that differ in
// a field their String does not show (the L2's size, the bound on a
// launch's second and third axes) do not share a front-end cache entry;
// the same target again does.
func TestCompileCacheKeyHoldsTheTarget(t *testing.T) {
	fusion.ResetCompileCache()
	l2 := graphpass.H200
	l2.L2 /= 2
	grid := graphpass.H200
	grid.MaxGridYZ = 4
	if l2.String() != graphpass.H200.String() || grid.String() != graphpass.H200.String() {
		t.Fatalf("the targets' names differ (%v, %v, %v): the test's premise is gone", l2, grid, graphpass.H200)
	}
	for i, c := range []struct {
		t   graphpass.Target
		hit bool
	}{{graphpass.H200, false}, {l2, false}, {grid, false}, {graphpass.H200, true}, {grid, true}} {
		rep, _ := buildCacheGraph(t, cacheBase).run(t, fusion.WithTarget(c.t))
		if rep.Cached != c.hit {
			t.Fatalf("compile %d (%#v): Report.Cached = %v, want %v", i, c.t, rep.Cached, c.hit)
		}
	}
}

// TestCompileCacheWorkloads: the bench's training workloads, built twice,
// compile the second time from the cache and compute what they compute
// without it, bit for bit.
func TestCompileCacheWorkloads(t *testing.T) { checkCacheWorkloads(t, 0) }

// checkCacheWorkloads: TestCompileCacheWorkloads with opts, the values
// within tol (relative) of the uncached compile's.
func checkCacheWorkloads(t *testing.T, tol float64, opts ...fusion.Option) {
	for _, name := range []string{"mlp_step", "encoder_fwd_bwd"} {
		t.Run(name, func(t *testing.T) {
			fusion.ResetCompileCache()
			var reps []*fusion.Report
			var vals [][][]float64
			for _, more := range [][]fusion.Option{nil, nil, {fusion.WithCompileCache(false)}} {
				wl, ok := bench.Lookup(name)
				if !ok {
					t.Fatalf("no workload %s", name)
				}
				spec, err := wl.Build("small")
				if err != nil {
					t.Fatal(err)
				}
				for n, v := range spec.Inputs {
					if err := G.Let(n, v); err != nil {
						t.Fatal(err)
					}
				}
				vm := fusion.NewTapeMachine(spec.Graph, append(append([]fusion.Option(nil), opts...), more...)...)
				if err := vm.Err(); err != nil {
					t.Fatal(err)
				}
				for _, n := range spec.Outputs { // poisoned: a value not written shows
					if v, ok := n.Value().(tensor.Tensor); ok && v != nil {
						if f, ok := v.Data().([]float32); ok {
							for i := range f {
								f[i] = 12345
							}
						}
					}
				}
				err = vm.RunAll()
				reps = append(reps, vm.Report())
				vals = append(vals, outputs(spec.Outputs))
				vm.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			if reps[0].Cached || !reps[1].Cached || reps[2].Cached {
				t.Fatalf("Cached: %v, %v, %v; want a miss, a hit, and no cache", reps[0].Cached, reps[1].Cached, reps[2].Cached)
			}
			closeValues(t, name+" hit", vals[1], vals[2], tol)
			closeValues(t, name+" miss", vals[0], vals[2], tol)
		})
	}
}

// TestCompileCacheConcurrent: machines for identical graphs compiled in
// parallel goroutines (some miss together, the rest hit) are safe under
// -race and all compute what a compile without the cache computes.
func TestCompileCacheConcurrent(t *testing.T) {
	fusion.ResetCompileCache()
	_, want := buildCacheGraph(t, cacheBase).run(t, fusion.WithCompileCache(false))
	const goroutines = 6
	graphs := make([]*cacheGraph, goroutines)
	for i := range graphs {
		graphs[i] = buildCacheGraph(t, cacheBase)
	}
	got := make([][][]float64, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for i, cg := range graphs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n, v := range map[*G.Node]tensor.Tensor{cg.x: cg.xv, cg.w: cg.wv} {
				if err := G.Let(n, v); err != nil {
					errs[i] = err
					return
				}
			}
			vm := fusion.NewTapeMachine(cg.g)
			defer vm.Close()
			if errs[i] = vm.Err(); errs[i] != nil {
				return
			}
			if errs[i] = vm.RunAll(); errs[i] != nil {
				return
			}
			for _, n := range cg.out {
				got[i] = append(got[i], floats(n.Value()))
			}
			gw, err := cg.w.Grad()
			errs[i] = err
			got[i] = append(got[i], floats(gw))
		}()
	}
	wg.Wait()
	for i := range graphs {
		if errs[i] != nil {
			t.Fatalf("goroutine %d: %v", i, errs[i])
		}
		sameValues(t, fmt.Sprintf("goroutine %d", i), got[i], want)
	}
	if s := fusion.CompileCache(); s.Entries != 1 || s.Hits+s.Misses != goroutines {
		t.Fatalf("cache %+v after %d compiles of one graph: want one entry, and a hit or a miss each", s, goroutines)
	}
}

// TestCompileCacheBound: the cache holds at most 8 entries, the least
// recently used evicted first; WithCompileCache(false) neither reads nor
// fills it.
func TestCompileCacheBound(t *testing.T) {
	fusion.ResetCompileCache()
	for i := range 10 {
		v := cacheBase
		v.rows = 1 + i
		if rep, _ := buildCacheGraph(t, v).run(t); rep.Cached {
			t.Fatalf("rows %d: a hit on a shape never compiled", v.rows)
		}
	}
	if s := fusion.CompileCache(); s.Entries != 8 || s.Misses != 10 {
		t.Fatalf("after 10 graphs: %+v, want 8 entries and 10 misses", s)
	}
	v := cacheBase
	v.rows = 10 // the latest: kept
	if rep, _ := buildCacheGraph(t, v).run(t); !rep.Cached {
		t.Fatal("the latest graph was evicted")
	}
	v.rows = 1 // the first: evicted
	if rep, _ := buildCacheGraph(t, v).run(t); rep.Cached {
		t.Fatal("the least recently used graph was not evicted")
	}
	before := fusion.CompileCache()
	v.rows = 10
	if rep, _ := buildCacheGraph(t, v).run(t, fusion.WithCompileCache(false)); rep.Cached {
		t.Fatal("WithCompileCache(false) hit the cache")
	}
	if after := fusion.CompileCache(); after != before {
		t.Fatalf("WithCompileCache(false) changed the cache: %+v → %+v", before, after)
	}
}

// BenchmarkSecondCompile: a second NewTapeMachine of the bench's
// encoder_fwd_bwd (large) in the process, from the front-end cache (hit)
// and compiled afresh (WithCompileCache(false)); each stage's mean time
// is reported in ms (stage-ms/op).
func BenchmarkSecondCompile(b *testing.B) {
	wl, _ := bench.Lookup("encoder_fwd_bwd")
	spec, err := wl.Build("large")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []fusion.Option
	}{{"hit", nil}, {"nocache", []fusion.Option{fusion.WithCompileCache(false)}}} {
		b.Run(tc.name, func(b *testing.B) {
			vm := fusion.NewTapeMachine(spec.Graph, tc.opts...) // the first: cubins, executors and the entry
			if err := vm.Err(); err != nil {
				b.Fatal(err)
			}
			vm.Close()
			stage := map[string]float64{}
			var order []string
			b.ResetTimer()
			for b.Loop() {
				vm := fusion.NewTapeMachine(spec.Graph, tc.opts...)
				if err := vm.Err(); err != nil {
					b.Fatal(err)
				}
				for _, st := range vm.Report().Stages {
					if _, ok := stage[st.Stage]; !ok {
						order = append(order, st.Stage)
					}
					stage[st.Stage] += st.Seconds
				}
				vm.Close()
			}
			for _, s := range order {
				b.ReportMetric(1e3*stage[s]/float64(b.N), s+"-ms/op")
			}
		})
	}
}

// BenchmarkFingerprint: the walk that keys the front-end cache, over the
// bench's encoder_fwd_bwd (large).
func BenchmarkFingerprint(b *testing.B) {
	wl, _ := bench.Lookup("encoder_fwd_bwd")
	spec, err := wl.Build("large")
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		n = fusion.FingerprintLen(spec.Graph)
	}
	if n == 0 {
		b.Fatal("not cached")
	}
	b.ReportMetric(float64(len(spec.Graph.AllNodes())), "nodes")
	b.ReportMetric(float64(n), "key-bytes")
}
