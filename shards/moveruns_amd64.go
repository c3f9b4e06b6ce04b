package shards

import "golang.org/x/sys/cpu"

// haveMoveSpans says whether moveSpansAVX2 can run here.
var haveMoveSpans = cpu.X86.HasAVX2

// moveSpansAVX2 copies n spans, each bytes from src+from to where the one
// before ended (the first to dst), and reports whether the last byte of
// one is zero. The spans are in bounds and not empty, and their source
// and destination do not overlap.
//
//go:noescape
func moveSpansAVX2(dst, src *byte, spans *byteSpan, n int) (zeroEnd bool)
