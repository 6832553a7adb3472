package tile_test

import (
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestBuilderErrors: each user mistake is an error naming the kernel, the
// caller's line, the op and what is wrong; the builder never panics.
func TestBuilderErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *tile.Builder)
		want  string
	}{
		{"shapes do not broadcast", func(b *tile.Builder) {
			b.Add(b.Zeros(tile.F32, 128), b.Zeros(tile.F32, 64))
		}, "add: operands tensor<128xf32> and tensor<64xf32>: shapes [128] and [64] do not broadcast"},
		{"[M,1] with [N]", func(b *tile.Builder) {
			b.Mul(b.Zeros(tile.F32, 16, 2), b.Zeros(tile.F32, 4))
		}, "shapes [16,2] and [4] do not broadcast"},
		{"load from a non-pointer", func(b *tile.Builder) {
			b.Load(b.Zeros(tile.F32, 16), nil, nil)
		}, "load from tensor<16xf32>, not a pointer"},
		{"mask not i1", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(b.AddPtr(p, b.Arange(0, 16)), b.Arange(0, 16), nil)
		}, "mask must be i1, is tensor<16xi32>"},
		{"mask shape", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(b.AddPtr(p, b.Arange(0, 16)), b.Lt(b.Arange(0, 32), 3), nil)
		}, "mask tensor<32xi1> does not match pointer shape [16]"},
		{"other without mask", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(p, nil, 1.0)
		}, "other without a mask"},
		{"store of another dtype", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Store(b.AddPtr(p, b.Arange(0, 16)), b.Arange(0, 16), nil)
		}, "value tensor<16xi32> does not match pointer tensor<16x!tt.ptr<f32>>: cast it first"},
		{"pointer arithmetic with a float", func(b *tile.Builder) {
			b.AddPtr(b.Ptr("p", tile.F32), 1.5)
		}, "offset f32 must be i32 or i64"},
		{"pointer in arithmetic", func(b *tile.Builder) {
			b.Mul(b.Ptr("p", tile.F32), 2)
		}, "is a pointer: use AddPtr"},
		{"exp of an int", func(b *tile.Builder) {
			b.Exp(b.Arange(0, 16))
		}, "exp is not defined on tensor<16xi32>"},
		{"dot inner dimensions", func(b *tile.Builder) {
			b.Dot(b.Zeros(tile.F32, 16, 32), b.Zeros(tile.F32, 16, 16), nil, tile.PrecIEEE)
		}, "inner dimensions 32 and 16 differ"},
		{"dot too small", func(b *tile.Builder) {
			b.Dot(b.Zeros(tile.F32, 8, 16), b.Zeros(tile.F32, 16, 16), nil, tile.PrecIEEE)
		}, "M, N and K must be at least 16"},
		{"loop-carried type changes", func(b *tile.Builder) {
			b.For(0, 4, 1, []*tile.Value{b.Zeros(tile.F32, 16)}, func(_ *tile.Value, c []*tile.Value) []*tile.Value {
				return []*tile.Value{b.Sum(c[0], 0)}
			})
		}, "loop-carried value 0 changes type from tensor<16xf32> to f32"},
		{"loop returns too few", func(b *tile.Builder) {
			b.For(0, 4, 1, []*tile.Value{b.F32(1)}, func(_ *tile.Value, c []*tile.Value) []*tile.Value { return nil })
		}, "loop body returns 0 values, the loop carries 1"},
		{"float loop bounds", func(b *tile.Builder) {
			b.For(0, 4.5, 1, nil, func(_ *tile.Value, c []*tile.Value) []*tile.Value { return nil })
		}, "bounds and step must be scalar integers"},
		{"missing meta", func(b *tile.Builder) { b.BlockSize("BLOCK") }, "meta-parameter BLOCK is not set"},
		{"nil operand", func(b *tile.Builder) { b.Add(nil, 1) }, "add: operand is nil"},
		{"nil value operand", func(b *tile.Builder) { var v *tile.Value; b.Add(v, 1) }, "add: operand 0 is nil"},
		{"Go string operand", func(b *tile.Builder) { b.Add("x", 1) }, "operand of Go type string"},
		{"select on a float condition", func(b *tile.Builder) { b.Where(b.F32(1), 1, 2) }, "condition must be i1"},
		{"reshape changes element count", func(b *tile.Builder) { b.Reshape(b.Arange(0, 16), 4, 8) }, "cannot reshape tensor<16xi32> to [4,8]"},
		{"repeated parameter", func(b *tile.Builder) { b.Ptr("x", tile.F32); b.Param("x", tile.I32) }, `parameter name "x" is empty or already taken`},
		{"pointer to i64", func(b *tile.Builder) { b.Ptr("x", tile.I64) }, "pointers are to f32, f64 or i32"},
		{"reduce axis", func(b *tile.Builder) { b.Sum(b.Zeros(tile.F32, 4, 4), 2) }, "axis 2 of tensor<4x4xf32>"},
		{"expand_dims axis", func(b *tile.Builder) { b.ExpandDims(b.Zeros(tile.F32, 4), 2) }, "axis 2 of tensor<4xf32>"},
		{"rank 4", func(b *tile.Builder) { b.ExpandDims(b.Zeros(tile.F32, 2, 2, 2), 0) }, "rank below 3"},
		{"program_id axis", func(b *tile.Builder) { b.ProgramID(3) }, "axis 3 is outside 0..2"},
		{"i32 constant out of range", func(b *tile.Builder) { b.I32(1 << 40) }, "is not an i32"},
		{"two cache hints", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(p, nil, nil, tile.CacheStreaming, tile.CacheDefault)
		}, "give at most one known hint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("oops", tile.Meta{})
			c.build(b)
			// later calls after an error must not panic
			b.Store(b.Ptr("late", tile.F32), b.Exp(b.Add(b.Zeros(tile.F32, 16), 1.0)), nil)
			_, err := b.Build()
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not mention %q", msg, c.want)
			}
			if !strings.HasPrefix(msg, "tile: @oops: builder_test.go:") {
				t.Fatalf("error %q does not start with the kernel and the caller's file:line", msg)
			}
		})
	}
}

// TestWeakLiteralPromotion: Go numbers take the other operand's dtype;
// a float literal beside ints makes f32; typed Go numbers keep their dtype.
func TestWeakLiteralPromotion(t *testing.T) {
	b := tile.NewBuilder("promo", nil)
	i := b.Arange(0, 16)
	cases := []struct {
		v    *tile.Value
		want tile.Type
	}{
		{b.Add(i, 1), tile.BlockOf(tile.I32, 16)},
		{b.Mul(i, 0.5), tile.BlockOf(tile.F32, 16)},
		{b.Add(b.Cast(i, tile.F64), 1), tile.BlockOf(tile.F64, 16)},
		{b.Add(i, int64(1)), tile.BlockOf(tile.I64, 16)},
		{b.Add(i, float32(1)), tile.BlockOf(tile.F32, 16)},
		{b.Add(b.Cast(i, tile.F32), b.F64(1)), tile.BlockOf(tile.F64, 16)},
		{b.Lt(i, 3.5), tile.BlockOf(tile.I1, 16)},
		{b.Add(1, 2), tile.ScalarOf(tile.I32)},
		{b.Add(b.ExpandDims(i, 1), b.ExpandDims(i, 0)), tile.BlockOf(tile.I32, 16, 16)},
	}
	if _, err := b.Build(); err != nil {
		t.Fatal(err)
	}
	for n, c := range cases {
		if c.v.Type != c.want {
			t.Errorf("case %d: %v, want %v", n, c.v.Type, c.want)
		}
	}
}
