//go:build tilefuse_cuda

package fusion

import (
	"errors"
	"fmt"

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

// resident is a graph input whose value the device holds.
type resident struct {
	in    binding // the user's node and its input node in the new graph
	host  G.Value // the host tensor the device's copy stands for
	dirty bool    // the device's copy is newer than host
	owner *gpuSolver
}

// holds says whether the device holds input in's value, so that a run does
// not upload it: it does unless the user let another tensor into the node,
// which then goes up (and the device's copy is dropped).
func (g *gpu) holds(in binding) bool {
	r := g.resident[in.nn]
	if r == nil {
		return false
	}
	if v := in.orig.Value(); v != r.host {
		r.host, r.dirty = v, false
		return false
	}
	return true
}

// sync downloads every value the device holds a newer copy of into its host
// tensor (its own memory: the tensor the user's node holds).
func (g *gpu) sync() error {
	if g.dev == nil || len(g.resident) == 0 {
		return nil
	}
	return g.dev.Run(func(t *cuda.Thread) error {
		for _, r := range g.resident {
			if err := g.syncOne(t, r); err != nil {
				return err
			}
		}
		return nil
	})
}

func (g *gpu) syncOne(t *cuda.Thread, r *resident) error {
	if !r.dirty || r.in.orig.Value() != r.host {
		return nil
	}
	d, ok := r.host.(*tensor.Dense)
	if !ok || d.IsMaterializable() {
		return fmt.Errorf("fusion: sync: %v holds a %T, not a contiguous tensor", r.in.orig.Name(), r.host)
	}
	if err := t.Download(d.Data(), g.bufs[r.in.nn]); err != nil {
		return fmt.Errorf("fusion: sync: %v: %w", r.in.orig.Name(), err)
	}
	r.dirty = false
	return nil
}

// gpuSolver is a fused solver's learnables and state on the GPU.
type gpuSolver struct {
	g      *gpu
	params []gpuParam
	closed bool
}

type gpuParam struct {
	res   *resident
	k     *tile.Kernel
	f     *cuda.Function
	grid  tile.Grid
	dtype tile.DType
	shape tensor.Shape
	args  []any          // w, g, the state, n: the scalars follow at each step
	state []*cuda.Buffer // owned
}

// bindSolver finds each learnable's input buffer and its gradient's buffer,
// allocates the zeroed state, loads the kernels and uploads the learnables'
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
	inputs := map[*G.Node]binding{}
	for _, in := range g.c.rw.inputs {
		inputs[in.orig] = in
	}
	written := map[*G.Node]*G.Node{}
	for _, b := range g.c.back {
		written[b.orig] = b.nn
	}
	for _, dp := range ps {
		n := dp.node
		in, ok := inputs[n]
		if !ok {
			return nil, fmt.Errorf("fusion: solver: %v is not an input of the machine's graph", n.Name())
		}
		if r := g.resident[in.nn]; r != nil && r.owner != nil && !r.owner.closed {
			return nil, fmt.Errorf("fusion: solver: %v is stepped by another solver already", n.Name())
		}
		wb, ok := g.bufs[in.nn]
		if !ok {
			return nil, fmt.Errorf("fusion: solver: %v has no device buffer", n.Name())
		}
		var gb *cuda.Buffer
		if d := n.Deriv(); d != nil {
			if nn, ok := written[d]; ok {
				gb = g.bufs[nn]
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
		p := gpuParam{k: dp.kernel, grid: tile.Grid{tile.CDiv(size, solverBlock)}, dtype: tileDType(v.Dtype()), shape: v.Shape().Clone()}
		p.args = []any{wb, gb}
		for range dp.states {
			b, err := g.dev.Alloc(es * int64(size))
			if err != nil {
				return nil, fmt.Errorf("fusion: solver: %v: %w", n.Name(), err)
			}
			p.state = append(p.state, b)
			p.args = append(p.args, b)
		}
		p.args = append(p.args, size)
		if _, p.f, err = g.dev.Compile(p.k, 4, p.args); err != nil {
			return nil, fmt.Errorf("fusion: solver: %w", err)
		}
		p.res = &resident{in: in, host: v, owner: s}
		s.params = append(s.params, p)
	}
	err = g.dev.Run(func(t *cuda.Thread) error {
		for _, p := range s.params {
			for _, b := range p.state {
				if err := t.Zero(b); err != nil {
					return err
				}
			}
			if err := t.Upload(p.args[0].(*cuda.Buffer), p.res.host.Data()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fusion: solver: %w", err)
	}
	if g.resident == nil {
		g.resident = map[*G.Node]*resident{}
	}
	for _, p := range s.params {
		g.resident[p.res.in.nn] = p.res
	}
	g.solvers = append(g.solvers, s)
	return s, nil
}

// step launches every learnable's kernel, one Run, and marks the
// learnables' host tensors stale.
func (s *gpuSolver) step(scalars func(tile.DType) []any) error {
	if s.closed || s.g.bufs == nil {
		return errors.New("fusion: solver step: the machine or the solver is closed")
	}
	err := s.g.dev.Run(func(t *cuda.Thread) error {
		for _, p := range s.params {
			args := append(p.args[:len(p.args):len(p.args)], scalars(p.dtype)...)
			if err := t.Launch(p.f, p.k, p.grid, args...); err != nil {
				return err
			}
			p.res.dirty = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fusion: solver step: %w", err)
	}
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
			for _, p := range s.params {
				if err := s.g.syncOne(t, p.res); err != nil {
					return err
				}
			}
			return nil
		})
		for _, p := range s.params {
			if s.g.resident[p.res.in.nn] == p.res {
				delete(s.g.resident, p.res.in.nn)
			}
		}
	}
	s.free()
	return err
}

// free releases the state buffers.
func (s *gpuSolver) free() {
	s.closed = true
	for i := range s.params {
		for _, b := range s.params[i].state {
			s.g.dev.Free(b)
		}
		s.params[i].state = nil
	}
}
