package shards

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveMoveRuns says whether moveAVX2 can run here.
var haveMoveRuns = cpu.X86.HasAVX2

// moveAVX2 copies n byteRuns (each end-from bytes from src+from to
// dst+to), or with spans n spans (each bytes from src+from to where the
// one before ended, the first to dst) and reports whether the last byte
// of one is zero. The runs are in bounds, and their source and
// destination do not overlap.
//
//go:noescape
func moveAVX2(dst, src *byte, runs unsafe.Pointer, n int, spans bool) (zeroEnd bool)
