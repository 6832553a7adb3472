//go:build tilefuse_cuda

package cuda

import (
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/diskcache"
)

// Device is one GPU with its context, bound to a dedicated OS thread.
type Device struct {
	Name    string
	Arch    int // compute capability, e.g. 90
	SMs     int
	MemSize int64
	// Driver is the driver's CUDA version (cuDriverGetVersion: 12080 for
	// 12.8), part of the keys of compiled modules on disk.
	Driver int
	// per program (block): the most threads, the shared memory in bytes
	// without opting in (48 KiB), and the most a kernel may opt into
	// (Load opts in for kernels that need more than 48 KiB)
	MaxThreads, SharedMemory, SharedMemoryOptin int
	// per SM: its shared memory at most (the L1 it shares with is the
	// rest), and the shared memory the driver reserves in each CTA
	SharedMemorySM, SharedMemoryReserved int
	// L2 is the device's L2 cache in bytes (60 MiB on an H200: CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
	L2 int
	// TILEFUSE_CARVEOUT as read at Open (carveout.go)
	carveAuto bool
	carvePct  int

	work *worker // the hand-over to the thread below (worker.go)
	done chan struct{}

	ctx cu.CUContext

	mu      sync.Mutex
	modules map[[32]byte]*Function     // by the SHA-256 of the anonymous PTX
	ahead   map[[32]byte]linked        // cubins LinkAhead made, not yet loaded
	ptx     map[string]*codegen.Kernel // codegen's output by the kernel's anonymous IR, warps and specialisation
	// what LoadCached found: modules loaded from the disk cache, modules
	// linked from PTX (and written there), entries the driver refused
	DiskHits, Linked, DiskRefused int
	// freed device memory and page-locked staging memory, for the next
	// allocation of the same size (pool.go)
	freeMem    *freeList[cu.DevicePtr]
	freePinned *freeList[unsafe.Pointer]
}

// Free lists hold at most poolBytes of device memory (an eighth of it
// where the device has less than 8 times that) and pinnedPoolBytes of
// page-locked memory: enough for the buffers of the bench's largest
// graphs, so that a second machine for a graph allocates nothing.
const (
	poolBytes       = 16 << 30
	pinnedPoolBytes = 64 << 20
)

// Open creates a context on GPU ordinal and the thread that owns it.
func Open(ordinal int) (*Device, error) {
	d := &Device{work: newWorker(spinWorkers()), done: make(chan struct{}), modules: map[[32]byte]*Function{}, ptx: map[string]*codegen.Kernel{}, ahead: map[[32]byte]linked{}}
	var err error
	if d.carveAuto, d.carvePct, err = carveoutSetting(os.Getenv("TILEFUSE_CARVEOUT")); err != nil {
		return nil, err
	}
	ready := make(chan error)
	go func() {
		runtime.LockOSThread()
		dev, err := cu.GetDevice(ordinal)
		if err != nil {
			ready <- fmt.Errorf("cuda: device %d: %w", ordinal, err)
			return
		}
		ctx, err := dev.MakeContext(cu.SchedAuto)
		if err != nil {
			ready <- fmt.Errorf("cuda: context on device %d: %w", ordinal, err)
			return
		}
		if err := cu.SetCurrentContext(ctx); err != nil {
			ready <- fmt.Errorf("cuda: set context: %w", err)
			return
		}
		d.ctx = ctx
		d.Name, _ = dev.Name()
		maj, _ := dev.Attribute(cu.ComputeCapabilityMajor)
		mnr, _ := dev.Attribute(cu.ComputeCapabilityMinor)
		d.Arch = 10*maj + mnr
		d.SMs, _ = dev.Attribute(cu.MultiprocessorCount)
		d.MaxThreads, _ = dev.Attribute(cu.MaxThreadsPerBlock)
		d.SharedMemory, _ = dev.Attribute(cu.MaxSharedMemoryPerBlock)
		d.SharedMemoryOptin = max(d.SharedMemory, sharedMemoryOptin(dev))
		d.SharedMemorySM, _ = dev.Attribute(cu.MaxSharedMemoryPerMultiprocessor)
		d.SharedMemoryReserved = sharedMemoryReserved(dev)
		d.L2, _ = dev.Attribute(cu.L2CacheSize)
		d.MemSize, _ = dev.TotalMem()
		d.freeMem = newFreeList[cu.DevicePtr](min(poolBytes, d.MemSize/8))
		d.freePinned = newFreeList[unsafe.Pointer](pinnedPoolBytes)
		d.Driver = cu.Version()
		ready <- nil
		d.work.loop()
		ctx.Destroy()
		close(d.done)
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

// Do runs f on the device's thread, where driver calls are valid.
func (d *Device) Do(f func() error) error {
	return d.work.do(f)
}

// Close releases the context.
func (d *Device) Close() error {
	d.work.stop()
	<-d.done
	return nil
}

// Target is the PTX target for this device: sm_90 for Hopper, else sm_80.
func (d *Device) Target() int {
	if d.Arch >= 90 {
		return 90
	}
	return 80
}

// Function is a loaded kernel with its resource use, as Triton reports n_regs
// and shared.
type Function struct {
	Name         string
	Threads      int
	DynShared    int // dynamic shared memory per launch, bytes
	Regs         int // registers per thread
	StaticShared int // static shared memory, bytes
	Carveout     int // the preferred shared-memory carveout it was given, percent (-1: none)
	Local        int // local memory per thread, bytes: spills and stack
	// tmaps: the tensor maps the kernel takes after its own parameters,
	// encoded at each launch for their arguments (codegen.TensorMap)
	tmaps []codegen.TensorMap
	// cluster: the CTAs of the kernel's thread-block clusters
	// (codegen.Kernel.Cluster, compiled into the module), zero for none
	cluster [3]int
	fn      cu.Function
	mod     cu.Module
}

func (f *Function) String() string {
	return fmt.Sprintf("%s: %d threads, %d regs, %d B shared (%d static + %d dynamic, carveout %d%%), %d B local (spills)",
		f.Name, f.Threads, f.Regs, f.StaticShared+f.DynShared, f.StaticShared, f.DynShared, f.Carveout, f.Local)
}

// preferL1 gives f the shared-memory carveout TILEFUSE_CARVEOUT asks for
// (carveout.go; by default none): a fixed one, or with auto the least
// that keeps its CTAs an SM, taken back if the occupancy the driver
// reports drops under it. It runs on the device's thread.
func (d *Device) preferL1(f *Function) error {
	f.Carveout = -1
	pct := d.carvePct
	if d.carveAuto {
		blocks, err := f.fn.MaxActiveBlocksPerMultiProcessor(f.Threads, int64(f.DynShared))
		if err != nil {
			return nil // no occupancy, no hint
		}
		pct = carveoutFor(blocks, f.StaticShared+f.DynShared, d.SharedMemoryReserved, d.SharedMemorySM)
		if pct < 0 {
			return nil
		}
		if err := setCarveout(f.fn, pct); err != nil {
			return err
		}
		if after, err := f.fn.MaxActiveBlocksPerMultiProcessor(f.Threads, int64(f.DynShared)); err != nil || after < blocks {
			return setCarveout(f.fn, -1)
		}
		f.Carveout = pct
		return nil
	}
	if pct < 0 {
		return nil
	}
	f.Carveout = pct
	return setCarveout(f.fn, pct)
}

// Load JIT-compiles a generated kernel (cached by the hash of its PTX
// without the kernel's name, so that kernels of identical layers load
// once).
func (d *Device) Load(k *codegen.Kernel) (*Function, error) { return d.LoadCached(k, nil) }

// LoadCached is Load with compiled modules kept on disk in c (nil: none):
// a module is the cubin the driver's linker makes from the PTX
// (cuLinkCreate, cuLinkAddData, cuLinkComplete), stored under a key of
// the anonymous PTX's hash, the device's name and compute capability,
// the driver's version and tilefuse's (diskcache.Version), and loaded
// from there by a later process in a fraction of the JIT's time. An entry
// the driver refuses is removed and the module linked again.
func (d *Device) LoadCached(k *codegen.Kernel, c *diskcache.Cache) (*Function, error) {
	key := k.Hash()
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.modules[key]; ok {
		return f, nil
	}
	f := &Function{Name: k.Name, Threads: k.Threads(), DynShared: k.SharedBytes, tmaps: k.TensorMaps, cluster: k.Cluster}
	diskKey := d.diskKey(key)
	err := d.Do(func() error {
		var mod cu.Module
		entry, loaded := k.Name, false
		if l, ok := d.ahead[key]; ok { // linked by LinkAhead
			delete(d.ahead, key)
			m, err := cu.LoadData(l.cubin)
			if err != nil {
				return fmt.Errorf("cuda: @%s: loading the linked module: %w", k.Name, err)
			}
			mod, entry, loaded = m, l.name, true
		}
		if b, ok := c.Get("cubin", diskKey); !loaded && ok {
			if name, cubin, ok := strings.Cut(string(b), "\n"); ok {
				if m, err := cu.LoadData(cubin); err == nil {
					mod, entry, loaded = m, name, true
					d.DiskHits++
				}
			}
			if !loaded {
				d.DiskRefused++
				c.Remove("cubin", diskKey)
			}
		}
		if !loaded {
			cubin, err := link(k)
			if err != nil {
				return err
			}
			if mod, err = cu.LoadData(cubin); err != nil {
				return fmt.Errorf("cuda: @%s: loading the linked module: %w", k.Name, err)
			}
			d.Linked++
			c.Put("cubin", diskKey, []byte(k.Name+"\n"+cubin)) // a cache that cannot be written is no cache
		}
		fn, err := mod.Function(entry)
		if err != nil {
			return fmt.Errorf("cuda: @%s: function %s: %w", k.Name, entry, err)
		}
		if k.SharedBytes > 48<<10 {
			if err := setMaxDynamicShared(fn, k.SharedBytes); err != nil {
				return fmt.Errorf("cuda: @%s: %w", k.Name, err)
			}
		}
		f.fn, f.mod = fn, mod
		f.StaticShared, _ = fn.Attribute(cu.SharedSizeBytes)
		if err := d.preferL1(f); err != nil {
			return fmt.Errorf("cuda: @%s: %w", k.Name, err)
		}
		f.Regs, _ = fn.Attribute(cu.NumRegs)
		f.Local, _ = fn.Attribute(cu.LocalSizeBytes)
		// registers are allocated a warp at a time in units of 256 (8 a
		// thread: sm_90's register allocation unit), so a kernel of 167
		// registers a thread holds 168
		if need := k.RegisterPool(); (f.Regs+7)&^7*f.Threads < need {
			// the consumers' setmaxnreg.inc would wait for ever for
			// registers the CTA was never given
			return fmt.Errorf("cuda: @%s: %d registers a thread allocated for %d threads, but its setmaxnreg split %v needs %d in all", k.Name, f.Regs, f.Threads, k.RegSplit, need)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	d.modules[key] = f
	return f, nil
}

// linked is a cubin and the name of the kernel it was linked from.
type linked struct{ name, cubin string }

// diskKey is the key of k's module in the cache on disk.
func (d *Device) diskKey(key [32]byte) string {
	return diskcache.Key(hex.EncodeToString(key[:]), d.Name, strconv.Itoa(d.Arch), strconv.Itoa(d.Driver), diskcache.Version())
}

// LinkAhead links the modules of ks that are neither loaded nor in the
// cache on disk c, in parallel: the driver's linker on up to workers OS
// threads (0: one per CPU, at most 16), each with the device's context
// current, the cubins written to c. A later Load of each takes its cubin
// (about 0.2 ms) instead of linking on the device's thread one kernel
// after another (40-170 ms each). A kernel that fails to link is left
// for its Load, which reports the error.
func (d *Device) LinkAhead(ks []*codegen.Kernel, c *diskcache.Cache, workers int) {
	type job struct {
		k   *codegen.Kernel
		key [32]byte
	}
	var jobs []job
	seen := map[[32]byte]bool{}
	d.mu.Lock()
	for _, k := range ks {
		key := k.Hash()
		_, loaded := d.modules[key]
		_, ahead := d.ahead[key]
		if loaded || ahead || seen[key] {
			continue
		}
		seen[key] = true
		jobs = append(jobs, job{k, key})
	}
	d.mu.Unlock()
	var todo []job
	for _, j := range jobs {
		if _, ok := c.Get("cubin", d.diskKey(j.key)); !ok {
			todo = append(todo, j)
		}
	}
	if workers <= 0 {
		workers = min(runtime.NumCPU(), 16)
	}
	workers = min(workers, len(todo))
	ch := make(chan job)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := cu.SetCurrentContext(d.ctx); err != nil {
				for range ch { // leave them to Load
				}
				return
			}
			defer cu.SetCurrentContext(cu.CUContext{})
			for j := range ch {
				cubin, err := link(j.k)
				if err != nil {
					continue
				}
				c.Put("cubin", d.diskKey(j.key), []byte(j.k.Name+"\n"+cubin))
				d.mu.Lock()
				d.ahead[j.key] = linked{j.k.Name, cubin}
				d.Linked++
				d.mu.Unlock()
			}
		}()
	}
	for _, j := range todo {
		ch <- j
	}
	close(ch)
	wg.Wait()
}

// link compiles k's PTX to a cubin with the driver's linker (on a thread
// where the device's context is current); errors come with the JIT's log.
func link(k *codegen.Kernel) (string, error) {
	errLog := &cu.JITErrorLogBuffer{Buffer: make([]byte, 1<<14)}
	l, err := cu.NewLink(errLog)
	if err != nil {
		return "", fmt.Errorf("cuda: @%s: cuLinkCreate: %w", k.Name, err)
	}
	defer l.Destroy()
	if err := l.AddData(cu.JITInputPTX, k.PTX+"\x00", k.Name+".ptx"); err != nil {
		return "", fmt.Errorf("cuda: @%s: compiling PTX: %w\n%s", k.Name, err, cstr(errLog.Buffer))
	}
	cubin, err := l.Complete()
	if err != nil {
		return "", fmt.Errorf("cuda: @%s: cuLinkComplete: %w\n%s", k.Name, err, cstr(errLog.Buffer))
	}
	return cubin, nil
}

func cstr(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}

// Buffer is device memory.
type Buffer struct {
	Ptr   cu.DevicePtr
	Bytes int64
}

// Alloc allocates n bytes of device memory.
func (d *Device) Alloc(n int64) (*Buffer, error) {
	b := &Buffer{Bytes: n}
	if p, ok := d.freeMem.take(max(n, 1)); ok {
		b.Ptr = p
		return b, nil
	}
	err := d.Do(func() error {
		p, err := cu.MemAlloc(max(n, 1))
		if err != nil && d.freeMem.bytes() > 0 { // out of memory, maybe: give back what the free list holds
			for _, q := range d.freeMem.drain() {
				cu.MemFree(q)
			}
			p, err = cu.MemAlloc(max(n, 1))
		}
		b.Ptr = p
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: alloc %d bytes: %w", n, err)
	}
	return b, nil
}

// AllocMany allocates a buffer of each size: from the free list where it
// holds one, the rest in one hand-over to the device's thread (not one per
// buffer, as Alloc). On an error nothing stays allocated.
func (d *Device) AllocMany(sizes []int64) ([]*Buffer, error) {
	bs := make([]*Buffer, len(sizes))
	var rest []int
	for i, n := range sizes {
		bs[i] = &Buffer{Bytes: n}
		if p, ok := d.freeMem.take(max(n, 1)); ok {
			bs[i].Ptr = p
		} else {
			rest = append(rest, i)
		}
	}
	var failed int64
	err := d.Do(func() error {
		for k, i := range rest {
			n := max(sizes[i], 1)
			p, err := cu.MemAlloc(n)
			if err != nil && d.freeMem.bytes() > 0 { // out of memory, maybe: give back what the free list holds
				for _, q := range d.freeMem.drain() {
					cu.MemFree(q)
				}
				p, err = cu.MemAlloc(n)
			}
			if err != nil {
				failed = sizes[i]
				for _, j := range rest[:k] {
					cu.MemFree(bs[j].Ptr)
					bs[j].Ptr = 0
				}
				return err
			}
			bs[i].Ptr = p
		}
		return nil
	})
	if err != nil {
		for i, b := range bs {
			if b.Ptr != 0 && !slices.Contains(rest, i) { // taken from the free list: back into it
				d.Free(b)
			}
		}
		return nil, fmt.Errorf("cuda: alloc %d bytes: %w", failed, err)
	}
	return bs, nil
}

// Slice is n bytes of b from byte off, sharing its memory (not to be freed).
func (b *Buffer) Slice(off, n int64) (*Buffer, error) {
	if off < 0 || n < 0 || off+n > b.Bytes {
		return nil, fmt.Errorf("cuda: bytes [%d, %d) of a buffer of %d", off, off+n, b.Bytes)
	}
	return &Buffer{Ptr: b.Ptr + cu.DevicePtr(off), Bytes: n}, nil
}

// Free releases b: into the device's free list, for the next Alloc of
// its size (the device's work is on one stream: what was queued before
// that Alloc has used it by the time what is queued after it writes it),
// or to the driver where the list is full.
func (d *Device) Free(b *Buffer) error {
	kept, err := d.freeMem.put(max(b.Bytes, 1), b.Ptr)
	if kept || err != nil {
		return err
	}
	return d.Do(func() error { return cu.MemFree(b.Ptr) })
}

// Trim gives the device memory the free list holds back to the driver.
// The page-locked staging memory stays in its list (host memory, at most
// pinnedPoolBytes): the next machine's Stager takes it instead of pinning
// memory again (cuMemHostAlloc of a stager's up to 4 MiB cost a second
// machine for a graph, made after the first was closed, more than the
// rest of its buffers). TrimPinned gives that back too.
func (d *Device) Trim() error {
	return d.Do(func() error {
		var first error
		for _, p := range d.freeMem.drain() {
			if err := cu.MemFree(p); first == nil {
				first = err
			}
		}
		return first
	})
}

// TrimPinned gives the page-locked memory the free list holds back to
// the driver.
func (d *Device) TrimPinned() error {
	return d.Do(func() error {
		var first error
		for _, p := range d.freePinned.drain() {
			if err := cu.MemFreeHost(p); first == nil {
				first = err
			}
		}
		return first
	})
}

// hostBytes views a []float32, []float64 or []int32 as bytes.
func hostBytes(x any) (unsafe.Pointer, int64, error) {
	switch s := x.(type) {
	case []float32:
		if len(s) == 0 {
			return nil, 0, nil
		}
		return unsafe.Pointer(&s[0]), int64(4 * len(s)), nil
	case []float64:
		if len(s) == 0 {
			return nil, 0, nil
		}
		return unsafe.Pointer(&s[0]), int64(8 * len(s)), nil
	case []int32:
		if len(s) == 0 {
			return nil, 0, nil
		}
		return unsafe.Pointer(&s[0]), int64(4 * len(s)), nil
	}
	return nil, 0, fmt.Errorf("cuda: %T is not a host buffer", x)
}

// Upload copies a host slice into b.
func (d *Device) Upload(b *Buffer, host any) error {
	return d.Run(func(t *Thread) error { return t.Upload(b, host) })
}

// Download copies b into a host slice.
func (d *Device) Download(host any, b *Buffer) error {
	return d.Run(func(t *Thread) error { return t.Download(host, b) })
}

// Upload copies a host slice into b (as Device.Upload).
func (t *Thread) Upload(b *Buffer, host any) error {
	if err := t.check(); err != nil {
		return err
	}
	p, n, err := fits(host, b, "upload of %d bytes into a buffer of %d")
	if err != nil || n == 0 {
		return err
	}
	return cu.MemcpyHtoD(b.Ptr, p, n)
}

// fits is host's memory and size, checked against b's (msg formats the two).
func fits(host any, b *Buffer, msg string) (unsafe.Pointer, int64, error) {
	p, n, err := hostBytes(host)
	if err == nil && n > b.Bytes {
		err = fmt.Errorf("cuda: "+msg, n, b.Bytes)
	}
	return p, n, err
}

// Sync waits for everything enqueued on the device so far.
func (t *Thread) Sync() error {
	if err := t.check(); err != nil {
		return err
	}
	return cu.Synchronize()
}

// Zero enqueues the zeroing of b (bytes 0: +0.0 in float32 and float64).
func (t *Thread) Zero(b *Buffer) error {
	if err := t.check(); err != nil {
		return err
	}
	return cu.MemsetD8Async(b.Ptr, 0, b.Bytes, cu.Stream{})
}

// Download copies b into a host slice (as Device.Download).
func (t *Thread) Download(host any, b *Buffer) error {
	if err := t.check(); err != nil {
		return err
	}
	p, n, err := fits(host, b, "download of %d bytes from a buffer of %d")
	if err != nil || n == 0 {
		return err
	}
	return cu.MemcpyDtoH(p, b.Ptr, n)
}

// Copy copies n bytes between device buffers.
func (d *Device) Copy(dst, src *Buffer, n int64) error { return d.CopyN(1, dst, src, n) }

// CopyN enqueues reps copies back to back (see LaunchN).
func (d *Device) CopyN(reps int, dst, src *Buffer, n int64) error {
	return d.Do(func() error {
		for i := 0; i < reps; i++ {
			if err := cu.MemcpyDtoDAsync(dst.Ptr, src.Ptr, n, cu.Stream{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// Sync waits for all work on the device.
func (d *Device) Sync() error { return d.Do(cu.Synchronize) }
