package tile_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// stridedCopy is y[i] = x[i·s] + n over blocks of 16 (s an i32 stride, n
// an i64 offset), inside a loop of two: both parameters read in the
// body and in the loop's.
func stridedCopy(t *testing.T) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("strided", tile.Meta{"BLOCK": 16})
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	s, n := b.Param("s", tile.I32), b.Param("n", tile.I64)
	b.Param("scale", tile.F32)
	lanes := b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16))
	acc := b.For(0, 2, 1, []*tile.Value{b.Zeros(tile.F32, 16)}, func(_ *tile.Value, cv []*tile.Value) []*tile.Value {
		v := b.Load(b.AddPtr(x, b.Mul(lanes, s)), nil, nil)
		return []*tile.Value{b.Add(cv[0], b.Add(v, b.Cast(n, tile.F32)))}
	})
	b.Store(b.AddPtr(y, lanes), acc[0], nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSpecialize: a kernel whose integer parameters are specialized to the
// values a launch passes computes what it computes from those arguments
// (the interpreter, bit for bit), keeps its parameters (the launch passes
// the same arguments) and leaves the original unchanged; the specialized
// parameters are read by no value. Specializing a pointer, a float, a
// parameter past the list or an i32 out of its range is an error.
func TestSpecialize(t *testing.T) {
	k := stridedCopy(t)
	x := make([]float32, 3*32*3)
	for i := range x {
		x[i] = float32(i)
	}
	for _, c := range []struct {
		name string
		vals map[int]int64
	}{
		{"stride", map[int]int64{2: 3}},
		{"stride and offset", map[int]int64{2: 3, 3: -7}},
		{"none", map[int]int64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, got := make([]float32, 32), make([]float32, 32)
			for i := range got {
				got[i] = -1
			}
			if err := interp.Interpret(k, tile.Grid{2}, x, want, 3, -7, 1.5); err != nil {
				t.Fatal(err)
			}
			before := k.String()
			sk, err := k.Specialize(c.vals)
			if err != nil {
				t.Fatal(err)
			}
			if k.String() != before {
				t.Fatal("Specialize changed the kernel")
			}
			if len(sk.Params) != len(k.Params) {
				t.Fatalf("%d parameters, want %d", len(sk.Params), len(k.Params))
			}
			sk.Walk(func(v *tile.Value) {
				for _, a := range v.Args {
					if a.Op == tile.OpParam && c.vals[slices.Index(sk.Params, a)] != 0 {
						t.Errorf("%s still reads specialized parameter %s", v, a.Name)
					}
				}
			})
			// the launch's own arguments: a specialized one is not read
			if err := interp.Interpret(sk, tile.Grid{2}, x, got, 3, -7, 1.5); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
	for _, c := range []struct {
		name string
		vals map[int]int64
		want string
	}{
		{"pointer", map[int]int64{0: 1}, "not a scalar integer"},
		{"float", map[int]int64{4: 1}, "not a scalar integer"},
		{"past the parameters", map[int]int64{5: 1}, "parameter 5 of 5"},
		{"negative", map[int]int64{-1: 1}, "parameter -1 of 5"},
		{"i32 out of range", map[int]int64{2: 1 << 31}, "out of its range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := k.Specialize(c.vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want an error saying %q", err, c.want)
			}
		})
	}
}
