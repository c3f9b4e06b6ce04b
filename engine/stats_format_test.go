package engine_test

import (
	"context"
	"fmt"
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
