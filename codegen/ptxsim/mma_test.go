package ptxsim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
)

// The fragment layouts of the PTX ISA (§9.7.14.5.4–8), transcribed here a
// second time, independently of the simulator's tables, as the position
// (row, col) of element i of a lane's fragment; g = lane>>2, t = lane%4.
type layout func(lane, i int) (int, int)

var (
	isaC = func(l, i int) (int, int) { // c0,c1: (g, 2t+i); c2,c3: (g+8, 2t+i-2)
		g, t := l>>2, l%4
		if i < 2 {
			return g, 2*t + i
		}
		return g + 8, 2*t + i - 2
	}
	isaA16x4TF32 = func(l, i int) (int, int) { return l>>2 + 8*i, l % 4 }
	isaB4x8TF32  = func(l, i int) (int, int) { return l % 4, l >> 2 }
	isaA16x8TF32 = func(l, i int) (int, int) { // a0 (g,t) a1 (g+8,t) a2 (g,t+4) a3 (g+8,t+4)
		g, t := l>>2, l%4
		return []int{g, g + 8, g, g + 8}[i], []int{t, t, t + 4, t + 4}[i]
	}
	isaB8x8TF32  = func(l, i int) (int, int) { return l%4 + 4*i, l >> 2 } // b0 (t,g) b1 (t+4,g)
	isaA16x8F16  = func(l, i int) (int, int) { g, t := l>>2, l%4; return g + 8*(i/2), 2*t + (i & 1) }
	isaB8x8F16   = func(l, i int) (int, int) { g, t := l>>2, l%4; return 2*t + (i & 1), g }
	isaA16x16F16 = func(l, i int) (int, int) { // row g for a0,a1,a4,a5; col +8 for i >= 4
		g, t := l>>2, l%4
		row := g
		if i == 2 || i == 3 || i == 6 || i == 7 {
			row = g + 8
		}
		col := 2*t + (i & 1)
		if i >= 4 {
			col += 8
		}
		return row, col
	}
	isaB16x8F16 = func(l, i int) (int, int) { // b0,b1: (2t+i, g); b2,b3: (2t+i+8, g)
		g, t := l>>2, l%4
		row := 2*t + (i & 1)
		if i >= 2 {
			row += 8
		}
		return row, g
	}
	isaA8x4F64 = func(l, i int) (int, int) { return l >> 2, l % 4 }
	isaB4x8F64 = func(l, i int) (int, int) { return l % 4, l >> 2 }
	isaC8x8F64 = func(l, i int) (int, int) { return l >> 2, 2*(l%4) + i }
)

type mmaCase struct {
	shape         string
	m, n, k       int
	dt, abt, ct   string
	aRegs, bRegs  int
	cRegs, dRegs  int
	per           int // A/B elements per register
	a, b, c, dLay layout
	tol           float64
}

var mmaCases = []mmaCase{
	{"m16n8k4", 16, 8, 4, "f32", "tf32", "f32", 2, 1, 4, 4, 1, isaA16x4TF32, isaB4x8TF32, isaC, isaC, 1e-6},
	{"m16n8k8", 16, 8, 8, "f32", "tf32", "f32", 4, 2, 4, 4, 1, isaA16x8TF32, isaB8x8TF32, isaC, isaC, 1e-6},
	{"m16n8k8", 16, 8, 8, "f32", "f16", "f32", 2, 1, 4, 4, 2, isaA16x8F16, isaB8x8F16, isaC, isaC, 1e-6},
	{"m16n8k8", 16, 8, 8, "f32", "bf16", "f32", 2, 1, 4, 4, 2, isaA16x8F16, isaB8x8F16, isaC, isaC, 1e-6},
	{"m16n8k16", 16, 8, 16, "f32", "f16", "f32", 4, 2, 4, 4, 2, isaA16x16F16, isaB16x8F16, isaC, isaC, 1e-6},
	{"m16n8k16", 16, 8, 16, "f32", "bf16", "f32", 4, 2, 4, 4, 2, isaA16x16F16, isaB16x8F16, isaC, isaC, 1e-6},
	{"m16n8k16", 16, 8, 16, "f16", "f16", "f16", 4, 2, 2, 2, 2, isaA16x16F16, isaB16x8F16, isaC, isaC, 1e-3},
	{"m8n8k4", 8, 8, 4, "f64", "f64", "f64", 1, 1, 2, 2, 1, isaA8x4F64, isaB4x8F64, isaC8x8F64, isaC8x8F64, 1e-15},
}

// quantise rounds to the operand type and returns the value and its bits
// (f32 bits for tf32; f16 and bf16 bits in the low half).
func quantise(typ string, x float64) (float64, uint64) {
	switch typ {
	case "tf32":
		v := tile.RoundTF32(float32(x))
		return float64(v), uint64(math.Float32bits(v))
	case "f32":
		return float64(float32(x)), uint64(math.Float32bits(float32(x)))
	case "bf16":
		b := math.Float32bits(float32(x))
		b += 0x7fff + b>>16&1 // round to nearest even into the top 16 bits
		b &^= 0xffff
		return float64(math.Float32frombits(b)), uint64(b >> 16)
	case "f16":
		h := f16bits(float32(x))
		return f16value(h), uint64(h)
	}
	return x, math.Float64bits(x)
}

// f16bits rounds a float32 to half precision, to nearest even (values in
// the normal range only, as the test draws them).
func f16bits(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b >> 16 & 0x8000)
	e := int(b>>23&0xff) - 127 + 15
	m := b & 0x7fffff
	if x == 0 {
		return sign
	}
	// 10 of 23 mantissa bits, to nearest even
	r := m >> 13
	rem := m & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && r&1 == 1 {
		r++
		if r == 0x400 {
			r = 0
			e++
		}
	}
	return sign | uint16(e)<<10 | uint16(r)
}

func f16value(h uint16) float64 {
	e := int(h >> 10 & 0x1f)
	m := float64(h & 0x3ff)
	v := math.Ldexp(1+m/1024, e-15)
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

func regClass(typ string) (decl, ld string, size int) {
	switch typ {
	case "f32":
		return "%f", "f32", 4
	case "f64":
		return "%fd", "f64", 8
	}
	return "%r", "b32", 4
}

// fragmentPTX loads each lane's A, B, C fragment registers from lane-major
// arrays, runs one mma and stores D's the same way.
func fragmentPTX(c mmaCase) string {
	var sb strings.Builder
	abDecl, abLd, abSize := regClass(map[string]string{"f64": "f64"}[c.abt])
	cDecl, cLd, cSize := regClass(map[string]string{"f32": "f32", "f64": "f64"}[c.ct])
	dDecl, dLd, dSize := regClass(map[string]string{"f32": "f32", "f64": "f64"}[c.dt])
	regs := func(prefix string, from, n int) string {
		var s []string
		for i := 0; i < n; i++ {
			s = append(s, fmt.Sprintf("%s%d", prefix, from+i))
		}
		return "{" + strings.Join(s, ", ") + "}"
	}
	fmt.Fprintf(&sb, "\tmov.u32 %%r0, %%laneid;\n")
	next := map[string]int{"%r": 1, "%f": 1, "%fd": 1}
	load := func(param, decl, ld string, size, n int) int {
		first := next[decl]
		fmt.Fprintf(&sb, "\tld.param.u64 %%rd1, [%s];\n\tmul.wide.u32 %%rd2, %%r0, %d;\n\tadd.s64 %%rd3, %%rd1, %%rd2;\n", param, size*n)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&sb, "\tld.global.%s %s%d, [%%rd3+%d];\n", ld, decl, first+i, size*i)
		}
		next[decl] += n
		return first
	}
	a := load("a", abDecl, abLd, abSize, c.aRegs)
	b := load("b", abDecl, abLd, abSize, c.bRegs)
	cc := load("c", cDecl, cLd, cSize, c.cRegs)
	d := next[dDecl]
	next[dDecl] += c.dRegs
	fmt.Fprintf(&sb, "\tmma.sync.aligned.%s.row.col.%s.%s.%s.%s %s, %s, %s, %s;\n", c.shape, c.dt, c.abt, c.abt, c.ct,
		regs(dDecl, d, c.dRegs), regs(abDecl, a, c.aRegs), regs(abDecl, b, c.bRegs), regs(cDecl, cc, c.cRegs))
	fmt.Fprintf(&sb, "\tld.param.u64 %%rd1, [d];\n\tmul.wide.u32 %%rd2, %%r0, %d;\n\tadd.s64 %%rd3, %%rd1, %%rd2;\n", dSize*c.dRegs)
	for i := 0; i < c.dRegs; i++ {
		fmt.Fprintf(&sb, "\tst.global.%s [%%rd3+%d], %s%d;\n", dLd, dSize*i, dDecl, d+i)
	}
	return kernelPTX("mma_frag", ".param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d", sb.String())
}

// TestMmaFragments: for every mma form the simulator knows, a warp loads
// random A, B and C fragments laid out by the ISA's formulas, runs one
// mma.sync, and D, read back by the same formulas, must be the plain
// product A·B + C (operands rounded to their type; one rounding of the
// sum to the accumulator type).
func TestMmaFragments(t *testing.T) {
	for _, c := range mmaCases {
		name := fmt.Sprintf("%s.%s.%s.%s", c.shape, c.dt, c.abt, c.ct)
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(name))))
			A := make([]float64, c.m*c.k)
			B := make([]float64, c.k*c.n)
			C := make([]float64, c.m*c.n)
			abBits := map[string]int{"f64": 64}[c.abt]
			if abBits == 0 {
				abBits = 32
			}
			afrag := make([]uint64, 32*c.aRegs)
			bfrag := make([]uint64, 32*c.bRegs)
			cfrag := make([]uint64, 32*c.cRegs)
			fill := func(mat []float64, cols int, typ string, lay layout, frag []uint64, regs, per int) {
				for i := range mat {
					mat[i], _ = quantise(typ, rng.Float64()*2-1)
				}
				seen := make([]int, len(mat))
				for l := 0; l < 32; l++ {
					for i := 0; i < regs*per; i++ {
						r, col := lay(l, i)
						seen[r*cols+col]++
						_, bits := quantise(typ, mat[r*cols+col])
						frag[l*regs+i/per] |= bits << (16 * (i % per))
					}
				}
				for i, n := range seen {
					if n != 1 {
						t.Fatalf("the test's layout puts element %d in %d fragments", i, n)
					}
				}
			}
			fill(A, c.k, c.abt, c.a, afrag, c.aRegs, c.per)
			fill(B, c.n, c.abt, c.b, bfrag, c.bRegs, c.per)
			cPer := 1
			if c.ct == "f16" {
				cPer = 2
			}
			fill(C, c.n, c.ct, c.c, cfrag, c.cRegs, cPer)
			src := fragmentPTX(c)
			mod, err := ptxsim.Parse(src)
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			mem := ptxsim.NewMemory()
			toMem := func(name string, frag []uint64, bits int) uint64 {
				if bits == 64 {
					a, _ := mem.AllocCopy(name, frag)
					return a
				}
				u := make([]uint32, len(frag))
				for i, v := range frag {
					u[i] = uint32(v)
				}
				a, _ := mem.AllocCopy(name, u)
				return a
			}
			aa, ba := toMem("a", afrag, abBits), toMem("b", bfrag, abBits)
			cBits, dBits := 32, 32
			if c.ct == "f64" {
				cBits, dBits = 64, 64
			}
			ca := toMem("c", cfrag, cBits)
			da := mem.Alloc("d", 32*c.dRegs*dBits/8)
			if err := mod.Launch("mma_frag", ptxsim.Config{Block: [3]int{32}}, mem, aa, ba, ca, da); err != nil {
				t.Fatal(err)
			}
			dfrag := make([]uint64, 32*c.dRegs)
			if dBits == 64 {
				mem.Read(da, dfrag)
			} else {
				u := make([]uint32, len(dfrag))
				mem.Read(da, u)
				for i, v := range u {
					dfrag[i] = uint64(v)
				}
			}
			dPer := 1
			if c.dt == "f16" {
				dPer = 2
			}
			checked := 0
			for l := 0; l < 32; l++ {
				for i := 0; i < c.dRegs*dPer; i++ {
					r, col := c.dLay(l, i)
					bits := dfrag[l*c.dRegs+i/dPer] >> (16 * (i % dPer))
					var got float64
					switch c.dt {
					case "f32":
						got = float64(math.Float32frombits(uint32(bits)))
					case "f64":
						got = math.Float64frombits(bits)
					case "f16":
						got = f16value(uint16(bits))
					}
					want := C[r*c.n+col]
					for k := 0; k < c.k; k++ {
						want += A[r*c.k+k] * B[k*c.n+col]
					}
					if math.Abs(got-want) > c.tol*(1+math.Abs(want)) {
						t.Fatalf("D[%d][%d] (lane %d element %d) = %v, want %v", r, col, l, i, got, want)
					}
					checked++
				}
			}
			if checked != c.m*c.n {
				t.Fatalf("checked %d elements of %d", checked, c.m*c.n)
			}
			ptxasCheck(t, src)
		})
	}
}

// ptxasCheck assembles handwritten PTX with ptxas for its target where it is
// installed, so that the tests' kernels are real PTX.
func ptxasCheck(t *testing.T, src string) {
	t.Helper()
	ptxas, err := exec.LookPath("ptxas")
	if err != nil {
		return
	}
	file := filepath.Join(t.TempDir(), "k.ptx")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	arch := "sm_80"
	if strings.Contains(src, ".target sm_90") {
		arch = "sm_90"
	}
	if out, err := exec.Command(ptxas, "-arch="+arch, "-o", os.DevNull, file).CombinedOutput(); err != nil {
		t.Fatalf("ptxas rejects the test's PTX: %v\n%s\n%s", err, out, src)
	}
}
