// Package fusion is tilefuse's public API for Gorgonia users: opt in per
// graph, with NewTapeMachine as a drop-in for gorgonia.NewTapeMachine, or
// Compile for the rewritten graph itself. Each fusable part of the graph
// becomes one tile kernel (a FusedOp node); everything else runs as
// Gorgonia runs it. After RunAll the user's own nodes hold their values and
// gradients, so n.Value(), w.Grad() and Gorgonia's solvers work unchanged.
// The Report says which nodes fused into which kernel and why the others did not.
package fusion
