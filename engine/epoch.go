package engine

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
)

// run is one epoch in progress. Workers advance one cursor over the
// epoch's samples in sampler order, so they all work on the oldest
// unfinished batch first; a batch may start only while fewer than window
// batches are started and not yet taken by the consumer. Each batch counts
// its samples down and the worker that fills the last one completes it.
// The consumer takes batches in order.
type run struct {
	// What a claim and a take write under mu, on a cache line of its own,
	// then, a line on, what the consumer spins on and writes alone: see
	// NOTE [lines].
	mu      sync.Mutex
	nb, off int        // the cursor: the next sample is batch nb's index at off
	started int        // batches started (buffer taken)
	taken   int        // batches taken by the consumer
	free    []*pending // taken batches' pendings, for the next ones
	_       cacheLinePad
	done    atomic.Int64 // batches completed, for the consumer's spin
	slab    []Batch      // Batches not yet handed out (newBatch); guarded by mu
	_       cacheLinePad

	l       *loader
	epoch   int
	batches batchList // computed per batch when lazy: a pending batch holds its indices
	layout  *collate.Layout
	window  int    // the ring's size: the most batches ever in flight
	procs   int    // GOMAXPROCS at the start
	tune    *tuner // the batches in flight now and the active workers
	workers []*worker
	bf      BatchFiller // the dataset, when it fills whole batches
	ctx     context.Context
	cancel  context.CancelCauseFunc
	unwatch func() bool    // stops watching the caller's ctx
	wg      sync.WaitGroup // workers inside the run

	cond     *sync.Cond    // signalled when a claim may proceed
	changed  chan struct{} // made when the consumer waits; closed and dropped when a batch completes or the run stops
	starting bool          // a worker is getting the buffer of batch started
	stopped  bool
	ring     []*pending // batch k at ring[k%window], from start to take
	skipped  int        // samples skipped so far (Config.OnError), counted in delivery order
	budget   int        // samples the epoch may skip
	err      error      // a failure of the run itself (not of a sample)

	// The consumer's count of the run's deliveries, for its progress
	// lines (Config.LogEvery): the time of the first, batches and samples.
	t0             time.Time
	taken1, tookSm int

	reader  epochReader // what the access runs beside the workers; see NOTE [access]
	offset  int         // the number of batch 0 (a resumed epoch starts past 0)
	numbers []int       // with an out-of-order resume, batch k's number; nil: offset+k
}

// NOTE [lines]
//
// With a worker on one core and the consumer on another (Workers 1 most
// of all), every cache line both of them write in a batch's hand-off
// moves between the cores, a cost of the order of a tenth of a
// microsecond each, against a few microseconds to fill a batch of token
// sequences. The run and the loader are laid out for that:
//
//   - what a claim and a take write under mu share the run's first line
//     (on amd64 the run takes 512 bytes, a size the allocator hands out
//     on 64-byte boundaries);
//   - the counter the consumer spins on (done) is a line past them, with
//     the slab of Batches only the consumer touches, and nothing else;
//   - the loader's counters that the workers add to a batch are on
//     lines apart from the ones the consumer writes (pos, batches).
//
// A worker that completes a batch claims its next sample under the same
// lock (finish), and adds to done only once it has unlocked: the consumer
// that done wakes finds mu free, instead of spinning on it while the worker
// takes it again to claim. BenchmarkMegatronSequences and BenchmarkTokens
// at Workers 1 measure the hand-off against a memcpy of the same bytes;
// by them, these were tried and not kept: a worker spinning for a take
// before it sleeps on a full window, a consumer spinning without
// yielding while a P is free.

// newRun starts the run of batches, the epoch's (or, resumed, what is
// left of them), whose skip budget is whole's, the whole epoch's.
func newRun(ctx context.Context, l *loader, epoch int, batches, whole batchList, workers []*worker) *run {
	r := &run{
		l:       l,
		epoch:   epoch,
		batches: batches,
		layout:  l.layout,
		window:  l.cfg.window(),
		procs:   runtime.GOMAXPROCS(0),
		tune:    l.tune,
		workers: workers,
	}
	r.ring = make([]*pending, r.window)
	r.budget = l.cfg.OnError.budget(whole.count(), whole.samples)
	r.bf, _ = l.ds.(BatchFiller)
	r.cond = sync.NewCond(&r.mu)
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	// Wake claimers in cond.Wait when the caller's ctx is done. The
	// callback may run at once, even before AfterFunc returns: it touches
	// only what is set above, never r.unwatch.
	r.unwatch = context.AfterFunc(ctx, func() { r.halt(context.Cause(ctx)) })
	return r
}

// notify wakes everyone waiting on the run. Called with r.mu held.
func (r *run) notify() {
	r.cond.Broadcast()
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// stop ends the run with cause (nil: it ended normally or was abandoned)
// and stops watching the caller's ctx.
func (r *run) stop(cause error) {
	r.unwatch()
	r.halt(cause)
}

// halt cancels the run's ctx with cause and wakes everyone waiting on it.
func (r *run) halt(cause error) {
	r.cancel(cause)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.stopped = true
		r.notify()
	}
}

// fail stops the run with an error the consumer reports. Called with r.mu held.
func (r *run) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.stopped = true
	r.notify()
}

// stopErr says why a stopped run stopped. Called with r.mu held.
func (r *run) stopErr() error {
	if r.err != nil {
		return r.err
	}
	if err := context.Cause(r.ctx); err != nil {
		return err
	}
	return ErrClosed
}

// recycle puts the buffers of batches started but never taken back into
// the pool, except those an abandoned worker may still write. Called once
// every worker has left the run or been abandoned.
func (r *run) recycle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.ring {
		if p != nil && !p.leaked {
			r.l.recycle(p.buf, p.dev)
		}
		r.ring[i] = nil
	}
}

// leak marks batch k's buffer as written by an abandoned worker: it is
// never reused nor freed.
func (r *run) leak(k int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.ring[k%r.window]; p != nil && !p.leaked {
		p.leaked = true
		r.l.leaked.Add(int64(p.buf.Cap()))
	}
}
