//go:build linux

package fusion

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestHugePageAdvice: with the switch on (TILEFUSE_HUGEPAGES=1), a new
// buffer of 16 MiB from uninitialized lies in a mapping the kernel marks
// as advised for huge pages (VmFlags "hg" in /proc/self/smaps); with the
// switch off (the default) it is not. Skipped where the kernel has no
// transparent huge pages.
func TestHugePageAdvice(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("no transparent huge pages in this kernel:", err)
	}
	defer func(was bool) { hugePages = was }(hugePages)
	for _, on := range []bool{false, true} {
		hugePages = on
		big := uninitialized[float32](4 << 20) // 16 MiB
		got, err := advisedHuge(unsafe.Pointer(unsafe.SliceData(big)))
		if err != nil {
			t.Fatal(err)
		}
		if got != on {
			t.Errorf("switch %v: the 16 MiB buffer's mapping advised for huge pages: %v", on, got)
		}
		for i := range big { // written in full, as a kernel writes it
			big[i] = 1
		}
	}
}

// advisedHuge reports whether the mapping holding address p has the
// kernel's huge-page advice flag (smaps' VmFlags "hg").
func advisedHuge(p unsafe.Pointer) (bool, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return false, err
	}
	defer f.Close()
	addr := uintptr(p)
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 && strings.Contains(line[:strings.IndexByte(line, ' ')], "-") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			for _, fl := range strings.Fields(line)[1:] {
				if fl == "hg" {
					return true, nil
				}
			}
			return false, nil
		}
	}
	return false, fmt.Errorf("no mapping of %#x in /proc/self/smaps", addr)
}
