//go:build !amd64

package shards

var haveMoveSpans = false

func moveSpansAVX2(dst, src *byte, spans *byteSpan, n, dstLen, srcLen int) (int, bool) {
	panic("unreachable")
}
