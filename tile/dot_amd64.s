//go:build amd64 && !purego

#include "textflag.h"

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
// d[0:4, 0:16] += a[0:4, 0:k] · b[0:k, 0:16], row-major with leading
// dimensions lda, ldb, ldd (elements): eight ymm accumulators (four rows of
// two vectors), per step of k two loads of b's row, four broadcasts of a
// and eight fused multiply-adds, in order of k.
TEXT ·dot4x16(SB), NOSPLIT, $0-56
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ k+24(FP), CX
	MOVQ lda+32(FP), R8
	MOVQ ldb+40(FP), R9
	MOVQ ldd+48(FP), R10
	SHLQ $2, R8
	SHLQ $2, R9
	SHLQ $2, R10
	MOVQ DI, R11
	LEAQ (R11)(R10*1), R12
	LEAQ (R12)(R10*1), R13
	LEAQ (R13)(R10*1), R14
	VMOVUPS (R11), Y0
	VMOVUPS 32(R11), Y1
	VMOVUPS (R12), Y2
	VMOVUPS 32(R12), Y3
	VMOVUPS (R13), Y4
	VMOVUPS 32(R13), Y5
	VMOVUPS (R14), Y6
	VMOVUPS 32(R14), Y7
	MOVQ SI, AX
	LEAQ (SI)(R8*1), BX
	TESTQ CX, CX
	JE   done

loop:
	VMOVUPS      (DX), Y8
	VMOVUPS      32(DX), Y9
	VBROADCASTSS (AX), Y10
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VBROADCASTSS (BX), Y11
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VBROADCASTSS (AX)(R8*2), Y12
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VBROADCASTSS (BX)(R8*2), Y13
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         $4, AX
	ADDQ         $4, BX
	ADDQ         R9, DX
	DECQ         CX
	JNE          loop

done:
	VMOVUPS Y0, (R11)
	VMOVUPS Y1, 32(R11)
	VMOVUPS Y2, (R12)
	VMOVUPS Y3, 32(R12)
	VMOVUPS Y4, (R13)
	VMOVUPS Y5, 32(R13)
	VMOVUPS Y6, (R14)
	VMOVUPS Y7, 32(R14)
	VZEROUPPER
	RET

// func dot4x8(d, a, b *float64, k, lda, ldb, ldd int)
//
// dot4x16 for float64: d[0:4, 0:8] += a[0:4, 0:k] · b[0:k, 0:8], leading
// dimensions lda, ldb, ldd (elements): eight ymm accumulators (four rows of
// two vectors), per step of k two loads of b's row, four broadcasts of a
// and eight fused multiply-adds, in order of k.
TEXT ·dot4x8(SB), NOSPLIT, $0-56
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ k+24(FP), CX
	MOVQ lda+32(FP), R8
	MOVQ ldb+40(FP), R9
	MOVQ ldd+48(FP), R10
	SHLQ $3, R8
	SHLQ $3, R9
	SHLQ $3, R10
	MOVQ DI, R11
	LEAQ (R11)(R10*1), R12
	LEAQ (R12)(R10*1), R13
	LEAQ (R13)(R10*1), R14
	VMOVUPD (R11), Y0
	VMOVUPD 32(R11), Y1
	VMOVUPD (R12), Y2
	VMOVUPD 32(R12), Y3
	VMOVUPD (R13), Y4
	VMOVUPD 32(R13), Y5
	VMOVUPD (R14), Y6
	VMOVUPD 32(R14), Y7
	MOVQ SI, AX
	LEAQ (SI)(R8*1), BX
	TESTQ CX, CX
	JE   done

loop:
	VMOVUPD      (DX), Y8
	VMOVUPD      32(DX), Y9
	VBROADCASTSD (AX), Y10
	VFMADD231PD  Y8, Y10, Y0
	VFMADD231PD  Y9, Y10, Y1
	VBROADCASTSD (BX), Y11
	VFMADD231PD  Y8, Y11, Y2
	VFMADD231PD  Y9, Y11, Y3
	VBROADCASTSD (AX)(R8*2), Y12
	VFMADD231PD  Y8, Y12, Y4
	VFMADD231PD  Y9, Y12, Y5
	VBROADCASTSD (BX)(R8*2), Y13
	VFMADD231PD  Y8, Y13, Y6
	VFMADD231PD  Y9, Y13, Y7
	ADDQ         $8, AX
	ADDQ         $8, BX
	ADDQ         R9, DX
	DECQ         CX
	JNE          loop

done:
	VMOVUPD Y0, (R11)
	VMOVUPD Y1, 32(R11)
	VMOVUPD Y2, (R12)
	VMOVUPD Y3, 32(R12)
	VMOVUPD Y4, (R13)
	VMOVUPD Y5, 32(R13)
	VMOVUPD Y6, (R14)
	VMOVUPD Y7, 32(R14)
	VZEROUPPER
	RET
