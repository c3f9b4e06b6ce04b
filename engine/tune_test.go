package engine_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

func TestAutotuneGrowsOnlyWhileTheLoopWaits(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	auto := engine.Config{BatchSize: 4, Workers: engine.AutoWorkers, PrefetchFactor: engine.AutoPrefetch}

	// Fill is the limit: the tuner adds workers.
	slow := engine.DatasetFunc(400, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		time.Sleep(time.Millisecond)
		return fillIndex(ctx, s)
	})
	l := newLoader(t, slow, auto)
	assert.Equal(t, 4, l.Config().Workers, "one goroutine per CPU")
	before := l.Stats()
	assert.Equal(t, 1, before.ActiveWorkers, "it starts with one")
	assert.Equal(t, 1, before.Window)
	got, _ := runSteps(t, l, 0, 2, -1)
	st := l.Stats()
	assert.Greater(t, st.ActiveWorkers, 1, "the loop waited, so workers were added")
	assert.LessOrEqual(t, st.ActiveWorkers, 4)
	assert.LessOrEqual(t, st.Window, 8, "never more than the default window")
	assert.LessOrEqual(t, st.Pool.PeakBufs, 8+2)
	want, _ := runSteps(t, newLoader(t, slow, engine.Config{BatchSize: 4, Workers: 2}), 0, 2, -1)
	assert.Equal(t, want, got, "tuning changes no batch")

	// The loop is the limit: one worker and one batch in flight keep up.
	l = newLoader(t, engine.DatasetFunc(200, indexSchema, fillIndex), auto)
	for e := range 2 {
		for _, err := range l.Epoch(context.Background(), e) {
			require.NoError(t, err)
			time.Sleep(2 * time.Millisecond)
		}
	}
	st = l.Stats()
	assert.Equal(t, 1, st.ActiveWorkers)
	assert.LessOrEqual(t, st.Window, 2)
	assert.LessOrEqual(t, st.Pool.PeakBufs, 4)
}

func TestAutotuneDoesNotGrowFromEpochStarts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	// Each epoch's first sample is slow, the rest fast, and the loop's
	// step keeps up with one worker: only the epochs' starts wait, and no
	// setting removes that wait, so the setting must stay the smallest.
	ds := engine.DatasetFunc(64, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		if s.Index() == 0 {
			time.Sleep(40 * time.Millisecond)
		}
		return fillIndex(ctx, s)
	})
	l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: engine.AutoWorkers, PrefetchFactor: engine.AutoPrefetch})
	for e := range 6 {
		for _, err := range l.Epoch(context.Background(), e) {
			require.NoError(t, err)
			time.Sleep(3 * time.Millisecond)
		}
	}
	st := l.Stats()
	assert.Equal(t, 1, st.ActiveWorkers)
	assert.Equal(t, 1, st.Window)
}
