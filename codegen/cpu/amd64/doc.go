// Package amd64 is an x86-64 instruction encoder in pure Go: the general
// purpose instructions, the VEX-encoded AVX2 and FMA instructions and the
// EVEX-encoded AVX-512F ones (evex.go: 512-bit, Z0–Z31, broadcasts) that
// the native CPU code generator (package codegen/cpu/native) emits, into a
// byte buffer with labels and RIP-relative constants.
//
// Operands are in Intel order: destination first (Go's assembler writes
// them the other way round). Every instruction is checked against known
// byte sequences in asm_test.go, which were cross-checked with the Go
// assembler (TestAgainstGoAssembler runs `go tool asm -S` where a Go
// toolchain is on the PATH).
//
// The encoder records the first misuse (an operand it cannot encode, an
// undefined label) and returns it from Finish; it never panics.
package amd64
