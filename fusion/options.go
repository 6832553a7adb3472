package fusion

import (
	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/tile"
)

// Backend is where kernels run.
type Backend uint8

const (
	CPU  Backend = iota // the tile interpreter, in parallel over cores
	CUDA                // NVIDIA GPUs (the tilefuse_cuda build)
)

func (b Backend) String() string {
	if b == CUDA {
		return "cuda"
	}
	return "cpu"
}

type config struct {
	matmul    *bool // nil: on for CUDA, off for CPU
	backend   Backend
	fuse      bool
	keep      []*G.Node
	dumpDir   string
	precision tile.Precision
	maxGroup  int
	profile   bool
}

// Option configures Compile and NewTapeMachine.
type Option func(*config)

// WithBackend chooses where kernels run (default CPU).
func WithBackend(b Backend) Option { return func(c *config) { c.backend = b } }

// WithFusion turns fusion off (false): every fusable op is its own kernel
// on the same backend, the honest unfused baseline.
func WithFusion(on bool) Option { return func(c *config) { c.fuse = on } }

// WithKeep names nodes whose values the user reads, so that they are
// written out even where they could fuse. Nodes the user named
// (gorgonia.WithName) and the graph's outputs are always written out.
func WithKeep(nodes ...*G.Node) Option {
	return func(c *config) { c.keep = append(c.keep, nodes...) }
}

// WithDumpDir writes every generated kernel's IR to dir/<kernel>.tile (the
// environment variable TILEFUSE_DUMP adds codegen's .layout and .ptx on the GPU).
func WithDumpDir(dir string) Option { return func(c *config) { c.dumpDir = dir } }

// WithPrecision sets the precision of the dots in fused matrix products
// (ieee or tf32; on the GPU, tf32 uses the tensor cores).
func WithPrecision(p tile.Precision) Option { return func(c *config) { c.precision = p } }

// WithMaxGroup bounds the number of ops fused into one kernel (default 64).
func WithMaxGroup(n int) Option { return func(c *config) { c.maxGroup = n } }

// WithMatMulFusion fuses 2-D matrix products with their elementwise epilogue
// (bias, activation, residual) into one kernel, and attention
// (softmax(f(q·kᵀ))·v through batched products) into one flash-style
// kernel. The default is on for the CUDA backend, and on the CPU where the
// interpreter's float32 dot has vector instructions (amd64 with AVX2 and FMA:
// tile.VectorDot), which run 3–6× Gorgonia's BLAS products there; elsewhere
// Gorgonia's BLAS is the faster and the default is off.
func WithMatMulFusion(on bool) Option { return func(c *config) { c.matmul = &on } }

// WithProfile times each kernel of a run (Machine.KernelTimes): on the GPU
// backend with a pair of events around its launch, on the CPU by the wall
// clock around the op. The timing costs a little: leave it off when timing
// whole runs.
func WithProfile(on bool) Option { return func(c *config) { c.profile = on } }
