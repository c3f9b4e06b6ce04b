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
	t.Parallel()
	assert.Equal(t, "n=0", engine.Histogram{}.String())
	var h engine.Histogram
	h.Count, h.Sum = 10, 10*1500*time.Microsecond
	h.Buckets[11] = 9 // [1024, 2048) µs
	h.Buckets[13] = 1 // [4096, 8192) µs
	assert.Equal(t, "n=10 mean=1.5ms p50≤2.048ms p90≤8.192ms p99≤8.192ms", h.String())
}

func TestStatsReadWell(t *testing.T) {
	t.Parallel()
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

// packing is a dataset that reports counts of its own (a Reporter):
// every sample holds index+1 tokens of 8 slots.
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

func (p *packing) Report() map[string]int64 {
	return map[string]int64{"packed_samples": p.samples.Load(), "packed_tokens": p.tokens.Load(), "packed_slots": p.slots.Load()}
}

// A Reporter's counts are in Stats.Dataset, in Stats.String and in the
// expvar JSON, under its names; any other dataset has none.
func TestStatsDatasetReport(t *testing.T) {
	t.Parallel()
	ds := &packing{Dataset: engine.DatasetFunc(8, indexSchema, fillIndex)}
	l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 2})
	for _, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
	}
	st := l.Stats()
	assert.Equal(t, map[string]int64{"packed_samples": 8, "packed_tokens": 36, "packed_slots": 64}, st.Dataset)
	assert.Contains(t, st.String(), "; dataset packed_samples 8, packed_slots 64, packed_tokens 36")
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(l.Expvar().String()), &out))
	assert.Equal(t, map[string]any{"packed_samples": 8.0, "packed_tokens": 36.0, "packed_slots": 64.0}, out["dataset"])

	plain := newLoader(t, engine.DatasetFunc(8, indexSchema, fillIndex), engine.Config{BatchSize: 4})
	for _, err := range plain.Epoch(context.Background(), 0) {
		require.NoError(t, err)
	}
	assert.Nil(t, plain.Stats().Dataset)
	assert.NotContains(t, plain.Stats().String(), "dataset")
}
