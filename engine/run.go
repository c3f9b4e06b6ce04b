package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/pinned"
	"golang.org/x/sys/cpu"
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
	_       cpu.CacheLinePad
	done    atomic.Int64 // batches completed, for the consumer's spin
	slab    []Batch      // Batches not yet handed out (newBatch); guarded by mu
	_       cpu.CacheLinePad

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

	reader  epochReader // what the source runs beside the workers; see NOTE [sources]
	offset  int         // the number of batch 0 (a resumed epoch starts past 0)
	numbers []int       // with an out-of-order resume, batch k's number; nil: offset+k
}

// NOTE [lines]
//
// With a worker on one core and the consumer on another (Workers 1 most
// of all), every cache line both of them write in a batch's hand-off
// moves between the cores, on the order of 0.1 µs each on a 16-core
// Xeon, where filling a batch of 32 token windows takes about 5 µs. The
// run and the loader are laid out for that:
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
// takes it again to claim. On the Xeon (bench/RESULTS.md, "The hand-off
// of a batch, stop 33"), sample windows from a Megatron dataset at
// Workers 1 went from 0.80 to 0.82 of a memcpy of the same bytes, and
// the token windows of shards.Tokens from 0.54 to 0.65. Tried there and
// not kept: a worker spinning for a take before it sleeps on a full
// window, and a consumer spinning without yielding while a P is free.

// pending is a started batch. Once taken it is reused for a later batch
// of the run (newPending): the Batch delivered keeps nothing of it.
type pending struct {
	k        int   // its number in the epoch
	indices  []int // its samples' dataset indices: a materialized list's own slice, or own
	own      []int // where a lazy list's indices are computed, reused from batch to batch
	computed bool  // indices is own: the Batch computes them again when asked
	buf      *pinned.Buffer
	longest  []int          // each Dynamic field's longest sample, once complete
	dev      *pinned.Buffer // its device copy; nil on the cpu backend
	stream   pinned.Stream  // the stream the copy was issued on
	left     atomic.Int32   // samples not yet filled
	complete bool           // guarded by run.mu
	leaked   bool           // an abandoned worker may still write buf; guarded by run.mu
	err      error          // a *SampleError at the lowest position, or the copy's error; guarded by run.mu
	errPos   int
	failed   []failure // samples to skip (Config.OnError), in position order once complete; guarded by run.mu
	idx      []int     // the indices delivered, when samples were skipped
}

// failure is a sample that failed under a skip policy.
type failure struct {
	pos int
	err *SampleError
}

func newRun(ctx context.Context, l *loader, epoch int, batches batchList, workers []*worker) *run {
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
	r.budget = l.cfg.OnError.budget(batches.count(), batches.samples)
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

// claimed is a sample claimed to fill: its batch, the batch's number, its
// position (-1: the whole batch, for a BatchFiller) and dataset index.
type claimed struct {
	p             *pending
	k, pos, index int
}

// claim returns the next sample to fill. ok is false when there is
// nothing to claim: the run is over or stopped, or, when !block, the
// window is full.
func (r *run) claim(w *worker, block bool) (c claimed, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.claimLocked(w, block)
}

// claimLocked is claim with r.mu held.
func (r *run) claimLocked(w *worker, block bool) (c claimed, ok bool) {
	for {
		if r.stopped || r.nb >= r.batches.count() {
			return c, false
		}
		if w.id >= r.tune.active && w.id >= 0 { // not among the workers the tuner has active
			if !block {
				return c, false
			}
			r.cond.Wait()
			continue
		}
		w.yield = r.tune.active >= r.procs
		k := r.nb
		if r.started == k { // the cursor is at a batch nobody has started
			full := r.started-r.taken >= r.tune.limit(r.window)
			if r.starting || full || r.ring[k%r.window] != nil {
				if !block {
					return c, false
				}
				r.cond.Wait()
				continue
			}
			if !r.startBatch(k) {
				return c, false
			}
		}
		c = claimed{p: r.ring[k%r.window], k: k, pos: r.off}
		c.index = c.p.indices[c.pos]
		if r.bf != nil { // the whole batch: pos -1
			r.nb, r.off, c.pos = r.nb+1, 0, -1
			return c, true
		}
		if r.off++; r.off == len(c.p.indices) {
			r.nb, r.off = r.nb+1, 0
		}
		return c, true
	}
}

// startBatch gets batch k's buffer and indices: a cached buffer and a
// materialized batch at once; else, without holding r.mu, a buffer from
// Get and the indices of a lazy order (about 0.1 µs each, NOTE [feistel]),
// so that a wait in the pool (at MaxPinnedBytes), an allocation or the
// order's arithmetic never blocks the consumer or the other workers. At
// Workers 0 there are none, and a lazy order's indices with a cached
// buffer are computed holding r.mu, which saves a lock and a wake-up a
// batch. Called with r.mu held; reports whether the batch started.
func (r *run) startBatch(k int) bool {
	buf := r.l.pool.TryGet(r.layout.Size())
	p := r.newPending(k)
	if b, ok := r.batches.(sliceBatches); ok {
		p.indices = b[k]
	} else if buf != nil && len(r.workers) == 0 { // Workers 0: nobody to block
		p.indices, p.computed = r.lazyIndices(p, k), true
	}
	if buf == nil || p.indices == nil {
		r.starting = true
		r.mu.Unlock()
		if p.indices == nil {
			p.indices, p.computed = r.lazyIndices(p, k), true
		}
		var err error
		if buf == nil {
			buf, err = r.l.pool.Get(r.ctx, r.layout.Size())
		}
		r.mu.Lock()
		r.starting = false
		r.cond.Broadcast()
		switch {
		case r.stopped:
			if buf != nil {
				r.l.recycle(buf, nil)
			}
			return false
		case err != nil:
			r.fail(fmt.Errorf("engine: buffer for batch %d of epoch %d: %w", k, r.epoch, err))
			return false
		}
	}
	p.buf = buf
	p.left.Store(int32(len(p.indices)))
	r.ring[k%r.window] = p
	r.started++
	return true
}

// lazyIndices computes the indices of batch k of a lazy order into p.own.
func (r *run) lazyIndices(p *pending, k int) []int {
	n := r.batches.size(k)
	if cap(p.own) < n {
		p.own = make([]int, n)
	}
	return r.batches.batch(k, p.own[:n])
}

// newPending returns batch k's pending: a taken batch's, reset, or a new
// one. Called with r.mu held.
func (r *run) newPending(k int) *pending {
	n := len(r.free)
	if n == 0 {
		return &pending{k: k}
	}
	p := r.free[n-1]
	r.free = r.free[:n-1]
	*p = pending{k: k, own: p.own}
	return p
}

// work fills samples until there is nothing to claim, or until w is
// abandoned. While as many workers are active as GOMAXPROCS, they yield
// after each sample: a Fill that never blocks has no scheduling point, and
// the consumer, woken from its training step, would otherwise wait for a
// preemption (10 ms) before it could take the next batch. With fewer, a P
// is free for it.
func (r *run) work(w *worker, block bool) {
	if !r.initWorker(w) {
		return
	}
	for {
		c, ok := w.next, w.chained // claimed as its last batch completed
		w.next, w.chained = claimed{}, false
		if !ok {
			c, ok = r.claim(w, block)
		}
		if !ok {
			return
		}
		if c.pos < 0 {
			r.fillBatch(w, c.p, c.k)
		} else {
			r.fill(w, c.p, c.k, c.pos, c.index)
		}
		if w.gone() {
			return
		}
		if block && w.yield {
			runtime.Gosched()
		}
	}
}

// initWorker runs Config.WorkerInit once on w's goroutine, before its
// first Fill; a failure ends the run with an error naming the worker, and
// the worker tries again at its next run. Reports whether w may work.
func (r *run) initWorker(w *worker) bool {
	init := r.l.cfg.WorkerInit
	if init == nil || w.inited || w.id < 0 {
		return true
	}
	err := func() (err error) {
		returned := false
		defer func() {
			if v := recover(); v != nil {
				err, returned = fmt.Errorf("%w\n%s", panicError(v), debug.Stack()), true
			}
			if !returned { // runtime.Goexit: the goroutine is gone (NOTE [goexit])
				r.mu.Lock()
				r.fail(fmt.Errorf("engine: Config.WorkerInit of worker %d: %w", w.id, ErrGoexit))
				r.mu.Unlock()
			}
		}()
		err = init.InitWorker(r.ctx, w.id)
		returned = true
		return err
	}()
	if err != nil {
		r.mu.Lock()
		r.fail(fmt.Errorf("engine: Config.WorkerInit of worker %d: %w", w.id, err))
		r.mu.Unlock()
		return false
	}
	w.inited = true
	return true
}

// workOnce is the life of a per-epoch worker (Config.RestartWorkers).
// Deferred, so that a Goexit in a Fill leaves the run too.
func (r *run) workOnce(w *worker) {
	defer func() {
		w.exit(r.l)
		if !w.gone() {
			r.wg.Done()
		}
	}()
	r.work(w, true)
}

// fill runs the dataset's Fill for one sample, retried as Config.OnError
// says, and counts its batch down.
func (r *run) fill(w *worker, p *pending, k, pos, index int) {
	s := w.slot
	var err error
	var stack []byte
	for attempt := 0; ; attempt++ {
		s.reset(r.epoch, index, pos, r.layout, p.buf.Bytes()) // a retry draws the same random numbers
		s.reader = r.reader
		if r.l.zero {
			for i := range r.layout.Schema() {
				clear(s.TensorAt(i).Bytes())
			}
		} else {
			for _, df := range r.l.dyn {
				clear(s.TensorAt(df.lens).Bytes()) // a length left from an earlier batch would be wrong
			}
		}
		var start time.Duration
		timed := w.fills%fillSampling == 0
		if w.fills++; timed {
			start = mono()
		}
		err, stack = r.call(w, k, index, func(ctx context.Context) error { return r.l.ds.Fill(ctx, s) }, func(err error) {
			s.reader = nil
			r.l.samples.Add(1)
			r.batchFailed(p, pos, &SampleError{Index: index, Epoch: r.epoch, Worker: w.id, Err: err})
			if p.left.Add(-1-r.skipRest(p)) == 0 {
				r.complete(w, p, k, false)
			}
		})
		if w.gone() { // the run is over and p's buffer is leaked: touch nothing
			return
		}
		if timed {
			r.l.stats.fill.observeN(mono()-start, fillSampling)
		}
		if err == nil || !r.l.cfg.OnError.retry(attempt, err, stack) || r.sleep(r.l.cfg.OnError.backoff(attempt)) != nil {
			break
		}
		r.l.retried.Add(1)
	}
	s.reader = nil // the slot outlives the run
	r.l.samples.Add(1)
	if err == nil {
		err = r.checkLengths(p.buf.Bytes(), pos)
	}
	if err != nil {
		r.sampleFailed(p, pos, &SampleError{Index: index, Epoch: r.epoch, Worker: w.id, Err: err, Stack: stack})
	}
	if p.left.Add(-1) == 0 {
		r.complete(w, p, k, true)
	}
}

// sleep waits d or until the run's ctx is done.
func (r *run) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-t.C:
		return nil
	}
}

// fillBatch runs the dataset's FillBatch for all of batch k.
func (r *run) fillBatch(w *worker, p *pending, k int) {
	b := &w.bslot
	*b = BatchSlot{run: r, indices: p.indices, buf: p.buf.Bytes()}
	if r.l.zero {
		clear(b.buf)
	}
	err, stack := r.call(w, k, b.indices[0], func(ctx context.Context) error { return r.bf.FillBatch(ctx, b) }, func(err error) {
		*b = BatchSlot{}
		r.l.samples.Add(int64(len(p.indices)))
		r.batchFailed(p, 0, &SampleError{Index: p.indices[0], Epoch: r.epoch, Worker: w.id, Err: err})
		p.left.Store(0)
		r.complete(w, p, k, false)
	})
	if w.gone() {
		return
	}
	*b = BatchSlot{} // holds nothing of the run past the call
	indices := p.indices
	r.l.samples.Add(int64(len(indices)))
	if err != nil {
		var se *SampleError
		switch pos := slices.Index(indices, sampleIndex(err)); {
		case errors.As(err, &se) && pos >= 0:
			r.sampleFailed(p, pos, se)
		default:
			if se == nil {
				err = fmt.Errorf("engine: batch %d of epoch %d (worker %d): %w%s", k, r.epoch, w.id, err, stackNote(stack))
			}
			r.mu.Lock()
			p.err, p.errPos = err, 0
			r.mu.Unlock()
		}
	}
	for pos, index := range indices {
		if len(r.l.dyn) == 0 { // no Dynamic field: no length to check
			break
		}
		if err := r.checkLengths(p.buf.Bytes(), pos); err != nil {
			r.sampleFailed(p, pos, &SampleError{Index: index, Epoch: r.epoch, Worker: w.id, Err: err})
			break
		}
	}
	p.left.Store(0)
	r.complete(w, p, k, true)
}

// checkLengths checks the lengths of the Dynamic fields of the sample at
// pos: whoever wrote them (Slot.Sequence, or Fill writing "<name>_len"
// itself), each must be within [0, MaxLen] before PadStack reads it.
func (r *run) checkLengths(buf []byte, pos int) error {
	for _, df := range r.l.dyn {
		f := r.layout.Schema()[df.field]
		n := collate.As[int64](r.layout.Sample(buf, df.lens, pos))[0]
		if n < 0 || n > int64(f.MaxLen) {
			return fmt.Errorf("engine: field %q: length %d in %q, want 0 to MaxLen (%d)", f.Name, n, f.Name+lenSuffix, f.MaxLen)
		}
	}
	return nil
}

func stackNote(stack []byte) string {
	if stack == nil {
		return ""
	}
	return "\n" + string(stack)
}

// complete finishes batch k once its last sample is filled: the padding of
// its Dynamic fields, then its copy to the device. A panic there (a bug,
// never input: lengths are checked) becomes the batch's error. A batch
// with nothing to pad, compact or copy (no Dynamic field, the cpu
// backend, no sample skipped) is marked complete under one lock of r.mu
// instead of two, the one the consumer and the other workers contend for.
// With next, w claims its next sample under that lock too (finish).
func (r *run) complete(w *worker, p *pending, k int, next bool) {
	if len(r.l.dyn) == 0 && r.l.gpu == nil {
		r.mu.Lock()
		if p.err != nil || len(p.failed) == 0 {
			if p.err == nil {
				r.l.stats.pad.observe(0) // as below
			}
			r.finish(w, p, next)
			return
		}
		r.mu.Unlock()
	}
	err := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("engine: completing batch %d of epoch %d: %w\n%s", k, r.epoch, panicError(v), debug.Stack())
			}
		}()
		r.mu.Lock()
		failed := p.err != nil
		slices.SortFunc(p.failed, func(a, b failure) int { return a.pos - b.pos })
		r.mu.Unlock()
		if failed { // never delivered: no padding, no copy
			return nil
		}
		n := len(p.indices)
		if len(p.failed) > 0 || len(r.l.dyn) > 0 {
			start := time.Now()
			if len(p.failed) > 0 {
				p.idx = r.compact(p)
				n = len(p.idx)
			}
			var moved int
			p.longest, moved = padBatch(r.layout, r.l.dyn, p.buf.Bytes(), n)
			r.l.copied.Add(int64(moved))
			r.l.stats.pad.observe(time.Since(start))
		} else {
			r.l.stats.pad.observe(0) // nothing to pad or compact: no clock read
		}
		if r.l.gpu != nil && n > 0 {
			start := time.Now()
			defer func() { r.l.stats.copy.observe(time.Since(start)) }()
			return r.toDevice(w, p, k)
		}
		return nil
	}()
	r.mu.Lock()
	if err != nil && p.err == nil {
		p.err, p.errPos = err, -1
	}
	r.finish(w, p, next)
}

// finish marks batch p complete, wakes whoever waits for it and, with
// next, claims w's next sample under the same lock (for work), then
// unlocks r.mu, which the caller holds. The consumer's spin sees the
// batch complete only after the unlock, so that the consumer it ends
// finds r.mu free (NOTE [lines]).
func (r *run) finish(w *worker, p *pending, next bool) {
	p.complete = true
	r.notify()
	if next {
		w.next, w.chained = r.claimLocked(w, false)
	}
	r.mu.Unlock()
	r.done.Add(1)
}

// toDevice queues batch k's copy to device memory on the worker's stream,
// behind the recorded uses of the device buffer, and records the events
// of both buffers after it.
func (r *run) toDevice(w *worker, p *pending, k int) error {
	err := func() error {
		s, err := w.streamOn(r.l.gpu)
		if err != nil {
			return err
		}
		dev, err := r.l.dpool.Get(r.ctx, p.buf.Len())
		if err != nil {
			return err
		}
		p.dev, p.stream = dev, s
		if err := r.l.gpu.Upload(dev, p.buf, s); err != nil {
			return err
		}
		r.l.toDevice.Add(int64(p.buf.Len()))
		return nil
	}()
	if err != nil {
		return fmt.Errorf("engine: copy of batch %d of epoch %d to %s:%d: %w", k, r.epoch, r.l.gpu.Name(), r.l.gpu.Device(), err)
	}
	return nil
}

// errSampleDeadline is the cause of a per-sample ctx that ran past Timeout.
var errSampleDeadline = errors.New("sample deadline")

// call runs a fill of batch k from sample index on worker w, turning a
// panic into an error with its stack. With a Timeout, the fill's ctx
// expires and the worker tells the watchdog what it is filling.
//
// A fill that calls runtime.Goexit (t.FailNow, require's helpers) cannot
// be stopped from ending w's goroutine: exited runs on the way out, once
// the watchdog no longer sees w (so w cannot be abandoned any more), with
// the error to report for the sample; see NOTE [goexit].
func (r *run) call(w *worker, k, index int, fill func(ctx context.Context) error, exited func(error)) (err error, stack []byte) {
	returned := false
	defer func() { // registered first: runs last, after w.end
		if !returned && !w.gone() {
			exited(fmt.Errorf("%w (t.FailNow, log.Fatal or a helper that calls them); the worker goroutine is gone", ErrGoexit))
		}
	}()
	ctx := r.ctx
	if t := r.l.cfg.Timeout; t > 0 {
		w.begin(r, k, index)
		defer w.end()
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, t, errSampleDeadline)
		defer cancel()
		defer func() {
			if err != nil && context.Cause(ctx) == errSampleDeadline {
				err = fmt.Errorf("%w after %v: %w", ErrTimeout, t, err)
			}
		}()
	}
	defer func() {
		if v := recover(); v != nil {
			err, stack, returned = panicError(v), debug.Stack(), true
		}
	}()
	err = fill(ctx)
	returned = true
	return err, nil
}

// NOTE [goexit]
//
// runtime.Goexit in a Fill (t.FailNow and require's helpers call it) runs
// the deferred calls of the worker's goroutine and ends it; nothing can
// stop it. call notices it (its fill neither returned nor panicked) and,
// still on the way out, fails the sample's batch with a *SampleError
// wrapping ErrGoexit, whatever Config.OnError says (it is neither retried
// nor skipped: the goroutine the policy would go on with is gone), and
// counts the sample done, and the samples of its batch nobody claimed yet
// (they are never filled), so the batch completes and the consumer gets the
// error at its position, after every batch before it: those were claimed
// before this sample, by workers still alive. The epoch ends there. The
// worker's own deferred calls then leave the run (and the loader, for a
// persistent worker) as a returning worker would, and mark it lost: the
// next epoch starts a new worker in its place. With Workers 0 the Fill
// runs on the consumer's goroutine, which Goexit ends as if the loop body
// had called it: the epoch is finished by the iterator's deferred calls,
// so the loader stays usable and Close returns, but there is no consumer
// left to receive an error.

// sampleFailed records e in batch p, keeping the lowest position, so the
// error reported is the same whatever the scheduling.
func (r *run) sampleFailed(p *pending, pos int, e *SampleError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.l.cfg.OnError.skips() {
		p.failed = append(p.failed, failure{pos, e})
		return
	}
	if p.err == nil || pos < p.errPos {
		p.err, p.errPos = e, pos
	}
}

// batchFailed records e as batch p's error whatever Config.OnError says,
// keeping the lowest position.
func (r *run) batchFailed(p *pending, pos int, e *SampleError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.err == nil || pos < p.errPos {
		p.err, p.errPos = e, pos
	}
}

// skipRest moves the cursor past the samples of batch p nobody has
// claimed yet, which a failed batch does not need, and returns how many.
// The worker that would have claimed them may be gone (NOTE [goexit]).
func (r *run) skipRest(p *pending) int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nb != p.k {
		return 0
	}
	rest := len(p.indices) - r.off
	r.nb, r.off = p.k+1, 0
	return int32(rest)
}

// compact moves the samples of batch p that did not fail down over the
// ones that did, field by field, and returns their indices.
func (r *run) compact(p *pending) []int {
	buf := p.buf.Bytes()
	var kept []int
	moved := 0
	f := 0
	for pos, index := range p.indices {
		if f < len(p.failed) && p.failed[f].pos == pos {
			f++
			continue
		}
		if j := len(kept); j != pos {
			for i := range r.layout.Schema() {
				moved += copy(r.layout.Sample(buf, i, j).Bytes(), r.layout.Sample(buf, i, pos).Bytes())
			}
		}
		kept = append(kept, index)
	}
	r.l.copied.Add(int64(moved))
	return kept
}

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
			r.free = append(r.free, p)
			r.mu.Unlock()
			if err != nil {
				r.l.recycle(b.buf, b.dev)
				return nil, err
			}
			r.l.delivered(number)
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
// batchSlab: one allocation for many batches instead of one a batch
// (with startBatch's lock saved, BenchmarkBatchOverhead at Workers 0
// takes 0.86 of its time on a 16-core Xeon, 0.88 on 2 vCPUs:
// bench/RESULTS.md, stop 32). A Batch is never reused, so that a use
// after its last Release still panics instead of reading another batch;
// a retained one keeps its slab (batchSlab × 200 bytes) alive. Called
// with r.mu held.
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

// worker is one worker goroutine's state.
type worker struct {
	id     int
	slot   *Slot
	runs   chan *run     // persistent workers receive each epoch's run here
	stream pinned.Stream // its copies' stream, made at the first copy

	mu        sync.Mutex // guards what the timeout watchdog reads
	run       *run       // the run of the Fill in progress, with Timeout
	batch     int
	index     int
	since     time.Time
	abandoned atomic.Bool // stuck in a Fill past Timeout and left behind; set under mu
	lost      atomic.Bool // its goroutine ended by runtime.Goexit in a Fill
	inited    bool        // Config.WorkerInit ran; only w's goroutine touches it
	fills     int         // Fills run, for the sampling of their timing; only w's goroutine touches it
	bslot     BatchSlot   // handed to FillBatch, reused from batch to batch; only w's goroutine touches it
	next      claimed     // claimed by finish; only w's goroutine touches it
	chained   bool        // next holds a claim; only w's goroutine touches it
	yield     bool        // yield after the sample claimed (see work); only w's goroutine touches it
}

func newWorker(id int, seed uint64) *worker {
	s := newSlot(seed)
	s.worker = id
	return &worker{id: id, slot: s}
}

// loop is the life of a persistent worker: one run after another until
// its channel is closed by Close, or until it is abandoned, or until a
// Fill ends its goroutine with runtime.Goexit (see NOTE [goexit]).
func (w *worker) loop(l *loader) {
	var in *run // the run w is inside
	defer func() {
		w.exit(l)
		if w.gone() { // abandon counted it out
			return
		}
		if in != nil { // runtime.Goexit inside a run
			w.lost.Store(true)
			in.wg.Done()
		}
		l.wg.Done()
	}()
	for r := range w.runs {
		in = r
		r.work(w, true)
		in = nil
		if w.gone() {
			return
		}
		r.wg.Done()
	}
}

// exit destroys the worker's stream at the end of its life; queued copies
// still complete.
func (w *worker) exit(l *loader) {
	if err := w.close(l); err != nil {
		l.logger.Error("tensorbatch: ending a worker", "err", err)
	}
}

// streamOn returns the worker's stream, making it at the first copy.
func (w *worker) streamOn(g *pinned.GPU) (pinned.Stream, error) {
	if w.stream == 0 {
		s, err := g.NewStream()
		if err != nil {
			return 0, err
		}
		w.stream = s
	}
	return w.stream, nil
}

// close destroys the worker's stream; queued copies still complete.
func (w *worker) close(l *loader) error {
	if w.stream == 0 {
		return nil
	}
	s := w.stream
	w.stream = 0
	return l.gpu.DestroyStream(s)
}

func (w *worker) begin(r *run, k, index int) {
	w.mu.Lock()
	w.run, w.batch, w.index, w.since = r, k, index, time.Now()
	w.mu.Unlock()
}

func (w *worker) end() {
	w.mu.Lock()
	w.run = nil
	w.mu.Unlock()
}

// gone reports whether w was abandoned. Stable once its Fill has returned.
func (w *worker) gone() bool { return w.abandoned.Load() }

// busyOn reports the sample w is filling for run r in batch k or earlier,
// and for how long.
func (w *worker) busyOn(r *run, k int) (index int, d time.Duration, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.run != r || w.batch > k {
		return 0, 0, false
	}
	return w.index, time.Since(w.since), true
}

// abandon leaves w behind when it has been in one Fill for longer than
// Timeout: the worker no longer counts as inside its run (nor, persistent,
// as a live worker of the loader), and the buffer it writes is leaked. When
// its Fill finally returns, the worker touches nothing and ends. See NOTE
// [shutdown].
func (w *worker) abandon(l *loader) {
	w.mu.Lock()
	r, k, index, d := w.run, w.batch, w.index, time.Since(w.since)
	if r == nil || w.abandoned.Load() || d <= l.cfg.Timeout {
		w.mu.Unlock()
		return
	}
	w.abandoned.Store(true)
	w.mu.Unlock()
	r.leak(k)
	l.abandoned.Add(1)
	l.logger.Warn("tensorbatch: abandoning a worker stuck in Fill past Timeout; its batch buffer is leaked",
		"worker", w.id, "index", index, "epoch", r.epoch, "running", d.Round(time.Millisecond), "timeout", l.cfg.Timeout)
	r.wg.Done()
	if w.runs != nil {
		l.wg.Done()
	}
}
