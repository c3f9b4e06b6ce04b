package engine

import "context"

// NOTE [sources]
//
// The loader calls every kind of dataset through source, and never asks
// which concrete type a dataset is. New takes the dataset's source once
// (sourceOf): a dataset that implements source is its own (IterableDataset
// does: it orders itself and reads its shards ahead of the workers), and
// any other Dataset is map-style, served by mapSource (Config's Sampler,
// Shuffle or BatchSampler order the indices, split across ranks as
// DistributedSampler does). Fill is always the Dataset's own; source only
// says which indices an epoch of this rank fills, in what batches, and
// what runs beside the workers while it does.
//
// A source is shared by every Loader of its dataset, so each method is
// given the loader's Config (defaults filled in) and RankInfo and keeps no
// per-loader state; what one epoch needs lives in its epochReader. A third
// kind of source implements these methods and needs no change to the
// loader; moving one out of the package would only need this interface
// and epochReader exported.
type source interface {
	// check refuses, with a configError naming the field, a Config this
	// source cannot load on rank sh. New calls it after Config.validate,
	// before it checks Config.Resume.
	check(cfg Config, sh RankInfo) error
	// batches returns rank sh's batches of the epochs of a dataset of n
	// samples, from unit skip of each epoch's order on (see position),
	// and how many batches every epoch has when that is known without
	// running it (Loader.Len), or -1. Its Batches may panic (a custom
	// sampler); the loader turns that into an error.
	batches(cfg Config, sh RankInfo, n, skip int) (bs BatchSampler, count int)
	// position says what State.Position counts: kind is State.Source, and
	// unit the units one delivered batch of this rank consumes.
	position(cfg Config, sh RankInfo) (kind string, unit int)
	// units returns the length of epoch's order, of n samples, in the
	// units of position. It may panic as batches does.
	units(cfg Config, sh RankInfo, epoch, n int) int
	// begin starts whatever serves epoch's Fills besides the Dataset
	// itself, for these batches of this rank (already resumed). It is the
	// last step of starting an epoch and cannot fail. The epochReader
	// reaches Fill through Slot.reader.
	begin(cfg Config, sh RankInfo, epoch int, batches batchList) epochReader
	// readRetries counts the reads the source retried, for
	// Stats.ReadRetries.
	readRetries() int64
	// storageStats are its storage and cache counts, for Stats.Storage.
	storageStats() StorageStats
}

// epochReader is what source.begin started for one epoch of one loader.
type epochReader interface {
	// wait is called after the epoch's last batch was delivered: it waits
	// for the reader to end and returns its error, which ends the epoch
	// with an error after its batches.
	wait(ctx context.Context) error
	// end stops the reader once the epoch ends, however it ends (see NOTE
	// [shutdown]); after it returns, the reader touches nothing.
	end()
}

// sourceOf returns the source of ds; see NOTE [sources].
func sourceOf(ds Dataset) source {
	if s, ok := ds.(source); ok {
		return s
	}
	return mapSource{}
}

// mapSource is the source of a map-style Dataset: its n indices, ordered
// by Config's Sampler, Shuffle or BatchSampler, split across ranks.
// Positions count the global order, before the split, so a state resumes
// with another world size.
type mapSource struct{}

func (mapSource) check(Config, RankInfo) error { return nil }

func (mapSource) batches(cfg Config, sh RankInfo, n, skip int) (BatchSampler, int) {
	if cfg.BatchSampler != nil {
		return shardedBatches{cfg.BatchSampler, sh, skip, n}, -1
	}
	s, count := cfg.Sampler, -1
	switch {
	case s != nil:
	case cfg.Shuffle:
		s = Shuffled{N: n, Seed: cfg.Seed}
	default:
		s = Sequential{N: n}
	}
	if cfg.Sampler == nil { // n indices: as sharded and Batched count them
		m, w, b := n-min(skip, n), sh.WorldSize, cfg.BatchSize
		if w > 1 && cfg.DropUneven {
			m /= w
		} else if w > 1 {
			m = ceilDiv(m, w)
		}
		count = Batched{Size: b, DropLast: cfg.DropLast}.count(m)
	}
	return Batched{Sampler: sharded{s, sh, cfg.DropUneven, skip, n}, Size: cfg.BatchSize, DropLast: cfg.DropLast}, count
}

// position: BatchSize×WorldSize samples of the global order a batch, or
// WorldSize batches with a BatchSampler.
func (mapSource) position(cfg Config, sh RankInfo) (string, int) {
	if cfg.BatchSampler != nil {
		return SourceMap, sh.WorldSize
	}
	return SourceMap, sh.WorldSize * cfg.BatchSize
}

// units: the global order's samples, or batches with a BatchSampler.
func (mapSource) units(cfg Config, _ RankInfo, epoch, n int) int {
	switch {
	case cfg.BatchSampler != nil:
		return len(cfg.BatchSampler.Batches(epoch))
	case cfg.Sampler != nil:
		if ls, ok := cfg.Sampler.(lazySampler); ok {
			if o, ok := ls.lazy(epoch); ok {
				return o.len()
			}
		}
		return len(cfg.Sampler.Order(epoch))
	}
	return n
}

func (mapSource) begin(Config, RankInfo, int, batchList) epochReader { return noReader{} }

func (mapSource) readRetries() int64 { return 0 }

func (mapSource) storageStats() StorageStats { return StorageStats{} }

// noReader is the epochReader of a source with nothing to run beside the
// workers.
type noReader struct{}

func (noReader) wait(context.Context) error { return nil }
func (noReader) end()                       {}
