package native_test

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// launcher runs kernels natively; a launch that falls back is an error
// here (the tests want to see the native code run).
type launcher struct{}

func (launcher) Name() string { return "native" }

func (launcher) Launch(k *tile.Kernel, grid tile.Grid, args ...any) error {
	nk, err := native.Compile(k)
	if err != nil {
		return err
	}
	defer nk.Free()
	return nk.Launch(grid, args...)
}

// inexact names the ops whose native results may differ from the
// reference interpreter's (each bound is the executor's: see
// codegen/cpu's TestInexactOps); every other op computes the same
// operations in the same order.
func inexact(v *tile.Value) string {
	switch {
	case v.Op == tile.OpExp && v.Type.DType == tile.F32:
		return "f32 exp: codegen/cpu's expf, within 1 ulp"
	case v.Op == tile.OpTanh && v.Type.DType == tile.F32:
		return "f32 tanh: codegen/cpu's tanhf, within 1 ulp"
	case v.Op == tile.OpReduceSum && v.Aux == int64(v.Args[0].Type.Shape.Rank-1) && v.Args[0].Type.Shape.Dims[v.Aux] > 8:
		return "f32 sum along the last axis: sixteen partial sums"
	}
	return ""
}

func requireJIT(t *testing.T) {
	t.Helper()
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
}

// TestAgainstReference runs every conformance case the native code
// generator supports, natively and on the reference interpreter from the
// same inputs: bit for bit where the kernel has no inexact op, else within
// the case's tolerance. It reports how many cases ran natively and why
// the others did not.
func TestAgainstReference(t *testing.T) {
	requireJIT(t)
	ran, exact, total := 0, 0, 0
	why := map[string]int{}
	for _, c := range tiletest.Cases() {
		total++
		k, err := c.Kernel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := native.Compile(k); err != nil {
			if !errors.Is(err, native.ErrUnsupported) {
				t.Errorf("%s: %v", c.Name, err)
				continue
			}
			msg := err.Error()
			if i := strings.Index(msg, "): "); i >= 0 {
				msg = msg[i+3:]
			}
			why[strings.TrimSuffix(msg, ": "+native.ErrUnsupported.Error())]++
			if testing.Verbose() {
				t.Logf("%s: %v", c.Name, err)
			}
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if c.Large && testing.Short() {
				t.Skip("large case: skipped with -short")
			}
			reasons := map[string]bool{}
			k.Walk(func(v *tile.Value) {
				if s := inexact(v); s != "" {
					reasons[s] = true
				}
			})
			cc := c
			if len(reasons) == 0 {
				cc.Tol = tiletest.Tol{}
				exact++
			}
			ran++
			if err := tiletest.Compare(launcher{}, tiletest.Interp{}, cc); err != nil {
				var rs []string
				for s := range reasons {
					rs = append(rs, s)
				}
				sort.Strings(rs)
				t.Fatalf("%v\ninexact ops: %v\n%v", err, rs, k)
			}
		})
	}
	var rs []string
	for s, n := range why {
		rs = append(rs, s+": "+itoa(n))
	}
	sort.Strings(rs)
	t.Logf("%d of %d conformance cases ran natively (%d bit-exact by their ops); not supported:\n  %s", ran, total, exact, strings.Join(rs, "\n  "))
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestDivRemLanes: x / n and x % n of contiguous lanes are affine within a
// block when the block does not straddle a multiple of n (a bias indexed
// by the column of a flat offset); a program where it would, bails out,
// and the launch falls back (the executor gets it right).
func TestDivRemLanes(t *testing.T) {
	requireJIT(t)
	const block = 64
	b := tile.NewBuilder("divrem", tile.Meta{"BLOCK": block})
	x, bias, w, y := b.Ptr("x", tile.F32), b.Ptr("bias", tile.F32), b.Ptr("w", tile.F32), b.Ptr("y", tile.F32)
	size := b.Param("size", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
	m := b.Lt(offs, size)
	col := b.Rem(offs, 96)
	row := b.Div(offs, 96)
	v := b.Add(b.Load(b.AddPtr(x, offs), m, nil), b.Mul(b.Load(b.AddPtr(bias, col), m, nil), b.Load(b.AddPtr(w, row), m, nil)))
	b.Store(b.AddPtr(y, offs), v, m)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	nk, err := native.Compile(k)
	if err != nil {
		t.Fatal(err)
	}
	defer nk.Free()
	rng := tiletest.RNG("divrem")
	for _, c := range []struct {
		name     string
		size     int
		fallback bool
	}{
		{"blocks within rows", 96 * 2, true}, // 64-lane blocks straddle multiples of 96: program 1 bails
		{"one block", 60, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			xs, bs, ws := tiletest.Uniform(rng, c.size, -1, 1), tiletest.Uniform(rng, 96, -1, 1), tiletest.Uniform(rng, c.size/96+1, -1, 1)
			got, want := tiletest.Output(c.size), tiletest.Output(c.size)
			grid := tile.Grid{(c.size + block - 1) / block}
			err := nk.Launch(grid, xs, bs, ws, got, c.size)
			if c.fallback {
				if !errors.Is(err, native.ErrFallback) {
					t.Fatalf("launch: %v, want ErrFallback", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := (tiletest.Interp{}).Launch(k, grid, xs, bs, ws, want, c.size); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("y[%d] = %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}
