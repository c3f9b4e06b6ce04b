package promstats_test

import (
	"context"
	"maps"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/adapters/promstats"
	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var schema = collate.Schema{
	{Name: "x", DType: collate.Float32, Shape: []int{2}},
	{Name: "y", DType: collate.Int64},
}

// newLoader returns a cpu loader over n samples of schema, closed with t.
func newLoader(t *testing.T, n int, cfg engine.Config) *engine.Loader {
	t.Helper()
	ds := engine.DatasetFunc(n, schema, func(_ context.Context, s *engine.Slot) error {
		x := collate.As[float32](s.Tensor("x"))
		x[0], x[1] = float32(s.Index()), 1
		collate.As[int64](s.Tensor("y"))[0] = int64(s.Index())
		return nil
	})
	cfg.Backend = "cpu"
	l, err := engine.New(ds, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

func runEpochs(t *testing.T, l *engine.Loader, epochs int) (batches int) {
	t.Helper()
	for e := range epochs {
		for _, err := range l.Epoch(context.Background(), e) {
			require.NoError(t, err)
			batches++
		}
	}
	return batches
}

// gather returns reg's families by name.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	byName := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	return byName
}

func labels(m *dto.Metric) map[string]string {
	l := make(map[string]string)
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// value returns the value of the family's only metric.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	require.True(t, ok, "no family %s", name)
	require.Len(t, mf.GetMetric(), 1, name)
	m := mf.GetMetric()[0]
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s: type %v", name, mf.GetType())
	return 0
}

func TestCollectorMatchesStats(t *testing.T) {
	l := newLoader(t, 10, engine.Config{BatchSize: 4, Workers: 2, MaxPinnedBytes: 1 << 20})
	batches := runEpochs(t, l, 2)
	require.Equal(t, 6, batches)

	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(promstats.NewCollector("train", l.Stats, prometheus.Labels{"job": "mnist"})))
	mfs := gather(t, reg)
	st := l.Stats() // idle loader: the same counters the gather saw

	for name, want := range map[string]float64{
		"tensorbatch_batches_total":               float64(batches),
		"tensorbatch_samples_total":               20,
		"tensorbatch_bytes_copied_total":          float64(st.BytesCopied),
		"tensorbatch_bytes_to_device_total":       0,
		"tensorbatch_retried_total":               0,
		"tensorbatch_skipped_total":               0,
		"tensorbatch_abandoned_goroutines_total":  0,
		"tensorbatch_leaked_bytes":                0,
		"tensorbatch_in_flight_batches":           0,
		"tensorbatch_pinned_bytes_allocated":      float64(st.Pool.Allocated),
		"tensorbatch_pinned_bytes_in_use":         0,
		"tensorbatch_pinned_bytes_peak":           float64(st.Pool.Peak),
		"tensorbatch_pinned_bytes_cap":            1 << 20,
		"tensorbatch_device_bytes_allocated":      0,
		"tensorbatch_device_bytes_in_use":         0,
		"tensorbatch_device_bytes_peak":           0,
		"tensorbatch_consumer_wait_seconds_total": st.ConsumerWait.Seconds(),
		"tensorbatch_epoch_seconds_total":         st.TimeInEpochs.Seconds(),
		"tensorbatch_data_bound_ratio":            st.DataBound,
	} {
		assert.Equal(t, want, value(t, mfs, name), name)
	}
	assert.Positive(t, st.Pool.Peak)

	stages := map[string]engine.Histogram{"fill": st.Fill, "pad": st.Pad, "copy": st.Copy, "wait": st.Wait}
	mf := mfs["tensorbatch_stage_seconds"]
	require.NotNil(t, mf)
	assert.Equal(t, dto.MetricType_HISTOGRAM, mf.GetType())
	require.Len(t, mf.GetMetric(), len(stages))
	for _, m := range mf.GetMetric() {
		lb := labels(m)
		want, ok := stages[lb["stage"]]
		require.True(t, ok, "stage %q", lb["stage"])
		h := m.GetHistogram()
		assert.Equal(t, uint64(want.Count), h.GetSampleCount(), lb["stage"])
		assert.Equal(t, want.Sum.Seconds(), h.GetSampleSum(), lb["stage"])
		assert.Len(t, h.GetBucket(), len(want.Buckets)-1)
	}
	assert.Equal(t, uint64(st.Fill.Count), histogramOf(t, mf, "fill").GetSampleCount(), "one Fill in 8 is timed, standing for 8")
	assert.Equal(t, uint64(batches), histogramOf(t, mf, "wait").GetSampleCount())

	// Every series carries loader=name and the caller's labels.
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			lb := labels(m)
			assert.Equal(t, "train", lb["loader"], mf.GetName())
			assert.Equal(t, "mnist", lb["job"], mf.GetName())
		}
	}
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 19+len(stages), n)
}

func histogramOf(t *testing.T, mf *dto.MetricFamily, stage string) *dto.Histogram {
	t.Helper()
	for _, m := range mf.GetMetric() {
		if labels(m)["stage"] == stage {
			return m.GetHistogram()
		}
	}
	t.Fatalf("no stage %q", stage)
	return nil
}

// A Histogram's bucket i (below 2^i µs) becomes the cumulative bucket with
// upper bound 2^i µs; the last one is left to +Inf.
func TestHistogramBuckets(t *testing.T) {
	var h engine.Histogram
	h.Buckets[0] = 1  // < 1µs
	h.Buckets[3] = 2  // [4, 8) µs
	h.Buckets[10] = 4 // [512, 1024) µs
	last := len(h.Buckets) - 1
	h.Buckets[last] = 8 // >= 2^30 µs

	for _, tc := range []struct {
		name      string
		count     int64
		wantCount uint64
	}{
		{"consistent", 15, 15},
		{"count trails buckets", 12, 15}, // a snapshot taken mid-observe
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := h
			h.Count, h.Sum = tc.count, 1500*time.Millisecond
			c := promstats.NewCollector("h", func() engine.Stats { return engine.Stats{Copy: h} }, nil)
			reg := prometheus.NewPedanticRegistry()
			require.NoError(t, reg.Register(c))
			got := histogramOf(t, gather(t, reg)["tensorbatch_stage_seconds"], "copy")

			assert.Equal(t, tc.wantCount, got.GetSampleCount())
			assert.InDelta(t, 1.5, got.GetSampleSum(), 1e-12)
			require.Len(t, got.GetBucket(), last)
			var cum uint64
			for i, b := range got.GetBucket() {
				cum += uint64(h.Buckets[i])
				assert.InEpsilon(t, math.Ldexp(1e-6, i), b.GetUpperBound(), 1e-12, "bucket %d", i)
				assert.Equal(t, cum, b.GetCumulativeCount(), "bucket %d", i)
			}
			assert.Equal(t, uint64(7), got.GetBucket()[last-1].GetCumulativeCount())
		})
	}
}

func TestPinnedCapAbsentWithoutCap(t *testing.T) {
	c := promstats.NewCollector("x", func() engine.Stats { return engine.Stats{} }, nil)
	n, err := testutil.GatherAndCount(registry(t, c), "tensorbatch_pinned_bytes_cap")
	require.NoError(t, err)
	assert.Zero(t, n)
	c = promstats.NewCollector("x", func() engine.Stats { return engine.Stats{MaxPinnedBytes: 4096} }, nil)
	assert.NoError(t, testutil.GatherAndCompare(registry(t, c), strings.NewReader(`
# HELP tensorbatch_pinned_bytes_cap Cap on pinned host (and device) bytes, Config.MaxPinnedBytes; absent with no cap.
# TYPE tensorbatch_pinned_bytes_cap gauge
tensorbatch_pinned_bytes_cap{loader="x"} 4096
`), "tensorbatch_pinned_bytes_cap"))
}

func registry(t *testing.T, cs ...prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		require.NoError(t, reg.Register(c))
	}
	return reg
}

func TestLabels(t *testing.T) {
	stats := func() engine.Stats { return engine.Stats{} }
	for _, tc := range []struct {
		name   string
		labels prometheus.Labels
		ok     bool
	}{
		{"none", nil, true},
		{"user", prometheus.Labels{"job": "a", "rank": "0"}, true},
		{"loader is reserved", prometheus.Labels{"loader": "b"}, false},
		{"stage is reserved", prometheus.Labels{"stage": "fill"}, false},
		{"invalid name", prometheus.Labels{"__reserved": "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := maps.Clone(tc.labels)
			err := prometheus.NewRegistry().Register(promstats.NewCollector("a", stats, tc.labels))
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, in, tc.labels, "the caller's map is not modified")
		})
	}
}

func TestRegister(t *testing.T) {
	train := newLoader(t, 8, engine.Config{BatchSize: 4})
	eval := newLoader(t, 3, engine.Config{BatchSize: 2})
	runEpochs(t, train, 1)
	runEpochs(t, eval, 1)

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, promstats.Register(reg, "train", train))
	require.NoError(t, promstats.Register(reg, "eval", eval))
	var already prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, promstats.Register(reg, "train", eval), &already, "one name, two loaders")

	fam := gather(t, reg)["tensorbatch_batches_total"]
	require.NotNil(t, fam)
	got := map[string]float64{}
	for _, m := range fam.GetMetric() {
		got[labels(m)["loader"]] = m.GetCounter().GetValue()
	}
	assert.Equal(t, map[string]float64{"train": 2, "eval": 2}, got)
}

// The metric names and types follow Prometheus conventions.
func TestLint(t *testing.T) {
	l := newLoader(t, 4, engine.Config{BatchSize: 2, MaxPinnedBytes: 1 << 20})
	runEpochs(t, l, 1)
	problems, err := testutil.CollectAndLint(promstats.NewCollector("lint", l.Stats, nil))
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// Scrapes race with a running epoch without tearing: counters never go
// back and every histogram stays valid (the pedantic registry checks).
func TestCollectDuringEpoch(t *testing.T) {
	l := newLoader(t, 200, engine.Config{BatchSize: 4, Workers: 2})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, promstats.Register(reg, "live", l))

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var prev float64
		for {
			mfs, err := reg.Gather()
			if !assert.NoError(t, err) {
				return
			}
			for _, mf := range mfs {
				if mf.GetName() == "tensorbatch_batches_total" {
					v := mf.GetMetric()[0].GetCounter().GetValue()
					assert.GreaterOrEqual(t, v, prev)
					prev = v
				}
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	batches := runEpochs(t, l, 2)
	close(done)
	wg.Wait()
	assert.Equal(t, float64(batches), value(t, gather(t, reg), "tensorbatch_batches_total"))
}
