// Package tile is tilefuse's block IR: a Triton-style SPMD kernel language
// written in Go, with its builder, verifier and text dump, and the launch
// vocabulary every backend shares (Grid, Meta, CDiv, BindArgs, ExecError).
// Nothing in package tile runs a kernel.
//
// A Kernel is the program of one program instance. A launch runs a 1-, 2- or
// 3-D grid of instances; each reads its coordinates with ProgramID and the grid
// size with NumPrograms. Values are scalars or block tensors of rank 1 to 3
// whose every dimension is a power of two (or three times one, at least 96:
// tiles of 192 rows), of dtype f32, f64, i32, i64 or i1, or pointers (and
// blocks of pointers) to f32, f64 or i32.
//
// The layers follow Triton's: the Builder is the user-facing surface and
// performs the semantic checks (implicit broadcasting scalar↔block and
// [M,1]↔[1,N], type promotion, pointer rules); it emits explicit IR in which
// every elementwise operation sees operands of one shape and dtype; Verify
// checks that IR (it runs on every built kernel); Kernel.String dumps it in a
// TTIR-like text form.
//
// The semantics of each op are stated in ops.go; package tile/interp, the
// plain reference interpreter, is their executable definition. The other
// packages around the IR: tile/analysis (axis info, liveness, invariance,
// shared by the backends), tile/kernels and tile/tiletest (hand-written
// kernels and the conformance suite every backend runs), codegen/cpu (the
// optimised CPU executor) and codegen (PTX).
//
// Package tile knows nothing of Gorgonia or PTX.
package tile
