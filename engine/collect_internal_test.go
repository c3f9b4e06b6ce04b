package engine

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
)

func TestCollectedLoaderFreesItsPinnedMemory(t *testing.T) {
	schema := collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{64}}}
	ds := DatasetFunc(64, schema, func(context.Context, *Slot) error { return nil })
	var inner []*loader
	var kept *Batch // retained past its loader's collection
	func() {
		for i := range 6 {
			l, err := New(ds, Config{BatchSize: 8, Workers: i % 3})
			require.NoError(t, err)
			inner = append(inner, l.l)
			for b, err := range l.Epoch(context.Background(), 0) {
				require.NoError(t, err)
				if i == 5 && b.IndexInEpoch() == 0 {
					b.Retain()
					kept = b
				}
				if b.IndexInEpoch() == i {
					break
				}
			}
			assert.Positive(t, l.Stats().Pool.Allocated)
		}
	}()
	closed := func() bool {
		for _, in := range inner {
			in.mu.Lock()
			c := in.closed
			in.mu.Unlock()
			if !c {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !closed() && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	require.True(t, closed(), "every dropped loader is closed")
	for i, in := range inner[:5] {
		st := in.pool.Stats()
		assert.Zero(t, st.InUse, "loader %d", i)
		assert.Zero(t, st.Allocated, "loader %d", i)
	}
	last := inner[5]
	assert.Equal(t, int64(kept.buf.Cap()), last.pool.Stats().InUse, "the retained batch stays valid")
	kept.Release()
	assert.Zero(t, last.pool.Stats().InUse)
	assert.Zero(t, last.pool.Stats().Allocated)
}
