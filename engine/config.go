package engine

import (
	"runtime"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
)

// AutoWorkers, as Config.Workers, starts one worker per available CPU
// (GOMAXPROCS).
const AutoWorkers = -1

// DefaultPrefetchFactor is the batches in flight per worker when
// Config.PrefetchFactor is 0, as in PyTorch.
const DefaultPrefetchFactor = 2

// Config configures a Loader. The zero value of every field is a working
// default, as with net/http.Server.
type Config struct {
	// BatchSize is the samples per batch; 0 means 1.
	BatchSize int
	// Shuffle visits a permutation of the dataset that is a pure function of
	// (Seed, epoch). Not with Sampler or BatchSampler.
	Shuffle bool
	// Seed seeds the shuffle and every sample's RNG (Slot.Rand).
	Seed uint64
	// DropLast drops the last batch when it is short.
	DropLast bool

	// Workers is the number of worker goroutines; 0 loads in the consumer's
	// goroutine (PyTorch's num_workers=0); AutoWorkers is one per CPU.
	Workers int
	// PrefetchFactor is the batches in flight per worker; 0 means
	// DefaultPrefetchFactor; ignored when Workers is 0.
	PrefetchFactor int
	// RestartWorkers starts the workers at every epoch and stops them at its
	// end, as PyTorch's persistent_workers=False. By default workers persist
	// for the Loader's life.
	RestartWorkers bool
	// Timeout, when positive, bounds each sample's Fill: the ctx given to
	// Fill expires, and a Fill that ignores it is reported as a SampleError
	// wrapping ErrTimeout that names the stuck index. The epoch then ends
	// with that error, and the worker stuck in the Fill is abandoned (left
	// running until its Fill returns, with the batch buffer it writes
	// leaked; Stats.Abandoned and Stats.LeakedBytes count them), so neither
	// the range loop nor Close hangs. With Workers 0 only the ctx deadline
	// applies.
	Timeout time.Duration

	// Sampler replaces the sequential or shuffled order. Not with Shuffle or
	// BatchSampler.
	Sampler Sampler
	// BatchSampler replaces the batching of the order: BatchSize, DropLast,
	// Shuffle and Sampler must then be unset.
	BatchSampler BatchSampler

	// SkipZero leaves each sample's bytes as the last batch in that buffer
	// left them instead of zeroing them before Fill. Set it only when Fill
	// writes every byte of every field.
	SkipZero bool
	// MaxPinnedBytes caps the pinned host memory of batch buffers and, on a
	// GPU backend, the device memory of their copies; when reached, workers
	// wait for the consumer to release batches. 0 means no cap: the window
	// bounds it anyway, at Workers×PrefetchFactor batches in flight plus
	// the batches the consumer holds.
	MaxPinnedBytes int64

	// Rank and WorldSize shard every epoch across the processes of a
	// distributed job, which must share Seed: each rank loads every
	// WorldSize-th sample of the common order, padded to an even split
	// (or cut, with DropLast), as PyTorch's DistributedSampler. With
	// WorldSize 0 they come from the environment of the launcher that
	// started the process, the innermost when launchers nest (torchrun's
	// RANK and WORLD_SIZE, then Open MPI's OMPI_COMM_WORLD_RANK and
	// OMPI_COMM_WORLD_SIZE, then MPICH's and Intel MPI's PMI_RANK and
	// PMI_SIZE, then Slurm's SLURM_PROCID and SLURM_NTASKS), else a single
	// process. The local rank, which picks the GPU when Backend names no
	// device, always comes from the launcher, preferably the same one.
	// Loader.Shard says where each came from. With a BatchSampler, whole
	// batches are sharded.
	Rank, WorldSize int

	// WriteCombined allocates a GPU backend's batch buffers write-combined:
	// faster host-to-device copies, but very slow for the CPU to read. Set
	// it only when nothing reads the host batch (Fill writes it; gathers
	// into it use streaming stores). Ignored on the cpu backend.
	WriteCombined bool

	// Stream is the consumer's stream (a cudaStream_t or hipStream_t of the
	// loader's device), for every batch: when a batch is released, the
	// loader records an event on it, and the next copy into that batch's
	// device buffer waits for the event on its copy stream, so the buffer
	// is never overwritten under work queued on Stream before the release
	// (PyTorch's record_stream). Batch.RecordStream names more streams for
	// one batch. With none named, the event is recorded on the legacy
	// default stream, which covers work on blocking streams only (not on
	// non-blocking streams, nor per-thread default streams). Ignored on the
	// cpu backend.
	Stream uintptr

	// Backend picks where batches go: "auto" (HIP, then CUDA, else cpu),
	// "hip", "cuda" or "cpu", optionally with a device ordinal ("cuda:1";
	// without one, the launcher's local rank (see Rank), else 0). Empty means $TENSORBATCH_BACKEND,
	// else auto. With a GPU backend every batch is also copied to device
	// memory (Batch.DeviceTensor).
	Backend string
}

// validate checks c against a dataset of n samples and returns the config
// with defaults filled in.
func (c Config) validate() (Config, error) {
	switch {
	case c.BatchSize < 0:
		return c, configError("BatchSize", "%d, want > 0 (or 0 for the default, 1)", c.BatchSize)
	case c.Workers < AutoWorkers:
		return c, configError("Workers", "%d, want >= 0, or AutoWorkers (-1) for one per CPU", c.Workers)
	case c.PrefetchFactor < 0:
		return c, configError("PrefetchFactor", "%d, want > 0 (or 0 for the default, %d)", c.PrefetchFactor, DefaultPrefetchFactor)
	case c.Timeout < 0:
		return c, configError("Timeout", "%v, want >= 0 (0 means none)", c.Timeout)
	case c.MaxPinnedBytes < 0:
		return c, configError("MaxPinnedBytes", "%d, want >= 0 (0 means no cap)", c.MaxPinnedBytes)
	case c.Sampler != nil && c.Shuffle:
		return c, configError("Sampler", "set together with Shuffle; a custom sampler gives its own order")
	case c.BatchSampler != nil && (c.BatchSize != 0 || c.DropLast || c.Shuffle || c.Sampler != nil):
		return c, configError("BatchSampler", "set together with BatchSize, DropLast, Shuffle or Sampler; the batch sampler decides those")
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1
	}
	if c.Workers == AutoWorkers {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.PrefetchFactor == 0 {
		c.PrefetchFactor = DefaultPrefetchFactor
	}
	return c, nil
}

// checkPinned checks that one batch buffer fits under MaxPinnedBytes.
func (c Config) checkPinned(l *collate.Layout) error {
	if c.MaxPinnedBytes > 0 && int64(l.Size()) > c.MaxPinnedBytes {
		return configError("MaxPinnedBytes", "%d, less than one batch buffer of %d samples (%d bytes)", c.MaxPinnedBytes, l.Cap(), l.Size())
	}
	return nil
}

// window is the number of batches that may be in flight: started by the
// workers and not yet taken by the consumer.
func (c Config) window() int {
	if c.Workers == 0 {
		return 1
	}
	return c.Workers * c.PrefetchFactor
}
