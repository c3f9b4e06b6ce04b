#include "textflag.h"

// func moveRunsAVX2(dst, src *byte, runs *byteRun, n int)
//
// Each run is three int64: from, end, to. A run of 32 bytes or more is
// copied as its first 32 bytes, then 128- and 32-byte blocks stored at
// dst's 32-byte boundaries, then its last 32 bytes (overlapping what the
// blocks wrote, with the same bytes); a shorter one byte by byte.
TEXT ·moveRunsAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), R10
	MOVQ src+8(FP), R11
	MOVQ runs+16(FP), R12
	MOVQ n+24(FP), R13

next:
	TESTQ R13, R13
	JZ   end
	MOVQ 0(R12), SI
	MOVQ 8(R12), CX
	SUBQ SI, CX              // bytes
	ADDQ R11, SI             // src + from
	MOVQ 16(R12), DI
	ADDQ R10, DI             // dst + to
	ADDQ $24, R12
	DECQ R13
	CMPQ CX, $32
	JLT  short
	VMOVDQU (SI), Y5           // the first 32 bytes
	VMOVDQU -32(SI)(CX*1), Y4  // the last 32 bytes
	MOVQ    DI, R9
	LEAQ    -32(DI)(CX*1), R8
	MOVQ    DI, AX
	ANDQ    $31, AX
	MOVQ    $32, BX
	SUBQ    AX, BX             // to dst's next 32-byte boundary: 1 to 32
	ADDQ    BX, DI
	ADDQ    BX, SI
	SUBQ    BX, CX
	SUBQ    $32, CX            // what the blocks copy: up to the last 32

blocks128:
	CMPQ    CX, $128
	JLT     blocks32
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVDQA Y0, 0(DI)
	VMOVDQA Y1, 32(DI)
	VMOVDQA Y2, 64(DI)
	VMOVDQA Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $128, CX
	JMP     blocks128

blocks32:
	CMPQ    CX, $0
	JLE     ends
	VMOVDQU 0(SI), Y0
	VMOVDQA Y0, 0(DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX
	JMP     blocks32

ends:
	VMOVDQU Y5, 0(R9)
	VMOVDQU Y4, 0(R8)
	JMP     next

short:
	TESTQ CX, CX
	JLE   next
	MOVB  (SI), AX
	MOVB  AX, (DI)
	INCQ  SI
	INCQ  DI
	DECQ  CX
	JMP   short

end:
	VZEROUPPER
	RET
