package engine

import "context"

// NOTE [access]
//
// The loader calls every kind of dataset through access, and never asks
// which concrete type a dataset is. New takes the dataset's access once
// (accessOf): a dataset that implements access is its own (IterableDataset
// does: it orders itself and reads its shards ahead of the workers), and
// any other Dataset is map-style, served by mapAccess (Config's Sampler,
// Shuffle or BatchSampler order the indices, split across ranks as
// DistributedSampler does). Fill is always the Dataset's own; access only
// says which indices an epoch of this rank fills, in what batches, and
// what runs beside the workers while it does.
//
// An access is shared by every Loader of its dataset, so each method is
// given the loader's Config (defaults filled in) and RankInfo and keeps no
// per-loader state; what one epoch needs lives in its epochReader. A third
// kind of access implements these methods and needs no change to the
// loader; moving one out of the package would only need this interface
// and epochReader exported.
type access interface {
	// check refuses, with a configError naming the field, a Config this
	// access cannot load on rank sh. New calls it after Config.validate,
	// before it checks Config.Resume.
	check(cfg Config, sh RankInfo) error
	// batches returns rank sh's batches of the epochs of a dataset of n
	// samples, from unit skip of each epoch's order on (see position),
	// and how many batches every epoch has when that is known without
	// running it (Loader.Len), or -1. Its Batches may panic (a custom
	// sampler); the loader turns that into an error.
	batches(cfg Config, sh RankInfo, n, skip int) (bs BatchSampler, count int)
	// position says what State.Position counts: kind is State.Kind, and
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
}

// epochReader is what access.begin started for one epoch of one loader.
type epochReader interface {
	// wait is called after the epoch's last batch was delivered: it waits
	// for the reader to end and returns its error, which ends the epoch
	// with an error after its batches.
	wait(ctx context.Context) error
	// end stops the reader once the epoch ends, however it ends (see NOTE
	// [shutdown]); after it returns, the reader touches nothing.
	end()
}

// accessOf returns the access of ds; see NOTE [access].
func accessOf(ds Dataset) access {
	if s, ok := ds.(access); ok {
		return s
	}
	return mapAccess{}
}

// mapAccess is the access of a map-style Dataset: its n indices, ordered
// by Config's Sampler, Shuffle or BatchSampler, split across ranks.
// Positions count the global order, before the split, so a state resumes
// with another world size.
type mapAccess struct{}

func (mapAccess) check(Config, RankInfo) error { return nil }

func (mapAccess) batches(cfg Config, sh RankInfo, n, skip int) (BatchSampler, int) {
	if cfg.BatchSampler != nil {
		return rankBatches{cfg.BatchSampler, sh, skip, n}, -1
	}
	s, count := cfg.Sampler, -1
	switch {
	case s != nil:
	case cfg.Shuffle:
		s = Shuffled{N: n, Seed: cfg.Seed}
	default:
		s = Sequential{N: n}
	}
	if cfg.Sampler == nil { // n indices: as rankSplit and Batched count them
		m, w, b := n-min(skip, n), sh.WorldSize, cfg.BatchSize
		if w > 1 && cfg.DropUneven {
			m /= w
		} else if w > 1 {
			m = ceilDiv(m, w)
		}
		count = Batched{Size: b, DropLast: cfg.DropLast}.count(m)
	}
	return Batched{Sampler: rankSplit{s, sh, cfg.DropUneven, skip, n}, Size: cfg.BatchSize, DropLast: cfg.DropLast}, count
}

// position: BatchSize×WorldSize samples of the global order a batch, or
// WorldSize batches with a BatchSampler.
func (mapAccess) position(cfg Config, sh RankInfo) (string, int) {
	if cfg.BatchSampler != nil {
		return KindMap, sh.WorldSize
	}
	return KindMap, sh.WorldSize * cfg.BatchSize
}

// units: the global order's samples, or batches with a BatchSampler.
func (mapAccess) units(cfg Config, _ RankInfo, epoch, n int) int {
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

func (mapAccess) begin(Config, RankInfo, int, batchList) epochReader { return noReader{} }

// noReader is the epochReader of an access with nothing to run beside the
// workers.
type noReader struct{}

func (noReader) wait(context.Context) error { return nil }
func (noReader) end()                       {}
