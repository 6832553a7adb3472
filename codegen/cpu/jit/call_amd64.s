//go:build amd64 && (linux || darwin || freebsd || netbsd || openbsd) && !purego

#include "textflag.h"

// func call(fn uintptr, arg unsafe.Pointer) uint64
//
// The trampoline into generated code (see doc.go for what that code must
// respect): RDI = arg, CALL fn, the result from RAX. NOSPLIT with no
// frame: the generated code's only stack use is its return address.
TEXT ·call(SB), NOSPLIT, $0-24
	MOVQ fn+0(FP), AX
	MOVQ arg+8(FP), DI
	CALL AX
	MOVQ AX, ret+16(FP)
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv0() (eax uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	RET
