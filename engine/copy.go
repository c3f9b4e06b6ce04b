package engine

import (
	"fmt"
	"runtime/debug"
	"slices"
	"time"
)

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
