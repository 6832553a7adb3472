//go:build amd64 && !purego

#include "textflag.h"

// DOT4(MOVU, BCAST, FMA, LOG, SIZE): d[0:4, 0:2 vectors] += a[0:4, 0:k] ·
// b[0:k, 0:2 vectors], row-major with leading dimensions lda, ldb, ldd
// (elements of SIZE bytes, 1<<LOG): eight ymm accumulators (four rows of
// two vectors); per step of k, two loads of b's row, four broadcasts of a
// and eight fused multiply-adds, in order of k.
#define DOT4(MOVU, BCAST, FMA, LOG, SIZE) \
	MOVQ d+0(FP), DI \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DX \
	MOVQ k+24(FP), CX \
	MOVQ lda+32(FP), R8 \
	MOVQ ldb+40(FP), R9 \
	MOVQ ldd+48(FP), R10 \
	SHLQ $LOG, R8 \
	SHLQ $LOG, R9 \
	SHLQ $LOG, R10 \
	MOVQ DI, R11 \
	LEAQ (R11)(R10*1), R12 \
	LEAQ (R12)(R10*1), R13 \
	LEAQ (R13)(R10*1), R14 \
	MOVU (R11), Y0 \
	MOVU 32(R11), Y1 \
	MOVU (R12), Y2 \
	MOVU 32(R12), Y3 \
	MOVU (R13), Y4 \
	MOVU 32(R13), Y5 \
	MOVU (R14), Y6 \
	MOVU 32(R14), Y7 \
	MOVQ SI, AX \
	LEAQ (SI)(R8*1), BX \
	TESTQ CX, CX \
	JE   done \
loop: \
	MOVU  (DX), Y8 \
	MOVU  32(DX), Y9 \
	BCAST (AX), Y10 \
	FMA   Y8, Y10, Y0 \
	FMA   Y9, Y10, Y1 \
	BCAST (BX), Y11 \
	FMA   Y8, Y11, Y2 \
	FMA   Y9, Y11, Y3 \
	BCAST (AX)(R8*2), Y12 \
	FMA   Y8, Y12, Y4 \
	FMA   Y9, Y12, Y5 \
	BCAST (BX)(R8*2), Y13 \
	FMA   Y8, Y13, Y6 \
	FMA   Y9, Y13, Y7 \
	ADDQ  $SIZE, AX \
	ADDQ  $SIZE, BX \
	ADDQ  R9, DX \
	DECQ  CX \
	JNE   loop \
done: \
	MOVU Y0, (R11) \
	MOVU Y1, 32(R11) \
	MOVU Y2, (R12) \
	MOVU Y3, 32(R12) \
	MOVU Y4, (R13) \
	MOVU Y5, 32(R13) \
	MOVU Y6, (R14) \
	MOVU Y7, 32(R14) \
	VZEROUPPER \
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

// func dot4x16(d, a, b *float32, k, lda, ldb, ldd int)
//
// d[0:4, 0:16] += a[0:4, 0:k] · b[0:k, 0:16].
TEXT ·dot4x16(SB), NOSPLIT, $0-56
	DOT4(VMOVUPS, VBROADCASTSS, VFMADD231PS, 2, 4)

// func dot4x8(d, a, b *float64, k, lda, ldb, ldd int)
//
// d[0:4, 0:8] += a[0:4, 0:k] · b[0:k, 0:8].
TEXT ·dot4x8(SB), NOSPLIT, $0-56
	DOT4(VMOVUPD, VBROADCASTSD, VFMADD231PD, 3, 8)
