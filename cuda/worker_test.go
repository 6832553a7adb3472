package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorker hands work to a worker from several goroutines at once, with
// and without spinning, pieces short and long (past the caller's and the
// worker's polling windows) and with pauses between them (the worker
// blocked again), and checks that every piece ran once, on the worker's
// goroutine only (one at a time), and that each caller got its own error.
func TestWorker(t *testing.T) {
	for _, spin := range []bool{false, true} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) {
			w := newWorker(spin)
			stopped := make(chan struct{})
			var runs int64
			go func() {
				runtime.LockOSThread()
				w.loop()
				close(stopped)
			}()
			var mu sync.Mutex
			ran := map[int]int{}
			busy := false
			var wg sync.WaitGroup
			const callers, each = 4, 25
			for c := range callers {
				wg.Go(func() {
					for i := range each {
						id := c*each + i
						var sleep time.Duration
						switch id % 10 {
						case 3:
							sleep = 4 * waitSpin // past the caller's polling
						case 7:
							time.Sleep(2 * idleSpin) // the worker blocks again
						}
						err := w.do(func() error {
							mu.Lock()
							if busy {
								mu.Unlock()
								return errors.New("two pieces at once")
							}
							busy = true
							ran[id]++
							runs++
							mu.Unlock()
							time.Sleep(sleep)
							mu.Lock()
							busy = false
							mu.Unlock()
							return fmt.Errorf("piece %d", id)
						})
						if err == nil || err.Error() != fmt.Sprintf("piece %d", id) {
							t.Errorf("piece %d: error %v", id, err)
						}
					}
				})
			}
			wg.Wait()
			w.stop()
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("the worker did not stop")
			}
			if len(ran) != callers*each || runs != callers*each {
				t.Fatalf("%d pieces ran (%d runs), want %d", len(ran), runs, callers*each)
			}
			for id, n := range ran {
				if n != 1 {
					t.Errorf("piece %d ran %d times", id, n)
				}
			}
		})
	}
}

// TestWorkerStart: start returns before the piece has run, so the caller
// works beside it (here the piece waits for the caller's signal, which
// the caller sends only after start has returned), and the wait returns
// the piece's error, with and without spinning.
func TestWorkerStart(t *testing.T) {
	for _, spin := range []bool{false, true} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) {
			w := startWorker(spin)
			defer w.stop()
			for i := range 20 {
				go1 := make(chan struct{})
				ran := false
				wait := w.start(func() error {
					select {
					case <-go1:
					case <-time.After(10 * time.Second):
						return errors.New("the caller never signalled: start waited for the piece")
					}
					ran = true
					return fmt.Errorf("piece %d", i)
				})
				close(go1) // the caller's own work, while the piece waits for it
				if err := wait(); err == nil || err.Error() != fmt.Sprintf("piece %d", i) {
					t.Fatalf("piece %d: error %v", i, err)
				}
				if !ran {
					t.Fatalf("piece %d: wait returned before the piece ran", i)
				}
			}
		})
	}
}

// TestWorkerPost: post returns before the piece has run (the piece waits
// for the caller's signal, sent after post returned), and pieces posted and
// started after it run in the order they were handed over.
func TestWorkerPost(t *testing.T) {
	for _, spin := range []bool{false, true} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) {
			w := startWorker(spin)
			defer w.stop()
			var order []int // written by the worker's goroutine only
			go1 := make(chan struct{})
			w.post(func() {
				select {
				case <-go1:
				case <-time.After(10 * time.Second):
					order = append(order, -1) // post waited for the piece
					return
				}
				order = append(order, 0)
			})
			close(go1)
			for i := 1; i <= 5; i++ {
				w.post(func() { order = append(order, i) })
			}
			if err := w.do(func() error { order = append(order, 6); return nil }); err != nil {
				t.Fatal(err)
			}
			if want := []int{0, 1, 2, 3, 4, 5, 6}; fmt.Sprint(order) != fmt.Sprint(want) {
				t.Fatalf("pieces ran in the order %v, want %v", order, want)
			}
		})
	}
}

// startWorker is a worker whose loop runs on a goroutine locked to its OS
// thread, as the device's.
func startWorker(spin bool) *worker {
	w := newWorker(spin)
	go func() {
		runtime.LockOSThread()
		w.loop()
	}()
	return w
}

// goid is the calling goroutine's id (from its stack's header), to tell
// which goroutine ran a shared piece.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	f := strings.Fields(string(b))
	return f[1]
}

// TestWorkerShare: a piece the worker shares (share) runs once: in lend
// (a caller polling in wait) when one takes it, else in the worker's join;
// join returns only once the piece has run, by whichever goroutine. Without
// spin share leaves the piece to join.
func TestWorkerShare(t *testing.T) {
	for _, c := range []struct {
		name       string
		spin, lend bool
		wantLender bool
	}{
		{"spin, lent", true, true, true},
		{"spin, not taken", true, false, false},
		{"no spin", false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorker(c.spin)
			var runs atomic.Int32
			var ranBy atomic.Value
			piece := func() {
				runs.Add(1)
				time.Sleep(time.Millisecond) // join must wait for it
				ranBy.Store(goid())
			}
			joined := make(chan string)
			shared := make(chan struct{})
			go func() { // the worker's side
				join := w.share(piece)
				close(shared)
				if c.lend {
					for end := time.Now().Add(time.Second); c.spin && w.help.Load() != nil && time.Now().Before(end); {
					}
				}
				join()
				if ranBy.Load() == nil {
					joined <- ""
					return
				}
				joined <- goid()
			}()
			<-shared
			if c.lend {
				w.lend()
			}
			worker := <-joined
			if worker == "" {
				t.Fatal("join returned before the piece ran")
			}
			if runs.Load() != 1 {
				t.Fatalf("the piece ran %d times, want once", runs.Load())
			}
			want := worker
			if c.wantLender {
				want = goid()
			}
			if got := ranBy.Load().(string); got != want {
				t.Fatalf("run by goroutine %s, want %s (lender %s, worker %s)", got, want, goid(), worker)
			}
		})
	}
	// in place: a caller waiting for a piece of work (do) takes what the
	// piece shares, or the worker runs it at its join: once either way
	w := newWorker(true)
	go func() {
		runtime.LockOSThread()
		w.loop()
	}()
	defer w.stop()
	var runs atomic.Int32
	for range 20 {
		if err := w.do(func() error {
			join := w.share(func() { runs.Add(1) })
			time.Sleep(100 * time.Microsecond)
			join()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 20 {
		t.Fatalf("20 shared pieces ran %d times", runs.Load())
	}
}
