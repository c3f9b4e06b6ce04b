package engine_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// doneOnSecondLook is a ctx that is not done when the epoch checks it at
// start, and done from then on: its cancellation lands while the run is
// being set up.
type doneOnSecondLook struct {
	context.Context
	looks atomic.Int32
	done  chan struct{}
}

func (c *doneOnSecondLook) Done() <-chan struct{} { return c.done }
func (c *doneOnSecondLook) Err() error {
	if c.looks.Add(1) == 1 {
		return nil
	}
	return context.Canceled
}

func TestCancelAsTheEpochStartsIsAnErrorNeverAPanic(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 2} {
		l := newLoader(t, engine.DatasetFunc(64, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: workers})
		for i := range 300 {
			ctx := &doneOnSecondLook{Context: context.Background(), done: make(chan struct{})}
			close(ctx.done)
			n := 0
			for _, err := range l.Epoch(ctx, i) {
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					break
				}
				n++
			}
			assert.Less(t, n, 16, "a cancelled epoch ran to its end")
		}
		// A storm of cancellations from another goroutine at every point.
		for i := range 200 {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				time.Sleep(time.Duration(i%20) * 10 * time.Microsecond)
				cancel()
			}()
			for _, err := range l.Epoch(ctx, i) {
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					break
				}
			}
			cancel()
		}
		assert.Zero(t, l.Stats().Pool.InUse)
	}
}

// lenSchema is a Dynamic field; Fill writes its length field itself.
var lenSchema = collate.Schema{
	{Name: "tokens", DType: collate.Int32, Shape: []int{collate.Dynamic}, MaxLen: 10},
	{Name: "index", DType: collate.Int64},
}

// writesLen is a BatchFiller that writes the lengths of a whole batch.
type writesLen struct {
	engine.Dataset
	bad    int
	badLen int64
}

func (d writesLen) FillBatch(_ context.Context, b *engine.BatchSlot) error {
	lens := collate.As[int64](b.Tensor("tokens_len"))
	for i, index := range b.Indices() {
		lens[i] = 3
		if index == d.bad && b.Epoch() == 0 {
			lens[i] = d.badLen
		}
	}
	return nil
}

func TestLengthsFillWritesOutOfRangeAreSampleErrors(t *testing.T) {
	for _, bad := range []int64{-1, 11, math.MaxInt64, math.MinInt64, 1 << 40} {
		for _, batch := range []bool{false, true} {
			for _, workers := range []int{0, 2} {
				t.Run(fmt.Sprintf("len=%d/batchfiller=%v/workers=%d", bad, batch, workers), func(t *testing.T) {
					var ds engine.Dataset = engine.DatasetFunc(20, lenSchema, func(_ context.Context, s *engine.Slot) error {
						collate.As[int64](s.Tensor("tokens_len"))[0] = 4
						if s.Index() == 13 && s.Epoch() == 0 {
							collate.As[int64](s.Tensor("tokens_len"))[0] = bad
						}
						return nil
					})
					if batch {
						ds = writesLen{Dataset: ds, bad: 13, badLen: bad}
					}
					l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: workers})
					numbers, err := untilError(l, 0)
					assert.Equal(t, []int{0, 1, 2}, numbers, "every batch before the bad sample's")
					var se *engine.SampleError
					require.ErrorAs(t, err, &se)
					assert.Equal(t, 13, se.Index)
					assert.ErrorContains(t, err, fmt.Sprintf(`field "tokens": length %d in "tokens_len", want 0 to MaxLen (10)`, bad))
					got, _ := collect(t, l, 1)
					assert.Len(t, got, 5, "the loader is unharmed")
				})
			}
		}
	}
}

func fillNothing(context.Context, *engine.Slot) error { return nil }

func TestStuckFillIsAbandonedNotWaitedFor(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			const timeout = 100 * time.Millisecond
			unstick := make(chan struct{})
			var stuckView atomic.Pointer[[]float32]
			ds := engine.DatasetFunc(64, indexSchema, func(ctx context.Context, s *engine.Slot) error {
				if s.Index() == 21 && s.Epoch() == 0 {
					x := collate.As[float32](s.Tensor("x"))
					stuckView.Store(&x)
					for { // ignores ctx, and keeps writing its slot
						select {
						case <-unstick:
							for i := range x {
								x[i] = -1
							}
							return nil
						default:
							x[0] = -1
							time.Sleep(time.Millisecond)
						}
					}
				}
				return fillIndex(ctx, s)
			})
			l, err := engine.New(ds, engine.Config{BatchSize: 4, Workers: 3, Timeout: timeout, RestartWorkers: restart})
			require.NoError(t, err)
			start := time.Now()
			numbers, err := untilError(l, 0)
			assert.Equal(t, []int{0, 1, 2, 3, 4}, numbers)
			var se *engine.SampleError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, 21, se.Index)
			assert.ErrorIs(t, err, engine.ErrTimeout)
			assert.Less(t, time.Since(start), timeout+time.Second, "the epoch ends at the timeout")
			st := l.Stats()
			assert.Equal(t, int64(1), st.Abandoned)
			assert.Equal(t, st.Pool.Allocated/int64(st.Pool.Buffers), st.LeakedBytes, "the stuck batch's buffer is leaked")

			// The loader goes on without the stuck worker, and no batch lands
			// in the buffer the stuck Fill still writes.
			for epoch := 1; epoch < 3; epoch++ {
				for b, err := range l.Epoch(context.Background(), epoch) {
					require.NoError(t, err)
					for i, v := range collate.As[int64](b.Tensor("index")) {
						assert.Equal(t, int64(b.Indices()[i]), v)
					}
					for _, v := range collate.As[float32](b.Tensor("x")) {
						require.NotEqual(t, float32(-1), v, "batch %d of epoch %d shares the stuck sample's buffer", b.IndexInEpoch(), epoch)
					}
				}
			}
			require.NotNil(t, stuckView.Load())

			// Close does not wait for the stuck Fill either.
			start = time.Now()
			require.NoError(t, l.Close())
			assert.Less(t, time.Since(start), timeout+time.Second)
			assert.Equal(t, st.LeakedBytes, l.Stats().Pool.Allocated, "Close frees everything but the leaked buffer")

			close(unstick) // the abandoned goroutine ends on its own
			goleak.VerifyNone(t, goleak.IgnoreCurrent())
		})
	}
}

func TestCloseDuringAStuckFillReturnsAfterTheTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	unstick := make(chan struct{})
	defer close(unstick)
	entered := make(chan struct{})
	var once sync.Once
	ds := engine.DatasetFunc(64, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		if s.Index() == 5 {
			once.Do(func() { close(entered) })
			<-unstick // ignores ctx
		}
		return fillIndex(ctx, s)
	})
	l, err := engine.New(ds, engine.Config{BatchSize: 4, Workers: 2, Timeout: timeout})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		for b, err := range l.Epoch(context.Background(), 0) {
			if err != nil {
				done <- err
				return
			}
			if b.IndexInEpoch() == 0 {
				<-entered
				go l.Close()
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, engine.ErrClosed)
	case <-time.After(timeout + 2*time.Second):
		t.Fatal("the epoch hangs on a stuck Fill after Close")
	}
	start := time.Now()
	require.NoError(t, l.Close())
	assert.Less(t, time.Since(start), timeout+time.Second)
	assert.Equal(t, int64(1), l.Stats().Abandoned)
}

// changingLen is a dataset whose length changes with each epoch.
type changingLen struct {
	engine.Dataset
	lens  []int
	calls atomic.Int32
}

func (d *changingLen) Len() int {
	n := d.lens[min(int(d.calls.Add(1))-1, len(d.lens)-1)]
	if n == -2 {
		panic("Len broke")
	}
	return n
}

func TestLenIsCheckedAtEveryEpoch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		later int
		msg   string
	}{
		{-1, "engine: Dataset.Len is -1, want >= 0"},
		{math.MinInt, fmt.Sprintf("engine: Dataset.Len is %d, want >= 0", math.MinInt)},
		{math.MaxInt, fmt.Sprintf("engine: Dataset.Len is %d, more than the", math.MaxInt)},
		{-2, "engine: Dataset.Len: panic: Len broke"},
	} {
		t.Run(fmt.Sprint(tc.later), func(t *testing.T) {
			for _, shuffle := range []bool{false, true} {
				ds := &changingLen{Dataset: engine.DatasetFunc(0, indexSchema, fillIndex), lens: []int{8, 8, tc.later}}
				l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 2, Shuffle: shuffle})
				got, _ := collect(t, l, 0)
				assert.Len(t, got, 2)
				for _, err := range l.Epoch(context.Background(), 1) {
					assert.ErrorContains(t, err, "epoch 1: "+tc.msg)
				}
			}
			_, err := engine.New(&changingLen{Dataset: engine.DatasetFunc(0, indexSchema, fillIndex), lens: []int{tc.later}}, engine.Config{})
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestBatchMisusePanicsAndTouchesNoRecycledBuffer(t *testing.T) {
	t.Parallel()
	l := newLoader(t, engine.DatasetFunc(64, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: 2})
	after := "after its last Release: its buffers may hold another batch"
	var kept *engine.Batch
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		switch b.IndexInEpoch() {
		case 0:
			kept = b
		case 1:
			assert.PanicsWithValue(t, "engine: Release on batch 1 of epoch 0 without a matching Retain", b.Release, "the loop's own reference is not the caller's")
			assert.Equal(t, 4, b.Tensor("x").Dim(0), "a refused Release changes nothing")
		case 2:
			b.Retain()
			b.Release()
			assert.PanicsWithValue(t, "engine: Release on batch 2 of epoch 0 without a matching Retain", b.Release)
		}
	}
	for _, f := range []struct {
		name string
		call func()
	}{
		{"Retain", kept.Retain},
		{`Tensor("x")`, func() { kept.Tensor("x") }},
		{"RecordStream", func() { kept.RecordStream(0) }},
	} {
		assert.PanicsWithValue(t, "engine: "+f.name+" on batch 0 of epoch 0 "+after, f.call)
	}
	assert.PanicsWithValue(t, "engine: Release on batch 0 of epoch 0 without a matching Retain", kept.Release)
	// Had a refused Retain or Release counted, a buffer would be in the pool
	// twice and two batches would share it.
	assert.Zero(t, l.Stats().Pool.InUse)
	for epoch := 1; epoch < 4; epoch++ {
		var held []*engine.Batch
		for b, err := range l.Epoch(context.Background(), epoch) {
			require.NoError(t, err)
			b.Retain()
			held = append(held, b)
		}
		for _, b := range held {
			for i, v := range collate.As[int64](b.Tensor("index")) {
				require.Equal(t, int64(b.Indices()[i]), v, "batch %d was overwritten", b.IndexInEpoch())
			}
			b.Release()
		}
	}
}

func TestOverflowingBatchBytesNameBatchSize(t *testing.T) {
	t.Parallel()
	big := collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{1 << 20}}}
	for _, tc := range []struct {
		bs    int
		bytes string
	}{
		{math.MaxInt, "38685626227668133586403328"},
		{1 << 30, "4503599627370496"},
	} {
		_, err := engine.New(engine.DatasetFunc(1, big, fillNothing), engine.Config{BatchSize: tc.bs})
		require.Error(t, err)
		assert.ErrorContains(t, err, fmt.Sprintf("engine: Config.BatchSize: %d samples of 4194304 bytes is ", tc.bs))
		assert.ErrorContains(t, err, tc.bytes+" bytes a batch")
	}
}
