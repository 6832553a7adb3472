// Package cpu is the CPU backend: it compiles a tile kernel once (NewExec)
// into closures over typed slices and runs its program instances in
// parallel on a pool of goroutines (Exec.Launch), with hand-written AVX2/FMA
// kernels for its hot loops and its own f32 math. Package fusion runs every
// fused kernel on the CPU through it. With WithNative(true) (fusion's
// default) an Exec also holds the kernel as machine code from
// codegen/cpu/native where that code generator supports it, and Launch runs
// that instead (see native's package doc; the executor remains for the
// kernels and launches it declines).
//
// What it owns:
//   - exec.go: Exec, the worker pool, the register frames reused across
//     launches; compile.go: the closures, and the fast paths below;
//     ops.go: each op's loops.
//   - The fast paths, decided from tile/analysis: values the same in every
//     program computed once per launch (analysis.Invariant); dead values
//     skipped (analysis.Live); fully enabled contiguous loads and stores as
//     copies, rows of a 2-D tile copied row by row (analysis.Axes); offsets
//     used only as contiguous addresses computed for lane 0 alone; integer
//     splats that are only added read as scalars, never filled; integer adds
//     and addptrs of 2-D tiles that only address row-by-row memory computed
//     at the start of each row (the memory op rebuilds a row's lanes when it
//     goes lane by lane); integer div/rem by a power of two as a shift and a
//     mask. So an Exec computes some values only partially, where no op can
//     see it (TestLaneZeroOffsets, TestRowTiles, TestFoldedSplats).
//   - The assembly (dot_amd64.s, vec_amd64.s, vmath_amd64.s), used where the
//     CPU has AVX2 and FMA and the OS saves the ymm registers (hasAVX2FMA);
//     vec_other.go (-tags purego, or another GOARCH) gives their plain-Go
//     twins. VectorDot reports whether the dot has them.
//   - Its f32 math (mathf.go): expf and tanhf, the scalar forms of what the
//     vector kernels compute, so a lane's result does not depend on whether
//     it falls in the vector body or the tail; other math is the reference
//     interpreter's Func64.
//
// Its results are the reference interpreter's (tile/interp), checked over
// the whole conformance table by TestAgainstReference: bit for bit, but
// where a kernel holds one of these (inexact, in conformance_test.go; the
// bound of each alone is checked by TestInexactOps):
//   - dot, with AVX2/FMA: fused multiply-adds round once a step instead of
//     twice (≤ 2K·2⁻²⁴·Σₖ|aᵢₖbₖⱼ| apart); bit for bit with -tags purego;
//   - f32 exp and tanh: expf and tanhf, within 1 ulp of the reference's
//     correctly rounded float64 function (on 16K seeded inputs, none apart);
//   - float sums along the last axis: f32 rows in sixteen partial sums (the
//     vector kernel's order, AVX or not), f64 in four (≤ 2n·u·Σ|x| apart);
//   - float atomic adds: programs add in the order they run, on either side.
package cpu
