// Package codegen lowers tile IR to PTX text for NVIDIA GPUs, in pure Go:
// tile IR → layout-annotated IR (every block value gets a distributed
// layout: blocked, a slice of one, or shared memory for conversions,
// reductions across warps and dot operands) → PTX. It calls no driver; the
// cuda package loads and launches what it produces.
//
// The design follows Triton's. Loads, reductions, dots, atomics and
// loop-carried values are anchors, emitted in program order in one natural
// layout; everything else is emitted on demand in the layout its consumer
// asks for, so that broadcasting a reduced value back over its rows,
// expanding dimensions and transposing are register renamings. Values that
// depend only on parameters, program ids and the thread's position are
// computed once, in the prologue. Accesses are 128-bit where contiguity and
// alignment are known (axis analysis, with integer arguments specialised by
// divisibility by 16, as Triton does), and masks become predicates.
//
// Lowering is an ordered list of stages (stages, in codegen.go): verify →
// analysis → layouts (each anchor's layout decided as data before emission,
// tensor-core K loops planned) → check → pipeline → emit → print. Every
// stage can be dumped: Options.DumpDir or the environment variable
// TILEFUSE_DUMP=<dir> writes <kernel>.tile (the IR), .axes (axis
// information and invariance), .plan (the planned layouts), .pipe (the
// software-pipelined loops), .layout (the layouts each value was emitted
// in) and .ptx.
//
// # Meta-parameters
//
// A kernel's tile.Meta carries, beside the block sizes its own code reads
// (BLOCK_M, BLOCK_N, BLOCK_K, …), the choices codegen reads; a key it does
// not know is ignored, and a choice that does not apply to the kernel is
// not taken rather than failing (for tma, cluster and ws the .pipe dump
// says why). num_warps is
// Options.NumWarps (graphpass and the launchers pass the kernel's).
//
//   - num_stages: a pipelined K loop's stages (default 3; the swapped form
//     at least 3), fewer where shared memory holds fewer.
//   - wgmma: 1, Hopper's wgmma with A from registers (TF32); 2,
//     the swapped form (Cᵀ = Bᵀ·Aᵀ: B's fragments from registers, A by
//     descriptor), the form graphpass chooses on Hopper. Without it,
//     mma.sync.
//   - tma (swapped TF32): 1, A by one tensor copy a stage (the default at
//     256-row tiles); 0, cp.async.
//   - tma_b (with tma, B unmasked in groups of 64 columns): B by one
//     four-dimensional tensor copy a stage laid out for its fragment reads;
//     2 (the default where it applies), with no CTA barrier in the loop
//     (empty mbarriers); 1, the barrier kept; 0, cp.async.
//   - tma_k (with tma): 1 (the default), a loop masked along K keeps its
//     tensor copies: A's map bounds its columns at K (rows of a multiple
//     of 4 floats, need not be whole BLOCK_K steps), B's (tma_b) its rows;
//     the boxes read zeros past K (tmaK has the H100's times); 0, such
//     loops copy by cp.async.
//   - tma_ahead (tma_b without the barrier): 0, the copies stages-2
//     iterations ahead instead of stages-1 (the default).
//   - cluster (swapped TF32 with tma): 2, clusters of 1×2 CTAs sharing A's
//     tiles by multicast tensor copies (tma.go; the launch's grid must be
//     whole clusters; not simulated by ptxsim).
//   - early_copies: 1, the swapped form issues an iteration's copies
//     before its wgmmas (the default issues them after).
//   - epi_smem: 1, the swapped form's epilogue through shared memory
//     (row-major runs, 16-byte stores where the rows allow).
//   - epi_late (kernels with loops and one dot, not warp-specialised with a
//     setmaxnreg split): the invariant
//     values that only the epilogue asks for in their layouts (a loop's
//     masks and offsets in the epilogue's) computed after the last loop,
//     not in the prologue (held across the loops): 1, the stores' pointers
//     and masks asked for right after the loop (lowerer.loopDone); 2,
//     where the stores ask for them; 0, in the prologue; absent, codegen
//     chooses (chooseEpiLate).
//   - k_tail: 1, the swapped form's last iteration runs only the k steps of
//     8 that start before K, and (TF32 by cp.async, not warp-specialised)
//     issues no copies past them (tailCopyLimit).
//   - realign_b (swapped TF32, B stored [k][n] with rows not 16-byte
//     aligned): 1, B copied in 16-byte chunks from each row's phase into
//     rows one chunk longer, the fragment reads shifted by the phase
//     (realign.go; measured no faster at 4095×4097×33: opt-in, a tuner
//     candidate of the store-bound products).
//   - x3_blocks, x3_span (swapped 3xTF32): x3_blocks = 2, a block
//     accumulator per unrolled iteration (the old form); x3_span = 1, 2
//     (default) or 4, the iterations one block accumulator sums.
//   - b_smem (swapped bf16, B stored [k][n]): 1, B converted into a bf16
//     tile of the stage and read by descriptor, MN-major.
//   - wg_ss (swapped TF32, B stored [n][k]): 1, B read by descriptor
//     (truncated to TF32 by the tensor cores).
//   - wg_stage (swapped form, A stored transposed): 1, Aᵀ copied 16 bytes
//     wide into a staging tile and transposed by its threads.
//   - ws (swapped form): 1, warp-specialised (producer warps copy, the
//     consumers run the wgmmas, mbarriers between); 2, the producer
//     issues A's and B's tensor copies from one thread (a warpgroup giving
//     its registers back, or one warp with ws_warps = 1); ws_warps (4 or 8;
//     1 with ws = 2), ws_lag (the pass's iterations behind the copies),
//     ws_regs (the producer's setmaxnreg count), ws_minctas (1:
//     .minnctapersm 1 with a setmaxnreg split).
//   - max_registers: the kernel's .maxnreg.
//   - mma_regs (mma.sync loops over register fragments): the register
//     budget for A operands kept in registers.
//   - late_loads: loads of the last store's operands issued that many of
//     its groups ahead (not with wgmma).
//   - smem_carry: 1, loads a loop carries into its next iteration through
//     shared memory (row kernels; slower at every shape measured).
//   - per_slot_addr, naive_copy: 1, older address and copy forms, kept to
//     measure what the current ones gain.
package codegen
