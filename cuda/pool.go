package cuda

import (
	"fmt"
	"sync"
)

// freeList keeps blocks of memory a Device freed, by size, for the next
// allocation of the same size: a second machine for the same graph (or a
// tuner's measurement buffers, one after another) takes its buffers from
// it instead of from the driver (cuMemAlloc, and cuMemFree, which waits
// for the device). All of a Device's work is on one stream, so a block
// handed out again is written only after the work that used it before.
// It holds at most max bytes; a block beyond that is the caller's to
// free. A block put twice is an error, never two owners of one block.
type freeList[T comparable] struct {
	mu     sync.Mutex
	max    int64
	held   int64
	bySize map[int64][]T
	in     map[T]bool
}

func newFreeList[T comparable](max int64) *freeList[T] {
	return &freeList[T]{max: max, bySize: map[int64][]T{}, in: map[T]bool{}}
}

// take returns a block of exactly n bytes, if the list holds one.
func (l *freeList[T]) take(n int64) (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.bySize[n]
	if len(s) == 0 {
		var zero T
		return zero, false
	}
	p := s[len(s)-1]
	l.bySize[n] = s[:len(s)-1]
	delete(l.in, p)
	l.held -= n
	return p, true
}

// put keeps p, a block of n bytes, unless that would hold more than max
// bytes (false: free it). A block the list holds already is an error.
func (l *freeList[T]) put(n int64, p T) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.in[p] {
		return false, fmt.Errorf("cuda: a block of %d bytes freed twice", n)
	}
	if n <= 0 || l.held+n > l.max {
		return false, nil
	}
	l.bySize[n] = append(l.bySize[n], p)
	l.in[p] = true
	l.held += n
	return true, nil
}

// drain empties the list and returns its blocks, for the caller to free.
func (l *freeList[T]) drain() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []T
	for _, s := range l.bySize {
		out = append(out, s...)
	}
	clear(l.bySize)
	clear(l.in)
	l.held = 0
	return out
}

// bytes is what the list holds.
func (l *freeList[T]) bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}
