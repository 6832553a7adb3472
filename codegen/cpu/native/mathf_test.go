package native

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/tile"
)

// mathKernel is y = op(x) over blocks of 256.
func mathKernel(t *testing.T, op tile.Op) *Kernel {
	t.Helper()
	b := tile.NewBuilder("math_"+op.String(), tile.Meta{"BLOCK": 256})
	x, y, n := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Param("n", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), 256), b.Arange(0, 256))
	m := b.Lt(offs, n)
	v := b.Load(b.AddPtr(x, offs), m, nil)
	b.Store(b.AddPtr(y, offs), b.Unary(op, v), m)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	nk, err := Compile(k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nk.Free() })
	return nk
}

// mathInputs: the edges (±0, ±Inf, NaN, subnormals, the ranges' ends and
// thresholds with their neighbours), a sweep, and seeded random values.
func mathInputs() []float32 {
	xs := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		1e-45, -1e-45, 1e-38, -1e-38, 1e-7, -1e-7}
	for _, e := range []float32{expOverflow32, expUnderflow32, -87.33655, 88, -104, 89, tanhSmall32, -tanhSmall32, tanhClamp32, 7.9053111, 0.5, 1, 2, 10, 20,
		minNormal32, sqrt2_32, sqrt2_32 / 2, math.MaxFloat32, 1e-45,
		expm1Low32, expm1Tiny32, 16.982, 88.376, 0.3466, 1e-3, 3e-8, 0.999, -86.3, erfMid32, erfHigh32, 127.5, 128, -149.5, -150, -151} {
		for _, x := range []float32{e, -e} {
			xs = append(xs, x, math.Nextafter32(x, float32(math.Inf(1))), math.Nextafter32(x, float32(math.Inf(-1))))
		}
	}
	for x := float32(-110); x <= 110; x += 0.0137 {
		xs = append(xs, x)
	}
	rng := rand.New(rand.NewPCG(16, 2026))
	for range 50000 {
		xs = append(xs, math.Float32frombits(rng.Uint32()))
	}
	for b := uint32(0); b < 0x80000000; b += 4099 { // every 4099th f32 of both signs
		xs = append(xs, math.Float32frombits(b), math.Float32frombits(b|0x80000000))
	}
	return xs
}

// TestMathTwins: the generated exp, tanh, log, sigmoid, log1p, expm1, erf,
// log2 and exp2
// agree with their twins in mathf.go bit for bit, lane by lane (a tail of 57 lanes
// included), in ymm and, where the CPU has AVX-512, in zmm registers
// (whole blocks; the tail's block runs the masked ymm loop).
func TestMathTwins(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
	xs := mathInputs()
	for _, c := range []struct {
		op   tile.Op
		twin func(float32) float32
	}{{tile.OpExp, expf32}, {tile.OpTanh, tanhf32}, {tile.OpLog, logf32},
		{tile.OpSigmoid, sigmoidf32}, {tile.OpLog1p, log1pf32}, {tile.OpExpm1, expm1f32}, {tile.OpErf, erff32},
		{tile.OpLog2, log2f32}, {tile.OpExp2, exp2f32}} {
		for _, zmm := range []bool{false, true} {
			if zmm && !jit.HasAVX512() {
				continue // no AVX-512 here: ymm only
			}
			was := SetAVX512(zmm)
			nk := mathKernel(t, c.op)
			SetAVX512(was)
			if (nk.zmm > 0) != zmm {
				t.Fatalf("%v, AVX-512 %v: %d phases in zmm registers", c.op, zmm, nk.zmm)
			}
			y := make([]float32, len(xs))
			if err := nk.Launch(tile.Grid{(len(xs) + 255) / 256}, xs, y, len(xs)); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i, x := range xs {
				w := c.twin(x)
				if math.Float32bits(y[i]) != math.Float32bits(w) && !(w != w && y[i] != y[i]) {
					if bad++; bad <= 5 {
						t.Errorf("%v(%v) (%#x) = %v natively (AVX-512 %v), %v by its twin", c.op, x, math.Float32bits(x), y[i], zmm, w)
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%v, AVX-512 %v: %d of %d lanes differ", c.op, zmm, bad, len(xs))
			}
		}
	}
}

// TestExpScalef: exp's zmm form scales by VSCALEFPS and leaves out the
// range blends, and where the CPU has AVX512DQ clamps its argument by one
// VRANGEPS to ±128 instead of to [-104, 89] (expCore32); either way it
// gives expf32's bits for every f32 where the forms could part: every f32
// from 80 to 200 and from -200 to -80 (overflow, the subnormal results,
// underflow, both clamps), every 4099th f32 of larger magnitude (and the
// largest), the special values and, as a sample of the rest, TestMathTwins'
// inputs. Both clamps are compiled and checked where the CPU has DQ.
func TestExpScalef(t *testing.T) {
	if !jit.Supported() || !jit.HasAVX512() {
		t.Skip("no AVX-512 here: the zmm form is not generated")
	}
	xs := mathInputs()
	for _, r := range [][2]float32{{80, 200}, {-200, -80}} {
		lo, hi := math.Float32bits(min(r[0], r[1])), math.Float32bits(max(r[0], r[1]))
		if r[0] < 0 {
			lo, hi = math.Float32bits(-80), math.Float32bits(-200) // sign-magnitude: bits grow with |x|
		}
		for b := lo; b <= hi; b++ {
			xs = append(xs, math.Float32frombits(b))
		}
	}
	for b := math.Float32bits(200); b < 0x7f800000; b += 4099 {
		xs = append(xs, math.Float32frombits(b), -math.Float32frombits(b))
	}
	xs = append(xs, math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)))
	for _, dq := range []bool{false, true} {
		if dq && !jit.HasAVX512DQ() {
			t.Log("no AVX512DQ here: the VRANGEPS clamp is not generated")
			continue
		}
		was, wasDQ := SetAVX512(true), useRangeClamp.Swap(dq)
		nk := mathKernel(t, tile.OpExp)
		SetAVX512(was)
		useRangeClamp.Store(wasDQ)
		if nk.zmm == 0 || nk.scalefs == 0 || (nk.ranges > 0) != dq {
			t.Fatalf("exp, DQ %v: %d phases in zmm registers, %d scaled by VSCALEFPS, %d clamped by VRANGEPS", dq, nk.zmm, nk.scalefs, nk.ranges)
		}
		y := make([]float32, len(xs))
		for i := range y {
			y[i] = float32(math.NaN()) // poisoned
		}
		if err := nk.Launch(tile.Grid{(len(xs) + 255) / 256}, xs, y, len(xs)); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, x := range xs {
			w := expf32(x)
			if math.Float32bits(y[i]) != math.Float32bits(w) && !(w != w && y[i] != y[i]) {
				if bad++; bad <= 5 {
					t.Errorf("DQ %v: exp(%v) (%#x) = %v (%#x) in zmm, %v (%#x) by expf32", dq, x, math.Float32bits(x), y[i], math.Float32bits(y[i]), w, math.Float32bits(w))
				}
			}
		}
		if bad > 0 {
			t.Fatalf("DQ %v: %d of %d lanes differ", dq, bad, len(xs))
		}
		t.Logf("DQ %v: %d inputs, every lane expf32's", dq, len(xs))
	}
}

// ulpErr is |got - want| in units of the last place of float32(want).
func ulpErr(got float32, want float64) float64 {
	w := float32(want)
	if got == w || got != got && w != w {
		return 0
	}
	if math.IsInf(float64(w), 0) || got != got || w != w {
		return math.Inf(1)
	}
	e := int(math.Float32bits(w)>>23&0xff) - 127 - 23
	if e < -149 {
		e = -149
	}
	return math.Abs(float64(got)-want) / math.Ldexp(1, e)
}

// TestMathErrors measures expf32, tanhf32, logf32, sigmoidf32, log1pf32,
// expm1f32, erff32, log2f32, exp2f32, sinf32 and cosf32 (up to sinBound32)
// against the float64 functions (sigmoid64: the reference's)
// over every 97th f32 of their
// ranges (every 997th with -short); mathf.go states the bounds (found with
// every 7th: 0.94, 1.36, 0.98, 1.44 and 1.44 ulp; logf32's over every
// 97th, erff32's every 3rd below 4: 1.06; log2f32 and exp2f32 1.07 and
// 0.88).
func TestMathErrors(t *testing.T) {
	step := uint32(97)
	if testing.Short() {
		step = 997
	}
	var maxExp, maxTanh, maxLog, maxSig, maxLog1p, maxExpm1, maxErf, maxLog2, maxExp2, maxSin, maxCos float64
	var atExp, atTanh, atLog, atSig, atLog1p, atExpm1, atErf, atLog2, atExp2, atSin, atCos float32
	for b := uint32(0); b < 0x7f800000; b += step {
		if x := math.Float32frombits(b); x > 0 {
			if u := ulpErr(logf32(x), math.Log(float64(x))); u > maxLog {
				maxLog, atLog = u, x
			}
			want := math.Log2(float64(x))
			if fr, ex := math.Frexp(float64(x)); fr == 0.5 {
				want = float64(ex - 1) // exact at powers of two, as the reference's
			}
			if u := ulpErr(log2f32(x), want); u > maxLog2 {
				maxLog2, atLog2 = u, x
			}
		}
		for _, x := range []float32{math.Float32frombits(b), -math.Float32frombits(b)} {
			if u := ulpErr(sigmoidf32(x), sigmoid64(float64(x))); u > maxSig {
				maxSig, atSig = u, x
			}
			if x > -1 {
				if u := ulpErr(log1pf32(x), math.Log1p(float64(x))); u > maxLog1p {
					maxLog1p, atLog1p = u, x
				}
			}
			if x < expOverflow32 {
				if u := ulpErr(expm1f32(x), math.Expm1(float64(x))); u > maxExpm1 {
					maxExpm1, atExpm1 = u, x
				}
			}
			if u := ulpErr(erff32(x), math.Erf(float64(x))); u > maxErf {
				maxErf, atErf = u, x
			}
			if x > -151 && x < 128 {
				if u := ulpErr(exp2f32(x), math.Exp2(float64(x))); u > maxExp2 {
					maxExp2, atExp2 = u, x
				}
			}
			if float32(math.Abs(float64(x))) <= sinBound32 {
				if u := ulpErr(sinf32(x), math.Sin(float64(x))); u > maxSin {
					maxSin, atSin = u, x
				}
				if u := ulpErr(cosf32(x), math.Cos(float64(x))); u > maxCos {
					maxCos, atCos = u, x
				}
			}
			if x > -104 && x < 89 {
				if u := ulpErr(expf32(x), math.Exp(float64(x))); u > maxExp {
					maxExp, atExp = u, x
				}
			}
			if x > -12 && x < 12 {
				if u := ulpErr(tanhf32(x), math.Tanh(float64(x))); u > maxTanh {
					maxTanh, atTanh = u, x
				}
			}
		}
	}
	t.Logf("expf32 within %.3f ulp (at %v), tanhf32 within %.3f ulp (at %v), logf32 within %.3f ulp (at %v)", maxExp, atExp, maxTanh, atTanh, maxLog, atLog)
	t.Logf("sigmoidf32 within %.3f ulp (at %v), log1pf32 within %.3f ulp (at %v), expm1f32 within %.3f ulp (at %v), erff32 within %.3f ulp (at %v)", maxSig, atSig, maxLog1p, atLog1p, maxExpm1, atExpm1, maxErf, atErf)
	t.Logf("log2f32 within %.3f ulp (at %v), exp2f32 within %.3f ulp (at %v)", maxLog2, atLog2, maxExp2, atExp2)
	t.Logf("sinf32 within %.3f ulp (at %v), cosf32 within %.3f ulp (at %v), |x| ≤ %v", maxSin, atSin, maxCos, atCos, sinBound32)
	for _, c := range []struct {
		name       string
		max, bound float64
		at         float32
	}{{"sigmoidf32", maxSig, 1, atSig}, {"log1pf32", maxLog1p, 1.5, atLog1p}, {"expm1f32", maxExpm1, 1.5, atExpm1}, {"erff32", maxErf, 1.1, atErf},
		{"log2f32", maxLog2, 1.1, atLog2}, {"exp2f32", maxExp2, 1, atExp2}, {"sinf32", maxSin, 1.5, atSin}, {"cosf32", maxCos, 1.5, atCos}} {
		if c.max > c.bound {
			t.Errorf("%s: %.3f ulp at %v, above its bound of %v", c.name, c.max, c.at, c.bound)
		}
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	for _, c := range []struct {
		name string
		f    func(float32) float32
		x, y float32
	}{
		{"sigmoid", sigmoidf32, 0, 0.5}, {"sigmoid", sigmoidf32, negZero, 0.5}, {"sigmoid", sigmoidf32, inf, 1}, {"sigmoid", sigmoidf32, -inf, 0},
		{"sigmoid", sigmoidf32, 200, 1}, {"sigmoid", sigmoidf32, -200, 0}, {"sigmoid", sigmoidf32, nan, nan},
		{"log1p", log1pf32, 0, 0}, {"log1p", log1pf32, negZero, negZero}, {"log1p", log1pf32, -1, -inf}, {"log1p", log1pf32, inf, inf},
		{"log1p", log1pf32, -2, nan}, {"log1p", log1pf32, -inf, nan}, {"log1p", log1pf32, nan, nan}, {"log1p", log1pf32, 1e-30, 1e-30},
		{"expm1", expm1f32, 0, 0}, {"expm1", expm1f32, negZero, negZero}, {"expm1", expm1f32, inf, inf}, {"expm1", expm1f32, -inf, -1},
		{"expm1", expm1f32, 89, inf}, {"expm1", expm1f32, -50, -1}, {"expm1", expm1f32, nan, nan}, {"expm1", expm1f32, 1e-30, 1e-30},
		{"erf", erff32, 0, 0}, {"erf", erff32, negZero, negZero}, {"erf", erff32, inf, 1}, {"erf", erff32, -inf, -1},
		{"log2", log2f32, 1, 0}, {"log2", log2f32, 1024, 10}, {"log2", log2f32, 0x1p-149, -149}, {"log2", log2f32, 0, -inf},
		{"log2", log2f32, negZero, -inf}, {"log2", log2f32, inf, inf}, {"log2", log2f32, -1, nan}, {"log2", log2f32, nan, nan},
		{"exp2", exp2f32, 0, 1}, {"exp2", exp2f32, 10, 1024}, {"exp2", exp2f32, -149, 0x1p-149}, {"exp2", exp2f32, -150, 0},
		{"exp2", exp2f32, 128, inf}, {"exp2", exp2f32, inf, inf}, {"exp2", exp2f32, -inf, 0}, {"exp2", exp2f32, nan, nan},
		{"sin", sinf32, 0, 0}, {"sin", sinf32, negZero, negZero}, {"sin", sinf32, 1e-30, 1e-30}, {"sin", sinf32, nan, nan},
		{"cos", cosf32, 0, 1}, {"cos", cosf32, negZero, 1}, {"cos", cosf32, nan, nan},
		{"erf", erff32, 10, 1}, {"erf", erff32, -4, -1}, {"erf", erff32, nan, nan}, {"erf", erff32, 1e-30, float32(math.Erf(float64(float32(1e-30))))},
	} {
		if y := c.f(c.x); math.Float32bits(y) != math.Float32bits(c.y) && !(y != y && c.y != c.y) {
			t.Errorf("%s(%v) = %v, want %v", c.name, c.x, y, c.y)
		}
	}
	if maxLog > 1 {
		t.Errorf("logf32: %.3f ulp at %v, above its bound of 1", maxLog, atLog)
	}
	for _, c := range []struct{ x, log float32 }{{1, 0}, {0, float32(math.Inf(-1))}, {float32(math.Copysign(0, -1)), float32(math.Inf(-1))},
		{float32(math.Inf(1)), float32(math.Inf(1))}} {
		if l := logf32(c.x); l != c.log {
			t.Errorf("log(%v) = %v, want %v", c.x, l, c.log)
		}
	}
	for _, x := range []float32{-1, -1e-45, float32(math.Inf(-1)), float32(math.NaN())} {
		if l := logf32(x); l == l {
			t.Errorf("log(%v) = %v, want NaN", x, l)
		}
	}
	if maxExp > 1 {
		t.Errorf("expf32: %.3f ulp at %v, above its bound of 1", maxExp, atExp)
	}
	if maxTanh > 1.5 {
		t.Errorf("tanhf32: %.3f ulp at %v, above its bound of 1.5", maxTanh, atTanh)
	}
	// the edges: exact where the function is
	for _, c := range []struct {
		x, exp, tanh float32
	}{{0, 1, 0}, {float32(math.Inf(1)), float32(math.Inf(1)), 1}, {float32(math.Inf(-1)), 0, -1}, {100, float32(math.Inf(1)), 1}, {-200, 0, -1}} {
		if e, h := expf32(c.x), tanhf32(c.x); e != c.exp || h != c.tanh {
			t.Errorf("x = %v: exp %v tanh %v, want %v and %v", c.x, e, h, c.exp, c.tanh)
		}
	}
	if h := tanhf32(float32(math.Copysign(0, -1))); math.Float32bits(h) != 0x80000000 {
		t.Errorf("tanh(-0) = %v, want -0", h)
	}
}

// TestScalarMathNative: the f32 math ops on scalars (one element a
// program, computed on the vector code between phases) give their twins'
// bits too, sign the reference's; and the kernel is native, not declined.
func TestScalarMathNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
	sign := func(x float32) float32 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return x
	}
	xs := mathInputs()[:4096]
	for _, c := range []struct {
		op   tile.Op
		twin func(float32) float32
	}{{tile.OpExp, expf32}, {tile.OpTanh, tanhf32}, {tile.OpLog, logf32}, {tile.OpSigmoid, sigmoidf32},
		{tile.OpLog1p, log1pf32}, {tile.OpExpm1, expm1f32}, {tile.OpErf, erff32}, {tile.OpLog2, log2f32}, {tile.OpExp2, exp2f32},
		{tile.OpSign, sign}, {tile.OpSin, sinf32}, {tile.OpCos, cosf32}} {
		t.Run(c.op.String(), func(t *testing.T) {
			xs := xs
			if c.op == tile.OpSin || c.op == tile.OpCos { // beyond the bound the launch falls back
				xs = slices.DeleteFunc(slices.Clone(xs), func(x float32) bool { return float32(math.Abs(float64(x))) > sinBound32 })
			}
			b := tile.NewBuilder("scalar_"+c.op.String(), nil)
			x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			pid := b.ProgramID(0)
			b.Store(b.AddPtr(y, pid), b.Unary(c.op, b.Load(b.AddPtr(x, pid), nil, nil)), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			nk, err := Compile(k)
			if err != nil {
				t.Fatalf("declined: %v", err)
			}
			defer nk.Free()
			got := make([]float32, len(xs))
			for i := range got {
				got[i] = float32(math.NaN()) // poisoned
			}
			if err := nk.Launch(tile.Grid{len(xs)}, xs, got); err != nil {
				t.Fatal(err)
			}
			for i, x := range xs {
				if w := c.twin(x); math.Float32bits(got[i]) != math.Float32bits(w) && !(w != w && got[i] != got[i]) {
					t.Fatalf("%v(%v) = %v as a scalar, %v by its twin", c.op, x, got[i], w)
				}
			}
		})
	}
}

// TestSinCosNative: the generated sin and cos give sinf32's and cosf32's
// bits lane by lane in ymm and zmm (every 4099th f32 up to sinBound32,
// the arguments nearest multiples of π/2 where the reduction is tested
// hardest, the bound itself, NaN); a launch with one lane beyond the bound
// (the next f32, 1e30, ∞) returns ErrFallback, so that the executor runs
// it (fusion: TestSinLargeArgumentsFallBack).
func TestSinCosNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
	var xs []float32
	for b := uint32(0); b <= math.Float32bits(sinBound32); b += 4099 {
		xs = append(xs, math.Float32frombits(b), -math.Float32frombits(b))
	}
	for _, x := range []float32{2023.1857, 3468.5696, 5710.0967, 107868.41, 17883.264, sinBound32, -sinBound32,
		float32(math.NaN()), 0, float32(math.Copysign(0, -1)), 1e-30, math.Pi / 2, math.Pi} {
		xs = append(xs, x, math.Nextafter32(x, 0))
	}
	for _, op := range []tile.Op{tile.OpSin, tile.OpCos} {
		twin := sinf32
		if op == tile.OpCos {
			twin = cosf32
		}
		for _, zmm := range []bool{false, true} {
			if zmm && !jit.HasAVX512() {
				continue
			}
			was := SetAVX512(zmm)
			nk := mathKernel(t, op)
			SetAVX512(was)
			y := make([]float32, len(xs))
			if err := nk.Launch(tile.Grid{(len(xs) + 255) / 256}, xs, y, len(xs)); err != nil {
				t.Fatalf("%v, AVX-512 %v: %v", op, zmm, err)
			}
			for i, x := range xs {
				if w := twin(x); math.Float32bits(y[i]) != math.Float32bits(w) && !(w != w && y[i] != y[i]) {
					t.Fatalf("%v(%v) = %v natively (AVX-512 %v), %v by its twin", op, x, y[i], zmm, w)
				}
			}
			for _, big := range []float32{math.Nextafter32(sinBound32, 1e38), -1e30, float32(math.Inf(1))} {
				in := append([]float32(nil), xs[:300]...)
				in[123] = big
				if err := nk.Launch(tile.Grid{2}, in, make([]float32, len(in)), len(in)); !errors.Is(err, ErrFallback) {
					t.Errorf("%v(%v), AVX-512 %v: launch gave %v, want ErrFallback", op, big, zmm, err)
				}
			}
		}
	}
}
