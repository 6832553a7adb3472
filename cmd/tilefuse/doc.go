// Command tilefuse benchmarks fused Gorgonia graphs and runs tilefuse's tile
// kernels.
//
// With no command, or "bench", it measures the standard workloads (an
// elementwise chain, softmax, LayerNorm, matmul + bias + GELU, attention
// forward and backward, an MLP training step, a transformer encoder block
// forward and forward + backward; each small and large, some also at the
// peers' shapes with -size peer) three ways: Gorgonia's tape machine,
// tilefuse with fusion off (one kernel per op) and tilefuse fused. Each
// fused result is checked against the unfused one before it is reported. It
// prints a Markdown table; -json and -plot write the results as JSON and as
// a PNG chart.
//
//	go run ./cmd/tilefuse                                  # every workload, both sizes, on the CPU
//	go run ./cmd/tilefuse bench -workload softmax,layernorm -size large -runs 20
//	go run ./cmd/tilefuse bench -json out.json -plot out.png
//	tilefuse bench -backend cuda                           # the tilefuse_cuda build, on the GPU
//	tilefuse bench -size small -cpuprofile cpu.out         # then go tool pprof cpu.out
//	tilefuse bench -size small -trace bench.trace          # then go tool trace bench.trace
//
// tilefuse -h (or tilefuse help) lists every command and its flags;
// tilefuse help COMMAND or tilefuse COMMAND -h one command's. Progress goes to
// stderr: a bar (github.com/schollz/progressbar) on a terminal, one plain line
// a step otherwise, nothing with -q.
//
// "kernels" runs every conformance kernel on the CPU (the executor, or with
// -backend interp the reference interpreter) and checks it against its
// float64 reference; "gpubench" (CUDA build) times the
// memory-bound kernels against the device's copy bandwidth.
//
//	go run ./cmd/tilefuse kernels -run softmax   # cases whose name contains "softmax"
//	go run ./cmd/tilefuse kernels -dump out/     # also write every kernel's IR to out/NAME.tile
package main
