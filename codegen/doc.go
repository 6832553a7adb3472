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
package codegen
