//go:build tilefuse_cuda

package fusion

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/cuda"
)

// A twin is the second device buffer of an input that runs upload one
// after another (a training loop's batch). A run that returns before its
// last kernels end (WithAsyncRuns) leaves the device reading the input's
// buffer — a backward pass's weight gradient reads the batch — while the
// host already queues the next run; that run's copy of the next batch
// goes into the buffer the last run did not read, on a stream of its own
// (gpu.copyS), so that it runs beside the last run's kernels instead of
// after them, and the kernels that read the input are re-pointed to it
// (cuda.Packed.Set; with WithCUDAGraphs also their nodes in the run's
// graphs, cuda.Thread.SetLaunch). The copy waits for the end of the
// kernels of the run before, which read that buffer (free), and this run's
// kernels wait for the copy (copyEv). Only inputs no solver steps (a
// learnable's buffer is in the solver's launches), whose buffer no other
// value shares but its views, and only for machines whose runs return
// early; inputs of up to maxTwin bytes.
type twin struct {
	bufs  [2]*cuda.Buffer
	cur   int            // the buffer the last upload wrote
	free  [2]*cuda.Event // recorded after the kernels of the last run that read bufs[k]
	freed [2]bool        // free[k] recorded
	uses  []twinUse      // the launches' arguments that are the buffer
	nodes []*G.Node      // the nodes whose device value it is: the input and its views
}

// maxTwin bounds the inputs given a twin: a larger one is copied into its
// one buffer after the last run's kernels (its device memory not doubled).
const maxTwin = 256 << 20

// twinUse is argument arg of step's launch.
type twinUse struct {
	step, arg int
}

// makeTwins gives a second buffer to each input that up (this run's
// uploads) and the last run both upload, where it may have one (on the
// caller's goroutine, before the run is handed over: allocating waits on
// the device's thread).
func (g *gpu) makeTwins(up []bool) error {
	if !g.async || len(g.lastUp) != len(up) {
		return nil
	}
	for i, u := range up {
		if !u || !g.lastUp[i] || g.owner[i] != nil || g.twins[i] != nil {
			continue
		}
		tw, err := g.newTwin(i)
		if err != nil {
			return err
		}
		if tw == nil {
			continue
		}
		if g.twins == nil {
			g.twins = map[int]*twin{}
		}
		g.twins[i] = tw
	}
	return nil
}

// newTwin is input i's twin, or nil where it may have none.
func (g *gpu) newTwin(i int) (*twin, error) {
	n := g.c.rw.inputs[i].nn
	b := g.bufs[n]
	if b == nil || b.Bytes > maxTwin {
		return nil, nil
	}
	tw := &twin{}
	lo, hi := uintptr(b.Ptr), uintptr(b.Ptr)+uintptr(b.Bytes)
	for m, o := range g.bufs {
		switch {
		case o == b:
			tw.nodes = append(tw.nodes, m)
		case o != nil && uintptr(o.Ptr) < hi && lo < uintptr(o.Ptr)+uintptr(o.Bytes):
			return nil, nil // its memory is part of another value's
		}
	}
	for si, st := range g.steps {
		if st.pk == nil {
			return nil, nil // a host op reads device values: runs wait (not async)
		}
		for k, a := range g.launch[st.n] {
			if a == any(b) {
				tw.uses = append(tw.uses, twinUse{si, k})
			}
		}
	}
	if len(tw.uses) == 0 {
		return nil, nil
	}
	var err error
	if tw.bufs[1], err = g.dev.Alloc(b.Bytes); err != nil {
		return nil, fmt.Errorf("fusion: %w", err)
	}
	tw.bufs[0] = b
	g.owned = append(g.owned, tw.bufs[1])
	for k := range tw.free {
		if tw.free[k], err = g.dev.NewEvent(); err != nil {
			return nil, fmt.Errorf("fusion: %w", err)
		}
	}
	if g.copyS == nil {
		if g.copyS, err = g.dev.NewStream(); err != nil {
			return nil, fmt.Errorf("fusion: %w", err)
		}
		if g.copyEv, err = g.dev.NewEvent(); err != nil {
			return nil, fmt.Errorf("fusion: %w", err)
		}
	}
	return tw, nil
}

// twinFor readies input i's upload (on the device's thread): for an input
// with a twin, the buffer the last run did not read becomes the input's,
// the launches are re-pointed to it, and the copy stream, made to wait
// for the kernels that read it last, is returned; nil for other inputs.
func (g *gpu) twinFor(t *cuda.Thread, i int) (*cuda.Stream, error) {
	tw := g.twins[i]
	if tw == nil || g.owner[i] != nil {
		return nil, nil
	}
	nb := 1 - tw.cur
	if tw.freed[nb] {
		if err := g.copyS.WaitFor(t, tw.free[nb]); err != nil {
			return nil, err
		}
	}
	nw := tw.bufs[nb]
	for _, u := range tw.uses {
		st := g.steps[u.step]
		if err := st.pk.Set(u.arg, nw); err != nil {
			return nil, err
		}
		if at, ok := g.graphAt[u.step]; ok { // WithCUDAGraphs: the node replayed
			if err := t.SetLaunch(g.segs[at.seg].graph, at.node, st.pk); err != nil {
				return nil, err
			}
		}
		g.launch[st.n][u.arg] = nw
	}
	for _, n := range tw.nodes {
		g.bufs[n] = nw
	}
	tw.cur = nb
	return g.copyS, nil
}

// twinsRead records, after a run's kernels, that each twin's current
// buffer is free once they are done.
func (g *gpu) twinsRead(t *cuda.Thread) error {
	for _, tw := range g.twins {
		if err := t.Record(tw.free[tw.cur]); err != nil {
			return err
		}
		tw.freed[tw.cur] = true
	}
	return nil
}

// closeTwins frees the twins' events and the copy stream (their buffers
// are in g.owned).
func (g *gpu) closeTwins() error {
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	for _, tw := range g.twins {
		for _, e := range tw.free {
			if e != nil {
				keep(g.dev.FreeEvent(e))
			}
		}
	}
	g.twins = nil
	if g.copyEv != nil {
		keep(g.dev.FreeEvent(g.copyEv))
		g.copyEv = nil
	}
	keep(g.copyS.Close())
	g.copyS = nil
	return first
}
