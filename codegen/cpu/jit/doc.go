// Package jit holds machine code generated at run time in executable
// memory and calls it from Go, without cgo: the native CPU code generator
// (codegen/cpu/native) puts its kernels here.
//
// Memory: New maps anonymous pages read+write, copies the code in, then
// makes them read+execute (W^X: never writable and executable at once);
// Free, or a cleanup when the Code becomes unreachable, unmaps them.
//
// Calling convention of generated code (amd64): it is entered by CALL from
// the trampoline (call_amd64.s, ABI0) with RDI holding the argument
// pointer given to Call, and returns with RET, its result in RAX. What it
// must respect, as Go's runtime requires of assembly it calls:
//   - Stack: it runs on the goroutine's stack and may use none of it but
//     the 8 bytes of its return address (no PUSH, no CALL, no locals):
//     spills go to memory reached through RDI. The trampoline is NOSPLIT
//     with no frame, so this stays within the nosplit budget every
//     function may use below its caller (StackLimit, 800 bytes).
//   - Registers: RSP and RBP are preserved (RBP is the frame pointer the
//     runtime's unwinders follow); R15 is not used (the GOT register of
//     dynamically linked Go). Every other general-purpose and vector
//     register may be clobbered: ABI0 code may clobber R14 (g) and X15
//     (zero), and the ABI wrapper around the trampoline restores them
//     on return to Go code. It must end with VZEROUPPER when it used the
//     upper halves of ymm or zmm registers (the SSE transition penalty;
//     VZEROUPPER leaves Z16–Z31, which SSE code cannot reach, as they
//     are; zmm code only where HasAVX512: the OS saves their state), and
//     leave the direction flag clear and MXCSR as it found them.
//   - No calls back into Go, no allocation, no panics: a fault is
//     reported by the return value and the argument block.
//   - Preemption and signals: a signal (SIGURG for asynchronous
//     preemption, SIGPROF) may arrive while generated code runs. The
//     kernel saves and restores every register (the ymm state included)
//     around the handler, and the runtime finds no Go function at the
//     interrupted PC, so it does not preempt there (the same as within
//     an assembly function; wazero's RATIONALE.md, "Why it's safe to
//     execute runtime-generated machine codes against async Goroutine
//     preemption") and a profile counts the sample as external code. So
//     one call is never preempted: a stop-the-world (the garbage
//     collector's) waits until it returns. Callers keep each call short
//     (codegen/cpu/native runs a bounded range of programs a call) so
//     that pauses stay short.
//   - Memory it reads and writes is Go memory that the caller keeps alive
//     across the call (runtime.KeepAlive); the garbage collector never
//     moves heap objects, and the goroutine's stack cannot move during a
//     call because nothing in it can grow the stack.
//
// Without amd64, on other operating systems, or with -tags purego, Supported
// reports false and New returns an error: callers use the portable
// executor instead.
package jit
