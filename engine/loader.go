package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"math/big"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// loader is a Loader's state. Every goroutine the loader starts (workers,
// the watchers of a run's ctx, a stream's reader) holds this inner struct,
// never the Loader handed to the caller, so that a Loader dropped without
// Close becomes unreachable and its cleanup closes the loader (see New).
type loader struct {
	ds     Dataset
	access access // how ds's epochs are ordered and read; see NOTE [access]
	cfg    Config
	sel    pinned.Selection
	rank   RankInfo
	gpu    *pinned.GPU  // nil on the cpu backend
	pool   *pinned.Pool // host buffers
	dpool  *pinned.Pool // device buffers; nil on the cpu backend
	logger *slog.Logger

	mu       sync.Mutex
	layout   *collate.Layout // grows to the largest batch seen
	consumer *worker         // the consumer's goroutine as a worker, when Workers is 0
	dyn      []dynField      // the Dynamic fields and their length fields
	zero     bool            // zero a buffer before Fill: neither Config.SkipZeroing nor a FullWriter
	checked  bool            // lease every batch's tensors (Config.CheckReleased)
	fp       Fingerprint     // the dataset's and its order's, for State.Dataset
	active   *run
	closed   bool
	workers  []*worker      // persistent workers; nil until the first epoch
	wg       sync.WaitGroup // persistent worker goroutines

	closeOnce    sync.Once
	dropLastOnce sync.Once // the warning of warnDropLast
	closeErr     error

	tune    *tuner   // guarded by the active run's mu
	pos     position // where the epochs stand, for State
	resumed bool     // Config.Resume has been applied

	// The workers write the counters below, the consumer pos above and
	// batches after the stats (and stats.wait): see NOTE [lines].
	_                         cacheLinePad
	samples, copied, toDevice atomic.Int64
	abandoned, leaked         atomic.Int64
	retried, skipped          atomic.Int64
	stats                     stages
	batches                   atomic.Int64
	epochNanos                atomic.Int64 // time inside finished epochs

	statsMu     sync.Mutex
	skippedList []SkippedSample
	epochStart  time.Time // of the running epoch; zero when none runs
}

// newLoader returns the loader of New.
func newLoader(ds Dataset, cfg Config) (*loader, error) {
	if ds == nil {
		return nil, errors.New("engine: New: nil Dataset")
	}
	if err := checkDataset("New", ds); err != nil {
		return nil, err
	}
	autoWorkers, autoPrefetch := cfg.Workers == AutoWorkers, cfg.PrefetchFactor == AutoPrefetch && cfg.Workers != 0
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	schema := ds.Schema()
	if err := schema.Validate(); err != nil {
		return nil, fmt.Errorf("engine: Dataset.Schema: %w", err)
	}
	n, err := datasetLen(ds)
	if err != nil {
		return nil, err
	}
	full, dyn, err := withLengths(schema)
	if err != nil {
		return nil, fmt.Errorf("engine: Dataset.Schema: %w", err)
	}
	layout, err := newLayout(full, cfg.BatchSize)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkPinned(layout); err != nil {
		return nil, err
	}
	rank, err := cfg.rankInfo()
	if err != nil {
		return nil, err
	}
	if rank.WorldSize > 1 {
		slog.Info("tensorbatch: splitting epochs across ranks", "rank", rank.Rank, "world_size", rank.WorldSize, "from", rank.From,
			"local_rank", rank.LocalRank, "local_from", rank.LocalFrom)
	}
	checked, err := cfg.checkReleased()
	if err != nil {
		return nil, err
	}
	sel, err := pinned.Select(cfg.Backend)
	if err != nil {
		return nil, fmt.Errorf("engine: Config.Backend: %w", err)
	}
	l := &loader{
		ds:      ds,
		access:  accessOf(ds),
		cfg:     cfg,
		sel:     sel,
		rank:    rank,
		pool:    pinned.NewPool(sel.Backend, cfg.MaxPinnedBytes, poolOptions(cfg)...),
		logger:  slog.Default(),
		layout:  layout,
		dyn:     dyn,
		zero:    !cfg.SkipZeroing && !writesEveryByte(ds),
		checked: checked,
	}
	if g, ok := sel.Backend.(*pinned.GPU); ok {
		l.gpu = g
		l.dpool = pinned.NewDevicePool(g, cfg.MaxPinnedBytes)
	}
	l.tune = newTuner(cfg, autoWorkers, autoPrefetch)
	if cfg.Workers == 0 {
		l.consumer = newWorker(-1, cfg.Seed)
	}
	if err := l.access.check(cfg, rank); err != nil {
		return nil, err
	}
	if l.fp, err = l.fingerprintOnce(); err != nil {
		return nil, err
	}
	if cfg.Resume != nil {
		if err := l.checkResume(cfg.Resume, n); err != nil {
			return nil, err
		}
	}
	l.logger.Debug("tensorbatch: loader", "config", cfg)
	return l, nil
}

func poolOptions(cfg Config) []pinned.PoolOption {
	if cfg.WriteCombined {
		return []pinned.PoolOption{pinned.WriteCombined()}
	}
	return nil
}

// Backend returns the backend batches are loaded for and why it was chosen.
func (l *loader) Backend() pinned.Selection { return l.sel }

// Config returns the loader's configuration with defaults filled in.
func (l *loader) Config() Config { return l.cfg }

// RankInfo returns this process's rank and the world size epochs are
// split over.
func (l *loader) RankInfo() RankInfo { return l.rank }

// batchSampler returns this rank's batch sampler for a dataset of n
// samples, skipping the first skip units of the epoch's order, and its
// batches per epoch when known without running it, else -1.
func (l *loader) batchSampler(n, skip int) (BatchSampler, int) {
	return l.access.batches(l.cfg, l.rank, n, skip)
}

// Epoch returns the batches of epoch, in sampler order. Ranging over it
// runs the epoch; each batch is recycled when the loop body returns unless
// it was retained. An error ends the sequence: a *SampleError at the
// failing sample's batch, after every batch before it, or the cause of
// ctx's cancellation, or ErrClosed; for an IterableDataset, also a read
// error after the last batch (a shard with more or fewer records than
// listed, beyond the records of the batches).
func (l *loader) Epoch(ctx context.Context, epoch int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		r, err := l.start(ctx, epoch)
		if err != nil {
			yield(nil, err)
			return
		}
		defer l.finish(r)
		for k := range r.batches.count() {
			b, err := r.take(k)
			if err != nil {
				yield(nil, err)
				return
			}
			if b == nil { // every sample skipped (Config.OnError)
				continue
			}
			if !yieldBatch(yield, b) {
				return
			}
			l.progress(r, b)
		}
		if err := r.reader.wait(ctx); err != nil {
			yield(nil, err)
		}
	}
}

// yieldBatch hands b to the loop body and drops the loop's reference when
// the body returns, even by panic.
func yieldBatch(yield func(*Batch, error) bool, b *Batch) bool {
	defer b.endLoop()
	return yield(b, nil)
}

// start sets up the run of one epoch and hands it to the workers.
func (l *loader) start(ctx context.Context, epoch int) (*run, error) {
	if epoch < 0 {
		return nil, fmt.Errorf("engine: epoch %d, want >= 0", epoch)
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, ErrClosed
	case l.active != nil:
		return nil, ErrBusy
	}
	l.tune.epoch()
	var resume *State
	if st := l.cfg.Resume; st != nil && !l.resumed {
		switch {
		case epoch < st.Epoch:
			return nil, fmt.Errorf("engine: Epoch(%d) before epoch %d of Config.Resume: the resumed loader continues at epoch %d (run epochs from Resume.Epoch on)", epoch, st.Epoch, st.Epoch)
		case epoch == st.Epoch:
			resume = st
		}
	}
	var skip int
	if resume != nil {
		skip = resume.Position
	}
	batches, err := l.epochBatches(epoch, skip)
	if err != nil {
		return nil, err
	}
	whole := batches // what a SkipFraction is of: the whole epoch, where resumed too
	if resume != nil && l.cfg.OnError.SkipFraction > 0 {
		if whole, err = l.epochBatches(epoch, 0); err != nil {
			return nil, err
		}
	}
	if batches.count() == 0 && skip == 0 && l.cfg.DropLast {
		l.warnDropLast(epoch)
	}
	numbers := l.track(epoch, resume, batches)
	batches = dropDone(batches, numbers, l.pos.offset)
	capacity := 0
	if _, lazy := batches.(lazyBatches); lazy && batches.count() > 0 {
		capacity = batches.size(0) // the first batch is the largest
	} else {
		for k := range batches.count() {
			capacity = max(capacity, batches.size(k))
		}
	}
	if capacity > l.layout.Cap() {
		layout, err := newLayout(l.layout.Schema(), capacity)
		if err != nil {
			return nil, fmt.Errorf("engine: epoch %d has a batch of %d samples: %w", epoch, capacity, err)
		}
		if err := l.cfg.checkPinned(layout); err != nil {
			return nil, err
		}
		l.layout = layout
	}
	for i, w := range l.workers {
		if w.gone() || w.lost.Load() { // abandoned in a stuck Fill, or ended by Goexit: a new worker takes its place
			l.workers[i] = l.startWorker(i)
		}
	}
	workers := l.workers
	reader := l.access.begin(l.cfg, l.rank, epoch, batches) // after the last step that may fail
	if l.cfg.Workers > 0 && workers == nil {
		workers = make([]*worker, l.cfg.Workers)
		for i := range workers {
			if l.cfg.RestartWorkers {
				workers[i] = newWorker(i, l.cfg.Seed)
			} else {
				workers[i] = l.startWorker(i)
			}
		}
		if !l.cfg.RestartWorkers {
			l.workers = workers
		}
	}
	r := newRun(ctx, l, epoch, batches, whole, workers)
	r.offset, r.numbers, r.reader, r.skipped = l.pos.offset, numbers, reader, l.pos.skipped
	r.wg.Add(len(workers))
	for _, w := range workers {
		if w.runs != nil {
			w.runs <- r
		} else {
			go r.workOnce(w)
		}
	}
	l.active = r
	l.resumed = l.cfg.Resume != nil
	l.statsMu.Lock()
	l.epochStart = time.Now()
	l.statsMu.Unlock()
	return r, nil
}

// track starts the position of an epoch of batches, resumed from st when
// set, and returns the batch numbers of an out-of-order resume (nil
// otherwise: batch k is number offset+k). Called with l.mu held.
func (l *loader) track(epoch int, st *State, batches batchList) (numbers []int) {
	unit := l.unit()
	p := position{epoch: epoch, unit: unit, batches: batches.count(), ran: true}
	if st != nil {
		p.base, p.offset = st.Position, st.Position/unit
		if st.WorldSize == 1 && l.rank.WorldSize == 1 { // see State.Skipped
			p.skipped = st.Skipped
		}
		if len(st.Done) > 0 { // increasing, checked by New: one merge, linear
			numbers = make([]int, 0, batches.count())
			done := st.Done
			for i := range batches.count() {
				for len(done) > 0 && done[0] < p.offset+i {
					done = done[1:]
				}
				if len(done) > 0 && done[0] == p.offset+i {
					p.deliver(p.offset + i)
				} else {
					numbers = append(numbers, p.offset+i)
				}
			}
		}
	}
	l.pos = p
	return numbers
}

// dropDone keeps the batches whose numbers (offset + position) are listed,
// when numbers is set.
func dropDone(batches batchList, numbers []int, offset int) batchList {
	if numbers == nil {
		return batches
	}
	keep := make([]int, len(numbers))
	for i, k := range numbers {
		keep[i] = k - offset
	}
	return pickedBatches{batches, keep}
}

// delivered records batch number k of the running epoch, with its
// skipped samples, as consumed: handed to the consumer, or skipped whole.
func (l *loader) delivered(k, skipped int) {
	l.mu.Lock()
	l.pos.deliver(k)
	l.pos.skipped += skipped
	l.mu.Unlock()
}

// progress logs a progress line every Config.LogEvery batches.
//
// Its rate is the samples a second since the epoch's first batch on this
// run, and the time left the epoch's batches still to come at the rate
// of the batches so far.
func (l *loader) progress(r *run, b *Batch) {
	e := l.cfg.LogEvery
	if e <= 0 {
		return
	}
	if r.taken1++; r.taken1 == 1 {
		r.t0 = time.Now()
	} else {
		r.tookSm += b.Len()
	}
	if l.batches.Load()%int64(e) != 0 {
		return
	}
	st := l.Stats()
	rate, left := "", ""
	if el := time.Since(r.t0); r.taken1 > 1 && el > 0 {
		rate = fmt.Sprintf("%.1f", float64(r.tookSm)/el.Seconds())
		rest := r.batches.count() - r.taken1
		left = (el / time.Duration(r.taken1-1) * time.Duration(rest)).Round(time.Second).String()
	}
	l.logger.Info("tensorbatch: progress", "epoch", r.epoch, "batch", b.number, "of", r.batches.count()+r.offset,
		"samples_per_s", rate, "epoch_left", left,
		"batches", st.Batches, "data_bound", fmt.Sprintf("%.1f%%", 100*st.DataBound), "in_flight", st.InFlight)
}

// warnDropLast warns, once per loader, that DropLast left epoch without a
// batch because BatchSize exceeds the samples on this rank.
func (l *loader) warnDropLast(epoch int) {
	n, err := datasetLen(l.ds)
	if err != nil {
		return
	}
	bs, _ := l.batchSampler(n, 0)
	b, ok := bs.(Batched)
	if !ok {
		return
	}
	samples := func() (m int) {
		defer func() { recover() }() // a sampler that panics failed the epoch already
		if ls, ok := b.Sampler.(lazySampler); ok {
			if o, ok := ls.lazy(epoch); ok {
				return o.len()
			}
		}
		return len(b.Sampler.Order(epoch))
	}()
	if samples == 0 {
		return
	}
	l.dropLastOnce.Do(func() {
		l.logger.Warn(fmt.Sprintf("tensorbatch: DropLast drops every sample: BatchSize %d exceeds the %d samples of an epoch on this rank, so epochs deliver no batch", b.Size, samples),
			"epoch", epoch, "batch_size", b.Size, "samples", samples, "rank", l.rank.Rank, "world_size", l.rank.WorldSize)
	})
}

// startWorker starts persistent worker id. Called with l.mu held.
func (l *loader) startWorker(id int) *worker {
	w := newWorker(id, l.cfg.Seed)
	w.runs = make(chan *run, 1)
	l.wg.Add(1)
	go w.loop(l)
	return w
}

// maxSamples bounds Dataset.Len where the epoch's order is materialized
// (a custom Sampler or BatchSampler, an IterableDataset), 8 bytes a
// sample; maxLazySamples bounds it where the order is computed per
// position (Shuffle, Sequential), with room for the arithmetic of
// padding and batching.
const (
	maxSamples     = 1 << 34
	maxLazySamples = math.MaxInt >> 1
)

// datasetLen calls ds.Len and checks the result.
func datasetLen(ds Dataset) (n int, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("engine: Dataset.Len: %w", panicError(v))
		}
	}()
	switch n = ds.Len(); {
	case n < 0:
		return 0, fmt.Errorf("engine: Dataset.Len is %d, want >= 0", n)
	case n > maxLazySamples:
		return 0, fmt.Errorf("engine: Dataset.Len is %d, more than the %d samples an epoch's order can hold", n, maxLazySamples)
	}
	return n, nil
}

// lazyLister is a BatchSampler whose batches the loader can compute one
// at a time (Batched over Shuffled or Sequential; NOTE [feistel]).
type lazyLister interface {
	lazyList(epoch int) (lazyBatches, bool)
}

// epochBatches returns the batches of epoch from the dataset's length at
// this epoch, checked, with a panic of a sampler turned into an error,
// skipping the first skip units of the epoch's global order. The default
// samplers' batches are computed per batch; others are materialized.
func (l *loader) epochBatches(epoch, skip int) (list batchList, err error) {
	n, err := datasetLen(l.ds)
	if err != nil {
		return nil, fmt.Errorf("epoch %d: %w", epoch, err)
	}
	defer func() {
		if v := recover(); v != nil {
			if oe, ok := v.(orderError); ok {
				err = fmt.Errorf("epoch %d: %w", epoch, oe.error)
				return
			}
			err = fmt.Errorf("engine: the sampler of epoch %d over %d samples: %w", epoch, n, panicError(v))
		}
	}()
	bs, _ := l.batchSampler(n, skip)
	field := "Sampler"
	if l.cfg.BatchSampler != nil {
		field = "BatchSampler"
	}
	if ll, ok := bs.(lazyLister); ok {
		if list, ok := ll.lazyList(epoch); ok {
			if span := list.o.span(); span > n {
				return nil, configError(field, "gives indices up to %d in epoch %d; the dataset has %d samples", span-1, epoch, n)
			}
			return list, nil
		}
	}
	if n > maxSamples {
		return nil, fmt.Errorf("epoch %d: engine: Dataset.Len is %d, more than the %d samples an epoch's materialized order can hold (only Shuffle and Sequential orders are computed per position)", epoch, n, maxSamples)
	}
	return sliceBatches(bs.Batches(epoch)), nil // checked by rankSplit or rankBatches
}

// newLayout lays out batches of size samples; a batch too large to address
// is an error that names BatchSize and the bytes it would take. An invalid
// schema is the schema's error, whatever size is: New validates the layout
// schema before it gets here, so this is a backstop.
func newLayout(s collate.Schema, size int) (*collate.Layout, error) {
	layout, err := collate.NewLayout(s, size)
	switch {
	case err == nil:
		return layout, nil
	case errors.Is(err, collate.ErrSchema):
		return nil, fmt.Errorf("engine: Dataset.Schema: %w", err)
	}
	sample := new(big.Int)
	for _, f := range s {
		sample.Add(sample, big.NewInt(int64(f.Bytes())))
	}
	total := new(big.Int).Mul(sample, big.NewInt(int64(size)))
	return nil, configError("BatchSize", "%d samples of %d bytes is %s bytes a batch, more than a buffer can address: %v", size, sample, total, err)
}

// NOTE [shutdown]
//
// An epoch ends when its consumer returns from the range loop: at the end
// of the batches, at an error, at a break, or at ctx's cancellation. finish
// then stops the run (its ctx is cancelled and waiting workers are woken),
// waits until every worker has left it, and puts the buffers of batches
// that were started but never taken back into the pool. With Workers 0 it
// also ends the consumer's stream, which only the consumer's goroutine
// touches. Workers therefore never touch a run's buffers after finish
// returns, and no batch buffer is lost. Close stops the active run too, so
// that its workers leave it, ends the persistent workers by closing their
// channels and waits for them (each destroys its own stream), and closes
// the pools: cached buffers are freed at once, and buffers still held (a
// retained batch, the batch in a loop body, the run being finished) are
// freed as they come back. Per-epoch workers are goroutines of one run and
// end with it, so Close from inside a loop body cannot deadlock.
//
// A Fill that ignores its ctx would make both waits hang. With a Timeout,
// finish and Close abandon a worker once its Fill has run longer than
// Timeout (worker.abandon): it is counted done in the run (and, if
// persistent, in the loader), and the buffer of its batch is marked leaked,
// so recycle skips it and the pool never reuses or frees it. The abandoned
// goroutine ends on its own when its Fill returns, touching nothing; a new
// persistent worker takes its place at the next epoch. Without a Timeout
// there is no telling a stuck Fill from a slow one, and the waits wait.

// finish ends run r; see NOTE [shutdown].
func (l *loader) finish(r *run) {
	r.stop(nil)
	l.await(&r.wg, r.workers)
	r.reader.end()
	r.recycle()
	if l.consumer != nil { // Workers 0: its stream ends here, on its own goroutine
		if err := l.consumer.close(l); err != nil {
			l.logger.Error("tensorbatch: ending the consumer's stream", "err", err)
		}
	}
	l.mu.Lock()
	l.active = nil
	l.mu.Unlock()
	l.statsMu.Lock()
	l.epochNanos.Add(int64(time.Since(l.epochStart)))
	l.epochStart = time.Time{}
	l.statsMu.Unlock()
}

// release recycles the buffers of a delivered batch. On a GPU backend it
// first records the consumer's use of the device buffer on the streams
// named for the batch (Config.Stream, Batch.RecordStream), or on the legacy
// default stream when none is, so that the next copy into it waits for
// that work.
func (l *loader) release(host, dev *pinned.Buffer, streams []pinned.Stream) {
	if dev != nil {
		if l.cfg.Stream != 0 {
			streams = append(streams, pinned.Stream(l.cfg.Stream))
		}
		if len(streams) == 0 {
			streams = []pinned.Stream{pinned.LegacyStream}
		}
		if err := l.gpu.RecordUse(dev, streams...); err != nil {
			l.logger.Error("tensorbatch: recording the consumer's streams on a device buffer", "err", err)
		}
	}
	l.recycle(host, dev)
}

// recycle puts a batch's buffers back into their pools. With a GPU backend
// each is fenced by its own event, recorded after the batch's copy: the
// host buffer is read by the copy, and the device buffer written by it.
func (l *loader) recycle(host, dev *pinned.Buffer) {
	err := l.pool.Put(host, l.fence(host))
	if dev != nil {
		err = errors.Join(err, l.dpool.Put(dev, l.fence(dev)))
	}
	if err != nil {
		l.logger.Error("tensorbatch: freeing a batch buffer", "err", err)
	}
}

// await waits for wg, the workers inside a run or the live persistent
// workers. With a Timeout, a worker stuck in one Fill for longer is
// abandoned (which counts it done), so a Fill that ignores its ctx cannot
// hang the consumer or Close; see NOTE [shutdown].
func (l *loader) await(wg *sync.WaitGroup, workers []*worker) {
	t := l.cfg.Timeout
	if t <= 0 || len(workers) == 0 {
		wg.Wait()
		return
	}
	done := make(chan struct{})
	go func() { // ends once every worker is done or abandoned
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(max(t/8, time.Millisecond))
	defer tick.Stop()
	for {
		for _, w := range workers {
			w.abandon(l)
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// fence is what a buffer waits for before reuse: its event's last record.
func (l *loader) fence(b *pinned.Buffer) pinned.Fence {
	if l.gpu == nil {
		return nil
	}
	return l.gpu.Fence(b.Event())
}

// Close stops the running epoch, if any, ends the workers and frees the
// cached buffers; see NOTE [shutdown]. It is safe to call more than once
// and from any goroutine; later calls return the first call's result.
func (l *loader) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		r, workers := l.active, l.workers
		l.workers = nil
		l.mu.Unlock()
		if r != nil {
			r.stop(ErrClosed)
		}
		for _, w := range workers {
			close(w.runs)
		}
		l.await(&l.wg, workers)
		errs := []error{l.pool.Close()}
		if l.dpool != nil {
			errs = append(errs, l.dpool.Close())
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// Stats is a snapshot of a loader's counters. Times and histograms cover
// every epoch so far, the running one included.
type Stats struct {
	Batches       int64 // batches delivered
	Samples       int64 // samples filled (a retried sample once)
	BytesCopied   int64 // bytes the loader copied into batch buffers (0 on the Fill path)
	BytesToDevice int64 // bytes copied host to device
	Pool          pinned.PoolStats
	DevicePool    pinned.PoolStats // zero on the cpu backend
	// MaxPinnedBytes is the cap on Pool (and DevicePool) bytes; 0: none.
	MaxPinnedBytes int64
	// InFlight is the batches started and not yet taken by the consumer;
	// Window the most allowed now, and ActiveWorkers the workers at work
	// (both tuned online with AutoPrefetch and AutoWorkers).
	InFlight, Window, ActiveWorkers int

	// ConsumerWait is the time the range loop spent waiting for batches
	// (with Workers 0, loading them); TimeInEpochs the time spent inside
	// epochs; DataBound their ratio: the fraction of the training loop's
	// time that went to waiting for data. Near 0, the GPU is the limit.
	ConsumerWait time.Duration
	TimeInEpochs time.Duration
	DataBound    float64

	// Latencies: one Fill (a sample; one Fill in 8 is timed and counts
	// for 8, as reading the clock costs more than a small sample), the
	// padding and compaction of a batch (0, not timed, for a batch with
	// nothing to pad or compact), issuing its device copy, and the
	// consumer's wait for a batch.
	Fill, Pad, Copy, Wait Histogram

	// FillRetries counts fills retried under Config.OnError; Skipped the
	// samples skipped, the first 1000 of which SkippedSamples lists.
	FillRetries    int64
	Skipped        int64
	SkippedSamples []SkippedSample

	// Dataset is the dataset's own counts, when it is a Reporter, by
	// their names: a shards.Source's requests, bytes fetched, read
	// retries and cache hits, misses and evictions; a corpus.Pack's
	// token slots and the tokens in them. Nil when it reports none.
	Dataset map[string]int64

	// Abandoned counts worker goroutines left behind in a Fill that ran
	// past Timeout and ignored its ctx; each still runs until its Fill
	// returns, then ends without touching anything.
	Abandoned int64
	// LeakedBytes is the pinned memory of the batches those workers were
	// filling: never reused nor freed, since they may still write it.
	LeakedBytes int64
}

// Stats returns the loader's counters.
func (l *loader) Stats() Stats {
	s := Stats{
		Batches:        l.batches.Load(),
		Samples:        l.samples.Load(),
		BytesCopied:    l.copied.Load(),
		BytesToDevice:  l.toDevice.Load(),
		Pool:           l.pool.Stats(),
		MaxPinnedBytes: l.cfg.MaxPinnedBytes,
		Fill:           l.stats.fill.snapshot(),
		Pad:            l.stats.pad.snapshot(),
		Copy:           l.stats.copy.snapshot(),
		Wait:           l.stats.wait.snapshot(),
		FillRetries:    l.retried.Load(),
		Skipped:        l.skipped.Load(),
		Abandoned:      l.abandoned.Load(),
		LeakedBytes:    l.leaked.Load(),
	}
	if l.dpool != nil {
		s.DevicePool = l.dpool.Stats()
	}
	s.Dataset = ReportOf(l.ds)
	s.ConsumerWait = s.Wait.Sum
	l.statsMu.Lock()
	s.TimeInEpochs = time.Duration(l.epochNanos.Load())
	if !l.epochStart.IsZero() {
		s.TimeInEpochs += time.Since(l.epochStart)
	}
	s.SkippedSamples = slices.Clone(l.skippedList)
	l.statsMu.Unlock()
	if s.TimeInEpochs > 0 {
		s.DataBound = min(1, float64(s.ConsumerWait)/float64(s.TimeInEpochs))
	}
	l.mu.Lock()
	if r := l.active; r != nil {
		r.mu.Lock()
		s.InFlight = r.started - r.taken
		s.Window, s.ActiveWorkers = l.tune.limit(r.window), l.tune.active
		r.mu.Unlock()
	} else {
		s.Window, s.ActiveWorkers = l.tune.limit(l.cfg.window()), l.tune.active
	}
	l.mu.Unlock()
	return s
}

// Len returns the number of batches an epoch delivers on this rank, as
// len(loader) in PyTorch, or 0 when the dataset's Len is invalid. With a
// custom Sampler or BatchSampler it counts epoch 0's; an epoch resumed
// from Config.Resume delivers fewer.
func (l *loader) Len() int {
	n, err := datasetLen(l.ds)
	if err != nil {
		return 0
	}
	if _, count := l.batchSampler(n, 0); count >= 0 {
		return count
	}
	batches, err := l.epochBatches(0, 0)
	if err != nil {
		return 0
	}
	return batches.count()
}
