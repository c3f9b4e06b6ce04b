package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
	"github.com/tensorbatch/tensorbatch/internal/classic"
)

// Epoch is one epoch's timing.
type Epoch struct {
	WallS       float64 `json:"wall_s"`        // iterator start to the end, start-up and shutdown included
	FirstBatchS float64 `json:"first_batch_s"` // iterator start to the first batch
	SteadyS     float64 `json:"steady_s"`      // first batch to the end of the last step
	Batches     int     `json:"batches"`
}

// Record is one loader × start method × workers × persistence run.
type Record struct {
	Table        string  `json:"table"` // workers | persistence | efficiency
	Loader       string  `json:"loader"`
	Method       string  `json:"method"` // goroutines, main, fork, spawn, forkserver, forkserver-preload
	Workers      int     `json:"workers"`
	Persistent   bool    `json:"persistent"`
	StepMS       float64 `json:"step_ms"`
	Backend      string  `json:"backend"`
	Epochs       []Epoch `json:"epochs"`
	BatchesPerS  float64 `json:"batches_per_s"` // last epoch, wall time
	Util         float64 `json:"util"`          // step time / wall time, last epoch
	FirstBatchS  float64 `json:"first_batch_s"` // first epoch
	PeakRSSMB    float64 `json:"peak_rss_mb"`
	CopiedPerBat float64 `json:"copied_bytes_per_batch"`
	PlainPerCore float64 `json:"plain_batches_per_s_per_core,omitempty"` // the plain loop, measured just before
	Efficiency   float64 `json:"efficiency,omitempty"`                   // batches/s over PlainPerCore × cores
	Note         string  `json:"note,omitempty"`
}

// summarize fills the derived figures from the epochs.
func (r *Record) summarize() {
	if len(r.Epochs) == 0 {
		return
	}
	last := r.Epochs[len(r.Epochs)-1]
	r.BatchesPerS = float64(last.Batches) / last.WallS
	r.Util = float64(last.Batches) * r.StepMS / 1000 / last.WallS
	r.FirstBatchS = r.Epochs[0].FirstBatchS
}

// runLoader runs the workload through a tensorbatch Loader.
func runLoader(o *options, table string, workers int, persistent bool, epochs int, step time.Duration) (Record, error) {
	resetPeakRSS()
	ds := engine.DatasetFunc(o.samples, classic.Schema, o.fill)
	l, err := engine.New(ds, engine.Config{
		BatchSize: o.batch, DropLast: true, Workers: workers, RestartWorkers: !persistent,
		SkipZeroing: true, Backend: o.backend,
	})
	if err != nil {
		return Record{}, err
	}
	defer l.Close()
	rec := Record{Table: table, Loader: "tensorbatch", Method: "goroutines", Workers: workers, Persistent: persistent,
		StepMS: float64(step) / 1e6, Backend: l.Backend().Backend.Name()}
	if workers == 0 {
		rec.Method = "main"
	}
	for e := range epochs {
		var ep Epoch
		var first time.Time
		t0 := time.Now()
		for b, err := range l.Epoch(context.Background(), e) {
			if err != nil {
				return rec, err
			}
			if ep.Batches == 0 {
				first = time.Now()
				ep.FirstBatchS = first.Sub(t0).Seconds()
			}
			if b.OnDevice() {
				if err := b.WaitDevice(); err != nil {
					return rec, err
				}
			}
			time.Sleep(step)
			ep.Batches++
		}
		ep.WallS = time.Since(t0).Seconds()
		ep.SteadyS = time.Since(first).Seconds()
		rec.Epochs = append(rec.Epochs, ep)
	}
	st := l.Stats()
	rec.CopiedPerBat = float64(st.BytesCopied) / float64(st.Batches)
	rec.PeakRSSMB = peakRSSMB()
	rec.summarize()
	return rec, nil
}

// plainMinTime is how long a plain-loop rate is measured, after a warm-up.
const plainMinTime = 500 * time.Millisecond

// plainRate is the workload's samples done in a plain loop on one core,
// with no loader, as batches per second.
func plainRate(o *options) float64 {
	layout, err := collate.NewLayout(classic.Schema, 1)
	if err != nil {
		panic(err)
	}
	buf := make([]byte, layout.Size())
	one := func(i int) {
		if err := o.fill(context.Background(), enginetest.NewSlot(0, 0, i, layout, buf, 0)); err != nil {
			panic(err)
		}
	}
	for i := range 4 { // warm-up
		one(i)
	}
	n := 0
	t0 := time.Now()
	for ; n < o.samples || time.Since(t0) < plainMinTime; n++ {
		one(n % o.samples)
	}
	return float64(n) / float64(o.batch) / time.Since(t0).Seconds()
}

// cores is how many cores w workers can use (the consumer's for w = 0).
func cores(w int) int { return min(max(w, 1), runtime.NumCPU()) }

// resetPeakRSS resets the kernel's high-water mark of this process's RSS.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSSMB reads this process's RSS high-water mark (VmHWM).
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// label names the loader and, for PyTorch, its start method.
func (r Record) label() string {
	if r.Loader == "tensorbatch" || r.Workers == 0 {
		return family(r.Loader)
	}
	return fmt.Sprintf("pytorch %s", r.Method)
}
