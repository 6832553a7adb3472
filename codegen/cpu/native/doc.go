// Package native compiles tile kernels to amd64 machine code at run time,
// in pure Go (no cgo, no toolchain): AVX2 and FMA instructions (AVX-512F
// ones in products and unmasked phase loops, where the CPU has them) from the encoder in
// codegen/cpu/amd64, in executable memory from codegen/cpu/jit, run over a
// launch's programs by the worker pool of codegen/cpu/pool.
// codegen/cpu's Exec runs a kernel here when Compile supports it, and on
// its executor otherwise.
//
// How a kernel becomes code (plan.go, then gen.go, phase.go, body.go):
//   - Compile plans a copy of the kernel in which each repeated pure value
//     (the same op, type, attributes and operands) is one value
//     (tile.Kernel.CSE): generated kernels repeat their index arithmetic
//     and masks (a col2im's nine taps), which each vector would otherwise
//     compute once a repetition.
//   - Every pointer block and every integer block used in an address is
//     an affine function of the lane index, c + Σ coef[d]·q[d], with c
//     and the coefficients scalar expressions of the program's scalars
//     (program ids, parameters, constants): loads and stores go through
//     addresses computed at the start of each row, never through per-lane
//     offsets (i32 blocks that are not affine — loaded integers, what is
//     computed from them, floats cast to i32 — are data: vectors computed
//     per position as f32 ones are, in ymm loops; ints.go); lanes a constant
//     stride of more than one element apart (a transpose's reads, an
//     im2col's stores) are loaded or stored one lane at a time (f32 and
//     f64; in ymm loops, without the per-lane tests in rows whose masks
//     hold), and so is a frame block read across its rows (a transpose of
//     a product's result or of a loop-carried block: body.go matRead). A kernel with an
//     integer block that is not affine (a division of lanes, a load of
//     integers) is not supported, but for a remainder of affine lanes by
//     a constant, which masks and casts read as a vector (remconst.go).
//   - Vector values are computed in phases: one loop nest per phase over
//     the lanes of one shape, rows one at a time and the last dimension
//     in vectors of eight f32 lanes (twice unrolled where the row has 16
//     lanes or more), with every op of the phase applied per vector in
//     registers. Where the CPU has AVX-512F, the unmasked loop of a phase
//     (fast.go) runs in zmm registers, sixteen lanes a vector, wherever
//     its ops have 512-bit forms (vec.go: the same operations per lane,
//     uniforms as {1to16} broadcasts, vector masks through opmasks): bit
//     for bit the ymm loop's. Its two vectors of an iteration are one
//     body with every instruction written for both (Z0–Z15 and Z16–Z31),
//     so that their dependency chains overlap, where the loop allows
//     (fast.go: pairOK). A value that needs a reduction's result is in a later
//     phase than the reduction's input; a value a later phase reads is
//     either recomputed there (a formula: loads from buffers the kernel
//     never stores to, affine lanes, splats, comparisons of those, and
//     up to four cheap float ops over them) or written to the frame
//     (a per-worker memory block) and read back.
//   - Scalars are computed between phases in frame slots, f32 ones with
//     the vector code on broadcast operands; splats of them are 32-byte
//     frame vectors that instructions take as memory operands, and
//     constants come from a pool after the code.
//   - Registers: one linear scan per body copy over the phase's nodes; a
//     value leaves its register after its last use, and the value used
//     furthest ahead is spilled to the frame when none is free.
//   - Reductions along the last axis accumulate in two registers (the two
//     body copies; in the frame for a phase's sixth and later reductions), combined at the end of each row as codegen/cpu's row
//     sum combines its sixteen partial sums (so f32 sums are the
//     executor's, bit for bit, for rows of 16 or more), or, for rows of
//     eight lanes or fewer, lane by lane in order (the reference's order).
//     Max and min scan each lane as the reference scans a row and combine
//     the lanes in order: only which of +0 and -0, or which NaN, comes out
//     may differ from an in-order scan. Reductions along axis 0 of a 2-D
//     block, and along axis 0 or 1 of a rank-3 one, accumulate in the
//     frame in the reference's order (a rank-3 block's result rows
//     narrower than a vector under the row's lane mask). A loop whose
//     body only adds contiguous loads into its carried tile (a column sum)
//     keeps strips of the tile in zmm registers over blocks of iterations
//     (colloop.go), and zmm loops keep uniforms in registers where the
//     body leaves some spare (pin.go): the same bits either way.
//   - f32 exp and tanh are computed in f32 on eight lanes (mathf.go, with
//     their scalar twins expf32 and tanhf32): exp within 1 ulp of e^x,
//     tanh within 1.5 ulp of tanh x (measured 0.94 and 1.36), inside the
//     IR's 2 ulp for f32 math; the executor's (float64, within 1 ulp of
//     the rounded result) cost about twice as much. rsqrt is 1/√x in
//     float64 rounded once, as the reference; every other op is exact.
//
// Memory safety: every access is checked against its buffer, unmasked
// ones once per row, masked ones per vector: the whole vector's range
// first, and where that leaves the buffer its active lanes' (masked-off
// lanes are never touched: vmaskmovps). Unmasked rows
// (fast.go): where a phase's masks are comparisons of i32 lanes, scalar
// booleans and Ands of them, a check that they hold over every lane and
// that the accesses lie in their buffers runs once a phase (each side is
// affine in the lanes: at the corners of its box), else once a row; rows
// that pass run a loop of plain loads and stores without the masks, the
// others the masked loop, with the same results bit for bit. A
// contiguous f32 access whose mask is not provable over a row (an
// im2col's read at an image's edges: the lanes' bounds fail at some lane
// of every row) stays masked in the unmasked loop, its whole row checked
// against the buffer at the row's start (rows that leave it run the
// masked loop) so that each vector is one vmaskmovps, and its mask's
// conjuncts that do not vary along the row (the image row's bounds) are
// proven there too, the rest computed alone (fast.go: rowChecked,
// provePart). i32 index arithmetic
// whose lanes would leave the int32 range (the reference wraps) bails
// out. A fault makes Launch return ErrFallback, and the caller reruns the
// launch on the executor, which reports the fault. A bail-out (that, a
// block straddling a multiple of a divisor of its lanes, an f32 sin or
// cos argument past sinBound32) leaves its program to the executor and
// the call goes on with the next (Partial: the caller runs just those
// programs), but in a kernel that loads from a buffer it stores to, where
// it fails the launch as a fault does.
// Launch also falls back where buffers overlap and the kernel stores to
// one of them (phases reorder a program's work).
//
// Cache hints: a store with tile.CacheStreaming of whole vectors (f32 or
// f64) to contiguous lanes goes past the caches (VMOVNTPS) where each
// vector's address is aligned to its size, a plain store where not
// (body.go: ntStore); such code returns through an SFENCE. Other hints,
// and loads' hints, are ignored.
//
// Loops (plan.go: loop, gen.go: loopCode): the kernel's top level is a
// sequence of regions (straight-line code, planned as above) and counted
// loops whose body is such a sequence run once per iteration (a region,
// and where loops are nested in it each nested loop and the region after
// it; the yields are written in its last region, after every nested loop
// has run); what crosses from one region to a later one is a scalar slot,
// a formula or a frame block.
// A loop-carried block lives in a frame block (a scalar in a slot: an
// integer, an f32's or an f64's bits) that
// the body's argument and the loop's result share; the yield writes it in
// place when every read of it in the body comes in an earlier phase or at
// the same lanes of the yield's phase, else into a block of its own copied
// at the end of the iteration. Expressions first computed in the body are
// recomputed after it (a loop may run no iteration).
//
// Matrix products (dot.go): a product runs at the start of the level its
// result is available at, over frame blocks: operands that are not blocks
// already are packed (written as rows of a block of their own by a phase
// of the level before, loads and masks as any phase does them), and a
// register-blocked micro-kernel (6 rows × 16 columns: 12 ymm accumulators,
// two vectors of b, a broadcast of a; K in a loop; where the CPU has
// AVX-512F, 12 rows × 32 columns in 24 zmm accumulators, the same
// operations in the same order: bit for bit the ymm kernel's; SetAVX512 or
// TILEFUSE_NATIVE_AVX512=0 keep AVX2) writes the result to a
// block of its own, or into the loop-carried accumulator itself where the
// product is that block's yield and nothing reads the block after it (a
// tiled matmul's K loop: no copy per iteration). What follows the loop
// (bias, GELU, residual) is a phase over the accumulator's block before
// the store. Each element is c + Σ_k a·b in k order in fused
// multiply-adds, within 2(K+1)·2⁻²⁴·(|c| + Σ|a·b|) of the reference.
// An operand loaded contiguously along its first dimension (a transposed
// operand) is packed transposed and read so (a), or turned back in 8×8
// tiles in the frame (b). Where the pack phase only moves data and finds
// an operand's whole block in bounds and unmasked, an ieee product reads
// its a (as stored or transposed) and its b (as stored) where they lie in
// their buffers instead of packed (directOps), the same operations in the
// same order. Any other f32 block so loaded (a transpose's
// read; trans.go) is likewise packed by a phase of the level before and
// turned back at the start of its level, its users reading rows.
//
// f64 (f64.go, mathd.go, powd.go): where the CPU has AVX-512F, eight f64 lanes are
// one zmm register in the phases' eight-lane loops (masks stay eight
// 32-bit lanes, turned into opmasks for f64 moves, blends and
// comparisons): loads and stores, arithmetic, comparisons and selects,
// casts to and from f32 and from i32 and i1, row and column reductions
// (sums in the executor's four partial sums), scalars (loads, sums, the
// ops on broadcast operands), gathers, products (12×16 in zmm, FMAs in k
// order), exp, tanh, log, sigmoid, log1p, expm1, erf, sin, cos, exp2,
// log2 and pow as the reference computes them (Go's math functions, those
// of amd64 assembly included, operation by operation): bit for bit the
// reference's but sums (the executor's order) and products (within
// 2(K+1)·2⁻⁵³·Σ|a·b|). Without AVX-512 (f64y.go, mathdy.go, zasm.go)
// eight f64 lanes are a pair of ymm registers (Y0–Y7 and the register 8
// above), every op, reduction, product (dotY64: 6×8) and math function the
// zmm form's operations in the same order (exp, tanh, log and sigmoid
// written for ymm halves; the others the zmm code itself on each half,
// opmasks as lane masks in the frame): its results bit for bit.
//
// f32 products of precision tf32, tf32tb, bf16 and tf32x3 round their
// operand blocks as the precision reads them (precDot, roundBlock) and run
// the ieee micro-kernel over the rounded blocks, tf32x3 as three products
// in the reference's order: the operands' products are exact, so the
// results are the reference's bit for bit (bar products that underflow or
// overflow).
//
// Loops carry pointer blocks advanced by the same offset each iteration
// (Triton's a_ptrs += BLOCK_K·stride) as affine forms of the iteration,
// with no storage, and a stride between lanes passed as a parameter is
// taken as 1 (plan.go: inducedPointer; phase.go: intern; Kernel.unit). A
// launch that passes another value (an operand stored transposed) runs on
// a copy of the kernel with those parameters made constants
// (tile.Kernel.Specialize, Triton's specialization of integer arguments),
// compiled at the first such launch and kept, up to maxSpecials sets of
// values a kernel (special.go); where the copy is not compiled (a gather
// the code generator does not take) or the kernel has as many, the launch
// runs on the executor. A kernel that divides lanes by a parameter
// (Triton's offs % M: divisorParams) has no code of its own: each set of
// divisors its launches pass gets such a copy, where a block spans less
// than the divisor (Compile declines the kernel where it would not compile
// with divisors no block spans).
//
// Atomic adds (f32, f64, i32) run lane by lane, each a compare-and-swap
// loop on the element's bits (body.go: atomicAdd), outside the unmasked
// loops; through an affine pointer, or one plus offsets that are i32 data
// (a histogram's bins, a scatter-add at loaded indices: kScatter, each
// lane's element checked against its buffer, a fault falling back);
// a scalar's atomic add is one such loop in its scalar phase (phase.go:
// scalarAtomicAdd); a launch of such a kernel saves the buffers it adds to and puts them
// back where it falls back (the executor then adds once), and a program
// that bails out fails the whole launch.
//
// What is not supported yet (Compile says which value and why): f64
// products of precisions other than ieee (atomic adds whose old values
// are read run: a scalar's computed as a scalar, gen.go scalarAtomicOld;
// a block's old values written to its frame block lane by lane as the
// compare-and-swap finds them, 0 for a lane masked off, read a level
// later, body.go atomicAdd),
// atomics to a buffer the kernel also loads or stores,
// integers that are not affine used in addresses but as offsets of atomic
// adds, loads and stores (kScatter: a gather of f32, i32 or f64 through
// loaded indices; i32 data blocks otherwise run, ints.go;
// div/rem of lanes are affine only
// where a block does not straddle a multiple of the divisor: checked per
// program, else a bail-out; a remainder by a constant that the lanes span
// is computed per lane where only masks and casts read it, remconst.go;
// a float's round trip through i32 is computed in the float: tile's
// FoldIntRoundTrips; a load or store whose lanes lie a constant stride
// apart is eight scalar accesses a vector: unmasked, its row's range
// checked at the row's start; masked, those of the active lanes, their
// range checked per vector, a load's others taking other), reshapes that
// regroup dimensions other than those of integer ranges, loads and
// elementwise values (Compile plans tile's SinkReshapes copy, in which
// such a reshape is made of its operands reshaped, down to integer
// ranges, which the plan reshapes by their coefficients where each
// dimension splits into several or contiguous ones merge: plan.go
// regroup; through an expand_dims, and through a broadcast where the
// reshape only splits dimensions; and a reshape of a value held in a
// frame block — a reduction's result, a product's, a loop-carried block
// — is that block read at the new shape: plan.go regroupFrame; a reshape
// of another view, a transpose's, is declined),
// reductions along axes other
// than the last (but axis 0 of a 2-D block, and 0 or 1 of a rank-3 one),
// i64 data blocks (a cast of loaded values to i64; i64 index arithmetic,
// affine in the lanes, runs, and so do comparisons of such blocks, which
// kernels indexing in 64 bits mask their lanes with: cmp64.go). Reductions of
// i32 blocks run in ymm loops (body.go: reduceI32; a sum wraps, as
// int32's, so every order gives the same bits). (f32 exp, tanh, log,
// sigmoid, log1p, expm1, erf, log2, exp2, sign, pow, and sin and cos up
// to 2^17 in magnitude, bailing out beyond, are native: mathf.go; f32 and
// f64 rem, Go's math.Mod bit for bit, too: rem.go.)
//
// The generated code follows codegen/cpu/jit's rules: no stack, RDI the
// frame throughout, RBP and R15 untouched, a bounded amount of work a call
// (Launch splits a worker's programs into calls of about 200 µs), so that
// the garbage collector's stop-the-world is not held up for long.
//
// Looking at the code: TILEFUSE_NATIVE_DUMP=dir writes each kernel's
// machine code to dir/name-hash.bin (objdump -D -b binary -m
// i386:x86-64), and TILEFUSE_PERFMAP=1 appends each kernel's address,
// size and name-hash to /tmp/perf-PID.map, where Linux perf finds the
// names of generated code: perf record then perf report names each
// kernel's samples, and a sample's offset from the kernel's address is an
// offset in its dumped file.
package native
