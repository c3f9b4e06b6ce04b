package corpus

import (
	"fmt"
	"unsafe"
)

// byteRun is a run of bytes to convert: src[from:end] to dst[to:]. In a
// Megatron batch being converted, one run of a sample's tokens from one
// document of the .bin. It is kept to 24 bytes: with two int32 more (the
// document, the row) the copies of a batch took longer
// (BenchmarkMegatronSequences), for reasons not pinned down; the error
// paths find those again.
type byteRun struct{ from, end, to int64 }

// byteSpan is a run of bytes to copy where the one before it ended:
// src[from:from+n]. A Megatron epoch lists its samples' runs of tokens so
// (megatronEpoch), and a batch of consecutive indices copies them with
// one moveSpans, with no list of byteRuns to make first: making that
// list was most of what a batch's fill took beyond the assembly loop
// over precomputed runs on documents of 1 to 64 tokens
// (BenchmarkMegatronSequences, short-docs, x-moveruns).
type byteSpan struct{ from, n int64 }

// moveSpans copies the spans' bytes one after the other into dst from its
// start, as a loop of copy would, and reports whether the last byte of
// one is zero (endsInFile). A span of no bytes, or one outside src, or
// one that would end past dst, panics (once the spans before it are
// copied). The assembly loop checks each span as it comes to it: a pass
// over them all in Go first reads the span list from memory twice, which
// shows in BenchmarkMegatronSequences where copy is as fast as this loop.
//
// On amd64 with AVX2 one assembly loop does them all (moveruns_amd64.s),
// 32 bytes at a time with the stores aligned; Go's copy moves 256 to 2048
// bytes, the size of most runs, 16 bytes at a time with unaligned stores.
// BenchmarkMoveSpans compares it with copy on a Megatron batch's runs,
// from a source in the cache and from one that is not. It also
// prefetches the first line of the span 8 spans on, so that the cache
// misses of spans scattered over the source overlap, where a loop of
// copies meets each in turn: that matters most for a batch of short runs
// and for a corpus larger than the cache (BenchmarkMoveSpans' 256 MiB
// source; BenchmarkMegatronSequences, short-docs). Its reads fault as
// copy's do, so guardMapped turns a read past a cut file into an error
// either way; that is why it is Go assembly here and not a kernel of
// internal/csrc, where a fault in C code would end the process.
func moveSpans(dst, src []byte, spans []byteSpan) (zeroEnd bool) {
	if !haveMoveSpans || len(spans) == 0 {
		to := int64(0)
		for i, s := range spans {
			if s.n <= 0 || s.from < 0 || s.from > int64(len(src))-s.n || s.n > int64(len(dst))-to {
				panic(badSpan(dst, src, spans, i))
			}
			copy(dst[to:to+s.n], src[s.from:s.from+s.n])
			to += s.n
			zeroEnd = zeroEnd || dst[to-1] == 0
		}
		return zeroEnd
	}
	bad, zeroEnd := moveSpansAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), &spans[0], len(spans), len(dst), len(src))
	if bad >= 0 {
		panic(badSpan(dst, src, spans, bad))
	}
	return zeroEnd
}

// badSpan says why moveSpans stopped at span i.
func badSpan(dst, src []byte, spans []byteSpan, i int) string {
	s := spans[i]
	if s.n <= 0 || s.from < 0 || s.from > int64(len(src))-s.n {
		return fmt.Sprintf("corpus: span %d of %d bytes from %d: empty or outside the source (%d bytes)", i, s.n, s.from, len(src))
	}
	var total int64
	for _, s := range spans[:i+1] {
		total += s.n
	}
	return fmt.Sprintf("corpus: spans of %d bytes or more into %d", total, len(dst))
}
