package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
	"github.com/tensorbatch/tensorbatch/internal/fakecudart"
	"github.com/tensorbatch/tensorbatch/internal/launch"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// fakeGPU makes Backend "cuda" load the fake runtime, whose copies run
// delayUS µs late on their stream's thread.
func fakeGPU(t *testing.T, delayUS int, jitter bool) {
	for _, v := range launch.Vars() { // a launcher's local rank would pick another device
		t.Setenv(v, "")
	}
	t.Setenv(pinned.EnvCUDALib, fakecudart.Path(t))
	t.Setenv("TB_FAKE_COPY_DELAY_US", fmt.Sprint(delayUS))
	if jitter {
		t.Setenv("TB_FAKE_JITTER", "1")
	}
}

func TestDeviceCopiesMatchTheHostBatch(t *testing.T) {
	fakeGPU(t, 2000, true) // streams finish out of order
	for _, workers := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			l := newLoader(t, engine.DatasetFunc(90, indexSchema, fillIndex), engine.Config{BatchSize: 8, Workers: workers, Shuffle: true, Backend: "cuda"})
			require.Equal(t, "cuda", l.Backend().Backend.Name())
			rt := l.Backend().Backend.(*pinned.GPU).Runtime()
			want := engine.Batched{Sampler: engine.Shuffled{N: 90}, Size: 8}.Batches(0)
			k := 0
			for b, err := range l.Epoch(context.Background(), 0) {
				require.NoError(t, err)
				require.True(t, b.OnDevice())
				assert.Equal(t, want[k], b.Indices(), "delivered in sampler order")
				k++
				require.NoError(t, b.WaitDevice())
				done, err := rt.EventQuery(csrc.Event(b.Event()))
				require.NoError(t, err)
				assert.True(t, done)
				for _, f := range indexSchema {
					dt := b.DeviceTensor(f.Name)
					host := b.Tensor(f.Name)
					assert.Equal(t, host.Shape(), dt.Shape)
					assert.Equal(t, f.DType, dt.DType)
					back := make([]byte, dt.Bytes)
					require.NoError(t, rt.CopyToHost(back, csrc.DevicePtr(dt.Ptr)))
					assert.True(t, bytes.Equal(host.Bytes(), back), "batch %d field %s differs on the device", b.IndexInEpoch(), f.Name)
				}
			}
			assert.Equal(t, len(want), k)
			st := l.Stats()
			assert.Equal(t, int64(len(want))*int64(st.Pool.Allocated/int64(st.Pool.Buffers)), st.BytesToDevice)
			require.NoError(t, l.Close())
			assert.Zero(t, l.Stats().Pool.Allocated, "pinned host memory left")
			assert.Zero(t, l.Stats().DevicePool.Allocated, "device memory left")
		})
	}
}

// The consumer queues its own work on the batch's stream and releases the
// batch at once, as a training loop that launches kernels does. If the
// loader reused a host buffer before the copy that reads it completed, the
// device would receive a later batch's samples.
func TestHostBufferIsNotReusedBeforeItsCopy(t *testing.T) {
	fakeGPU(t, 3000, false)
	l := newLoader(t, engine.DatasetFunc(64, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: 1, PrefetchFactor: 1, Backend: "cuda"})
	g := l.Backend().Backend.(*pinned.GPU)
	rt := g.Runtime()
	var captured [][]byte
	var stream csrc.Stream
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		dt := b.DeviceTensor("index")
		dst, err := g.HostAlloc(dt.Bytes)
		require.NoError(t, err)
		stream = csrc.Stream(b.CopyStream())
		require.NoError(t, rt.CopyToHostAsync(dst, csrc.DevicePtr(dt.Ptr), stream))
		captured = append(captured, dst)
	}
	require.NoError(t, rt.StreamSynchronize(stream))
	for k, dst := range captured {
		got := collate.As[int64](must(collate.MakeTensor(collate.Int64, []int{4}, dst)))
		assert.Equal(t, []int64{int64(4 * k), int64(4*k + 1), int64(4*k + 2), int64(4*k + 3)}, got, "batch %d on the device", k)
		require.NoError(t, g.HostFree(dst))
	}
	assert.Len(t, captured, 16)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCopyErrorArrivesAtItsBatch(t *testing.T) {
	fakeGPU(t, 0, false)
	l := newLoader(t, engine.DatasetFunc(16, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: 2, Backend: "cuda"})
	t.Setenv("TB_FAKE_FAIL", "cudaMemcpyAsync=1")
	for _, err := range l.Epoch(context.Background(), 0) {
		assert.EqualError(t, err, "engine: copy of batch 0 of epoch 0 to cuda:0: cuda: cudaMemcpyAsync: cudaErrorInvalidValue (1): invalid argument")
		break
	}
	t.Setenv("TB_FAKE_FAIL", "")
	got, _ := collect(t, l, 1)
	assert.Len(t, got, 4, "the loader recovers once the runtime does")
}

func TestCPUBackendHasNoDeviceTensor(t *testing.T) {
	t.Parallel()
	l := newLoader(t, engine.DatasetFunc(4, indexSchema, fillIndex), engine.Config{BatchSize: 4, Backend: "cpu"})
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		assert.False(t, b.OnDevice())
		assert.Zero(t, b.Event())
		assert.NoError(t, b.WaitDevice())
		assert.PanicsWithValue(t, `engine: DeviceTensor("x"): the cpu backend has no device memory`, func() { b.DeviceTensor("x") })
	}
	_, err := engine.New(engine.DatasetFunc(4, indexSchema, fillIndex), engine.Config{Backend: "tpu"})
	assert.ErrorContains(t, err, `engine: Config.Backend: pinned: backend "tpu": want auto, hip, cuda or cpu`)
}

func TestWriteCombinedTensorsBatchesReachTheDevice(t *testing.T) {
	fakeGPU(t, 100, false)
	l := newLoader(t, tensorsDataset(t, 50), engine.Config{BatchSize: 8, Workers: 2, Backend: "cuda", WriteCombined: true})
	rt := l.Backend().Backend.(*pinned.GPU).Runtime()
	n := 0
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		require.NoError(t, b.WaitDevice())
		dt := b.DeviceTensor("y")
		back := make([]byte, dt.Bytes)
		require.NoError(t, rt.CopyToHost(back, csrc.DevicePtr(dt.Ptr)))
		y := collate.As[int64](must(collate.MakeTensor(collate.Int64, []int{b.Len()}, back)))
		for r, i := range b.Indices() {
			assert.Equal(t, int64(10*i), y[r])
		}
		n++
	}
	assert.Equal(t, 7, n)
	// The option reaches cudaHostAlloc: a runtime that refuses the flag
	// fails the first batch's buffer, and says which allocation.
	t.Setenv("TB_FAKE_NO_WC", "1")
	l2 := newLoader(t, tensorsDataset(t, 50), engine.Config{BatchSize: 8, Backend: "cuda", WriteCombined: true})
	for _, err := range l2.Epoch(context.Background(), 0) {
		assert.ErrorContains(t, err, "engine: buffer for batch 0 of epoch 0: pinned: cuda write-combined host alloc")
		break
	}
}

// With Workers 0 the consumer's goroutine fills and copies; Close from
// another goroutine must not pull its stream out from under it.
func TestCloseDuringAnInlineGPUEpoch(t *testing.T) {
	fakeGPU(t, 50, false)
	for range 5 {
		l, err := engine.New(engine.DatasetFunc(2000, indexSchema, fillIndex), engine.Config{BatchSize: 2, Backend: "cuda"})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			var last error
			for _, err := range l.Epoch(context.Background(), 0) {
				last = err
			}
			done <- last
		}()
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, l.Close())
		assert.ErrorIs(t, <-done, engine.ErrClosed)
		assert.Zero(t, l.Stats().Pool.Allocated)
		assert.Zero(t, l.Stats().DevicePool.Allocated)
	}
}
