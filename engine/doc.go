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
// Config.Resume refuses a State that does not fit (another dataset, seed
// or Source, a Position past its epoch, a bad Done list), and an Epoch
// call before the saved epoch is an error naming both epochs. A
// IterableDataset may be read by several Loaders at once. A Loader dropped
// without Close is closed by the garbage collector with a logged warning,
// as an os.File is; an epoch that DropLast leaves without a batch logs a
// warning once per loader.
package engine
