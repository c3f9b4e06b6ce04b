// Package engine provides the tensorbatch loader: it turns a Dataset into
// batches in pinned host memory, filled by worker goroutines and delivered
// in sampler order, the way PyTorch's DataLoader does with processes.
//
// Conventions: a Dataset writes each sample straight into its place in the
// batch buffer (Slot.Tensor), so fixed-shape fields are never copied by the
// loader. Every sample has its own RNG derived from (Seed, Epoch, Index),
// so batches are bit-for-bit the same whatever Workers, PrefetchFactor,
// GOMAXPROCS or scheduling are. Errors travel in their batch's position: the
// batches before a failing sample are delivered first. With a GPU backend
// (Config.Backend) each batch is also copied to device memory on the
// filling worker's stream; Batch.DeviceTensor and Batch.Event hand it to
// the training loop's own CUDA or HIP code.
//
// # Errors and reliability
//
// Constructors check what they are given: New, Concat, Subset, RandomSplit
// and FromIterable refuse a nil or typed-nil dataset or stream (a nil
// *IterableDataset), a negative Len, a nil fill, and New refuses invalid
// samplers (Validate) and resume states, with an error that names the
// field. A schema error, including a field that clashes with the
// "<name>_len" lengths field of a Dynamic field, matches
// errors.Is(err, collate.ErrSchema).
//
// A Fill that returns an error, panics, runs past Config.Timeout or calls
// runtime.Goexit (t.FailNow, require's helpers) ends the epoch with a
// *SampleError naming the sample, after the batches before it; Close
// returns in every case. With Workers 0, Fill runs on the consumer's own
// goroutine, so a Goexit there ends that goroutine (the loader is left
// consistent and can be closed or run again).
//
// # How a batch is made
//
// Each stage of a batch has its file, and the invariants that hold it
// together are written down once, as NOTEs, where their code is:
//
//   - Order (sampler.go, feistel.go, ranks.go, access.go): an epoch's
//     batches of indices, a pure function of (Seed, epoch), split across
//     ranks before any worker runs. A lazy order is computed per position
//     and never materialized (NOTE [feistel]); the loader calls every kind
//     of dataset through one small interface, map-style or iterable
//     (NOTE [access]); an iterable dataset reads its shards in one order,
//     whoever holds the cursor (NOTE [iterable reads], iterable.go).
//   - Claim (claim.go): workers advance one cursor over the epoch's
//     samples under the run's lock, oldest batch first, and start a batch
//     (a buffer from the pool and its indices) only while fewer than the
//     window's batches are in flight. The run's fields are laid out for the
//     cache lines its hand-off moves (NOTE [lines], epoch.go).
//   - Fill (fill.go, slot.go): Dataset.Fill writes each sample into its
//     Slot, its place in the pinned buffer, or FillBatch a whole batch; an
//     error, a panic, a timeout or runtime.Goexit becomes the sample's
//     SampleError at its position (NOTE [goexit]); Config.OnError retries
//     or skips.
//   - Copy (copy.go): the worker that fills a batch's last sample completes
//     it: pads its Dynamic fields, compacts skipped samples and, on a GPU
//     backend, queues its copy to device memory on the worker's stream,
//     behind the consumer's recorded use of that buffer.
//   - Delivery (deliver.go, batch.go): the consumer takes batches in order
//     (or as they complete, with OutOfOrder), hands each to the loop body,
//     and releases it when the body returns; its buffers go back to their
//     pools behind the events of their copies.
//   - Workers (worker.go): persistent or per-epoch goroutines that claim
//     and fill until the epoch ends; with Workers 0 the consumer's own
//     goroutine does. An epoch's run (epoch.go) and the loader (loader.go)
//     stop and free everything on every path out (NOTE [shutdown]).
//
// Beside the stages: state.go (resume), fingerprint.go (what a State is
// valid for), stats.go, tune.go (AutoWorkers, AutoPrefetch), policy.go
// (OnError), datasets.go (Concat, Subset, RandomSplit), tensors.go, and
// capabilities.go, every optional interface the loader looks for.
//
// Config.Resume refuses a State that does not fit (another dataset, seed
// or Kind, a Position past its epoch, a bad Done list), and an Epoch
// call before the saved epoch is an error naming both epochs. A
// IterableDataset may be read by several Loaders at once. A Loader dropped
// without Close is closed by the garbage collector with a logged warning,
// as an os.File is; an epoch that DropLast leaves without a batch logs a
// warning once per loader.
package engine
