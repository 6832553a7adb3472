//go:build !tilefuse_cuda

package fusion_test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestCUDABackendNeedsTheTaggedBuild: asking for the GPU in the untagged
// build is a clear error, kept by the machine and returned by RunAll.
func TestCUDABackendNeedsTheTaggedBuild(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 2), G.WithName("x"))
	G.Must(G.Exp(x))
	m := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CUDA))
	if err := m.RunAll(); err == nil || !strings.Contains(err.Error(), "tilefuse_cuda") {
		t.Fatalf("got %v, want an error naming the tilefuse_cuda build", err)
	}
	if err := fusion.Available(fusion.CUDA); err == nil || !strings.Contains(err.Error(), "tilefuse_cuda") {
		t.Fatalf("Available(CUDA) = %v, want an error naming the tilefuse_cuda build", err)
	}
	if err := fusion.Available(fusion.CPU); err != nil {
		t.Fatalf("Available(CPU) = %v", err)
	}
	t.Skip("the CUDA backend itself runs in the tagged build on a GPU (fusion/gpu_backend_cuda_test.go)")
}

// TestDeviceTimeOnlyOnTheGPU: the CPU backend has no device time.
func TestDeviceTimeOnlyOnTheGPU(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	G.Must(G.Exp(x))
	m := fusion.NewTapeMachine(g)
	defer m.Close()
	if err := G.Let(x, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float64, 6)))); err != nil {
		t.Fatal(err)
	}
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	if s, ok := m.DeviceTime(); ok || s != 0 {
		t.Fatalf("DeviceTime on the CPU = %v, %v; want 0, false", s, ok)
	}
	if ks := m.KernelTimes(); ks != nil {
		t.Fatalf("KernelTimes on the CPU = %v, want nil", ks)
	}
}

// TestKernelTimesOnCPU: WithProfile on the CPU times every kernel of the
// last run, in launch order, and no more: a second run replaces the first's.
func TestKernelTimesOnCPU(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(300, 500), G.WithName("x"))
	G.Must(G.Sum(G.Must(G.SoftMax(G.Must(G.Tanh(x)))), 0)) // a row kernel, then a column sum
	m := fusion.NewTapeMachine(g, fusion.WithProfile(true))
	defer m.Close()
	d := make([]float32, 300*500)
	for i := range d {
		d[i] = float32(i%13) / 7
	}
	if err := G.Let(x, tensor.New(tensor.WithShape(300, 500), tensor.WithBacking(d))); err != nil {
		t.Fatal(err)
	}
	var kernels []string
	for _, gi := range m.Report().Groups {
		kernels = append(kernels, gi.Kernel)
	}
	for run := 0; run < 2; run++ {
		start := time.Now()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		wall := time.Since(start).Seconds()
		m.Reset()
		ks := m.KernelTimes()
		var got []string
		sum := 0.0
		for _, k := range ks {
			if k.Seconds <= 0 || len(k.Ops) == 0 || (k.Faults < 0) == faultsCounted {
				t.Fatalf("run %d: kernel time %+v (page faults counted here: %v)", run, k, faultsCounted)
			}
			got = append(got, k.Kernel)
			sum += k.Seconds
		}
		if !slices.Equal(got, kernels) || sum > wall {
			t.Fatalf("run %d: kernels %v timed, want %v; their sum %v s, the run %v s", run, got, kernels, sum, wall)
		}
	}
}

// TestDumpDir: WithDumpDir writes each generated kernel's IR.
func TestDumpDir(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 2), G.WithName("x"))
	G.Must(G.Sum(G.Must(G.Exp(x)), 1))
	dir := t.TempDir()
	c, err := fusion.Compile(g, fusion.WithDumpDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, c.Report.Groups[0].Kernel+".tile"))
	if err != nil || !strings.Contains(string(b), "tt.func @"+c.Report.Groups[0].Kernel) {
		t.Fatalf("dump: %q, %v", b, err)
	}
}

// TestRunWithoutInputs: running before the inputs have values is an error.
func TestRunWithoutInputs(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 2), G.WithName("x"))
	G.Must(G.Exp(G.Must(G.Tanh(x))))
	m := fusion.NewTapeMachine(g)
	defer m.Close()
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	if err := m.RunAll(); err == nil || !strings.Contains(err.Error(), "no value") {
		t.Fatalf("running without inputs: %v", err)
	}
}

// faultsCounted: KernelTime.Faults is counted on the CPU backend here.
const faultsCounted = runtime.GOOS != "windows" && runtime.GOOS != "plan9" && runtime.GOOS != "js" && runtime.GOOS != "wasip1"
