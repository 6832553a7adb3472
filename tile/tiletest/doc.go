// Package tiletest is the conformance suite of tile kernels: one table of
// cases, each a kernel, seeded random inputs, poisoned outputs and a float64
// reference with a stated tolerance, and one harness that runs the table on
// any Launcher. The interpreter runs it always; a GPU backend runs the same
// table (gonum's testblas idea).
package tiletest
