package fusion

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/diskcache"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// WithAutotune(true) tunes each kernel's meta-parameters on the backend at
// compile time: the candidates its group kind declares
// (graphpass.Candidates: block sizes, rows a program, warps, chunks; the
// heuristic's choice first) are each written, run on seeded inputs of the
// kernel's shapes, checked against the heuristic kernel's outputs (a
// candidate that differs is rejected) and timed; the fastest is kept only
// where it beats the heuristic's in an interleaved rematch by more than the
// noise margin, so tuning never picks a kernel measured slower than its
// default. Results persist in the cache on disk (WithCacheDir), keyed by
// the kernel's IR without its name (its shapes included), the target, the
// device (its name and driver on a GPU; the CPU's architecture and cores)
// and tilefuse's version, and a later compile, in this process or
// another, takes them without measuring. Kernels of the same text tune
// once. Report.Tuning says what each chose. On the GPU a kernel takes
// milliseconds to measure and each candidate a compile; on the CPU the
// measurement is the executor's own (its block choices).
func WithAutotune(on bool) Option { return func(c *config) { c.autotune = on } }

// WithTuneProgress has WithAutotune report each kernel it has tuned (or
// found tuned): done of total kernels that have candidates, and the
// kernel's name (for a progress bar).
func WithTuneProgress(f func(done, total int, kernel string)) Option {
	return func(c *config) { c.tuneProgress = f }
}

// TuneResult is what WithAutotune did for the kernels of one text.
type TuneResult struct {
	Kernel  string // the first kernel of the text
	Kernels int    // kernels of this text in the graph
	// Default is the heuristic's meta-parameters, Chosen the kernels'
	Default, Chosen tile.Meta
	// DefaultSeconds and ChosenSeconds are one launch of each, as the
	// rematch measured them (from the cache: as the tuning that stored
	// them measured them)
	DefaultSeconds, ChosenSeconds float64
	// Bytes is what one launch reads and writes at least: its inputs and
	// outputs, once each (a kernel's own roofline)
	Bytes      int64
	Candidates int      // tried, the default included
	Rejected   []string // candidates that could not be written, run, or that computed otherwise, and why
	FromCache  bool     // taken from the cache on disk, not measured
	// Tried is every candidate that ran and computed what the default
	// does, the default first, with one launch's time as first measured
	// (before the rematch): the whole space side by side
	Tried []TriedMeta
	// Unfinished, if not empty, says why not every candidate was
	// measured (WithTuneBudget's budget ran out): the kernels keep the
	// default, or the best of those measured where the rematch chose it
	Unfinished string
}

// TriedMeta is one candidate's measurement.
type TriedMeta struct {
	Meta    tile.Meta
	Seconds float64
	// Dropped: its first measurement (a GPU batch, the CPU's first
	// launches) was over 1.5× the best so far, and it was measured no
	// further; Seconds is that first measurement
	Dropped bool `json:",omitempty"`
}

func (r TuneResult) String() string {
	src := "measured"
	if r.FromCache {
		src = "from the cache"
	}
	speed := 1.0
	if r.ChosenSeconds > 0 {
		speed = r.DefaultSeconds / r.ChosenSeconds
	}
	if r.Unfinished != "" {
		src += "; " + r.Unfinished
	}
	return fmt.Sprintf("%s (×%d): %v → %v, %.3g → %.3g ms (%.2fx; %d candidates, %d rejected; %s)",
		r.Kernel, r.Kernels, r.Default, r.Chosen, 1e3*r.DefaultSeconds, 1e3*r.ChosenSeconds, speed, r.Candidates, len(r.Rejected), src)
}

// WithTuneBudget bounds WithAutotune's measuring in one compilation to
// about d of wall time (0: no bound; the default is DefaultTuneBudget).
// The kernel texts are tuned most costly first (the default's time × the
// kernels of its text, after every default is measured once), each
// text's candidates in their space's order (the wave model's estimate,
// cheapest first, where the space has one); when the budget runs out,
// the texts not reached keep their defaults and the one in progress its
// best so far among those measured (rematched against the default as
// always: the budget never makes a kernel slower), and Report.Tuning says
// so (TuneResult.Unfinished). A rematch in progress completes: the budget
// can be passed by one rematch. Unfinished results are not stored on disk,
// so a later tune measures them again, with the finished ones taken from
// the cache.
func WithTuneBudget(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.errs = append(c.errs, fmt.Errorf("fusion: WithTuneBudget(%v): a budget is not negative (0: no bound)", d))
			return
		}
		c.tuneBudget = &d
	}
}

// DefaultTuneBudget is WithAutotune's budget without WithTuneBudget: a
// bench workload tunes within 30 s on a GPU, compiles included.
const DefaultTuneBudget = 25 * time.Second

// earlyDrop is how much slower than the best so far a candidate's first
// measurement may be before the rest of its measurement is skipped: its
// first batch (GPU) or first launches (CPU) say it cannot win.
const earlyDrop = 1.5

// kernelTimer runs a kernel on host buffers (its inputs, then its outputs,
// which it leaves written by one launch) and returns the seconds of one
// launch, measured after that one. Where a first measurement already
// exceeds limit it may return it without measuring further (the caller
// drops the candidate).
type kernelTimer func(k *graphpass.Kernel, args []any, limit float64) (float64, error)

// gpuKernelTimer is the GPU backend's kernelTimer (tilefuse_cuda build),
// with compiled modules in the disk cache; gpuDevice names the device for
// keys (name, compute capability, driver).
var (
	gpuKernelTimer func(k *graphpass.Kernel, args []any, limit float64, disk *diskcache.Cache) (float64, error)
	gpuDevice      func() (string, error)
	// gpuPrecompile compiles kernels together ahead of their timing (the
	// driver's linker in parallel), where the backend can
	gpuPrecompile func(ks []*graphpass.Kernel, disk *diskcache.Cache)
	// gpuTuneRelease frees what gpuKernelTimer keeps on the device for
	// the next candidate of a text (its inputs), once the text is measured
	gpuTuneRelease func()
)

// tuneMargin is how much faster than the default's a candidate must be in
// the rematch to be chosen: the noise of the measurement (more on a CPU
// shared with other work).
func tuneMargin(b Backend) float64 {
	if b == CUDA {
		return 0.03
	}
	return 0.10
}

// tuner is WithAutotune's state for one compilation: every kernel text's
// result, measured (or taken from the cache) when it is made.
type tuner struct {
	c      *compilation
	disk   *diskcache.Cache
	timer  kernelTimer
	device string
	memo   map[string]*TuneResult // by the default kernel's anonymous text
	start  time.Time
	budget time.Duration // 0: none
	done   int
	total  int
}

// tuneOverride, if set (tests), replaces the backend's kernel timer;
// tuneClock is the tuner's clock (tests: a fake one).
var (
	tuneOverride kernelTimer
	tuneClock    = time.Now
)

// tuneJob is a kernel text to measure.
type tuneJob struct {
	grp              *graphpass.Group
	prec             tile.Precision // the group's (compilation.candidates)
	def              *graphpass.Kernel
	cands            []tile.Meta
	text             string
	r                *TuneResult
	args, outs, want []any
	defTime          float64
}

func newTuner(c *compilation) (*tuner, error) {
	t := &tuner{c: c, disk: c.cfg.diskCache(), memo: map[string]*TuneResult{}, start: tuneClock(), budget: DefaultTuneBudget}
	if c.cfg.tuneBudget != nil {
		t.budget = *c.cfg.tuneBudget
	}
	switch {
	case c.cfg.backend == CUDA:
		if gpuKernelTimer == nil {
			return nil, Available(CUDA)
		}
		dev, err := gpuDevice()
		if err != nil {
			return nil, err
		}
		t.device = dev
		t.timer = func(k *graphpass.Kernel, args []any, limit float64) (float64, error) {
			return gpuKernelTimer(k, args, limit, t.disk)
		}
	default:
		t.device = fmt.Sprintf("cpu %s/%s, %d cores, vector dot %v, native %v", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpu.VectorDot(), c.cfg.native)
		t.timer = func(k *graphpass.Kernel, args []any, limit float64) (float64, error) {
			return cpuKernelTime(k, args, limit, c.cfg.native)
		}
	}
	if tuneOverride != nil {
		t.timer = tuneOverride
	}
	if err := t.run(); err != nil {
		return nil, err
	}
	return t, nil
}

// over says whether the budget is spent.
func (t *tuner) over() bool {
	return t.budget > 0 && tuneClock().Sub(t.start) >= t.budget
}

// precompile compiles ks together where the backend can (the GPU's driver
// JIT in parallel), ahead of their timing.
func (t *tuner) precompile(ks []*graphpass.Kernel) {
	if len(ks) > 0 && t.c.cfg.backend == CUDA && gpuPrecompile != nil && tuneOverride == nil {
		gpuPrecompile(ks, t.disk)
	}
}

// release frees what the backend's timer kept for a text's next
// candidate.
func (t *tuner) release() {
	if t.c.cfg.backend == CUDA && gpuTuneRelease != nil && tuneOverride == nil {
		gpuTuneRelease()
	}
}

// run tunes every kernel text of the compilation: each text's result from
// the cache where it is there; else every default measured once, then the
// texts by their share of the time (the default's × its kernels), most
// first, each with its candidates, while the budget lasts.
func (t *tuner) run() error {
	var jobs []*tuneJob
	kernels := map[string]int{}
	for _, grp := range t.c.groups {
		prec, cands := t.c.candidates(grp)
		if len(cands) < 2 {
			continue
		}
		t.total++
		def, err := graphpass.Emit(grp, graphpass.TuneTo(t.c.target, cands[0]), prec)
		if err != nil {
			return err
		}
		text := def.Tile.Anonymous()
		kernels[text]++
		if _, ok := t.memo[text]; ok {
			continue
		}
		r := &TuneResult{Kernel: def.Tile.Name, Default: cands[0], Chosen: cands[0], Candidates: len(cands)}
		t.memo[text] = r
		for _, in := range grp.Inputs {
			r.Bytes += int64(max(1, numel(in.Info.Shape)) * max(1, in.Info.DType.Size()))
		}
		for i := range max(1, def.Outs) {
			r.Bytes += int64(max(1, numel(def.Shape(i))) * max(1, def.DType.Size()))
		}
		if t.fromDisk(r, cands, text) {
			continue
		}
		jobs = append(jobs, &tuneJob{grp: grp, prec: prec, def: def, cands: cands, text: text, r: r})
	}
	for text, n := range kernels {
		t.memo[text].Kernels = n
	}
	for text, r := range t.memo {
		if r.FromCache {
			t.progress(r, kernels[text])
		}
	}
	// every default once: the texts' shares of the time
	var defs []*graphpass.Kernel
	for _, j := range jobs {
		defs = append(defs, j.def)
	}
	t.precompile(defs)
	for _, j := range jobs {
		if t.over() {
			j.r.Unfinished = fmt.Sprintf("not tuned: the budget of %v ran out", t.budget)
			continue
		}
		j.args, j.outs = tuneArgs(j.grp, j.def)
		s, err := t.timer(j.def, j.args, math.Inf(1))
		if err != nil { // nothing to measure against: the default, untuned
			t.release()
			j.r.Rejected = append(j.r.Rejected, fmt.Sprintf("the default %v did not run: %v", j.cands[0], err))
			j.args, j.outs = nil, nil
			continue
		}
		t.release()
		j.defTime, j.want = s, cloneOuts(j.outs)
		j.r.DefaultSeconds, j.r.ChosenSeconds = s, s
		j.r.Tried = []TriedMeta{{Meta: j.cands[0], Seconds: s}}
	}
	slices.SortStableFunc(jobs, func(a, b *tuneJob) int {
		return cmpFloat(b.defTime*float64(kernels[b.text]), a.defTime*float64(kernels[a.text]))
	})
	for _, j := range jobs {
		if j.args != nil {
			t.tune(j)
			t.release()
			j.args, j.outs, j.want = nil, nil, nil
		}
		t.progress(j.r, kernels[j.text])
	}
	return nil
}

// progress reports the n kernels of r's text done.
func (t *tuner) progress(r *TuneResult, n int) {
	for range n {
		t.done++
		if f := t.c.cfg.tuneProgress; f != nil {
			f(t.done, t.total, r.Kernel)
		}
	}
}

// key is the disk cache's key of the tuning of the kernel of anonymous
// text text.
func (t *tuner) key(text string) string {
	prec := t.c.cfg.precision.String()
	if !t.c.cfg.precisionSet {
		prec = "default" // the kernel's text has its dots' precision; the default's 3xTF32 has fewer candidates
	}
	return diskcache.Key(text, t.c.target.String(), prec, t.device, diskcache.Version())
}

// target is the target grp's kernel is written for: the compilation's,
// with the tuned meta-parameters where there are candidates.
func (t *tuner) target(grp *graphpass.Group) (graphpass.Target, error) {
	base := t.c.target
	prec, cands := t.c.candidates(grp)
	if len(cands) < 2 {
		return base, nil
	}
	def, err := graphpass.Emit(grp, graphpass.TuneTo(base, cands[0]), prec)
	if err != nil {
		return base, err
	}
	r, ok := t.memo[def.Tile.Anonymous()]
	if !ok {
		return base, fmt.Errorf("fusion: tuning @%s: not among the kernels tuned", def.Tile.Name)
	}
	if !slices.Contains(t.c.tuning, r) {
		t.c.tuning = append(t.c.tuning, r)
	}
	return graphpass.TuneTo(base, r.Chosen), nil
}

// tuneEntry is a tuning result on disk.
type tuneEntry struct {
	Chosen, Default               tile.Meta
	DefaultSeconds, ChosenSeconds float64
	Bytes                         int64
	Candidates                    int
	Rejected                      []string
	Tried                         []TriedMeta
}

// fromDisk fills r from the disk cache where the text was tuned before
// (with a choice still among cands).
func (t *tuner) fromDisk(r *TuneResult, cands []tile.Meta, text string) bool {
	key := t.key(text)
	b, ok := t.disk.Get("tune", key)
	if !ok {
		return false
	}
	var e tuneEntry
	if json.Unmarshal(b, &e) == nil && slices.ContainsFunc(cands, func(m tile.Meta) bool { return m.String() == e.Chosen.String() }) {
		r.Chosen, r.DefaultSeconds, r.ChosenSeconds, r.Candidates, r.Rejected, r.Tried, r.FromCache = e.Chosen, e.DefaultSeconds, e.ChosenSeconds, e.Candidates, e.Rejected, e.Tried, true
		return true
	}
	t.disk.Remove("tune", key) // of another set of candidates: tune again
	return false
}

// tune measures the candidates of j (its default measured) while the
// budget lasts, rematches the fastest against the default, and stores the
// result on disk where every candidate was measured.
func (t *tuner) tune(j *tuneJob) {
	r, args, outs := j.r, j.args, j.outs
	defTime := j.defTime
	type run struct {
		k    *graphpass.Kernel
		meta tile.Meta
		s    float64
	}
	var ks []*graphpass.Kernel
	var metas []tile.Meta
	for _, m := range j.cands[1:] {
		k, err := graphpass.Emit(j.grp, graphpass.TuneTo(t.c.target, m), j.prec)
		if err != nil {
			r.Rejected = append(r.Rejected, fmt.Sprintf("%v: %v", m, err))
			continue
		}
		ks, metas = append(ks, k), append(metas, m)
	}
	t.precompile(ks)
	var ok []run
	best := defTime
	measured := 0
	for i, k := range ks {
		if t.over() {
			r.Unfinished = fmt.Sprintf("partly tuned: %d of %d candidates measured before the budget of %v ran out", 1+measured, r.Candidates, t.budget)
			break
		}
		measured++
		m := metas[i]
		resetOuts(outs, k.Accumulates) // a split candidate adds into zeros, whatever the default does
		limit := earlyDrop * best
		s, err := t.timer(k, args, limit)
		if err != nil {
			r.Rejected = append(r.Rejected, fmt.Sprintf("%v: %v", m, err))
			continue
		}
		if err := sameOuts(outs, j.want, j.def.DType, max(dotTol(j.def.Tile), dotTol(k.Tile))); err != nil {
			r.Rejected = append(r.Rejected, fmt.Sprintf("%v: computes otherwise: %v", m, err))
			continue
		}
		if s > limit { // its first measurement says it cannot win
			r.Tried = append(r.Tried, TriedMeta{Meta: m, Seconds: s, Dropped: true})
			continue
		}
		r.Tried = append(r.Tried, TriedMeta{Meta: m, Seconds: s})
		ok = append(ok, run{k, m, s})
		best = min(best, s)
	}
	if len(ok) > 0 {
		best := slices.MinFunc(ok, func(a, b run) int { return cmpFloat(a.s, b.s) })
		if best.s < defTime {
			// the rematch: the default and the best, in turns
			var ds, bs []float64
			for range 3 {
				for _, x := range []struct {
					k   *graphpass.Kernel
					out *[]float64
				}{{j.def, &ds}, {best.k, &bs}} {
					resetOuts(outs, x.k.Accumulates)
					s, err := t.timer(x.k, args, math.Inf(1))
					if err != nil {
						s = math.Inf(1) // it ran before: count it as the slowest
					}
					*x.out = append(*x.out, s)
				}
			}
			d, b := medianOf(ds), medianOf(bs)
			r.DefaultSeconds, r.ChosenSeconds = d, d
			if b < d*(1-tuneMargin(t.c.cfg.backend)) {
				r.Chosen, r.ChosenSeconds = best.meta, b
			}
		}
	}
	if r.Unfinished != "" {
		return // measured again by a later tune
	}
	e := tuneEntry{Chosen: r.Chosen, Default: r.Default, DefaultSeconds: r.DefaultSeconds, ChosenSeconds: r.ChosenSeconds, Bytes: r.Bytes, Candidates: r.Candidates, Rejected: r.Rejected, Tried: r.Tried}
	if b, err := json.Marshal(e); err == nil {
		t.disk.Put("tune", t.key(j.text), b) // a cache that cannot be written is no cache
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// tuneArgs are seeded inputs of the group's inputs' shapes (in [0.5,
// 1.5)·tuneScale(grp): no log or square root of a negative) and an output
// buffer per output of k (NaN, or zeros where k accumulates).
func tuneArgs(grp *graphpass.Group, k *graphpass.Kernel) (args []any, outs []any) {
	rng := rand.New(rand.NewPCG(12, 2026))
	s := tuneScale(grp)
	for _, in := range grp.Inputs {
		n := max(1, numel(in.Info.Shape)) // a Stack (graphpass): its group's outputs' elements
		if in.Info.DType == tile.F64 {
			x := make([]float64, n)
			for i := range x {
				x[i] = (0.5 + rng.Float64()) * s
			}
			args = append(args, x)
			continue
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32((0.5 + rng.Float64()) * s)
		}
		args = append(args, x)
	}
	for _, n := range tuneOutSizes(k) {
		if k.DType == tile.F64 {
			outs = append(outs, make([]float64, n))
		} else {
			outs = append(outs, make([]float32, n))
		}
	}
	resetOuts(outs, k.Accumulates)
	return append(args, outs...), outs
}

// tuneScale is what the tuner's inputs of group grp are scaled by: 1/√K
// where its products sum K terms (the largest K among them), so that the
// products come out near 1, as a model's do, and not near K; 1 for a group
// without products. Unscaled, FF1's product over K = 256 gave its GELU
// epilogue pre-activations of about 256, where the exp underflows in every
// lane: on the hosts' Intel cores the tuner timed that kernel at 0.85 ms
// against 0.51 for the backward's GELU product of the same FLOPs and tile,
// which run alike in the graph (r48b, r48d; 2026-12-06), so every
// candidate's time held a cost the graph's data never pays.
func tuneScale(grp *graphpass.Group) float64 {
	k := 0
	for _, n := range append(slices.Clip(grp.Members), grp.Recompute...) {
		if (n.Info.Kind != ops.MatMul && n.Info.Kind != ops.BatchedMatMul) || len(n.Inputs) == 0 {
			continue
		}
		a := n.Inputs[0].Info.Shape
		d := len(a) - 1
		if n.Info.TransA {
			d--
		}
		if d >= 0 {
			k = max(k, a[d])
		}
	}
	if k <= 1 {
		return 1
	}
	return 1 / math.Sqrt(float64(k))
}

// tuneOutSizes are the elements of each output parameter of k: one per
// output, or one for all of them laid end to end where the kernel takes one
// pointer to its outputs (OnePointer: the heads' backward kernels).
func tuneOutSizes(k *graphpass.Kernel) []int {
	var sizes []int
	for i := range max(1, k.Outs) {
		sizes = append(sizes, max(1, numel(k.Shape(i))))
	}
	if k.OnePointer {
		total := 0
		for _, n := range sizes {
			total += n
		}
		sizes = []int{total}
	}
	return sizes
}

// resetOuts poisons the outputs with NaN, or zeros them where the kernel
// accumulates into them.
func resetOuts(outs []any, zero bool) {
	v := math.NaN()
	if zero {
		v = 0
	}
	for _, o := range outs {
		switch o := o.(type) {
		case []float32:
			parallelChunks(len(o), func(_, lo, hi int) {
				for i := lo; i < hi; i++ {
					o[i] = float32(v)
				}
			})
		case []float64:
			parallelChunks(len(o), func(_, lo, hi int) {
				for i := lo; i < hi; i++ {
					o[i] = v
				}
			})
		}
	}
}

func cloneOuts(outs []any) []any {
	c := make([]any, len(outs))
	for i, o := range outs {
		switch o := o.(type) {
		case []float32:
			c[i] = slices.Clone(o)
		case []float64:
			c[i] = slices.Clone(o)
		}
	}
	return c
}

// sameOuts checks a candidate's outputs against the default's: |a-b| ≤
// tol·(1+|b|), as the bench checks fused against unfused (sums in another
// order), NaN where the default has NaN. Where the kernels' products round
// their operands (TF32, bf16: dotTol), a candidate that sums in another
// order differs from the default by that rounding times the terms'
// magnitudes, which an element with cancellation can hold far above its
// own value: there |a-b| ≤ ntol·max|b| (the output's largest element)
// passes too.
func sameOuts(got, want []any, d tile.DType, ntol float64) error {
	tol := 1e-3
	if d == tile.F64 {
		tol = 1e-9
	}
	for i := range want {
		var err error
		switch g := got[i].(type) {
		case []float32:
			w := want[i].([]float32)
			err = sameFloats(i, g, w, tol, ntol*maxAbs(w))
		case []float64:
			w := want[i].([]float64)
			err = sameFloats(i, g, w, tol, ntol*maxAbs(w))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// dotTol is sameOuts' ntol for kernel k: 8 units of the rounding of its
// products' operands (TF32 2⁻¹¹, either TF32 precision; bf16 2⁻⁸), 0 where its products are exact
// (ieee) or as accurate (3xTF32), or where it has none.
func dotTol(k *tile.Kernel) float64 {
	tol := 0.0
	k.Walk(func(v *tile.Value) {
		if v.Op != tile.OpDot {
			return
		}
		switch {
		case v.Prec.IsTF32():
			tol = max(tol, 8*0x1p-11)
		case v.Prec == tile.PrecBF16:
			tol = max(tol, 8*0x1p-8)
		}
	})
	return tol
}

// maxAbs is the largest |x| of xs that is not NaN (0 for none).
func maxAbs[T float32 | float64](xs []T) float64 {
	m := make([]float64, tuneChunks(len(xs)))
	parallelChunks(len(xs), func(c, lo, hi int) {
		for _, x := range xs[lo:hi] {
			if a := math.Abs(float64(x)); a > m[c] { // NaN compares false
				m[c] = a
			}
		}
	})
	return slices.Max(append(m, 0))
}

// sameFloats is sameOuts for output i, in place (a peer-size output has
// 10⁸ elements: no copies), in chunks over the cores; the error is the
// first element that differs.
func sameFloats[T float32 | float64](i int, got, want []T, tol, abs float64) error {
	bad := make([]int, tuneChunks(len(want)))
	parallelChunks(len(want), func(c, lo, hi int) {
		bad[c] = -1
		ws := want[lo:hi]
		gs := got[lo:hi][:len(ws)]
		for j, w := range ws {
			g, w := float64(gs[j]), float64(w)
			if math.IsNaN(w) && math.IsNaN(g) {
				continue
			}
			if d := math.Abs(g - w); !(d <= tol*(1+math.Abs(w)) || d <= abs) {
				bad[c] = lo + j
				return
			}
		}
	})
	for _, j := range bad {
		if j >= 0 {
			return fmt.Errorf("output %d [%d] = %v, the default's %v", i, j, float64(got[j]), float64(want[j]))
		}
	}
	return nil
}

// tuneChunk is the elements a goroutine checks or fills at least.
const tuneChunk = 1 << 20

// tuneChunks is how many chunks parallelChunks cuts n elements into.
func tuneChunks(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), (n+tuneChunk-1)/tuneChunk))
}

// parallelChunks calls f on consecutive chunks [lo, hi) of n elements,
// chunk c of tuneChunks(n), each in a goroutine where there is more than one.
func parallelChunks(n int, f func(c, lo, hi int)) {
	k := tuneChunks(n)
	if k == 1 {
		f(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for c := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(c, c*n/k, (c+1)*n/k)
		}()
	}
	wg.Wait()
}

// cpuKernelTime runs k once on the CPU executor (the outputs stay), then
// times launches: the median of at least 3, and of as many as 20 ms allow
// (at most 50); of 3 where their median is over limit.
func cpuKernelTime(k *graphpass.Kernel, args []any, limit float64, native bool) (float64, error) {
	e, err := cpu.NewExec(k.Tile, cpu.WithNative(native))
	if err != nil {
		return 0, err
	}
	launch := func(args ...any) error { return e.Launch(k.Grid, args...) }
	if k.Parts > 1 { // partial results into scratch, then combined into the outputs
		c, err := cpu.NewExec(k.Combine, cpu.WithNative(native))
		if err != nil {
			return 0, err
		}
		var scratch []any
		for _, n := range k.ScratchSizes() {
			if k.DType == tile.F64 {
				scratch = append(scratch, make([]float64, n))
			} else {
				scratch = append(scratch, make([]float32, n))
			}
		}
		nin := len(args) - len(scratch)
		kargs, cargs := make([]any, len(args)), make([]any, 0, 2*len(scratch))
		launch = func(args ...any) error { // args' outputs stay the caller's
			copy(kargs, args)
			_, err := launchParts(k, e, c, kargs, nin, append(cargs[:0], scratch...), nil)
			return err
		}
	}
	if err := launch(args...); err != nil {
		return 0, err
	}
	out := slices.Clone(args)
	if k.Accumulates { // timed launches add into copies, not the checked outputs
		for i := len(args) - len(tuneOutSizes(k)); i < len(args); i++ {
			out[i] = cloneOuts(args[i : i+1])[0]
		}
	}
	var ts []float64
	for t0 := time.Now(); len(ts) < 3 || len(ts) < 50 && time.Since(t0) < 20*time.Millisecond; {
		s := time.Now()
		if err := launch(out...); err != nil {
			return 0, err
		}
		ts = append(ts, time.Since(s).Seconds())
		if len(ts) == 3 && medianOf(ts) > limit {
			break // it cannot win: measured no further
		}
	}
	return medianOf(ts), nil
}
