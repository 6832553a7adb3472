package fusion

import (
	"errors"
	"fmt"
	"sync"
	"time"

	G "gorgonia.org/gorgonia"
)

// Machine runs a fused graph: a drop-in for Gorgonia's tape machine.
//
// A Machine is safe for use by several goroutines: RunAll calls are
// serialised (a second waits for the first to finish), and so are Close,
// Stats, DeviceTime and KernelTimes. The values a run writes back are the
// user's nodes', shared by every goroutine: read them after the RunAll
// that made them returns, before the next one starts (or give each
// goroutine a machine over its own graph: machines run in parallel).
type Machine struct {
	mu   sync.Mutex
	orig *G.ExprGraph
	c    *Compiled
	be   backend
	err  error
	runs int
}

// NewTapeMachine compiles g and returns a machine that runs it. A compile
// error is kept and returned by RunAll (and Err), never a panic.
func NewTapeMachine(g *G.ExprGraph, opts ...Option) *Machine {
	m := &Machine{orig: g}
	c, err := compile(g, opts, true)
	if err != nil {
		m.err = err
		return m
	}
	m.c, m.be = c.compiled(), c.be
	return m
}

// Err is the compile error, if any.
func (m *Machine) Err() error { return m.err }

// Report says what fused (nil if compilation failed). It does not change
// after NewTapeMachine: what runs did is Stats.
func (m *Machine) Report() *Report {
	if m.c == nil {
		return nil
	}
	return m.c.Report
}

// Compiled is the fused graph (nil if compilation failed).
func (m *Machine) Compiled() *Compiled { return m.c }

// Let binds a value to an input node of the user's graph (as gorgonia.Let).
func (m *Machine) Let(n *G.Node, v interface{}) error { return G.Let(n, v) }

// RunAll runs the graph: the user's input values go in, and afterwards
// every readable node of the user's graph holds its value.
func (m *Machine) RunAll() (err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer recoverTo(&err, "running")
	if m.err != nil {
		return m.err
	}
	if m.be == nil {
		return errors.New("fusion: RunAll after Close: the machine has released its kernels and buffers; make a new one")
	}
	if err := m.be.run(); err != nil {
		return err
	}
	for _, r := range m.c.reads {
		*r.into = r.n.Value()
	}
	m.runs++
	return nil
}

// Stats are the machine's statistics: how many runs completed, and on the
// GPU backend the last run's device time, host ops and copies.
func (m *Machine) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Stats{Runs: m.runs}
	if m.be != nil {
		s.DeviceTime = m.be.deviceTime()
		m.be.stats(&s)
	}
	return s
}

// DeviceTime is, on the CUDA backend, the device time of the last run's
// compute, measured with events from before the first kernel to after the
// last: inputs already on the device, results not yet copied back (host ops
// and their copies in between count). ok is false on the CPU backend or
// before a run.
func (m *Machine) DeviceTime() (seconds float64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.be == nil {
		return 0, false
	}
	t := m.be.deviceTime()
	return t, t > 0
}

// DeviceTimes runs the last run's kernels (and host ops) again on the
// CUDA backend, n times back to back after warm of untimed runs, with the
// inputs the last run put on the device and nothing copied up or down,
// and returns the device time of each (seconds; events between runs): the
// graph's compute timed as PyTorch's is (events around a call, calls one
// after another, the clocks up). It is for benchmarks: a run's DeviceTime
// follows that run's uploads, during which the GPU idles and its clock
// drops. The values the runs write are the last run's again. ok is false
// on the CPU backend or before a run. It is DeviceTimesBatch(n, 1, warm).
func (m *Machine) DeviceTimes(n int, warm time.Duration) (seconds []float64, ok bool, err error) {
	return m.DeviceTimesBatch(n, 1, warm)
}

// DeviceTimesBatch is DeviceTimes with the events batch runs apart: each of
// the n times is the mean device time of batch runs back to back between
// two events, as a device-to-device copy's bandwidth is measured (batches
// of copies between events). A timing event between two runs makes the
// device finish the first, write a time stamp and only then start the
// next, which costs a few µs a run (~3.6 µs measured on an H200 at a
// 70 µs row kernel); a batch spreads that over its runs. batch must be at
// least 1.
func (m *Machine) DeviceTimesBatch(n, batch int, warm time.Duration) (seconds []float64, ok bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, is := m.be.(deviceLooper)
	if m.be == nil || !is || m.runs == 0 {
		return nil, false, nil
	}
	if n < 1 || batch < 1 {
		return nil, false, fmt.Errorf("fusion: DeviceTimesBatch(%d, %d): at least one run a batch and one batch", n, batch)
	}
	s, err := l.deviceTimes(n, batch, warm)
	return s, err == nil, err
}

// deviceLooper is a backend that can run its compute back to back on a
// device (the GPU backend).
type deviceLooper interface {
	deviceTimes(n, batch int, warm time.Duration) ([]float64, error)
}

// KernelTimes is, with WithProfile, each kernel's time in the last run, in
// launch order: device time between events on the CUDA backend, wall time of
// the op (output allocation included) on the CPU, with the minor page
// faults taken in it (KernelTime.Faults). It is nil without WithProfile.
func (m *Machine) KernelTimes() []KernelTime {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.be == nil {
		return nil
	}
	return m.be.kernelTimes()
}

// Wait blocks until the device has finished everything the machine gave it
// (a run that returned before its last kernels ended, WithAsyncRuns; a
// fused solver's step) and returns the error of that work, if any, once.
// On the CPU backend, where runs and steps end before they return, it
// returns nil at once.
func (m *Machine) Wait() (err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer recoverTo(&err, "waiting")
	if m.be == nil {
		return nil
	}
	if w, ok := m.be.(waiter); ok {
		return w.wait()
	}
	return nil
}

// waiter is a backend whose work may outlast the calls that gave it (the
// GPU backend).
type waiter interface {
	wait() error
}

// Reset readies the machine for another run. Every run starts afresh, so
// there is nothing to undo; it is here so that the machine drops in for
// Gorgonia's.
func (m *Machine) Reset() {}

// Close releases the machine.
func (m *Machine) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.be == nil {
		return nil
	}
	err := m.be.close()
	m.be = nil
	return err
}
