package native_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// launcher runs kernels natively; a launch that falls back is an error
// here (the tests want to see the native code run): errStrideFallback
// where a stride the code takes as 1 is not (the executor runs such
// launches: codegen/cpu's TestConformanceNative checks them there).
type launcher struct{}

func (launcher) Name() string { return "native" }

var errStrideFallback = errors.New("the launch falls back: a stride parameter the code takes as 1 is not 1")

func (launcher) Launch(k *tile.Kernel, grid tile.Grid, args ...any) error {
	nk, err := native.Compile(k)
	if err != nil {
		return err
	}
	defer nk.Free()
	err = nk.Launch(grid, args...)
	if errors.Is(err, native.ErrFallback) && native.StrideFallback(nk, args) {
		return errStrideFallback
	}
	var pe *native.Partial
	if errors.As(err, &pe) {
		// the machine code ran all but pe.Programs: cpu.Exec runs the
		// launch as it does, the executor running those
		partials.Add(1)
		return cpu.RunNative(k, grid, args...)
	}
	return err
}

// partials counts the launcher's launches that the machine code ran but
// for some programs (native.Partial).
var partials atomic.Int64

// inexact names the ops whose native results may differ from the
// reference interpreter's (each bound is the executor's: see
// codegen/cpu's TestInexactOps); every other op computes the same
// operations in the same order.
func inexact(v *tile.Value) string {
	switch {
	case v.Op == tile.OpExp && v.Type.DType == tile.F32:
		return "f32 exp: codegen/cpu's expf, within 1 ulp"
	case v.Op == tile.OpTanh && v.Type.DType == tile.F32:
		return "f32 tanh: codegen/cpu's tanhf, within 1 ulp"
	case v.Op == tile.OpLog && v.Type.DType == tile.F32:
		return "f32 log: logf32 (Cephes' logf), within 1 ulp"
	case v.Op == tile.OpSigmoid && v.Type.DType == tile.F32:
		return "f32 sigmoid: sigmoidf32, within 1 ulp"
	case v.Op == tile.OpLog1p && v.Type.DType == tile.F32:
		return "f32 log1p: log1pf32, within 1.5 ulp"
	case v.Op == tile.OpExpm1 && v.Type.DType == tile.F32:
		return "f32 expm1: expm1f32, within 1.5 ulp"
	case v.Op == tile.OpErf && v.Type.DType == tile.F32:
		return "f32 erf: erff32, within 1.1 ulp"
	case v.Op == tile.OpLog2 && v.Type.DType == tile.F32:
		return "f32 log2: log2f32, within 1.1 ulp"
	case v.Op == tile.OpExp2 && v.Type.DType == tile.F32:
		return "f32 exp2: exp2f32, within 1 ulp"
	case v.Op == tile.OpPow && v.Type.DType == tile.F32:
		return "f32 pow: powf32, within 1.25 ulp for |y| ≤ 4, 0.7·(1 + |y|/4) beyond"
	case (v.Op == tile.OpSin || v.Op == tile.OpCos) && v.Type.DType == tile.F32:
		return "f32 sin and cos: sinf32 and cosf32, within 1.5 ulp (beyond 2^17 the executor's)"
	case v.Op == tile.OpReduceSum && v.Aux == int64(v.Args[0].Type.Shape.Rank-1) && v.Args[0].Type.Shape.Dims[v.Aux] > 8:
		return "f32 sum along the last axis: sixteen partial sums"
	case v.Op == tile.OpDot:
		return "dot: fused multiply-adds in k order (TestDotNative)"
	case v.Op == tile.OpAtomicAdd && v.Type.DType.IsFloat():
		return "float atomic add: programs add in the order they happen to run"
	}
	return ""
}

// hasF64 reports whether kernel k has an f64 value.
func hasF64(k *tile.Kernel) bool {
	f := false
	k.Walk(func(v *tile.Value) { f = f || v.Type.DType == tile.F64 })
	return f
}

func requireJIT(t testing.TB) {
	t.Helper()
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
}

// compileFor compiles k natively with AVX-512 on or off as isa says
// ("avx512", "avx2"), failing t where it is not compiled; the kernel is
// freed when t ends.
func compileFor(t *testing.T, isa string, k *tile.Kernel) *native.Kernel {
	t.Helper()
	native.SetAVX512(isa == "avx512")
	nk, err := native.Compile(k)
	if err != nil {
		t.Fatalf("%s: not compiled natively: %v\n%v", isa, err, k)
	}
	t.Cleanup(func() { nk.Free() })
	return nk
}

// requireAVX512 is requireJIT on a CPU with AVX-512 (skipped elsewhere,
// saying what the test needs it for).
func requireAVX512(t testing.TB, why string) {
	t.Helper()
	requireJIT(t)
	if !jit.HasAVX512() {
		t.Skip("no AVX-512 here: " + why)
	}
}

// TestAgainstReference runs every conformance case the native code
// generator supports, natively and on the reference interpreter from the
// same inputs: bit for bit where the kernel has no inexact op, else within
// the case's tolerance; with AVX2 only and, where the CPU has it, with
// AVX-512. It reports how many cases ran natively and why the others did
// not.
func TestAgainstReference(t *testing.T) {
	requireJIT(t)
	ran, exact, total, zmm := 0, 0, 0, 0
	var strided atomic.Int32 // runs whose launches fall back for a stride not 1 (skipped)
	f64s, f64Pairs := 0, 0   // f64 cases natively with AVX-512; of which also without (ymm pairs)
	why, whyPairs := map[string]int{}, map[string]int{}
	for _, c := range tiletest.Cases() {
		total++
		k, err := c.Kernel()
		if err != nil {
			t.Fatal(err)
		}
		nk, err := native.Compile(k)
		if err == nil {
			if native.ZmmPhases(nk) > 0 {
				zmm++
			}
			nk.Free()
		}
		if err != nil {
			if !errors.Is(err, native.ErrUnsupported) {
				t.Errorf("%s: %v", c.Name, err)
				continue
			}
			msg := err.Error()
			if i := strings.Index(msg, "): "); i >= 0 {
				msg = msg[i+3:]
			}
			why[strings.TrimSuffix(msg, ": "+native.ErrUnsupported.Error())]++
			if testing.Verbose() {
				t.Logf("%s: %v", c.Name, err)
			}
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if c.Large && testing.Short() {
				t.Skip("large case: skipped with -short")
			}
			reasons := map[string]bool{}
			k.Walk(func(v *tile.Value) {
				if s := inexact(v); s != "" {
					reasons[s] = true
				}
			})
			cc := c
			if len(reasons) == 0 {
				cc.Tol = tiletest.Tol{}
				exact++
			}
			ran++
			f64 := hasF64(k)
			if f64 {
				f64s++
			}
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				if f64 && isa == "avx2" {
					// f64 vectors as ymm pairs (f64y.go): some kernels are declined
					nk, err := native.Compile(k)
					if err != nil {
						if !errors.Is(err, native.ErrUnsupported) {
							t.Fatalf("avx2: %v", err)
						}
						msg := err.Error()
						if i := strings.Index(msg, "): "); i >= 0 {
							msg = msg[i+3:]
						}
						whyPairs[strings.TrimSuffix(msg, ": "+native.ErrUnsupported.Error())]++
						continue
					}
					nk.Free()
					f64Pairs++
				}
				if err := tiletest.Compare(launcher{}, tiletest.Interp{}, cc); errors.Is(err, errStrideFallback) {
					strided.Add(1)
					t.Skipf("%s: %v (codegen/cpu runs it on the executor)", isa, err)
				} else if err != nil {
					var rs []string
					for s := range reasons {
						rs = append(rs, s)
					}
					sort.Strings(rs)
					t.Fatalf("%s: %v\ninexact ops: %v\n%v", isa, err, rs, k)
				}
			}
		})
	}
	var rs []string
	for s, n := range why {
		rs = append(rs, s+": "+itoa(n))
	}
	sort.Strings(rs)
	t.Logf("%d of %d conformance cases ran natively (%d bit-exact by their ops, %d with phases in zmm registers; %d runs fell back at launch for a stride parameter not 1); not supported:\n  %s",
		ran, total, exact, zmm, strided.Load(), strings.Join(rs, "\n  "))
	if len(isas(t)) == 2 {
		rs = rs[:0]
		for s, n := range whyPairs {
			rs = append(rs, s+": "+itoa(n))
		}
		sort.Strings(rs)
		if len(rs) == 0 {
			rs = append(rs, "none")
		}
		t.Logf("f64 without AVX-512 (ymm pairs): %d of the %d f64 cases natively; not supported:\n  %s",
			f64Pairs, f64s, strings.Join(rs, "\n  "))
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestDivRemLanes: x / n and x % n of contiguous lanes are affine within a
// block when the block does not straddle a multiple of n (a bias indexed
// by the column of a flat offset); a program where it would, bails out,
// and the launch falls back (the executor gets it right).
func TestDivRemLanes(t *testing.T) {
	requireJIT(t)
	const block = 64
	b := tile.NewBuilder("divrem", tile.Meta{"BLOCK": block})
	x, bias, w, y := b.Ptr("x", tile.F32), b.Ptr("bias", tile.F32), b.Ptr("w", tile.F32), b.Ptr("y", tile.F32)
	size := b.Param("size", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
	m := b.Lt(offs, size)
	col := b.Rem(offs, 96)
	row := b.Div(offs, 96)
	v := b.Add(b.Load(b.AddPtr(x, offs), m, nil), b.Mul(b.Load(b.AddPtr(bias, col), m, nil), b.Load(b.AddPtr(w, row), m, nil)))
	b.Store(b.AddPtr(y, offs), v, m)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	nk, err := native.Compile(k)
	if err != nil {
		t.Fatal(err)
	}
	defer nk.Free()
	rng := tiletest.RNG("divrem")
	for _, c := range []struct {
		name     string
		size     int
		fallback bool
	}{
		{"blocks within rows", 96 * 2, true}, // 64-lane blocks straddle multiples of 96: program 1 bails
		{"one block", 60, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			xs, bs, ws := tiletest.Uniform(rng, c.size, -1, 1), tiletest.Uniform(rng, 96, -1, 1), tiletest.Uniform(rng, c.size/96+1, -1, 1)
			got, want := tiletest.Output(c.size), tiletest.Output(c.size)
			grid := tile.Grid{(c.size + block - 1) / block}
			err := nk.Launch(grid, xs, bs, ws, got, c.size)
			if c.fallback {
				if !errors.Is(err, native.ErrFallback) {
					t.Fatalf("launch: %v, want ErrFallback", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := (tiletest.Interp{}).Launch(k, grid, xs, bs, ws, want, c.size); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("y[%d] = %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestDotNative: matrix products as the native micro-kernels compute them
// (6×16 ymm register blocks, and where the CPU has AVX-512 12×32 zmm ones,
// over packed frame blocks), against the reference interpreter, element by
// element within 2(K+1)·2⁻²⁴·(|c| + Σ_k |a·b|) (fused multiply-adds in k
// order against two roundings a step; codegen/cpu's TestInexactOps bounds
// the executor's dot alike), and the two micro-kernels against each other
// bit for bit (the same operations in the same order). Sizes that are not
// multiples of the blocks (masked rows, columns and k), row blocks of 16,
// 32, 64 and 128 (6-row blocks and a tail of 4, 2, 4 or 2; 12-row ones and
// a tail of 4, 8, 4 or 8), column blocks of 16 (one zmm strip of a single
// vector) to 128, a K loop whose product accumulates in the carried block,
// one whose yield is not the product (the product's own block), and
// products outside loops with a zero or a loaded accumulator.
func TestDotNative(t *testing.T) {
	requireJIT(t)
	type dotCase struct {
		name       string
		m, n, k    int
		bm, bn, bk int
		loop       bool // a K loop (else one block of K)
		loadAcc    bool // the accumulator starts from c (else zeros)
		notYield   bool // the loop yields the product plus zero
		tA, tB     bool // a is stored as its transpose [K,M], b as [N,K]
	}
	for _, c := range []dotCase{
		{name: "one block 16×16×16", m: 16, n: 16, k: 16, bm: 16, bn: 16, bk: 16},
		{name: "one block, loaded accumulator, masked 50×40×27", m: 50, n: 40, k: 27, bm: 64, bn: 32, bk: 32, loadAcc: true},
		{name: "K loop in place 130×70×90", m: 130, n: 70, k: 90, bm: 32, bn: 32, bk: 32, loop: true},
		{name: "K loop in place 64×128 blocks 100×200×77", m: 100, n: 200, k: 77, bm: 64, bn: 128, bk: 16, loop: true, loadAcc: true},
		{name: "K loop, yield not the product, 45×33×70", m: 45, n: 33, k: 70, bm: 16, bn: 32, bk: 32, loop: true, notYield: true},
		{name: "a transposed, K loop 130×70×90", m: 130, n: 70, k: 90, bm: 32, bn: 32, bk: 32, loop: true, tA: true},
		{name: "b transposed, K loop 100×200×77", m: 100, n: 200, k: 77, bm: 64, bn: 64, bk: 16, loop: true, tB: true, loadAcc: true},
		{name: "both transposed, one block 50×40×27", m: 50, n: 40, k: 27, bm: 64, bn: 64, bk: 32, tA: true, tB: true},
		{name: "K loop 128×16 blocks 300×50×45", m: 300, n: 50, k: 45, bm: 128, bn: 16, bk: 16, loop: true, loadAcc: true},
		{name: "K loop 128×128 blocks 150×300×70", m: 150, n: 300, k: 70, bm: 128, bn: 128, bk: 32, loop: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := dotKernel(t, c.bm, c.bn, c.bk, c.loop, c.loadAcc, c.notYield, c.tA, c.tB)
			rng := tiletest.RNG(c.name)
			a, b := tiletest.Uniform(rng, c.m*c.k, -1, 1), tiletest.Uniform(rng, c.k*c.n, -1, 1)
			c0 := tiletest.Uniform(rng, c.m*c.n, -1, 1)
			grid := tile.Grid{(c.m + c.bm - 1) / c.bm, (c.n + c.bn - 1) / c.bn}
			run := func(launch func(args ...any) error) []float32 {
				out := make([]float32, c.m*c.n)
				for i := range out {
					out[i] = float32(math.NaN()) // every element is written
				}
				if err := launch(a, b, c0, out, c.m, c.n, c.k); err != nil {
					t.Fatal(err)
				}
				return out
			}
			productOnEachISA(t, k, grid, run, func(isa string, got, want []float32) {
				checkDot(t, isa, c.m, c.n, c.k, c.loadAcc, c.tA, c.tB, a, b, c0, got, want)
			})
		})
	}
}

// productOnEachISA runs product kernel k on the reference interpreter and
// as machine code on each ISA the CPU has (run launches it on fresh,
// poisoned outputs), checks each result against the reference's with
// check, and requires the ISAs' results to be the same bit for bit (the
// same operations in the same order).
func productOnEachISA(t *testing.T, k *tile.Kernel, grid tile.Grid, run func(launch func(args ...any) error) []float32, check func(isa string, got, want []float32)) {
	t.Helper()
	want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
	var first []float32
	for _, isa := range isas(t) {
		native.SetAVX512(isa == "avx512")
		nk, err := native.Compile(k)
		if err != nil {
			t.Fatalf("%s: not compiled natively: %v\n%v", isa, err, k)
		}
		got := run(func(args ...any) error { return nk.Launch(grid, args...) })
		nk.Free()
		check(isa, got, want)
		if first == nil {
			first = got
			continue
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
				t.Fatalf("c[%d] = %v with %s, %v with avx2", i, got[i], isa, first[i])
			}
		}
	}
}

// checkDot checks a product against the reference's: within
// 2(K+1)·2⁻²⁴·(|c0| + Σ|a·b|) of it, element by element.
func checkDot(t *testing.T, isa string, m, n, k int, loadAcc, tA, tB bool, a, b, c0, got, want []float32) {
	t.Helper()
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			abs := 0.0
			if loadAcc {
				abs = math.Abs(float64(c0[i*n+j]))
			}
			for q := 0; q < k; q++ {
				ai, bi := i*k+q, q*n+j
				if tA {
					ai = q*m + i
				}
				if tB {
					bi = j*k + q
				}
				abs += math.Abs(float64(a[ai]) * float64(b[bi]))
			}
			g, w := float64(got[i*n+j]), float64(want[i*n+j])
			if bound := 2 * float64(k+1) * 0x1p-24 * abs; !(math.Abs(g-w) <= bound) {
				t.Fatalf("%s: c[%d,%d] = %v natively, %v on the reference: apart by more than %g", isa, i, j, g, w, bound)
			}
		}
	}
}

// dotKernel is c = [c0 +] a·b of row-major a [M,K] (or its transpose
// [K,M]), b [K,N] (or [N,K]), c0 and c [M,N], one
// bm×bn block of c a program.
func dotKernel(t testing.TB, bm, bn, bk int, loop, loadAcc, notYield, tA, tB bool) *tile.Kernel {
	return dotKernelOf(t, tile.F32, bm, bn, bk, loop, loadAcc, notYield, tA, tB)
}

// dotKernelOf is dotKernel over elements of type dt.
func dotKernelOf(t testing.TB, dt tile.DType, bm, bn, bk int, loop, loadAcc, notYield, tA, tB bool) *tile.Kernel {
	return dotKernelPrec(t, dt, tile.PrecIEEE, bm, bn, bk, loop, loadAcc, notYield, tA, tB)
}

// dotKernelPrec is dotKernelOf with its products of precision prec.
func dotKernelPrec(t testing.TB, dt tile.DType, prec tile.Precision, bm, bn, bk int, loop, loadAcc, notYield, tA, tB bool) *tile.Kernel {
	b := tile.NewBuilder("dot", nil)
	pa, pb, pc0, pc := b.Ptr("a", dt), b.Ptr("b", dt), b.Ptr("c0", dt), b.Ptr("c", dt)
	M, N, K := b.Param("M", tile.I32), b.Param("N", tile.I32), b.Param("K", tile.I32)
	rows := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	cols := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	cmask := b.And(b.Lt(rows, M), b.Lt(cols, N))
	cptr := b.AddPtr(pc, b.Add(b.Mul(rows, N), cols))
	init := b.Zeros(dt, bm, bn)
	if loadAcc {
		init = b.Load(b.AddPtr(pc0, b.Add(b.Mul(rows, N), cols)), cmask, 0.0)
	}
	step := func(k0 *tile.Value, acc *tile.Value) *tile.Value {
		rk := b.Arange(0, bk)
		kr, kc := b.Add(b.ExpandDims(rk, 0), k0), b.Add(b.ExpandDims(rk, 1), k0)
		aOff, bOff := b.Add(b.Mul(rows, K), kr), b.Add(b.Mul(kc, N), cols)
		if tA {
			aOff = b.Add(rows, b.Mul(kr, M))
		}
		if tB {
			bOff = b.Add(b.Mul(cols, K), kc)
		}
		av := b.Load(b.AddPtr(pa, aOff), b.And(b.Lt(rows, M), b.Lt(kr, K)), 0.0)
		bv := b.Load(b.AddPtr(pb, bOff), b.And(b.Lt(kc, K), b.Lt(cols, N)), 0.0)
		return b.Dot(av, bv, acc, prec)
	}
	var res *tile.Value
	if loop {
		res = b.For(0, K, bk, []*tile.Value{init}, func(k0 *tile.Value, cv []*tile.Value) []*tile.Value {
			d := step(k0, cv[0])
			if notYield {
				d = b.Add(d, 0.0)
			}
			return []*tile.Value{d}
		})[0]
	} else {
		res = step(b.I32(0), init)
	}
	b.Store(cptr, res, cmask)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestGatherNative: unmasked loads whose lanes lie a constant stride of
// more than one element apart (a transposed read: y[r, c] = x[c·s + r]) run
// natively as scalar loads lane by lane, bit for bit the reference's, for
// rows of 2 to 64 lanes (vectors half full or less, full, unrolled); a read past
// the buffer's end falls back (ErrFallback), as other faults do.
func TestGatherNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name          string
		rows, cols, s int
		programs      int
		short         bool // x one element shorter than the programs read
	}{
		{"2 lanes", 16, 2, 16, 3, false},
		{"4 lanes", 8, 4, 9, 2, false},
		{"8 lanes", 4, 8, 5, 1, false},
		{"16 lanes", 32, 16, 40, 2, false},
		{"64 lanes", 16, 64, 16, 1, false},
		{"past the end", 16, 16, 16, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("gather", nil)
			px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			r := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), c.rows), b.Arange(0, c.rows)), 1)
			col := b.ExpandDims(b.Arange(0, c.cols), 0)
			v := b.Load(b.AddPtr(px, b.Add(b.Mul(col, c.s), r)), nil, nil)
			b.Store(b.AddPtr(py, b.Add(b.Mul(r, c.cols), col)), b.Mul(v, 2.0), nil)
			k, nk := buildNative(t, b)
			defer nk.Free()
			xlen := (c.cols-1)*c.s + c.rows*c.programs
			if c.short {
				xlen--
			}
			x := tiletest.Uniform(tiletest.RNG(c.name), xlen, -1, 1)
			sameAsReference(t, nk, k, tile.Grid{c.programs}, x, c.rows*c.programs*c.cols, c.short)
		})
	}
}

// TestManyReductionsNative: more last-axis reductions in one phase than
// accumulator registers (five pairs): the others accumulate in the frame.
// Eight reductions of a [4, 64] block (sums, a max, a min; the last three
// in the frame) against the reference: max and min bit for bit, sums
// within 64·2⁻²⁴·Σ|x| (sixteen partial sums against the reference's order).
func TestManyReductionsNative(t *testing.T) {
	requireJIT(t)
	const rows, cols, nred = 4, 64, 8
	b := tile.NewBuilder("many_reductions", nil)
	px := b.Ptr("x", tile.F32)
	var outs []*tile.Value
	for i := range nred {
		outs = append(outs, b.Ptr("out"+itoa(i), tile.F32))
	}
	r := b.ExpandDims(b.Arange(0, rows), 1)
	x := b.Load(b.AddPtr(px, b.Add(b.Mul(r, cols), b.ExpandDims(b.Arange(0, cols), 0))), nil, nil)
	red := func(i int) *tile.Value {
		switch i {
		case 5:
			return b.Max(b.Mul(x, 3.0), 1)
		case 6:
			return b.Min(b.Sub(x, 1.0), 1)
		}
		return b.Sum(b.Mul(b.Add(x, float64(i)), x), 1)
	}
	for i := range nred {
		b.Store(b.AddPtr(outs[i], b.Arange(0, rows)), red(i), nil)
	}
	k, nk := buildNative(t, b)
	defer nk.Free()
	xs := tiletest.Uniform(tiletest.RNG("many reductions"), rows*cols, -2, 2)
	run := func(launch func(args ...any) error) [][]float32 {
		args := []any{xs}
		var res [][]float32
		for range nred {
			o := make([]float32, rows)
			for i := range o {
				o[i] = float32(math.NaN())
			}
			res, args = append(res, o), append(args, o)
		}
		if err := launch(args...); err != nil {
			t.Fatal(err)
		}
		return res
	}
	got := run(func(args ...any) error { return nk.Launch(tile.Grid{1}, args...) })
	want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, tile.Grid{1}, args...) })
	for i := range nred {
		for j := range rows {
			g, w := float64(got[i][j]), float64(want[i][j])
			bound := 0.0
			if i != 5 && i != 6 {
				for c := range cols {
					v := float64(xs[j*cols+c])
					bound += math.Abs((v + float64(i)) * v)
				}
				bound *= cols * 0x1p-24
			}
			if !(math.Abs(g-w) <= bound) {
				t.Fatalf("reduction %d, row %d: %v natively, %v on the reference (bound %g)", i, j, g, w, bound)
			}
		}
	}
}

// TestOneAddressStoreNative: a block stored with every lane at one
// address (a value per row: the lane whose offset is a multiple of the
// row's width stores it) writes the last active lane's value, as the
// reference's last write; unmasked, the row's last lane (the lanes' values
// differ). Bit for bit.
func TestOneAddressStoreNative(t *testing.T) {
	requireJIT(t)
	for _, masked := range []bool{true, false} {
		const width, blocks = 128, 3
		b := tile.NewBuilder("per_row", nil)
		px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
		offs := b.Add(b.Mul(b.ProgramID(0), width), b.Arange(0, width))
		x := b.Load(b.AddPtr(px, offs), nil, nil)
		s := b.Max(x, 0)          // exact: the comparison is bit for bit
		row := b.Div(offs, width) // the same in every lane
		var mask *tile.Value
		val := b.Add(b.Splat(s, tile.Shp(width)), x) // lanes that differ
		if masked {
			mask = b.Eq(b.Rem(offs, width), 0)
		}
		b.Store(b.AddPtr(py, row), val, mask)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		nk, err := native.Compile(k)
		if err != nil {
			t.Fatalf("masked %v: not compiled natively: %v", masked, err)
		}
		xs := tiletest.Uniform(tiletest.RNG("per row"), width*blocks, -1, 1)
		run := func(launch func(args ...any) error) []float32 {
			y := make([]float32, blocks)
			for i := range y {
				y[i] = float32(math.NaN())
			}
			if err := launch(xs, y); err != nil {
				t.Fatal(err)
			}
			return y
		}
		got := run(func(args ...any) error { return nk.Launch(tile.Grid{blocks}, args...) })
		want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, tile.Grid{blocks}, args...) })
		nk.Free()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("masked %v, row %d: %v natively, %v on the reference", masked, i, got[i], want[i])
			}
		}
	}
}

// TestUnmaskedRowsNative: phases whose masks are provably true over a row
// (comparisons of i32 lanes, scalar booleans and their Ands, checked at the
// row's start) run such rows unmasked, the others masked (fast.go). Each
// kernel is y[r,c] = x[r,c]·2 + 1 over 16×32 blocks of [M,N] under a mask,
// run natively with and without the unmasked rows (each with AVX2 only
// and, where the CPU has it, AVX-512) and on the reference: all bit for
// bit (poisoned outputs: what is not stored stays NaN).
// Tails in rows and columns, every comparison, two lane vectors compared
// (a causal mask: rows part true), a scalar boolean, a load's other value,
// i32 lanes that wrap within a row (their 64-bit ends would pass), masks
// the rows cannot be proven by (a loaded value's comparison; rows of four
// lanes), and a buffer shorter than the mask says (a fault: fallback).
func TestUnmaskedRowsNative(t *testing.T) {
	requireJIT(t)
	const bm, bn = 16, 32
	type env struct {
		b       *tile.Builder
		r, c    *tile.Value // [bm,1] and [1,bn] lanes
		M, N, P *tile.Value // parameters: rows, columns, a free one
		x       func(mask *tile.Value, other any) *tile.Value
		load    func(mask *tile.Value, other any) *tile.Value // x itself
		// neighbour is y = x[r+dr, c+dc]·2 + 1, 0 past x's edges, stored
		// over [M,N]
		neighbour func(dr, dc int) (mask, val *tile.Value)
	}
	for _, c := range []struct {
		name     string
		m, n, p  int
		cols     int  // the block's columns (bn unless narrower)
		short    bool // x shorter than M·N: a masked read past its end
		unstored bool // the mask leaves elements of y unstored
		wantFast bool
		// wantChecked: masked accesses the unmasked loop keeps masked, their
		// row's range checked once (rowChecked)
		wantChecked int
		// wantFolds: at least this many values the unmasked loop reads as
		// another's (a select or an And with a side proven over the row:
		// the window's row bounds, provePart)
		wantFolds int
		// the kernel: y's mask and value
		body func(e env) (mask, val *tile.Value)
	}{
		{name: "tails in rows and columns", m: 37, n: 70, wantFast: true, body: func(e env) (*tile.Value, *tile.Value) {
			m := e.b.And(e.b.Lt(e.r, e.M), e.b.Lt(e.c, e.N))
			return m, e.x(m, 0.0)
		}},
		{name: "a copy: moves only (zmm where the CPU has them)", m: 37, n: 70, wantFast: true, body: func(e env) (*tile.Value, *tile.Value) {
			m := e.b.And(e.b.Lt(e.r, e.M), e.b.Lt(e.c, e.N))
			return m, e.load(m, 0.0)
		}},
		{name: "≤, >, ≥", m: 40, n: 64, wantFast: true, body: func(e env) (*tile.Value, *tile.Value) {
			m := e.b.And(e.b.And(e.b.Le(e.r, e.b.Sub(e.M, 1)), e.b.Gt(e.N, e.c)), e.b.Ge(e.c, 0))
			return m, e.x(m, 0.0)
		}},
		{name: "causal: columns ≤ rows", m: 64, n: 64, unstored: true, wantFast: true, body: func(e env) (*tile.Value, *tile.Value) {
			m := e.b.And(e.b.And(e.b.Lt(e.r, e.M), e.b.Lt(e.c, e.N)), e.b.Le(e.c, e.r))
			return m, e.x(m, 0.0)
		}},
		{name: "scalar boolean", m: 48, n: 64, p: 2, unstored: true, wantFast: true, body: func(e env) (*tile.Value, *tile.Value) {
			on := e.b.Lt(e.b.ProgramID(0), e.P) // the first two row blocks
			m := e.b.And(e.b.And(e.b.Lt(e.r, e.M), e.b.Lt(e.c, e.N)), on)
			return m, e.x(m, 0.0)
		}},
		{name: "other value, y unmasked", m: 20, n: 50, wantFast: true, body: func(e env) (*tile.Value, *tile.Value) {
			m := e.b.And(e.b.Lt(e.r, e.M), e.b.Lt(e.c, e.N))
			return nil, e.x(m, 7.5)
		}},
		{name: "i32 lanes wrapping within a row", m: 32, n: 64, p: math.MaxInt32 - 40, unstored: true, wantFast: true, body: func(e env) (*tile.Value, *tile.Value) {
			// c + P > 0 in 64 bits at both ends of every row of the second
			// column block, but its lanes from c = 8 on wrap negative
			m := e.b.And(e.b.Lt(e.r, e.M), e.b.Gt(e.b.Add(e.c, e.P), 0))
			return m, e.x(e.b.And(e.b.Lt(e.r, e.M), e.b.Lt(e.c, e.N)), 0.0)
		}},
		{name: "a loaded value's comparison: the store masked, its row checked", m: 32, n: 64, unstored: true, wantFast: true, wantChecked: 1, body: func(e env) (*tile.Value, *tile.Value) {
			v := e.x(nil, nil)
			return e.b.Gt(v, 1.0), v
		}},
		// an im2col's read of an image's neighbour, zero past its edges:
		// the row's bounds proven at the row's start, the columns' left in
		// the load's mask, the load's whole row checked against x (the
		// first row reads before x at masked-off lanes, the last ones past
		// its end: those rows run the masked loop)
		{name: "a window's read up and left, zero past the edges", m: 37, n: 14, cols: 16, wantFast: true, wantChecked: 1, wantFolds: 2, body: func(e env) (*tile.Value, *tile.Value) {
			return e.neighbour(-1, -1)
		}},
		{name: "a window's read down and right, zero past the edges", m: 37, n: 14, cols: 16, wantFast: true, wantChecked: 1, wantFolds: 2, body: func(e env) (*tile.Value, *tile.Value) {
			return e.neighbour(1, 1)
		}},
		{name: "a window's read past the end of an x shorter than the mask says", m: 37, n: 14, cols: 16, short: true, wantFast: true, wantChecked: 1, body: func(e env) (*tile.Value, *tile.Value) {
			return e.neighbour(1, 1) // the active lanes' reads past x's end found in the masked loop: a fault
		}},
		{name: "rows of four lanes", m: 30, n: 4, cols: 4, wantFast: false, body: func(e env) (*tile.Value, *tile.Value) {
			m := e.b.And(e.b.Lt(e.r, e.M), e.b.Lt(e.c, e.N))
			return m, e.x(m, 0.0)
		}},
		{name: "x shorter than the mask says", m: 32, n: 64, short: true, wantFast: true, body: func(e env) (*tile.Value, *tile.Value) {
			m := e.b.And(e.b.Lt(e.r, e.M), e.b.Lt(e.c, e.N))
			return m, e.x(m, 0.0)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cols := c.cols
			if cols == 0 {
				cols = bn
			}
			b := tile.NewBuilder("unmasked_rows", nil)
			px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			e := env{b: b, M: b.Param("M", tile.I32), N: b.Param("N", tile.I32), P: b.Param("P", tile.I32)}
			e.r = b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
			e.c = b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), cols), b.Arange(0, cols)), 0)
			off := b.Add(b.Mul(e.r, e.N), e.c)
			e.load = func(mask *tile.Value, other any) *tile.Value { return b.Load(b.AddPtr(px, off), mask, other) }
			e.x = func(mask *tile.Value, other any) *tile.Value { return b.Add(b.Mul(e.load(mask, other), 2.0), 1.0) }
			e.neighbour = func(dr, dc int) (*tile.Value, *tile.Value) {
				// the columns' bound a constant, as a window op's is (the
				// block wider than it: stores over a prefix of the lanes)
				n := c.n
				cl := b.ExpandDims(b.Arange(0, c.cols), 0) // the columns: one block (gn = 1)
				in := b.And(b.Lt(e.r, e.M), b.Lt(cl, n))
				r, cc := b.Add(e.r, dr), b.Add(cl, dc)
				edges := b.And(b.And(b.Ge(r, 0), b.Lt(r, e.M)), b.And(b.Ge(cc, 0), b.Lt(cc, n)))
				v := b.Load(b.AddPtr(px, b.Add(b.Mul(r, e.N), cc)), b.And(in, edges), 0.0)
				return in, b.Add(b.Mul(v, 2.0), 1.0)
			}
			mask, val := c.body(e)
			gm, gn := (c.m+bm-1)/bm, (c.n+cols-1)/cols
			ylen := c.m * c.n
			if mask == nil { // y unmasked: the whole grid's rows and columns
				off = b.Add(b.Mul(e.r, gn*cols), e.c)
				ylen = gm * bm * gn * cols
			}
			b.Store(b.AddPtr(py, off), val, mask)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			xlen := c.m * c.n
			if c.short {
				xlen -= c.n + 3
			}
			x := tiletest.Uniform(tiletest.RNG(c.name), xlen, -2, 2)
			grid := tile.Grid{gm, gn}
			run := func(launch func(args ...any) error) ([]float32, error) {
				y := make([]float32, ylen)
				for i := range y {
					y[i] = float32(math.NaN())
				}
				return y, launch(x, y, c.m, c.n, c.p)
			}
			want, werr := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
			was := native.SetFastRows(true)
			defer native.SetFastRows(was)
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				for _, fast := range []bool{false, true} {
					native.SetFastRows(fast)
					nk, err := native.Compile(k)
					if err != nil {
						t.Fatalf("not compiled natively: %v\n%v", err, k)
					}
					defer nk.Free()
					if n := native.FastPhases(nk); fast && (n > 0) != c.wantFast || !fast && n != 0 {
						t.Fatalf("%s, fast rows %v: %d phases with unmasked rows; want some: %v", isa, fast, n, fast && c.wantFast)
					}
					if n := native.RowChecked(nk); fast && n != c.wantChecked || !fast && n != 0 {
						t.Fatalf("%s, fast rows %v: %d masked accesses checked once a row; want %d", isa, fast, n, c.wantChecked)
					}
					if n := native.Folds(nk); fast && n < c.wantFolds {
						t.Fatalf("%s, fast rows %v: %d values folded in the unmasked loop; want at least %d", isa, fast, n, c.wantFolds)
					}
					got, gerr := run(func(args ...any) error { return nk.Launch(grid, args...) })
					if c.short {
						if werr == nil || !errors.Is(gerr, native.ErrFallback) {
							t.Fatalf("%s, fast rows %v: a read past the end: native %v, reference %v; want a fallback and a fault", isa, fast, gerr, werr)
						}
						continue
					}
					if gerr != nil || werr != nil {
						t.Fatalf("%s, fast rows %v: native %v, reference %v", isa, fast, gerr, werr)
					}
					stored := 0
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s, fast rows %v: y[%d] = %v natively, %v on the reference", isa, fast, i, got[i], want[i])
						}
						if !math.IsNaN(float64(want[i])) {
							stored++
						}
					}
					if stored == 0 || c.unstored && stored == len(want) {
						t.Fatalf("%d of %d elements stored: the case does not mask what it means to", stored, len(want))
					}
				}
			}
		})
	}
}

// TestChunksTaken: a worker's Run of programs [lo, hi) runs each of them
// once, in native calls of at most the launch's chunk, whatever ranges the
// pool gives which workers (codegen/cpu/pool's TestChunksAssigned says
// which): each case runs some ranges one after another over a vector add
// of 20 programs, the output poisoned first; every program must have run
// (the sums), once (each native call's programs counted), and no call may
// run more than the chunk.
func TestChunksTaken(t *testing.T) {
	requireJIT(t)
	const block, progs = 16, 20
	nk := vecAdd(t, block)
	n := block*progs - 5 // a masked tail
	rng := tiletest.RNG("chunks")
	x, y := tiletest.Uniform(rng, n, -1, 1), tiletest.Uniform(rng, n, -1, 1)
	for _, c := range []struct {
		name   string
		chunk  int
		ranges [][3]int // worker, lo, hi
	}{
		{"the caller alone, in one range", 3, [][3]int{{0, 0, 20}}},
		{"one call a range", 100, [][3]int{{0, 0, 20}}},
		{"two workers, a part each", 3, [][3]int{{0, 0, 10}, {1, 10, 20}}},
		{"ranges of a part taken from both ends", 2, [][3]int{{1, 10, 13}, {0, 0, 10}, {0, 17, 20}, {1, 13, 17}}},
		{"a worker beyond the pool's frames", 3, [][3]int{{1000, 0, 7}, {0, 7, 20}}},
		{"ranges of one program", 4, [][3]int{{0, 0, 1}, {1, 1, 2}, {0, 2, 20}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := make([]float32, n)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			var runs [progs]int
			longest := int64(0)
			native.SetChunkHook(func(lo, hi int64) {
				longest = max(longest, hi-lo)
				for p := lo; p < hi; p++ {
					runs[p]++
				}
			})
			defer native.SetChunkHook(nil)
			if err := native.RunRanges(nk, tile.Grid{progs}, c.chunk, c.ranges, x, y, out, n); err != nil {
				t.Fatal(err)
			}
			for p, r := range runs {
				if r != 1 {
					t.Fatalf("program %d ran %d times", p, r)
				}
			}
			if longest > int64(c.chunk) {
				t.Fatalf("a native call ran %d programs, more than the chunk of %d", longest, c.chunk)
			}
			for i := range out {
				if want := x[i] + y[i]; out[i] != want {
					t.Fatalf("out[%d] = %v, want %v", i, out[i], want)
				}
			}
		})
	}
}

// TestLaunchChunks: a native call runs no more than maxCallNs (200 µs) of
// estimated work; a launch on the caller alone is one chunk of the pool
// (one Run), and a parallel one grabsPerWorker (8) chunks a worker at
// least, each no longer than a call.
func TestLaunchChunks(t *testing.T) {
	for _, c := range []struct {
		name         string
		total        int
		work         float64
		workers      int
		chunk, grain int
	}{
		{"alone", 64, 1402, 1, 142, 64},
		{"a small softmax on two", 64, 1402, 2, 142, 4},
		{"on sixteen", 64, 1402, 16, 142, 1},
		{"long programs", 10_000, 50_000, 4, 4, 4},
		{"programs over a call each", 100, 1e6, 2, 1, 1},
		{"many short programs", 1 << 20, 100, 2, 2000, 2000},
	} {
		t.Run(c.name, func(t *testing.T) {
			chunk, grain := native.LaunchChunks(c.total, c.work, c.workers)
			if chunk != c.chunk || grain != c.grain {
				t.Fatalf("LaunchChunks(%d, %v, %d) = %d, %d, want %d, %d", c.total, c.work, c.workers, chunk, grain, c.chunk, c.grain)
			}
		})
	}
}

// TestArgsOffTheStack: the arrays a launch writes are on the heap even
// where the caller's would not escape otherwise. Launch's header holds raw
// addresses, and a goroutine's stack that grows during a launch moves
// what is on it, so an output array on the caller's stack could be
// written at its old place (a wrong result at best). Checked with a fixed
// size output that nothing but the launch sees: it must be allocated
// (AllocsPerRun at least 1), and hold the sums.
func TestArgsOffTheStack(t *testing.T) {
	requireJIT(t)
	const n = 64
	nk := vecAdd(t, n)
	x := tiletest.Uniform(tiletest.RNG("stack"), n, -1, 1)
	var bad error
	allocs := testing.AllocsPerRun(10, func() {
		out := make([]float32, n)
		if err := nk.Launch(tile.Grid{1}, x, x, out, n); err != nil {
			bad = err
			return
		}
		for i := range out {
			if out[i] != x[i]+x[i] {
				bad = fmt.Errorf("out[%d] = %v, want %v", i, out[i], x[i]+x[i])
				return
			}
		}
	})
	if bad != nil {
		t.Fatal(bad)
	}
	if allocs < 1 {
		t.Fatalf("%v allocations a launch: the output array stayed on the stack", allocs)
	}
}

// TestProductStepsNative: products as graphpass writes them for the
// native CPU target (productKernel): K in whole unmasked steps and the
// rest in a step of its own, masked where the rest is not a power of two
// of at least 16, the two loops accumulating into one carried block; row
// and column tails; a or b transposed. Against the reference (outputs
// poisoned with NaN), within 2(K+1)·2⁻²⁴·Σ|a·b| (checkDot), with AVX2 and
// AVX-512 bit for bit the same.
func TestProductStepsNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name       string
		m, n, k    int
		bm, bn, bk int
		tA, tB     bool
	}{
		{"A×B, K 784: 12 steps of 64, one of 16 unmasked", 100, 96, 784, 64, 64, 64, false, false},
		{"A×B, K 200: 3 steps of 64, 8 in a masked 16", 70, 50, 200, 64, 32, 64, false, false},
		{"Aᵀ×B, rows 130 of 128-row tiles, K 77: 64, then 13 in 16", 130, 70, 77, 128, 64, 64, true, false},
		{"Aᵀ×B, K 100: one step of 64, 36 in a masked 64", 45, 33, 100, 32, 32, 64, true, false},
		{"A×Bᵀ, K 16: one step", 50, 200, 16, 64, 128, 16, false, true},
		{"A×Bᵀ, K 10: a masked step of 16", 33, 40, 10, 32, 32, 16, false, true},
		{"A×Bᵀ, K 1030: 32 steps of 32, 6 in 16", 40, 64, 1030, 32, 64, 32, false, true},
		{"both transposed, K 90: 64, then 26 in 32", 60, 60, 90, 64, 64, 64, true, true},
		{"A×B, 96×96 tiles (three times a power of two), row and column tails", 200, 250, 130, 96, 96, 64, false, false},
		{"A×B, 128×192 tiles, K 128", 300, 576, 128, 128, 192, 64, false, false},
		{"both transposed, 96×64 tiles, K 1225: 19 steps of 64, 9 in a masked 16", 288, 64, 1225, 96, 64, 64, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := productKernel(t, c.m, c.n, c.k, c.bm, c.bn, c.bk, c.tA, c.tB, true)
			dots := 0
			k.Walk(func(v *tile.Value) {
				if v.Op == tile.OpDot {
					dots++
				}
			})
			if want := 1 + min(1, c.k%c.bk)*min(1, c.k/c.bk); dots != want {
				t.Fatalf("%d dots, want %d", dots, want)
			}
			a, b, grid, run := productCase(t, c.name, c.m, c.n, c.k, c.bm, c.bn)
			productOnEachISA(t, k, grid, run, func(isa string, got, want []float32) {
				checkDot(t, isa, c.m, c.n, c.k, false, c.tA, c.tB, a, b, nil, got, want)
			})
		})
	}
}

// productCase is a product test's seeded inputs (named name): a [m,k] and
// b [k,n] uniform in [-1, 1), the grid of its bm×bn tiles, and run, which
// launches it into a new output [m,n] poisoned with NaN (every element is
// written) and returns the output.
func productCase(t *testing.T, name string, m, n, k, bm, bn int) (a, b []float32, grid tile.Grid, run func(launch func(args ...any) error) []float32) {
	rng := tiletest.RNG(name)
	a, b = tiletest.Uniform(rng, m*k, -1, 1), tiletest.Uniform(rng, k*n, -1, 1)
	grid = tile.Grid{(m + bm - 1) / bm, (n + bn - 1) / bn}
	run = func(launch func(args ...any) error) []float32 {
		out := make([]float32, m*n)
		for i := range out {
			out[i] = float32(math.NaN())
		}
		if err := launch(a, b, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return a, b, grid, run
}

// TestProductEpiloguesNative: the products of BenchmarkProductPitch and
// BenchmarkProductEpilogue with their epilogues (productKernelPitch: GELU's
// tanh form as a second output; a bias added, GELU as graphpass writes it
// with an exp and a division, the pre-activation as a second output), on
// whole tiles and with row, column and K tails, outputs poisoned with NaN.
// Against the reference interpreter, both outputs: the product's within
// checkDot's bound (with |bias|), GELU's within 1.2 times that (its
// slope is below 1.13) plus 4·10⁻⁶ of the value (exp and the division);
// AVX2 and AVX-512 bit for bit the same.
func TestProductEpiloguesNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name       string
		m, n, k    int
		bm, bn, bk int
		epi        productEpilogue
	}{
		{"GELU (tanh form), tails in rows, columns and K", 70, 50, 200, 64, 32, 64, epiGELUTanh},
		{"bias and GELU (exp form), whole 128×128 tiles, K 256", 256, 256, 256, 128, 128, 64, epiBiasGELU},
		{"bias and GELU (exp form), tails in rows, columns and K", 100, 90, 77, 64, 64, 64, epiBiasGELU},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := productKernelPitch(t, c.m, c.n, c.k, c.bm, c.bn, c.bk, c.n, false, false, true, c.epi)
			rng := tiletest.RNG(c.name)
			a, b := tiletest.Uniform(rng, c.m*c.k, -1, 1), tiletest.Uniform(rng, c.k*c.n, -0.5, 0.5)
			bias := tiletest.Uniform(rng, c.n, -1, 1)
			grid := tile.Grid{tile.CDiv(c.m, c.bm), tile.CDiv(c.n, c.bn)}
			mn := c.m * c.n
			run := func(launch func(args ...any) error) []float32 {
				out := make([]float32, 2*mn) // c, then c2
				for i := range out {
					out[i] = float32(math.NaN()) // every element is written
				}
				args := []any{a, b, out[:mn], out[mn:]}
				if c.epi == epiBiasGELU {
					args = []any{a, b, bias, out[:mn], out[mn:]}
				}
				if err := launch(args...); err != nil {
					t.Fatal(err)
				}
				return out
			}
			productOnEachISA(t, k, grid, run, func(isa string, got, want []float32) {
				for i := 0; i < c.m; i++ {
					for j := 0; j < c.n; j++ {
						abs := 0.0
						for q := 0; q < c.k; q++ {
							abs += math.Abs(float64(a[i*c.k+q]) * float64(b[q*c.n+j]))
						}
						prod, act := mn+i*c.n+j, i*c.n+j // c2 holds the product, c GELU of it
						if c.epi == epiGELUTanh {
							prod, act = act, prod
						} else {
							abs += math.Abs(float64(bias[j]))
						}
						bound := 2 * float64(c.k+1) * 0x1p-24 * abs
						g, w := float64(got[prod]), float64(want[prod])
						if !(math.Abs(g-w) <= bound) {
							t.Fatalf("%s: product [%d,%d] = %v natively, %v on the reference: apart by more than %g", isa, i, j, g, w, bound)
						}
						g, w = float64(got[act]), float64(want[act])
						if tol := 1.2*bound + 4e-6*math.Abs(w); !(math.Abs(g-w) <= tol) {
							t.Fatalf("%s: GELU [%d,%d] = %v natively, %v on the reference: apart by more than %g", isa, i, j, g, w, tol)
						}
					}
				}
			})
		})
	}
}

// vecAdd is tile/kernels' vector add of BLOCK block as machine code,
// freed when the test ends.
func vecAdd(t *testing.T, block int) *native.Kernel {
	t.Helper()
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": block})
	if err != nil {
		t.Fatal(err)
	}
	nk, err := native.Compile(k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nk.Free(); err != nil {
			t.Error(err)
		}
	})
	return nk
}

// TestDumpKeepsEveryKernel: with TILEFUSE_NATIVE_DUMP set, two kernels of
// one name (fusion's CPU backend compiles kernels by their IR without
// names) leave two files of machine code, each the code of one of them
// (they were one file, the last one's, before).
func TestDumpKeepsEveryKernel(t *testing.T) {
	requireJIT(t)
	dir := t.TempDir()
	t.Setenv("TILEFUSE_NATIVE_DUMP", dir)
	var sizes []int
	for _, c := range []tile.Meta{{"BLOCK": 128}, {"BLOCK": 256}} {
		k, err := kernels.VecAdd(c)
		if err != nil {
			t.Fatal(err)
		}
		k.Name = "same"
		nk, err := native.Compile(k)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, nk.CodeSize())
		nk.Free()
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, f := range files {
		if !strings.HasPrefix(f.Name(), "same-") || !strings.HasSuffix(f.Name(), ".bin") {
			t.Errorf("file %q", f.Name())
		}
		info, err := f.Info()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, int(info.Size()))
	}
	sort.Ints(got)
	sort.Ints(sizes)
	if fmt.Sprint(got) != fmt.Sprint(sizes) {
		t.Errorf("files of %v bytes, want one per kernel of %v", got, sizes)
	}
}

// TestPerfMap: with TILEFUSE_PERFMAP set to a file, each compiled kernel
// appends "start size name-hash" (hexadecimal) to it: its code's entry,
// its size, and the name its TILEFUSE_NATIVE_DUMP file has without .bin.
func TestPerfMap(t *testing.T) {
	requireJIT(t)
	m := filepath.Join(t.TempDir(), "perf.map")
	t.Setenv("TILEFUSE_PERFMAP", m)
	type entry struct{ size, name string }
	var want []entry
	for _, block := range []int{128, 256} {
		nk := vecAdd(t, block)
		want = append(want, entry{fmt.Sprintf("%x", nk.CodeSize()), nk.Kernel().Name})
	}
	b, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b)
	}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("line %q: want start, size, name", l)
		}
		if start, err := strconv.ParseUint(f[0], 16, 64); err != nil || start == 0 {
			t.Errorf("line %q: start %q", l, f[0])
		}
		w := want[i]
		if _, err := strconv.ParseUint(strings.TrimPrefix(f[2], w.name+"-"), 16, 64); f[1] != w.size || !strings.HasPrefix(f[2], w.name+"-") || len(f[2]) != len(w.name)+17 || err != nil {
			t.Errorf("line %q, want size %s and the name %s- and 16 hex digits", l, w.size, w.name)
		}
	}
}

// TestMaskedLanesAtTheEdges: masked loads, contiguous and a stride apart,
// whose vectors reach before a buffer's start or past its end with those
// lanes off (the row checks the active lanes only where the whole vector
// is not within the buffer): bit for bit the reference's; with one active
// lane past the end the launch falls back (ErrFallback) and the reference
// faults.
func TestMaskedLanesAtTheEdges(t *testing.T) {
	requireJIT(t)
	const rows, cols, programs = 8, 16, 3
	for _, c := range []struct {
		name      string
		s, shift  int
		extra     int // lanes the mask lets past the buffer's end
		wantFault bool
	}{
		{"contiguous, the lanes before the start off", 1, 5, 0, false},
		{"contiguous, the lanes past the end off", 1, -5, 0, false},
		{"a stride apart, the lanes before the start off", 5, 9, 0, false},
		{"a stride apart, the lanes past the end off", 5, -9, 0, false},
		{"a stride apart, an active lane past the end", 5, -9, 1, true},
		{"contiguous, an active lane past the end", 1, -5, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			xlen := (cols-1)*c.s + rows*programs
			b := tile.NewBuilder("edges", nil)
			px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			r := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), rows), b.Arange(0, rows)), 1)
			col := b.ExpandDims(b.Arange(0, cols), 0)
			idx := b.Add(b.Add(b.Mul(col, c.s), r), -c.shift)
			v := b.Load(b.AddPtr(px, idx), b.And(b.Ge(idx, 0), b.Lt(idx, xlen+c.extra)), 0.0)
			b.Store(b.AddPtr(py, b.Add(b.Mul(r, cols), col)), b.Mul(v, 2.0), nil)
			k, nk := buildNative(t, b)
			defer nk.Free()
			x := tiletest.Uniform(tiletest.RNG(c.name), xlen, -1, 1)
			sameAsReference(t, nk, k, tile.Grid{programs}, x, rows*programs*cols, c.wantFault)
		})
	}
}

// sameAsReference launches nk and k on the reference over grid with (x, y),
// y of ylen elements poisoned with NaN: with fault, the launch must fall
// back (ErrFallback) and the reference fault; else both succeed and agree
// bit for bit.
func sameAsReference(t *testing.T, nk *native.Kernel, k *tile.Kernel, grid tile.Grid, x []float32, ylen int, fault bool) {
	t.Helper()
	run := func(launch func(args ...any) error) ([]float32, error) {
		y := make([]float32, ylen)
		for i := range y {
			y[i] = float32(math.NaN())
		}
		return y, launch(x, y)
	}
	got, gerr := run(func(args ...any) error { return nk.Launch(grid, args...) })
	want, werr := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
	if fault {
		if werr == nil || !errors.Is(gerr, native.ErrFallback) {
			t.Fatalf("a read past the end: native %v, reference %v; want a fallback and a fault", gerr, werr)
		}
		return
	}
	if gerr != nil || werr != nil {
		t.Fatalf("native %v, reference %v", gerr, werr)
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("y[%d] = %v natively, %v on the reference", i, got[i], want[i])
		}
	}
}

// TestRepeatedValuesComputedOnce: a kernel that computes its index, mask
// and an exp twice compiles to the code of the same kernel computing each
// once (Compile plans tile.CSE's copy), and still computes the reference's
// values.
func TestRepeatedValuesComputedOnce(t *testing.T) {
	requireJIT(t)
	const n, block = 1000, 64
	build := func(twice bool) *tile.Kernel {
		b := tile.NewBuilder("twice", nil)
		px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
		offs := func() *tile.Value { return b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block)) }
		o1 := offs()
		o2 := o1
		if twice {
			o2 = offs()
		}
		v := b.Load(b.AddPtr(px, o1), b.Lt(o1, n), 0.0)
		e1, e2 := b.Exp(v), b.Exp(v)
		if !twice {
			e2 = e1
		}
		b.Store(b.AddPtr(py, o2), b.Add(e1, b.Mul(e2, 0.5)), b.Lt(o2, n))
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	once, twice := build(false), build(true)
	nk1, err := native.Compile(once)
	if err != nil {
		t.Fatal(err)
	}
	defer nk1.Free()
	nk2, err := native.Compile(twice)
	if err != nil {
		t.Fatal(err)
	}
	defer nk2.Free()
	if nk1.CodeSize() != nk2.CodeSize() {
		t.Errorf("code of %d bytes with the values repeated, %d without", nk2.CodeSize(), nk1.CodeSize())
	}
	x := tiletest.Uniform(tiletest.RNG("twice"), n, -2, 2)
	got, want := make([]float32, n), make([]float32, n)
	if err := nk2.Launch(tile.Grid{tile.CDiv(n, block)}, x, got); err != nil {
		t.Fatal(err)
	}
	if err := (tiletest.Interp{}).Launch(twice, tile.Grid{tile.CDiv(n, block)}, x, want); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*math.Abs(float64(want[i]))+1e-7 {
			t.Fatalf("y[%d] = %v natively, %v on the reference", i, got[i], want[i])
		}
	}
}

// buildNative builds b's kernel and compiles it to machine code, failing
// the test where either fails; the caller frees the code.
func buildNative(t *testing.T, b *tile.Builder) (*tile.Kernel, *native.Kernel) {
	t.Helper()
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	nk, err := native.Compile(k)
	if err != nil {
		t.Fatalf("not compiled natively: %v", err)
	}
	return k, nk
}

// bitsAgainstReference runs k over grid on the reference interpreter, then
// natively on each ISA, each time through run (which makes the arguments
// with poisoned outputs, launches through launch and returns the outputs'
// bits: bitsF32, bitsI32), failing t at the first bit that differs.
func bitsAgainstReference(t *testing.T, k *tile.Kernel, grid tile.Grid, run func(launch func(args ...any) error) []uint32) {
	t.Helper()
	want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
	for _, isa := range isas(t) {
		nk := compileFor(t, isa, k)
		got := run(func(args ...any) error { return nk.Launch(grid, args...) })
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: element %d = %#x natively, %#x on the reference", isa, i, got[i], want[i])
			}
		}
	}
}

// bitsF32 and bitsI32 are the bits of x's elements.
func bitsF32(x []float32) []uint32 {
	b := make([]uint32, len(x))
	for i, v := range x {
		b[i] = math.Float32bits(v)
	}
	return b
}

// bitsF64 is the bits of x's elements, each as two words (low, high).
func bitsF64(x []float64) []uint32 {
	b := make([]uint32, 0, 2*len(x))
	for _, v := range x {
		u := math.Float64bits(v)
		b = append(b, uint32(u), uint32(u>>32))
	}
	return b
}

func bitsI32(x []int32) []uint32 {
	b := make([]uint32, len(x))
	for i, v := range x {
		b[i] = uint32(v)
	}
	return b
}
