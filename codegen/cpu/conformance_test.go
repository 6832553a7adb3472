package cpu_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// launcher is the executor as a tiletest.Launcher.
type launcher struct{}

func (launcher) Name() string { return "cpu" }

func (launcher) Launch(k *tile.Kernel, grid tile.Grid, args ...any) error {
	return cpu.Run(k, grid, args...)
}

// TestConformance runs the whole conformance table on the executor,
// against each case's float64 reference.
func TestConformance(t *testing.T) {
	tiletest.Run(t, launcher{}, tiletest.Cases())
}

// TestSemantics checks masks, faults, grids, atomics and loops.
func TestSemantics(t *testing.T) { tiletest.RunSemantics(t, launcher{}) }

// TestOps checks each op's values at special inputs.
func TestOps(t *testing.T) { tiletest.RunOps(t, launcher{}) }

// inexact names the ops whose results here may differ from the reference
// interpreter's, and why; every other op is computed by the same operations
// in the same order, and a kernel made only of those must agree bit for bit.
// The bound of each (one application) is checked on its own in
// TestInexactOps; through a whole kernel, the case's Tol bounds it.
func inexact(v *tile.Value) string {
	switch {
	case v.Op == tile.OpDot && cpu.VectorDot():
		return "dot: fused multiply-adds (AVX2/FMA), one rounding a step instead of two"
	case v.Op == tile.OpExp && v.Type.DType == tile.F32:
		return "f32 exp: expf (the vector kernel's scalar twin), within 1 ulp of the reference's float32(e^x)"
	case v.Op == tile.OpTanh && v.Type.DType == tile.F32:
		return "f32 tanh: tanhf, within 1 ulp of the reference's float32(tanh x)"
	case v.Op == tile.OpReduceSum && v.Aux == int64(v.Args[0].Type.Shape.Rank-1) && v.Type.DType.IsFloat():
		return "float sum along the last axis: f32 rows in sixteen partial sums, f64 in four, not in order"
	case v.Op == tile.OpAtomicAdd && v.Type.DType.IsFloat():
		return "float atomic add: programs add in the order they happen to run"
	}
	return ""
}

// TestAgainstReference runs every case of the conformance table (the large
// ones too, but with -short) on the executor and on the reference
// interpreter from the same inputs: bit for bit equal buffers where the
// kernel has no inexact op, within the case's Tol where it has.
func TestAgainstReference(t *testing.T) {
	exact, total := 0, 0
	for _, c := range tiletest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Large && testing.Short() {
				t.Skip("large case: skipped with -short")
			}
			k, err := c.Kernel()
			if err != nil {
				t.Fatal(err)
			}
			why := map[string]bool{}
			k.Walk(func(v *tile.Value) {
				if s := inexact(v); s != "" {
					why[s] = true
				}
			})
			cc := c
			if len(why) == 0 {
				cc.Tol = tiletest.Tol{}
				exact++
			}
			total++
			if err := tiletest.Compare(launcher{}, tiletest.Interp{}, cc); err != nil {
				reasons := make([]string, 0, len(why))
				for s := range why {
					reasons = append(reasons, s)
				}
				sort.Strings(reasons)
				t.Fatalf("%v\ninexact ops: %s", err, strings.Join(append(reasons, "none: must be bit-exact")[:max(len(reasons), 1)], "; "))
			}
		})
	}
	t.Logf("%d of %d cases bit-exact by their ops", exact, total)
}

// nativeLauncher runs kernels as machine code where codegen/cpu/native
// supports them (and falls back as Exec does), counting the kernels that
// ran natively.
type nativeLauncher struct{ native, total *atomic.Int32 }

func newNativeLauncher() nativeLauncher {
	return nativeLauncher{new(atomic.Int32), new(atomic.Int32)}
}

func (nativeLauncher) Name() string { return "cpu+native" }

func (l nativeLauncher) Launch(k *tile.Kernel, grid tile.Grid, args ...any) error {
	e, err := cpu.NewExec(k, cpu.WithNative(true))
	if err != nil {
		return err
	}
	if e.NativeErr() != nil && !errors.Is(e.NativeErr(), native.ErrUnsupported) {
		return fmt.Errorf("native code generation failed: %w", e.NativeErr())
	}
	l.total.Add(1)
	if e.Native() {
		l.native.Add(1)
	}
	return e.Launch(grid, args...)
}

func (l nativeLauncher) report(t *testing.T) {
	t.Logf("%d of %d kernels ran as native code", l.native.Load(), l.total.Load())
}

// TestConformanceNative, TestSemanticsNative and TestOpsNative run the
// table, the semantics (faults included: they fall back to the executor,
// which reports them) and the ops at special inputs with native code on.
// Every kernel of the three compiles to machine code where this CPU runs
// it (issue 16: since 2026-12-07's fifty-seventh session, the table's 160
// of 160, the semantics' 25 of 25 and the ops' 69 of 69; the table 162 of
// 162 with the fifty-eighth's persistent products, loops nested in
// loops); each test fails where one does not.
func TestConformanceNative(t *testing.T) {
	l := newNativeLauncher()
	tiletest.Run(t, l, tiletest.Cases())
	l.report(t)
	l.allNative(t, "conformance")
}

func TestSemanticsNative(t *testing.T) {
	l := newNativeLauncher()
	tiletest.RunSemantics(t, l)
	l.report(t)
	l.allNative(t, "semantics")
}

func TestOpsNative(t *testing.T) {
	l := newNativeLauncher()
	tiletest.RunOps(t, l)
	l.report(t)
	l.allNative(t, "ops")
}

// allNative fails t where a kernel l launched was not machine code on a
// CPU that runs it.
func (l nativeLauncher) allNative(t *testing.T, what string) {
	if jit.Supported() && l.native.Load() != l.total.Load() {
		t.Errorf("%d of the %d %s kernels are not machine code", l.total.Load()-l.native.Load(), l.total.Load(), what)
	}
}
