//go:build !amd64

package corpus

var haveMoveSpans = false

func moveSpansAVX2(dst, src *byte, spans *byteSpan, n, dstLen, srcLen int) (int, bool) {
	panic("unreachable")
}
