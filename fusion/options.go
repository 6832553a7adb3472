package fusion

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/diskcache"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// Backend is where kernels run.
type Backend uint8

const (
	CPU  Backend = iota // the CPU executor (codegen/cpu), in parallel over cores
	CUDA                // NVIDIA GPUs (the tilefuse_cuda build)
)

func (b Backend) String() string {
	switch b {
	case CPU:
		return "cpu"
	case CUDA:
		return "cuda"
	}
	return fmt.Sprintf("Backend(%d)", uint8(b))
}

type config struct {
	matmul       *bool // nil: on for CUDA, off for CPU
	backend      Backend
	fuse         bool
	keep         []*G.Node
	dumpDir      string
	precision    tile.Precision
	precisionSet bool // WithPrecision given; else each group's graphpass.DefaultPrecision on the GPU
	maxGroup     int
	profile      bool
	inCheck      InputCheck // how the CUDA backend sees host changes (resident.go)
	graphs       bool       // CUDA: a run's launches replayed as CUDA graphs
	readAll      bool
	target       *graphpass.Target // nil: the backend's own
	reuse        bool
	recycle      bool // WithRecycle
	asyncRuns    bool // WithAsyncRuns
	native       bool
	cacheDir     *string // nil: diskcache's default directory; "": no cache on disk
	autotune     bool
	tuneProgress func(done, total int, kernel string)
	tuneBudget   *time.Duration // WithTuneBudget; nil: DefaultTuneBudget
	noCache      bool           // WithCompileCache(false)
	maxElements  int            // graphpass.Options.MaxElements (tests lower it: WithMaxElements in export_test.go)
	errs         []error        // options given values they cannot take
}

// configure applies opts over the defaults and checks what they set.
// TILEFUSE_DUMP, when set, is the dump directory unless WithDumpDir names one.
func configure(opts []Option) (config, error) {
	cfg := config{fuse: true, maxGroup: 64, dumpDir: os.Getenv("TILEFUSE_DUMP"), native: true, recycle: true, asyncRuns: true}
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("fusion: a nil Option")
		}
		o(&cfg)
	}
	if len(cfg.errs) > 0 {
		return cfg, cfg.errs[0]
	}
	return cfg, nil
}

// Option configures Compile and NewTapeMachine.
type Option func(*config)

// WithBackend chooses where kernels run (default CPU).
func WithBackend(b Backend) Option {
	return func(c *config) {
		if b != CPU && b != CUDA {
			c.errs = append(c.errs, fmt.Errorf("fusion: WithBackend(%v): no such backend (fusion.CPU or fusion.CUDA)", b))
		}
		c.backend = b
	}
}

// WithFusion turns fusion off (false): every fusable op is its own kernel
// on the same backend, the honest unfused baseline.
func WithFusion(on bool) Option { return func(c *config) { c.fuse = on } }

// WithKeep names nodes whose values the user reads, so that they are
// written out even where they could fuse (readable.go has the rule for the
// nodes that always are). A nil node or a node of another graph is an error
// of Compile.
func WithKeep(nodes ...*G.Node) Option {
	return func(c *config) { c.keep = append(c.keep, nodes...) }
}

// WithDumpDir writes each compile stage's output to dir/NN-<stage>.txt and
// every generated kernel's IR to dir/<kernel>.tile. Without it, the
// environment variable TILEFUSE_DUMP names the directory (and adds
// codegen's stages on the GPU).
func WithDumpDir(dir string) Option { return func(c *config) { c.dumpDir = dir } }

// WithPrecision sets the precision of the dots in fused matrix products:
// tile.PrecIEEE (exact f32 products), PrecTF32 (A truncated
// to TF32, as the tensor cores read f32, and B rounded to TF32:
// tile.TruncTF32, tile.RoundTF32),
// PrecBF16 (operands rounded to bfloat16, f32 sums) or PrecTF32x3 (three
// TF32 products of each operand's high and low parts: close to f32's
// accuracy). On the GPU all but ieee run on the tensor cores. Without it,
// each kernel's precision is chosen for it: on the CUDA backend a matrix
// product at least 256 on each side on a GPU with Hopper's wgmma runs in
// 3xTF32, whose kernel there is twice as fast as cuBLAS's strict fp32
// and more accurate (graphpass.DefaultPrecision has the rule and the
// measurements); everything else, and everything on the CPU, in ieee.
// WithPrecision(tile.PrecIEEE) keeps every product on the FMA. Flash
// attention's products under PrecTF32 round A and truncate B instead
// (tile.PrecTF32TB, which is not an option here): the operand each kernel
// converts in registers is rounded, the one the tensor cores read from
// shared memory as it lies is truncated.
func WithPrecision(p tile.Precision) Option {
	return func(c *config) {
		if !slices.Contains(tile.Precisions, p) {
			c.errs = append(c.errs, fmt.Errorf("fusion: WithPrecision(%v): no such precision (tile.PrecIEEE, PrecTF32, PrecBF16 or PrecTF32x3)", p))
		}
		c.precision, c.precisionSet = p, true
	}
}

// WithMaxGroup bounds the number of ops fused into one kernel (default 64;
// at least 1).
func WithMaxGroup(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("fusion: WithMaxGroup(%d): a kernel holds at least one op", n))
		}
		c.maxGroup = n
	}
}

// WithMatMulFusion fuses 2-D matrix products with their elementwise epilogue
// (bias, activation, residual) into one kernel, and attention
// (softmax(f(q·kᵀ))·v through batched products) into one flash-style
// kernel. The default is on for the CUDA backend, and on the CPU where the
// CPU executor's float32 dot has vector instructions (amd64 with AVX2 and
// FMA: codegen/cpu.VectorDot), which run 3–6× Gorgonia's BLAS products there; elsewhere
// Gorgonia's BLAS is the faster and the default is off.
func WithMatMulFusion(on bool) Option { return func(c *config) { c.matmul = &on } }

// WithProfile times each kernel of a run (Machine.KernelTimes): on the GPU
// backend with a pair of events around its launch, on the CPU by the wall
// clock around the op. The timing costs a little: leave it off when timing
// whole runs.
func WithProfile(on bool) Option { return func(c *config) { c.profile = on } }

// WithCUDAGraphs(true) makes the CUDA backend replay a run's kernels as
// CUDA graphs: the machine makes each stretch of launches between ops
// left to the CPU into a graph once, when it is made (every kernel's
// arguments are device buffers fixed then), and a run replays each with
// one cuGraphLaunch, where it otherwise makes a cuLaunchKernel per kernel
// (and a memset per kernel that accumulates into its output). The host's
// cost of a run's launches becomes that of one call, and the GPU runs the
// kernels without the gaps of launches it waits for. Stats counts both
// (Launches, GraphLaunches). WithProfile, which times each launch with
// events, launches one by one. Off by default until measured on a GPU; the
// CPU backend ignores it.
func WithCUDAGraphs(on bool) Option { return func(c *config) { c.graphs = on } }

// WithReadAll(true) gives every node of the user's graph its value after
// RunAll, as Gorgonia's machine does: for debugging, and for checking
// against Gorgonia. Each fused value a kernel would keep to itself becomes
// one more output of it, written to memory on every run.
func WithReadAll(on bool) Option { return func(c *config) { c.readAll = on } }

// WithCacheDir keeps what later processes can reuse in dir instead of
// the default, os.UserCacheDir()/tilefuse (package diskcache): the CUDA
// backend's compiled modules and autotuning results. An empty dir turns
// the cache on disk off (every process compiles afresh). The cache
// location and size: tilefuse cache; tilefuse cache clear empties it.
func WithCacheDir(dir string) Option { return func(c *config) { c.cacheDir = &dir } }

// diskCache is the cache on disk the options choose.
func (cfg *config) diskCache() *diskcache.Cache {
	if cfg.cacheDir != nil {
		return diskcache.Open(*cfg.cacheDir)
	}
	return diskcache.OpenDefault()
}

// WithTarget writes the kernels for target t (block sizes, splits, warps:
// each kernel's meta-parameters) instead of for the backend's own machine:
// to run one machine's kernels on another backend (a GPU's split sums on
// the CPU, as tests do), or to tune a choice with t.Tune.
func WithTarget(t graphpass.Target) Option { return func(c *config) { c.target = &t } }

// targetOf is the target kernels are written for: WithTarget's, else the
// backend's machine (the CPU's cores; the GPU, opened now).
func (cfg *config) targetOf() (graphpass.Target, error) {
	switch {
	case cfg.target != nil:
		return *cfg.target, nil
	case cfg.backend == CUDA:
		if gpuTarget == nil {
			return graphpass.Target{}, Available(CUDA)
		}
		return gpuTarget()
	}
	t := graphpass.CPU(runtime.NumCPU())
	t.Native = cfg.native && jit.Supported()
	return t, nil
}

// WithNativeCPU(false) runs every kernel of the CPU backend on the CPU
// executor (codegen/cpu). By default (true) a kernel runs as machine code
// generated at run time (codegen/cpu/native: AVX2 and FMA on amd64) where
// that code generator supports it, and on the executor otherwise; both
// agree with the reference interpreter within the ops' stated bounds
// (codegen/cpu/native's package doc). Without AVX2 and FMA, or with -tags
// purego, it changes nothing.
func WithNativeCPU(on bool) Option { return func(c *config) { c.native = on } }

// WithReuseOutputs(true) is the fast path: every run writes each value into
// its memory of the previous run, so a value the user read after one run is
// overwritten by the next (copy what you keep). By default, as with
// Gorgonia's machine, each run gives the values the user can read fresh
// memory, and a value read after a run stays as it was; values the user
// cannot read reuse their memory either way.
func WithReuseOutputs(on bool) Option { return func(c *config) { c.reuse = on } }

// WithRecycle(false) gives the values the user can read new, zeroed memory
// every run (the default without WithReuseOutputs). By default (true) a run
// gives such a value of 32 KiB or more memory that an earlier run gave
// one and that the Go runtime has since found unreachable (a finalizer on
// the memory: no tensor, slice, subslice, view or pointer into it is left),
// so that Go need not zero new memory each run; a value the user still
// holds is never reused, whatever part of it they hold. Where no such
// memory has come back, the value gets new memory that Go has not zeroed
// (its kernel writes every element; a kernel that adds into its output
// gets it zeroed). Memory comes back
// as the collector runs, at its own pace, at most 4 runs' worth a machine,
// or up to 128 runs' worth of small values within 32 MiB (Close drops it).
// Stats counts what was recycled. It changes nothing with
// WithReuseOutputs(true).
func WithRecycle(on bool) Option { return func(c *config) { c.recycle = on } }

// WithAsyncRuns(false) makes every RunAll on the CUDA backend wait for the
// device to finish the run's kernels before it returns. By default (true)
// a run whose values the user can read all come down on their way beside
// the kernels (every readable value is written before the last kernels:
// a training graph whose gradients a fused solver takes on the device,
// fusion.NewSolver) returns once those values have landed and the run's
// inputs have been read from the user's memory, while its last kernels
// (the backward pass) still run: the solver's step and the next batch are
// queued behind them, and the device does not wait for the host between
// steps, as a PyTorch loop's. Every value the user can read holds its
// result when RunAll returns either way; what changes is when an error of
// those last kernels is seen: it is returned by the machine's next RunAll,
// Wait, Sync, a solver's Step or Close. Machine.Wait waits for the
// device; Stats and DeviceTime wait for the last run's kernels to end. A
// run with ops left to the CPU, or with WithProfile, always waits. The
// CPU backend runs synchronously and ignores it.
func WithAsyncRuns(on bool) Option { return func(c *config) { c.asyncRuns = on } }
