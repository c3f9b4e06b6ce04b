package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// failing fills indexSchema, failing the indices in bad.
func failing(bad ...int) engine.Dataset {
	return engine.DatasetFunc(40, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		for _, b := range bad {
			if s.Index() == b {
				return fmt.Errorf("bad sample %d", b)
			}
		}
		return fillIndex(ctx, s)
	})
}

func TestSkipPolicyDeliversShortBatchesDeterministically(t *testing.T) {
	t.Parallel()
	var want []step
	for _, workers := range []int{0, 1, 3} {
		l := newLoader(t, failing(4, 5, 6, 7, 13), engine.Config{BatchSize: 4, Workers: workers, OnError: engine.ErrorPolicy{Skip: 5}})
		got, _ := runSteps(t, l, 0, 1, -1)
		require.Len(t, got, 9, "batch 1 (4..7) failed whole and is not delivered")
		assert.Equal(t, []int{0, 1, 2, 3}, got[0].Indices)
		assert.Equal(t, 2, got[1].Number)
		assert.Equal(t, []int{12, 14, 15}, got[2].Indices, "13 skipped, the rest moved down")
		if want == nil {
			want = got
		}
		assert.Equal(t, want, got, "the same batches for any Workers")
		st := l.Stats()
		assert.Equal(t, int64(5), st.Skipped)
		require.Len(t, st.SkippedSamples, 5)
		assert.Equal(t, engine.SkippedSample{Epoch: 0, Index: 13, Err: "bad sample 13"}, st.SkippedSamples[4])
	}
	// The short batch holds exactly its samples: filled as the full one is.
	l := newLoader(t, failing(13), engine.Config{BatchSize: 4, OnError: engine.ErrorPolicy{Skip: 1}})
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		for i, idx := range b.Indices() {
			assert.Equal(t, int64(idx), collate.As[int64](b.Tensor("index"))[i])
			x := collate.As[float32](b.Tensor("x"))[i*60 : (i+1)*60]
			want := make([]float32, 60)
			s := enginetest.NewSlot(0, 0, idx, nil, nil, 0)
			for j := range want {
				want[j] = float32(s.Rand().NormFloat64())
			}
			assert.Equal(t, want, x, "sample %d", idx)
		}
	}
}

func TestSkipBudgetExhaustedEndsTheEpochAtTheSameSample(t *testing.T) {
	t.Parallel()
	for _, policy := range []engine.ErrorPolicy{{Skip: 2}, {SkipFraction: 0.05}} { // 5% of 40 is 2
		for _, workers := range []int{0, 2, 4} {
			l := newLoader(t, failing(3, 9, 17, 30), engine.Config{BatchSize: 4, Workers: workers, OnError: policy})
			numbers, err := untilError(l, 0)
			assert.Equal(t, []int{0, 1, 2, 3}, numbers)
			var se *engine.SampleError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, 17, se.Index, "the third failure exhausts a budget of two")
			assert.ErrorContains(t, err, "more than 2 samples failed (Config.OnError)")
		}
	}
}

func TestTransientErrorsAreRetried(t *testing.T) {
	t.Parallel()
	var tries sync.Map
	flaky := engine.DatasetFunc(16, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		v, _ := tries.LoadOrStore(s.Index(), new(atomic.Int32))
		n := v.(*atomic.Int32).Add(1)
		s.Rand().Float64() // a draw the failed attempt makes: the retry must start over
		switch {
		case s.Index() == 5 && n <= 2:
			return engine.Transient(errors.New("503"))
		case s.Index() == 9:
			panic("never retried")
		case s.Index() == 11:
			return errors.New("not transient")
		}
		return fillIndex(ctx, s)
	})
	l := newLoader(t, flaky, engine.Config{BatchSize: 4, Workers: 2, OnError: engine.ErrorPolicy{Retries: 2, Backoff: time.Millisecond, Skip: 2}})
	got, _ := runSteps(t, l, 0, 1, -1)
	v, _ := tries.Load(5)
	assert.Equal(t, int32(3), v.(*atomic.Int32).Load())
	for _, i := range []int{9, 11} {
		v, _ := tries.Load(i)
		assert.Equal(t, int32(1), v.(*atomic.Int32).Load(), "index %d tried again", i)
	}
	assert.Equal(t, int64(2), l.Stats().FillRetries)
	assert.Equal(t, []int{4, 5, 6, 7}, got[1].Indices)
	ref, _ := runSteps(t, newLoader(t, engine.DatasetFunc(16, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		s.Rand().Float64()
		return fillIndex(ctx, s)
	}), engine.Config{BatchSize: 4}), 0, 1, -1)
	assert.Equal(t, ref[1], got[1], "a retried sample is the same as one that never failed")
	assert.Equal(t, []int{8, 10}, got[2].Indices)

	// Retries alone: a transient error that persists fails the epoch.
	l = newLoader(t, engine.DatasetFunc(8, indexSchema, func(context.Context, *engine.Slot) error {
		return engine.Transient(errors.New("still down"))
	}), engine.Config{BatchSize: 4, OnError: engine.ErrorPolicy{Retries: 1, Backoff: time.Millisecond}})
	_, err := untilError(l, 0)
	assert.ErrorIs(t, err, engine.ErrTransient)
	assert.ErrorContains(t, err, "sample 0")
}

func TestErrorPolicyErrorsNameTheField(t *testing.T) {
	t.Parallel()
	ds := engine.DatasetFunc(8, indexSchema, fillIndex)
	for _, tc := range []struct {
		p    engine.ErrorPolicy
		want string
	}{
		{engine.ErrorPolicy{Skip: -1}, "engine: Config.OnError.Skip: -1"},
		{engine.ErrorPolicy{SkipFraction: 1.5}, "engine: Config.OnError.SkipFraction: 1.5"},
		{engine.ErrorPolicy{Retries: -2}, "engine: Config.OnError.Retries: -2"},
		{engine.ErrorPolicy{Backoff: -time.Second}, "engine: Config.OnError.Backoff: -1s"},
	} {
		_, err := engine.New(ds, engine.Config{OnError: tc.p})
		assert.ErrorContains(t, err, tc.want)
	}
	for _, tc := range []struct {
		cfg  engine.Config
		want string
	}{
		{engine.Config{Workers: 1 << 20}, "engine: Config.Workers: 1048576, more than"},
		{engine.Config{Workers: 4, PrefetchFactor: 1 << 19}, "engine: Config.PrefetchFactor: 524288 × 4 workers"},
		{engine.Config{PrefetchFactor: 1 << 40}, "engine: Config.PrefetchFactor: 1099511627776, more than"},
		{engine.Config{LogEvery: -1}, "engine: Config.LogEvery: -1"},
		{engine.Config{Sampler: engine.WeightedRandom{Weights: []float64{1, -1}}}, "engine: Config.Sampler: "},
	} {
		_, err := engine.New(ds, tc.cfg)
		assert.ErrorContains(t, err, tc.want)
	}
}

func TestOutOfOrderDeliversCompleteBatchesFirst(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ds := engine.DatasetFunc(40, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		if s.Index() == 1 && s.Epoch() == 0 {
			<-release
		}
		return fillIndex(ctx, s)
	})
	l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 3, OutOfOrder: true})
	var numbers []int
	var got []step
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		numbers = append(numbers, b.IndexInEpoch())
		got = append(got, stepOf(b))
		if len(numbers) == 3 {
			close(release)
		}
	}
	assert.NotEqual(t, 0, numbers[0], "batch 0 waits for its slow sample; others come first")
	assert.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, numbers)
	want, _ := runSteps(t, newLoader(t, engine.DatasetFunc(40, indexSchema, fillIndex), engine.Config{BatchSize: 4}), 0, 1, -1)
	sortSteps(got)
	assert.Equal(t, want, got, "each batch is the one in-order delivery gives")
}

func TestWorkerInitRunsOncePerWorkerGoroutine(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		var calls sync.Map
		var workersSeen sync.Map
		init := engine.WorkerInitFunc(func(ctx context.Context, w int) error {
			v, _ := calls.LoadOrStore(w, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
			return nil
		})
		ds := engine.DatasetFunc(32, indexSchema, func(ctx context.Context, s *engine.Slot) error {
			workersSeen.Store(s.Worker(), true)
			return fillIndex(ctx, s)
		})
		l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 3, RestartWorkers: restart, WorkerInit: init})
		runSteps(t, l, 0, 3, -1)
		want := int32(1)
		if restart {
			want = 3
		}
		for w := range 3 {
			v, ok := calls.Load(w)
			require.True(t, ok, "worker %d not initialised", w)
			assert.Equal(t, want, v.(*atomic.Int32).Load(), "worker %d, restart %v", w, restart)
		}
		workersSeen.Range(func(k, _ any) bool {
			assert.True(t, k.(int) >= 0 && k.(int) < 3, "Slot.Worker %v", k)
			return true
		})
	}
	// Workers 0: no init, Slot.Worker is -1.
	called := false
	l := newLoader(t, engine.DatasetFunc(4, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		assert.Equal(t, -1, s.Worker())
		return fillIndex(ctx, s)
	}), engine.Config{BatchSize: 4, WorkerInit: engine.WorkerInitFunc(func(context.Context, int) error { called = true; return nil })})
	runSteps(t, l, 0, 1, -1)
	assert.False(t, called)

	// An error names the worker and ends the epoch; the next epoch tries
	// again. While the init fails, Fills wait for the run's end, so that
	// worker 0 cannot deliver every batch of the epoch before worker 1's
	// init fails (workers claim batches as they come free).
	var fail atomic.Bool
	fail.Store(true)
	l = newLoader(t, engine.DatasetFunc(16, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		if fail.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return fillIndex(ctx, s)
	}), engine.Config{BatchSize: 4, Workers: 2, WorkerInit: engine.WorkerInitFunc(func(_ context.Context, w int) error {
		if fail.Load() && w == 1 {
			return errors.New("no GPU decoder")
		}
		return nil
	})})
	_, err := untilError(l, 0)
	assert.ErrorContains(t, err, "engine: Config.WorkerInit of worker 1: no GPU decoder")
	fail.Store(false)
	got, _ := runSteps(t, l, 1, 2, -1)
	assert.Len(t, got, 4)
}

func TestLenIsBatchesPerEpochOnThisRank(t *testing.T) {
	clearLauncherEnv(t)
	ds := engine.DatasetFunc(10, indexSchema, fillIndex)
	for _, cfg := range []engine.Config{
		{BatchSize: 3},
		{BatchSize: 3, DropLast: true},
		{BatchSize: 2, WorldSize: 3, Rank: 2},
		{BatchSize: 2, WorldSize: 3, Rank: 1, DropUneven: true},
		{BatchSize: 2, WorldSize: 4, DropLast: true},
		{BatchSize: 4, Sampler: sliceSampler{1, 2, 3, 4, 5}},
		{BatchSampler: bucketed{}},
		{BatchSampler: bucketed{}, WorldSize: 2},
	} {
		l := newLoader(t, ds, cfg)
		got, _ := collect(t, l, 0)
		assert.Equal(t, len(got), l.Len(), "%+v", cfg)
	}
}

func TestDropUnevenIsSeparateFromDropLast(t *testing.T) {
	clearLauncherEnv(t)
	ds := engine.DatasetFunc(10, indexSchema, fillIndex)
	for _, tc := range []struct {
		cfg  engine.Config
		want [][]int
	}{
		{engine.Config{BatchSize: 2, WorldSize: 3}, [][]int{{0, 3}, {6, 9}}},                // padded to 12
		{engine.Config{BatchSize: 2, WorldSize: 3, DropUneven: true}, [][]int{{0, 3}, {6}}}, // cut to 9
		{engine.Config{BatchSize: 3, WorldSize: 3, DropLast: true}, [][]int{{0, 3, 6}}},     // padded, then the short batch dropped
		{engine.Config{BatchSize: 3, WorldSize: 3, DropLast: true, DropUneven: true}, [][]int{{0, 3, 6}}},
	} {
		got, _ := collect(t, newLoader(t, ds, tc.cfg), 0)
		assert.Equal(t, tc.want, got, "%+v", tc.cfg)
	}
}

func TestStatsSayWhetherTheLoopWaitsForData(t *testing.T) {
	slowFill := engine.DatasetFunc(24, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		time.Sleep(2 * time.Millisecond)
		return fillIndex(ctx, s)
	})
	l := newLoader(t, slowFill, engine.Config{BatchSize: 4, Workers: 1})
	runSteps(t, l, 0, 1, -1)
	dataBound := l.Stats()
	assert.Greater(t, dataBound.DataBound, 0.5, "the loop waited for a slow Fill")
	assert.InDelta(t, 24, dataBound.Fill.Count, 8, "one Fill in 8 is timed, standing for 8")
	assert.Equal(t, int64(6), dataBound.Pad.Count)
	assert.Equal(t, int64(6), dataBound.Wait.Count)
	assert.GreaterOrEqual(t, dataBound.Fill.Mean(), 2*time.Millisecond)
	assert.GreaterOrEqual(t, dataBound.Fill.Quantile(0.5), 2*time.Millisecond)
	assert.Equal(t, dataBound.Wait.Sum, dataBound.ConsumerWait)

	l = newLoader(t, engine.DatasetFunc(24, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: 2})
	for _, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond) // the training step is the limit
	}
	assert.Less(t, l.Stats().DataBound, 0.5, "the loop's own step dominated")

	// expvar publishes the same counters as JSON, each name with its unit.
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(l.Expvar().String()), &out))
	assert.Equal(t, float64(6), out["batches"])
	assert.InDelta(t, l.Stats().Wait.Sum.Seconds(), out["wait"].(map[string]any)["sum_seconds"], 1e-9)
	for name, v := range out {
		if _, ok := v.(float64); ok && !slices.Contains(expvarCounts, name) {
			assert.Regexp(t, `_(seconds|bytes|fraction|batches)$`, name, "a number that is not a count names its unit")
		}
	}
}

// expvarCounts are the expvar names that count things, and so carry no unit.
var expvarCounts = []string{"batches", "samples", "active_workers", "fills_retried", "samples_skipped", "abandoned_workers"}

func TestConfigLogsItsEffectiveSettings(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	l := newLoader(t, engine.DatasetFunc(4, indexSchema, fillIndex), engine.Config{Workers: 3, Seed: 7})
	logger.Info("loader", "config", l.Config())
	for _, want := range []string{"config.batch_size=1", "config.workers=3", "config.prefetch_factor=2", "config.window=6", "config.seed=7"} {
		assert.Contains(t, buf.String(), want)
	}
}

func TestProgressLinesEveryNBatches(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	l := newLoader(t, engine.DatasetFunc(40, indexSchema, fillIndex), engine.Config{BatchSize: 4, LogEvery: 5})
	runSteps(t, l, 0, 1, -1)
	assert.Equal(t, 2, bytes.Count(buf.Bytes(), []byte("tensorbatch: progress")), buf.String())
	assert.Contains(t, buf.String(), "data_bound=")
	// A rate, and the time left in the epoch: 5 batches after the 5th.
	assert.Regexp(t, `batch=4 of=10 samples_per_s=[0-9.]+ epoch_left=[0-9.a-zµ]+s `, buf.String())
	assert.Regexp(t, `batch=9 of=10 samples_per_s=[0-9.]+ epoch_left=0s `, buf.String())
}
