package engine

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// clockBase is mono's origin.
var clockBase = time.Now()

// mono returns the monotonic time since clockBase, for the intervals timed
// on the per-batch path: one clock read, where time.Now makes two (the
// wall clock too).
func mono() time.Duration { return time.Since(clockBase) }

// histBuckets is the number of buckets of a Histogram: bucket i counts
// durations in [2^(i-1), 2^i) µs, the last one everything longer.
const histBuckets = 32

// Histogram is a latency distribution with power-of-two buckets in
// microseconds, cheap enough to record on every sample.
type Histogram struct {
	Count   int64
	Sum     time.Duration
	Buckets [histBuckets]int64 // Buckets[i]: durations below 2^i µs and at least 2^(i-1)
}

// Mean returns the mean duration, or 0 with no observations.
func (h Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// Quantile returns an upper bound of the q-quantile (0 <= q <= 1): the
// upper edge of the bucket that holds it, or 0 with no observations.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	rank := int64(q * float64(h.Count))
	var seen int64
	for i, n := range h.Buckets {
		if seen += n; seen > rank || i == histBuckets-1 {
			return time.Duration(1<<i) * time.Microsecond
		}
	}
	return 0
}

// histogram is a Histogram recorded with atomics.
type histogram struct {
	count, sum atomic.Int64
	buckets    [histBuckets]atomic.Int64
}

func (h *histogram) observe(d time.Duration) { h.observeN(d, 1) }

// observeN records d as the duration of each of n events (one timed,
// standing for n).
func (h *histogram) observeN(d time.Duration, n int64) {
	us := uint64(max(d, 0) / time.Microsecond)
	h.buckets[min(bits.Len64(us), histBuckets-1)].Add(n)
	h.count.Add(n)
	h.sum.Add(int64(d) * n)
}

// fillSampling is how many Fills one timed Fill stands for in the fill
// histogram: reading the clock costs more than a small sample (a token
// window) on some machines.
const fillSampling = 8

func (h *histogram) snapshot() Histogram {
	s := Histogram{Count: h.count.Load(), Sum: time.Duration(h.sum.Load())}
	for i := range h.buckets {
		s.Buckets[i] = h.buckets[i].Load()
	}
	return s
}

// stages are the latencies the loader records.
type stages struct {
	fill, pad, copy, wait histogram
}
