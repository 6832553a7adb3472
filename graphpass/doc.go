// Package graphpass finds the fusable parts of a Gorgonia graph and turns
// each into one tile kernel: Import reads the graph (forward and backward
// nodes alike) into a DAG whose nodes carry the ops catalogue's
// classification; Partition groups them; Emit writes each group's kernel,
// generated from its op DAG. It executes nothing: package fusion runs these
// as stages of its compile, replays the graph into a new one in which
// every group is one node, and runs that.
//
// Group kinds are one table (kinds.go), one file per kind, each with its
// rules: which node starts a group of it, which nodes join one, whether it
// computes extra outputs, and how its kernel is written (elementwise.go,
// reduce.go, row.go, matmul.go, attention.go). Partition and Emit hold what
// all kinds share: a node joins the group of its users when all of them are
// in one group, the kind agrees, and the caller does not need its value
// (Options.WriteOut); otherwise it is written out, as its own group's root
// or as an extra output of one of its users' groups. Emit declares the
// kernel's parameters and computes every value with gen, from the op DAG:
// elementwise and injective ops as the ops catalogue writes them
// (ops.Write), the rest (products, row reductions) as the group's kind does.
//
// Kernels are written for a Target (target.go), the machine the backend
// runs them on: each kind's tune chooses the kernel's block sizes, chunks,
// splits and warps from it as meta-parameters (tile.Kernel.Meta, in the
// kernel's dump), which Target.Tune may change. No literal tuning choice
// sits in an emit.
package graphpass
