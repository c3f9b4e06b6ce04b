package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	ds := engine.DatasetFunc(10, indexSchema, fillIndex)
	for _, tc := range []struct {
		cfg   engine.Config
		field string
	}{
		{engine.Config{BatchSize: -1}, "Config.BatchSize: -1"},
		{engine.Config{Workers: -2}, "Config.Workers: -2"},
		{engine.Config{PrefetchFactor: -3}, "Config.PrefetchFactor: -3"},
		{engine.Config{Timeout: -time.Second}, "Config.Timeout: -1s"},
		{engine.Config{MaxPinnedBytes: -1}, "Config.MaxPinnedBytes: -1"},
		{engine.Config{Shuffle: true, Sampler: engine.Sequential{N: 10}}, "Config.Sampler"},
		{engine.Config{BatchSize: 4, BatchSampler: engine.Batched{Sampler: engine.Sequential{N: 10}, Size: 2}}, "Config.BatchSampler"},
		{engine.Config{MaxPinnedBytes: 10, BatchSize: 4}, "Config.MaxPinnedBytes: 10, less than one batch buffer of 4 samples (1280 bytes)"},
		{engine.Config{MaxPinnedBytes: 1000, BatchSampler: bucketed{}}, "Config.MaxPinnedBytes: 1000, less than one batch buffer of 7 samples"}, // at the first epoch
	} {
		t.Run(tc.field, func(t *testing.T) {
			l, err := engine.New(ds, tc.cfg)
			if err == nil {
				for _, err = range l.Epoch(context.Background(), 0) {
					break
				}
				require.NoError(t, l.Close())
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestBadDatasetsAreErrors(t *testing.T) {
	t.Parallel()
	_, err := engine.New(nil, engine.Config{})
	assert.ErrorContains(t, err, "nil Dataset")

	_, err = engine.New(engine.DatasetFunc(3, collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{3, -2}}}, fillIndex), engine.Config{})
	assert.ErrorContains(t, err, `Dataset.Schema`)
	assert.ErrorContains(t, err, `field "x": dimension 1 is -2, want >= 0`)

	_, err = engine.New(engine.DatasetFunc(-1, indexSchema, fillIndex), engine.Config{})
	assert.ErrorContains(t, err, "Dataset.Len is -1")
}

func TestDefaults(t *testing.T) {
	l := newLoader(t, engine.DatasetFunc(3, indexSchema, fillIndex), engine.Config{Workers: engine.AutoWorkers})
	cfg := l.Config()
	assert.Equal(t, 1, cfg.BatchSize)
	assert.Equal(t, runtime.GOMAXPROCS(0), cfg.Workers)
	assert.Equal(t, engine.DefaultPrefetchFactor, cfg.PrefetchFactor)
}

func TestCloseAtAnyPoint(t *testing.T) {
	t.Parallel()
	slow := func(ctx context.Context, s *engine.Slot) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
		return fillIndex(ctx, s)
	}
	for _, workers := range []int{0, 2} {
		for _, restart := range []bool{false, true} {
			cfg := engine.Config{BatchSize: 4, Workers: workers, RestartWorkers: restart}
			name := fmt.Sprintf("workers=%d/restart=%v", workers, restart)

			t.Run(name+"/before any epoch", func(t *testing.T) {
				l, err := engine.New(engine.DatasetFunc(100, indexSchema, slow), cfg)
				require.NoError(t, err)
				require.NoError(t, l.Close())
				require.NoError(t, l.Close(), "twice")
				for _, err := range l.Epoch(context.Background(), 0) {
					assert.ErrorIs(t, err, engine.ErrClosed)
				}
			})

			t.Run(name+"/inside the loop body", func(t *testing.T) {
				l, err := engine.New(engine.DatasetFunc(100, indexSchema, slow), cfg)
				require.NoError(t, err)
				n := 0
				var last error
				for b, err := range l.Epoch(context.Background(), 0) {
					if err != nil {
						last = err
						break
					}
					if n++; n == 2 {
						require.NoError(t, l.Close())
						assert.Equal(t, 4, b.Len(), "the batch in hand stays valid")
					}
				}
				assert.ErrorIs(t, last, engine.ErrClosed)
				assert.Equal(t, 2, n)
				assert.Zero(t, l.Stats().Pool.Allocated, "pinned memory left after Close")
			})

			t.Run(name+"/from other goroutines", func(t *testing.T) {
				l, err := engine.New(engine.DatasetFunc(100000, indexSchema, slow), cfg)
				require.NoError(t, err)
				var wg sync.WaitGroup
				started := make(chan struct{})
				wg.Add(2)
				for range 2 {
					go func() {
						defer wg.Done()
						<-started
						assert.NoError(t, l.Close())
					}()
				}
				var last error
				for _, err := range l.Epoch(context.Background(), 0) {
					if err != nil {
						last = err
						break
					}
					select {
					case <-started:
					default:
						close(started)
					}
				}
				wg.Wait()
				assert.ErrorIs(t, last, engine.ErrClosed)
				assert.Zero(t, l.Stats().Pool.Allocated, "pinned memory left after Close")
			})
		}
	}
}

func TestRetainedBatchIsNeverOverwritten(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 3} {
		l := newLoader(t, engine.DatasetFunc(64, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: workers, Shuffle: true})
		var kept []*engine.Batch
		var want [][]byte
		for b, err := range l.Epoch(context.Background(), 0) {
			require.NoError(t, err)
			if b.IndexInEpoch()%2 == 0 {
				b.Retain()
				kept = append(kept, b)
				want = append(want, append([]byte(nil), b.Tensor("x").Bytes()...))
			}
		}
		// Two more epochs reuse every buffer that came back.
		collect(t, l, 1)
		collect(t, l, 2)
		for i, b := range kept {
			assert.Equal(t, want[i], b.Tensor("x").Bytes(), "retained batch %d changed", b.IndexInEpoch())
			b.Release()
		}
		assert.Zero(t, l.Stats().Pool.InUse)
	}
}

// A batch keeps its indices while it is retained, whatever batches come
// after it: the lazy orders' indices are cut from shared slabs, each
// batch its own part.
func TestRetainedBatchKeepsItsIndices(t *testing.T) {
	const n, size = 3000, 7 // more batches than one slab holds
	for _, workers := range []int{0, 3} {
		for _, shuffle := range []bool{false, true} {
			l := newLoader(t, engine.DatasetFunc(n, indexSchema, fillIndex), engine.Config{BatchSize: size, Workers: workers, Shuffle: shuffle, Seed: 7})
			var s engine.Sampler = engine.Sequential{N: n}
			if shuffle {
				s = engine.Shuffled{N: n, Seed: 7}
			}
			want := engine.Batched{Sampler: s, Size: size}.Batches(0)
			var kept []*engine.Batch
			for b, err := range l.Epoch(context.Background(), 0) {
				require.NoError(t, err)
				b.Retain()
				kept = append(kept, b)
			}
			collect(t, l, 1)
			require.Len(t, kept, len(want))
			for k, b := range kept {
				got := b.Indices()
				assert.Equal(t, want[k], got, "workers %d, shuffle %v: batch %d", workers, shuffle, k)
				got[0] = -1 // the caller's copy
				assert.Equal(t, want[k], b.Indices())
				b.Release()
			}
		}
	}
}

func TestBatchMisuseNamesTheBatch(t *testing.T) {
	t.Parallel()
	l := newLoader(t, engine.DatasetFunc(8, indexSchema, fillIndex), engine.Config{BatchSize: 4})
	var b *engine.Batch
	for bb, err := range l.Epoch(context.Background(), 5) {
		require.NoError(t, err)
		b = bb
		assert.PanicsWithValue(t, `engine: Batch.Tensor("y"): no such field; the schema has ["index" "x"]`, func() { b.Tensor("y") })
		b.Retain()
		b.Release() // one Retain, one Release: still the loop's
		assert.Equal(t, 4, b.Tensor("x").Dim(0))
		break
	}
	after := " on batch 0 of epoch 5 after its last Release: its buffers may hold another batch"
	assert.PanicsWithValue(t, `engine: Tensor("x")`+after, func() { b.Tensor("x") })
	assert.PanicsWithValue(t, "engine: Release on batch 0 of epoch 5 without a matching Retain", func() { b.Release() })
	assert.PanicsWithValue(t, "engine: Retain"+after, func() { b.Retain() })
}

// A Batch is never handed out again: one released early still panics
// when used after hundreds of later batches (more than a slab of
// Batches), and batches retained across them keep their own indices.
func TestReleasedBatchStaysReleased(t *testing.T) {
	t.Parallel()
	for _, w := range []int{0, 2} {
		l := newLoader(t, engine.DatasetFunc(1000, indexSchema, fillIndex), engine.Config{BatchSize: 2, Workers: w})
		var first *engine.Batch
		var kept []*engine.Batch
		for b, err := range l.Epoch(context.Background(), 0) {
			require.NoError(t, err)
			if first == nil {
				first = b
			}
			if b.IndexInEpoch()%50 == 1 {
				b.Retain()
				kept = append(kept, b)
			}
		}
		assert.PanicsWithValue(t, `engine: Tensor("x") on batch 0 of epoch 0 after its last Release: its buffers may hold another batch`,
			func() { first.Tensor("x") }, "workers %d", w)
		require.Len(t, kept, 10)
		for i, b := range kept {
			k := 50*i + 1
			assert.Equal(t, k, b.IndexInEpoch())
			assert.Equal(t, []int{2 * k, 2*k + 1}, b.Indices())
			assert.Equal(t, []int64{int64(2 * k), int64(2*k + 1)}, collate.As[int64](b.Tensor("index")), "workers %d batch %d", w, k)
			b.Release()
		}
	}
}

func TestOneEpochAtATime(t *testing.T) {
	t.Parallel()
	l := newLoader(t, engine.DatasetFunc(8, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: 1})
	for _, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		for _, err := range l.Epoch(context.Background(), 1) {
			assert.ErrorIs(t, err, engine.ErrBusy)
		}
	}
	for _, err := range l.Epoch(context.Background(), -1) {
		assert.ErrorContains(t, err, "epoch -1")
	}
}

func TestSamplesAreZeroedUnlessSkipZero(t *testing.T) {
	t.Parallel()
	// Fill writes only on epoch 0; later epochs reuse the buffers.
	ds := engine.DatasetFunc(8, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		if s.Epoch() == 0 {
			return fillIndex(ctx, s)
		}
		return nil
	})
	for _, skip := range []bool{false, true} {
		l := newLoader(t, ds, engine.Config{BatchSize: 8, SkipZeroing: skip})
		collect(t, l, 0)
		for b, err := range l.Epoch(context.Background(), 1) {
			require.NoError(t, err)
			x := collate.As[float32](b.Tensor("x"))
			nonzero := 0
			for _, v := range x {
				if v != 0 {
					nonzero++
				}
			}
			if skip {
				assert.Positive(t, nonzero, "SkipZeroing: the last batch's bytes stay")
			} else {
				assert.Zero(t, nonzero, "a sample Fill did not write must read as zeros")
			}
		}
	}
}

// bucketed batches by hand, with sizes that vary and exceed no declared size.
type bucketed struct{}

func (bucketed) Batches(epoch int) [][]int {
	return [][]int{{9, 8}, {0, 1, 2, 3, 4, 5, 6}, {7}}
}

func TestCustomBatchSampler(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 2} {
		l := newLoader(t, engine.DatasetFunc(10, indexSchema, fillIndex), engine.Config{BatchSampler: bucketed{}, Workers: workers})
		got, mem := collect(t, l, 0)
		assert.Equal(t, bucketed{}.Batches(0), got)
		assert.Equal(t, got, mem)
	}
	l := newLoader(t, engine.DatasetFunc(5, indexSchema, fillIndex), engine.Config{BatchSampler: bucketed{}})
	for _, err := range l.Epoch(context.Background(), 0) {
		assert.ErrorContains(t, err, "sampler gave index 9 at batch 0, position 0; the dataset has 5 samples")
	}
}

func TestRestartWorkersEndWithTheEpoch(t *testing.T) {
	settled := func(want int) bool {
		return assert.Eventually(t, func() bool { return workerGoroutines() == want }, 5*time.Second, time.Millisecond,
			"want %d worker goroutines, have %d", want, workerGoroutines())
	}
	for _, restart := range []bool{true, false} {
		settled(0) // the workers of earlier tests have unwound
		l, err := engine.New(engine.DatasetFunc(200, indexSchema, fillIndex), engine.Config{BatchSize: 2, Workers: 5, RestartWorkers: restart})
		require.NoError(t, err)
		for b, err := range l.Epoch(context.Background(), 0) {
			require.NoError(t, err)
			if b.IndexInEpoch() == 0 { // the window holds every worker in the epoch
				settled(5)
			}
		}
		if restart {
			settled(0) // per-epoch workers end with their epoch
		} else {
			time.Sleep(10 * time.Millisecond)
			assert.Equal(t, 5, workerGoroutines(), "persistent workers wait for the next epoch")
		}
		require.NoError(t, l.Close())
		settled(0)
	}
}

func TestSampleErrorUnwrapsAndFormats(t *testing.T) {
	t.Parallel()
	e := &engine.SampleError{Index: 3, Epoch: 1, Worker: -1, Err: context.DeadlineExceeded}
	assert.Equal(t, "engine: sample 3 (epoch 1, consumer goroutine): context deadline exceeded", e.Error())
	assert.True(t, errors.Is(e, context.DeadlineExceeded))
}

// A sample whose data may be bad says what to do about it: skip or retry
// (Config.OnError), find every bad sample first (tensorbatch shards
// verify); a panic, a timeout or a cancellation, which are not the data's,
// does not.
func TestSampleErrorSaysWhatToDo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fill func(context.Context, *engine.Slot) error
		hint bool
	}{
		{func(context.Context, *engine.Slot) error {
			return errors.New("train/0001.jpg: truncated or corrupt image")
		}, true},
		{func(context.Context, *engine.Slot) error { panic("index out of range") }, false},
		{func(context.Context, *engine.Slot) error { return context.DeadlineExceeded }, false},
	} {
		l := newLoader(t, engine.DatasetFunc(4, indexSchema, tc.fill), engine.Config{BatchSize: 2})
		var got error
		for _, err := range l.Epoch(context.Background(), 0) {
			got = err
		}
		require.Error(t, got)
		for _, want := range []string{"Config.OnError", "tensorbatch shards verify"} {
			assert.Equal(t, tc.hint, strings.Contains(got.Error(), want), "%v", got)
		}
	}
}

// workerGoroutines counts the goroutines running a loader worker.
func workerGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "engine.(*worker).loop(") + strings.Count(string(buf), "engine.(*run).workOnce(")
}

// A Tensor kept past its loop body and read after the batch was
// released is reported, naming the batch, in the checked mode (on under
// go test), instead of reading the batch its buffer holds by then (a new
// user's batch [0 … 9] read [980 … 989]). Retained, it reads its own
// samples; with the check off (TENSORBATCH_CHECK_RELEASED=0) the read
// goes unchecked, zero copy as always.
func TestStaleTensorReadIsReported(t *testing.T) {
	t.Parallel()
	for _, w := range []int{0, 2} {
		l := newLoader(t, engine.DatasetFunc(1000, indexSchema, fillIndex), engine.Config{BatchSize: 10, Workers: w})
		var stale, kept collate.Tensor
		var retained *engine.Batch
		for b, err := range l.Epoch(context.Background(), 0) {
			require.NoError(t, err)
			switch b.IndexInEpoch() {
			case 0:
				stale = b.Tensor("index")
			case 1:
				b.Retain()
				retained, kept = b, b.Tensor("index")
			}
		}
		want := "collate: a tensor (field \"index\") of batch 0 of epoch 0 read after it was released: its memory may hold other data now; call Retain in the loop body to keep a batch past it, and Release when done"
		assert.PanicsWithValue(t, want, func() { collate.As[int64](stale) }, "workers %d", w)
		assert.PanicsWithValue(t, want, func() { stale.Bytes() }, "workers %d", w)
		dst, err := collate.MakeTensor(collate.Int64, []int{10}, make([]byte, 80))
		require.NoError(t, err)
		assert.PanicsWithValue(t, want, func() { collate.Gather(dst, stale, []int64{0}) }, "workers %d", w)
		assert.Equal(t, []int64{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, collate.As[int64](kept), "workers %d", w)
		retained.Release()
		assert.Panics(t, func() { collate.As[int64](kept) }, "workers %d", w)
	}
}

// CheckReleased: $TENSORBATCH_CHECK_RELEASED turns the check off or on,
// Config.CheckReleased on whatever the variable says, and another value
// of the variable is an error naming it.
func TestCheckReleasedSwitch(t *testing.T) {
	staleRead := func(cfg engine.Config) (panicked bool) {
		cfg.BatchSize = 10
		l := newLoader(t, engine.DatasetFunc(100, indexSchema, fillIndex), cfg)
		var stale collate.Tensor
		for b, err := range l.Epoch(context.Background(), 0) {
			require.NoError(t, err)
			if b.IndexInEpoch() == 0 {
				stale = b.Tensor("index")
			}
		}
		defer func() { panicked = recover() != nil }()
		collate.As[int64](stale)
		return false
	}
	assert.True(t, staleRead(engine.Config{}), "under go test")
	t.Setenv(engine.EnvCheckReleased, "0")
	assert.False(t, staleRead(engine.Config{}), "%s=0", engine.EnvCheckReleased)
	assert.True(t, staleRead(engine.Config{CheckReleased: true}), "Config.CheckReleased")
	t.Setenv(engine.EnvCheckReleased, "1")
	assert.True(t, staleRead(engine.Config{}), "%s=1", engine.EnvCheckReleased)
	t.Setenv(engine.EnvCheckReleased, "yes")
	_, err := engine.New(engine.DatasetFunc(100, indexSchema, fillIndex), engine.Config{})
	assert.ErrorContains(t, err, engine.EnvCheckReleased)
}
