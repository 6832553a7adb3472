package native

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// powSpecials are pow's special arguments: zeros, ones, halves, odd and
// even integers, the integers past 2²⁴ and 2³¹, infinities, NaN and
// subnormals, each sign.
func powSpecials() []float32 {
	var s []float32
	for _, v := range []float32{0, 1, 0.5, 2, 3, 0.25, 1 << 24, 1<<24 + 2, 1 << 31, 3e38, float32(math.Inf(1)), 1e-45, 1.5, 7} {
		s = append(s, v, -v)
	}
	return append(s, float32(math.NaN()))
}

// TestPowErrors: powf32 against float32(math.Pow) — the reference's — bit
// for bit wherever an argument is special (pow's special cases in Go's
// order, signs of zeros and infinities included) and, in general, within
// 1.25 ulp for |y| ≤ 4 and within 0.7·(1 + |y|/4) ulp for |y| up to 50, in
// a seeded sample of 3M pairs (results within the normal range).
func TestPowErrors(t *testing.T) {
	sp := powSpecials()
	for _, x := range sp {
		for _, y := range sp {
			got, want := powf32(x, y), float32(math.Pow(float64(x), float64(y)))
			w64 := math.Pow(float64(x), float64(y))
			special := x != x || y != y || x == 0 || y == 0 || x == 1 || y == 1 || y == 0.5 || math.IsInf(float64(x), 0) ||
				math.IsInf(float64(y), 0) || w64 == 0 || math.IsInf(w64, 0) || w64 != w64
			if special && math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Errorf("pow(%v, %v) = %v, want %v", x, y, got, want)
			}
			if !special && ulpErr(got, w64) > 4 {
				t.Errorf("pow(%v, %v) = %v, want %v (%.2f ulp)", x, y, got, want, ulpErr(got, w64))
			}
		}
	}
	n := 3000000
	if testing.Short() {
		n = 300000
	}
	rng := rand.New(rand.NewPCG(2026, 12))
	var small, wide float64
	var sx, sy, wx, wy float32
	for range n {
		x := float32(math.Exp(rng.Float64()*40 - 20))
		y := float32((rng.Float64() - 0.5) * 8)
		if rng.IntN(3) == 0 {
			y = float32((rng.Float64() - 0.5) * 100)
		}
		if rng.IntN(5) == 0 { // a negative base, an integer exponent
			x, y = -x, float32(math.Round(float64(y)))
		}
		want := math.Pow(float64(x), float64(y))
		if want == 0 || math.Abs(want) < 0x1p-126 || math.Abs(want) > math.MaxFloat32 {
			continue
		}
		u := ulpErr(powf32(x, y), want)
		if math.Abs(float64(y)) <= 4 {
			if u > small {
				small, sx, sy = u, x, y
			}
		} else if r := u / (1 + math.Abs(float64(y))/4); r > wide {
			wide, wx, wy = r, x, y
		}
	}
	t.Logf("|y| ≤ 4: within %.3f ulp (at %v^%v); |y| ≤ 50: within %.3f·(1 + |y|/4) ulp (at %v^%v)", small, sx, sy, wide, wx, wy)
	if small > 1.25 || wide > 0.7 {
		t.Errorf("powf32 beyond its bounds: %.3f ulp for |y| ≤ 4 (1.25), %.3f·(1 + |y|/4) (0.7)", small, wide)
	}
}

// TestPowNative: the generated pow gives powf32's bits lane by lane, in
// ymm and zmm and on scalars, over every pair of the special arguments
// and a seeded sample (a tail of lanes not a multiple of the vector).
func TestPowNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
	var xs, ys []float32
	sp := powSpecials()
	for _, x := range sp {
		for _, y := range sp {
			xs, ys = append(xs, x), append(ys, y)
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 20011 {
		x := float32(math.Exp(rng.Float64()*200 - 100))
		if rng.IntN(3) == 0 {
			x = -x
		}
		y := float32((rng.Float64() - 0.5) * 30)
		if rng.IntN(2) == 0 {
			y = float32(math.Round(float64(y)))
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	runPow(t, tile.F32, xs, ys, []powRun{{"ymm", false, false}, {"zmm", false, true}, {"scalar", true, false}}, func(name string, z []float32) {
		for i := range xs {
			if w := powf32(xs[i], ys[i]); math.Float32bits(z[i]) != math.Float32bits(w) && !(w != w && z[i] != z[i]) {
				t.Fatalf("%s: pow(%v, %v) = %v natively, %v by its twin", name, xs[i], ys[i], z[i], w)
			}
		}
		t.Logf("%s: %d pairs, bit for bit the twin's", name, len(xs))
	})
}

// TestPowF64Native: f64 pow natively is interp.Pow64 bit for bit, in
// vectors and on scalars, over every pair of special arguments and a seeded
// sample that takes each of Pow64's paths: integer exponents up to 2^62
// (the loop's 63 iterations) and past 2^63, halves, fractions of x
// normal, subnormal and negative, results that overflow, underflow and
// go subnormal through Ldexp, and exponents that end the loop early
// (|xe| past 4096), and whole vectors of integer exponents (the
// logarithm and e^ skipped); in ymm pairs and, where the CPU has it, in
// zmm registers.
func TestPowF64Native(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
	sp := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 2, -2, 3, -3, 0.25, -0.25, 1.5, -1.5, 0.75,
		1e-300, -1e-300, 1e300, 5e-324, 1e-310, -1e-310, math.Inf(1), math.Inf(-1), math.NaN(),
		1 << 53, 1<<53 + 2, -(1 << 53) - 1, 1<<53 - 1, 1 << 62, 1 << 63, -(1 << 63), 1 << 64, 1e300,
		0.9999999999999999, 1.0000000000000002, math.MaxFloat64, 0x1p-1022, 7.5, -7, 1023, 1024, -1074, 0.5000000000000001}
	var xs, ys []float64
	for _, x := range sp {
		for _, y := range sp {
			xs, ys = append(xs, x), append(ys, y)
		}
	}
	rng := rand.New(rand.NewPCG(11, 13))
	for range 60000 {
		x := math.Ldexp(rng.Float64()+0.5, rng.IntN(2100)-1074)
		switch rng.IntN(8) {
		case 0:
			x = -x
		case 1:
			x = 1 + (rng.Float64()-0.5)*0x1p-20 // near 1: large exponents stay finite
		}
		var y float64
		switch rng.IntN(6) {
		case 0:
			y = float64(rng.IntN(2000) - 1000)
		case 1:
			y = float64(rng.IntN(40)-20) + 0.5
		case 2:
			y = (rng.Float64() - 0.5) * 40
		case 3:
			y = math.Ldexp(rng.Float64()-0.5, rng.IntN(70)) // up to 2^69: every bit count
		case 4:
			y = math.Trunc(math.Ldexp(rng.Float64(), rng.IntN(64)))
		default:
			y = (rng.Float64() - 0.5) * 3
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	for range 512 { // whole vectors of integer exponents: e^ skipped
		xs = append(xs, math.Ldexp(rng.Float64()-0.5, rng.IntN(2100)-1074))
		ys = append(ys, float64(rng.IntN(64)-32))
	}
	xs, ys = xs[:len(xs)-len(xs)%256+61], ys[:len(xs)-len(xs)%256+61]
	runPow(t, tile.F64, xs, ys, []powRun{{"ymm pairs", false, false}, {"scalar, ymm", true, false}, {"zmm", false, true}, {"scalar, zmm", true, true}}, func(name string, z []float64) {
		bad := 0
		for i := range xs {
			if w := interp.Pow64(xs[i], ys[i]); math.Float64bits(z[i]) != math.Float64bits(w) && !(w != w && z[i] != z[i]) {
				if bad++; bad <= 5 {
					t.Errorf("%s: pow(%v, %v) = %v natively, %v by the reference", name, xs[i], ys[i], z[i], w)
				}
			}
		}
		if bad > 0 {
			t.Fatalf("%s: %d of %d lanes differ", name, bad, len(xs))
		}
		t.Logf("%s: %d pairs, bit for bit the reference's", name, len(xs))
	})
}

// powRun is one way runPow runs pow: over blocks of 256 lanes (a masked
// tail) or one pair a program (scalar), with zmm registers or without.
type powRun struct {
	name        string
	scalar, zmm bool
}

// runPow compiles z = pow(x, y) of dtype d for each run (skipping zmm runs
// where the CPU has no AVX-512), launches it natively over xs and ys into
// a NaN-poisoned z, and gives z to check.
func runPow[T float32 | float64](t *testing.T, d tile.DType, xs, ys []T, runs []powRun, check func(name string, z []T)) {
	t.Helper()
	b := tile.NewBuilder("pow", tile.Meta{"BLOCK": 256})
	px, py, pz, pn := b.Ptr("x", d), b.Ptr("y", d), b.Ptr("z", d), b.Param("n", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), 256), b.Arange(0, 256))
	m := b.Lt(offs, pn)
	b.Store(b.AddPtr(pz, offs), b.Pow(b.Load(b.AddPtr(px, offs), m, nil), b.Load(b.AddPtr(py, offs), m, nil)), m)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	sb := tile.NewBuilder("pow_scalar", nil)
	sx, sy, sz := sb.Ptr("x", d), sb.Ptr("y", d), sb.Ptr("z", d)
	pid := sb.ProgramID(0)
	sb.Store(sb.AddPtr(sz, pid), sb.Pow(sb.Load(sb.AddPtr(sx, pid), nil, nil), sb.Load(sb.AddPtr(sy, pid), nil, nil)), nil)
	ks, err := sb.Build()
	if err != nil {
		t.Fatal(err)
	}
	was := AVX512()
	defer SetAVX512(was)
	for _, r := range runs {
		if r.zmm && !jit.HasAVX512() {
			t.Logf("%s: no AVX-512 here", r.name)
			continue
		}
		SetAVX512(r.zmm)
		kern, grid := k, tile.Grid{(len(xs) + 255) / 256}
		if r.scalar {
			kern, grid = ks, tile.Grid{len(xs)}
		}
		nk, err := Compile(kern)
		if err != nil {
			t.Fatalf("%s: declined: %v", r.name, err)
		}
		z := make([]T, len(xs))
		for i := range z {
			z[i] = T(math.NaN())
		}
		args := []any{xs, ys, z, len(xs)}
		if r.scalar {
			args = args[:3]
		}
		err = nk.Launch(grid, args...)
		nk.Free()
		if err != nil {
			t.Fatal(err)
		}
		check(r.name, z)
	}
}
