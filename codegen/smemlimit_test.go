package codegen_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// selfDot is tiletest.DotSelf's kernel, y = x·x for one n×n block.
func selfDot(t *testing.T, n int, p tile.Precision) *tile.Kernel {
	t.Helper()
	k, err := tiletest.DotSelf(n, p).Kernel()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSharedMemoryLimit: a TF32 product through shared memory (a dot
// outside a K loop) runs on the tensor cores where its padded operands and
// C fit the target's shared memory, and by FMAs on the same converted
// operands where only they do (128×128×128: 198 KB with C, more than
// sm_80's 163 KB a CTA; found by a random kernel in the PTX simulator,
// which refused the launch); a kernel that needs more than the target has
// is refused by Compile, saying so, not at launch.
func TestSharedMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		arch int
		mma  bool
	}{{80, false}, {90, true}} {
		k := selfDot(t, 128, tile.PrecTF32)
		ck, err := codegen.Compile(k, codegen.Options{Arch: c.arch})
		if err != nil {
			t.Fatalf("sm_%d: %v", c.arch, err)
		}
		if got := strings.Contains(ck.PTX, "mma.sync"); got != c.mma {
			t.Errorf("sm_%d: mma.sync %v, want %v (%d bytes of shared memory)", c.arch, got, c.mma, ck.SharedBytes)
		}
		limit := map[int]int{80: 163 << 10, 90: 227 << 10}[c.arch]
		if ck.SharedBytes > limit {
			t.Errorf("sm_%d: %d bytes of shared memory, more than %d", c.arch, ck.SharedBytes, limit)
		}
		// the result as the spec's, in the simulator (and the case's float64 reference)
		if err := tiletest.Compare(&ptxsim.Launcher{Arch: c.arch}, tiletest.Interp{}, tiletest.DotSelf(128, tile.PrecTF32)); err != nil {
			t.Errorf("sm_%d: %v", c.arch, err)
		}
	}
	_, err := codegen.Compile(selfDot(t, 256, tile.PrecIEEE), codegen.Options{Arch: 90})
	if !errors.Is(err, codegen.ErrSharedMemory) || !strings.Contains(err.Error(), "bytes of shared memory, more than sm_90's 232448 a CTA") {
		t.Fatalf("a 256×256×256 dot through shared memory (512 KB): %v", err)
	}
}
