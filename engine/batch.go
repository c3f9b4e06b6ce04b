package engine

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/csrc"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// Batch is one batch of an epoch, in pinned host memory. It is valid in
// the body of the range loop that yielded it; Retain keeps it past the body
// until the matching Release.
type Batch struct {
	l       *Loader
	epoch   int
	number  int
	idx     []int
	layout  *collate.Layout
	buf     *pinned.Buffer
	longest []int          // the padded length of each Dynamic field
	dev     *pinned.Buffer // the device copy; nil on the cpu backend
	stream  csrc.Stream
	refs    atomic.Int32
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
// in pinned host memory. A Dynamic field has shape [Len(), longest, row
// shape...], padded with its Pad, and its lengths are the field
// "<name>_len". It panics when there is no such field or the batch was
// released.
func (b *Batch) Tensor(name string) collate.Tensor {
	if b.refs.Load() <= 0 {
		panic(fmt.Sprintf("engine: Tensor(%q) on batch %d of epoch %d after its Release", name, b.number, b.epoch))
	}
	i := b.layout.Schema().Index(name)
	if i < 0 {
		panic(fmt.Sprintf("engine: Batch.Tensor(%q): no such field; the schema has %q", name, b.layout.Schema().Names()))
	}
	for d, df := range b.l.dyn {
		if df.field == i {
			return b.layout.Padded(b.buf.Bytes(), i, len(b.idx), b.longest[d])
		}
	}
	return b.layout.Batch(b.buf.Bytes(), i, len(b.idx))
}

// OnDevice reports whether the batch was copied to device memory (a GPU
// backend is active).
func (b *Batch) OnDevice() bool { return b.dev != nil }

// DeviceTensor is one field of a batch in device memory: plain values a
// training loop passes to its own CUDA or HIP code.
type DeviceTensor struct {
	Ptr   uintptr // device address (CUdeviceptr / hipDeviceptr_t)
	Bytes int
	Shape []int // [Len(), field shape...]
	DType collate.DType
}

// DeviceTensor returns field name of the batch in device memory. The copy
// that writes it may still be running: wait on Event (from your own
// stream, with cudaStreamWaitEvent / hipStreamWaitEvent, or on the host
// with WaitDevice) before reading it. It panics on the cpu backend, when
// there is no such field, or after Release.
func (b *Batch) DeviceTensor(name string) DeviceTensor {
	if b.dev == nil {
		panic(fmt.Sprintf("engine: DeviceTensor(%q): the %s backend has no device memory", name, b.l.sel.Backend.Name()))
	}
	t := b.Tensor(name)
	i := b.layout.Schema().Index(name)
	return DeviceTensor{
		Ptr:   uintptr(b.dev.Device()) + uintptr(b.layout.Offset(i)),
		Bytes: len(t.Bytes()),
		Shape: t.Shape(),
		DType: t.DType(),
	}
}

// Event returns the event (cudaEvent_t / hipEvent_t) recorded after the
// batch's host-to-device copy, or 0 on the cpu backend. It is valid until
// Release.
func (b *Batch) Event() uintptr {
	if b.dev == nil {
		return 0
	}
	return uintptr(b.buf.Event())
}

// Stream returns the stream (cudaStream_t / hipStream_t) the copy was
// issued on, or 0 on the cpu backend. Work queued on it runs after the copy.
func (b *Batch) Stream() uintptr { return uintptr(b.stream) }

// WaitDevice blocks until the batch's device copy has completed. It returns
// at once on the cpu backend.
func (b *Batch) WaitDevice() error {
	if b.dev == nil {
		return nil
	}
	return b.l.gpu.Runtime().EventSynchronize(b.buf.Event())
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
		b.l.recycle(b.buf, b.dev)
	case n < 0:
		panic(fmt.Sprintf("engine: Release on batch %d of epoch %d without a matching Retain", b.number, b.epoch))
	}
}
