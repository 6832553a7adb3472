package native_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestPeriodicMasksNative: the remainder of affine lanes by a constant
// they span (remconst.go; declined before: "integer rem whose lanes span
// more than the divisor") read by a mask and by a cast to float runs as
// machine code with the interpreter's bits: y = where(r == c, x, −x) +
// f(r), r = (i·s + j + off) % d, over 13 rows of 37 in blocks of 16×64
// (masked rows and columns), off a parameter (negative offsets give
// negative remainders, the sign of the dividend; offsets near int32's
// bounds wrap as the reference's i32 arithmetic does), divisors up to
// maxPeriod, f32 and f64, on each ISA. Such a remainder read as an address is still declined, and so is
// a divisor past maxPeriod.
func TestPeriodicMasksNative(t *testing.T) {
	requireJIT(t)
	const rows, cols = 13, 37
	// the remainder's dividend is i·stride + j + off
	build := func(d tile.DType, div, c, stride int, addr bool) (*tile.Kernel, error) {
		b := tile.NewBuilder("periodic", nil)
		x, y := b.Ptr("x", d), b.Ptr("y", d)
		off := b.Param("off", tile.I32)
		i := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16)), 1)
		j := b.ExpandDims(b.Arange(0, 64), 0)
		sh := tile.Shp(16, 64)
		idx := b.Add(b.BroadcastTo(b.Mul(i, cols), sh), b.BroadcastTo(j, sh))
		mask := b.And(b.BroadcastTo(b.Lt(i, rows), sh), b.BroadcastTo(b.Lt(j, cols), sh))
		dividend := b.Add(b.BroadcastTo(b.Mul(i, stride), sh), b.BroadcastTo(j, sh))
		r := b.Rem(b.Add(dividend, b.Splat(off, sh)), b.Splat(b.Const(float64(div), tile.I32), sh))
		if addr { // the remainder as an offset: not affine
			v := b.Load(b.AddPtr(x, r), mask, nil)
			b.Store(b.AddPtr(y, idx), v, mask)
			return b.Build()
		}
		v := b.Load(b.AddPtr(x, idx), mask, nil)
		keep := b.Eq(r, b.Splat(b.Const(float64(c), tile.I32), sh))
		out := b.Add(b.Where(keep, v, b.Neg(v)), b.Cast(r, d))
		b.Store(b.AddPtr(y, idx), out, mask)
		return b.Build()
	}
	rng := tiletest.RNG("periodic")
	xs := make([]float64, rows*cols)
	for i := range xs {
		xs[i] = float64(float32(rng.Float64()*8 - 4))
	}
	for _, d := range []tile.DType{tile.F32, tile.F64} {
		for _, c := range []struct{ div, c, off, stride int }{
			{2, 0, 0, cols}, {3, 0, 5, cols}, {3, -2, -300, cols}, {7, 4, -1, cols}, {64, 3, 11, cols}, {100, 17, -250, cols},
			{native.MaxPeriod, 5, 1 << 30, 1 << 21}, {native.MaxPeriod - 1, -7, -(1 << 30), 1 << 21}, {12345, 0, -(1 << 31) + 1000, 1 << 24}, {12345, 3, (1 << 31) - 1000, 1 << 24},
		} {
			t.Run(fmt.Sprintf("%v d=%d c=%d off=%d stride=%d", d, c.div, c.c, c.off, c.stride), func(t *testing.T) {
				k, err := build(d, c.div, c.c, c.stride, false)
				if err != nil {
					t.Fatal(err)
				}
				for _, isa := range isas(t) {
					nk := compileFor(t, isa, k)
					grid := tile.Grid{1}
					run := func(launch func(args ...any) error) ([]float64, error) {
						return launchIn(d, xs, rows*cols, rows*cols, func(args ...any) error { return launch(append(args, c.off)...) })
					}
					got, want, _ := againstReference(t, isa, nk, k, grid, false, run)
					sameBits64(t, isa, got, want, len(want))
				}
			})
		}
	}
	for _, c := range []struct {
		name string
		div  int
		addr bool
	}{
		{"as an address", 3, true},
		{"a divisor past maxPeriod", native.MaxPeriod + 1, false},
	} {
		t.Run("declined: "+c.name, func(t *testing.T) {
			k, err := build(tile.F32, c.div, 0, 1<<21, c.addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := native.Compile(k); !errors.Is(err, native.ErrUnsupported) {
				t.Fatalf("compiled: %v, want a decline", err)
			}
		})
	}
}
