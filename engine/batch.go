package engine

import (
	"fmt"
	"slices"
	"sync"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// Batch is one batch of an epoch, in pinned host memory. It is valid in
// the body of the range loop that yielded it; Retain keeps it past the body
// until the matching Release.
type Batch struct {
	l       *loader
	epoch   int
	number  int
	n       int       // samples
	idx     []int     // their indices; nil: lazy's batch k, computed again
	lazy    batchList // a lazy order's batches
	k       int
	layout  *collate.Layout
	buf     *pinned.Buffer
	longest []int          // the padded length of each Dynamic field
	dev     *pinned.Buffer // the device copy; nil on the cpu backend
	stream  pinned.Stream  // the stream the copy was issued on
	lease   *collate.Lease // ended at the last release; nil unless Config.CheckReleased

	mu      sync.Mutex
	inLoop  bool            // the range loop's reference, dropped when the body returns
	retains int             // references taken by Retain and not yet Released
	streams []pinned.Stream // named by RecordStream
}

// live panics unless the batch is still referenced. Called with b.mu held.
func (b *Batch) live(what string) {
	if !b.inLoop && b.retains == 0 {
		panic(fmt.Sprintf("engine: %s on batch %d of epoch %d after its last Release: its buffers may hold another batch", what, b.number, b.epoch))
	}
}

// check panics unless the batch is still referenced.
func (b *Batch) check(what string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live(what)
}

// Len returns the number of samples.
func (b *Batch) Len() int { return b.n }

// String names the batch: "batch 3 of epoch 0".
func (b *Batch) String() string { return fmt.Sprintf("batch %d of epoch %d", b.number, b.epoch) }

// Indices returns the dataset indices of the samples, in order.
func (b *Batch) Indices() []int {
	if b.idx != nil || b.n == 0 {
		return slices.Clone(b.idx)
	}
	idx := make([]int, b.n)
	copy(idx, b.lazy.batch(b.k, idx)) // a materialized list gives its own slice
	return idx
}

// Epoch returns the epoch the batch belongs to.
func (b *Batch) Epoch() int { return b.epoch }

// IndexInEpoch returns the batch's position in its epoch, from 0.
func (b *Batch) IndexInEpoch() int { return b.number }

// Tensor returns field name of every sample, shape [Len(), field shape...],
// in pinned host memory. A Dynamic field has shape [Len(), longest, row
// shape...], padded with its Pad, and its lengths are the field
// "<name>_len". It panics when there is no such field or the batch was
// released.
func (b *Batch) Tensor(name string) collate.Tensor {
	b.check(fmt.Sprintf("Tensor(%q)", name))
	i := b.layout.Schema().Index(name)
	if i < 0 {
		panic(fmt.Sprintf("engine: Batch.Tensor(%q): no such field; the schema has %q", name, b.layout.Schema().Names()))
	}
	for d, df := range b.l.dyn {
		if df.field == i {
			return b.layout.Padded(b.buf.Bytes(), i, b.n, b.longest[d]).Leased(b.lease)
		}
	}
	return b.layout.Batch(b.buf.Bytes(), i, b.n).Leased(b.lease)
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
	b.check("Event")
	return uintptr(b.buf.Event())
}

// CopyStream returns the stream (cudaStream_t / hipStream_t) the copy was
// issued on, or 0 on the cpu backend. Work queued on it runs after the
// copy, but is not covered by the release protocol (see RecordStream):
// queue your work on your own stream, named in Config.CopyStream or by
// RecordStream, after waiting on Event.
func (b *Batch) CopyStream() uintptr { return uintptr(b.stream) }

// WaitDevice blocks until the batch's device copy has completed. It returns
// at once on the cpu backend.
func (b *Batch) WaitDevice() error {
	if b.dev == nil {
		return nil
	}
	b.check("WaitDevice")
	return b.l.gpu.WaitEvent(b.buf.Event())
}

// RecordStream says that work queued on stream (a cudaStream_t or
// hipStream_t of the loader's device) reads this batch's device memory, as
// PyTorch's Tensor.record_stream does. When the batch is released, the
// loader records an event on every stream named here and on Config.Stream,
// and the next copy into the device buffer waits for those events on its
// copy stream, without blocking the host. With no stream named at all, the
// event is recorded on the legacy default stream, which covers work on
// blocking streams only. Call it before the last Release; it does nothing
// on the cpu backend.
func (b *Batch) RecordStream(stream uintptr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live("RecordStream")
	b.streams = append(b.streams, pinned.Stream(stream))
}

// Retain keeps the batch valid after the loop body returns, until a
// matching Release. Each Retain needs one Release. It panics after the
// batch's last Release: the buffers may already hold another batch.
func (b *Batch) Retain() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live("Retain")
	b.retains++
}

// Release drops a reference taken by Retain. The batch's buffers go back
// to the pool when the last reference is dropped (the loop drops its own
// when the body returns). A Release without a matching Retain panics, and
// touches nothing.
func (b *Batch) Release() {
	b.mu.Lock()
	if b.retains == 0 {
		b.mu.Unlock()
		panic(fmt.Sprintf("engine: Release on batch %d of epoch %d without a matching Retain", b.number, b.epoch))
	}
	b.retains--
	b.drop()
}

// endLoop drops the range loop's reference when the body returns.
func (b *Batch) endLoop() {
	b.mu.Lock()
	b.inLoop = false
	b.drop()
}

// drop recycles the buffers once no reference is left. Called with b.mu
// held; unlocks it.
func (b *Batch) drop() {
	last := !b.inLoop && b.retains == 0
	streams := b.streams
	b.mu.Unlock()
	if last {
		b.lease.End() // before the buffer can hold another batch
		b.l.release(b.buf, b.dev, streams)
	}
}
