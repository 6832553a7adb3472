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

// func vsumF32(x *float32, n int) float32
//
// The sum of n elements, n a multiple of 16, in sixteen partial sums (lane
// j of two accumulators takes the elements i ≡ j mod 16), combined as
// sum16 does: s[j]+s[j+8], then +[j+4], then +[j+2], then the two halves.
TEXT ·vsumF32(SB), NOSPLIT, $0-20
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ   AX, AX

sumloop:
	CMPQ   AX, CX
	JGE    sumdone
	VADDPS (SI)(AX*4), Y0, Y0
	VADDPS 32(SI)(AX*4), Y1, Y1
	ADDQ   $16, AX
	JMP    sumloop

sumdone:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+16(FP)
	RET

// func vsplatF32(d *float32, s float32, n int)
//
// d[0:n] = s, n a multiple of 8.
TEXT ·vsplatF32(SB), NOSPLIT, $0-24
	MOVQ         d+0(FP), DI
	VBROADCASTSS s+8(FP), Y0
	MOVQ         n+16(FP), CX
	XORQ         AX, AX

splatloop:
	CMPQ    AX, CX
	JGE     splatdone
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     splatloop

splatdone:
	VZEROUPPER
	RET

// func vmaxF32(x *float32, n int) (m float32, nan bool)
//
// The largest of n elements, n a multiple of 8 and at least 8, and whether
// any is NaN (then m means nothing). VMAXPS's order of ±0 is not the
// scalar loop's: the caller redoes a zero maximum.
TEXT ·vmaxF32(SB), NOSPLIT, $0-21
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	VMOVUPS (SI), Y0
	VCMPPS  $3, Y0, Y0, Y2
	MOVQ    $8, AX

maxloop:
	CMPQ    AX, CX
	JGE     maxdone
	VMOVUPS (SI)(AX*4), Y1
	VCMPPS  $3, Y1, Y1, Y3
	VORPS   Y3, Y2, Y2
	VMAXPS  Y1, Y0, Y0
	ADDQ    $8, AX
	JMP     maxloop

maxdone:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	MOVSS        X0, m+16(FP)
	VMOVMSKPS    Y2, AX
	TESTL        AX, AX
	SETNE        nan+20(FP)
	VZEROUPPER
	RET
