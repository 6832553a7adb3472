//go:build tilefuse_cuda

package fusion

import (
	"errors"
	"fmt"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/cuda"
	"github.com/tilefuse/tilefuse/tile"
)

// The fused solvers on the GPU backend: the kernels run on the machine's own
// buffers of the learnables and their gradients, the state lives in device
// buffers of the solver, and the device holds the learnables from the first
// Step (see Solver): a run does not upload them, Sync and Close bring their
// host tensors up to date.

// sync downloads every input the device holds a newer copy of into its
// host tensor (its own memory: the tensor the user's node holds), and the
// gradients fused solvers read on the device into their user's nodes,
// where the host copies are not current.
func (g *gpu) sync() error {
	if g.dev == nil || g.bufs == nil {
		return nil
	}
	dirty := false
	for i := range g.held {
		dirty = dirty || g.held[i].dirty
	}
	if !dirty && len(g.stepGrad) == 0 { // nothing to bring back, but an error of the device's to report
		return g.dev.Run(func(*cuda.Thread) error { return g.takeStepErr() })
	}
	return g.dev.Run(func(t *cuda.Thread) error {
		if err := g.takeStepErr(); err != nil {
			return err
		}
		g.beginFetch() // every copy enqueued, one wait
		for i := range g.held {
			if err := g.syncOne(t, i); err != nil {
				g.endFetch(t, false)
				return err
			}
		}
		for nn, orig := range g.stepGrad {
			if err := g.writeBack(t, binding{orig, nn}); err != nil {
				g.endFetch(t, false)
				return fmt.Errorf("fusion: sync: %w", err)
			}
		}
		if err := g.endFetch(t, true); err != nil {
			return fmt.Errorf("fusion: sync: %w", err)
		}
		return nil
	})
}

// syncOne downloads input i into its host tensor if the device's copy is
// newer and the node still holds that tensor (a tensor let since goes up
// at the next run instead).
func (g *gpu) syncOne(t *cuda.Thread, i int) error {
	h := &g.held[i]
	in := g.c.rw.inputs[i]
	if !h.dirty || in.orig.Value() != h.v {
		return nil
	}
	d, ok := h.v.(*tensor.Dense)
	if !ok || d.IsMaterializable() {
		return fmt.Errorf("fusion: sync: %v holds a %T, not a contiguous tensor", in.orig.Name(), h.v)
	}
	b := g.bufs[in.nn]
	if err := g.copyDown(t, d.Data(), b); err != nil {
		return fmt.Errorf("fusion: sync: %v: %w", in.orig.Name(), err)
	}
	g.last.Downloads++
	g.last.BytesDown += b.Bytes
	v := h.v
	if g.fetching { // took records the copy once the bytes have landed
		g.afterFetch = append(g.afterFetch, func() error { g.took(i, v); return nil })
		return nil
	}
	g.took(i, v)
	return nil
}

// took records that the device's copy of input i equals host value v,
// hashed where the check and a solver's stepping need it.
func (g *gpu) took(i int, v G.Value) {
	bs, _ := valueBytes(v)
	hashed := g.c.cfg.inCheck == CheckContents
	var sum uint64
	if hashed {
		sum = contentHash(bs)
	}
	g.held[i].took(v, bs, sum, hashed)
}

// gpuSolver is a fused solver's learnables and state on the GPU.
type gpuSolver struct {
	g      *gpu
	params []gpuParam
	groups []gpuGroup // one launch each: the learnables of one element type
	closed bool
}

type gpuParam struct {
	in    int     // the learnable's input index
	grad  *G.Node // its gradient's node in the new graph
	dtype tile.DType
	shape tensor.Shape
	args  []any          // w, g, the state
	state []*cuda.Buffer // owned
}

// gpuGroup is one multi-tensor launch (buildSolverMultiKernel) over the
// learnables of one element type: its table of offsets, made once, and
// the launch, args packed; each step sets the scalars.
type gpuGroup struct {
	k      *tile.Kernel
	dtype  tile.DType
	params []int // indices into gpuSolver.params
	tab    *cuda.Buffer
	table  []int32
	pk     *cuda.Packed
}

// bindSolver finds each learnable's input buffer and its gradient's buffer,
// allocates the zeroed state, builds the table of each element type's
// multi-tensor launch, loads the kernels and uploads the learnables'
// current host values, which the device holds from now on.
func (g *gpu) bindSolver(ps []deviceParam) (_ deviceSolver, err error) {
	if g.dev == nil || g.bufs == nil {
		return nil, errors.New("fusion: solver: the machine is closed")
	}
	s := &gpuSolver{g: g}
	defer func() {
		if err != nil {
			s.free()
		}
	}()
	inputs := map[*G.Node]int{}
	for i, in := range g.c.rw.inputs {
		inputs[in.orig] = i
	}
	written := map[*G.Node]*G.Node{}
	for _, b := range g.c.back {
		written[b.orig] = b.nn
	}
	group := map[*tile.Kernel]int{}
	for _, dp := range ps {
		n := dp.node
		i, ok := inputs[n]
		if !ok {
			return nil, fmt.Errorf("fusion: solver: %v is not an input of the machine's graph", n.Name())
		}
		if o := g.owner[i]; o != nil && !o.closed {
			return nil, fmt.Errorf("fusion: solver: %v is stepped by another solver already", n.Name())
		}
		in := g.c.rw.inputs[i]
		wb, ok := g.bufs[in.nn]
		if !ok {
			return nil, fmt.Errorf("fusion: solver: %v has no device buffer", n.Name())
		}
		var gb *cuda.Buffer
		var gn *G.Node
		if d := n.Deriv(); d != nil {
			if nn, ok := written[d]; ok {
				gb, gn = g.bufs[nn], nn
			}
		}
		if gb == nil {
			return nil, fmt.Errorf("fusion: solver: %v has no gradient on the device (call gorgonia.Grad for it before NewTapeMachine)", n.Name())
		}
		v, ok := n.Value().(*tensor.Dense)
		if !ok || v.IsMaterializable() {
			return nil, fmt.Errorf("fusion: solver: %v holds a %T, not a contiguous tensor", n.Name(), n.Value())
		}
		size := v.Shape().TotalSize()
		es := int64(4)
		if v.Dtype() == tensor.Float64 {
			es = 8
		}
		if wb.Bytes < es*int64(size) || gb.Bytes < es*int64(size) {
			return nil, fmt.Errorf("fusion: solver: %v: %d elements, device buffers of %d and %d bytes", n.Name(), size, wb.Bytes, gb.Bytes)
		}
		p := gpuParam{in: i, grad: gn, dtype: tileDType(v.Dtype()), shape: v.Shape().Clone()}
		p.args = []any{wb, gb}
		s.params = append(s.params, p) // (free releases the state from here on)
		pp := &s.params[len(s.params)-1]
		for range dp.states {
			b, err := g.dev.Alloc(es * int64(size))
			if err != nil {
				return nil, fmt.Errorf("fusion: solver: %v: %w", n.Name(), err)
			}
			pp.state = append(pp.state, b)
			pp.args = append(pp.args, b)
		}
		j, ok := group[dp.multi]
		if !ok {
			j = len(s.groups)
			group[dp.multi] = j
			s.groups = append(s.groups, gpuGroup{k: dp.multi, dtype: pp.dtype})
		}
		s.groups[j].params = append(s.groups[j].params, len(s.params)-1)
	}
	// each group's table: the learnables' tensors as offsets from the first
	// one's value, in elements
	for gi := range s.groups {
		gr := &s.groups[gi]
		es := int64(4)
		if gr.dtype == tile.F64 {
			es = 8
		}
		base := s.params[gr.params[0]].args[0].(*cuda.Buffer)
		var offs [][]int64
		var sizes []int
		for _, pi := range gr.params {
			p := s.params[pi]
			var o []int64
			for _, a := range p.args {
				d := int64(a.(*cuda.Buffer).Ptr) - int64(base.Ptr)
				if d%es != 0 {
					return nil, fmt.Errorf("fusion: solver: a device buffer %d bytes from the first learnable's, not a whole number of elements", d)
				}
				o = append(o, d/es)
			}
			offs = append(offs, o)
			sizes = append(sizes, p.shape.TotalSize())
		}
		if gr.table, err = ps[gr.params[0]].cfg.multiTable(offs, sizes); err != nil {
			return nil, err
		}
		rows := len(gr.table) / ps[gr.params[0]].cfg.multiRow()
		if rows == 0 {
			continue // learnables of no elements: nothing to launch
		}
		if gr.tab, err = g.dev.Alloc(int64(4 * len(gr.table))); err != nil {
			return nil, fmt.Errorf("fusion: solver: %w", err)
		}
		args := make([]any, len(gr.k.Params))
		args[0], args[1] = base, gr.tab
		for j := 2; j < len(args); j++ {
			args[j] = 0 // the scalars: set at each step
		}
		_, f, err := g.dev.Compile(gr.k, 4, args)
		if err != nil {
			return nil, fmt.Errorf("fusion: solver: %w", err)
		}
		if gr.pk, err = g.dev.Pack(f, gr.k, tile.Grid{rows}, args...); err != nil {
			return nil, fmt.Errorf("fusion: solver: %w", err)
		}
	}
	err = g.dev.Run(func(t *cuda.Thread) error {
		for _, gr := range s.groups {
			if gr.tab == nil {
				continue
			}
			if err := t.Upload(gr.tab, gr.table); err != nil {
				return err
			}
		}
		for _, p := range s.params {
			for _, b := range p.state {
				if err := t.Zero(b); err != nil {
					return err
				}
			}
			in := g.c.rw.inputs[p.in]
			if err := t.Upload(p.args[0].(*cuda.Buffer), in.orig.Value().Data()); err != nil {
				return err
			}
			g.last.Uploads++
			g.last.BytesUp += p.args[0].(*cuda.Buffer).Bytes
			g.vers.wrote(in.nn)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fusion: solver: %w", err)
	}
	for _, p := range s.params {
		in := g.c.rw.inputs[p.in]
		g.owner[p.in] = s
		g.held[p.in].stepped = true
		g.took(p.in, in.orig.Value())
		g.stepGrad[p.grad] = p.grad2orig(g)
	}
	g.solvers = append(g.solvers, s)
	if err := g.resegment(); err != nil { // the gradients are no longer sent early
		return nil, err
	}
	return s, nil
}

// grad2orig is the user's node of p's gradient.
func (p gpuParam) grad2orig(g *gpu) *G.Node {
	for _, b := range g.c.back {
		if b.nn == p.grad {
			return b.orig
		}
	}
	return nil
}

// step launches every learnable's kernel and marks the learnables' host
// tensors stale. The launches are posted to the device's thread
// (Device.Post) and the step returns without waiting for them to be
// enqueued: a training loop's next work on the host (the loss read, the
// next batch let, the next run's look at its inputs) goes on beside them.
// An error enqueueing them is reported by the machine's next run, step,
// Sync or Close (gpu.takeStepErr); the kernels run on the device in order
// with everything else, as before.
func (s *gpuSolver) step(scalars func(tile.DType) []any) error {
	if s.closed || s.g.bufs == nil {
		return errors.New("fusion: solver step: the machine or the solver is closed")
	}
	g := s.g
	t0 := time.Now()
	defer func() { g.last.Phases.Solver = time.Since(t0).Seconds() }()
	for i, e := range g.solverEv {
		if e == nil {
			var err error
			if g.solverEv[i], err = g.dev.NewEvent(); err != nil {
				return fmt.Errorf("fusion: solver step: %w", err)
			}
		}
	}
	type launch struct {
		pk *cuda.Packed
		sc []any
	}
	var ls []launch
	for _, gr := range s.groups {
		if gr.pk == nil {
			continue
		}
		sc := scalars(gr.dtype)
		if 2+len(sc) != len(gr.k.Params) {
			return fmt.Errorf("fusion: solver step: @%s: %d scalars for %d parameters", gr.k.Name, len(sc), len(gr.k.Params))
		}
		ls = append(ls, launch{gr.pk, sc})
		g.last.Launches++
		for _, pi := range gr.params {
			p := s.params[pi]
			g.held[p.in].dirty = true
			g.vers.wrote(g.c.rw.inputs[p.in].nn)
			g.vers.wrote(p.grad) // zeroed
		}
	}
	g.solverLast = true
	ev := g.solverEv
	g.dev.Post(func(t *cuda.Thread) {
		defer region("tilefuse: solver step").End()
		if err := g.takeStepErr(); err != nil { // an earlier step's, not yet reported
			g.stepErr = err
			return
		}
		err := func() error {
			if err := t.Record(ev[0]); err != nil {
				return err
			}
			for _, l := range ls {
				for j, x := range l.sc {
					if err := l.pk.Set(2+j, x); err != nil {
						return err
					}
				}
				if err := t.LaunchPacked(l.pk); err != nil {
					return err
				}
			}
			return t.Record(ev[1])
		}()
		if err != nil {
			g.stepErr = err
		}
	})
	return nil
}

// state downloads learnable i's state.
func (s *gpuSolver) state(i int) ([]tensor.Tensor, error) {
	if s.closed || i < 0 || i >= len(s.params) {
		return nil, fmt.Errorf("fusion: solver state: learnable %d of %d on the device", i, len(s.params))
	}
	p := s.params[i]
	var out []tensor.Tensor
	err := s.g.dev.Run(func(t *cuda.Thread) error {
		if err := s.g.takeStepErr(); err != nil {
			return err
		}
		for _, b := range p.state {
			var host any = make([]float32, p.shape.TotalSize())
			if p.dtype == tile.F64 {
				host = make([]float64, p.shape.TotalSize())
			}
			if err := t.Download(host, b); err != nil {
				return err
			}
			out = append(out, tensor.New(tensor.WithShape(p.shape.Clone()...), tensor.WithBacking(host)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fusion: solver state: %w", err)
	}
	return out, nil
}

// close brings the learnables' host tensors up to date, hands them back
// to the machine's uploads and frees the state.
func (s *gpuSolver) close() error {
	if s.closed {
		return nil
	}
	var err error
	if s.g.bufs != nil { // the machine is open: its buffers hold the learnables
		err = s.g.dev.Run(func(t *cuda.Thread) error {
			if err := s.g.takeStepErr(); err != nil {
				return err
			}
			for _, p := range s.params {
				if err := s.g.syncOne(t, p.in); err != nil {
					return err
				}
				if orig := s.g.stepGrad[p.grad]; orig != nil {
					if err := s.g.writeBack(t, binding{orig, p.grad}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		for _, p := range s.params {
			if s.g.owner[p.in] == s {
				s.g.owner[p.in] = nil
				s.g.held[p.in].stepped = false
				delete(s.g.stepGrad, p.grad)
			}
		}
		if rerr := s.g.resegment(); err == nil && rerr != nil {
			err = rerr
		}
	}
	s.free()
	return err
}

// free releases the state buffers, the tables and the launches.
func (s *gpuSolver) free() {
	s.closed = true
	for i := range s.params {
		for _, b := range s.params[i].state {
			s.g.dev.Free(b)
		}
		s.params[i].state = nil
	}
	for i := range s.groups {
		gr := &s.groups[i]
		if gr.tab != nil {
			s.g.dev.Free(gr.tab)
			gr.tab = nil
		}
		if gr.pk != nil {
			gr.pk.Free()
			gr.pk = nil
		}
	}
}
