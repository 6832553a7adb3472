// Package cuda runs tilefuse kernels on NVIDIA GPUs through the driver API
// (gorgonia.org/cu). Everything in it but this file is built only with the
// build tag tilefuse_cuda: gorgonia.org/cu links against libcuda and exits
// the process at start-up when no GPU is present.
//
// All driver calls run on one goroutine locked to an OS thread that holds
// the context. Modules are cached by the hash of their PTX. Driver errors
// come back as Go errors naming the kernel, with the JIT log when loading
// failed. A small cgo shim adds what cu lacks: cuFuncSetAttribute, to allow
// more than 48 KB of dynamic shared memory, and cuMemHostAlloc, for the
// page-locked staging memory of asynchronous uploads (Stager).
package cuda
