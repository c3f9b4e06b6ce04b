package shards

import "golang.org/x/sys/cpu"

// haveMoveRuns says whether moveRunsAVX2 can run here.
var haveMoveRuns = cpu.X86.HasAVX2

// moveRunsAVX2 copies n runs, each end-from bytes from src+from to
// dst+to; the runs are in bounds and their source and destination do not
// overlap.
//
//go:noescape
func moveRunsAVX2(dst, src *byte, runs *byteRun, n int)
