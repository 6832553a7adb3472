package ptxsim_test

import (
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestConformance lowers every conformance kernel with codegen for sm_80 and
// sm_90, runs the PTX in the simulator with racecheck on, and compares the
// results with the float64 references and with the reference interpreter
// at the table's tolerances (tiletest.Compare), as the GPU test in package
// cuda does on an H200.
func TestConformance(t *testing.T) {
	ran := 0
	for _, arch := range []int{80, 90} {
		sim := &ptxsim.Launcher{Arch: arch, Racecheck: true, Initcheck: true}
		for _, c := range tiletest.Cases() {
			t.Run(sim.Name()+"/"+c.Name, func(t *testing.T) {
				if c.Large {
					t.Skip("large case: the same kernels run at the smaller sizes of the table; at these sizes the simulator takes minutes")
				}
				if err := tiletest.Compare(sim, tiletest.Interp{}, c); err != nil {
					t.Fatal(err)
				}
				ran++
			})
		}
	}
	if ran < 150 && !t.Failed() {
		t.Fatalf("only %d conformance kernels ran in the simulator", ran)
	}
}

// TestConformanceTensorCores: the TF32 matrix products of the table use
// mma.sync; the simulator must have executed them (and they agree with the
// interpreter in TestConformance).
func TestConformanceTensorCores(t *testing.T) {
	n := 0
	for _, c := range tiletest.Cases() {
		if !strings.Contains(c.Name, "tf32") || c.Large {
			continue
		}
		if strings.HasPrefix(c.Name, "dot_self/") && strings.HasSuffix(c.Name, "/tf32x3") {
			continue // a 3xTF32 dot outside a K loop multiplies its parts by FMAs
		}
		sim := &ptxsim.Launcher{Arch: 80}
		if err := tiletest.Compare(sim, tiletest.Interp{}, c); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if !strings.Contains(sim.Last.PTX, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") {
			t.Fatalf("%s: the PTX has no mma.sync: the test does not cover the tensor cores", c.Name)
		}
		n++
	}
	if n < 2 {
		t.Fatalf("%d TF32 cases", n)
	}
}
