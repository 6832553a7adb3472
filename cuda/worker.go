package cuda

import (
	"runtime"
	"sync/atomic"
	"time"
)

// worker hands work to one goroutine (the device's, locked to its OS
// thread, where driver calls are valid) and waits for it. With spin (a
// machine of 8 or more cores, spinWorkers) both sides poll for a while
// before they block: the worker for idleSpin after each piece of work, for
// the next; the caller for waitSpin, for its piece to finish. A blocked
// goroutine's hand-over costs a futex wake-up and a reschedule on each
// side (on an H200 host 11 µs to hand a run over and 18–28 µs to get it
// back); a polled one a few hundred nanoseconds. Without spin it is a plain
// channel hand-over.
type worker struct {
	work chan func()
	spin bool
	// a piece of the worker's own work that a caller polling in wait may
	// take and run (share)
	help atomic.Pointer[helpTask]
}

// helpTask is a piece of work offered by share: run once, by a waiting
// caller or by the worker itself.
type helpTask struct {
	f    func()
	done atomic.Bool
}

// How long each side polls before it blocks.
const (
	idleSpin = 300 * time.Microsecond
	waitSpin = 3 * time.Millisecond
)

func newWorker(spin bool) *worker { return &worker{work: make(chan func(), 1), spin: spin} }

// spinWorkers: spinning pays where cores are many; on a machine of few
// the polling side would take a core the other needs.
func spinWorkers() bool { return runtime.GOMAXPROCS(0) >= 8 }

// loop runs the work handed over, in order, until stop.
func (w *worker) loop() {
	for {
		f, ok := w.next()
		if !ok {
			return
		}
		f()
	}
}

// next is the next piece of work (false once stopped): polled for
// idleSpin with spin, then waited for.
func (w *worker) next() (func(), bool) {
	if w.spin {
		start := time.Now()
		for i := 1; ; i++ {
			select {
			case f, ok := <-w.work:
				return f, ok
			default:
			}
			if i%64 == 0 && time.Since(start) > idleSpin {
				break
			}
		}
	}
	f, ok := <-w.work
	return f, ok
}

// do runs f on the worker's goroutine and returns its error.
func (w *worker) do(f func() error) error { return w.start(f)() }

// start hands f to the worker's goroutine and returns at once with the
// function that waits for it and returns its error (polled for waitSpin
// with spin, then blocked on): the caller's goroutine is free in between,
// for work of its own beside the device's. The wait must be called once.
func (w *worker) start(f func() error) (wait func() error) {
	var err error
	ch := make(chan struct{})
	w.work <- func() {
		defer close(ch)
		err = f()
	}
	return func() error { return w.wait(ch, &err) }
}

// post hands f to the worker's goroutine without a way to wait for it.
func (w *worker) post(f func()) { w.work <- f }

// share offers f, a piece of the work running on the worker's goroutine,
// to a caller polling in wait (a core already awake: starting a goroutine
// costs tens of µs on an H200's host), and returns the function that the
// worker calls once it has done the rest of its work: it runs f itself if
// no caller took it, or else polls until the caller has run it. Without
// spin (no caller polls) f is left to that function.
func (w *worker) share(f func()) (join func()) {
	if !w.spin {
		return f
	}
	t := &helpTask{f: f}
	w.help.Store(t)
	return func() {
		if w.help.CompareAndSwap(t, nil) { // not taken
			f()
			return
		}
		for !t.done.Load() {
		}
	}
}

// lend runs the piece of work offered by share, if any (a polling caller).
func (w *worker) lend() {
	if t := w.help.Swap(nil); t != nil {
		t.f()
		t.done.Store(true)
	}
}

// wait returns *err once ch is closed; while it polls it runs what the
// worker shares.
func (w *worker) wait(ch chan struct{}, err *error) error {
	if w.spin {
		start := time.Now()
		for i := 1; ; i++ {
			select {
			case <-ch:
				return *err
			default:
			}
			if w.help.Load() != nil {
				w.lend()
			}
			if i%64 == 0 && time.Since(start) > waitSpin {
				break
			}
		}
	}
	<-ch
	return *err
}

// stop ends loop once the work handed over has run.
func (w *worker) stop() { close(w.work) }
