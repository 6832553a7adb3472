// Command tilefuse runs tilefuse's tile kernels on the CPU interpreter: for
// each kernel of the conformance table it prints the grid, the size of its
// IR, the time of one launch and whether the result matches the float64
// reference, after dumping one kernel's IR as an example.
//
//	go run ./cmd/tilefuse                 # every case but the large ones
//	go run ./cmd/tilefuse -run softmax    # cases whose name contains "softmax"
//	go run ./cmd/tilefuse -dump out/      # also write every kernel's IR to out/NAME.tile
//	go run ./cmd/tilefuse -list           # list the cases
package main
