package engine

import (
	"context"
	"expvar"
	"fmt"
	"iter"
	"reflect"
	"runtime"

	"github.com/tensorbatch/tensorbatch/pinned"
)

// Loader delivers the batches of a Dataset, epoch by epoch. One epoch runs
// at a time; Close may be called from any goroutine, at any point.
//
// Close a Loader when done with it: that ends its worker goroutines and
// frees its pinned memory. As with an os.File, a Loader dropped without
// Close is closed when the garbage collector finds it unreachable, with a
// warning logged, but only then: call Close.
type Loader struct {
	l *loader // never referenced by the loader's goroutines
}

// New returns a loader of ds configured by cfg. An invalid config gives an
// error that names the field and what it accepts; a nil ds, or a typed nil
// (a nil *IterableDataset), an error that names the dataset.
func New(ds Dataset, cfg Config) (*Loader, error) {
	in, err := newLoader(ds, cfg)
	if err != nil {
		return nil, err
	}
	l := &Loader{l: in}
	// A leak backstop only: its argument is the inner loader, which
	// nothing of the loader's own refers back to l from.
	runtime.AddCleanup(l, (*loader).collected, in)
	return l, nil
}

// collected closes a loader whose Loader was garbage-collected without
// Close, and says so.
func (l *loader) collected() {
	l.mu.Lock()
	closed, workers := l.closed, len(l.workers)
	l.mu.Unlock()
	if closed {
		return
	}
	l.logger.Warn("tensorbatch: a Loader was garbage-collected without Close; closing it (call Close to free its workers and pinned memory promptly)",
		"workers", workers, "pinned_bytes", l.pool.Stats().Allocated)
	if err := l.Close(); err != nil {
		l.logger.Error("tensorbatch: closing a garbage-collected Loader", "err", err)
	}
}

// Epoch returns the batches of epoch, in sampler order. Ranging over it
// runs the epoch; each batch is recycled when the loop body returns unless
// it was retained. An error ends the sequence: a *SampleError at the
// failing sample's batch, after every batch before it, or the cause of
// ctx's cancellation, or ErrClosed.
//
// After Config.Resume, the first epoch run must be Resume.Epoch (which
// continues right after the saved batch) or a later one (which starts
// fresh, and the saved position is dropped); an earlier one is an error
// that names both epochs, so that a loop over every epoch from 0 does not
// replay the epochs the checkpoint already covered.
func (l *Loader) Epoch(ctx context.Context, epoch int) iter.Seq2[*Batch, error] {
	seq := l.l.Epoch(ctx, epoch)
	return func(yield func(*Batch, error) bool) {
		seq(yield)
		runtime.KeepAlive(l) // ranging over an epoch uses the Loader
	}
}

// Close stops the running epoch, if any, ends the workers and frees the
// cached buffers. A batch still retained stays valid: its memory is freed
// when it is released. With Config.Timeout, a Fill stuck past it does not
// hold Close up: its goroutine is abandoned (it ends on its own when Fill
// returns) and the buffer it writes is never reused (Stats.Abandoned,
// Stats.LeakedBytes); without a Timeout, Close waits for every Fill to
// return. It is safe to call more than once and from any goroutine,
// including a loop body; later calls return the first call's result.
func (l *Loader) Close() error { return l.l.Close() }

// Backend returns the backend batches are loaded for and why it was chosen.
func (l *Loader) Backend() pinned.Selection { return l.l.Backend() }

// Config returns the loader's configuration with defaults filled in.
func (l *Loader) Config() Config { return l.l.Config() }

// RankInfo returns this process's rank and the world size epochs are
// sharded over.
func (l *Loader) RankInfo() RankInfo { return l.l.RankInfo() }

// Stats returns the loader's counters.
func (l *Loader) Stats() Stats { return l.l.Stats() }

// Len returns the number of batches an epoch delivers on this rank, as
// len(loader) in PyTorch, or 0 when the dataset's Len is invalid. With a
// custom Sampler or BatchSampler it counts epoch 0's; an epoch resumed
// from Config.Resume delivers fewer.
func (l *Loader) Len() int { return l.l.Len() }

// State returns the loader's position after the last batch delivered: a
// new Loader with it as Config.Resume continues right after that batch.
// After an epoch's last batch it is the start of the next epoch.
func (l *Loader) State() State { return l.l.State() }

// Expvar returns the loader's Stats as an expvar.Var, to publish under a
// name of your choice: expvar.Publish("loader", l.Expvar()). Its JSON names
// carry their units: durations in seconds (_seconds), memory in bytes
// (_bytes), shares as fractions (_fraction); the rest are counts.
func (l *Loader) Expvar() expvar.Var {
	return expvar.Func(func() any { return l.Stats().expvarJSON() })
}

// isNil reports whether v is nil or a typed nil: a nil pointer, map,
// func, slice, channel or interface in an interface value, which a method
// call would dereference.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// checkDataset refuses a nil dataset, typed or not, given to fn.
func checkDataset(fn string, ds Dataset) error {
	switch {
	case ds == nil:
		return fmt.Errorf("engine: %s: nil dataset", fn)
	case isNil(ds):
		return fmt.Errorf("engine: %s: dataset is a nil %T", fn, ds)
	}
	if c, ok := ds.(interface{ check() error }); ok {
		if err := c.check(); err != nil {
			return fmt.Errorf("engine: %s: dataset: %w", fn, err)
		}
	}
	return nil
}
