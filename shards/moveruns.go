package shards

import (
	"fmt"
	"unsafe"
)

// byteRun is a run of bytes to copy: src[from:end] to dst[to:]. In a
// Megatron batch, one run of a sample's tokens from one document of the
// .bin. It is kept to 24 bytes: with two int32 more (the document, the
// row) the copies of a batch took about a fifth longer (AMD EPYC, 2
// vCPUs), for reasons not pinned down; the error paths find those again.
type byteRun struct{ from, end, to int64 }

// moveRuns copies each run's bytes src[from:end] to dst[to:], as a loop of
// copy would. On amd64 with AVX2 one assembly loop does them all
// (moveruns_amd64.s), 32 bytes at a time with the stores aligned; Go's
// copy moves 256 to 2048 bytes, the size of most runs, 16 bytes at a time
// with unaligned stores. On a Megatron batch's runs moveRuns takes 0.7 to
// 0.85 of copy's time, whether the source is in the cache or not
// (BenchmarkMoveRuns; bench/RESULTS.md, stop 29). It also prefetches the
// first line of the run 8 runs on, so that the cache misses of runs
// scattered over the source overlap, where a loop of copies meets each in
// turn; with that, a batch of short runs (documents of 1 to 64 tokens)
// takes 0.36 of copy's time, and one of long runs from a 128 MB corpus
// 0.73 (stop 30). Its reads fault as
// copy's do, so guardMapped turns a read past a cut file into an error
// either way; that is why it is Go assembly here and not a kernel of
// internal/csrc, where a fault in C code would end the process.
func moveRuns(dst, src []byte, runs []byteRun) {
	if !haveMoveRuns || len(runs) == 0 {
		for _, r := range runs {
			copy(dst[r.to:r.to+r.end-r.from], src[r.from:r.end])
		}
		return
	}
	for _, r := range runs { // the bounds copy would check
		if r.from < 0 || r.from > r.end || r.end > int64(len(src)) || r.to < 0 || r.to > int64(len(dst))-(r.end-r.from) {
			panic(fmt.Sprintf("shards: run of bytes [%d, %d) to %d: outside the source (%d bytes) or the destination (%d bytes)", r.from, r.end, r.to, len(src), len(dst)))
		}
	}
	moveRunsAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), &runs[0], len(runs))
}
