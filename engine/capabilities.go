package engine

import "context"

// The optional capabilities the loader looks for in what it is given,
// each a named interface, as database/sql/driver names its drivers'
// (NOTE [access] says how the loader calls the kinds of dataset). A
// dataset that wraps others (Concat, Subset, Blend, and any of yours built
// on FillAt and FillBatchAt) forwards every one of them for what it wraps;
// TestWrappersForwardEveryCapability holds them to it.

// FullWriter is implemented by a dataset whose Fill (and FillBatch, where
// it has one) writes every byte of every field of every sample it fills
// without error. The loader then leaves batch buffers as the last batch
// left them instead of zeroing them first, as Config.SkipZeroing says from
// the caller's side: a zeroing pass is a memset of the whole batch, which
// for token windows costs a fifth of the copy that then overwrites it.
// Concat, Subset and Blend write every byte when what they wrap does.
type FullWriter interface {
	WritesEveryByte() bool
}

// BatchFiller is implemented by datasets that fill a whole batch at once:
// one kernel call a batch instead of one Fill a sample. The loader then
// hands whole batches to its workers and calls FillBatch instead of Fill.
// Concat, Subset and Blend of BatchFillers are BatchFillers (FillBatchAt).
type BatchFiller interface {
	FillBatch(ctx context.Context, b *BatchSlot) error
}

// Fingerprinter is implemented by a Dataset, an Iterable or a Sampler
// whose samples depend on more than Len and Schema. Every dataset the
// project ships implements it. Fingerprint must be cheap (the loader
// calls it once, in New; compute what it reads when the dataset is made)
// and the same for the same data and configuration on any machine: no
// paths that depend on where the data lies, no pointers, no times.
type Fingerprinter interface {
	Fingerprint() Fingerprint
}

// A Reporter is a dataset, or the Iterable of an IterableDataset, that
// counts what it does: a shard cache's hits and evictions, the requests,
// bytes and retries of remote reads, the token slots of packed samples.
// Loader.Stats reports its counts in Stats.Dataset. Report is called
// from any goroutine, at any time.
type Reporter interface {
	// Report returns the counts so far, each named in snake_case with
	// its unit where it has one ("cache_hits", "fetched_bytes"): counts
	// only, so that a wrapper adds its datasets' up, name by name.
	Report() map[string]int64
}

// ReportOf returns v's counts when v is a Reporter, else nil.
func ReportOf(v any) map[string]int64 {
	if r, ok := v.(Reporter); ok && !isNil(v) {
		return r.Report()
	}
	return nil
}

// addReports adds up the counts of ds, name by name; nil when none
// reports.
func addReports(ds ...Dataset) map[string]int64 {
	var sum map[string]int64
	for _, d := range ds {
		for k, v := range ReportOf(d) {
			if sum == nil {
				sum = map[string]int64{}
			}
			sum[k] += v
		}
	}
	return sum
}

// A Prefetcher is an Iterable that fetches shards ahead of use, as
// shards.Source does into its Cache. The reader of each rank calls
// Prefetch just before it opens a shard, with the shards it opens after
// that one this epoch, in order (the epoch's shard order, shuffled or
// not, as the rank's span has it). next is the reader's own: read it
// during the call, do not keep or modify it.
type Prefetcher interface {
	Prefetch(next []ShardInfo)
}

// A Validator is a Sampler or BatchSampler that checks its own fields:
// New calls Validate and refuses the Config with its error, naming the
// field.
type Validator interface {
	Validate() error
}
