//go:build tilefuse_cuda

package cuda

import (
	"os"
	"strconv"
	"testing"

	"github.com/tilefuse/tilefuse/tile/tiletest"
)

var dev *Device

func TestMain(m *testing.M) {
	d, err := Open(0)
	if err != nil {
		// the tagged build runs only where a GPU is: gorgonia.org/cu exits at start-up otherwise
		panic("cuda: no usable GPU: " + err.Error())
	}
	dev = d
	code := m.Run()
	d.Close()
	os.Exit(code)
}

// TestConformanceGPU runs the whole conformance table on the GPU, checking
// each result against its float64 reference and against the interpreter.
func TestConformanceGPU(t *testing.T) {
	warps := 4
	if s := os.Getenv("TILEFUSE_NUM_WARPS"); s != "" {
		warps, _ = strconv.Atoi(s)
	}
	gpu := &Launcher{Dev: dev, NumWarps: warps}
	t.Logf("device %s (sm_%d, %d SMs), num_warps %d", dev.Name, dev.Arch, dev.SMs, warps)
	for _, c := range tiletest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Large && testing.Short() {
				t.Skip("large case: skipped with -short")
			}
			if err := tiletest.Compare(gpu, tiletest.Interp{}, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}
