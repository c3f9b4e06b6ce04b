package corpus

import "github.com/klauspost/cpuid/v2"

// haveMoveSpans says whether moveSpansAVX2 can run here.
var haveMoveSpans = cpuid.CPU.Supports(cpuid.AVX2)

// moveSpansAVX2 copies n spans, each bytes from src+from to where the one
// before ended (the first to dst), and reports whether the last byte of
// one is zero. It stops before a span that is empty, outside
// src[:srcLen] or would end past dst[:dstLen], and returns its index as
// bad (-1: none). Source and destination do not overlap.
//
//go:noescape
func moveSpansAVX2(dst, src *byte, spans *byteSpan, n, dstLen, srcLen int) (bad int, zeroEnd bool)
