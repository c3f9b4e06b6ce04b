package promstats

import (
	"fmt"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tensorbatch/tensorbatch/engine"
)

// The labels the collector sets itself; the caller's labels may not use
// them.
const (
	loaderLabel = "loader"
	stageLabel  = "stage"
)

// metric is one scalar metric: its name, help, type and where its value
// comes from in a Stats.
type metric struct {
	name  string
	help  string
	typ   prometheus.ValueType
	value func(*engine.Stats) float64
}

func counter(name, help string, v func(*engine.Stats) float64) metric {
	return metric{name, help, prometheus.CounterValue, v}
}

func gauge(name, help string, v func(*engine.Stats) float64) metric {
	return metric{name, help, prometheus.GaugeValue, v}
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// metrics are the scalar metrics, in the order Describe sends them.
var metrics = []metric{
	counter("batches_total", "Batches delivered.",
		func(s *engine.Stats) float64 { return float64(s.Batches) }),
	counter("samples_total", "Samples filled (a retried sample once).",
		func(s *engine.Stats) float64 { return float64(s.Samples) }),
	counter("bytes_copied_total", "Bytes the loader copied into batch buffers (0 on the Fill path).",
		func(s *engine.Stats) float64 { return float64(s.BytesCopied) }),
	counter("bytes_to_device_total", "Bytes copied host to device.",
		func(s *engine.Stats) float64 { return float64(s.BytesToDevice) }),
	counter("retried_total", "Fills retried under Config.OnError.",
		func(s *engine.Stats) float64 { return float64(s.FillRetries) }),
	counter("skipped_total", "Samples skipped under Config.OnError.",
		func(s *engine.Stats) float64 { return float64(s.Skipped) }),
	counter("abandoned_goroutines_total", "Worker goroutines abandoned in a Fill that ran past Timeout.",
		func(s *engine.Stats) float64 { return float64(s.Abandoned) }),
	gauge("leaked_bytes", "Pinned bytes of the batches abandoned goroutines were filling, never reused nor freed.",
		func(s *engine.Stats) float64 { return float64(s.LeakedBytes) }),
	gauge("in_flight_batches", "Batches started and not yet taken by the consumer.",
		func(s *engine.Stats) float64 { return float64(s.InFlight) }),
	gauge("pinned_bytes_allocated", "Pinned host bytes held from the backend.",
		func(s *engine.Stats) float64 { return float64(s.Pool.Allocated) }),
	gauge("pinned_bytes_in_use", "Pinned host bytes of buffers handed out and not yet put back.",
		func(s *engine.Stats) float64 { return float64(s.Pool.InUse) }),
	gauge("pinned_bytes_peak", "The most pinned host bytes held at once.",
		func(s *engine.Stats) float64 { return float64(s.Pool.Peak) }),
	gauge("device_bytes_allocated", "Device bytes held from the backend (0 on the cpu backend).",
		func(s *engine.Stats) float64 { return float64(s.DevicePool.Allocated) }),
	gauge("device_bytes_in_use", "Device bytes of buffers handed out and not yet put back.",
		func(s *engine.Stats) float64 { return float64(s.DevicePool.InUse) }),
	gauge("device_bytes_peak", "The most device bytes held at once.",
		func(s *engine.Stats) float64 { return float64(s.DevicePool.Peak) }),
	gauge("data_bound_ratio", "Fraction of the time inside epochs spent waiting for batches; near 0, the GPU is the limit.",
		func(s *engine.Stats) float64 { return s.DataBound }),
	counter("consumer_wait_seconds_total", "Time the consumer spent waiting for batches.",
		func(s *engine.Stats) float64 { return seconds(s.ConsumerWait) }),
	counter("epoch_seconds_total", "Time spent inside epochs, the running one included.",
		func(s *engine.Stats) float64 { return seconds(s.TimeInEpochs) }),
}

// stages are the latency histograms, by their stage label.
var stages = []struct {
	name string
	hist func(*engine.Stats) engine.Histogram
}{
	{"fill", func(s *engine.Stats) engine.Histogram { return s.Fill }},
	{"pad", func(s *engine.Stats) engine.Histogram { return s.Pad }},
	{"copy", func(s *engine.Stats) engine.Histogram { return s.Copy }},
	{"wait", func(s *engine.Stats) engine.Histogram { return s.Wait }},
}

// collector is a prometheus.Collector over a Stats source.
type collector struct {
	stats  func() engine.Stats
	scalar []*prometheus.Desc // one per metrics entry
	cap    *prometheus.Desc
	stage  *prometheus.Desc
}

// NewCollector returns a collector of the Stats that stats returns, read
// once per scrape, under the constant labels loader=name and labels.
// stats is usually a Loader's Stats method; any func works, so a test or a
// wrapper can supply its own. The metrics are:
//
//   - counters tensorbatch_batches_total, _samples_total,
//     _bytes_copied_total, _bytes_to_device_total, _retried_total,
//     _skipped_total, _abandoned_goroutines_total,
//     _consumer_wait_seconds_total and _epoch_seconds_total;
//   - gauges tensorbatch_leaked_bytes, _in_flight_batches,
//     _pinned_bytes_allocated, _pinned_bytes_in_use, _pinned_bytes_peak,
//     _device_bytes_allocated, _device_bytes_in_use, _device_bytes_peak
//     (0 on the cpu backend) and _data_bound_ratio;
//   - the gauge tensorbatch_pinned_bytes_cap, Config.MaxPinnedBytes,
//     absent when there is no cap;
//   - the histogram tensorbatch_stage_seconds with the label
//     stage=fill|pad|copy|wait, whose buckets are engine.Histogram's:
//     upper bounds of 2^i µs for i = 0..30, and +Inf.
//
// A label name that is invalid, or is "loader" or "stage", makes the
// collector fail to register.
func NewCollector(name string, stats func() engine.Stats, labels prometheus.Labels) prometheus.Collector {
	c := &collector{stats: stats}
	var err error
	for _, l := range []string{loaderLabel, stageLabel} {
		if _, ok := labels[l]; ok {
			err = fmt.Errorf("promstats: label %q is set by the collector", l)
		}
	}
	constLabels := maps.Clone(labels)
	if constLabels == nil {
		constLabels = prometheus.Labels{}
	}
	constLabels[loaderLabel] = name
	desc := func(name, help string, variable ...string) *prometheus.Desc {
		if err != nil {
			return prometheus.NewInvalidDesc(err)
		}
		return prometheus.NewDesc("tensorbatch_"+name, help, variable, constLabels)
	}
	for _, m := range metrics {
		c.scalar = append(c.scalar, desc(m.name, m.help))
	}
	c.cap = desc("pinned_bytes_cap", "Cap on pinned host (and device) bytes, Config.MaxPinnedBytes; absent with no cap.")
	c.stage = desc("stage_seconds", "Latency of one Fill (a sample), padding a batch, issuing its device copy, and the consumer's wait for a batch.", stageLabel)
	return c
}

// Register registers a collector of l's Stats with reg under the label
// loader=name. Pass prometheus.DefaultRegisterer for the default registry;
// registering two loaders under one name is an error.
func Register(reg prometheus.Registerer, name string, l *engine.Loader) error {
	return reg.Register(NewCollector(name, l.Stats, nil))
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.scalar {
		ch <- d
	}
	ch <- c.cap
	ch <- c.stage
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for i, m := range metrics {
		ch <- constMetric(c.scalar[i], m.typ, m.value(&s))
	}
	if s.MaxPinnedBytes > 0 {
		ch <- constMetric(c.cap, prometheus.GaugeValue, float64(s.MaxPinnedBytes))
	}
	for _, st := range stages {
		count, sum, buckets := histogram(st.hist(&s))
		m, err := prometheus.NewConstHistogram(c.stage, count, sum, buckets, st.name)
		if err != nil {
			m = prometheus.NewInvalidMetric(c.stage, err)
		}
		ch <- m
	}
}

func constMetric(d *prometheus.Desc, typ prometheus.ValueType, v float64) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, typ, v)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// histogram converts h to a Prometheus histogram: bucket i of h holds
// durations below 2^i µs, so its upper bound is 2^i µs and the cumulative
// count is the sum of buckets 0..i. The last bucket, which also holds
// everything longer, is left to +Inf. h's fields are loaded one at a time
// while the loader records, so Count may trail the buckets; the count is
// their total when that is larger, which keeps +Inf the largest.
func histogram(h engine.Histogram) (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(h.Buckets)-1)
	var cum uint64
	for i, n := range h.Buckets {
		cum += uint64(max(n, 0))
		if i < len(h.Buckets)-1 {
			buckets[float64(uint64(1)<<i)*1e-6] = cum
		}
	}
	return max(uint64(max(h.Count, 0)), cum), h.Sum.Seconds(), buckets
}
