// Package kernels holds tile kernels written by hand with the tile Builder:
// the reference kernels that the conformance suite (package tiletest), the
// tilefuse command and the benchmarks run. Each function specialises one
// kernel for its meta-parameters and documents its launch grid and arguments.
package kernels
