package native_test

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// divKernel is y = x / b over rows of block lanes, x and b both vectors.
func divKernel(t *testing.T, block int) *tile.Kernel {
	t.Helper()
	bl := tile.NewBuilder("div_vectors", tile.Meta{"BLOCK": block})
	px, pb, py := bl.Ptr("x", tile.F32), bl.Ptr("b", tile.F32), bl.Ptr("y", tile.F32)
	off := bl.Add(bl.Mul(bl.ProgramID(0), block), bl.Arange(0, block))
	q := bl.Div(bl.Load(bl.AddPtr(px, off), nil, nil), bl.Load(bl.AddPtr(pb, off), nil, nil))
	bl.Store(bl.AddPtr(py, off), q, nil)
	k, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// runDiv compiles k with Newton's steps everywhere or nowhere (newton;
// and the probe and slow-path poison as given), runs it over x and b into
// NaN-poisoned outputs, and gives them with the kernel's count of
// divisions by Newton's steps.
func runDiv(t *testing.T, k *tile.Kernel, block int, x, b []float32, newton, probe, poison bool) ([]float32, int) {
	t.Helper()
	mode := native.SetDivNewtonMode(0)
	defer native.SetDivNewtonMode(mode)
	native.SetDivNewton(newton)
	native.SetDivNewtonProbe(probe)
	native.SetDivSlowPoison(poison)
	nk, err := native.Compile(k)
	native.SetDivNewtonProbe(false)
	native.SetDivSlowPoison(false)
	if err != nil {
		t.Fatal(err)
	}
	defer nk.Free()
	y := make([]float32, len(x))
	for i := range y {
		y[i] = math.Float32frombits(0x7fc0dead)
	}
	if err := nk.Launch(tile.Grid{len(x) / block}, x, b, y); err != nil {
		t.Fatal(err)
	}
	return y, native.DivNewtons(nk)
}

// TestDivNewtonNative: with Newton's steps on (native.SetDivNewton), a zmm
// loop's division of two vectors is the
// reciprocal's estimate, two Newton steps and two FMA corrections (ops.go:
// divNewton), and every quotient is Go's float32 division's, the correctly
// rounded one, bit for bit, as VDIVPS gives it (the switch off: checked
// too). Markstein's premise, that the two steps give y = RN(1/b), is
// checked on this CPU's VRCP14PS for every significand (the probe: the
// fast vectors give y), in [1, 2) and, but with -short, at the range's
// ends and below 1. The quotients: dividends near the divisor's multiples
// of midpoints (a = RN(b·m), m halfway between two floats: the hardest to
// round), in the usual range, of random bits, and vectors with one special
// lane (±0, ±Inf, NaN, subnormals, the extremes, significands of all
// ones) in x or in b; rows of 1024 (paired loops) and 16 (one vector a
// row); poisoned outputs. Which vectors take the steps is checked too
// (SetDivSlowPoison: those whose lanes of x and b all lie in [2^-62, 2^62]
// and whose b has no significand of all ones). The default mode (products
// on Intel, else off) is TestDivNewtonModes'.
func TestDivNewtonNative(t *testing.T) {
	requireAVX512(t, "no zmm loop")
	was := native.SetAVX512(true)
	defer native.SetAVX512(was)
	f := math.Float32frombits

	t.Run("reciprocals", func(t *testing.T) {
		const block = 1024
		k := divKernel(t, block)
		exps := []int{127} // [1, 2)
		if !testing.Short() {
			exps = append(exps, 127-62, 126, 127+61) // [2^-62, 2^-61), [1/2, 1), [2^61, 2^62)
		}
		x := make([]float32, 1<<23)
		for i := range x {
			x[i] = 1
		}
		b := make([]float32, 1<<23)
		for _, e := range exps {
			for i := range b {
				b[i] = f(uint32(e)<<23 | uint32(i))
			}
			y, n := runDiv(t, k, block, x, b, true, true, false)
			if n == 0 {
				t.Fatal("no division by Newton's steps in the code")
			}
			bad := 0
			for i, v := range y {
				if want := 1 / b[i]; math.Float32bits(v) != math.Float32bits(want) {
					if bad++; bad <= 5 {
						t.Errorf("1/%v (%#x): Newton's steps give %#x, RN(1/b) %#x", b[i], math.Float32bits(b[i]), math.Float32bits(v), math.Float32bits(want))
					}
				}
			}
			if bad > 0 {
				t.Fatalf("exponent %d: %d of %d reciprocals are not RN(1/b)", e-127, bad, len(b))
			}
		}
		t.Logf("every significand's reciprocal RN(1/b) at %d exponents", len(exps))
	})

	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		f(0x7fa00001), f(0x3fffffff), f(0x4b7fffff), 0x1p-62, 0x1p62, 0x1.fffffep61, 0x1p-63, 0x1p63, f(0x00400000), math.MaxFloat32, math.SmallestNonzeroFloat32}
	inRange := func(v float32) bool { a := math.Abs(float64(v)); return a >= 0x1p-62 && a <= 0x1p62 }
	for _, c := range []struct {
		name        string
		block, rows int
	}{
		{name: "rows of 1024", block: 1024, rows: 1000},
		{name: "rows of 16", block: 16, rows: 64000},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := divKernel(t, c.block)
			rng := rand.New(rand.NewPCG(17, uint64(c.block)))
			n := c.rows * c.block
			x, b := make([]float32, n), make([]float32, n)
			for i := range b {
				switch {
				case (i/16)%5 == 4 && i%16 == (i/80)%16: // a special lane in b
					b[i] = specials[(i/80)%len(specials)]
				case (i/16)%5 == 1 && i%4 == 0: // all ones in the significand, or a power of two
					b[i] = f(uint32(rng.IntN(100)+77)<<23 | uint32(rng.IntN(2))*0x7fffff | uint32(rng.IntN(2))<<31)
				default: // [2^-50, 2^50), either sign
					b[i] = f(uint32(rng.IntN(100*(1<<23))+77<<23) | uint32(rng.IntN(2))<<31)
				}
			}
			// by vector of 16 lanes: kind 0 near multiples of midpoints, 1
			// the usual range (divisors of all-ones significands or powers
			// of two in every fourth lane), 2 random bits, 3 the usual range
			// with one special lane in x, 4 the usual range (a special lane
			// in b)
			dividends(rng, x, func(i int) float32 { return b[i] }, 5, [2]int{97, 60}, [2]int{115, 24}, inRange, specials)
			got, nn := runDiv(t, k, c.block, x, b, true, false, false)
			if nn == 0 {
				t.Fatal("no division by Newton's steps in the code")
			}
			div, n0 := runDiv(t, k, c.block, x, b, false, false, false)
			if n0 != 0 {
				t.Fatalf("switch off: %d divisions by Newton's steps", n0)
			}
			bad := 0
			for i, v := range got {
				want := x[i] / b[i]
				same := math.Float32bits(v) == math.Float32bits(want) || v != v && want != want
				if !same || math.Float32bits(v) != math.Float32bits(div[i]) {
					if bad++; bad <= 5 {
						t.Errorf("%v / %v (%#x / %#x) = %#x, Go %#x, VDIVPS %#x", x[i], b[i], math.Float32bits(x[i]), math.Float32bits(b[i]), math.Float32bits(v), math.Float32bits(want), math.Float32bits(div[i]))
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d quotients differ", bad, len(got))
			}
			routed, _ := runDiv(t, k, c.block, x, b, true, false, true)
			fast := 0
			for v := 0; v < n/16; v++ {
				want := true
				for i := v * 16; i < v*16+16; i++ {
					want = want && inRange(x[i]) && inRange(b[i]) && math.Float32bits(b[i])&0x7fffff != 0x7fffff
				}
				took := math.Float32bits(routed[v*16]) != native.DivPoison
				if took != want {
					t.Fatalf("vector %d: Newton's steps %v, want %v", v, took, want)
				}
				if took {
					fast++
				}
			}
			if fast < n/16/5 {
				t.Errorf("only %d of %d vectors took Newton's steps", fast, n/16)
			}
			t.Logf("%d quotients, %d of %d vectors by Newton's steps", n, fast, n/16)
		})
	}
}

// TestDivNewtonModes: TILEFUSE_NATIVE_DIVNEWTON's values (0 nowhere,
// products in kernels with a product, 1 everywhere; unset or anything else:
// products on Intel CPUs, nowhere on others), the mode this process
// started with, and the products mode itself: an elementwise division
// keeps VDIVPS while a product's GELU epilogue (bias and GELU's exp form,
// as graphpass writes FF1) takes Newton's steps, its outputs bit for bit
// those of VDIVPS (and of the NaN-poisoned outputs none left).
func TestDivNewtonModes(t *testing.T) {
	for _, c := range []struct {
		env   string
		intel bool
		want  int32
	}{
		{"", true, 1}, {"", false, 0}, {"0", true, 0}, {"0", false, 0}, {"products", false, 1},
		{"1", false, 2}, {"1", true, 2}, {"yes", true, 1}, {"yes", false, 0},
	} {
		if got := native.DivNewtonFrom(c.env, c.intel); got != c.want {
			t.Errorf("TILEFUSE_NATIVE_DIVNEWTON=%q on an Intel CPU %v: mode %d, want %d", c.env, c.intel, got, c.want)
		}
	}
	if got, want := native.DivNewtonMode(), native.DivNewtonFrom(os.Getenv("TILEFUSE_NATIVE_DIVNEWTON"), jit.Intel()); got != want {
		t.Errorf("the process started with mode %d, want %d (TILEFUSE_NATIVE_DIVNEWTON=%q, Intel %v)", got, want, os.Getenv("TILEFUSE_NATIVE_DIVNEWTON"), jit.Intel())
	}

	requireAVX512(t, "no zmm loop")
	was := native.SetAVX512(true)
	defer native.SetAVX512(was)
	defer native.SetDivNewtonMode(native.SetDivNewtonMode(1))
	div, err := native.Compile(divKernel(t, 1024))
	if err != nil {
		t.Fatal(err)
	}
	defer div.Free()
	if n := native.DivNewtons(div); n != 0 {
		t.Errorf("products mode: an elementwise kernel has %d divisions by Newton's steps", n)
	}
	const m, n, k, side = 256, 256, 256, 128
	kern := productKernelPitch(t, m, n, k, side, side, 64, n, false, false, true, epiBiasGELU)
	rng := tiletest.RNG("TestDivNewtonModes")
	a, b, bias := tiletest.Uniform(rng, m*k, -1, 1), tiletest.Uniform(rng, k*n, -0.5, 0.5), tiletest.Uniform(rng, n, -1, 1)
	run := func(mode int32) ([]float32, int) {
		native.SetDivNewtonMode(mode)
		nk, err := native.Compile(kern)
		native.SetDivNewtonMode(1)
		if err != nil {
			t.Fatal(err)
		}
		defer nk.Free()
		out := make([]float32, 2*m*n)
		for i := range out {
			out[i] = float32(math.NaN())
		}
		if err := nk.Launch(tile.Grid{m / side, n / side}, a, b, bias, out[:m*n], out[m*n:]); err != nil {
			t.Fatal(err)
		}
		return out, native.DivNewtons(nk)
	}
	got, nn := run(1)
	if nn == 0 {
		t.Fatal("products mode: the product's GELU epilogue divides by VDIVPS")
	}
	want, n0 := run(0)
	if n0 != 0 {
		t.Fatalf("mode 0: %d divisions by Newton's steps", n0)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) || got[i] != got[i] {
			t.Fatalf("output %d: %v with Newton's steps, %v with VDIVPS", i, got[i], want[i])
		}
	}
}

// dividends fills x by vectors of 16 lanes of kinds in turn (vector v is
// of kind v%kinds): kind 0 near the divisor's multiples of midpoints (x[i]
// = RN(b·m), m halfway between two floats, m's biased exponent in
// [mid[0], mid[0]+mid[1]); redrawn until x[i] is in range, unless the
// divisor is not), kind 2 random bits, every other kind exponents in
// [usual[0], usual[0]+usual[1]) of either sign; in kind 3 one lane (moving
// from one such vector to the next) takes the specials in turn.
func dividends(rng *rand.Rand, x []float32, divisor func(i int) float32, kinds int, mid, usual [2]int, inRange func(float32) bool, specials []float32) {
	f := math.Float32frombits
	period := 16 * kinds
	for i := range x {
		bb := divisor(i)
		switch (i / 16) % kinds {
		case 0:
			for {
				m := f(uint32(rng.IntN(mid[1]<<23)) + uint32(mid[0])<<23)
				h := float64(m) + float64(math.Nextafter32(m, float32(math.Inf(1)))-m)/2
				if x[i] = float32(float64(bb) * h); inRange(x[i]) || !inRange(bb) {
					break
				}
			}
		case 2:
			x[i] = f(rng.Uint32())
		default:
			x[i] = f(uint32(rng.IntN(usual[1]<<23)+usual[0]<<23) | uint32(rng.IntN(2))<<31)
		}
		if (i/16)%kinds == 3 && i%16 == (i/period)%16 {
			x[i] = specials[(i/period)%len(specials)]
		}
	}
}
