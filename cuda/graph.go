//go:build tilefuse_cuda

package cuda

/*
#include <stdlib.h>
#include <cuda.h>

// tf_launch is cuLaunchKernel on the legacy default stream with an
// argument array already in C memory (cuda.Packed).
static int tf_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned shmem, void **params) {
	return (int)cuLaunchKernel(f, gx, gy, gz, bx, 1, 1, shmem, (CUstream)0, params, NULL);
}

// tf_graph_create makes an empty graph.
static int tf_graph_create(CUgraph *g) {
	return (int)cuGraphCreate(g, 0);
}

// tf_kernel_params is a kernel node's parameters: f over a grid of
// gx×gy×gz blocks of bx threads with shmem bytes of dynamic shared memory.
static CUDA_KERNEL_NODE_PARAMS tf_kernel_params(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned shmem, void **params) {
	CUDA_KERNEL_NODE_PARAMS p;
	p.func = f;
	p.gridDimX = gx;
	p.gridDimY = gy;
	p.gridDimZ = gz;
	p.blockDimX = bx;
	p.blockDimY = 1;
	p.blockDimZ = 1;
	p.sharedMemBytes = shmem;
	p.kernelParams = params;
	p.extra = NULL;
	return p;
}

// tf_graph_kernel adds a kernel node after dep (none where dep is NULL);
// the driver copies the arguments' values.
static int tf_graph_kernel(CUgraph g, CUgraphNode *dep, CUgraphNode *out, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned shmem, void **params) {
	CUDA_KERNEL_NODE_PARAMS p = tf_kernel_params(f, gx, gy, gz, bx, shmem, params);
	return (int)cuGraphAddKernelNode(out, g, dep, dep == NULL ? 0 : 1, &p);
}

// tf_graph_zero adds a node zeroing bytes at ptr after dep (words of 4
// bytes where bytes is a multiple of 4), in the current context.
static int tf_graph_zero(CUgraph g, CUgraphNode *dep, CUgraphNode *out, CUdeviceptr ptr, size_t bytes) {
	CUcontext ctx;
	CUresult rc = cuCtxGetCurrent(&ctx);
	if (rc != CUDA_SUCCESS) {
		return (int)rc;
	}
	CUDA_MEMSET_NODE_PARAMS p;
	p.dst = ptr;
	p.pitch = 0;
	p.value = 0;
	p.elementSize = bytes % 4 == 0 ? 4 : 1;
	p.width = bytes / p.elementSize;
	p.height = 1;
	return (int)cuGraphAddMemsetNode(out, g, dep, dep == NULL ? 0 : 1, &p, ctx);
}

// tf_graph_set_kernel gives the kernel node n of the instantiated graph e
// new arguments (the same function, grid and shared memory as before);
// the driver copies their values.
static int tf_graph_set_kernel(CUgraphExec e, CUgraphNode n, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned shmem, void **params) {
	CUDA_KERNEL_NODE_PARAMS p = tf_kernel_params(f, gx, gy, gz, bx, shmem, params);
	return (int)cuGraphExecKernelNodeSetParams(e, n, &p);
}

static int tf_graph_instantiate(CUgraphExec *e, CUgraph g) {
	return (int)cuGraphInstantiateWithFlags(e, g, 0);
}

// tf_graph_launch replays e on the legacy default stream.
static int tf_graph_launch(CUgraphExec e) {
	return (int)cuGraphLaunch(e, (CUstream)0);
}

static int tf_graph_free(CUgraphExec e, CUgraph g) {
	CUresult a = CUDA_SUCCESS, b = CUDA_SUCCESS;
	if (e != NULL) {
		a = cuGraphExecDestroy(e);
	}
	if (g != NULL) {
		b = cuGraphDestroy(g);
	}
	return (int)(a != CUDA_SUCCESS ? a : b);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile"
)

// Packed is one kernel's launch with its arguments packed once, in C
// memory, as cuLaunchKernel takes them: a launch through it
// (Thread.LaunchPacked) encodes and allocates nothing, where Launch packs
// every argument anew (two Go and two C allocations a launch). Set
// changes an argument between launches (a solver's scalars). Free it with
// Free; it holds no device resources.
type Packed struct {
	Name    string
	k       *tile.Kernel
	fn      C.CUfunction
	grid    tile.Grid // each dimension at least 1; grid[0] 0: launches nothing
	threads int
	shmem   int
	argv    unsafe.Pointer // an 8-byte slot per argument, then the tensor maps (64-byte aligned)
	argp    unsafe.Pointer // a pointer per argument, to its slot, then to each tensor map
	tmaps   []codegen.TensorMap
	bufs    []*Buffer // the pointer arguments' buffers, for the tensor maps
	// stale: tensor maps whose argument changed since they were encoded
	// (encoded on the device's thread, before a launch or a graph's node
	// takes them: cuTensorMapEncodeTiled wants the context current)
	stale []bool
}

// encodeMaps encodes the tensor maps whose arguments changed; on the
// device's thread.
func (p *Packed) encodeMaps() error {
	for j, tm := range p.tmaps {
		if !p.stale[j] {
			continue
		}
		if err := encodeTensorMap(p.tmap(j), tm, p.bufs[tm.Param]); err != nil {
			return fmt.Errorf("cuda: @%s: argument %d (%s): %w", p.Name, tm.Param, p.k.Params[tm.Param].Name, err)
		}
		p.stale[j] = false
	}
	return nil
}

// tmap is the address of tensor map j in argv.
func (p *Packed) tmap(j int) unsafe.Pointer {
	slots := 8 * max(1, len(p.k.Params))
	pad := (64 - int((uintptr(p.argv)+uintptr(slots))%64)) % 64
	return unsafe.Add(p.argv, slots+pad+tensorMapBytes*j)
}

// Pack packs a launch of f, generated from k, over grid with args (as
// Launch takes them).
func (d *Device) Pack(f *Function, k *tile.Kernel, grid tile.Grid, args ...any) (*Packed, error) {
	if len(args) != len(k.Params) {
		return nil, fmt.Errorf("cuda: @%s: %d arguments for %d parameters", k.Name, len(args), len(k.Params))
	}
	if err := f.clusterGrid(grid); err != nil {
		return nil, fmt.Errorf("cuda: @%s: %w", k.Name, err)
	}
	g := grid
	for i := 1; i < 3; i++ {
		if g[i] == 0 {
			g[i] = 1
		}
	}
	p := &Packed{Name: k.Name, k: k, fn: *(*C.CUfunction)(unsafe.Pointer(&f.fn)), grid: g, threads: f.Threads, shmem: f.DynShared,
		tmaps: f.tmaps, bufs: make([]*Buffer, len(args)), stale: make([]bool, len(f.tmaps))}
	n := max(1, len(args))
	p.argv = C.calloc(C.size_t(8*n+64+tensorMapBytes*len(f.tmaps)), 1)
	p.argp = C.calloc(C.size_t(n+len(f.tmaps)), C.size_t(unsafe.Sizeof(uintptr(0))))
	if p.argv == nil || p.argp == nil {
		p.Free()
		return nil, fmt.Errorf("cuda: @%s: packing %d arguments: out of host memory", k.Name, len(args))
	}
	ptrs := unsafe.Slice((*unsafe.Pointer)(p.argp), n+len(f.tmaps))
	for i := range n {
		ptrs[i] = unsafe.Add(p.argv, 8*i)
	}
	for j := range f.tmaps {
		ptrs[len(args)+j] = p.tmap(j)
	}
	for i, a := range args {
		if err := p.Set(i, a); err != nil {
			p.Free()
			return nil, err
		}
	}
	return p, nil
}

// Set replaces argument i (a *Buffer for a pointer, a Go number for a
// scalar); launches after it take the new value.
func (p *Packed) Set(i int, arg any) error {
	if p.argv == nil {
		return fmt.Errorf("cuda: @%s: Set on a freed launch", p.Name)
	}
	if i < 0 || i >= len(p.k.Params) {
		return fmt.Errorf("cuda: @%s: argument %d of %d", p.Name, i, len(p.k.Params))
	}
	v, err := paramBits(p.k.Params[i].Type, arg)
	if err != nil {
		return fmt.Errorf("cuda: @%s: argument %d (%s): %w", p.Name, i, p.k.Params[i].Name, err)
	}
	*(*uint64)(unsafe.Add(p.argv, 8*i)) = v
	if b, ok := arg.(*Buffer); ok {
		p.bufs[i] = b
	}
	for j, tm := range p.tmaps {
		if tm.Param == i {
			if err := checkTensorMap(tm, p.bufs[i]); err != nil {
				return fmt.Errorf("cuda: @%s: argument %d (%s): %w", p.Name, i, p.k.Params[i].Name, err)
			}
			p.stale[j] = true
		}
	}
	return nil
}

// Free releases the packed arguments (once; a freed Packed cannot launch).
func (p *Packed) Free() {
	if p.argv != nil {
		C.free(p.argv)
	}
	if p.argp != nil {
		C.free(p.argp)
	}
	p.argv, p.argp = nil, nil
}

// LaunchPacked enqueues p's launch on the default stream.
func (t *Thread) LaunchPacked(p *Packed) error {
	if err := t.check(); err != nil {
		return err
	}
	if p.argp == nil {
		return fmt.Errorf("cuda: @%s: launch of a freed Packed", p.Name)
	}
	if p.grid[0] == 0 {
		return nil
	}
	if err := p.encodeMaps(); err != nil {
		return err
	}
	g := p.grid
	if rc := C.tf_launch(p.fn, C.uint(g[0]), C.uint(g[1]), C.uint(g[2]), C.uint(p.threads), C.uint(p.shmem), (*unsafe.Pointer)(p.argp)); rc != 0 {
		return fmt.Errorf("cuda: @%s: launch grid %v: CUresult %d", p.Name, g, int(rc))
	}
	return nil
}

// GraphStep is one node of a Graph: a packed launch, or (Launch nil) the
// zeroing of Zero's bytes.
type GraphStep struct {
	Launch *Packed
	Zero   *Buffer
}

// Graph is a sequence of launches and zeroings made once into a CUDA graph
// (cuGraphAddKernelNode, cuGraphAddMemsetNode, each node after the one
// before, then cuGraphInstantiateWithFlags) and replayed whole by one
// cuGraphLaunch (Thread.LaunchGraph) on the default stream, ordered with
// the copies and launches around it as a launch is. The nodes hold the
// arguments' values when the graph was made: a graph is made again when
// they change. Free it with Device.FreeGraph.
type Graph struct {
	g     C.CUgraph
	e     C.CUgraphExec
	Nodes int // kernel and memset nodes
	// the kernel node of each step that has one (SetLaunch), by the
	// step's index in NewGraph's steps
	kernels map[int]C.CUgraphNode
}

// NewGraph makes a graph of steps, in their order.
func (t *Thread) NewGraph(steps []GraphStep) (_ *Graph, err error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	gr := &Graph{}
	if rc := C.tf_graph_create(&gr.g); rc != 0 {
		return nil, fmt.Errorf("cuda: cuGraphCreate: CUresult %d", int(rc))
	}
	defer func() {
		if err != nil {
			C.tf_graph_free(gr.e, gr.g)
		}
	}()
	var prev, node C.CUgraphNode
	dep := (*C.CUgraphNode)(nil)
	for i, s := range steps {
		switch {
		case s.Launch != nil:
			p := s.Launch
			if p.argp == nil {
				return nil, fmt.Errorf("cuda: graph node %d: @%s: a freed Packed", i, p.Name)
			}
			if p.grid[0] == 0 {
				continue
			}
			if err := p.encodeMaps(); err != nil {
				return nil, fmt.Errorf("cuda: graph node %d: %w", i, err)
			}
			g := p.grid
			if rc := C.tf_graph_kernel(gr.g, dep, &node, p.fn, C.uint(g[0]), C.uint(g[1]), C.uint(g[2]), C.uint(p.threads), C.uint(p.shmem), (*unsafe.Pointer)(p.argp)); rc != 0 {
				return nil, fmt.Errorf("cuda: graph node %d: @%s: cuGraphAddKernelNode: CUresult %d", i, p.Name, int(rc))
			}
			if gr.kernels == nil {
				gr.kernels = map[int]C.CUgraphNode{}
			}
			gr.kernels[i] = node
		case s.Zero != nil:
			if s.Zero.Bytes == 0 {
				continue
			}
			if rc := C.tf_graph_zero(gr.g, dep, &node, C.CUdeviceptr(s.Zero.Ptr), C.size_t(s.Zero.Bytes)); rc != 0 {
				return nil, fmt.Errorf("cuda: graph node %d: zeroing %d bytes: cuGraphAddMemsetNode: CUresult %d", i, s.Zero.Bytes, int(rc))
			}
		default:
			return nil, fmt.Errorf("cuda: graph node %d: neither a launch nor a zeroing", i)
		}
		prev = node
		dep = &prev
		gr.Nodes++
	}
	if gr.Nodes == 0 {
		return gr, nil // nothing to replay (LaunchGraph does nothing)
	}
	if rc := C.tf_graph_instantiate(&gr.e, gr.g); rc != 0 {
		return nil, fmt.Errorf("cuda: cuGraphInstantiateWithFlags (%d nodes): CUresult %d", gr.Nodes, int(rc))
	}
	return gr, nil
}

// LaunchGraph enqueues one replay of g on the default stream.
func (t *Thread) LaunchGraph(g *Graph) error {
	if err := t.check(); err != nil {
		return err
	}
	if g.g == nil {
		return fmt.Errorf("cuda: launch of a freed graph")
	}
	if g.Nodes == 0 {
		return nil
	}
	if rc := C.tf_graph_launch(g.e); rc != 0 {
		return fmt.Errorf("cuda: cuGraphLaunch (%d nodes): CUresult %d", g.Nodes, int(rc))
	}
	return nil
}

// SetLaunch gives the launch of step (an index into the steps g was made
// of) p's arguments as they are now, for g's later replays: p must be the
// step's own launch or one of the same function, grid and shared memory
// (a buffer re-pointed with Packed.Set). Enqueued work is not affected.
func (t *Thread) SetLaunch(g *Graph, step int, p *Packed) error {
	if err := t.check(); err != nil {
		return err
	}
	if g.e == nil {
		return fmt.Errorf("cuda: SetLaunch on a freed or empty graph")
	}
	if p.argp != nil && p.grid[0] == 0 {
		return nil // launches nothing: no node
	}
	n, ok := g.kernels[step]
	if !ok {
		return fmt.Errorf("cuda: SetLaunch: step %d of the graph is no launch", step)
	}
	if p.argp == nil {
		return fmt.Errorf("cuda: SetLaunch: @%s: a freed Packed", p.Name)
	}
	if err := p.encodeMaps(); err != nil {
		return fmt.Errorf("cuda: SetLaunch: %w", err)
	}
	gd := p.grid
	if rc := C.tf_graph_set_kernel(g.e, n, p.fn, C.uint(gd[0]), C.uint(gd[1]), C.uint(gd[2]), C.uint(p.threads), C.uint(p.shmem), (*unsafe.Pointer)(p.argp)); rc != 0 {
		return fmt.Errorf("cuda: SetLaunch: @%s: cuGraphExecKernelNodeSetParams: CUresult %d", p.Name, int(rc))
	}
	return nil
}

// FreeGraph destroys g (once).
func (d *Device) FreeGraph(g *Graph) error {
	if g == nil || g.g == nil {
		return nil
	}
	return d.Do(func() error {
		rc := C.tf_graph_free(g.e, g.g)
		g.e, g.g = nil, nil
		if rc != 0 {
			return fmt.Errorf("cuda: destroying a graph: CUresult %d", int(rc))
		}
		return nil
	})
}
