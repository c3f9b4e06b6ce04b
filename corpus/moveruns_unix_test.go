//go:build unix

package corpus

import (
	"runtime/debug"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moveSpans reads nothing outside a span: spans of every length up to
// 300 bytes that end where a readable page ends, or start where it
// starts, next to pages that cannot be read, copy without a fault.
func TestMoveSpansReadsOnlyTheSpans(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 3*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	defer syscall.Munmap(mem)
	for i := range mem {
		mem[i] = byte(i*5 + 1)
	}
	want := append([]byte(nil), mem[page:2*page]...)
	require.NoError(t, syscall.Mprotect(mem[:page], syscall.PROT_NONE))
	require.NoError(t, syscall.Mprotect(mem[2*page:], syscall.PROT_NONE))
	src := mem[:2*page] // the first page cannot be read, nor the one after src
	var spans []byteSpan
	for n := int64(1); n <= 300; n++ {
		spans = append(spans, byteSpan{int64(page), n}, byteSpan{int64(2*page) - n, n})
	}
	dst := make([]byte, 300*301)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	assert.NotPanics(t, func() { moveSpans(dst, src, spans) })
	at := int64(0)
	for _, s := range spans {
		assert.Equal(t, want[s.from-int64(page):s.from+s.n-int64(page)], dst[at:at+s.n])
		at += s.n
	}
}
