// Package analysis holds the facts about a tile kernel that more than one
// backend needs, computed once here instead of once per backend:
//
//   - Axes: what is known of each value's lanes, in the manner of Triton's
//     AxisInfo: along the last dimension, the length of runs of consecutive
//     values (contiguity), a power of two dividing each run's first value
//     (divisibility) and the length of runs of equal values (constancy); over
//     the whole block, whether every lane is equal (Uniform) or lane i is lane
//     0 plus i (Contiguous). The CPU executor copies contiguous blocks and
//     rows; the PTX generator vectorises loads and stores by them.
//   - Live: the values a kernel's effects depend on.
//   - Invariant: the values that are the same in every program of a launch
//     (Launch) or throughout one program (Program), which a backend may
//     compute once.
//   - Roots: the pointer parameter each pointer value derives from.
//   - Users: every value's users.
//
// Each analysis is a plain function of a verified kernel returning a slice
// indexed by value ID. The package reads the IR and never changes it.
package analysis
