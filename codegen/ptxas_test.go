package codegen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// ptxasPath finds ptxas, or skips (fails under TILEFUSE_REQUIRE_PTXAS=1, as in CI).
func ptxasPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ptxas")
	if err != nil {
		if os.Getenv("TILEFUSE_REQUIRE_PTXAS") != "" {
			t.Fatalf("ptxas is required (TILEFUSE_REQUIRE_PTXAS is set) but not found: %v", err)
		}
		t.Skip("ptxas not found: install the CUDA toolkit (see README) to assemble the generated PTX")
	}
	return p
}

// TestPTXAssembles lowers every conformance kernel and assembles it with
// ptxas for sm_80 and sm_90: any error fails.
func TestPTXAssembles(t *testing.T) {
	ptxas := ptxasPath(t)
	dir := t.TempDir()
	for _, c := range tiletest.Cases() {
		k, err := c.Kernel()
		if err != nil {
			t.Fatalf("%s: build: %v", c.Name, err)
		}
		for _, arch := range []int{80, 90} {
			ck, err := Compile(k, Options{Arch: arch})
			if err != nil {
				t.Errorf("%s: compile: %v", c.Name, err)
				continue
			}
			if strings.Contains(ck.PTX, ".target sm_90a") {
				// wgmma (.version 8.0): beyond this ptxas; TestWgmmaDot checks
				// such kernels structurally, the GPU round assembles them
				continue
			}
			file := filepath.Join(dir, strings.NewReplacer("/", "_", "=", "").Replace(c.Name)+".ptx")
			if err := os.WriteFile(file, []byte(ck.PTX), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(ptxas, "-arch=sm_"+itoa(arch), "-o", os.DevNull, file).CombinedOutput()
			if err != nil {
				t.Errorf("%s sm_%d: ptxas: %v\n%s", c.Name, arch, err, firstLines(string(out), 20))
			}
		}
	}
}

func itoa(n int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + string(rune('0'+n/10)) + string(rune('0'+n%10)))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
