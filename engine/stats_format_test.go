package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

func TestHistogramString(t *testing.T) {
	assert.Equal(t, "n=0", engine.Histogram{}.String())
	var h engine.Histogram
	h.Count, h.Sum = 10, 10*1500*time.Microsecond
	h.Buckets[11] = 9 // [1024, 2048) µs
	h.Buckets[13] = 1 // [4096, 8192) µs
	assert.Equal(t, "n=10 mean=1.5ms p50≤2.048ms p90≤8.192ms p99≤8.192ms", h.String())
}

func TestStatsReadWell(t *testing.T) {
	l := newLoader(t, engine.DatasetFunc(40, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: 2})
	for _, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
	}
	st := l.Stats()
	s := st.String()
	for _, want := range []string{"10 batches, 40 samples in ", "batches/s", "samples/s", "the loop waited for data ", "% of the time", "fill p50≤", "wait p50≤", "pinned ", " MiB in "} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "skipped", "nothing went wrong")
	assert.Equal(t, s, fmt.Sprintf("%+v", st), "%+v prints the summary, not the buckets")
	assert.Contains(t, fmt.Sprintf("%+v", st.Fill), "p90≤")
}

// packing is a dataset that reports PackingStats: every sample holds
// index+1 tokens of 8 slots.
type packing struct {
	engine.Dataset
	tokens, slots, samples atomic.Int64
}

func (p *packing) Fill(ctx context.Context, s *engine.Slot) error {
	p.samples.Add(1)
	p.tokens.Add(int64(s.Index() + 1))
	p.slots.Add(8)
	return p.Dataset.Fill(ctx, s)
}

func (p *packing) PackingStats() engine.PackingStats {
	return engine.PackingStats{Samples: p.samples.Load(), Tokens: p.tokens.Load(), Slots: p.slots.Load()}
}

// A dataset with a PackingStats method shows its counts in Stats.Packing,
// in Stats.String and in the expvar JSON; any other, none.
func TestStatsPacking(t *testing.T) {
	ds := &packing{Dataset: engine.DatasetFunc(8, indexSchema, fillIndex)}
	l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 2})
	for _, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
	}
	st := l.Stats()
	assert.Equal(t, engine.PackingStats{Samples: 8, Tokens: 36, Slots: 64}, st.Packing)
	assert.InDelta(t, 36.0/64, st.Packing.Efficiency(), 1e-12)
	assert.Contains(t, st.String(), "; packing 56.2% (36 tokens in 64 slots)")
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(l.Expvar().String()), &out))
	assert.Equal(t, map[string]any{"samples": 8.0, "tokens": 36.0, "slots": 64.0, "efficiency_fraction": 36.0 / 64}, out["packing"])

	plain := newLoader(t, engine.DatasetFunc(8, indexSchema, fillIndex), engine.Config{BatchSize: 4})
	for _, err := range plain.Epoch(context.Background(), 0) {
		require.NoError(t, err)
	}
	assert.Equal(t, engine.PackingStats{}, plain.Stats().Packing)
	assert.Zero(t, plain.Stats().Packing.Efficiency())
	assert.NotContains(t, plain.Stats().String(), "packing")
}
