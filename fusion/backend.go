package fusion

import (
	"errors"

	"github.com/tilefuse/tilefuse/graphpass"
)

// backend runs a compiled graph: the CPU backend (cpu.go) or the GPU
// backend (gpu_cuda.go, the tilefuse_cuda build). Both take the rewritten
// graph's nodes in Compiled.rw.order, read the user's inputs from
// Compiled.rw.inputs and write back Compiled.back, the readable set.
type backend interface {
	// prepare binds the backend to the compiled graph (the load stage):
	// whatever can be done once is done here, so that an error is an
	// error of NewTapeMachine and the first run is as fast as the others.
	prepare(c *Compiled) error
	// run runs the graph once: the user's input values in, the readable
	// set's values out (into the user's nodes).
	run() error
	// deviceTime is the last run's compute on the device in seconds (0 on
	// the CPU, or before a run).
	deviceTime() float64
	// kernelTimes is each kernel's time in the last run (WithProfile; nil
	// without it).
	kernelTimes() []KernelTime
	// stats adds the backend's counts of the last run to s.
	stats(s *Stats)
	close() error
}

// loadPhaser is a backend whose load stage reports its parts (the GPU's:
// buffers, modules, launch plan, stager), listed in Report.Stages after
// load as "load:<part>".
type loadPhaser interface {
	loadPhases() []StageTime
}

// KernelTime is one kernel's time in a run (WithProfile): device time on
// the GPU, wall time on the CPU.
type KernelTime struct {
	Kernel  string
	Ops     []string // the ops it runs
	Seconds float64
	// Faults is, on the CPU backend, the minor page faults the process took
	// while the kernel ran (its outputs' new pages, first touched there;
	// other goroutines' faults in that time count too); -1 on the GPU and
	// where the system does not count them.
	Faults int64
}

// Stats are a machine's statistics: what its runs did, where the Report is
// what compilation did.
type Stats struct {
	Runs int // completed runs
	// DeviceTime is the last run's compute on the GPU in seconds, measured
	// with events (0 on the CPU backend).
	DeviceTime float64
	// HostOps is the number of ops tilefuse does not know that ran on the
	// CPU with copies in the last run (GPU backend; 0 on the CPU backend,
	// where every op runs on the host).
	HostOps int
	// Uploads and Downloads are the host↔device copies (GPU backend) since
	// the last run began: that run's (the inputs that changed and host ops'
	// results up, the readable values and host ops' operands down) and
	// those of solver steps and Machine.Sync after it; Bytes* are their
	// sizes. A training step (Let, RunAll, Step, the loss read) is one
	// window.
	Uploads, Downloads int
	BytesUp, BytesDown int64
	// BytesUpInPlace is the part of BytesUp that went straight from the
	// user's memory, which the GPU backend page-locked in place because
	// earlier runs uploaded from it too (a batch refilled in place, a few
	// taken in turn): no copy into staging memory first (DESIGN.md,
	// "Uploads from locked memory").
	BytesUpInPlace int64
	// UploadDeviceTime is the device time of the last run's uploads (GPU
	// backend): from the moment the device reached them (after any work
	// queued before, such as a solver step's kernels) to the event the
	// run's DeviceTime starts from. 0 when the run uploaded nothing.
	UploadDeviceTime float64
	// Held is the number of the last run's inputs that the device held, so
	// they were not uploaded (GPU backend; see WithInputCheck); HashedBytes
	// the bytes that run hashed to tell them unchanged, and HostSeconds the
	// wall time of the run outside its device time (uploads, hashing,
	// downloads, launches that were not overlapped).
	Held        int
	HashedBytes int64
	HostSeconds float64
	// Launches are the kernels the host launched one by one (cuLaunchKernel)
	// and GraphLaunches the CUDA graphs it replayed (WithCUDAGraphs) in the
	// same window as the copies: the run's and those of solver steps after
	// it (GPU backend).
	Launches, GraphLaunches int
	// SolverDeviceTime is the device time of the last fused solver step's
	// kernels (fusion.NewSolver on the GPU backend), measured with events
	// around them; Stats waits for them to finish to read it. A training
	// step's kernels take DeviceTime plus SolverDeviceTime on the device.
	SolverDeviceTime float64
	// ReturnedEarly says that the last run returned while its last kernels
	// still ran on the device (GPU backend, WithAsyncRuns: every value the
	// user can read had landed); DeviceTime and HostSeconds are read then
	// by Stats, which waits for those kernels to end.
	ReturnedEarly bool
	// Phases is where the last run's wall clock went on the host (GPU
	// backend), for finding the host's cost of a step.
	Phases RunPhases
	// Recycled and Allocated count, since the machine was made, the memory
	// given to values the user can read (of 32 KiB or more, by default:
	// WithRecycle): buffers that earlier runs gave such values and the Go
	// runtime found unreachable, taken again (RecycledBytes their bytes),
	// and buffers allocated anew. Both are 0 with WithReuseOutputs(true)
	// or WithRecycle(false). CollectionsAsked counts the collections the
	// machine started in the background because a run had to allocate a
	// buffer of 4 MiB or more anew: 0 unless the process runs with
	// TILEFUSE_ASKGC=1 (fusion's recycle.go: askCollections), which asks
	// for them, for measuring.
	Recycled, Allocated, CollectionsAsked int
	RecycledBytes                         int64
	// ExecutorLaunches counts, since the machine was made, the launches of
	// its kernels (CPU backend) that were compiled to machine code and
	// that the machine code handed to the executor at run time, several
	// times slower (codegen/cpu.Fallbacks says why a launch does: most
	// often a block whose lanes cross a multiple of a divisor the kernel
	// divides them by, which the machine code checks as each block
	// starts). Report's GroupInfo.Executor names the kernels that are not
	// machine code at all; this, the ones that are and did not run as it.
	// 0 on the GPU backend.
	ExecutorLaunches int
}

// RunPhases split a run's wall clock on the CUDA backend, in seconds, in
// order: Check, residency's look at the inputs (hashing where it must);
// HandOff, the hand-over to the device's OS thread; Upload, the uploads
// (the staging copies and their enqueueing); Launch, enqueueing the
// compute (launches or graph replays, host ops with their copies) and
// the readable values' copies behind it; Wait, waiting once for the
// device to finish it all (the device time, less what ran while the host
// was still launching, plus the copies), or, where the run returns early
// (Stats.ReturnedEarly), for the readable values to land and the inputs
// to be read; Download, what follows: the timers read (not when the run
// returns early) and the values copied out of the pinned memory; Return, the hand-back to the caller. Solver is the wall clock
// of a fused solver Step since the run (on the CUDA backend the hand-over
// of its launches to the device's thread).
type RunPhases struct {
	Check, HandOff, Upload, Launch, Wait, Download, Return, Solver float64
}

var (
	newGPUBackend func() backend                   // the tilefuse_cuda build sets it
	openDevice    func() error                     // opens the shared GPU (tilefuse_cuda build)
	gpuTarget     func() (graphpass.Target, error) // the shared GPU's target (tilefuse_cuda build)
)

// Available says whether backend b can run here: the CPU always can; CUDA
// needs the tagged build and a GPU. For CUDA it creates the process's GPU
// context now (once; machines share it), so that the first NewTapeMachine
// does not pay for it.
func Available(b Backend) error {
	if b != CUDA {
		return nil
	}
	if openDevice == nil {
		return errors.New("fusion: the CUDA backend needs the tagged build: go build -tags tilefuse_cuda (see README)")
	}
	return openDevice()
}

// fetcherBytes is the page-locked memory of the CUDA backend's fetcher for
// a run whose readable values take back bytes (each rounded up to 256):
// all of them, from 64 KiB up to maxFetcherBytes. A value that does not fit
// beside those enqueued before it waits for them (the fetcher's Finish: the
// host stops launching until the kernels before it are done) and one larger
// than the fetcher comes down on its own. The cap was 16 MiB: the BERT-base
// layer's training step reads 25 MB (its 12.6 MB output among them), and
// its second large value waited in the middle of the launches, the device
// idle meanwhile: 4.50 ms of device time in a step against 2.04 for the
// same kernels back to back (H200, 2026-12-01, fourth session).
func fetcherBytes(back int64) int64 { return min(max(back, 64<<10), maxFetcherBytes) }

// maxFetcherBytes is the most page-locked memory a machine's fetcher takes
// (a variable: tests lower it to send values down on their own).
var maxFetcherBytes int64 = 256 << 20
