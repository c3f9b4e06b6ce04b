package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// within runs f and fails the test if it has not returned after d: a hang.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s hangs", what)
	}
}

// goexitStream is a memStream whose Decode calls runtime.Goexit for one
// sample of epoch 0.
type goexitStream struct {
	*memStream
	index int
}

func (g goexitStream) Decode(ctx context.Context, rec engine.Record, s *engine.Slot) error {
	if s.Index() == g.index && s.Epoch() == 0 {
		runtime.Goexit()
	}
	return g.memStream.Decode(ctx, rec, s)
}

// goexitDataset is 40 samples (or a stream of 40) whose Fill of sample
// bad calls runtime.Goexit in epoch 0, as t.FailNow would.
func goexitDataset(t *testing.T, stream bool, bad int) engine.Dataset {
	if stream {
		d, err := engine.FromIterable(context.Background(), goexitStream{newMemStream(15, 25), bad}, engine.IterableConfig{})
		require.NoError(t, err)
		return d
	}
	return engine.DatasetFunc(40, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		if s.Index() == bad && s.Epoch() == 0 {
			runtime.Goexit()
		}
		return fillIndex(ctx, s)
	})
}

func TestGoexitInFillEndsTheEpochWithASampleError(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		for _, workers := range []int{1, 4} {
			for _, tc := range []struct {
				name string
				cfg  engine.Config
			}{
				{"", engine.Config{}},
				{"timeout", engine.Config{Timeout: time.Minute}},
				{"restart workers", engine.Config{RestartWorkers: true}},
				{"out of order timeout", engine.Config{OutOfOrder: true, Timeout: time.Minute}},
				{"skip policy", engine.Config{OnError: engine.ErrorPolicy{Skip: 5}}}, // never skipped: the worker is gone
			} {
				cfg := tc.cfg
				t.Run(fmt.Sprintf("stream %v workers %d %s", stream, workers, tc.name), func(t *testing.T) {
					cfg.BatchSize, cfg.Workers = 4, workers
					l, err := engine.New(goexitDataset(t, stream, 13), cfg)
					require.NoError(t, err)
					within(t, 20*time.Second, "the epoch", func() {
						numbers, err := untilError(l, 0)
						var se *engine.SampleError
						require.ErrorAs(t, err, &se)
						assert.Equal(t, 13, se.Index)
						assert.Equal(t, 0, se.Epoch)
						assert.ErrorIs(t, err, engine.ErrGoexit)
						assert.ErrorContains(t, err, "engine: sample 13 (epoch 0, worker")
						if !cfg.OutOfOrder {
							assert.Equal(t, []int{0, 1, 2}, numbers, "the batches before sample 13's")
						}
					})
					within(t, 20*time.Second, "the next epoch", func() {
						numbers, err := untilError(l, 1) // new workers take the lost one's place
						require.NoError(t, err)
						assert.Len(t, numbers, 10)
					})
					within(t, 20*time.Second, "Close", func() { require.NoError(t, l.Close()) })
				})
			}
		}
	}
}

func TestGoexitInFillWithWorkers0EndsTheConsumerGoroutine(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		for _, timeout := range []time.Duration{0, time.Minute} {
			t.Run(fmt.Sprintf("stream %v timeout %v", stream, timeout), func(t *testing.T) {
				l, err := engine.New(goexitDataset(t, stream, 13), engine.Config{BatchSize: 4, Timeout: timeout})
				require.NoError(t, err)
				var delivered []int
				returned := false
				within(t, 20*time.Second, "the consumer's Goexit", func() {
					done := make(chan struct{})
					go func() { // the consumer: Fill's Goexit ends it, as t.FailNow in a loop body would
						defer close(done)
						for b, err := range l.Epoch(context.Background(), 0) {
							require.NoError(t, err)
							delivered = append(delivered, b.IndexInEpoch())
						}
						returned = true
					}()
					<-done
				})
				assert.False(t, returned, "Goexit ends the consumer's goroutine")
				assert.Equal(t, []int{0, 1, 2}, delivered)
				within(t, 20*time.Second, "the next epoch", func() {
					numbers, err := untilError(l, 1) // the loader is not left busy
					require.NoError(t, err)
					assert.Len(t, numbers, 10)
				})
				within(t, 20*time.Second, "Close", func() { require.NoError(t, l.Close()) })
			})
		}
	}
}

func TestGoexitInWorkerInitEndsTheEpoch(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{1, 3} {
		var exited atomic.Bool
		init := engine.WorkerInitFunc(func(ctx context.Context, worker int) error {
			if worker == 0 && exited.CompareAndSwap(false, true) {
				runtime.Goexit()
			}
			return nil
		})
		l, err := engine.New(engine.DatasetFunc(40, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: workers, WorkerInit: init})
		require.NoError(t, err)
		within(t, 20*time.Second, "the epoch", func() {
			_, err := untilError(l, 0)
			assert.ErrorIs(t, err, engine.ErrGoexit)
			assert.ErrorContains(t, err, "engine: Config.WorkerInit of worker 0")
		})
		within(t, 20*time.Second, "the next epoch", func() {
			numbers, err := untilError(l, 1)
			require.NoError(t, err)
			assert.Len(t, numbers, 10)
		})
		within(t, 20*time.Second, "Close", func() { require.NoError(t, l.Close()) })
	}
}
