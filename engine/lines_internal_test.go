package engine

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// The hand-off's fields keep the lines NOTE [lines] gives them: what mu
// guards in a hand-off in the run's first 64 bytes, done and slab a line
// past it, and nothing else on their line; the workers' counters a line
// apart from the consumer's.
func TestHandOffLines(t *testing.T) {
	t.Parallel()
	line := unsafe.Sizeof(cacheLinePad{})
	var r run
	assert.Zero(t, unsafe.Offsetof(r.mu), "mu starts the run")
	freeEnd := unsafe.Offsetof(r.free) + unsafe.Sizeof(r.free)
	assert.LessOrEqual(t, freeEnd, uintptr(64), "what mu guards in a hand-off fits 64 bytes")
	assert.GreaterOrEqual(t, unsafe.Offsetof(r.done)-freeEnd, line, "done is a line past them")
	assert.Equal(t, unsafe.Offsetof(r.done)+unsafe.Sizeof(r.done), unsafe.Offsetof(r.slab), "slab follows done")
	assert.GreaterOrEqual(t, unsafe.Offsetof(r.l)-(unsafe.Offsetof(r.slab)+unsafe.Sizeof(r.slab)), line, "the rest is a line past done and slab")

	var l loader
	assert.GreaterOrEqual(t, unsafe.Offsetof(l.samples)-(unsafe.Offsetof(l.resumed)+1), line, "the workers' counters are a line past the consumer's pos")
	assert.Greater(t, unsafe.Offsetof(l.batches), unsafe.Offsetof(l.stats)+unsafe.Offsetof(l.stats.wait), "the consumer's batches is past the workers' counters and histograms")
}
