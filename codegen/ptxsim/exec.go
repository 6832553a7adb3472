package ptxsim

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
)

// Config describes one launch.
type Config struct {
	Grid  [3]int // CTAs along x, y, z (0 counts as 1)
	Block [3]int // threads per CTA along x, y, z (0 counts as 1)
	// DynamicShared is the size of the dynamic (extern .shared) window.
	DynamicShared int
	// Racecheck reports shared-memory accesses by different warps to the
	// same bytes, at least one a write, with no barrier between them.
	Racecheck bool
	// Initcheck reports reads of shared memory that nothing has written
	// since the CTA started (compute-sanitizer's initcheck, for shared
	// memory: its contents at launch are undefined).
	Initcheck bool
	// Workers is how many CTAs are simulated at once (0: GOMAXPROCS).
	Workers int
	// MaxSteps bounds the warp-instructions one CTA may execute (0: 1<<28),
	// so that a kernel that never ends is an error.
	MaxSteps int64
}

// launch is the state shared by every CTA of a launch.
type launch struct {
	mod        *Module
	e          *Entry
	cfg        Config
	mem        *Memory
	params     []byte
	nthreads   int
	nwarps     int
	sharedSize int
	maxSteps   int64
}

// Launch runs the named kernel over cfg.Grid on mem. Arguments follow the
// kernel's .param list: an address (uint64, from Memory.Alloc) or an
// integer for integer parameters, a float32 or float64 for float ones.
func (m *Module) Launch(kernel string, cfg Config, mem *Memory, args ...any) error {
	e, err := m.Entry(kernel)
	if err != nil {
		return err
	}
	for i := range cfg.Grid {
		if cfg.Grid[i] == 0 {
			cfg.Grid[i] = 1
		}
		if cfg.Block[i] == 0 {
			cfg.Block[i] = 1
		}
		if cfg.Grid[i] < 0 || cfg.Block[i] < 0 {
			return fmt.Errorf("ptxsim: @%s: grid %v, block %v", kernel, cfg.Grid, cfg.Block)
		}
	}
	l := &launch{mod: m, e: e, cfg: cfg, mem: mem, maxSteps: cfg.MaxSteps}
	if l.maxSteps == 0 {
		l.maxSteps = 1 << 28
	}
	l.nthreads = cfg.Block[0] * cfg.Block[1] * cfg.Block[2]
	if l.nthreads > 1024 {
		return fmt.Errorf("ptxsim: @%s: %d threads per CTA (block %v): at most 1024", kernel, l.nthreads, cfg.Block)
	}
	for i, lim := range e.MaxNTID {
		if lim > 0 && cfg.Block[i] > lim || e.ReqNTID[i] > 0 && cfg.Block[i] != e.ReqNTID[i] {
			return fmt.Errorf("ptxsim: @%s: block %v against .maxntid %v .reqntid %v", kernel, cfg.Block, e.MaxNTID, e.ReqNTID)
		}
	}
	l.nwarps = (l.nthreads + 31) / 32
	l.sharedSize = alignUp(e.staticShared, e.dynAlign) + cfg.DynamicShared
	if lim := maxShared(m.Target); l.sharedSize > lim {
		return fmt.Errorf("ptxsim: @%s: %d bytes of shared memory (%d static, %d dynamic): %s has %d per CTA",
			kernel, l.sharedSize, e.staticShared, cfg.DynamicShared, m.Target, lim)
	}
	if l.params, err = e.encodeParams(args); err != nil {
		return fmt.Errorf("ptxsim: @%s: %w", kernel, err)
	}
	ctas := cfg.Grid[0] * cfg.Grid[1] * cfg.Grid[2]
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if workers > ctas {
		workers = ctas
	}
	var next atomic.Int64
	var mu sync.Mutex
	firstBad := ctas // lowest failing CTA
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newCTA(l)
			for {
				i := int(next.Add(1) - 1)
				mu.Lock()
				stop := i >= ctas || i > firstBad
				mu.Unlock()
				if stop {
					return
				}
				if err := c.run(i); err != nil {
					mu.Lock()
					if i < firstBad {
						firstBad, firstErr = i, err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// maxShared is the shared memory one CTA may use on the target (bytes).
func maxShared(target string) int {
	switch target {
	case "sm_80", "sm_87":
		return 163 * 1024
	case "sm_86", "sm_89":
		return 99 * 1024
	case "sm_90", "sm_90a", "sm_100", "sm_100a":
		return 227 * 1024
	}
	return 48 * 1024
}

func (e *Entry) encodeParams(args []any) ([]byte, error) {
	if len(args) != len(e.Params) {
		return nil, fmt.Errorf("%d arguments for %d parameters", len(args), len(e.Params))
	}
	buf := make([]byte, e.paramSize)
	for i, p := range e.Params {
		t, _ := parseType(p.Type)
		var v uint64
		switch a := args[i].(type) {
		case uint64:
			v = a
		case int:
			v = uint64(a)
		case int64:
			v = uint64(a)
		case int32:
			v = uint64(int64(a))
		case uint32:
			v = uint64(a)
		case bool:
			v = boolBit(a)
		case float32:
			switch t {
			case tyF32:
				v = b32(a)
			case tyF64:
				v = b64(float64(a))
			default:
				return nil, fmt.Errorf("parameter %d (%s .%s): float32 argument", i, p.Name, p.Type)
			}
		case float64:
			switch t {
			case tyF32:
				v = b32(float32(a))
			case tyF64:
				v = b64(a)
			default:
				return nil, fmt.Errorf("parameter %d (%s .%s): float64 argument", i, p.Name, p.Type)
			}
		case []byte:
			if len(a) != p.Size {
				return nil, fmt.Errorf("parameter %d (%s): %d bytes for %d", i, p.Name, len(a), p.Size)
			}
			copy(buf[p.Offset:], a)
			continue
		default:
			return nil, fmt.Errorf("parameter %d (%s .%s): argument of type %T", i, p.Name, p.Type, a)
		}
		if t.isFloat() {
			if _, ok := args[i].(float32); !ok {
				if _, ok := args[i].(float64); !ok {
					return nil, fmt.Errorf("parameter %d (%s .%s): integer argument for a float", i, p.Name, p.Type)
				}
			}
		}
		if p.Size > 8 {
			return nil, fmt.Errorf("parameter %d (%s): %d bytes: pass a []byte", i, p.Name, p.Size)
		}
		putLE(buf[p.Offset:], p.Size, v)
	}
	return buf, nil
}

// cta is one CTA in flight (a worker reuses it for CTA after CTA).
type cta struct {
	l      *launch
	id     [3]int
	shared []byte
	warps  []*warp
	bars   [16]barrier
	steps  int64
	epoch  uint64 // racecheck: barrier epoch, unique across the worker's CTAs
	start  uint64 // the epoch the CTA started in (initcheck)
	race   *raceShadow
	async  asyncCTA
	mbars  map[uint64]*mbar
	events uint64 // mbarrier state changes, for telling spinning from waiting
	sync   syncClock
}

type barrier struct {
	arrived int  // threads arrived (bar.sync and bar.arrive)
	waiting bool // some lanes wait on it
	line    int  // a bar.sync that waits, for messages
}

// warp is 32 lanes that run in lockstep: the lanes at the lowest program
// counter run together (lanes that branched away wait until the others
// reach them), so that warp-collective instructions see every lane that
// reaches them at once.
type warp struct {
	c  *cta
	id int
	r  []uint64 // register r of lane l at r*32+l

	uniform bool // every live lane is at pc and wait is 0 or live
	pc      int
	lanePC  [32]int32
	live    uint32 // lanes that have not exited
	wait    uint32 // lanes waiting at a barrier
	barOf   [32]int8
	cur     *inst

	// yield is set by an instruction that waits for another warp (a
	// failing mbarrier.try_wait): the warp stops after it, so that the
	// others run. spinPC and spinEvents tell a wait that cannot end.
	yield      bool
	spinPC     int
	spinEvents uint64

	wg wgState // wgmma results in flight
}

func newCTA(l *launch) *cta {
	c := &cta{l: l, shared: make([]byte, l.sharedSize), mbars: map[uint64]*mbar{}}
	if l.cfg.Racecheck || l.cfg.Initcheck {
		c.race = newRaceShadow(l.sharedSize, l.nwarps)
		c.race.races, c.race.init = l.cfg.Racecheck, l.cfg.Initcheck
	}
	c.async.init(l.sharedSize)
	for w := 0; w < l.nwarps; w++ {
		c.warps = append(c.warps, &warp{c: c, id: w, r: make([]uint64, 32*l.e.nregs)})
	}
	return c
}

func (c *cta) run(linear int) error {
	l := c.l
	g := l.cfg.Grid
	c.id = [3]int{linear % g[0], linear / g[0] % g[1], linear / (g[0] * g[1])}
	c.steps = 0
	c.epoch++
	c.start = c.epoch
	clear(c.shared)
	for i := range c.bars {
		c.bars[i] = barrier{}
	}
	c.async.reset()
	clear(c.mbars)
	c.events = 0
	c.sync.reset(l.nwarps)
	for _, w := range c.warps {
		n := l.nthreads - 32*w.id
		if n > 32 {
			n = 32
		}
		w.live = uint32(1<<n - 1)
		if n == 32 {
			w.live = math.MaxUint32
		}
		w.wait, w.pc, w.uniform, w.yield, w.spinPC = 0, 0, true, false, -1
		w.wgRetire(-1) // a CTA that exited with wgmmas in flight
		w.wg.reset()
		clear(w.r)
	}
	for {
		ran := false
		done := true
		spinning := true // every warp that ran is back at a wait that nothing can end
		for _, w := range c.warps {
			if w.live != 0 {
				done = false
			}
			if w.live&^w.wait == 0 {
				continue
			}
			ran = true
			yielded, err := w.run()
			if err != nil {
				return err
			}
			if !yielded {
				spinning = false
				w.spinPC = -1
				continue
			}
			if w.spinPC != w.lanePCOf(bits.TrailingZeros32(w.live&^w.wait)) || w.spinEvents != c.events {
				spinning = false
			}
			w.spinPC, w.spinEvents = w.lanePCOf(bits.TrailingZeros32(w.live&^w.wait)), c.events
		}
		if done {
			if err := c.async.drain(c); err != nil {
				return err
			}
			return c.drainMbars()
		}
		if !ran && !c.releaseAny() {
			return c.deadlock()
		}
		if ran && spinning {
			return c.spinDeadlock()
		}
	}
}

func (c *cta) liveThreads() int {
	n := 0
	for _, w := range c.warps {
		n += bits.OnesCount32(w.live)
	}
	return n
}

// arrive counts n threads at barrier b (PTX ISA §9.7.13.1 bar/barrier):
// when the expected count is reached (count, or every thread of the CTA
// that has not exited), the waiting lanes go on.
func (c *cta) arrive(b, n, count int) {
	c.bars[b].arrived += n
	c.tryRelease(b, count)
}

func (c *cta) tryRelease(b, count int) bool {
	bar := &c.bars[b]
	need := count
	if need <= 0 {
		need = c.liveThreads()
	}
	if bar.arrived < need {
		return false
	}
	bar.arrived -= need
	if count <= 0 {
		bar.arrived = 0
	}
	bar.waiting = false
	for _, w := range c.warps {
		for m := w.wait; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			if int(w.barOf[l]) == b {
				w.wait &^= 1 << l
			}
		}
		if !w.uniform {
			w.reconverge()
		}
	}
	c.epoch++ // racecheck: accesses on either side of a barrier never race
	return true
}

// releaseAny releases barriers whose waiters are all the threads still
// running (the others exited).
func (c *cta) releaseAny() bool {
	any := false
	for b := range c.bars {
		if c.bars[b].waiting && c.tryRelease(b, 0) {
			any = true
		}
	}
	return any
}

func (c *cta) deadlock() error {
	for _, w := range c.warps {
		for m := w.wait; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			b := int(w.barOf[l])
			in := c.l.e.prog[w.lanePCOf(l)-1]
			w.cur = in
			return w.faultKind(l, "sync", "barrier %d waits for %d threads, %d arrived: the CTA's other threads exited or wait elsewhere (deadlock)",
				b, c.liveThreads(), c.bars[b].arrived)
		}
	}
	return fmt.Errorf("ptxsim: @%s: CTA %v: no warp can run", c.l.e.Name, c.id)
}

func (w *warp) lanePCOf(l int) int {
	if w.uniform {
		return w.pc
	}
	return int(w.lanePC[l])
}

// run executes the warp until it exits, every live lane waits at a
// barrier, or an instruction yields (yielded).
func (w *warp) run() (yielded bool, err error) {
	c := w.c
	prog := c.l.e.prog
	for {
		var pc int
		var m uint32
		if w.uniform {
			m = w.live &^ w.wait
			pc = w.pc
		} else {
			pc, m = w.pick()
		}
		if m == 0 {
			return false, nil
		}
		if pc >= len(prog) {
			// falling off the end of the body returns
			w.exit(m, m, pc)
			continue
		}
		in := prog[pc]
		w.cur = in
		c.steps++
		if c.steps > c.l.maxSteps {
			return false, w.faultKind(bits.TrailingZeros32(m), "exec", "more than %d warp-instructions in one CTA: the kernel does not end (Config.MaxSteps)", c.l.maxSteps)
		}
		exec := m
		if in.guard >= 0 {
			exec = w.guardMask(in, m)
		}
		switch in.kind {
		case iOp:
			if exec != 0 {
				if in.collective && exec != w.live {
					if err := w.collectiveFault(exec); err != nil {
						return false, err
					}
				}
				if in.touch != nil && c.l.e.wgmma {
					if err := w.wgHazard(in, exec); err != nil {
						return false, err
					}
				}
				if err := in.run(w, exec); err != nil {
					return false, err
				}
			}
			if w.uniform {
				w.pc = pc + 1
			} else {
				w.move(m, 0, 0, pc+1)
			}
			if w.yield {
				w.yield = false
				return true, nil
			}
		case iBra:
			if in.uni && exec != 0 && exec != m {
				return false, w.faultKind(bits.TrailingZeros32(m&^exec), "sync", "bra.uni taken by lanes %#08x of %#08x: its predicate is not uniform across the warp", exec, m)
			}
			w.move(m, exec, in.target, pc+1)
		case iExit:
			w.exit(m, exec, pc)
		case iBar:
			if err := w.barrier(in, m, exec, pc); err != nil {
				return false, err
			}
		}
	}
}

func (w *warp) collectiveFault(exec uint32) error {
	missing := w.live &^ exec
	l := bits.TrailingZeros32(missing)
	return w.faultKind(l, "sync", "%s is executed by lanes %#08x, but lanes %#08x of the warp have not exited and do not execute it with them (.sync.aligned needs the whole warp, converged, with a true guard)",
		w.cur.op, exec, missing)
}

// pick finds the lowest program counter among the lanes that can run.
func (w *warp) pick() (int, uint32) {
	ready := w.live &^ w.wait
	if ready == 0 {
		return 0, 0
	}
	best := int32(math.MaxInt32)
	var m uint32
	for r := ready; r != 0; r &= r - 1 {
		l := bits.TrailingZeros32(r)
		switch p := w.lanePC[l]; {
		case p < best:
			best, m = p, 1<<l
		case p == best:
			m |= 1 << l
		}
	}
	return int(best), m
}

// move sends the lanes of taken (⊆ m) to target and the rest of m to fall.
func (w *warp) move(m, taken uint32, target, fall int) {
	if w.uniform {
		switch taken {
		case m:
			w.pc = target
			return
		case 0:
			w.pc = fall
			return
		}
		w.diverge()
	}
	for r := m; r != 0; r &= r - 1 {
		l := bits.TrailingZeros32(r)
		if taken&(1<<l) != 0 {
			w.lanePC[l] = int32(target)
		} else {
			w.lanePC[l] = int32(fall)
		}
	}
	w.reconverge()
}

func (w *warp) diverge() {
	for l := range w.lanePC {
		w.lanePC[l] = int32(w.pc)
	}
	w.uniform = false
}

// reconverge returns to uniform execution once every live lane is at the
// same instruction and none waits apart from the others.
func (w *warp) reconverge() {
	if w.live == 0 {
		w.uniform, w.pc = true, 0
		return
	}
	if w.wait != 0 && w.wait != w.live {
		return
	}
	first := w.lanePC[bits.TrailingZeros32(w.live)]
	for r := w.live; r != 0; r &= r - 1 {
		if w.lanePC[bits.TrailingZeros32(r)] != first {
			return
		}
	}
	w.uniform, w.pc = true, int(first)
}

func (w *warp) exit(m, exec uint32, pc int) {
	w.live &^= exec
	if w.uniform {
		w.pc = pc + 1
		return
	}
	w.move(m&^exec, 0, 0, pc+1)
}

func (w *warp) barrier(in *inst, m, exec uint32, pc int) error {
	if exec == 0 {
		w.move(m, 0, 0, pc+1)
		return nil
	}
	l0 := bits.TrailingZeros32(exec)
	b := int(w.val(&in.barID, l0))
	count := 0
	if in.barCount.kind != oNone {
		count = int(uint32(w.val(&in.barCount, l0)))
	}
	for r := exec; r != 0; r &= r - 1 {
		l := bits.TrailingZeros32(r)
		if int(w.val(&in.barID, l)) != b || in.barCount.kind != oNone && int(uint32(w.val(&in.barCount, l))) != count {
			return w.faultKind(l, "sync", "barrier operands differ across the warp (%d, %d in lane %d)", b, count, l0)
		}
	}
	if b < 0 || b >= len(w.c.bars) {
		return w.faultKind(l0, "sync", "barrier %d: ids are 0..15", b)
	}
	if count != 0 && (count%32 != 0 || count > w.c.l.nwarps*32) {
		return w.faultKind(l0, "sync", "barrier %d thread count %d is not a multiple of 32 up to the CTA's size", b, count)
	}
	// every lane goes on to the next instruction; the arriving ones wait there
	if w.uniform && exec == m {
		w.pc = pc + 1
	} else {
		w.move(m, 0, 0, pc+1)
	}
	if !in.barArrive {
		for r := exec; r != 0; r &= r - 1 {
			w.barOf[bits.TrailingZeros32(r)] = int8(b)
		}
		w.wait |= exec
		w.c.bars[b].waiting = true
		w.c.bars[b].line = in.line
		if !w.uniform || w.wait != 0 && w.wait != w.live {
			if w.uniform {
				w.diverge()
			}
		}
	}
	w.c.arrive(b, bits.OnesCount32(exec), count)
	return nil
}

func (w *warp) guardMask(in *inst, m uint32) uint32 {
	var g uint32
	base := in.guard
	for r := m; r != 0; r &= r - 1 {
		l := bits.TrailingZeros32(r)
		if w.r[base+l]&1 != 0 {
			g |= 1 << l
		}
	}
	if in.guardNeg {
		return m &^ g
	}
	return g
}

// tid is lane l's thread index within the CTA.
func (w *warp) tid(l int) [3]int {
	b := w.c.l.cfg.Block
	t := w.id*32 + l
	return [3]int{t % b[0], t / b[0] % b[1], t / (b[0] * b[1])}
}

func (w *warp) fault(l int, format string, args ...any) error {
	return w.faultKind(l, "exec", format, args...)
}

func (w *warp) faultKind(l int, kind, format string, args ...any) error {
	f := &Fault{Kernel: w.c.l.e.Name, CTA: w.c.id, Thread: w.tid(l), Warp: w.id, Lane: l, Kind: kind, Msg: fmt.Sprintf(format, args...)}
	if w.cur != nil {
		f.Line, f.Instr = w.cur.line, w.cur.text
	}
	return f
}

func (w *warp) faultAddr(l int, kind string, addr uint64, format string, args ...any) error {
	err := w.faultKind(l, kind, format, args...)
	f := err.(*Fault)
	f.Addr, f.HasAddr = addr, true
	return f
}
