package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
)

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
	*b = BatchSlot{run: r, indices: p.indices, outer: p.indices, buf: p.buf.Bytes(), slot: w.slot}
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
