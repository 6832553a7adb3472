package native

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// mathInputs64: the edges (±0, ±Inf, NaN, subnormals, the largest finite,
// the thresholds of exp — 709, 709.8, its overflow, the ends of its
// subnormal results near -708.4 and -745.1 —, of tanh — 0.625, 44.01 —
// and of log — 1, √½·2^k, √2 —, each with its neighbours), a sweep over [-750, 750], and seeded random
// values: uniform in ±800, in ±2, and any bit pattern.
func mathInputs64() []float64 {
	xs := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 5e-324, -5e-324,
		1e-310, -1e-310, 0x1p-1022, -0x1p-1022, math.MaxFloat64, -math.MaxFloat64, 1e-17, -1e-17}
	for _, e := range []float64{709, 709.8, expOverflow, 709.5, 708.39641853226408, 708.4, 745.1332191019411,
		745.13321910194122, 744.44007192138126, 740, 0.625, tanhSat, 1, 2, 20, 0.5, 1023 * math.Ln2, 1024 * math.Ln2,
		logHSqrt2, 2 * logHSqrt2, 4 * logHSqrt2, math.Sqrt2, 1e-300, 0x1p-1000} {
		for _, x := range []float64{e, -e} {
			xs = append(xs, x, math.Nextafter(x, math.Inf(1)), math.Nextafter(x, math.Inf(-1)))
		}
	}
	for x := -750.0; x <= 750; x += 0.01713 {
		xs = append(xs, x)
	}
	rng := rand.New(rand.NewPCG(64, 2026))
	for range 40000 {
		xs = append(xs, (rng.Float64()*2-1)*800, (rng.Float64()*2-1)*2, math.Float64frombits(rng.Uint64()))
	}
	return xs
}

// sigmoidRef is the reference interpreter's f64 sigmoid.
var sigmoidRef, _ = interp.Func64(tile.OpSigmoid)

// TestMathF64: the scalar twins exp64, tanh64, log64 and sigmoid64 are
// the reference's f64 exp (interp.Exp64: Go's math.Exp, as the reference
// computes it), tanh (math.Tanh), log (interp.Log64) and sigmoid bit for
// bit, and the generated code is the twins bit
// for bit lane by lane (a tail of 61 lanes included: the masked loop),
// over mathInputs64: with AVX-512 and without it (mathdy.go: ymm pairs).
func TestMathF64(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	xs := mathInputs64()
	for _, c := range []struct {
		op   tile.Op
		twin func(float64) float64
		ref  func(float64) float64
	}{
		{tile.OpExp, exp64, interp.Exp64},
		{tile.OpTanh, tanh64, math.Tanh},
		{tile.OpLog, log64, interp.Log64},
		{tile.OpSigmoid, sigmoid64, sigmoidRef},
	} {
		t.Run(c.op.String(), func(t *testing.T) {
			for _, x := range xs {
				w, g := c.ref(x), c.twin(x)
				if math.Float64bits(w) != math.Float64bits(g) && !(w != w && g != g) {
					t.Fatalf("%v(%v): twin %v (%#x), reference %v (%#x)", c.op, x, g, math.Float64bits(g), w, math.Float64bits(w))
				}
			}
			b := tile.NewBuilder("mathd_"+c.op.String(), tile.Meta{"BLOCK": 256})
			px, py, n := b.Ptr("x", tile.F64), b.Ptr("y", tile.F64), b.Param("n", tile.I32)
			offs := b.Add(b.Mul(b.ProgramID(0), 256), b.Arange(0, 256))
			m := b.Lt(offs, n)
			b.Store(b.AddPtr(py, offs), b.Unary(c.op, b.Load(b.AddPtr(px, offs), m, nil)), m)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			was := AVX512()
			defer SetAVX512(was)
			isas := []string{"avx2"}
			if jit.HasAVX512() {
				isas = append(isas, "avx512")
			}
			for _, isa := range isas {
				SetAVX512(isa == "avx512")
				nk, err := Compile(k)
				if err != nil {
					t.Fatalf("%s: %v", isa, err)
				}
				defer nk.Free()
				in := xs[:(len(xs)/256-1)*256+61] // a tail of 61
				y := make([]float64, len(in))
				for i := range y {
					y[i] = math.NaN()
				}
				if err := nk.Launch(tile.Grid{(len(in) + 255) / 256}, in, y, len(in)); err != nil {
					t.Fatal(err)
				}
				for i, x := range in {
					w := c.twin(x)
					if math.Float64bits(y[i]) != math.Float64bits(w) && !(w != w && y[i] != y[i]) {
						t.Fatalf("%s: %v(%v) = %v (%#x) natively, %v (%#x) by the twin", isa, c.op, x, y[i], math.Float64bits(y[i]), w, math.Float64bits(w))
					}
				}
				t.Logf("%s: %d inputs: bit for bit", isa, len(in))
			}
		})
	}
}

// TestLog1pF64Native: f64 log1p natively is math.Log1p (the
// reference's) bit for bit lane by lane (a tail of 61 lanes: the masked
// loop), over mathInputs64 and log1p's own edges — -1 and below, the
// thresholds 2⁻⁵⁴, 2⁻²⁹, √½ - 1, √2 - 1 and 2⁵³, u = 1 + x just below and
// above √2's mantissa and near a power of two (its f ≈ 0 branch), each
// with neighbours — and seeded values near -1, near 0 and up to 1e300;
// in ymm pairs and, where the CPU has AVX-512, in zmm registers.
func TestLog1pF64Native(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	xs := mathInputs64()
	xs = withNeighbours(xs, 4, -1, 0x1p-54, 0x1p-29, log1pSqrt2HalfM1, log1pSqrt2M1, 0x1p53, math.Sqrt2-1, math.Sqrt2/2-1,
		1, 3, 7, 0x1p52-1, math.Float64frombits(0x3ff6a09e667f3bcd)-1, math.Float64frombits(0x3ff6a09e667f3bcc)-1,
		math.Float64frombits(0x3fffffffffffffff)-1, 2*math.Float64frombits(0x3fefffffffffffff), 1e-20, 0.5, -0.5, -0.75)
	rng := rand.New(rand.NewPCG(1, 1))
	for range 60000 {
		xs = append(xs, -1+math.Exp(-rng.Float64()*40), (rng.Float64()*2-1)*math.Exp(-rng.Float64()*60),
			math.Exp(rng.Float64()*690), rng.Float64()*4-1)
	}
	f64UnaryNative(t, tile.OpLog1p, xs, math.Log1p, nil)
}

// TestExpm1F64Native: f64 expm1 natively is math.Expm1's bit for
// bit lane by lane (a tail of 61 lanes) over mathInputs64 and expm1's own
// edges — the thresholds 2⁻⁵⁴, ln2/2, 3·ln2/2, 56·ln2 and 709.78…, the
// arguments where k changes (k·ln2 ± ½ln2 for k to ±60, and at 20 and 56,
// the forms' bounds), each with neighbours and of both signs — and seeded
// values across ±750 and near 0; in ymm pairs and, where the CPU has
// AVX-512, in zmm registers.
func TestExpm1F64Native(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	xs := mathInputs64()
	edges := []float64{0x1p-54, 0.5 * math.Ln2, 1.5 * math.Ln2, 56 * math.Ln2, 7.09782712893383973096e+02, 0.25, 1,
		3.46573590279972654709e-01, 1.03972077083991796413e+00, 3.88162421113569373274e+01, 700, 709.7}
	for k := -60; k <= 60; k++ {
		edges = append(edges, (float64(k)+0.5)*math.Ln2, float64(k)*math.Ln2)
	}
	xs = withNeighbours(xs, 3, edges...)
	rng := rand.New(rand.NewPCG(5, 9))
	for range 60000 {
		xs = append(xs, (rng.Float64()*2-1)*750, (rng.Float64()*2-1)*math.Exp(-rng.Float64()*40),
			(rng.Float64()*2-1)*45, (rng.Float64()*2-1)*1.2)
	}
	f64UnaryNative(t, tile.OpExpm1, xs, math.Expm1, nil)
}

// TestErfF64Native: f64 erf natively is math.Erf's bit for bit
// lane by lane (a tail of 61 lanes) over mathInputs64 and erf's own edges
// — the forms' bounds 2^-1015, 2⁻²⁸, 0.84375, 1.25, 1/0.35 and 6, each
// with neighbours and of both signs — and seeded values across ±7 and
// near 0; in ymm pairs and, where the CPU has AVX-512, in zmm registers.
func TestErfF64Native(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	xs := mathInputs64()
	xs = withNeighbours(xs, 3, 2.848094538889218e-306, 0x1p-28, 0.84375, 1.25, 1/0.35, 6, 1, 2, 3, 5.9)
	rng := rand.New(rand.NewPCG(3, 17))
	for range 60000 {
		xs = append(xs, (rng.Float64()*2-1)*7, (rng.Float64()*2-1)*math.Exp(-rng.Float64()*750),
			(rng.Float64()*2-1)*1.3, (rng.Float64()*2-1)*3)
	}
	f64UnaryNative(t, tile.OpErf, xs, math.Erf, nil)
}

// TestSinCosF64Native: f64 sin and cos natively are math.Sin's and
// math.Cos's bit for bit lane by lane (a tail of 61 lanes) over
// mathInputs64 below 2^29 in magnitude and the arguments where the
// reduction is hardest (near multiples of π/4, π/2 and π, each with
// neighbours, up to 2^29), seeded values up to 2^29; a launch with a lane
// at 2^29 or beyond (∞ included) falls back (Go reduces those by
// Payne–Hanek); in ymm pairs and, where the CPU has AVX-512, in zmm
// registers.
func TestSinCosF64Native(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	var xs []float64
	for _, x := range mathInputs64() {
		if !(math.Abs(x) >= sinReduceLimit) {
			xs = append(xs, x)
		}
	}
	for _, k := range []float64{1, 2, 3, 4, 7, 8, 100, 1e3, 1e5, 1e7, 3e8} {
		for _, base := range []float64{math.Pi / 4, math.Pi / 2, math.Pi} {
			x := math.Round(k) * base
			for i, y := 0, x; i < 6 && y < sinReduceLimit; i++ {
				xs = append(xs, y, -y)
				y = math.Nextafter(y, math.Inf(1))
			}
		}
	}
	rng := rand.New(rand.NewPCG(29, 2))
	for range 60000 {
		xs = append(xs, (rng.Float64()*2-1)*10, math.Exp(rng.Float64()*20)*math.Copysign(1, rng.Float64()-0.5),
			(rng.Float64()*2-1)*(sinReduceLimit-1))
	}
	for _, c := range []struct {
		op  tile.Op
		ref func(float64) float64
	}{{tile.OpSin, math.Sin}, {tile.OpCos, math.Cos}} {
		t.Run(c.op.String(), func(t *testing.T) {
			f64UnaryNative(t, c.op, xs, c.ref, func(nk *Kernel, in []float64) {
				for _, big := range []float64{sinReduceLimit, -1e300, math.Inf(1)} {
					in2 := append([]float64(nil), in[:300]...)
					in2[200] = big
					if err := nk.Launch(tile.Grid{2}, in2, make([]float64, 300), 300); !errors.Is(err, ErrFallback) {
						t.Errorf("%v(%v): %v, want ErrFallback", c.op, big, err)
					}
				}
			})
		})
	}
}

// TestExp2Log2F64Native: f64 exp2 and log2 natively are
// math.Exp2's and interp.Log2_64's bit for bit lane by lane (a tail of 61
// lanes) over mathInputs64, exp2's edges (its overflow and underflow
// thresholds, the subnormal results from -1022 to -1074, k = 1024,
// integers and half-integers, each with neighbours), every power of two
// (subnormal ones too) and its neighbours for log2, and seeded values; in
// ymm pairs and, where the CPU has AVX-512, in zmm registers.
func TestExp2Log2F64Native(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	xs := mathInputs64()
	near := func(x float64) {
		xs = append(xs, x)
		for i, y, z := 0, x, x; i < 3; i++ {
			y, z = math.Nextafter(y, math.Inf(1)), math.Nextafter(z, math.Inf(-1))
			xs = append(xs, y, z)
		}
	}
	for _, e := range []float64{1.0239999999999999e+03, 1024, 1023.5, 1023, -1.0740e+03, -1074.5, -1074, -1073.5, -1022, -1022.5, -1023,
		-1050.25, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0} {
		near(e)
	}
	for k := -1074; k <= 1023; k++ {
		near(math.Ldexp(1, k))
	}
	rng := rand.New(rand.NewPCG(2, 2))
	for range 60000 {
		xs = append(xs, (rng.Float64()*2-1)*1100, (rng.Float64()*2-1)*4, rng.Float64()*1e300, math.Float64frombits(rng.Uint64()>>1))
	}
	for _, c := range []struct {
		op  tile.Op
		ref func(float64) float64
	}{{tile.OpExp2, math.Exp2}, {tile.OpLog2, interp.Log2_64}} {
		t.Run(c.op.String(), func(t *testing.T) {
			f64UnaryNative(t, c.op, xs, c.ref, nil)
		})
	}
}

// withNeighbours appends each edge e and -e to xs, each with its n
// neighbours on either side (Nextafter).
func withNeighbours(xs []float64, n int, edges ...float64) []float64 {
	for _, e := range edges {
		for _, x := range []float64{e, -e} {
			xs = append(xs, x)
			for i, y := 0, x; i < n; i++ {
				y = math.Nextafter(y, math.Inf(1))
				xs = append(xs, y)
			}
			for i, y := 0, x; i < n; i++ {
				y = math.Nextafter(y, math.Inf(-1))
				xs = append(xs, y)
			}
		}
	}
	return xs
}

// f64UnaryNative runs y = op(x) over xs natively (a tail of 61 lanes), in
// ymm pairs and, where the CPU has AVX-512, in zmm registers, and checks
// every lane against ref bit for bit; after, if not nil, gets the last
// kernel and the inputs.
func f64UnaryNative(t *testing.T, op tile.Op, xs []float64, ref func(float64) float64, after func(nk *Kernel, in []float64)) {
	t.Helper()
	b := tile.NewBuilder("unary64_"+op.String(), tile.Meta{"BLOCK": 256})
	px, py, n := b.Ptr("x", tile.F64), b.Ptr("y", tile.F64), b.Param("n", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), 256), b.Arange(0, 256))
	m := b.Lt(offs, n)
	b.Store(b.AddPtr(py, offs), b.Unary(op, b.Load(b.AddPtr(px, offs), m, nil)), m)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	was := AVX512()
	defer SetAVX512(was)
	in := xs[:(len(xs)/256-1)*256+61]
	for _, zmm := range []bool{false, true} {
		if zmm && !jit.HasAVX512() {
			t.Logf("no AVX-512 here: ymm pairs only")
			continue
		}
		SetAVX512(zmm)
		nk, err := Compile(k)
		if err != nil {
			t.Fatalf("zmm %v: %v", zmm, err)
		}
		y := make([]float64, len(in))
		for i := range y {
			y[i] = math.NaN()
		}
		if err := nk.Launch(tile.Grid{(len(in) + 255) / 256}, in, y, len(in)); err != nil {
			nk.Free()
			t.Fatal(err)
		}
		bad := 0
		for i, x := range in {
			if w := ref(x); math.Float64bits(y[i]) != math.Float64bits(w) && !(w != w && y[i] != y[i]) {
				if bad++; bad <= 5 {
					t.Errorf("zmm %v: %v(%v) (%#x) = %v (%#x) natively, %v (%#x) by the reference", zmm, op, x, math.Float64bits(x), y[i], math.Float64bits(y[i]), w, math.Float64bits(w))
				}
			}
		}
		if bad > 0 {
			nk.Free()
			t.Fatalf("zmm %v: %d of %d lanes differ", zmm, bad, len(in))
		}
		t.Logf("zmm %v: %d inputs, bit for bit the reference's", zmm, len(in))
		if after != nil {
			after(nk, in)
		}
		nk.Free()
	}
}
