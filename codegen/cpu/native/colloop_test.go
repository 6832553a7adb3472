package native_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// colLoopCase is a column sum written as graphpass writes its column form,
// with the knobs the register loop (colloop.go) must get right: a carried
// [br, bo] tile (rank 1 where br is 0) added down rows [lo, hi) in steps
// of step (br rows a step, one where br is 0), each program a block of bo
// columns of rows n elements apart (n a constant, or a run-time parameter
// where runtimeStride), the load first in the add where loadFirst, then
// the tile's rows summed and stored.
type colLoopCase struct {
	name          string
	m, n          int // rows, the row stride (≥ the columns read)
	br, bo        int
	blocks        int // column blocks (programs)
	lo, hi        int
	runtimeStride bool
	loadFirst     bool
	nans          bool // NaNs of several payloads and infinities in the input
	want          int  // column loops in registers expected with AVX-512
}

func (c colLoopCase) kernel(t *testing.T) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("colloop", nil)
	px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	var stride any = c.n
	if c.runtimeStride {
		stride = b.Param("n", tile.I32)
	}
	cols := b.Add(b.Mul(b.ProgramID(0), c.bo), b.Arange(0, c.bo))
	step, shape := max(1, c.br), []int{c.bo}
	if c.br > 0 {
		shape = []int{c.br, c.bo}
	}
	acc := b.For(c.lo, c.hi, step, []*tile.Value{b.Zeros(tile.F32, shape...)}, func(r0 *tile.Value, cv []*tile.Value) []*tile.Value {
		var off *tile.Value
		if c.br > 0 {
			rows := b.Add(b.ExpandDims(b.Arange(0, c.br), 1), r0)
			off = b.Add(b.Mul(rows, stride), b.ExpandDims(cols, 0))
		} else {
			off = b.Add(b.Mul(r0, stride), cols)
		}
		v := b.Load(b.AddPtr(px, off), nil, nil)
		if c.loadFirst {
			return []*tile.Value{b.Add(v, cv[0])}
		}
		return []*tile.Value{b.Add(cv[0], v)}
	})[0]
	sum := acc
	if c.br > 0 {
		sum = b.Sum(acc, 0)
	}
	b.Store(b.AddPtr(py, cols), sum, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestColumnLoopsNative: column sums whose loop takes the register form
// (colloop.go, AVX-512) give the reference's sums bit for bit, and the
// same bits as the frame form (SetColLoops(false)) and the AVX2 code, on
// a poisoned output: tiles of 1 to 16 rows, rank 1, strides that leave
// rows misaligned, a stride known only at run time, the load as the add's
// first operand, NaN payloads (which operand's NaN comes out), one
// iteration, none, a range that is not a multiple of the step; tiles of
// partial vectors and of more rows than row pointers are declined.
func TestColumnLoopsNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []colLoopCase{
		{name: "2×768 of 777-wide rows (colsum small's block)", m: 84, n: 777, br: 2, bo: 768, blocks: 1, lo: 0, hi: 84, want: 1},
		{name: "2×1024 of 1024-wide rows, two blocks of 512", m: 40, n: 1024, br: 2, bo: 512, blocks: 2, lo: 0, hi: 40, want: 1},
		{name: "2×1024 over 200 rows of 1024 (800 KB: strips with prefetches)", m: 200, n: 1024, br: 2, bo: 1024, blocks: 1, lo: 0, hi: 200, want: 1},
		{name: "2×768 over 200 rows of 777 (600 KB, rows sharing pages: the frame form at run time)", m: 200, n: 777, br: 2, bo: 768, blocks: 1, lo: 0, hi: 200, want: 1},
		{name: "4×96, rows 197 apart, two blocks, a chunk from row 5", m: 65, n: 197, br: 4, bo: 96, blocks: 2, lo: 5, hi: 65, want: 1},
		{name: "16×32: many rows, one pointer", m: 160, n: 33, br: 16, bo: 32, blocks: 1, lo: 0, hi: 160, want: 1},
		{name: "rank 1: 96 columns of rows 101 apart", m: 37, n: 101, bo: 96, blocks: 1, lo: 0, hi: 37, want: 1},
		{name: "2×64, the stride a parameter", m: 30, n: 70, br: 2, bo: 64, blocks: 1, lo: 0, hi: 30, runtimeStride: true, want: 1},
		{name: "8×16, the stride a parameter: more rows than pointers, declined", m: 24, n: 19, br: 8, bo: 16, blocks: 1, lo: 0, hi: 24, runtimeStride: true},
		{name: "2×256, load + acc, NaN payloads", m: 48, n: 259, br: 2, bo: 256, blocks: 1, lo: 0, hi: 48, loadFirst: true, nans: true, want: 1},
		{name: "2×256, acc + load, NaN payloads", m: 48, n: 259, br: 2, bo: 256, blocks: 1, lo: 0, hi: 48, nans: true, want: 1},
		{name: "one iteration", m: 2, n: 40, br: 2, bo: 32, blocks: 1, lo: 0, hi: 2, want: 1},
		{name: "no iteration: the zeros", m: 4, n: 40, br: 2, bo: 32, blocks: 1, lo: 3, hi: 3, want: 1},
		{name: "4 rows a step from 3 below 12: the last step's rows past hi", m: 15, n: 37, br: 4, bo: 32, blocks: 1, lo: 3, hi: 12, want: 1},
		{name: "8 columns: not a whole zmm vector, declined", m: 12, n: 9, br: 2, bo: 8, blocks: 1, lo: 0, hi: 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := c.kernel(t)
			x := tiletest.Uniform(tiletest.RNG(c.name), c.m*c.n, -2, 2)
			if c.nans {
				for i := range x {
					switch i % 37 {
					case 3:
						x[i] = math.Float32frombits(0x7fc00000 | uint32(i))
					case 11:
						x[i] = math.Float32frombits(0xffc00000 | uint32(i)<<2)
					case 19:
						x[i] = float32(math.Inf(1 - 2*(i%2)))
					}
				}
			}
			grid := tile.Grid{c.blocks}
			run := func(launch func(args ...any) error) []float32 {
				y := make([]float32, c.blocks*c.bo)
				for i := range y {
					y[i] = float32(math.NaN())
				}
				args := []any{x, y}
				if c.runtimeStride {
					args = append(args, c.n)
				}
				if err := launch(args...); err != nil {
					t.Fatal(err)
				}
				return y
			}
			want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				for _, regs := range []bool{false, true} {
					was := native.SetColLoops(regs)
					nk, err := native.Compile(k)
					native.SetColLoops(was)
					if err != nil {
						t.Fatalf("%s: not compiled natively: %v", isa, err)
					}
					wantLoops := 0
					if regs && isa == "avx512" {
						wantLoops = c.want
					}
					if got := native.ColLoops(nk); got != wantLoops {
						t.Errorf("%s, registers %v: %d column loops in registers, want %d", isa, regs, got, wantLoops)
					}
					got := run(func(args ...any) error { return nk.Launch(grid, args...) })
					nk.Free()
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s, registers %v: y[%d] = %v (%#x), reference %v (%#x)", isa, regs, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		})
	}
}

// TestColumnLoopFaults: a register column loop whose rows leave the
// buffer (at the last iteration, or the first) or whose step is not
// positive makes the launch fall back to the executor (ErrFallback), as
// the frame form does; nothing is written past the output.
func TestColumnLoopFaults(t *testing.T) {
	requireAVX512(t, "the register column loop is zmm code")
	for _, c := range []struct {
		name  string
		c     colLoopCase
		short int // elements taken off the input
	}{
		{name: "the last rows past the end", c: colLoopCase{m: 20, n: 40, br: 2, bo: 32, blocks: 1, lo: 0, hi: 20, want: 1}, short: 9},
		{name: "the first rows before the start", c: colLoopCase{m: 20, n: 40, br: 2, bo: 32, blocks: 1, lo: -2, hi: 20, want: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := c.c.kernel(t)
			was := native.SetColLoops(true)
			nk, err := native.Compile(k)
			native.SetColLoops(was)
			if err != nil {
				t.Fatal(err)
			}
			defer nk.Free()
			if native.ColLoops(nk) != 1 {
				t.Fatalf("%d column loops in registers, want 1", native.ColLoops(nk))
			}
			x := make([]float32, c.c.m*c.c.n-c.short)
			y := make([]float32, c.c.bo)
			if err := nk.Launch(tile.Grid{1}, x, y); !errors.Is(err, native.ErrFallback) {
				t.Fatalf("launch: %v, want ErrFallback", err)
			}
		})
	}
}

// TestColumnLoopsGraphpass: graphpass's column sums for a native CPU
// target (parts of row chunks, and one chunk of whole rows) take the
// register loop on AVX-512 for every tile of whole vectors (not sibling
// sums, whose Σ x⊙y is a product of loads), and keep the
// reference's bits (TestColumnPartsNative and TestColumnsInlineNative
// check the values; this, that the loops are the register form).
func TestColumnLoopsGraphpass(t *testing.T) {
	requireAVX512(t, "the register column loop is zmm code")
	tg := graphpass.CPU(16)
	tg.Native = true
	for _, c := range []struct {
		rows, cols int
		op         string
		want       int
	}{
		{1000, 777, "sum", 2}, // 768 columns and the tail of 16
		{8192, 1024, "sum", 1},
		{64, 777, "sum", 2},
		{3001, 768, "siblings", 0}, // Σ x⊙y is not a load: the loop stays in the frame
		{20, 1000, "sum", 1},
	} {
		t.Run(fmt.Sprintf("%s %d×%d", c.op, c.rows, c.cols), func(t *testing.T) {
			k, _ := columnKernel(t, c.rows, c.cols, c.op, tg)
			nk, err := native.Compile(k.Tile)
			if err != nil {
				t.Fatal(err)
			}
			defer nk.Free()
			if got := native.ColLoops(nk); got != c.want {
				t.Errorf("%d column loops in registers, want %d (meta %v)\n%v", got, c.want, k.Tile.Meta, k.Tile)
			}
		})
	}
}
