package ptxsim_test

import (
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
)

// opCase is one instruction checked lane by lane: each thread loads three
// 64-bit inputs (a, b, c: %rd10-12, their low words %r10-12, as f32
// %f10-12, as f64 %fd10-12), the body leaves its result in the register
// named by out, and want computes the expected bits in plain Go.
type opCase struct {
	name string
	body string
	out  string // r (%r20), f (%f20), fd (%fd20), rd (%rd20), p (%p1)
	in   [][3]uint64
	want func(a, b, c uint64) uint64
}

func f32b(x float32) uint64 { return uint64(math.Float32bits(x)) }
func f64b(x float64) uint64 { return math.Float64bits(x) }
func i32(x int32) uint64    { return uint64(uint32(x)) }
func u64(x int64) uint64    { return uint64(x) }

const opPrelude = `
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd1, %r1, 8;
	ld.param.u64 %rd2, [a];
	add.s64 %rd3, %rd2, %rd1;
	ld.global.b64 %rd10, [%rd3];
	ld.param.u64 %rd2, [b];
	add.s64 %rd3, %rd2, %rd1;
	ld.global.b64 %rd11, [%rd3];
	ld.param.u64 %rd2, [c];
	add.s64 %rd3, %rd2, %rd1;
	ld.global.b64 %rd12, [%rd3];
	mov.b64 {%r10, %r30}, %rd10;
	mov.b64 {%r11, %r31}, %rd11;
	mov.b64 {%r12, %r32}, %rd12;
	mov.b32 %f10, %r10;
	mov.b32 %f11, %r11;
	mov.b32 %f12, %r12;
	mov.b64 %fd10, %rd10;
	mov.b64 %fd11, %rd11;
	mov.b64 %fd12, %rd12;
	mov.u64 %rd20, 0;
`

func (c opCase) ptx() string {
	epi := map[string]string{
		"r":  "cvt.u64.u32 %rd20, %r20;",
		"f":  "mov.b32 %r20, %f20;\n\tcvt.u64.u32 %rd20, %r20;",
		"fd": "mov.b64 %rd20, %fd20;",
		"rd": "",
		"p":  "selp.u64 %rd20, 1, 0, %p1;",
	}[c.out]
	return kernelPTX("op", ".param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d", opPrelude+"\t"+c.body+"\n\t"+epi+`
	ld.param.u64 %rd2, [d];
	add.s64 %rd3, %rd2, %rd1;
	st.global.b64 [%rd3], %rd20;`)
}

func runOps(t *testing.T, cases []opCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.in)
			if n > 128 {
				t.Fatalf("%d inputs: one CTA of 128 threads", n)
			}
			a, b, cc := make([]uint64, n), make([]uint64, n), make([]uint64, n)
			for i, in := range c.in {
				a[i], b[i], cc[i] = in[0], in[1], in[2]
			}
			mem := ptxsim.NewMemory()
			aa, _ := mem.AllocCopy("a", a)
			ba, _ := mem.AllocCopy("b", b)
			ca, _ := mem.AllocCopy("c", cc)
			da := mem.Alloc("d", 8*n)
			src := c.ptx()
			mustRun(t, src, "op", ptxsim.Config{Block: [3]int{n}}, mem, aa, ba, ca, da)
			got := make([]uint64, n)
			mem.Read(da, got)
			for i, in := range c.in {
				if w := c.want(in[0], in[1], in[2]); w != skip && got[i] != w {
					t.Errorf("inputs %#x %#x %#x: got %#x, want %#x", in[0], in[1], in[2], got[i], w)
				}
			}
		})
	}
}

// ints are edge cases and random values for 32-bit operations.
func ints(rng *rand.Rand, n int) [][3]uint64 {
	edge := []uint32{0, 1, 2, 31, 32, 33, 0x7fffffff, 0x80000000, 0xffffffff, 0xfffffffe, 12345, 0x80000001}
	var out [][3]uint64
	for i := 0; i < n; i++ {
		pick := func() uint64 {
			if rng.IntN(3) == 0 {
				return uint64(edge[rng.IntN(len(edge))])
			}
			return uint64(rng.Uint32())
		}
		out = append(out, [3]uint64{pick(), pick(), pick()})
	}
	return out
}

func TestIntegerOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	in := ints(rng, 128)
	s := func(x uint64) int32 { return int32(uint32(x)) }
	runOps(t, []opCase{
		{"add.s32", "add.s32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 { return i32(s(a) + s(b)) }},
		{"sub.u32", "sub.u32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 { return uint64(uint32(a) - uint32(b)) }},
		{"add.sat.s32", "add.sat.s32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 {
			return i32(int32(max(-1<<31, min(1<<31-1, int64(s(a))+int64(s(b))))))
		}},
		{"mul.lo.s32", "mul.lo.s32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 { return i32(s(a) * s(b)) }},
		{"mul.hi.s32", "mul.hi.s32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 { return i32(int32(int64(s(a)) * int64(s(b)) >> 32)) }},
		{"mul.hi.u32", "mul.hi.u32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 { return uint64(uint32(a)) * uint64(uint32(b)) >> 32 }},
		{"mul.wide.s32", "mul.wide.s32 %rd20, %r10, %r11;", "rd", in, func(a, b, _ uint64) uint64 { return u64(int64(s(a)) * int64(s(b))) }},
		{"mul.wide.u32", "mul.wide.u32 %rd20, %r10, %r11;", "rd", in, func(a, b, _ uint64) uint64 { return uint64(uint32(a)) * uint64(uint32(b)) }},
		{"mad.lo.s32", "mad.lo.s32 %r20, %r10, %r11, %r12;", "r", in, func(a, b, c uint64) uint64 { return i32(s(a)*s(b) + s(c)) }},
		{"mad.wide.s32", "mad.wide.s32 %rd20, %r10, %r11, %rd12;", "rd", in, func(a, b, c uint64) uint64 { return u64(int64(s(a))*int64(s(b))) + c }},
		{"mul.hi.u64", "mul.hi.u64 %rd20, %rd10, %rd11;", "rd", in, func(a, b, _ uint64) uint64 { h, _ := bits.Mul64(a, b); return h }},
		{"mul.hi.s64", "mul.hi.s64 %rd20, %rd10, %rd11;", "rd", in, func(a, b, _ uint64) uint64 {
			p := new(big.Int).Mul(big.NewInt(int64(a)), big.NewInt(int64(b)))
			return uint64(new(big.Int).Rsh(p, 64).Int64())
		}},
		// truncation toward zero; the remainder takes the dividend's sign;
		// by zero: all ones and the dividend (the simulator's convention)
		{"div.s32", "div.s32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 {
			switch {
			case s(b) == 0:
				return 0xffffffff
			case s(b) == -1:
				return i32(-s(a))
			}
			return i32(s(a) / s(b))
		}},
		{"rem.s32", "rem.s32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 {
			switch {
			case s(b) == 0:
				return uint64(uint32(a))
			case s(b) == -1:
				return 0
			}
			return i32(s(a) % s(b))
		}},
		{"div.u32", "div.u32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 {
			if uint32(b) == 0 {
				return 0xffffffff
			}
			return uint64(uint32(a) / uint32(b))
		}},
		{"rem.u32", "rem.u32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 {
			if uint32(b) == 0 {
				return uint64(uint32(a))
			}
			return uint64(uint32(a) % uint32(b))
		}},
		{"min.s32", "min.s32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 { return i32(min(s(a), s(b))) }},
		{"max.u32", "max.u32 %r20, %r10, %r11;", "r", in, func(a, b, _ uint64) uint64 { return uint64(max(uint32(a), uint32(b))) }},
		{"abs.s32", "abs.s32 %r20, %r10;", "r", in, func(a, _, _ uint64) uint64 {
			if s(a) < 0 {
				return i32(-s(a))
			}
			return a & 0xffffffff
		}},
		// shift amounts beyond the width clamp (PTX ISA §9.7.7.7)
		{"shl.b32", "and.b32 %r13, %r11, 63;\n\tshl.b32 %r20, %r10, %r13;", "r", in, func(a, b, _ uint64) uint64 {
			if b&63 >= 32 {
				return 0
			}
			return uint64(uint32(a) << (b & 63))
		}},
		{"shr.s32", "and.b32 %r13, %r11, 63;\n\tshr.s32 %r20, %r10, %r13;", "r", in, func(a, b, _ uint64) uint64 { return i32(s(a) >> min(b&63, 31)) }},
		{"shr.u32", "and.b32 %r13, %r11, 63;\n\tshr.u32 %r20, %r10, %r13;", "r", in, func(a, b, _ uint64) uint64 {
			if b&63 >= 32 {
				return 0
			}
			return uint64(uint32(a) >> (b & 63))
		}},
		{"popc.b32", "popc.b32 %r20, %r10;", "r", in, func(a, _, _ uint64) uint64 { return uint64(bits.OnesCount32(uint32(a))) }},
		{"clz.b32", "clz.b32 %r20, %r10;", "r", in, func(a, _, _ uint64) uint64 { return uint64(bits.LeadingZeros32(uint32(a))) }},
		{"brev.b32", "brev.b32 %r20, %r10;", "r", in, func(a, _, _ uint64) uint64 { return uint64(bits.Reverse32(uint32(a))) }},
		{"bfind.u32", "bfind.u32 %r20, %r10;", "r", in, func(a, _, _ uint64) uint64 {
			if uint32(a) == 0 {
				return 0xffffffff
			}
			return uint64(31 - bits.LeadingZeros32(uint32(a)))
		}},
		// bit-field extract: pos and len from the low bytes of b and c
		{"bfe.u32", "bfe.u32 %r20, %r10, %r11, %r12;", "r", in, func(a, b, c uint64) uint64 {
			pos, ln := b&0xff, c&0xff
			if ln == 0 || pos >= 32 {
				return 0
			}
			return uint64(uint32(a)>>pos) & (1<<min(ln, 32-pos) - 1)
		}},
		{"bfe.s32", "bfe.s32 %r20, %r10, %r11, %r12;", "r", in, func(a, b, c uint64) uint64 {
			pos, ln := int(b&0xff), int(c&0xff)
			if ln == 0 {
				return 0
			}
			sb := min(pos+ln-1, 31)
			var out uint32
			for i := 0; i < 32; i++ {
				bit := uint32(a) >> sb & 1
				if i < ln && pos+i <= 31 {
					bit = uint32(a) >> (pos + i) & 1
				}
				out |= bit << i
			}
			return uint64(out)
		}},
		{"bfi.b32", "and.b32 %r13, %r12, 31;\n\tshr.u32 %r14, %r12, 8;\n\tand.b32 %r14, %r14, 31;\n\tbfi.b32 %r20, %r10, %r11, %r13, %r14;", "r", in, func(a, b, c uint64) uint64 {
			pos, ln := c&31, c>>8&31
			mask := uint32(1<<ln-1) << pos
			return uint64(uint32(b)&^mask | uint32(a)<<pos&mask)
		}},
		{"prmt.b32", "prmt.b32 %r20, %r10, %r11, %r12;", "r", in, func(a, b, c uint64) uint64 {
			src := [8]byte{}
			for i := 0; i < 4; i++ {
				src[i], src[4+i] = byte(a>>(8*i)), byte(b>>(8*i))
			}
			var out uint32
			for i := 0; i < 4; i++ {
				sel := c >> (4 * i) & 15
				v := src[sel&7]
				if sel&8 != 0 {
					v = byte(int8(v) >> 7)
				}
				out |= uint32(v) << (8 * i)
			}
			return uint64(out)
		}},
		{"cvt.s64.s32", "cvt.s64.s32 %rd20, %r10;", "rd", in, func(a, _, _ uint64) uint64 { return u64(int64(s(a))) }},
		{"cvt.u16.u32", "cvt.u16.u32 %h1, %r10;\n\tcvt.u32.u16 %r20, %h1;", "r", in, func(a, _, _ uint64) uint64 { return a & 0xffff }},
		{"cvt.sat.s8.s32", "cvt.sat.s8.s32 %r20, %r10;", "r", in, func(a, _, _ uint64) uint64 { return uint64(uint8(int8(max(-128, min(127, s(a)))))) }},
		{"setp.lt.s32/selp", "setp.lt.s32 %p1, %r10, %r11;\n\tselp.b32 %r20, %r12, 7, %p1;", "r", in, func(a, b, c uint64) uint64 {
			if s(a) < s(b) {
				return c & 0xffffffff
			}
			return 7
		}},
		{"setp.hi.u32.and", "setp.lt.u32 %p2, %r12, %r10;\n\tsetp.hi.and.u32 %p1|%p3, %r10, %r11, !%p2;", "p", in, func(a, b, c uint64) uint64 {
			return boolBits(uint32(a) > uint32(b) && !(uint32(c) < uint32(a)))
		}},
	})
}

func boolBits(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// floats are f32 edge cases and random values of every magnitude.
func floats(rng *rand.Rand, n int) [][3]uint64 {
	edge := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.5, 2.5, -2.5, 3.5, 1e-40, -1e-40, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 16777217, 2147483648, -2147483904, 0x1p-126}
	var out [][3]uint64
	for i := 0; i < n; i++ {
		pick := func() uint64 {
			switch rng.IntN(4) {
			case 0:
				return f32b(edge[rng.IntN(len(edge))])
			case 1:
				return f32b(float32(rng.NormFloat64() * 10))
			}
			return f32b(float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(80)-40)))
		}
		out = append(out, [3]uint64{pick(), pick(), pick()})
	}
	return out
}

// skip marks a result the test does not check.
const skip = ^uint64(0)

// exact computes op on float64 values exactly.
func exact(op string, xs ...float64) *big.Float {
	z := new(big.Float).SetPrec(4000)
	a, b := new(big.Float).SetFloat64(xs[0]), new(big.Float).SetFloat64(xs[1])
	switch op {
	case "add":
		z.Add(a, b)
	case "mul":
		z.Mul(a, b)
	case "fma":
		z.Mul(a, b)
		z.Add(z, new(big.Float).SetFloat64(xs[2]))
	}
	return z
}

// toF32 rounds an exact value to f32 by mode, with f32's subnormals (by
// scaling to an integer count of 2⁻¹⁴⁹); overflow is not checked (skip).
func toF32(z *big.Float, mode big.RoundingMode) uint64 {
	if z.Sign() == 0 {
		if z.Signbit() {
			return 0x80000000
		}
		return 0
	}
	if z.MantExp(nil) > 128 {
		return skip
	}
	if z.MantExp(nil) > -126 { // normal
		r, _ := new(big.Float).SetPrec(24).SetMode(mode).Set(z).Float32()
		if math.IsInf(float64(r), 0) {
			return skip
		}
		return uint64(math.Float32bits(r))
	}
	s := new(big.Float).SetMantExp(z, 149) // z·2¹⁴⁹, to be rounded to an integer
	n, acc := s.Int(nil)                   // toward zero
	if acc != big.Exact {
		frac := new(big.Float).Sub(s, new(big.Float).SetInt(n))
		half := frac.Abs(frac).Cmp(big.NewFloat(0.5))
		away := false
		switch mode {
		case big.ToNearestEven:
			away = half > 0 || half == 0 && n.Bit(0) == 1
		case big.ToNegativeInf:
			away = z.Sign() < 0
		case big.ToPositiveInf:
			away = z.Sign() > 0
		}
		if away {
			n.Add(n, big.NewInt(int64(z.Sign())))
		}
	}
	v, _ := new(big.Float).SetMantExp(new(big.Float).SetInt(n), -149).Float32()
	if v == 0 && z.Signbit() {
		return 0x80000000
	}
	return uint64(math.Float32bits(v))
}

func TestFloatOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	in := floats(rng, 128)
	f := func(x uint64) float32 { return math.Float32frombits(uint32(x)) }
	finite := func(xs ...uint64) bool {
		for _, x := range xs {
			if v := float64(f(x)); math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
		return true
	}
	modes := map[string]big.RoundingMode{"rn": big.ToNearestEven, "rz": big.ToZero, "rm": big.ToNegativeInf, "rp": big.ToPositiveInf}
	var cases []opCase
	for name, mode := range modes {
		cases = append(cases,
			opCase{"fma." + name + ".f32", "fma." + name + ".f32 %f20, %f10, %f11, %f12;", "f", in, func(a, b, c uint64) uint64 {
				if !finite(a, b, c) {
					return f32b(float32(math.FMA(float64(f(a)), float64(f(b)), float64(f(c))))) // specials: IEEE's fma
				}
				return toF32(exact("fma", float64(f(a)), float64(f(b)), float64(f(c))), mode)
			}},
			opCase{"add." + name + ".f32", "add." + name + ".f32 %f20, %f10, %f11;", "f", in, func(a, b, _ uint64) uint64 {
				if !finite(a, b) {
					return f32b(f(a) + f(b))
				}
				return toF32(exact("add", float64(f(a)), float64(f(b))), mode)
			}},
			opCase{"mul." + name + ".f64", "mul." + name + ".f64 %fd20, %fd10, %fd11;", "fd", in, func(a, b, _ uint64) uint64 {
				x, y := math.Float64frombits(a), math.Float64frombits(b)
				if math.IsNaN(x*y) || math.IsInf(x*y, 0) || x*y != 0 && math.Abs(x*y) < 0x1p-1000 {
					return f64b(x * y)
				}
				r, _ := new(big.Float).SetPrec(53).SetMode(mode).Set(exact("mul", x, y)).Float64()
				return f64b(r)
			}},
		)
	}
	// results that are NaN compare as the canonical NaN the simulator gives
	canon := func(g func(a, b, c uint64) uint64) func(a, b, c uint64) uint64 {
		return func(a, b, c uint64) uint64 {
			r := g(a, b, c)
			if r != skip && math.IsNaN(float64(f(r))) {
				return 0x7fffffff
			}
			return r
		}
	}
	for i := range cases {
		if cases[i].out == "f" {
			cases[i].want = canon(cases[i].want)
			cases[i].body += "\n\ttestp.notanumber.f32 %p7, %f20;\n\tselp.f32 %f20, 0f7FFFFFFF, %f20, %p7;"
		}
	}
	nanIs := func(x float32) bool { return x != x }
	cases = append(cases,
		// ordered comparisons are false with a NaN, unordered ones true
		opCase{"setp.lt.f32", "setp.lt.f32 %p1, %f10, %f11;", "p", in, func(a, b, _ uint64) uint64 { return boolBits(f(a) < f(b)) }},
		opCase{"setp.ne.f32", "setp.ne.f32 %p1, %f10, %f11;", "p", in, func(a, b, _ uint64) uint64 {
			return boolBits(f(a) != f(b) && !nanIs(f(a)) && !nanIs(f(b)))
		}},
		opCase{"setp.geu.f32", "setp.geu.f32 %p1, %f10, %f11;", "p", in, func(a, b, _ uint64) uint64 {
			return boolBits(!(f(a) < f(b)))
		}},
		opCase{"setp.nan.f32", "setp.nan.f32 %p1, %f10, %f11;", "p", in, func(a, b, _ uint64) uint64 { return boolBits(nanIs(f(a)) || nanIs(f(b))) }},
		// min/max return the number when one input is NaN; .NaN returns NaN
		opCase{"max.f32", "max.f32 %f20, %f10, %f11;", "f", in, func(a, b, _ uint64) uint64 {
			x, y := f(a), f(b)
			switch {
			case nanIs(x) && nanIs(y):
				return 0x7fffffff
			case nanIs(x):
				return f32b(y)
			case nanIs(y):
				return f32b(x)
			case x == 0 && y == 0:
				return f32b(float32(math.Copysign(0, float64(min(1, 1-float32(boolBits(math.Signbit(float64(x)) && math.Signbit(float64(y))))))-0.5)))
			}
			return f32b(max(x, y))
		}},
		opCase{"min.NaN.f32", "min.NaN.f32 %f20, %f10, %f11;", "f", in, func(a, b, _ uint64) uint64 {
			x, y := f(a), f(b)
			switch {
			case nanIs(x) || nanIs(y):
				return 0x7fffffff
			case x == 0 && y == 0:
				if math.Signbit(float64(x)) || math.Signbit(float64(y)) {
					return f32b(float32(math.Copysign(0, -1)))
				}
				return 0
			}
			return f32b(min(x, y))
		}},
		// copysign.f32 d, a, b: b's magnitude with a's sign (PTX ISA §9.7.3.3)
		opCase{"copysign.f32", "copysign.f32 %f20, %f10, %f11;", "f", in, func(a, b, _ uint64) uint64 { return b&0x7fffffff | a&0x80000000 }},
		opCase{"testp.finite.f32", "testp.finite.f32 %p1, %f10;", "p", in, func(a, _, _ uint64) uint64 {
			return boolBits(!nanIs(f(a)) && !math.IsInf(float64(f(a)), 0))
		}},
		opCase{"abs.ftz.f32", "abs.ftz.f32 %f20, %f10;", "f", in, func(a, _, _ uint64) uint64 {
			if a&0x7f800000 == 0 {
				return 0
			}
			return a & 0x7fffffff
		}},
		opCase{"div.rn.f32", "div.rn.f32 %f20, %f10, %f11;\n\ttestp.notanumber.f32 %p7, %f20;\n\tselp.f32 %f20, 0f7FFFFFFF, %f20, %p7;", "f", in, func(a, b, _ uint64) uint64 {
			r := f(a) / f(b)
			if nanIs(r) {
				return 0x7fffffff
			}
			return f32b(r)
		}},
	)
	runOps(t, cases)
}

func TestConversions(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	in := floats(rng, 128)
	f := func(x uint64) float64 { return float64(math.Float32frombits(uint32(x))) }
	toInt := func(x float64, round func(float64) float64) uint64 {
		switch {
		case math.IsNaN(x):
			return 0
		case round(x) >= 1<<31:
			return 0x7fffffff
		case round(x) <= -1<<31:
			return 0x80000000
		}
		return uint64(uint32(int32(round(x))))
	}
	di := make([][3]uint64, 128) // f64 inputs, and s32 inputs in the low word
	for i := range di {
		x := rng.NormFloat64() * math.Ldexp(1, rng.IntN(60)-30)
		di[i] = [3]uint64{math.Float64bits(x), uint64(int64(rng.Int32()) << rng.IntN(8)), 0}
	}
	bf16 := func(x float32) uint64 { // round to nearest even into the top half
		b := math.Float32bits(x)
		if x != x {
			return 0x7fc0
		}
		return uint64((b + 0x7fff + b>>16&1) >> 16)
	}
	runOps(t, []opCase{
		{"cvt.rni.s32.f32", "cvt.rni.s32.f32 %r20, %f10;", "r", in, func(a, _, _ uint64) uint64 { return toInt(f(a), math.RoundToEven) }},
		{"cvt.rzi.s32.f32", "cvt.rzi.s32.f32 %r20, %f10;", "r", in, func(a, _, _ uint64) uint64 { return toInt(f(a), math.Trunc) }},
		{"cvt.rmi.s32.f32", "cvt.rmi.s32.f32 %r20, %f10;", "r", in, func(a, _, _ uint64) uint64 { return toInt(f(a), math.Floor) }},
		{"cvt.rpi.s32.f32", "cvt.rpi.s32.f32 %r20, %f10;", "r", in, func(a, _, _ uint64) uint64 { return toInt(f(a), math.Ceil) }},
		{"cvt.rzi.u32.f32", "cvt.rzi.u32.f32 %r20, %f10;", "r", in, func(a, _, _ uint64) uint64 {
			x := math.Trunc(f(a))
			switch {
			case math.IsNaN(x) || x <= 0:
				return 0
			case x >= 1<<32:
				return 0xffffffff
			}
			return uint64(x)
		}},
		{"cvt.rni.f32.f32", "cvt.rni.f32.f32 %f20, %f10;\n\ttestp.notanumber.f32 %p7, %f20;\n\tselp.f32 %f20, 0f7FFFFFFF, %f20, %p7;", "f", in, func(a, _, _ uint64) uint64 {
			if math.IsNaN(f(a)) {
				return 0x7fffffff
			}
			return f32b(float32(math.RoundToEven(f(a))))
		}},
		{"cvt.rn.f32.f64", "cvt.rn.f32.f64 %f20, %fd10;", "f", di, func(a, _, _ uint64) uint64 { return f32b(float32(math.Float64frombits(a))) }},
		{"cvt.rz.f32.f64", "cvt.rz.f32.f64 %f20, %fd10;", "f", di, func(a, _, _ uint64) uint64 {
			x := math.Float64frombits(a)
			r := float32(x)
			if math.Abs(float64(r)) > math.Abs(x) {
				r = math.Nextafter32(r, 0)
			}
			return f32b(r)
		}},
		{"cvt.rp.f32.f64", "cvt.rp.f32.f64 %f20, %fd10;", "f", di, func(a, _, _ uint64) uint64 {
			x := math.Float64frombits(a)
			r := float32(x)
			if float64(r) < x {
				r = math.Nextafter32(r, float32(math.Inf(1)))
			}
			return f32b(r)
		}},
		{"cvt.rn.f32.s32", "cvt.rn.f32.s32 %f20, %r11;", "f", di, func(_, b, _ uint64) uint64 { return f32b(float32(int32(uint32(b)))) }},
		{"cvt.rz.f32.s32", "cvt.rz.f32.s32 %f20, %r11;", "f", di, func(_, b, _ uint64) uint64 {
			x := int32(uint32(b))
			r := float32(x)
			if math.Abs(float64(r)) > math.Abs(float64(x)) {
				r = math.Nextafter32(r, 0)
			}
			return f32b(r)
		}},
		{"cvt.rn.f64.s64", "cvt.rn.f64.s64 %fd20, %rd11;", "fd", di, func(_, b, _ uint64) uint64 { return f64b(float64(int64(b))) }},
		{"cvt.rna.tf32.f32", "cvt.rna.tf32.f32 %r20, %f10;", "r", in, func(a, _, _ uint64) uint64 {
			x := math.Float32frombits(uint32(a))
			if x != x {
				return 0x7fffffff
			}
			return f32b(tile.RoundTF32(x))
		}},
		// a goes to the upper half, b to the lower (PTX ISA §9.7.9.21)
		{"cvt.rn.bf16x2.f32", "cvt.rn.bf16x2.f32 %r20, %f10, %f11;", "r", in, func(a, b, _ uint64) uint64 {
			return bf16(math.Float32frombits(uint32(a)))<<16 | bf16(math.Float32frombits(uint32(b)))
		}},
		{"cvt.f32.bf16", "cvt.rn.bf16.f32 %h1, %f10;\n\tcvt.f32.bf16 %f20, %h1;\n\ttestp.notanumber.f32 %p7, %f20;\n\tselp.f32 %f20, 0f7FFFFFFF, %f20, %p7;", "f", in, func(a, _, _ uint64) uint64 {
			r := math.Float32frombits(uint32(bf16(math.Float32frombits(uint32(a))) << 16))
			if r != r {
				return 0x7fffffff
			}
			return f32b(r)
		}},
		{"cvt.rn.f16.f32", "cvt.rn.f16.f32 %h1, %f10;\n\tcvt.u32.u16 %r20, %h1;", "r", halfRange(rng), func(a, _, _ uint64) uint64 { return uint64(f16bits(math.Float32frombits(uint32(a)))) }},
	})
}

// halfRange draws values inside f16's normal range.
func halfRange(rng *rand.Rand) [][3]uint64 {
	var out [][3]uint64
	for i := 0; i < 128; i++ {
		x := float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(28)-13))
		if rng.IntN(2) == 0 {
			x = -x
		}
		out = append(out, [3]uint64{f32b(x), 0, 0})
	}
	return out
}
