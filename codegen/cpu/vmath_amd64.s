//go:build amd64 && !purego

#include "textflag.h"

DATA vlog2e<>+0(SB)/8, $0x3ff71547652b82fe
DATA vlog2e<>+8(SB)/8, $0x3ff71547652b82fe
DATA vlog2e<>+16(SB)/8, $0x3ff71547652b82fe
DATA vlog2e<>+24(SB)/8, $0x3ff71547652b82fe
GLOBL vlog2e<>(SB), RODATA|NOPTR, $32
DATA vln2<>+0(SB)/8, $0x3fe62e42fefa39ef
DATA vln2<>+8(SB)/8, $0x3fe62e42fefa39ef
DATA vln2<>+16(SB)/8, $0x3fe62e42fefa39ef
DATA vln2<>+24(SB)/8, $0x3fe62e42fefa39ef
GLOBL vln2<>(SB), RODATA|NOPTR, $32
DATA vexplo<>+0(SB)/8, $0xc05a000000000000
DATA vexplo<>+8(SB)/8, $0xc05a000000000000
DATA vexplo<>+16(SB)/8, $0xc05a000000000000
DATA vexplo<>+24(SB)/8, $0xc05a000000000000
GLOBL vexplo<>(SB), RODATA|NOPTR, $32
DATA vexphi<>+0(SB)/8, $0x4056400000000000
DATA vexphi<>+8(SB)/8, $0x4056400000000000
DATA vexphi<>+16(SB)/8, $0x4056400000000000
DATA vexphi<>+24(SB)/8, $0x4056400000000000
GLOBL vexphi<>(SB), RODATA|NOPTR, $32
DATA vovf<>+0(SB)/8, $0x40562e4300000000
DATA vovf<>+8(SB)/8, $0x40562e4300000000
DATA vovf<>+16(SB)/8, $0x40562e4300000000
DATA vovf<>+24(SB)/8, $0x40562e4300000000
GLOBL vovf<>(SB), RODATA|NOPTR, $32
DATA vunf<>+0(SB)/8, $0xc059fe3680000000
DATA vunf<>+8(SB)/8, $0xc059fe3680000000
DATA vunf<>+16(SB)/8, $0xc059fe3680000000
DATA vunf<>+24(SB)/8, $0xc059fe3680000000
GLOBL vunf<>(SB), RODATA|NOPTR, $32
DATA vinf<>+0(SB)/8, $0x7ff0000000000000
DATA vinf<>+8(SB)/8, $0x7ff0000000000000
DATA vinf<>+16(SB)/8, $0x7ff0000000000000
DATA vinf<>+24(SB)/8, $0x7ff0000000000000
GLOBL vinf<>(SB), RODATA|NOPTR, $32
DATA vtanhhi<>+0(SB)/8, $0x4022333333333333
DATA vtanhhi<>+8(SB)/8, $0x4022333333333333
DATA vtanhhi<>+16(SB)/8, $0x4022333333333333
DATA vtanhhi<>+24(SB)/8, $0x4022333333333333
GLOBL vtanhhi<>(SB), RODATA|NOPTR, $32
DATA vtanhlo<>+0(SB)/8, $0xc022333333333333
DATA vtanhlo<>+8(SB)/8, $0xc022333333333333
DATA vtanhlo<>+16(SB)/8, $0xc022333333333333
DATA vtanhlo<>+24(SB)/8, $0xc022333333333333
GLOBL vtanhlo<>(SB), RODATA|NOPTR, $32
DATA vsmall<>+0(SB)/8, $0x3f70000000000000
DATA vsmall<>+8(SB)/8, $0x3f70000000000000
DATA vsmall<>+16(SB)/8, $0x3f70000000000000
DATA vsmall<>+24(SB)/8, $0x3f70000000000000
GLOBL vsmall<>(SB), RODATA|NOPTR, $32
DATA vone<>+0(SB)/8, $0x3ff0000000000000
DATA vone<>+8(SB)/8, $0x3ff0000000000000
DATA vone<>+16(SB)/8, $0x3ff0000000000000
DATA vone<>+24(SB)/8, $0x3ff0000000000000
GLOBL vone<>(SB), RODATA|NOPTR, $32
DATA vtwo<>+0(SB)/8, $0x4000000000000000
DATA vtwo<>+8(SB)/8, $0x4000000000000000
DATA vtwo<>+16(SB)/8, $0x4000000000000000
DATA vtwo<>+24(SB)/8, $0x4000000000000000
GLOBL vtwo<>(SB), RODATA|NOPTR, $32
DATA vthird<>+0(SB)/8, $0xbfd5555555555555
DATA vthird<>+8(SB)/8, $0xbfd5555555555555
DATA vthird<>+16(SB)/8, $0xbfd5555555555555
DATA vthird<>+24(SB)/8, $0xbfd5555555555555
GLOBL vthird<>(SB), RODATA|NOPTR, $32
DATA vtwo15<>+0(SB)/8, $0x3fc1111111111111
DATA vtwo15<>+8(SB)/8, $0x3fc1111111111111
DATA vtwo15<>+16(SB)/8, $0x3fc1111111111111
DATA vtwo15<>+24(SB)/8, $0x3fc1111111111111
GLOBL vtwo15<>(SB), RODATA|NOPTR, $32
DATA vc0<>+0(SB)/8, $0x3e5ae64567f544e4
DATA vc0<>+8(SB)/8, $0x3e5ae64567f544e4
DATA vc0<>+16(SB)/8, $0x3e5ae64567f544e4
DATA vc0<>+24(SB)/8, $0x3e5ae64567f544e4
GLOBL vc0<>(SB), RODATA|NOPTR, $32
DATA vc1<>+0(SB)/8, $0x3e927e4fb7789f5c
DATA vc1<>+8(SB)/8, $0x3e927e4fb7789f5c
DATA vc1<>+16(SB)/8, $0x3e927e4fb7789f5c
DATA vc1<>+24(SB)/8, $0x3e927e4fb7789f5c
GLOBL vc1<>(SB), RODATA|NOPTR, $32
DATA vc2<>+0(SB)/8, $0x3ec71de3a556c734
DATA vc2<>+8(SB)/8, $0x3ec71de3a556c734
DATA vc2<>+16(SB)/8, $0x3ec71de3a556c734
DATA vc2<>+24(SB)/8, $0x3ec71de3a556c734
GLOBL vc2<>(SB), RODATA|NOPTR, $32
DATA vc3<>+0(SB)/8, $0x3efa01a01a01a01a
DATA vc3<>+8(SB)/8, $0x3efa01a01a01a01a
DATA vc3<>+16(SB)/8, $0x3efa01a01a01a01a
DATA vc3<>+24(SB)/8, $0x3efa01a01a01a01a
GLOBL vc3<>(SB), RODATA|NOPTR, $32
DATA vc4<>+0(SB)/8, $0x3f2a01a01a01a01a
DATA vc4<>+8(SB)/8, $0x3f2a01a01a01a01a
DATA vc4<>+16(SB)/8, $0x3f2a01a01a01a01a
DATA vc4<>+24(SB)/8, $0x3f2a01a01a01a01a
GLOBL vc4<>(SB), RODATA|NOPTR, $32
DATA vc5<>+0(SB)/8, $0x3f56c16c16c16c17
DATA vc5<>+8(SB)/8, $0x3f56c16c16c16c17
DATA vc5<>+16(SB)/8, $0x3f56c16c16c16c17
DATA vc5<>+24(SB)/8, $0x3f56c16c16c16c17
GLOBL vc5<>(SB), RODATA|NOPTR, $32
DATA vc6<>+0(SB)/8, $0x3f81111111111111
DATA vc6<>+8(SB)/8, $0x3f81111111111111
DATA vc6<>+16(SB)/8, $0x3f81111111111111
DATA vc6<>+24(SB)/8, $0x3f81111111111111
GLOBL vc6<>(SB), RODATA|NOPTR, $32
DATA vc7<>+0(SB)/8, $0x3fa5555555555555
DATA vc7<>+8(SB)/8, $0x3fa5555555555555
DATA vc7<>+16(SB)/8, $0x3fa5555555555555
DATA vc7<>+24(SB)/8, $0x3fa5555555555555
GLOBL vc7<>(SB), RODATA|NOPTR, $32
DATA vc8<>+0(SB)/8, $0x3fc5555555555555
DATA vc8<>+8(SB)/8, $0x3fc5555555555555
DATA vc8<>+16(SB)/8, $0x3fc5555555555555
DATA vc8<>+24(SB)/8, $0x3fc5555555555555
GLOBL vc8<>(SB), RODATA|NOPTR, $32
DATA vc9<>+0(SB)/8, $0x3fe0000000000000
DATA vc9<>+8(SB)/8, $0x3fe0000000000000
DATA vc9<>+16(SB)/8, $0x3fe0000000000000
DATA vc9<>+24(SB)/8, $0x3fe0000000000000
GLOBL vc9<>(SB), RODATA|NOPTR, $32
DATA vc10<>+0(SB)/8, $0x3ff0000000000000
DATA vc10<>+8(SB)/8, $0x3ff0000000000000
DATA vc10<>+16(SB)/8, $0x3ff0000000000000
DATA vc10<>+24(SB)/8, $0x3ff0000000000000
GLOBL vc10<>(SB), RODATA|NOPTR, $32
DATA vc11<>+0(SB)/8, $0x3ff0000000000000
DATA vc11<>+8(SB)/8, $0x3ff0000000000000
DATA vc11<>+16(SB)/8, $0x3ff0000000000000
DATA vc11<>+24(SB)/8, $0x3ff0000000000000
GLOBL vc11<>(SB), RODATA|NOPTR, $32
DATA vbias<>+0(SB)/8, $0x3ff
DATA vbias<>+8(SB)/8, $0x3ff
DATA vbias<>+16(SB)/8, $0x3ff
DATA vbias<>+24(SB)/8, $0x3ff
GLOBL vbias<>(SB), RODATA|NOPTR, $32
DATA vabs<>+0(SB)/8, $0x7fffffffffffffff
DATA vabs<>+8(SB)/8, $0x7fffffffffffffff
DATA vabs<>+16(SB)/8, $0x7fffffffffffffff
DATA vabs<>+24(SB)/8, $0x7fffffffffffffff
GLOBL vabs<>(SB), RODATA|NOPTR, $32

// EXPCORE: Y4 = e^Y1 (float64 lanes, Y1 in the range expFMA takes), as
// expFMA computes it: t = x·log2e, n = round(t) (ties to even), y =
// (t-n)·ln2, the degree-11 polynomial by fused multiply-adds, times 2^n.
// Uses Y2, Y3, Y5.
#define EXPCORE \
	VMULPD      vlog2e<>(SB), Y1, Y2 \
	VROUNDPD    $0, Y2, Y3 \
	VSUBPD      Y3, Y2, Y2 \
	VMULPD      vln2<>(SB), Y2, Y2 \
	VMOVUPD     vc0<>(SB), Y4 \
	VFMADD213PD vc1<>(SB), Y2, Y4 \
	VFMADD213PD vc2<>(SB), Y2, Y4 \
	VFMADD213PD vc3<>(SB), Y2, Y4 \
	VFMADD213PD vc4<>(SB), Y2, Y4 \
	VFMADD213PD vc5<>(SB), Y2, Y4 \
	VFMADD213PD vc6<>(SB), Y2, Y4 \
	VFMADD213PD vc7<>(SB), Y2, Y4 \
	VFMADD213PD vc8<>(SB), Y2, Y4 \
	VFMADD213PD vc9<>(SB), Y2, Y4 \
	VFMADD213PD vc10<>(SB), Y2, Y4 \
	VFMADD213PD vc11<>(SB), Y2, Y4 \
	VCVTPD2DQY  Y3, X5 \
	VPMOVSXDQ   X5, Y5 \
	VPADDQ      vbias<>(SB), Y5, Y5 \
	VPSLLQ      $52, Y5, Y5 \
	VMULPD      Y5, Y4, Y4

// func vexpF32(d, a *float32, n int)
//
// expf over n elements, n a multiple of 4: each lane as expf computes it.
TEXT ·vexpF32(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

exploop:
	CMPQ      AX, CX
	JGE       expdone
	VCVTPS2PD (SI)(AX*4), Y0
	VMAXPD    vexplo<>(SB), Y0, Y1
	VMINPD    vexphi<>(SB), Y1, Y1
	EXPCORE
	VCMPPD    $0x1e, vovf<>(SB), Y0, Y6
	VBLENDVPD Y6, vinf<>(SB), Y4, Y4
	VCMPPD    $0x11, vunf<>(SB), Y0, Y6
	VANDNPD   Y4, Y6, Y4
	VCMPPD    $3, Y0, Y0, Y6
	VBLENDVPD Y6, Y0, Y4, Y4
	VCVTPD2PSY Y4, X4
	VMOVUPS   X4, (DI)(AX*4)
	ADDQ      $4, AX
	JMP       exploop

expdone:
	VZEROUPPER
	RET

// func vtanhF32(d, a *float32, n int)
//
// tanhf over n elements, n a multiple of 4: each lane as tanhf computes it.
TEXT ·vtanhF32(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

tanhloop:
	CMPQ      AX, CX
	JGE       tanhdone
	VCVTPS2PD (SI)(AX*4), Y0
	VMAXPD    vtanhlo<>(SB), Y0, Y7
	VMINPD    vtanhhi<>(SB), Y7, Y7
	VADDPD    Y7, Y7, Y1
	EXPCORE
	VADDPD    vone<>(SB), Y4, Y4
	VMOVUPD   vtwo<>(SB), Y5
	VDIVPD    Y4, Y5, Y5
	VMOVUPD   vone<>(SB), Y4
	VSUBPD    Y5, Y4, Y4
	VMULPD    Y7, Y7, Y2
	VMULPD    vtwo15<>(SB), Y2, Y3
	VADDPD    vthird<>(SB), Y3, Y3
	VMULPD    Y3, Y2, Y3
	VADDPD    vone<>(SB), Y3, Y3
	VMULPD    Y3, Y7, Y3
	VANDPD    vabs<>(SB), Y7, Y6
	VCMPPD    $0x11, vsmall<>(SB), Y6, Y6
	VBLENDVPD Y6, Y3, Y4, Y4
	VCMPPD    $3, Y0, Y0, Y6
	VBLENDVPD Y6, Y0, Y4, Y4
	VCVTPD2PSY Y4, X4
	VMOVUPS   X4, (DI)(AX*4)
	ADDQ      $4, AX
	JMP       tanhloop

tanhdone:
	VZEROUPPER
	RET
