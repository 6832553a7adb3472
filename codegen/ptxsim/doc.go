// Package ptxsim simulates the PTX that codegen emits, so that generated
// kernels run in an ordinary `go test` on a machine without a GPU and are
// compared with the reference interpreter (Launcher is a tiletest
// launcher, like the cuda package's).
//
// # What it simulates
//
// Parse reads a PTX module (.version, .target, .address_size, .entry with
// .param, .reg, .shared and .extern .shared declarations, labels, guard
// predicates) and decodes every instruction up front: an instruction it
// does not know is an error naming its line. Module.Launch runs a grid of
// CTAs. Each CTA has its warps, its shared memory (static variables from
// offset 0, then the dynamic window) and its barriers; each warp runs its
// 32 lanes in lockstep with per-lane guards. After a divergent branch the
// lanes at the lowest program counter run first (the others wait), so
// lanes meet again at the join, and warp-collective instructions (shfl,
// vote, redux, mma, ldmatrix, stmatrix) see every lane that reaches them
// at once; a collective reached by only part of the lanes its membermask
// or .aligned names is a Fault. Warps of a CTA run one after another until
// each waits at a barrier (bar.sync/barrier.sync, with ids and thread
// counts; bar.arrive), which releases when every thread that has not
// exited arrives. CTAs run in parallel on Config.Workers goroutines;
// global atomics are serialised.
//
// Instructions: integer, bit and predicate arithmetic (add sub mul mad
// .lo/.hi/.wide, div rem min max abs neg and or xor not cnot shl shr popc
// clz brev bfind bfe bfi prmt); floating point in f32 and f64 (add sub mul
// div fma mad with .rn/.rz/.rm/.rp, .ftz, .sat; min max with .NaN; abs neg
// copysign testp; sqrt rcp with rounding or .approx; rsqrt ex2 lg2 sin cos
// tanh .approx), and f16/bf16 (x2) arithmetic; setp (with .and/.or/.xor and
// p|q) set selp slct; mov (with vector pack and unpack), cvt (all integer
// and float pairs, every rounding mode, .sat, .ftz, .relu, cvt.rna.tf32.f32,
// f16x2/bf16x2 packing), cvta, isspacep; ld/st (.global, .shared, .param,
// generic; .v2/.v4/.v8; cache and ordering qualifiers accepted and ignored),
// atom and red (add inc dec min max and or xor exch cas, global and shared);
// special registers (%tid %ntid %ctaid %nctaid %laneid %warpid %lanemask_*
// %clock %dynamic_smem_size, a CTA as its own cluster); bra(.uni) ret exit
// bar barrier bar.warp.sync trap; shfl.sync (up down bfly idx, with the
// ISA's clamp and segment rules), vote.sync, activemask, redux.sync;
// membar, fence, prefetch as no-ops; and the tensor-core subset:
// mma.sync.aligned m16n8k4/m16n8k8 .tf32, m16n8k8/m16n8k16 .f16/.bf16 (f32
// or f16 accumulators), m8n8k4 .f64; ldmatrix and stmatrix m8n8 .x1/.x2/.x4
// (.trans); cp.async.ca/.cg (4, 8, 16 bytes, src-size zero fill,
// ignore-src) with commit_group, wait_group and wait_all; and for sm_90
// pipelines: mbarrier (init, inval, arrive, arrive_drop, arrive.expect_tx,
// expect_tx, complete_tx, test_wait and try_wait, with .parity),
// cp.async.mbarrier.arrive(.noinc), cp.async.bulk global → shared
// completing on an mbarrier (mbarrier::complete_tx::bytes) and shared::cta
// → global in a bulk group (the whole range checked, its source read when
// issued and rewritable only after cp.async.bulk.wait_group.read), and
// cp.async.bulk.tensor in tile mode from a tensor map in the simulator's
// own encoding (EncodeTensorMap; tma.go), elect.sync,
// setmaxnreg as a no-op, and wgmma (mma_async m64nNk8 .tf32 and m64nNk16
// .f16/.bf16 with f32 or f16 accumulators, A from registers or a
// descriptor, B from a descriptor, K- or MN-major, no swizzle or 32/64/128-
// byte swizzle; fence, commit_group, wait_group; results reach the
// registers at the wait: see wgmma.go for the layouts). A failing mbarrier wait yields the warp to
// the others, so producer/consumer warps make progress.
//
// # Checks
//
// Every global access must lie inside one buffer of Memory (buffers are
// separated by unmapped gaps) and every access must be aligned to its
// size; a shared access must lie inside the CTA's shared memory. A
// violation is a *Fault naming the kernel, the PTX line and instruction,
// the CTA, the thread and the address, as compute-sanitizer memcheck does.
// cp.async is asynchronous: the source is read when the copy is issued,
// and shared memory is written only when the issuing thread waits for the
// copy's group, so code that reads early sees stale data; any access to
// bytes a copy in flight will write is a Fault ("async"); copies that
// complete on an mbarrier land when a thread waits on it. With
// Config.Racecheck, shared-memory accesses by different warps to the same
// bytes that no barrier or mbarrier wait orders, at least one a write that
// can change what the other sees, are a Fault ("racecheck"; a
// happens-before check at warp granularity). With Config.Initcheck, a read
// of shared memory that nothing wrote since the CTA started is a Fault
// ("initcheck"). A bra.uni whose guard differs across the warp, a barrier
// deadlock, warps that all spin on mbarrier phases nothing can complete,
// and a kernel that runs past Config.MaxSteps are Faults too.
//
// # What it does not simulate
//
// Timing, caches, memory coalescing, bank conflicts, occupancy and
// register limits: the simulator says whether a kernel is correct, not how
// fast it is. The .approx instructions are evaluated to within an ulp of
// the exact function, not with the hardware's specific error (a kernel
// whose accuracy depends on that is not checked for it); mma sums its
// exact products in float64 and rounds once, where the tensor cores sum in
// their own order. Warps interleave only at barriers, so races on global
// memory between CTAs, and spin-waits on flags written by another warp,
// are not modelled; local memory, textures, surfaces, calls, clusters and
// distributed shared memory, the tensor copies' im2col mode, multicast
// and reductions, sparse and 8-bit wgmma, and descriptors with a base
// offset are not simulated yet. The wgmma layouts are CUTLASS's canonical
// GMMA layouts, checked here against a generic evaluation of CUTLASS's
// statement of them, not yet on a GPU.
//
// # Extending
//
// Each family of instructions is a decodeFn registered for its base
// opcodes (register in an init function, one file per family: alu.go,
// float.go, cmp.go, cvt.go, mem.go, control.go, async.go, mma.go,
// mbarrier.go). A decoder reads the modifiers and operands once and
// returns the closure run on the active lanes; an instruction that waits
// for another warp sets warp.yield (mbarrier.go); asynchronous results go
// through a per-warp list landed at the matching wait (async.go, wgmma.go).
//
// # Sources
//
// NVIDIA, "Parallel Thread Execution ISA" (version 8.x; the sections are
// cited where each instruction is implemented), in particular §9.7.14.5
// (matrix fragments for mma, ldmatrix, stmatrix), §9.7.9.6 (shfl.sync's
// pseudocode), §9.7.9.25 (cp.async) and §9.7.9.21 (cvt); CUTLASS's
// SM80 MMA atoms and Triton's NVIDIA lowering for how those layouts are
// used together (ldmatrix.x4 feeding mma.m16n8k16's A fragment, .x2.trans
// its B fragment), which the package's tests reproduce.
package ptxsim
