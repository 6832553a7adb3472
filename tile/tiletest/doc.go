// Package tiletest is the conformance suite of tile kernels: one table of
// cases, each a kernel, seeded random inputs, poisoned outputs and a float64
// reference with a stated tolerance, and one harness that runs the table on
// any Launcher. The reference interpreter (tile/interp) and the CPU executor
// (codegen/cpu) run it always, the executor also against the reference; a
// GPU backend runs the same table (gonum's testblas idea). RunSemantics and
// RunOps check, on any launcher that reports faults, what the table's
// numbers do not: masks, faults, grids, atomics, loops, and each op at its
// special inputs.
package tiletest
