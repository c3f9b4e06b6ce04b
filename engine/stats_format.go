package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tensorbatch/tensorbatch/pinned"
)

// String summarizes h: the count, the mean and upper bounds of the median
// and the 90th and 99th percentiles ("n=120 mean=1.2ms p50≤2ms p90≤4ms
// p99≤8ms"), so that a Stats printed with %v or %+v reads as a summary
// rather than a list of buckets.
func (h Histogram) String() string {
	if h.Count == 0 {
		return "n=0"
	}
	return fmt.Sprintf("n=%d mean=%v p50≤%v p90≤%v p99≤%v", h.Count, h.Mean().Round(time.Microsecond),
		h.Quantile(0.5), h.Quantile(0.9), h.Quantile(0.99))
}

// String summarizes s for a person: rates over the time spent in epochs,
// the share of it the training loop spent waiting for data, the median and
// 90th percentile of each stage, pinned memory, and what went wrong.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d batches, %d samples", s.Batches, s.Samples)
	if sec := s.TimeInEpochs.Seconds(); sec > 0 {
		fmt.Fprintf(&b, " in %v (%.1f batches/s, %.0f samples/s)", s.TimeInEpochs.Round(time.Millisecond),
			float64(s.Batches)/sec, float64(s.Samples)/sec)
	}
	fmt.Fprintf(&b, "; the loop waited for data %.0f%% of the time", 100*s.DataBound)
	for _, st := range []struct {
		name string
		h    Histogram
	}{{"fill", s.Fill}, {"pad", s.Pad}, {"copy", s.Copy}, {"wait", s.Wait}} {
		if st.h.Count > 0 {
			fmt.Fprintf(&b, "; %s p50≤%v p90≤%v", st.name, st.h.Quantile(0.5), st.h.Quantile(0.9))
		}
	}
	fmt.Fprintf(&b, "; pinned %s in %d buffers (peak %s)", mib(s.Pool.Allocated), s.Pool.Buffers, mib(s.Pool.Peak))
	if s.DevicePool.Allocated > 0 {
		fmt.Fprintf(&b, ", device %s", mib(s.DevicePool.Allocated))
	}
	if len(s.Dataset) > 0 {
		b.WriteString("; dataset")
		for i, k := range slices.Sorted(maps.Keys(s.Dataset)) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %s %d", k, s.Dataset[k])
		}
	}
	for _, c := range []struct {
		n    int64
		what string
	}{{s.FillRetries, "fills retried"}, {s.Skipped, "samples skipped"}, {s.Abandoned, "workers abandoned in stuck fills"}} {
		if c.n > 0 {
			fmt.Fprintf(&b, "; %d %s", c.n, c.what)
		}
	}
	return b.String()
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// expvarJSON is s as published by Expvar: every name carries its unit
// (_seconds, _bytes, _fraction) or is a count.
func (s Stats) expvarJSON() map[string]any {
	hist := func(h Histogram) map[string]any {
		return map[string]any{
			"count": h.Count, "sum_seconds": h.Sum.Seconds(), "mean_seconds": h.Mean().Seconds(),
			"p50_seconds": h.Quantile(0.5).Seconds(), "p90_seconds": h.Quantile(0.9).Seconds(), "p99_seconds": h.Quantile(0.99).Seconds(),
		}
	}
	pool := func(p pinned.PoolStats) map[string]any {
		return map[string]any{
			"allocated_bytes": p.Allocated, "in_use_bytes": p.InUse, "peak_bytes": p.Peak,
			"buffers": p.Buffers, "peak_buffers": p.PeakBufs, "allocs": p.Allocs, "reuses": p.Reuses, "waits": p.Waits,
		}
	}
	return map[string]any{
		"batches": s.Batches, "samples": s.Samples,
		"copied_bytes": s.BytesCopied, "to_device_bytes": s.BytesToDevice,
		"pool": pool(s.Pool), "device_pool": pool(s.DevicePool), "max_pinned_bytes": s.MaxPinnedBytes,
		"in_flight_batches": s.InFlight, "window_batches": s.Window, "active_workers": s.ActiveWorkers,
		"consumer_wait_seconds": s.ConsumerWait.Seconds(), "epoch_time_seconds": s.TimeInEpochs.Seconds(),
		"data_bound_fraction": s.DataBound,
		"fill":                hist(s.Fill), "pad": hist(s.Pad), "copy": hist(s.Copy), "wait": hist(s.Wait),
		"fills_retried": s.FillRetries, "samples_skipped": s.Skipped,
		"abandoned_workers": s.Abandoned, "leaked_bytes": s.LeakedBytes,
		"dataset": s.Dataset,
	}
}
