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
package engine
