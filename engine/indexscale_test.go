package engine_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// indexScaleSizes are the epoch sizes of issue 25's figures.
var indexScaleSizes = []int{1e6, 1e8, 1e10}

// labelSchema is one int64 per sample: the loader's own cost dominates.
var labelSchema = collate.Schema{{Name: "label", DType: collate.Int64}}

func fillLabel(_ context.Context, s *engine.Slot) error {
	collate.As[int64](s.Tensor("label"))[0] = int64(s.Index())
	return nil
}

// firstBatch starts a loader over n samples, shuffled, and takes the first
// batch of epoch 1; it returns the batch's indices.
func firstBatch(tb testing.TB, n, workers int) []int {
	l, err := engine.New(engine.DatasetFunc(n, labelSchema, fillLabel), engine.Config{BatchSize: 256, Shuffle: true, Seed: 1, Workers: workers, Backend: "cpu"})
	require.NoError(tb, err)
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 1) {
		require.NoError(tb, err)
		return b.Indices()
	}
	return nil
}

// The first batch of a shuffled epoch takes the same small memory at any
// N: the order is never materialized (it took 8 bytes a sample).
func TestShuffledFirstBatchTakesMemoryIndependentOfN(t *testing.T) {
	for _, n := range append(indexScaleSizes, math.MaxInt>>1) {
		for _, workers := range []int{0, 2} {
			firstBatch(t, n, workers) // warm the pool's and runtime's one-time costs
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			idx := firstBatch(t, n, workers)
			runtime.ReadMemStats(&after)
			require.Len(t, idx, 256)
			for _, i := range idx {
				require.True(t, i >= 0 && i < n)
			}
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(256<<10), "N %d, workers %d: bytes allocated to the first batch", n, workers)
		}
	}
}

// BenchmarkShuffledFirstBatch is the time and memory from engine.New to
// the first batch of a shuffled epoch (issue 25: 4.35 s and 800 MB at
// 10⁸ when the order was materialized).
func BenchmarkShuffledFirstBatch(b *testing.B) {
	for _, n := range indexScaleSizes {
		b.Run(fmt.Sprintf("N=%.0e", float64(n)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				firstBatch(b, n, 2)
			}
		})
	}
}
