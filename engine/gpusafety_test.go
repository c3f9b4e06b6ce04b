package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// trainOnStream runs an epoch as the README's GPU loop does: each batch's
// step goes on the consumer's own stream s, after the batch's copy, and
// the batch is released at once, before the step has run. The fake's
// copies run late, so the step reads the device batch late; it reads it
// three times, so it falls further behind the loader with every batch.
// name, when set, is called on each batch (to RecordStream). It returns
// the batches whose step saw other data than the batch's own.
func trainOnStream(t *testing.T, l *engine.Loader, s csrc.Stream, name func(b *engine.Batch)) (corrupt, total int) {
	t.Helper()
	g := l.Backend().Backend.(*pinned.GPU)
	rt := g.Runtime()
	var seen [][]byte
	var want [][]int64
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		dt := b.DeviceTensor("index")
		require.NoError(t, rt.StreamWaitEvent(s, csrc.Event(b.Event())))
		dst, err := g.HostAlloc(dt.Bytes)
		require.NoError(t, err)
		for range 3 {
			require.NoError(t, rt.CopyToHostAsync(dst, csrc.DevicePtr(dt.Ptr), s))
		}
		seen = append(seen, dst)
		want = append(want, append([]int64(nil), collate.As[int64](b.Tensor("index"))...))
		if name != nil {
			name(b)
		}
	}
	require.NoError(t, rt.StreamSynchronize(s))
	for k, dst := range seen {
		got := collate.As[int64](must(collate.MakeTensor(collate.Int64, []int{len(want[k])}, dst)))
		if !assert.ObjectsAreEqual(want[k], got) {
			corrupt++
		}
		require.NoError(t, g.HostFree(dst))
	}
	return corrupt, len(seen)
}

func TestDeviceBufferIsNotReusedUnderTheConsumersWork(t *testing.T) {
	fakeGPU(t, 300, false)
	ds := engine.DatasetFunc(400, indexSchema, fillIndex)
	for _, workers := range []int{0, 1, 3} {
		for _, tc := range []struct {
			name     string
			blocking bool // the consumer's stream synchronizes with the legacy default stream
			config   bool // named in Config.Stream
			record   bool // named by Batch.RecordStream
		}{
			{name: "Config.Stream", config: true},
			{name: "RecordStream", record: true},
			{name: "blocking stream, none named", blocking: true},
		} {
			t.Run(fmt.Sprintf("%s/workers=%d", tc.name, workers), func(t *testing.T) {
				rt := openFake(t)
				s := newStream(t, rt, tc.blocking)
				cfg := engine.Config{BatchSize: 4, Workers: workers, Backend: "cuda"}
				if tc.config {
					cfg.Stream = uintptr(s)
				}
				var name func(b *engine.Batch)
				if tc.record {
					name = func(b *engine.Batch) { b.RecordStream(uintptr(s)) }
				}
				l := newLoader(t, ds, cfg)
				corrupt, total := trainOnStream(t, l, s, name)
				assert.Equal(t, 100, total)
				assert.Zero(t, corrupt, "batches overwritten under the consumer's work")
			})
		}
	}
	// The negative control: a non-blocking stream that nobody names is not
	// covered (the README says so), and the fake catches the overwrite.
	t.Run("non-blocking stream, none named", func(t *testing.T) {
		rt := openFake(t)
		s := newStream(t, rt, false)
		l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 1, Backend: "cuda"})
		corrupt, total := trainOnStream(t, l, s, nil)
		assert.Equal(t, 100, total)
		assert.Positive(t, corrupt, "the fake runtime no longer shows an unprotected reuse")
		t.Logf("%d of %d batches overwritten under an unnamed non-blocking stream", corrupt, total)
	})
}

// openFake returns the fake runtime the loader's "cuda" backend loads.
func openFake(t *testing.T) *csrc.Runtime {
	sel, err := pinned.Select("cuda")
	require.NoError(t, err)
	return sel.Backend.(*pinned.GPU).Runtime()
}

func newStream(t *testing.T, rt *csrc.Runtime, blocking bool) csrc.Stream {
	var s csrc.Stream
	var err error
	if blocking {
		s, err = rt.StreamCreateWithFlags(0)
	} else {
		s, err = rt.StreamCreate()
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, rt.StreamDestroy(s)) })
	return s
}

func TestGPUBuffersAreBoundedByTheWindow(t *testing.T) {
	fakeGPU(t, 500, true)
	ds := engine.DatasetFunc(400, indexSchema, fillIndex)
	for _, tc := range []struct{ workers, prefetch int }{{1, 1}, {2, 2}, {0, 0}} {
		t.Run(fmt.Sprintf("workers=%d/prefetch=%d", tc.workers, tc.prefetch), func(t *testing.T) {
			l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: tc.workers, PrefetchFactor: tc.prefetch, Backend: "cuda"})
			got, _ := collect(t, l, 0)
			require.Len(t, got, 100)
			window := max(1, tc.workers*tc.prefetch)
			st := l.Stats()
			// In flight, the one in the loop body, and one being released.
			assert.LessOrEqual(t, st.Pool.PeakBufs, window+2, "host buffers")
			assert.LessOrEqual(t, st.DevicePool.PeakBufs, window+2, "device buffers")
		})
	}
	t.Run("MaxPinnedBytes", func(t *testing.T) {
		const size = 1280 // one batch of indexSchema, 4 samples
		l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 2, PrefetchFactor: 2, Backend: "cuda", MaxPinnedBytes: 3 * size})
		got, _ := collect(t, l, 0)
		require.Len(t, got, 100)
		st := l.Stats()
		assert.Equal(t, int64(size), st.Pool.Allocated/int64(st.Pool.Buffers))
		assert.LessOrEqual(t, st.Pool.Peak, int64(3*size), "pinned host bytes")
		assert.LessOrEqual(t, st.DevicePool.Peak, int64(3*size), "device bytes")
	})
}

// onDevice runs f on a locked OS thread whose current device is device.
func onDevice(t *testing.T, rt *csrc.Runtime, device int, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(t, rt.SetDevice(device))
		f()
	}()
	<-done
}

// The fake's strict mode refuses copies and records on a stream of a
// device other than the calling thread's current one: a worker goroutine
// that copies without making its device current fails on cuda:1.
func TestCopiesRunOnTheLoadersDevice(t *testing.T) {
	fakeGPU(t, 0, false) // copies complete at once: buffers are reused, not allocated (under the device)
	t.Setenv("TB_FAKE_DEVICES", "2")
	t.Setenv("TB_FAKE_STRICT_DEVICE", "1")
	for _, workers := range []int{0, 1, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			rt := openFake(t)
			// Fill leaves device 0 current on its thread, as code that uses
			// the runtime (or a library that does) may; the copy of the batch
			// that follows on the same thread must still go to device 1.
			ds := engine.DatasetFunc(200, indexSchema, func(ctx context.Context, s *engine.Slot) error {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if err := rt.SetDevice(0); err != nil {
					return err
				}
				return fillIndex(ctx, s)
			})
			l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: workers, Backend: "cuda:1"})
			g := l.Backend().Backend.(*pinned.GPU)
			require.Equal(t, 1, g.Device())
			n := 0
			for b, err := range l.Epoch(context.Background(), 0) {
				require.NoError(t, err)
				require.NoError(t, b.WaitDevice())
				dt := b.DeviceTensor("index")
				back := make([]byte, dt.Bytes)
				onDevice(t, g.Runtime(), 1, func() { require.NoError(t, g.Runtime().CopyToHost(back, csrc.DevicePtr(dt.Ptr))) })
				assert.Equal(t, b.Tensor("index").Bytes(), back)
				n++
			}
			assert.Equal(t, 50, n)
		})
	}
}
