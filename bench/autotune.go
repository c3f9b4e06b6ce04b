package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/classic"
)

// tuneRow is one loader setting on one workload of the autotune table.
type tuneRow struct {
	Workload    string  `json:"workload"`
	Setting     string  `json:"setting"` // "auto", or "workers=W prefetch=P"
	BatchesPerS float64 `json:"batches_per_s"`
	PeakPinned  int64   `json:"peak_pinned_bytes"`
	Active      int     `json:"active_workers"` // at the end, for auto
	Window      int     `json:"window"`
}

// tuneWorkloads are the autotune table's workloads: the seed workload
// (randn by Philox, a 20 ms step that leaves the CPU free) and a CPU-heavy
// one (randn by math/rand, a slower Fill, so several workers are needed).
func tuneWorkloads() []struct {
	name string
	fill func(context.Context, *engine.Slot) error
} {
	return []struct {
		name string
		fill func(context.Context, *engine.Slot) error
	}{
		{"seed (philox randn)", classic.FillPhilox},
		{"cpu-heavy (math/rand randn)", classic.FillMath},
	}
}

// autotuneTable runs each workload with every fixed setting of a small
// grid and with Workers: AutoWorkers, PrefetchFactor: AutoPrefetch, for
// three epochs each, and reports the last epoch.
func (r *results) autotuneTable(o *options) error {
	type setting struct{ workers, prefetch int }
	grid := []setting{{1, 1}, {1, 2}, {2, 1}, {2, 2}, {4, 1}, {4, 2}, {engine.AutoWorkers, engine.AutoPrefetch}}
	if o.quick {
		grid = []setting{{1, 1}, {2, 2}, {engine.AutoWorkers, engine.AutoPrefetch}}
	}
	for _, wl := range tuneWorkloads() {
		for _, s := range grid {
			row, err := runTuned(o, wl.fill, s.workers, s.prefetch)
			if err != nil {
				return err
			}
			row.Workload = wl.name
			r.tune = append(r.tune, row)
		}
	}
	return nil
}

func runTuned(o *options, fill func(context.Context, *engine.Slot) error, workers, prefetch int) (tuneRow, error) {
	ds := engine.DatasetFunc(o.samples, classic.Schema, fill)
	l, err := engine.New(ds, engine.Config{BatchSize: o.batch, DropLast: true, Workers: workers, PrefetchFactor: prefetch, SkipZeroing: true, Backend: o.backend})
	if err != nil {
		return tuneRow{}, err
	}
	defer l.Close()
	row := tuneRow{Setting: fmt.Sprintf("workers=%d prefetch=%d", workers, prefetch)}
	if workers == engine.AutoWorkers {
		row.Setting = "auto"
	}
	const epochs = 3
	for e := range epochs {
		n := 0
		t0 := time.Now()
		for _, err := range l.Epoch(context.Background(), e) {
			if err != nil {
				return row, err
			}
			time.Sleep(o.step)
			n++
		}
		row.BatchesPerS = float64(n) / time.Since(t0).Seconds()
	}
	st := l.Stats()
	row.PeakPinned, row.Active, row.Window = st.Pool.Peak, st.ActiveWorkers, st.Window
	return row, nil
}

func (r *results) tuneMarkdown(w io.Writer) {
	if len(r.tune) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Autotune\n\n`Workers: AutoWorkers, PrefetchFactor: AutoPrefetch` against fixed settings, %v step, last of 3 epochs. Ratio: auto's batches/s over the best fixed setting's; memory: peak pinned bytes.\n\n", r.opts.step)
	fmt.Fprintln(w, "| workload | best fixed | its batches/s | its peak pinned MB | auto batches/s | ratio | auto peak pinned MB | auto ended at |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for i := 0; i < len(r.tune); {
		j := i
		for j < len(r.tune) && r.tune[j].Workload == r.tune[i].Workload {
			j++
		}
		var best, auto tuneRow
		for _, row := range r.tune[i:j] {
			switch {
			case row.Setting == "auto":
				auto = row
			case row.BatchesPerS > best.BatchesPerS:
				best = row
			}
		}
		fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.1f | %.3f | %.1f | %d workers, window %d |\n", r.tune[i].Workload, best.Setting, best.BatchesPerS,
			float64(best.PeakPinned)/1e6, auto.BatchesPerS, auto.BatchesPerS/best.BatchesPerS, float64(auto.PeakPinned)/1e6, auto.Active, auto.Window)
		i = j
	}
	fmt.Fprintln(w, "\nEvery setting:\n\n| workload | setting | batches/s | peak pinned MB | workers, window at the end |\n| --- | --- | --- | --- | --- |")
	for _, row := range r.tune {
		fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %d, %d |\n", row.Workload, row.Setting, row.BatchesPerS, float64(row.PeakPinned)/1e6, row.Active, row.Window)
	}
}
