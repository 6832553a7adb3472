//go:build tilefuse_cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"
)

// Stream is a stream of the device's beside its default one (not
// synchronised with it: cu.NonBlocking), for copies that run beside the
// kernels, ordered against them by events only.
type Stream struct {
	d *Device
	s cu.Stream
}

// NewStream creates a stream; free it with Close.
func (d *Device) NewStream() (*Stream, error) {
	s := &Stream{d: d}
	err := d.Do(func() error {
		var err error
		s.s, err = cu.MakeStream(cu.NonBlocking)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: stream: %w", err)
	}
	return s, nil
}

// Close destroys the stream (after the work enqueued on it).
func (s *Stream) Close() error {
	if s == nil || s.d == nil {
		return nil
	}
	d := s.d
	s.d = nil
	return d.Do(func() error { return s.s.Destroy() })
}

// WaitFor makes the work enqueued on s after it wait for the work before
// e's last Record (on whichever stream).
func (s *Stream) WaitFor(t *Thread, e *Event) error {
	if err := t.check(); err != nil {
		return err
	}
	return s.s.Wait(e.ev, 0)
}

// Record records e on s, after the work enqueued on s so far.
func (s *Stream) Record(t *Thread, e *Event) error {
	if err := t.check(); err != nil {
		return err
	}
	return e.ev.Record(s.s)
}

// WaitFor makes the work enqueued on the default stream after it wait for
// the work before e's last Record (on whichever stream), without blocking
// the host.
func (t *Thread) WaitFor(e *Event) error {
	if err := t.check(); err != nil {
		return err
	}
	return cu.Stream{}.Wait(e.ev, 0)
}
