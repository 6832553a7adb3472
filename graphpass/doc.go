// Package graphpass finds the fusable parts of a Gorgonia graph and turns
// each into one tile kernel: Import reads the graph (forward and backward
// nodes alike) into a DAG whose nodes carry the ops catalogue's
// classification; Partition groups them; Emit writes each group's kernel,
// generated from its op DAG; Rewrite replays the graph into a new one in
// which every group is one node. It executes nothing: the node a group
// becomes is made by the caller (package fusion).
//
// Groups, in this first version: an elementwise group is a DAG of
// elementwise, broadcast (Reshape, Repeat) and scalar nodes with one output,
// computed over the output's elements; a reduction group is a Σ or MaxAlong
// with its elementwise producers fused in as a prologue; a row group holds
// reductions along the last axis (and Gorgonia's SoftMax) together with the
// consumers that broadcast them back over their rows, one row per program;
// a matmul group is a 2-D product with its elementwise epilogue, one output
// tile per program (when Options.MatMul asks for it). A node joins the
// group of its users when all of them are in one group and nobody else needs
// its value: a node the user named (WithName), a gradient (the deriv of a
// node), a scalar (a loss, a metric), one with users elsewhere, and the
// graph's outputs are written out.
package graphpass
