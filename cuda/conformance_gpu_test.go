//go:build tilefuse_cuda

package cuda

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
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

// TestLoadErrorCarriesJITLog: a module the driver rejects comes back as an
// error naming the kernel, with the JIT's own message.
func TestLoadErrorCarriesJITLog(t *testing.T) {
	bad := &codegen.Kernel{Name: "broken", NumWarps: 1, PTX: ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry broken() {\n\tbogus.instruction;\n}\n"}
	_, err := dev.Load(bad)
	if err == nil {
		t.Fatal("bad PTX loaded")
	}
	if !strings.Contains(err.Error(), "@broken") || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("error lacks the kernel name or the JIT log: %v", err)
	}
	t.Logf("error as reported: %v", err)
}

// TestFunctionAttributes: resource use is read back from the driver.
func TestFunctionAttributes(t *testing.T) {
	k, err := kernels.Softmax(tile.Meta{"BLOCK": 1024})
	if err != nil {
		t.Fatal(err)
	}
	ck, f, err := dev.Compile(k, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Regs <= 0 || f.DynShared != ck.SharedBytes || f.Threads != 128 {
		t.Fatalf("attributes %s", f)
	}
	t.Log(f)
	// the carveout: none by default; with TILEFUSE_CARVEOUT=auto the
	// least that holds the CTAs the occupancy allows (carveout.go)
	if v := os.Getenv("TILEFUSE_CARVEOUT"); v != "auto" {
		if auto, pct, err := carveoutSetting(v); err == nil && !auto && f.Carveout != pct {
			t.Fatalf("TILEFUSE_CARVEOUT=%q: carveout %d%%, want %d%%", v, f.Carveout, pct)
		}
		return
	}
	var blocks int
	if err := dev.Do(func() (err error) {
		blocks, err = f.fn.MaxActiveBlocksPerMultiProcessor(f.Threads, int64(f.DynShared))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := carveoutFor(blocks, f.StaticShared+f.DynShared, dev.SharedMemoryReserved, dev.SharedMemorySM)
	if dev.SharedMemorySM <= 0 || dev.SharedMemoryReserved <= 0 || blocks < 2 || want < 0 || want >= 50 || f.Carveout != want {
		t.Fatalf("%d CTAs an SM, %d B shared an SM, %d reserved a CTA: carveout %d%%, want %d%% (and under 50)", blocks, dev.SharedMemorySM, dev.SharedMemoryReserved, f.Carveout, want)
	}
	t.Logf("%d CTAs an SM, %d B shared an SM at most, %d reserved a CTA", blocks, dev.SharedMemorySM, dev.SharedMemoryReserved)
}

// TestThreadRun: copies and a timed launch in one Run agree with the
// interpreter's result, and a Thread kept past its Run is an error, not a
// call from the wrong OS thread.
func TestThreadRun(t *testing.T) {
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": 256})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	x, y, z := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i], z[i] = float32(i), float32(2*i+1), -7
	}
	bufs := make([]*Buffer, 3)
	for i := range bufs {
		if bufs[i], err = dev.Alloc(4 * n); err != nil {
			t.Fatal(err)
		}
		defer dev.Free(bufs[i])
	}
	args := []any{bufs[0], bufs[1], bufs[2], n}
	_, f, err := dev.Compile(k, 4, args)
	if err != nil {
		t.Fatal(err)
	}
	timer, err := dev.NewTimer()
	if err != nil {
		t.Fatal(err)
	}
	defer timer.Close()
	var kept *Thread
	var ms float64
	err = dev.Run(func(th *Thread) error {
		kept = th
		for i, h := range [][]float32{x, y, z} {
			if err := th.Upload(bufs[i], h); err != nil {
				return err
			}
		}
		if err := timer.Start(th); err != nil {
			return err
		}
		if err := th.Launch(f, k, tile.Grid{(n + 255) / 256}, args...); err != nil {
			return err
		}
		if ms, err = timer.Stop(th); err != nil {
			return err
		}
		return th.Download(z, bufs[2])
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range z {
		if z[i] != x[i]+y[i] {
			t.Fatalf("z[%d] = %v, want %v", i, z[i], x[i]+y[i])
		}
	}
	if ms <= 0 {
		t.Fatalf("device time %v ms", ms)
	}
	if err := kept.Upload(bufs[0], x); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("a Thread used after its Run: %v", err)
	}
}
