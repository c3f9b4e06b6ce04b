package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tensorbatch/tensorbatch/collate"
)

// ShardInfo names one shard of an Iterable and its sample count.
type ShardInfo struct {
	Name    string // a path or URL
	Samples int    // records in the shard
}

// Record is one sample as read from a shard, before decoding.
type Record struct {
	Key    string            // the sample's key within its shard (WebDataset's __key__)
	Shard  string            // the shard it came from
	Fields map[string][]byte // raw member bytes by extension: "jpg", "cls", "json", ...
}

// Size returns the bytes of the record's fields.
func (r Record) Size() int {
	n := 0
	for _, b := range r.Fields {
		n += len(b)
	}
	return n
}

// RecordReader reads one shard's records in order.
type RecordReader interface {
	// Next returns the next record, or io.EOF after the last.
	Next(ctx context.Context) (Record, error)
	Close() error
}

// Iterable is an iterable dataset read from shards: WebDataset tar files,
// token files, object storage. Package shards implements it; FromIterable
// makes it a Dataset the engine loads.
type Iterable interface {
	Schema() collate.Schema
	// Shards lists the shards with their sample counts; FromIterable calls
	// it once.
	Shards(ctx context.Context) ([]ShardInfo, error)
	// Open starts reading a shard from its first record.
	Open(ctx context.Context, shard ShardInfo) (RecordReader, error)
	// Decode writes a record into its slot. It runs on a worker goroutine,
	// concurrently with other Decodes.
	Decode(ctx context.Context, rec Record, s *Slot) error
}

// IterableConfig says how an Iterable is read.
type IterableConfig struct {
	// ShuffleShards visits the shards in an order that is a pure function
	// of (Seed, epoch).
	ShuffleShards bool
	// ShuffleBuffer is the records of the shuffle buffer each rank reads
	// through (WebDataset's shuffle(n)); 0 or 1: none.
	ShuffleBuffer int
	// ReadAheadBytes bounds the records read ahead of the workers; 0
	// means 64 MiB. The read-ahead also holds no more than the shuffle
	// buffer and a batch of records. It is separate from the window of
	// pinned batches.
	ReadAheadBytes int64
	// DropUneven cuts the epoch's samples down to a multiple of the world
	// size, dropping fewer than WorldSize from its end (DistributedSampler's
	// drop_last). By default they are padded up to one, repeating the
	// epoch's first samples.
	DropUneven bool
}

// DefaultReadAheadBytes is IterableConfig.ReadAheadBytes when 0.
const DefaultReadAheadBytes = 64 << 20

// IterableDataset is an Iterable as a Dataset: pass it to New. An epoch's
// samples are its shards' records, shards in the epoch's shard order (a
// pure function of (Seed, epoch), see IterableConfig.ShuffleShards). As
// PyTorch's DistributedSampler does, that sequence is padded with its own
// first samples to a multiple of the world size (or cut to one, see
// IterableConfig.DropUneven), and rank r takes the r-th of WorldSize equal
// contiguous spans of it: every rank gets the same number of samples, so
// the same number of batches, and no sample is loaded twice but the
// fewer than WorldSize that pad. A shard is read by the ranks whose span
// overlaps it (a rank reads, and drops, the records of a shard before its
// span), so any world size works, more ranks than shards included.
// Each rank reads its span in order, one record at a time, a worker
// reading the record it waits for itself and a read-ahead goroutine
// keeping a little ahead of the workers; the order of its samples
// through the shuffle buffer is computed from the shards' counts alone,
// at the epoch's start, so workers Decode records in parallel and every
// batch is bit-identical for any Workers and PrefetchFactor. The order depends on the world size: each rank shuffles
// its own span. Slot.Index of a record is its global id, the
// first id of its shard (shards numbered in listed order) plus its
// position in the shard, so Slot.Rand is the same on every rank and run.
// A reader error, or a shard with more or fewer records than listed, ends
// the epoch with an error naming the shard and record.
type IterableDataset struct {
	src    Iterable
	sc     IterableConfig
	schema collate.Schema
	shards []ShardInfo
	first  []int // the global id of each shard's first record
	total  int

	retries atomic.Int64
}

// FromIterable lists src's shards and returns the Dataset that loads them.
func FromIterable(ctx context.Context, src Iterable, sc IterableConfig) (*IterableDataset, error) {
	switch {
	case isNil(src):
		return nil, fmt.Errorf("engine: FromIterable: the Iterable is nil (%T)", src)
	case sc.ShuffleBuffer < 0:
		return nil, fmt.Errorf("engine: IterableConfig.ShuffleBuffer: %d, want >= 0", sc.ShuffleBuffer)
	case sc.ReadAheadBytes < 0:
		return nil, fmt.Errorf("engine: IterableConfig.ReadAheadBytes: %d, want >= 0 (0 means %d)", sc.ReadAheadBytes, DefaultReadAheadBytes)
	}
	if sc.ReadAheadBytes == 0 {
		sc.ReadAheadBytes = DefaultReadAheadBytes
	}
	shards, err := src.Shards(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: FromIterable: listing the shards: %w", err)
	}
	d := &IterableDataset{src: src, sc: sc, schema: src.Schema(), shards: slices.Clone(shards), first: make([]int, len(shards))}
	for i, sh := range shards {
		if sh.Samples < 0 || d.total > maxSamples-sh.Samples {
			return nil, fmt.Errorf("engine: FromIterable: shard %q has %d samples, want 0 to %d in all", sh.Name, sh.Samples, maxSamples)
		}
		d.first[i] = d.total
		d.total += sh.Samples
	}
	return d, nil
}

// Len returns the samples of every shard, on every rank.
func (d *IterableDataset) Len() int { return d.total }

// Schema returns the Iterable's schema.
func (d *IterableDataset) Schema() collate.Schema { return d.schema }

// Shards returns the shards and their counts.
func (d *IterableDataset) Shards() []ShardInfo { return slices.Clone(d.shards) }

// Fingerprint: the shards' base names in listed order with their counts
// (hashed: shards moved to another folder or bucket keep it), the
// IterableConfig fields that order an epoch, and the Iterable's own parts
// (a shards.Source adds what identifies its objects' contents).
func (d *IterableDataset) Fingerprint() Fingerprint {
	list := make([]string, 0, 2*len(d.shards))
	for _, sh := range d.shards {
		name, _, _ := strings.Cut(sh.Name, "?")
		name = name[strings.LastIndexAny(name, `/\`)+1:]
		list = append(list, name, strconv.Itoa(sh.Samples))
	}
	f := Fingerprint{
		"iterable.shards":         strconv.Itoa(len(d.shards)) + " " + FingerprintHash(list...),
		"iterable.shuffle_shards": strconv.FormatBool(d.sc.ShuffleShards),
		"iterable.shuffle_buffer": strconv.Itoa(d.sc.ShuffleBuffer),
		"iterable.drop_uneven":    strconv.FormatBool(d.sc.DropUneven),
	}
	return f.Nest("iterable.of", FingerprintOf(d.src))
}

// Report is the Iterable's counts, when it is a Reporter.
func (d *IterableDataset) Report() map[string]int64 { return ReportOf(d.src) }

// Close closes the Iterable when it is an io.Closer (a shards.Source
// cancels its downloads and drops its connections), so a dataset handed
// on as an engine.Dataset can still be closed; an Iterable's Close must
// therefore allow a second call.
func (d *IterableDataset) Close() error {
	if c, ok := d.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Fill takes the record of s.Index() from the reads of the loader's epoch,
// reading up to it itself when nobody else reads, and decodes it into s.
func (d *IterableDataset) Fill(ctx context.Context, s *Slot) error {
	e, ok := s.reader.(*iterableEpoch)
	if !ok || e.d != d {
		return errors.New("engine: an IterableDataset fills samples only inside an epoch of a Loader of it")
	}
	rec, err := e.take(ctx, s.Index())
	if err != nil {
		return err
	}
	return d.src.Decode(ctx, rec, s)
}

// read is one record to read: shard i's record at offset.
type read struct{ shard, offset int }

// shardOrder returns the indices of the shards in the order epoch visits
// them: a pure function of (seed, epoch) with ShuffleShards, else as
// listed.
func (d *IterableDataset) shardOrder(epoch int, seed uint64) []int {
	order := make([]int, len(d.shards))
	for i := range order {
		order[i] = i
	}
	if d.sc.ShuffleShards {
		r := rand.New(rand.NewPCG(seed, mix(uint64(epoch)^0x5348415244)))
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return order
}

// plan returns rank sh.Rank's samples of epoch in the order the reader
// reads them, and the order of their ids through the shuffle buffer.
//
// The epoch's sequence is every shard's samples, shards in shardOrder;
// as PyTorch's DistributedSampler does, it is padded with its own first
// samples (cyclically, when shorter than the padding) to a multiple of
// the world size, or cut down to one with DropUneven. Rank r reads the
// r-th of WorldSize equal contiguous spans of it, so that a shard is
// read by one rank, or two when a span boundary falls inside it.
func (d *IterableDataset) plan(epoch int, seed uint64, sh RankInfo) (reads []read, order []int) {
	n, w := d.total, max(sh.WorldSize, 1)
	per := (n + w - 1) / w
	if d.sc.DropUneven {
		per = n / w
	}
	if per == 0 {
		return nil, nil
	}
	shards := d.shardOrder(epoch, seed)
	i, off := 0, sh.Rank*per%n // the span's first sample: shards[i]'s record off
	for off >= d.shards[shards[i]].Samples {
		off -= d.shards[shards[i]].Samples
		i++
	}
	reads = make([]read, 0, per)
	for len(reads) < per {
		if off == d.shards[shards[i]].Samples { // the next non-empty shard, from the first again when padding
			i, off = (i+1)%len(shards), 0
			continue
		}
		reads = append(reads, read{shards[i], off})
		off++
	}
	order = make([]int, 0, len(reads))
	r := rand.New(rand.NewPCG(seed, mix(uint64(epoch)^mix(uint64(sh.Rank))^0x42554646)))
	var buf []int
	for _, rd := range reads {
		id := d.first[rd.shard] + rd.offset
		if d.sc.ShuffleBuffer <= 1 {
			order = append(order, id)
			continue
		}
		if len(buf) < d.sc.ShuffleBuffer {
			buf = append(buf, id)
			continue
		}
		j := r.IntN(len(buf))
		order = append(order, buf[j])
		buf[j] = id
	}
	for len(buf) > 0 {
		j := r.IntN(len(buf))
		order = append(order, buf[j])
		buf[j] = buf[len(buf)-1]
		buf = buf[:len(buf)-1]
	}
	return reads, order
}

// IterableDataset is its own access (see NOTE [access]): it orders its
// epochs itself, splits them into the ranks' spans, and reads its shards
// ahead of the workers. Positions count the rank's own samples.
var _ access = (*IterableDataset)(nil)

// check refuses the Config fields that would order the epoch, which the
// dataset orders itself, and a resume with another world size.
func (d *IterableDataset) check(cfg Config, sh RankInfo) error {
	switch {
	case cfg.Shuffle:
		return configError("Shuffle", "set for an IterableDataset, which orders itself: use IterableConfig.ShuffleShards and ShuffleBuffer")
	case cfg.Sampler != nil:
		return configError("Sampler", "set for an IterableDataset, which orders itself")
	case cfg.BatchSampler != nil:
		return configError("BatchSampler", "set for an IterableDataset, which orders itself")
	case cfg.DropUneven:
		return configError("DropUneven", "set for an IterableDataset: use IterableConfig.DropUneven")
	case cfg.Resume != nil && cfg.Resume.WorldSize != sh.WorldSize:
		return configError("Resume", "WorldSize: an IterableDataset resumes with the world size it was saved with (%d), not %d", cfg.Resume.WorldSize, sh.WorldSize)
	}
	return nil
}

// batches returns the rank's span in batches, from skip of its samples
// on; counting them takes the epoch's plan, so count is -1.
func (d *IterableDataset) batches(cfg Config, sh RankInfo, _, skip int) (BatchSampler, int) {
	return Batched{Sampler: iterableSampler{d, cfg.Seed, sh, skip}, Size: cfg.BatchSize, DropLast: cfg.DropLast}, -1
}

// position: BatchSize of the rank's own samples a batch.
func (d *IterableDataset) position(cfg Config, _ RankInfo) (string, int) {
	return KindIterable, cfg.BatchSize
}

// units: the rank's own samples of the epoch.
func (d *IterableDataset) units(cfg Config, sh RankInfo, epoch, _ int) int {
	_, order := d.plan(epoch, cfg.Seed, sh)
	return len(order)
}

// iterableSampler is a rank's order of an IterableDataset's epoch, from skip on.
type iterableSampler struct {
	d     *IterableDataset
	seed  uint64
	shard RankInfo
	skip  int
}

func (s iterableSampler) Order(epoch int) []int {
	_, order := s.d.plan(epoch, s.seed, s.shard)
	return order[min(s.skip, len(order)):]
}

// begin starts the reader of an epoch whose batches are given. The reader
// belongs to the loader's run, so any number of Loaders may read one
// IterableDataset at once, each its own epochs.
func (d *IterableDataset) begin(cfg Config, sh RankInfo, epoch int, batches batchList) epochReader {
	reads, _ := d.plan(epoch, cfg.Seed, sh)
	e := &iterableEpoch{d: d, reads: reads, demand: map[int]int{}, held: map[int][]Record{}, want: map[int]int{}, changed: make(chan struct{}), cur: -1,
		lead: max(d.sc.ShuffleBuffer, 1) + cfg.BatchSize}
	for k := range batches.count() {
		for _, id := range batches.batch(k, nil) {
			e.demand[id]++
		}
	}
	if _, ok := d.src.(Prefetcher); ok {
		for i, rd := range reads {
			if i == 0 || rd.shard != reads[i-1].shard {
				e.opens, e.opened = append(e.opens, d.shards[rd.shard]), append(e.opened, i)
			}
		}
	}
	e.done = len(reads) == 0
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.wg.Add(1)
	go e.run()
	return e
}

// NOTE [iterable reads]
//
// An epoch's records are read in one order (reads), by one goroutine at a
// time: whoever holds the cursor (iterableEpoch.reading). A Fill whose
// record is not read yet takes the cursor itself, when nobody holds it,
// and reads on until its record is there. Beside the workers, the
// epoch's read-ahead goroutine (run) takes the cursor for one record at a
// time while no Fill waits for an unread record and fewer than the
// shuffle buffer and a batch of records (lead), and at most
// ReadAheadBytes, are held: enough to keep the workers from waiting on a
// slow shard, no more.
//
// Before, the read-ahead goroutine alone read, up to ReadAheadBytes (64
// MiB: all of a few hundred images), and a Fill waited for it. So at an
// epoch's start the workers blocked until a third goroutine, competing
// with them for the Ps (and, on a busy machine, for the CPUs), read their
// records and woke them, one wake-up per record; and it went on reading
// the whole epoch, its allocations starting a GC whose mark worker took
// one P, while the first batch's images waited to be decoded. An
// execution trace of the bench's source rows (bench/sources.go: an
// ImageFolder's images from tar and Parquet shards) showed the first
// decodes waiting on that goroutine, well after their records were read.
//
// Who reads changes nothing else: the records and their order are the
// same, so batches stay bit-identical for any Workers. A read that fails
// because its reader's ctx ended (a cancelled caller, a sample's Timeout)
// leaves no error behind: the cursor closes its shard, and whoever reads
// next reopens it and skips to the record, keeping only what is still
// demanded. Any other read error is the epoch's, and every later Fill
// returns it.

// wait reads what is left of the epoch (a dropped last batch, the look
// past a shard's last record) and returns the first read error, so that a
// shard that disagrees with its count where no batch waits for it fails
// the epoch too. Called after the epoch's last batch.
func (e *iterableEpoch) wait(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for !e.done {
		if !e.reading {
			if err := e.readUntil(ctx, -1); err != nil && e.err == nil {
				return err
			}
			continue
		}
		if err := e.await(ctx); err != nil {
			return err
		}
	}
	return e.err
}

// end stops the epoch's read-ahead and closes its shard; a Fill still
// reading (abandoned at a Timeout) closes it when its read returns.
func (e *iterableEpoch) end() {
	e.cancel()
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = true
	if !e.reading {
		e.closeShard()
	}
}

// iterableEpoch is one epoch's reads and the records read that a Fill has
// not taken yet; see NOTE [iterable reads].
type iterableEpoch struct {
	d      *IterableDataset
	reads  []read
	ctx    context.Context // the read-ahead's: cancelled by end
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	demand  map[int]int      // Fills still to come, by id: a record nobody asks for is not kept
	held    map[int][]Record // read, not yet taken
	bytes   int64            // of held
	records int              // in held
	lead    int              // the most records the read-ahead holds: the shuffle buffer and a batch
	want    map[int]int      // Fills waiting, by id
	err     error            // the first read error
	done    bool             // every read is made, or err is set
	reading bool             // a goroutine holds the cursor
	paused  bool             // the read-ahead waits: for the cursor, a Fill that reads, or held records to drop
	ended   bool             // end was called
	changed chan struct{}    // closed and replaced at every change a waiter waits for

	// The cursor, touched only by the goroutine that set reading: the
	// next read, and the shard rr reads with the offset of its next record.
	at        int
	rr        RecordReader
	cur, next int

	// For a Prefetcher: the shards in the order the reads open them, and
	// the read that opens each.
	opens  []ShardInfo
	opened []int
}

// notify wakes the Fills and the read-ahead. Called with e.mu held.
func (e *iterableEpoch) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// await waits, with e.mu held, until the next notify or ctx's end.
func (e *iterableEpoch) await(ctx context.Context) error {
	changed := e.changed
	e.mu.Unlock()
	defer e.mu.Lock()
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// take returns the record of id: a held one, or read by this Fill when
// nobody is reading.
func (e *iterableEpoch) take(ctx context.Context, id int) (Record, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.want[id]++
	defer func() {
		if e.want[id]--; e.want[id] == 0 {
			delete(e.want, id)
		}
	}()
	for {
		if recs := e.held[id]; len(recs) > 0 {
			rec := recs[len(recs)-1]
			if len(recs) == 1 {
				delete(e.held, id)
			} else {
				e.held[id] = recs[:len(recs)-1]
			}
			e.bytes -= int64(rec.Size())
			e.records--
			e.demand[id]--
			if e.paused && !e.reading && e.records < e.lead && e.bytes <= e.d.sc.ReadAheadBytes {
				e.notify() // the read-ahead may read on
			}
			return rec, nil
		}
		switch {
		case e.err != nil:
			return Record{}, e.err
		case e.done:
			return Record{}, fmt.Errorf("engine: stream record %d was never read", id)
		case !e.reading:
			if err := e.readUntil(ctx, id); err != nil && e.err == nil {
				return Record{}, err
			}
			continue
		}
		if err := e.await(ctx); err != nil {
			return Record{}, err
		}
	}
}

// readUntil takes the cursor and reads until the record of id is held
// (id -1: to the end), with ctx. Called with e.mu held and nobody
// reading; returns with e.mu held, the cursor released, and the error of
// the read that stopped it: e.err, or ctx's cause.
func (e *iterableEpoch) readUntil(ctx context.Context, id int) error {
	if e.ended {
		return errEpochEnded
	}
	e.reading = true
	defer e.release()
	for !e.done && (id < 0 || len(e.held[id]) == 0) {
		if err := e.readOne(ctx); err != nil {
			return err
		}
	}
	return nil
}

// errEpochEnded is what a Fill abandoned past its epoch's end gets.
var errEpochEnded = errors.New("engine: stream: the epoch ended")

// release gives the cursor back, closing the shard if the epoch ended
// meanwhile, and wakes whoever waits for it. Called with e.mu held.
func (e *iterableEpoch) release() {
	e.reading = false
	if e.ended || e.done {
		e.closeShard()
	}
	e.notify()
}

// closeShard closes the cursor's shard: at the epoch's end, after its
// last read or error, or after a read its reader's ctx cut short. Called
// by the cursor's holder, or with nobody reading.
func (e *iterableEpoch) closeShard() {
	if e.rr != nil {
		e.rr.Close()
		e.rr, e.cur, e.next = nil, -1, 0
	}
}

// readOne makes the cursor's next read, with e.mu released while it
// reads, and keeps its record. Called by the cursor's holder with e.mu
// held.
func (e *iterableEpoch) readOne(ctx context.Context) error {
	rd := e.reads[e.at]
	e.mu.Unlock()
	rec, ok, err := e.read(ctx, e.at)
	e.mu.Lock()
	if err != nil && ctx.Err() != nil { // cut short by the reader's ctx: the next reader reopens the shard
		e.closeShard()
		return context.Cause(ctx)
	}
	if ok {
		id := e.d.first[rd.shard] + rd.offset
		if e.demand[id] > len(e.held[id]) {
			e.held[id] = append(e.held[id], rec)
			e.bytes += int64(rec.Size())
			e.records++
			if e.want[id] > 0 {
				e.notify()
			}
		}
	}
	if err != nil {
		e.err, e.done = err, true
		e.notify()
		return err
	}
	if e.at++; e.at == len(e.reads) {
		e.done = true
		e.notify()
	}
	return nil
}

// read reads the record of reads[at] with the cursor, opening its shard when the
// cursor is elsewhere and skipping the records before it (another
// rank's), and after a shard's last record checks that it has no more:
// an error there comes with the record, which is kept, so that the
// batches before it are delivered. Called by the cursor's holder without
// e.mu.
func (e *iterableEpoch) read(ctx context.Context, at int) (rec Record, ok bool, err error) {
	d, rd := e.d, e.reads[at]
	sh := d.shards[rd.shard]
	if rd.shard != e.cur || rd.offset < e.next {
		e.closeShard()
		if p, ok := d.src.(Prefetcher); ok {
			k, _ := slices.BinarySearch(e.opened, at+1) // the first shard opened after this read
			p.Prefetch(e.opens[k:])
		}
		r, err := d.src.Open(ctx, sh)
		if err != nil {
			return Record{}, false, fmt.Errorf("engine: stream: opening shard %q: %w", sh.Name, err)
		}
		e.rr, e.cur, e.next = r, rd.shard, 0
	}
	for ; e.next <= rd.offset; e.next++ { // records before offset are another rank's
		if err := ctx.Err(); err != nil {
			return Record{}, false, err
		}
		r, err := e.rr.Next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return Record{}, false, fmt.Errorf("engine: stream: shard %q ended after %d records, listed with %d", sh.Name, e.next, sh.Samples)
		case err != nil:
			return Record{}, false, fmt.Errorf("engine: stream: shard %q, record %d: %w", sh.Name, e.next, err)
		}
		rec = r
	}
	if e.next == sh.Samples { // a shard longer than listed would lose samples
		if _, err := e.rr.Next(ctx); !errors.Is(err, io.EOF) {
			if err == nil {
				err = fmt.Errorf("more records than the %d listed", sh.Samples)
			}
			return rec, true, fmt.Errorf("engine: stream: shard %q, after record %d: %w", sh.Name, e.next-1, err)
		}
	}
	return rec, true, nil
}

// run is the epoch's read-ahead: it takes the cursor for one record at a
// time while nobody else reads, no Fill waits for a record not read yet
// (that Fill reads it: see NOTE [iterable reads]) and at most
// ReadAheadBytes are held, until the last read or end.
func (e *iterableEpoch) run() {
	defer e.wg.Done()
	e.mu.Lock()
	defer e.mu.Unlock()
	for !e.done && e.ctx.Err() == nil {
		if e.reading || e.starved() || e.records >= e.lead || e.bytes > e.d.sc.ReadAheadBytes {
			e.paused = true
			err := e.await(e.ctx)
			e.paused = false
			if err != nil {
				return
			}
			continue
		}
		e.reading = true
		e.readOne(e.ctx) // its error is e.err, or the end's
		e.release()
	}
}

// starved reports whether a Fill waits for a record not read yet (one
// already kept does not count, though its Fill may not have woken yet).
// Called with e.mu held.
func (e *iterableEpoch) starved() bool {
	for id, n := range e.want {
		if n > len(e.held[id]) {
			return true
		}
	}
	return false
}
