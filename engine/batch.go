package engine

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// Batch is one batch of an epoch, in pinned host memory. It is valid in
// the body of the range loop that yielded it; Retain keeps it past the body
// until the matching Release.
type Batch struct {
	l      *Loader
	epoch  int
	number int
	idx    []int
	layout *collate.Layout
	buf    *pinned.Buffer
	refs   atomic.Int32
}

// Len returns the number of samples.
func (b *Batch) Len() int { return len(b.idx) }

// Indices returns the dataset indices of the samples, in order.
func (b *Batch) Indices() []int { return slices.Clone(b.idx) }

// Epoch returns the epoch the batch belongs to.
func (b *Batch) Epoch() int { return b.epoch }

// Number returns the batch's position in its epoch, from 0.
func (b *Batch) Number() int { return b.number }

// Tensor returns field name of every sample, shape [Len(), field shape...],
// in pinned host memory. It panics when there is no such field or the batch
// was released.
func (b *Batch) Tensor(name string) collate.Tensor {
	if b.refs.Load() <= 0 {
		panic(fmt.Sprintf("engine: Tensor(%q) on batch %d of epoch %d after its Release", name, b.number, b.epoch))
	}
	i := b.layout.Schema().Index(name)
	if i < 0 {
		panic(fmt.Sprintf("engine: Batch.Tensor(%q): no such field; the schema has %q", name, b.layout.Schema().Names()))
	}
	return b.layout.Batch(b.buf.Bytes(), i, len(b.idx))
}

// Retain keeps the batch valid after the loop body returns, until a
// matching Release. Each Retain needs one Release.
func (b *Batch) Retain() {
	if b.refs.Add(1) <= 1 {
		panic(fmt.Sprintf("engine: Retain on batch %d of epoch %d after its Release", b.number, b.epoch))
	}
}

// Release drops a reference taken by Retain. The batch's buffer goes back
// to the pool when the last reference is dropped; the loop drops its own
// when the body returns.
func (b *Batch) Release() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		b.l.recycle(b.buf)
	case n < 0:
		panic(fmt.Sprintf("engine: Release on batch %d of epoch %d without a matching Retain", b.number, b.epoch))
	}
}
