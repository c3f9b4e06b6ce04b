#include "textflag.h"

#define prefetchRuns 8

// func moveSpansAVX2(dst, src *byte, spans *byteSpan, n, dstLen, srcLen int) (bad int, zeroEnd bool)
//
// Each span is two int64: from, bytes. Span i is copied from src+from to
// where span i-1 ended (span 0 to dst), and zeroEnd reports whether the
// last byte of some span is zero. A span of no bytes, or one outside
// src[:srcLen], or one that would end past dst[:dstLen], stops the copy
// before it: bad is its index (-1 when every span was copied).
//
// A span of 32 bytes or more is copied as
// its first 32 bytes, then 128- and 32-byte blocks stored at dst's
// 32-byte boundaries, then its last 32 bytes (overlapping what the blocks
// wrote, with the same bytes); a shorter one as two moves of 16, 8, 4 or
// 2 bytes that overlap, or one byte. No move reads or writes outside its
// span (a prefetch may name any address: it never faults).
TEXT ·moveSpansAVX2(SB), NOSPLIT, $0-57
	MOVQ dst+0(FP), R10
	MOVQ src+8(FP), R11
	MOVQ spans+16(FP), R12
	MOVQ n+24(FP), R13
	MOVQ $-1, bad+48(FP)
	MOVB $0, zeroEnd+56(FP)
	MOVQ dstLen+32(FP), AX
	ADDQ R10, AX
	MOVQ AX, dstLen+32(FP)     // from here on, dst's end

	// Prefetch the first line of the first spans' sources, then, at each
	// span, that of the span prefetchRuns on: the spans are scattered over
	// the source, and a loop of copies otherwise waits for each one's
	// first line in turn.
	MOVQ R13, DX
	CMPQ DX, $prefetchRuns
	JLE  first
	MOVQ $prefetchRuns, DX

first:
	MOVQ R12, R9

firstLoop:
	TESTQ      DX, DX
	JZ         firstDone
	MOVQ       0(R9), AX
	PREFETCHT0 (R11)(AX*1)
	ADDQ       $16, R9
	DECQ       DX
	JMP        firstLoop

firstDone:
	MOVQ srcLen+40(FP), DX    // from here on, src's length
	JMP  nextSpan

next: // the span just copied ended at R10
	CMPB -1(R10), $0
	JNE  nextSpan
	MOVB $1, zeroEnd+56(FP)

nextSpan:
	TESTQ R13, R13
	JZ   end
	CMPQ R13, $prefetchRuns
	JLE  copySpan
	MOVQ prefetchRuns*16(R12), AX
	PREFETCHT0 (R11)(AX*1)

copySpan: // checked first: bytes > 0, 0 <= from <= srcLen-bytes, and the end in dst
	MOVQ  0(R12), SI
	MOVQ  8(R12), CX         // bytes
	TESTQ CX, CX
	JLE   bad
	TESTQ SI, SI
	JL    bad
	MOVQ  DX, AX
	SUBQ  CX, AX
	CMPQ  SI, AX
	JGT   bad
	LEAQ  (R10)(CX*1), AX    // where the next span goes
	CMPQ  AX, dstLen+32(FP)
	JHI   bad
	ADDQ  R11, SI            // src + from
	MOVQ  R10, DI
	MOVQ  AX, R10
	ADDQ  $16, R12
	DECQ  R13

move: // CX bytes from SI to DI
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

short: // 0 to 31 bytes: two moves of the largest power of two that fits, overlapping
	CMPQ    CX, $16
	JLT     lt16
	VMOVDQU (SI), X0
	VMOVDQU -16(SI)(CX*1), X1
	VMOVDQU X0, (DI)
	VMOVDQU X1, -16(DI)(CX*1)
	JMP     next

lt16:
	CMPQ CX, $8
	JLT  lt8
	MOVQ (SI), AX
	MOVQ -8(SI)(CX*1), BX
	MOVQ AX, (DI)
	MOVQ BX, -8(DI)(CX*1)
	JMP  next

lt8:
	CMPQ CX, $4
	JLT  lt4
	MOVL (SI), AX
	MOVL -4(SI)(CX*1), BX
	MOVL AX, (DI)
	MOVL BX, -4(DI)(CX*1)
	JMP  next

lt4:
	CMPQ CX, $2
	JLT  lt2
	MOVW (SI), AX
	MOVW -2(SI)(CX*1), BX
	MOVW AX, (DI)
	MOVW BX, -2(DI)(CX*1)
	JMP  next

lt2:
	TESTQ CX, CX
	JLE   next
	MOVB  (SI), AX
	MOVB  AX, (DI)
	JMP   next

bad: // span n-R13 fails its check
	MOVQ n+24(FP), AX
	SUBQ R13, AX
	MOVQ AX, bad+48(FP)

end:
	VZEROUPPER
	RET
