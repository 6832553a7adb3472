package native_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestTritonMatmulNative: a matmul written as Triton's tutorial writes it
// (kernels.Matmul: pointer blocks carried through the K loop and advanced
// by BLOCK_K·stride each iteration, strides passed as parameters) runs as
// machine code: the carried pointers as affine forms of the iteration
// (plan: inducedPointer), the strides between lanes (sak, sbn, scn) taken
// as 1 and checked at each launch. Row-major operands run natively (no
// fallback) within the products' bound of float64, at every precision,
// with masked edges; a transposed operand (a stride not 1) runs natively
// on a copy specialized for its strides (tile.Kernel.Specialize, compiled
// at its first launch and kept), C stored transposed too; a pointer
// advanced by an offset that changes each iteration is declined.
func TestTritonMatmulNative(t *testing.T) {
	requireJIT(t)
	const m, n, kk = 70, 50, 45
	rng := tiletest.RNG("triton")
	a, b := tiletest.Uniform(rng, m*kk, -1, 1), tiletest.Uniform(rng, kk*n, -1, 1)
	at, bt := make([]float32, kk*m), make([]float32, n*kk) // A and B stored transposed
	for i := 0; i < m; i++ {
		for q := 0; q < kk; q++ {
			at[q*m+i] = a[i*kk+q]
		}
	}
	for q := 0; q < kk; q++ {
		for j := 0; j < n; j++ {
			bt[j*kk+q] = b[q*n+j]
		}
	}
	// strides sam, sak, sbk, sbn, scm, scn; special: the specialized
	// copies the launch compiles (the first launch at those strides)
	layouts := []struct {
		name    string
		a, b    []float32
		strides [6]int
		special int
	}{
		{"row-major", a, b, [6]int{kk, 1, n, 1, n, 1}, 0},
		{"A transposed (sak = M)", at, b, [6]int{1, m, n, 1, n, 1}, 1},
		{"B transposed (sbn = K)", a, bt, [6]int{kk, 1, 1, kk, n, 1}, 1},
		{"both transposed", at, bt, [6]int{1, m, 1, kk, n, 1}, 1},
		{"A transposed again: the copy reused", at, b, [6]int{1, m, n, 1, n, 1}, 0},
		{"C transposed (scn = M)", a, b, [6]int{kk, 1, n, 1, 1, m}, 1},
	}
	for _, prec := range []tile.Precision{tile.PrecIEEE, tile.PrecTF32, tile.PrecBF16, tile.PrecTF32x3} {
		t.Run(prec.String(), func(t *testing.T) {
			k, err := kernels.Matmul(tile.Meta{"BM": 32, "BN": 32, "BK": 16, "PREC": int(prec)})
			if err != nil {
				t.Fatal(err)
			}
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				nk, err := native.Compile(k)
				if err != nil {
					t.Fatalf("%s: declined: %v", isa, err)
				}
				var names []string
				for _, i := range native.UnitParams(nk) {
					names = append(names, k.Params[i].Name)
				}
				if !slices.Equal(names, []string{"sak", "sbn", "scn"}) {
					t.Errorf("%s: strides taken as 1: %v, want sak, sbn, scn", isa, names)
				}
				grid := tile.Grid{(m + 31) / 32, (n + 31) / 32}
				for _, l := range layouts {
					c := make([]float32, m*n)
					for i := range c {
						c[i] = float32(math.NaN())
					}
					s := l.strides
					before := native.Specials(nk)
					err := nk.Launch(grid, l.a, l.b, c, m, n, kk, s[0], s[1], s[2], s[3], s[4], s[5])
					if err != nil {
						t.Fatalf("%s: %s: %v", isa, l.name, err)
					}
					if got, want := native.Specials(nk)-before, l.special; got != want {
						t.Errorf("%s: %s: %d specialized copies compiled, want %d", isa, l.name, got, want)
					}
					ca, cb := func(x float32) float32 { return x }, func(x float32) float32 { return x }
					if ra, rb := prec.Operands(); ra != nil {
						ca, cb = ra, rb
					}
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							var want, mag float64
							for q := 0; q < kk; q++ {
								x, y := float64(a[i*kk+q]), float64(b[q*n+j])
								if prec != tile.PrecTF32x3 {
									x, y = float64(ca(a[i*kk+q])), float64(cb(b[q*n+j]))
								}
								want += x * y
								mag += math.Abs(x * y)
							}
							tol := 2 * (kk + 1) * 0x1p-24 * mag
							if prec == tile.PrecTF32x3 {
								tol += 4 * 0x1p-21 * mag // the split's low-order products left out
							}
							if got := float64(c[i*s[4]+j*s[5]]); !(math.Abs(got-want) <= tol) {
								t.Fatalf("%s: %s: c[%d,%d] = %v, want %v (±%.3g)", isa, l.name, i, j, got, want, tol)
							}
						}
					}
				}
				nk.Free()
			}
		})
	}
	t.Run("offset that changes", func(t *testing.T) {
		bl := tile.NewBuilder("changing", tile.Meta{"BLOCK": 16})
		x, y := bl.Ptr("x", tile.F32), bl.Ptr("y", tile.F32)
		r := bl.Arange(0, 16)
		res := bl.For(0, 64, 16, []*tile.Value{bl.Zeros(tile.F32, 16), bl.AddPtr(x, r)}, func(iv *tile.Value, cv []*tile.Value) []*tile.Value {
			acc := bl.Add(cv[0], bl.Load(cv[1], nil, nil))
			return []*tile.Value{acc, bl.AddPtr(cv[1], iv)} // advanced by the iteration's own value
		})
		bl.Store(bl.AddPtr(y, r), res[0], nil)
		k, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		_, err = native.Compile(k)
		if !errors.Is(err, native.ErrUnsupported) || !strings.Contains(err.Error(), "offset that changes") {
			t.Fatalf("compiled: %v, want a decline for the changing offset", err)
		}
	})
}
