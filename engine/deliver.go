package engine

import (
	"fmt"
	"runtime"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
)

// take waits for batch k (with OutOfOrder, for any complete batch) and
// hands it to the consumer. A batch whose every sample was skipped is
// taken but not handed over: take returns nil and no error.
func (r *run) take(k int) (*Batch, error) {
	start := mono()
	var waited time.Duration // read once, when the batch is ready
	defer func() {
		if waited == 0 {
			waited = mono() - start
		}
		r.l.stats.wait.observe(waited)
	}()
	var tick <-chan time.Time
	if t := r.l.cfg.Timeout; t > 0 && len(r.workers) > 0 {
		ticker := time.NewTicker(max(t/4, time.Millisecond))
		defer ticker.Stop()
		tick = ticker.C
	}
	upTo := k // the batches whose stuck samples hold this one back
	if r.l.cfg.OutOfOrder {
		upTo = r.batches.count()
	}
	for {
		if len(r.workers) == 0 {
			r.work(r.l.consumer, false)
		}
		r.mu.Lock()
		// r.ctx.Err is checked too: it is set as soon as the caller cancels,
		// before the AfterFunc sets r.stopped.
		if r.stopped || r.ctx.Err() != nil {
			err := r.stopErr()
			r.mu.Unlock()
			return nil, err
		}
		if p := r.ready(k); p != nil {
			r.ring[p.k%r.window] = nil
			r.taken++
			waited = mono() - start
			r.tune.observe(waited)
			r.cond.Broadcast()
			err := r.account(p)
			number := r.number(p.k)
			b := r.newBatch()
			b.l, b.epoch, b.number, b.n, b.layout, b.inLoop = r.l, r.epoch, number, len(p.indices), r.layout, true
			b.buf, b.dev, b.stream, b.longest = p.buf, p.dev, p.stream, p.longest
			if r.l.checked {
				b.lease = collate.NewLease(b, "call Retain in the loop body to keep a batch past it, and Release when done")
			}
			switch {
			case p.failed != nil:
				b.idx, b.n = p.idx, len(p.idx)
			case p.computed:
				b.lazy, b.k = r.batches, p.k
			default: // the sampler's own
				b.idx = p.indices
			}
			skipped := len(p.failed)
			r.free = append(r.free, p)
			r.mu.Unlock()
			if err != nil {
				r.l.recycle(b.buf, b.dev)
				return nil, err
			}
			r.l.delivered(number, skipped)
			if b.n == 0 {
				r.l.recycle(b.buf, b.dev)
				return nil, nil
			}
			r.l.batches.Add(1)
			return b, nil
		}
		if len(r.workers) > 0 && mono()-start < spinWait {
			n := r.done.Load()
			r.mu.Unlock()
			r.spin(start, n)
			continue
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-tick:
			if err := r.stuck(upTo); err != nil {
				return nil, err
			}
		}
	}
}

// spinWait is how long the consumer waits for a batch without sleeping:
// its sleep and wake-up would cost a futex call on each side, for every
// batch, and leave a P idle in between. It yields as it spins, so with a
// worker on every P it runs only between their samples.
const spinWait = 50 * time.Microsecond

// spin waits, yielding its P to anything runnable, until a batch completes
// after the n so far, the run stops or spinWait has passed since start.
func (r *run) spin(start time.Duration, n int64) {
	for r.done.Load() == n && r.ctx.Err() == nil && mono()-start < spinWait {
		runtime.Gosched()
	}
}

// newBatch returns a Batch never handed out before, from a slab of
// batchSlab: one allocation for many batches instead of one a batch (a
// Batch's allocation, with the collector's share, shows in the engine's
// own time a batch: BenchmarkBatchOverhead at Workers 0). A Batch is
// never reused, so that a use after its last Release still panics
// instead of reading another batch; a retained one keeps its slab
// (batchSlab × 200 bytes) alive. Called with r.mu held.
func (r *run) newBatch() *Batch {
	if len(r.slab) == 0 {
		r.slab = make([]Batch, batchSlab)
	}
	b := &r.slab[0]
	r.slab = r.slab[1:]
	return b
}

const batchSlab = 64

// number returns the number in the epoch of the run's batch k.
func (r *run) number(k int) int {
	if r.numbers != nil {
		return r.numbers[k]
	}
	return r.offset + k
}

// ready returns the batch to take next, once complete: batch k, or with
// OutOfOrder the lowest-numbered complete one. Called with r.mu held.
func (r *run) ready(k int) *pending {
	if !r.l.cfg.OutOfOrder {
		if p := r.ring[k%r.window]; r.started > k && p.complete {
			return p
		}
		return nil
	}
	var best *pending
	for _, p := range r.ring {
		if p != nil && p.complete && (best == nil || p.k < best.k) {
			best = p
		}
	}
	return best
}

// account charges batch p's skipped samples to the epoch's budget, in
// delivery order, and returns the error the consumer gets instead of the
// batch, if any. Called with r.mu held.
func (r *run) account(p *pending) error {
	if p.err != nil {
		return p.err
	}
	for _, f := range p.failed {
		if r.skipped++; r.skipped > r.budget {
			return fmt.Errorf("engine: epoch %d: more than %d samples failed (Config.OnError): %w", r.epoch, r.budget, f.err)
		}
		r.l.skip(f.err)
	}
	return nil
}

// stuck returns the error of a sample of batch k or earlier whose Fill has
// run longer than Config.Timeout, or nil.
func (r *run) stuck(k int) error {
	t := r.l.cfg.Timeout
	for _, w := range r.workers {
		if index, d, ok := w.busyOn(r, k); ok && d > t {
			return &SampleError{Index: index, Epoch: r.epoch, Worker: w.id,
				Err: fmt.Errorf("%w: Fill has run for %v, longer than Timeout %v", ErrTimeout, d.Round(time.Millisecond), t)}
		}
	}
	return nil
}
