//go:build unix

package shards

import (
	"runtime/debug"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moveRuns reads nothing outside a run: runs of every length up to 300
// bytes that end where a readable page ends, or start where it starts,
// next to pages that cannot be read, copy without a fault.
func TestMoveRunsReadsOnlyTheRuns(t *testing.T) {
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
	var runs []byteRun
	to := int64(0)
	for n := int64(0); n <= 300; n++ {
		runs = append(runs, byteRun{int64(page), int64(page) + n, to}, byteRun{int64(2*page) - n, int64(2 * page), to + n})
		to += 2 * n
	}
	dst := make([]byte, to)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	assert.NotPanics(t, func() { moveRuns(dst, src, runs) })
	for _, r := range runs {
		assert.Equal(t, want[r.from-int64(page):r.end-int64(page)], dst[r.to:r.to+r.end-r.from])
	}
	// moveSpans, on the same runs as spans
	spans := make([]byteSpan, 0, len(runs))
	for _, r := range runs {
		if r.end > r.from {
			spans = append(spans, byteSpan{r.from, r.end - r.from})
		}
	}
	clear(dst)
	assert.NotPanics(t, func() { moveSpans(dst, src, spans) })
	at := int64(0)
	for _, s := range spans {
		assert.Equal(t, want[s.from-int64(page):s.from+s.n-int64(page)], dst[at:at+s.n])
		at += s.n
	}
}
