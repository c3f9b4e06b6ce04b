package engine

import "time"

// AutoPrefetch, as Config.PrefetchFactor, lets the loader tune the batches
// in flight per worker online, from 1 up to DefaultPrefetchFactor.
const AutoPrefetch = -1

// tuner adjusts the active workers (Workers: AutoWorkers) and the batches
// in flight per worker (PrefetchFactor: AutoPrefetch) from what the
// consumer waits, as tf.data's AUTOTUNE does. It starts small and only
// grows: after each interval of batches in which the consumer waited more
// than a tenth of the time, it adds a worker, up to one per CPU, and once
// the workers are all active a batch of prefetch. A worker first, because
// it costs the least memory: from W workers and P batches each, one more
// worker adds P batches in flight, one more prefetch adds W. Idle workers
// cost nothing, so a loader that keeps up stays at the smallest setting
// that does: the least memory and the least contention with a training
// step that needs the CPU. An epoch's first batch is not measured: its
// wait is the epoch's start, which no setting removes, and counting it
// would grow the setting at every epoch. The settings carry over from
// epoch to epoch. All fields are guarded by the running epoch's mu.
type tuner struct {
	workers, prefetch bool // what is tuned
	active, pf        int  // the current setting
	maxActive, maxPF  int

	start   time.Time     // of the interval being measured
	waited  time.Duration // the consumer's wait in it
	batches int
	first   bool // the next batch is an epoch's first
}

// newTuner returns the tuner of cfg (defaults filled in): fixed settings
// unless Workers or PrefetchFactor asked for auto.
func newTuner(cfg Config, autoWorkers, autoPrefetch bool) *tuner {
	t := &tuner{workers: autoWorkers, prefetch: autoPrefetch, active: cfg.Workers, pf: cfg.PrefetchFactor,
		maxActive: cfg.Workers, maxPF: cfg.PrefetchFactor}
	if autoWorkers {
		t.active = 1
	}
	if autoPrefetch {
		t.pf, t.maxPF = 1, DefaultPrefetchFactor
	}
	return t
}

// limit is the batches that may be in flight now.
func (t *tuner) limit(window int) int {
	if !t.workers && !t.prefetch {
		return window
	}
	return max(1, t.active*t.pf)
}

// epoch starts measuring a new epoch: its first batch is not counted.
func (t *tuner) epoch() {
	t.start, t.waited, t.batches, t.first = time.Time{}, 0, 0, true
}

// tuneInterval is the least time an interval is measured over.
const tuneInterval = 50 * time.Millisecond

// observe records one batch the consumer waited d for, and reports
// whether the setting changed.
func (t *tuner) observe(d time.Duration) bool {
	if !t.workers && !t.prefetch {
		return false
	}
	if t.first {
		t.first = false
		return false
	}
	if t.start.IsZero() {
		t.start = time.Now().Add(-d)
	}
	t.waited += d
	t.batches++
	elapsed := time.Since(t.start)
	if t.batches < max(4, 2*t.active*t.pf) || elapsed < tuneInterval {
		return false
	}
	changed := false
	if t.waited*10 > elapsed { // data-bound
		switch {
		case t.workers && t.active < t.maxActive:
			t.active++
			changed = true
		case t.prefetch && t.pf < t.maxPF:
			t.pf++
			changed = true
		}
	}
	t.start, t.waited, t.batches = time.Now(), 0, 0
	return changed
}
