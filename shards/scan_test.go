package shards

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBackoffJitter: two Openers draw different waits, each between half
// and all of the doubling backoff.
func TestBackoffJitter(t *testing.T) {
	t.Parallel()
	a, b := &Opener{Backoff: 100 * time.Millisecond}, &Opener{Backoff: 100 * time.Millisecond}
	same := 0
	for n := 1; n <= 40; n++ {
		full := 100 * time.Millisecond << min(n-1, 5)
		da, db := a.backoff(n), b.backoff(n)
		for _, d := range []time.Duration{da, db} {
			assert.GreaterOrEqual(t, d, full/2, "retry %d", n)
			assert.LessOrEqual(t, d, full, "retry %d", n)
		}
		if da == db {
			same++
		}
	}
	assert.Less(t, same, 3, "two openers retry in lockstep")
}

// TestBuildIndexParallel keeps the order of the names, whatever order
// the counts finish in.
func TestBuildIndexParallel(t *testing.T) {
	t.Parallel()
	counts := make([]int, 40)
	for i := range counts {
		counts[i] = 1 + (i*7)%5
	}
	paths, _ := writeShards(t, t.TempDir(), counts...)
	l, err := BuildIndex(context.Background(), nil, paths)
	require.NoError(t, err)
	require.Len(t, l.Shards, len(paths))
	for i, e := range l.Shards {
		assert.Equal(t, filepath.Base(paths[i]), e.URL)
		assert.Equal(t, counts[i], e.Samples)
		assert.Positive(t, e.Bytes)
	}
}

// TestScanFailureCancelsTheRest: a missing shard among slow ones fails
// the scan at once, naming it, and the slow reads are cancelled.
func TestScanFailureCancelsTheRest(t *testing.T) {
	f := newFaultServer(t)
	paths, _ := writeShards(t, f.dir, 50, 50, 50, 50, 50, 50, 50, 50)
	var names []string
	for _, p := range paths {
		names = append(names, f.URL+"/"+filepath.Base(p))
	}
	// Every shard stalls for a minute after 1000 bytes; one is missing.
	f.inject(func(f *faultServer) { f.stalls, f.stallAt, f.stallFor = 8, 1000, time.Minute })
	names = append(names, f.URL+"/missing.tar")
	o := fastOpener()
	o.Timeout = time.Minute
	defer o.CloseIdleConnections()
	t0 := time.Now()
	_, err := BuildIndex(context.Background(), o, names)
	assert.ErrorContains(t, err, f.URL+"/missing.tar: HTTP 404")
	assert.Less(t, time.Since(t0), 20*time.Second)

	src, err := FromNames(names, testSchema, decodeTest, UseOpener(o), IndexFile(""))
	require.NoError(t, err)
	f.inject(func(f *faultServer) { f.stalls = 8 })
	t0 = time.Now()
	_, err = src.Shards(context.Background())
	assert.ErrorContains(t, err, f.URL+"/missing.tar: HTTP 404")
	assert.Less(t, time.Since(t0), 20*time.Second)
	var got int
	for _, r := range f.requests() {
		if strings.Contains(r, "missing") {
			got++
		}
	}
	assert.Equal(t, 2, got)
}
