//go:build amd64 && !purego

#include "textflag.h"

// Elementwise float32 ops over n elements, n a multiple of 8 (the caller
// does the tail): d[i] = a[i] op b[i], 16 lanes an iteration while they
// last, then 8.
#define BIN(INSTR) \
	MOVQ d+0(FP), DI \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DX \
	MOVQ n+24(FP), CX \
	XORQ AX, AX \
	MOVQ CX, BX \
	ANDQ $-16, BX \
	JZ   eight \
loop16: \
	VMOVUPS (SI)(AX*4), Y0 \
	VMOVUPS 32(SI)(AX*4), Y1 \
	INSTR   (DX)(AX*4), Y0, Y0 \
	INSTR   32(DX)(AX*4), Y1, Y1 \
	VMOVUPS Y0, (DI)(AX*4) \
	VMOVUPS Y1, 32(DI)(AX*4) \
	ADDQ    $16, AX \
	CMPQ    AX, BX \
	JLT     loop16 \
eight: \
	CMPQ    AX, CX \
	JGE     done \
	VMOVUPS (SI)(AX*4), Y0 \
	INSTR   (DX)(AX*4), Y0, Y0 \
	VMOVUPS Y0, (DI)(AX*4) \
	ADDQ    $8, AX \
	JMP     eight \
done: \
	VZEROUPPER \
	RET

// func vaddF32(d, a, b *float32, n int)
TEXT ·vaddF32(SB), NOSPLIT, $0-32
	BIN(VADDPS)

// func vsubF32(d, a, b *float32, n int)
TEXT ·vsubF32(SB), NOSPLIT, $0-32
	BIN(VSUBPS)

// func vmulF32(d, a, b *float32, n int)
TEXT ·vmulF32(SB), NOSPLIT, $0-32
	BIN(VMULPS)

// func vdivF32(d, a, b *float32, n int)
TEXT ·vdivF32(SB), NOSPLIT, $0-32
	BIN(VDIVPS)
