package engine

import (
	"fmt"
	"sync/atomic"

	"github.com/tensorbatch/tensorbatch/pinned"
)

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
// Get and the indices of a lazy order (NOTE [feistel];
// BenchmarkShuffledPosition), so that a wait in the pool (at
// MaxPinnedBytes), an allocation or the order's arithmetic never blocks
// the consumer or the other workers. At Workers 0 there are none, and a
// lazy order's indices with a cached buffer are computed holding r.mu,
// which saves a lock and a wake-up a batch. Called with r.mu held; reports whether the batch started.
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
