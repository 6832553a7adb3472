//go:build unix

package fusion

import (
	"syscall"
	"testing"
)

// TestMinorFaults: touching pages of new anonymous memory, each in a
// 2 MiB region of its own (so that huge pages make no difference), counts
// at least a fault a page.
func TestMinorFaults(t *testing.T) {
	const regions, stride = 16, 4 << 20
	mem, err := syscall.Mmap(-1, 0, regions*stride, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Skipf("no anonymous mapping here (%v): nothing to fault in", err)
	}
	defer syscall.Munmap(mem)
	before := minorFaults()
	if before < 0 {
		t.Fatal("getrusage failed")
	}
	for i := 0; i < regions; i++ {
		mem[i*stride] = 1
	}
	if got := minorFaults() - before; got < regions {
		t.Fatalf("%d faults counted for %d new pages touched", got, regions)
	}
}
