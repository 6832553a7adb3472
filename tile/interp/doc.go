// Package interp is the reference interpreter of the tile IR: the executable
// specification of every op in tile/ops.go.
//
// It is written to be read, not to be fast. Every value of every program is
// computed in full, lane by lane, into a new Go slice; scalar math comes from
// the plain float64 definitions (Func64), rounded once to f32 for f32 values;
// a dot adds its products one at a time in the order of k, each product
// rounded before it is added (no fused multiply-add); a reduction combines
// its elements in order. Masked-off lanes are never read or written, and an
// access outside a buffer by an enabled lane is an error naming the kernel,
// the program, the op and the offset.
//
// Program instances may run in parallel (Interpret uses every core); a
// kernel whose programs write the same element without atomics has no
// defined result, as on a GPU. The fault Interpret reports is that of the
// lowest-numbered faulting program, as if the programs had run in order.
//
// The optimised CPU backend (package codegen/cpu) is checked against this
// package over the whole conformance table (tile/tiletest); so are the GPU
// backends.
package interp
