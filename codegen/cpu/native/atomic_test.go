package native_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// colSums is out[j] += Σ_i x[i, j] over an m×n row-major x, one bm×bn
// tile a program, its column sums added atomically (the programs down a
// column of tiles add to the same elements); one = true adds every
// element of the tile to out[0] instead (every lane one address).
func colSums(t *testing.T, d tile.DType, bm, bn int, one bool) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder(fmt.Sprintf("col_sums_%v", d), tile.Meta{"BM": bm, "BN": bn})
	x, out := b.Ptr("x", d), b.Ptr("out", d)
	m, n := b.Param("m", tile.I32), b.Param("n", tile.I32)
	rm := b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm))
	rn := b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn))
	r2, c2 := b.ExpandDims(rm, 1), b.ExpandDims(rn, 0)
	in := b.And(b.Lt(r2, m), b.Lt(c2, n))
	v := b.Load(b.AddPtr(x, b.Add(b.Mul(r2, n), c2)), in, 0.0)
	if one {
		b.AtomicAdd(b.AddPtr(out, b.Mul(b.Add(r2, c2), 0)), v, in)
	} else {
		b.AtomicAdd(b.AddPtr(out, rn), b.Sum(v, 0), b.Lt(rn, n))
	}
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestAtomicAddNative: atomic adds run as machine code (a compare-and-swap
// loop a lane), f32 and f64, masked and not, contiguous lanes and every
// lane to one element, with many programs adding to the same elements on
// the pool's workers: each result within the sum's bound of float64 (the
// programs add in the order they run). A launch that falls back after
// programs have added (an f32 sin past 2^17 in the last program bails
// out) leaves the buffer as it was (the executor then adds once), bit for
// bit. A buffer also loaded or stored is declined (old values read are
// not, since the fifty-eighth session: TestBlockAtomicOldValuesNative).
// (Before 2026-12-07 Compile declined every atomic add.)
func TestAtomicAddNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		d      tile.DType
		m, n   int
		bm, bn int
		one    bool
	}{
		{tile.F32, 512, 64, 16, 32, false},
		{tile.F32, 300, 70, 16, 32, false}, // masked edges
		{tile.F64, 300, 70, 16, 8, false},
		{tile.F32, 100, 13, 8, 16, true},
		{tile.F64, 100, 13, 8, 8, true},
	} {
		name := fmt.Sprintf("%v/%dx%d/one=%v", c.d, c.m, c.n, c.one)
		t.Run(name, func(t *testing.T) {
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, colSums(t, c.d, c.bm, c.bn, c.one))
				rng := tiletest.RNG(name)
				x64 := make([]float64, c.m*c.n)
				for i := range x64 {
					x64[i] = float64(float32(rng.Float64()*2 - 1))
				}
				outLen := c.n
				if c.one {
					outLen = 1
				}
				want, mag := make([]float64, outLen), make([]float64, outLen)
				for i := 0; i < c.m; i++ {
					for j := 0; j < c.n; j++ {
						o := j
						if c.one {
							o = 0
						}
						want[o] += x64[i*c.n+j]
						mag[o] += math.Abs(x64[i*c.n+j])
					}
				}
				grid := tile.Grid{(c.m + c.bm - 1) / c.bm, (c.n + c.bn - 1) / c.bn}
				var got []float64
				if c.d == tile.F32 {
					x := make([]float32, len(x64))
					for i := range x {
						x[i] = float32(x64[i])
					}
					out := make([]float32, outLen)
					if err := nk.Launch(grid, x, out, c.m, c.n); err != nil {
						t.Fatalf("%s: %v", isa, err)
					}
					for _, v := range out {
						got = append(got, float64(v))
					}
				} else {
					out := make([]float64, outLen)
					if err := nk.Launch(grid, x64, out, c.m, c.n); err != nil {
						t.Fatalf("%s: %v", isa, err)
					}
					got = out
				}
				u := 0x1p-24
				if c.d == tile.F64 {
					u = 0x1p-53
				}
				for j := range want {
					if tol := float64(c.m+1) * u * mag[j]; !(math.Abs(got[j]-want[j]) <= tol) {
						t.Fatalf("%s: out[%d] = %v, want %v (±%.3g)", isa, j, got[j], want[j], tol)
					}
				}
			}
		})
	}

	t.Run("fallback restores", func(t *testing.T) {
		b := tile.NewBuilder("sin_sums", tile.Meta{"BLOCK": 16})
		x, out := b.Ptr("x", tile.F32), b.Ptr("out", tile.F32)
		lanes := b.Arange(0, 16)
		v := b.Load(b.AddPtr(x, b.Add(b.Mul(b.ProgramID(0), 16), lanes)), nil, nil)
		b.AtomicAdd(b.AddPtr(out, lanes), b.Sin(v), nil)
		_, nk := buildNative(t, b)
		defer nk.Free()
		const progs = 64
		xs := make([]float32, progs*16)
		for i := range xs {
			xs[i] = float32(i%7) * 0.25
		}
		xs[len(xs)-3] = 1e6 // past the machine code's bound: that program bails out
		sums := make([]float32, 16)
		for i := range sums {
			sums[i] = float32(i) + 0.5
		}
		before := slices.Clone(sums)
		err := nk.Launch(tile.Grid{progs}, xs, sums)
		var p *native.Partial
		if !errors.Is(err, native.ErrFallback) || errors.As(err, &p) {
			t.Fatalf("launch: %v, want ErrFallback for the whole launch", err)
		}
		if !slices.Equal(sums, before) {
			t.Fatalf("after the fallback out = %v, want it as it was, %v", sums, before)
		}
	})

	t.Run("declined", func(t *testing.T) {
		for _, c := range []struct {
			name, want string
			build      func(b *tile.Builder, x, out *tile.Value, r *tile.Value)
		}{
			{"buffer also loaded", "adds to atomically", func(b *tile.Builder, x, out, r *tile.Value) {
				v := b.Load(b.AddPtr(out, r), nil, nil)
				b.AtomicAdd(b.AddPtr(out, r), v, nil)
			}},
			{"buffer also stored", "also adds to atomically", func(b *tile.Builder, x, out, r *tile.Value) {
				b.AtomicAdd(b.AddPtr(out, r), b.Load(b.AddPtr(x, r), nil, nil), nil)
				b.Store(b.AddPtr(out, r), 1.0, nil)
			}},
		} {
			b := tile.NewBuilder("declined", tile.Meta{"BLOCK": 16})
			x, out := b.Ptr("x", tile.F32), b.Ptr("out", tile.F32)
			c.build(b, x, out, b.Arange(0, 16))
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			_, err = native.Compile(k)
			if !errors.Is(err, native.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a decline saying %q", c.name, err, c.want)
			}
		}
	})
}

// TestScalarAtomicAddNative: scalar atomic adds, each program adding one
// value to one of three counters (i32, f32 and f64; a value computed from
// the program id, a parameter's or a constant; the odd programs' adds
// masked off), as machine code on every worker: the counters hold the
// sums exactly (integer-valued floats, so every order gives them). A
// counter past its buffer falls back. (Before 2026-12-07 a scalar atomic
// add sent the kernel to the executor.)
func TestScalarAtomicAddNative(t *testing.T) {
	requireJIT(t)
	const progs = 3001
	for _, d := range []tile.DType{tile.I32, tile.F32, tile.F64} {
		t.Run(d.String(), func(t *testing.T) {
			b := tile.NewBuilder("scalar_atomics", nil)
			ctr := b.Ptr("ctr", d)
			w := b.Param("w", d)
			p := b.ProgramID(0)
			even := b.Eq(b.Rem(p, int32(2)), int32(0))
			var v *tile.Value
			if d == tile.I32 {
				v = b.Add(p, int32(1))
			} else {
				v = b.Cast(b.Add(p, int32(1)), d)
			}
			b.AtomicAdd(b.AddPtr(ctr, b.Rem(p, int32(3))), v, even)
			b.AtomicAdd(b.AddPtr(ctr, int32(3)), w, nil)
			b.AtomicAdd(b.AddPtr(ctr, int32(4)), b.Const(2, d), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float64, 5)
			for q := 0; q < progs; q += 2 {
				want[q%3] += float64(q + 1)
			}
			want[3], want[4] = 3*progs, 2*progs
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				got := make([]float64, 5)
				switch d {
				case tile.I32:
					c := make([]int32, 5)
					if err := nk.Launch(tile.Grid{progs}, c, int32(3)); err != nil {
						t.Fatalf("%s: %v", isa, err)
					}
					for i, x := range c {
						got[i] = float64(x)
					}
				case tile.F32:
					c := make([]float32, 5)
					if err := nk.Launch(tile.Grid{progs}, c, float32(3)); err != nil {
						t.Fatalf("%s: %v", isa, err)
					}
					for i, x := range c {
						got[i] = float64(x)
					}
				default:
					if err := nk.Launch(tile.Grid{progs}, got, 3.0); err != nil {
						t.Fatalf("%s: %v", isa, err)
					}
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s: counter %d = %v, want %v", isa, i, got[i], want[i])
					}
				}
				// four counters: the fifth's adds lie past the buffer
				var short any = make([]float64, 4)
				switch d {
				case tile.I32:
					short = make([]int32, 4)
				case tile.F32:
					short = make([]float32, 4)
				}
				var wv any = 3.0
				switch d {
				case tile.I32:
					wv = int32(3)
				case tile.F32:
					wv = float32(3)
				}
				if err := nk.Launch(tile.Grid{progs}, short, wv); !errors.Is(err, native.ErrFallback) {
					t.Fatalf("%s: a counter past the buffer: %v, want ErrFallback", isa, err)
				}
			}
		})
	}
}

// TestScalarAtomicOldValuesNative: each even program takes a ticket from a
// counter (a scalar atomic add of 1 whose old value it stores, i32, f32
// and f64), the odd ones' adds masked off (their old value 0, as the
// reference gives a disabled lane), plus the ticket added to a vector the
// program stores: as machine code on every worker the even programs'
// tickets are 0 … E−1, each once, and the counter E. (Before 2026-12-07
// an atomic add whose old value was read sent the kernel to the executor.)
func TestScalarAtomicOldValuesNative(t *testing.T) {
	requireJIT(t)
	const progs = 2001
	const evens = (progs + 1) / 2
	for _, d := range []tile.DType{tile.I32, tile.F32, tile.F64} {
		t.Run(d.String(), func(t *testing.T) {
			b := tile.NewBuilder("tickets", nil)
			ctr, olds, vec := b.Ptr("ctr", d), b.Ptr("olds", d), b.Ptr("vec", d)
			p := b.ProgramID(0)
			even := b.Eq(b.Rem(p, int32(2)), int32(0))
			old := b.AtomicAdd(b.AddPtr(ctr, 0), b.Const(1, d), even)
			b.Store(b.AddPtr(olds, p), old, nil)
			r := b.Arange(0, 8)
			rv := r
			if d != tile.I32 {
				rv = b.Cast(r, d)
			}
			b.Store(b.AddPtr(vec, b.Add(b.Mul(p, int32(8)), r)), b.Add(rv, b.Splat(old, tile.Shp(8))), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				var c, o, v []float64
				switch d {
				case tile.I32:
					ci, oi, vi := make([]int32, 1), make([]int32, progs), make([]int32, 8*progs)
					if err := nk.Launch(tile.Grid{progs}, ci, oi, vi); err != nil {
						t.Fatalf("%s: %v", isa, err)
					}
					c, o, v = f64s(ci), f64s(oi), f64s(vi)
				case tile.F32:
					cf, of, vf := make([]float32, 1), make([]float32, progs), make([]float32, 8*progs)
					if err := nk.Launch(tile.Grid{progs}, cf, of, vf); err != nil {
						t.Fatalf("%s: %v", isa, err)
					}
					c, o, v = f64s(cf), f64s(of), f64s(vf)
				default:
					c, o, v = make([]float64, 1), make([]float64, progs), make([]float64, 8*progs)
					if err := nk.Launch(tile.Grid{progs}, c, o, v); err != nil {
						t.Fatalf("%s: %v", isa, err)
					}
				}
				if c[0] != evens {
					t.Fatalf("%s: counter %v, want %d", isa, c[0], evens)
				}
				seen := make([]bool, evens)
				for q := range progs {
					for l := range 8 {
						if v[8*q+l] != o[q]+float64(l) {
							t.Fatalf("%s: program %d's vector lane %d = %v, its ticket %v", isa, q, l, v[8*q+l], o[q])
						}
					}
					if q%2 == 1 {
						if o[q] != 0 {
							t.Fatalf("%s: masked-off program %d got %v, want 0", isa, q, o[q])
						}
						continue
					}
					tk := int(o[q])
					if float64(tk) != o[q] || tk < 0 || tk >= evens || seen[tk] {
						t.Fatalf("%s: program %d's ticket %v is not a new one of 0…%d", isa, q, o[q], evens-1)
					}
					seen[tk] = true
				}
			}
		})
	}
}

func f64s[T int32 | float32](x []T) []float64 {
	out := make([]float64, len(x))
	for i, e := range x {
		out[i] = float64(e)
	}
	return out
}

// TestGlobalSumAtomicNative: each program adds the sum of its block (a
// tail masked off) to one total with a scalar atomic add — a global sum,
// the pattern of a loss's total — in f32, f64 and i32, as machine code:
// the total exact (integer-valued elements, so every order of the adds
// gives it).
func TestGlobalSumAtomicNative(t *testing.T) {
	requireJIT(t)
	const n, block = 1000, 64
	want := 0
	for i := range n {
		want += i % 7
	}
	for _, d := range []tile.DType{tile.F32, tile.F64, tile.I32} {
		t.Run(d.String(), func(t *testing.T) {
			b := tile.NewBuilder("global_sum", nil)
			x, out := b.Ptr("x", d), b.Ptr("out", d)
			offs := b.Add(b.Mul(b.ProgramID(0), int32(block)), b.Arange(0, block))
			v := b.Load(b.AddPtr(x, offs), b.Lt(offs, int32(n)), b.Const(0, d))
			b.AtomicAdd(b.AddPtr(out, 0), b.Reduce(tile.OpReduceSum, v, 0), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				var got float64
				grid := tile.Grid{(n + block - 1) / block}
				switch d {
				case tile.F32:
					xs, o := make([]float32, n), []float32{0}
					for i := range xs {
						xs[i] = float32(i % 7)
					}
					err = nk.Launch(grid, xs, o)
					got = float64(o[0])
				case tile.F64:
					xs, o := make([]float64, n), []float64{0}
					for i := range xs {
						xs[i] = float64(i % 7)
					}
					err = nk.Launch(grid, xs, o)
					got = o[0]
				default:
					xs, o := make([]int32, n), []int32{0}
					for i := range xs {
						xs[i] = int32(i % 7)
					}
					err = nk.Launch(grid, xs, o)
					got = float64(o[0])
				}
				if err != nil {
					t.Fatalf("%s: %v", isa, err)
				}
				if got != float64(want) {
					t.Fatalf("%s: total %v, want %d", isa, got, want)
				}
			}
		})
	}
}

// TestBlockAtomicOldValuesNative: atomic adds of blocks whose old values
// are read run as machine code, bit for bit the reference interpreter on
// poisoned outputs (declined before the fifty-eighth session, 2026-12-07:
// "atomics of blocks whose old values are read"): each lane's old value is
// the one the compare-and-swap found, in lane order within a program (a
// bin's tickets where lanes of a vector share a bin), 0 for a lane masked
// off; i32, f32 and f64; rows narrower than a vector; the old values read
// in a later phase at other lanes (transposed) and reduced.
func TestBlockAtomicOldValuesNative(t *testing.T) {
	requireJIT(t)
	t.Run("tickets of i32 bins, lanes sharing a bin, a masked tail", func(t *testing.T) {
		b := tile.NewBuilder("tickets_block", nil)
		x, cnt, tk := b.Ptr("x", tile.I32), b.Ptr("cnt", tile.I32), b.Ptr("tickets", tile.I32)
		n := b.Param("n", tile.I32)
		offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
		m := b.Lt(offs, n)
		bin := b.Load(b.AddPtr(x, offs), m, 0)
		old := b.AtomicAdd(b.AddPtr(cnt, bin), b.Full(1, tile.I32, 64), m)
		b.Store(b.AddPtr(tk, offs), b.Add(b.Mul(old, 10), b.Sum(old, 0)), m)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		rng := tiletest.RNG("tickets_block")
		xs := make([]int32, 200)
		for i := range xs {
			xs[i] = int32(rng.IntN(5))
		}
		bitsAgainstReference(t, k, tile.Grid{1}, func(launch func(args ...any) error) []uint32 {
			// one program (tickets depend on the order programs run in),
			// its 64 lanes the first 57 elements
			cnt, tks := make([]int32, 5+8), make([]int32, 64+8)
			for i := range tks {
				tks[i] = -7
			}
			if err := launch(xs, cnt, tks, int32(57)); err != nil {
				t.Fatal(err)
			}
			return append(bitsI32(cnt), bitsI32(tks)...)
		})
	})
	for _, d := range []tile.DType{tile.F32, tile.F64} {
		t.Run(d.String()+" blocks of rows narrower than a vector, read transposed", func(t *testing.T) {
			b := tile.NewBuilder("old_block", nil)
			x, acc, y := b.Ptr("x", d), b.Ptr("acc", d), b.Ptr("y", d)
			p := b.ProgramID(0)
			i, j := b.ExpandDims(b.Arange(0, 4), 1), b.ExpandDims(b.Arange(0, 4), 0)
			at := b.Add(b.Add(b.Mul(p, 16), b.Mul(i, 4)), j) // each program its own 4×4 block of acc
			v := b.Load(b.AddPtr(x, at), nil, nil)
			old := b.AtomicAdd(b.AddPtr(acc, at), b.Mul(v, 2.0), b.Ne(i, j)) // the diagonal masked off
			out := b.Add(b.Trans(old), b.Max(old, 1, true))
			b.Store(b.AddPtr(y, at), out, nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			xs := tiletest.Uniform(tiletest.RNG("old_block"), 3*16, -2, 2)
			bitsAgainstReference(t, k, tile.Grid{3}, func(launch func(args ...any) error) []uint32 {
				if d == tile.F32 {
					acc := tiletest.Uniform(tiletest.RNG("old_block acc"), 3*16, -1, 1)
					y := tiletest.Output(3 * 16)
					if err := launch(xs, acc, y); err != nil {
						t.Fatal(err)
					}
					return append(bitsF32(acc), bitsF32(y)...)
				}
				x64, acc := make([]float64, len(xs)), make([]float64, len(xs))
				for i, v := range xs {
					x64[i], acc[i] = float64(v)/3, float64(i)/7-1
				}
				y := make([]float64, 3*16+8)
				for i := range y {
					y[i] = math.NaN()
				}
				if err := launch(x64, acc, y); err != nil {
					t.Fatal(err)
				}
				return append(bitsF64(acc), bitsF64(y)...)
			})
		})
	}
}
