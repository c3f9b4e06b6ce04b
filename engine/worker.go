package engine

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorbatch/tensorbatch/pinned"
)

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
