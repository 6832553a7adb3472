package cpu_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// The executor's speed at 16M f32 elements. SetBytes counts the bytes a
// kernel must move (each input read once, each output written once), so the
// MB/s column is effective bandwidth; BenchmarkCopy16M is the machine's plain
// memory copy on the same data, for scale.

const n16M = 1 << 24

func BenchmarkCopy16M(b *testing.B) {
	x, y := make([]float32, n16M), make([]float32, n16M)
	b.SetBytes(8 * n16M)
	for b.Loop() {
		copy(y, x)
	}
}

// modes runs a benchmark on the executor and as native code (where the
// native code generator takes the kernel), as sub-benchmarks; the native
// code with AVX2 only (native/avx2) and, where the CPU has AVX-512, with
// zmm code where the generator emits it (native/avx512).
func modes(b *testing.B, k *tile.Kernel, run func(b *testing.B, e *cpu.Exec)) {
	b.Run("executor", func(b *testing.B) {
		e, err := cpu.NewExec(k, cpu.WithNative(false))
		if err != nil {
			b.Fatal(err)
		}
		run(b, e)
	})
	isas := []string{"avx2"}
	if jit.HasAVX512() {
		isas = append(isas, "avx512")
	}
	was := native.AVX512()
	defer native.SetAVX512(was)
	for _, isa := range isas {
		b.Run("native/"+isa, func(b *testing.B) {
			native.SetAVX512(isa == "avx512")
			e, err := cpu.NewExec(k, cpu.WithNative(true))
			if err != nil {
				b.Fatal(err)
			}
			if !e.Native() {
				b.Skipf("not native: %v", e.NativeErr())
			}
			run(b, e)
		})
	}
}

func BenchmarkVecAdd16M(b *testing.B) {
	const block = 4096
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": block})
	if err != nil {
		b.Fatal(err)
	}
	rng := tiletest.RNG("bench")
	x, y, out := tiletest.Uniform(rng, n16M, -1, 1), tiletest.Uniform(rng, n16M, -1, 1), make([]float32, n16M)
	modes(b, k, func(b *testing.B, e *cpu.Exec) {
		b.SetBytes(12 * n16M)
		for b.Loop() {
			if err := e.Launch(tile.Grid{tile.CDiv(n16M, block)}, x, y, out, n16M); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSoftmax16M(b *testing.B) {
	const rows, cols = 4096, 4096
	k, err := kernels.Softmax(tile.Meta{"BLOCK": cols})
	if err != nil {
		b.Fatal(err)
	}
	x, y := tiletest.Uniform(tiletest.RNG("bench"), rows*cols, -4, 4), make([]float32, rows*cols)
	modes(b, k, func(b *testing.B, e *cpu.Exec) {
		b.SetBytes(8 * rows * cols)
		for b.Loop() {
			if err := e.Launch(tile.Grid{rows}, x, y, cols, cols); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLayerNorm16M is kernels.LayerNorm over 4096 rows of 4096 (y,
// and each row's mean and rstd).
func BenchmarkLayerNorm16M(b *testing.B) {
	const rows, cols = 4096, 4096
	k, err := kernels.LayerNorm(tile.Meta{"BLOCK": cols})
	if err != nil {
		b.Fatal(err)
	}
	rng := tiletest.RNG("bench")
	x, y := tiletest.Uniform(rng, rows*cols, -4, 4), make([]float32, rows*cols)
	w, bias := tiletest.Uniform(rng, cols, 0.5, 1.5), tiletest.Uniform(rng, cols, -1, 1)
	mean, rstd := make([]float32, rows), make([]float32, rows)
	modes(b, k, func(b *testing.B, e *cpu.Exec) {
		b.SetBytes(8 * rows * cols)
		for b.Loop() {
			if err := e.Launch(tile.Grid{rows}, x, y, w, bias, mean, rstd, cols, cols, float32(1e-5)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGELUChain4M is the bench workload chain's fused kernel (tanh
// GELU of x·0.5+1, times 2) over 4M elements in blocks of 1024.
func BenchmarkGELUChain4M(b *testing.B) {
	const n, block = 1 << 22, 1024
	bl := tile.NewBuilder("chain", tile.Meta{"BLOCK": block})
	in, out := bl.Ptr("in", tile.F32), bl.Ptr("out", tile.F32)
	offs := bl.Add(bl.Mul(bl.ProgramID(0), block), bl.Arange(0, block))
	x := bl.Load(bl.AddPtr(in, offs), nil, nil)
	h := bl.Add(bl.Mul(x, 0.5), 1.0)
	inner := bl.Mul(bl.Add(h, bl.Mul(bl.Mul(bl.Mul(h, h), h), 0.044715)), 0.7978845608)
	y := bl.Mul(bl.Mul(bl.Mul(h, bl.Add(bl.Tanh(inner), 1.0)), 0.5), 2.0)
	bl.Store(bl.AddPtr(out, offs), y, nil)
	k, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	xs, ys := tiletest.Uniform(tiletest.RNG("bench"), n, -2, 2), make([]float32, n)
	modes(b, k, func(b *testing.B, e *cpu.Exec) {
		b.SetBytes(8 * n)
		for b.Loop() {
			if err := e.Launch(tile.Grid{n / block}, xs, ys); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLaunchSmall is the fixed cost of a launch: vector add over 64
// elements, one program.
func BenchmarkLaunchSmall(b *testing.B) {
	const n, block = 64, 64
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": block})
	if err != nil {
		b.Fatal(err)
	}
	rng := tiletest.RNG("bench")
	x, y, out := tiletest.Uniform(rng, n, -1, 1), tiletest.Uniform(rng, n, -1, 1), make([]float32, n)
	modes(b, k, func(b *testing.B, e *cpu.Exec) {
		b.ReportAllocs()
		for b.Loop() {
			if err := e.Launch(tile.Grid{1}, x, y, out, n); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLaunch64K: 64K elements in 64 programs, what a small
// workload's kernel is: the pool's dispatch (or not) and the work.
func BenchmarkLaunch64K(b *testing.B) {
	const n, block = 1 << 16, 1024
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": block})
	if err != nil {
		b.Fatal(err)
	}
	rng := tiletest.RNG("bench")
	x, y, out := tiletest.Uniform(rng, n, -1, 1), tiletest.Uniform(rng, n, -1, 1), make([]float32, n)
	modes(b, k, func(b *testing.B, e *cpu.Exec) {
		b.ReportAllocs()
		b.SetBytes(12 * n)
		for b.Loop() {
			if err := e.Launch(tile.Grid{n / block}, x, y, out, n); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLinearGELU is GELU(x·W + b) at 512³ (tanh form) as the fusion
// pass writes it for the CPU: one 64×64 block of the output a program, a
// K loop of 32 with the product in the carried accumulator, the bias and
// GELU before the store.
func BenchmarkLinearGELU(b *testing.B) {
	const m, n, kk, bm, bn, bk = 512, 512, 512, 64, 64, 32
	bl := tile.NewBuilder("linear_gelu", nil)
	px, pw, pb, po := bl.Ptr("x", tile.F32), bl.Ptr("w", tile.F32), bl.Ptr("b", tile.F32), bl.Ptr("out", tile.F32)
	rows := bl.ExpandDims(bl.Add(bl.Mul(bl.ProgramID(0), bm), bl.Arange(0, bm)), 1)
	cols := bl.ExpandDims(bl.Add(bl.Mul(bl.ProgramID(1), bn), bl.Arange(0, bn)), 0)
	acc := bl.For(0, kk, bk, []*tile.Value{bl.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, cv []*tile.Value) []*tile.Value {
		rk := bl.Arange(0, bk)
		xv := bl.Load(bl.AddPtr(px, bl.Add(bl.Mul(rows, kk), bl.Add(bl.ExpandDims(rk, 0), k0))), nil, nil)
		wv := bl.Load(bl.AddPtr(pw, bl.Add(bl.Mul(bl.Add(bl.ExpandDims(rk, 1), k0), n), cols)), nil, nil)
		return []*tile.Value{bl.Dot(xv, wv, cv[0], tile.PrecIEEE)}
	})[0]
	h := bl.Add(acc, bl.Load(bl.AddPtr(pb, bl.BroadcastTo(cols, tile.Shp(bm, bn))), nil, nil))
	inner := bl.Mul(bl.Add(h, bl.Mul(bl.Mul(bl.Mul(h, h), h), 0.044715)), 0.7978845608)
	bl.Store(bl.AddPtr(po, bl.Add(bl.Mul(rows, n), cols)), bl.Mul(bl.Mul(h, bl.Add(bl.Tanh(inner), 1.0)), 0.5), nil)
	k, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	rng := tiletest.RNG("bench")
	x, w, bias, out := tiletest.Uniform(rng, m*kk, -1, 1), tiletest.Uniform(rng, kk*n, -1, 1), tiletest.Uniform(rng, n, -1, 1), make([]float32, m*n)
	modes(b, k, func(b *testing.B, e *cpu.Exec) {
		for b.Loop() {
			if err := e.Launch(tile.Grid{m / bm, n / bn}, x, w, bias, out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(2*m*n*kk)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// BenchmarkMath4M is y = op(x) over 4M elements in blocks of 1024 for each
// f32 math op the native code computes (x in ±4, where each op's forms
// meet): the executor's float64 functions against the native f32 code.
func BenchmarkMath4M(b *testing.B) {
	const n, block = 1 << 22, 1024
	for _, op := range []tile.Op{tile.OpExp, tile.OpTanh, tile.OpSigmoid, tile.OpErf, tile.OpExpm1, tile.OpLog, tile.OpLog1p, tile.OpLog2, tile.OpExp2, tile.OpSin, tile.OpCos} {
		b.Run(op.String(), func(b *testing.B) {
			bl := tile.NewBuilder("math_"+op.String(), tile.Meta{"BLOCK": block})
			in, out := bl.Ptr("in", tile.F32), bl.Ptr("out", tile.F32)
			offs := bl.Add(bl.Mul(bl.ProgramID(0), block), bl.Arange(0, block))
			bl.Store(bl.AddPtr(out, offs), bl.Unary(op, bl.Load(bl.AddPtr(in, offs), nil, nil)), nil)
			k, err := bl.Build()
			if err != nil {
				b.Fatal(err)
			}
			lo := -4.0
			if op == tile.OpLog || op == tile.OpLog1p || op == tile.OpLog2 {
				lo = 0.001
			}
			xs, ys := tiletest.Uniform(tiletest.RNG("bench"), n, lo, 4), make([]float32, n)
			modes(b, k, func(b *testing.B, e *cpu.Exec) {
				b.SetBytes(8 * n)
				for b.Loop() {
					if err := e.Launch(tile.Grid{n / block}, xs, ys); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkMathF64_2M: y = op(x) over 2M f64 in blocks of 1024 (x in ±4,
// 0.001–4 for the logarithms; pow: |x|^y with y in ±4), on the executor
// and as machine code (each the reference's bit for bit), in ymm pairs and
// zmm registers.
func BenchmarkMathF64_2M(b *testing.B) {
	const n, block = 1 << 21, 1024
	for _, op := range []tile.Op{tile.OpExp, tile.OpTanh, tile.OpSigmoid, tile.OpErf, tile.OpExpm1, tile.OpLog, tile.OpLog1p,
		tile.OpLog2, tile.OpExp2, tile.OpSin, tile.OpCos, tile.OpPow} {
		b.Run(op.String(), func(b *testing.B) {
			bl := tile.NewBuilder("math64_"+op.String(), tile.Meta{"BLOCK": block})
			in, in2, out := bl.Ptr("in", tile.F64), bl.Ptr("in2", tile.F64), bl.Ptr("out", tile.F64)
			offs := bl.Add(bl.Mul(bl.ProgramID(0), block), bl.Arange(0, block))
			x := bl.Load(bl.AddPtr(in, offs), nil, nil)
			var y *tile.Value
			if op == tile.OpPow {
				y = bl.Pow(bl.Abs(x), bl.Load(bl.AddPtr(in2, offs), nil, nil))
			} else {
				y = bl.Unary(op, x)
			}
			bl.Store(bl.AddPtr(out, offs), y, nil)
			k, err := bl.Build()
			if err != nil {
				b.Fatal(err)
			}
			lo := -4.0
			if op == tile.OpLog || op == tile.OpLog1p || op == tile.OpLog2 {
				lo = 0.001
			}
			rng := tiletest.RNG("bench")
			xs, x2, ys := make([]float64, n), make([]float64, n), make([]float64, n)
			for i := range xs {
				xs[i], x2[i] = lo+(4-lo)*rng.Float64(), 8*rng.Float64()-4
			}
			modes(b, k, func(b *testing.B, e *cpu.Exec) {
				b.SetBytes(16 * n)
				for b.Loop() {
					if err := e.Launch(tile.Grid{n / block}, xs, x2, ys); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkTritonMatmul512 is kernels.Matmul (pointer blocks carried
// through the K loop, strides as parameters: Triton's tutorial kernel)
// at 512³ in 64×64 tiles, K steps of 32, row-major operands.
func BenchmarkTritonMatmul512(b *testing.B) {
	const n = 512
	k, err := kernels.Matmul(tile.Meta{"BM": 64, "BN": 64, "BK": 32})
	if err != nil {
		b.Fatal(err)
	}
	rng := tiletest.RNG("bench")
	x, y, z := tiletest.Uniform(rng, n*n, -1, 1), tiletest.Uniform(rng, n*n, -1, 1), make([]float32, n*n)
	modes(b, k, func(b *testing.B, e *cpu.Exec) {
		for b.Loop() {
			if err := e.Launch(tile.Grid{n / 64, n / 64}, x, y, z, n, n, n, n, 1, n, 1, n, 1); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}
