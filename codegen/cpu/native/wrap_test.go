package native_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// wrappedMatmul is C = A·B as Triton's matmul tutorial writes it: the
// rows and columns of a program's operand tiles are its offsets modulo M
// and N (offs_am = (pid_m·BM + arange(BM)) % M), so that loads of A and B
// need masks along K only and the last blocks wrap to the first rows; C
// is stored masked. Args: a, b, c []float32, M, N, K (row-major).
func wrappedMatmul(t *testing.T, bm, bn, bk int) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("matmul_wrapped", tile.Meta{"BM": bm, "BN": bn, "BK": bk})
	a, bp, c := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	M, N, K := b.Param("M", tile.I32), b.Param("N", tile.I32), b.Param("K", tile.I32)
	rm := b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm))
	rn := b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn))
	am, bnn := b.ExpandDims(b.Rem(rm, M), 1), b.ExpandDims(b.Rem(rn, N), 0) // wrapped
	rk := b.Arange(0, bk)
	rkRow, rkCol := b.ExpandDims(rk, 0), b.ExpandDims(rk, 1)
	init := []*tile.Value{b.Zeros(tile.F32, bm, bn), b.AddPtr(a, b.Add(b.Mul(am, K), rkRow)), b.AddPtr(bp, b.Add(b.Mul(rkCol, N), bnn))}
	res := b.For(0, K, bk, init, func(k *tile.Value, cv []*tile.Value) []*tile.Value {
		av := b.Load(cv[1], b.Lt(b.Add(rkRow, k), K), 0.0)
		bv := b.Load(cv[2], b.Lt(b.Add(rkCol, k), K), 0.0)
		return []*tile.Value{b.Dot(av, bv, cv[0], tile.PrecIEEE), b.AddPtr(cv[1], bk), b.AddPtr(cv[2], b.Mul(N, bk))}
	})
	cm, cn := b.ExpandDims(rm, 1), b.ExpandDims(rn, 0)
	b.Store(b.AddPtr(c, b.Add(b.Mul(cm, N), cn)), res[0], b.And(b.Lt(cm, M), b.Lt(cn, N)))
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestWrappedOffsetsNative: Triton's matmul tutorial, whose offsets are
// taken modulo M and N (parameters), runs as machine code: the divisors
// are made constants per launch (Kernel.Specialize: one copy per (M, N)
// a launch passes, kept), and a program whose block straddles a multiple
// of one (the last row or column of blocks where M or N is not a multiple
// of the block) bails out alone and runs on the executor (native.Partial)
// while the machine code runs the others. Every shape agrees with the
// interpreter within the products' bound of float64 through cpu.Exec;
// nk.Launch reports exactly the straddling programs; a block longer than
// the divisor is left to the executor (ErrFallback); C is poisoned first;
// launches with the same divisors again allocate nothing.
// (Before 2026-12-07 Compile declined the kernel: a divisor not a constant.)
func TestWrappedOffsetsNative(t *testing.T) {
	requireJIT(t)
	const bm, bn, bk = 32, 32, 16
	k := wrappedMatmul(t, bm, bn, bk)
	nk, err := native.Compile(k)
	if err != nil {
		t.Fatalf("declined: %v", err)
	}
	defer nk.Free()
	e, err := cpu.NewExec(k, cpu.WithNative(true))
	if err != nil || !e.Native() {
		t.Fatalf("cpu.NewExec: %v (native %v: %v)", err, e.Native(), e.NativeErr())
	}
	for _, c := range []struct {
		m, n, kk int
		fallback bool // a block spans more than a divisor
	}{
		{64, 96, 48, false},  // no block straddles
		{70, 50, 45, false},  // the last row and column of blocks do
		{33, 100, 20, false}, // rows: 32 + 1
		{20, 64, 16, true},   // M < BM
		{70, 50, 45, false},  // again: the copy kept
	} {
		t.Run(fmt.Sprintf("%dx%dx%d", c.m, c.n, c.kk), func(t *testing.T) {
			rng := tiletest.RNG(fmt.Sprint("wrapped", c.m, c.n, c.kk))
			a, b := tiletest.Uniform(rng, c.m*c.kk, -1, 1), tiletest.Uniform(rng, c.kk*c.n, -1, 1)
			grid := tile.Grid{(c.m + bm - 1) / bm, (c.n + bn - 1) / bn}
			want := make([]float32, c.m*c.n) // the interpreter's, shown beside a wrong element
			if err := interp.Interpret(k, grid, a, b, want, c.m, c.n, c.kk); err != nil {
				t.Fatal(err)
			}
			// the machine code alone: which programs it leaves
			got := make([]float32, c.m*c.n)
			err := nk.Launch(grid, a, b, got, c.m, c.n, c.kk)
			var straddle []int
			for p := 0; p < grid[0]*grid[1]; p++ {
				x, y := p%grid[0], p/grid[0]
				if (x+1)*bm > c.m && c.m%bm != 0 || (y+1)*bn > c.n && c.n%bn != 0 {
					straddle = append(straddle, p)
				}
			}
			var pe *native.Partial
			switch {
			case c.fallback:
				if !errors.Is(err, native.ErrFallback) || errors.As(err, &pe) {
					t.Fatalf("nk.Launch: %v, want ErrFallback for the whole launch", err)
				}
			case len(straddle) == 0:
				if err != nil {
					t.Fatalf("nk.Launch: %v", err)
				}
			default:
				if !errors.As(err, &pe) || !slices.Equal(pe.Programs, straddle) || !errors.Is(err, native.ErrFallback) {
					t.Fatalf("nk.Launch: %v, want native.Partial of programs %v", err, straddle)
				}
			}
			// through the executor for what the machine code leaves
			for i := range got {
				got[i] = float32(math.NaN())
			}
			if err := e.Launch(grid, a, b, got, c.m, c.n, c.kk); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < c.m; i++ {
				for j := 0; j < c.n; j++ {
					var w, mag float64
					for q := 0; q < c.kk; q++ {
						x, y := float64(a[i*c.kk+q]), float64(b[q*c.n+j])
						w += x * y
						mag += math.Abs(x * y)
					}
					tol := 2 * float64(c.kk+1) * 0x1p-24 * mag
					if g := float64(got[i*c.n+j]); !(math.Abs(g-w) <= tol) {
						t.Fatalf("c[%d,%d] = %v (interpreter %v), want %v (±%.3g)", i, j, g, want[i*c.n+j], w, tol)
					}
				}
			}
		})
	}
	if got := native.Specials(nk); got != 4 {
		t.Errorf("%d specialized copies, want 4 (one per distinct M and N)", got)
	}
	// a loop's launches with the same divisors find their copy without
	// allocating (the latest kept: special.go)
	if !raceEnabled {
		const m, n, kk = 64, 96, 48
		a, b, c := make([]float32, m*kk), make([]float32, kk*n), make([]float32, m*n)
		grid, args := tile.Grid{m / bm, n / bn}, []any{a, b, c, m, n, kk}
		if err := nk.Launch(grid, args...); err != nil {
			t.Fatal(err)
		}
		if allocs := testing.AllocsPerRun(10, func() {
			if err := nk.Launch(grid, args...); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("%v allocations per launch with the same divisors, want 0", allocs)
		}
	}
}
