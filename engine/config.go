package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
)

// AutoWorkers, as Config.Workers, starts one worker goroutine per
// available CPU (GOMAXPROCS) and lets the loader tune how many of them
// work, online, from the consumer's waits: it starts with one and adds
// workers while the training loop waits for data (see AutoPrefetch for
// the window). Idle workers cost nothing. Config().Workers reports the
// goroutines. A Fill that blocks on I/O may want more workers than CPUs:
// set Workers.
const AutoWorkers = -1

// DefaultPrefetchFactor is the batches in flight per worker when
// Config.PrefetchFactor is 0, as in PyTorch.
const DefaultPrefetchFactor = 2

// Config configures a Loader. The zero value of every field is a working
// default, as with net/http.Server.
//
// Do not compare Configs with == or use them as map keys: it compiles, but
// panics when an interface field (Sampler, BatchSampler, WorkerInit) holds
// a value that is not comparable, such as a WeightedRandom with its Weights
// slice. Nothing in the engine does; compare the fields you need.
type Config struct {
	// BatchSize is the samples per batch; 0 means 1.
	BatchSize int
	// Shuffle visits a permutation of the dataset that is a pure function of
	// (Seed, epoch). Not with Sampler or BatchSampler.
	Shuffle bool
	// Seed seeds the shuffle and every sample's RNG (Slot.Rand).
	Seed uint64
	// DropLast drops the last batch when it is short (DataLoader's
	// drop_last). It does not change how the epoch is split across ranks:
	// see DropUneven.
	DropLast bool
	// DropUneven cuts the epoch's order down to a multiple of the world
	// size instead of padding it with its first indices
	// (DistributedSampler's drop_last).
	DropUneven bool

	// Workers is the number of worker goroutines; 0 loads in the consumer's
	// goroutine (PyTorch's num_workers=0); AutoWorkers is one per CPU.
	Workers int
	// PrefetchFactor is the batches in flight per worker; 0 means
	// DefaultPrefetchFactor; AutoPrefetch tunes it online from 1 up to
	// DefaultPrefetchFactor, never more; ignored when Workers is 0.
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

	// WorkerInit, when set, runs once on each worker goroutine as it
	// starts, before its first Fill (PyTorch's worker_init_fn): at the
	// loader's first epoch for persistent workers, at every epoch with
	// RestartWorkers. Slot.Worker gives the same id in Fill, to index
	// per-worker state. An error or panic ends the epoch with an error
	// naming the worker; the worker tries again at the next epoch. Not
	// called with Workers 0.
	WorkerInit WorkerIniter
	// OutOfOrder delivers each batch as soon as it is complete instead of
	// in sampler order (PyTorch's in_order=False): a slow sample no longer
	// holds back the batches after it. Each batch is still the same, bit
	// for bit; only the order they arrive in varies. An error is delivered
	// when its batch completes.
	OutOfOrder bool
	// OnError says what a failing sample does; the zero value fails the
	// epoch at the sample's batch.
	OnError ErrorPolicy
	// Resume, when set, is a State saved by Loader.State: the loader's
	// first Epoch(ctx, Resume.Epoch) continues right after the batch the
	// State was taken after, with the same batches, bit for bit, as the
	// uninterrupted run (for the same world size and batch size), whatever
	// Workers and PrefetchFactor are. A state that does not fit (another
	// Kind, dataset, length, schema or seed, a Position past its epoch, a
	// bad Done list; see State) is refused by New, naming the field. An
	// Epoch before Resume.Epoch run first is an error naming both epochs;
	// a later one starts fresh and drops the saved position.
	Resume *State
	// ResumeChanged resumes a State whose Dataset fingerprint differs from
	// this loader's dataset and order (see Fingerprint), logging each part
	// that differs as a warning, instead of refusing it: for a dataset
	// changed on purpose (a file replaced, a weight tuned), where the
	// saved position is meant to carry over. Len, Schema and Seed must
	// still match.
	ResumeChanged bool
	// LogEvery, when positive, logs one progress line through slog every
	// LogEvery batches: the epoch, the batch and the epoch's batches, the
	// rate (samples_per_s, since the epoch's first batch), the time left
	// in the epoch (epoch_left) and the data-bound fraction.
	LogEvery int

	// Sampler replaces the sequential or shuffled order. Not with Shuffle or
	// BatchSampler.
	Sampler Sampler
	// BatchSampler replaces the batching of the order: BatchSize, DropLast,
	// Shuffle and Sampler must then be unset.
	BatchSampler BatchSampler

	// SkipZeroing leaves each sample's bytes as the last batch in that buffer
	// left them instead of zeroing them before Fill. Set it only when Fill
	// writes every byte of every field. A dataset that says so itself
	// (FullWriter: Tensors, and shards' and vision's datasets) is never
	// zeroed, whatever SkipZeroing says.
	SkipZeroing bool
	// MaxPinnedBytes caps the pinned host memory of batch buffers and, on a
	// GPU backend, the device memory of their copies; when reached, workers
	// wait for the consumer to release batches. 0 means no cap: the window
	// bounds it anyway, at Workers×PrefetchFactor batches in flight plus
	// the batches the consumer holds.
	MaxPinnedBytes int64

	// Rank and WorldSize shard every epoch across the processes of a
	// distributed job, which must share Seed: each rank loads every
	// WorldSize-th sample of the common order, padded to an even split
	// (or cut, with DropUneven), as PyTorch's DistributedSampler. With
	// WorldSize 0 they come from the environment of the launcher that
	// started the process (torchrun, Open MPI, MPICH or Intel MPI, Slurm:
	// the variables and which wins when launchers nest are listed once, in
	// docs/distributed.md), else a single process. The local rank, which
	// picks the GPU when Backend names no device, always comes from the
	// launcher, preferably the same one. Loader.RankInfo says where each
	// came from. With a BatchSampler, whole
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

	// CheckReleased makes a batch's tensors checked: a Tensor taken from a
	// Batch and read (Tensor.Bytes, collate.As, the collate kernels) after
	// the batch was released (the loop body returned, or the last Release)
	// panics, naming the batch, instead of reading whatever batch its
	// buffer holds by then. A slice kept from As is not checked. The check
	// costs an allocation a batch and a load a read. It is on under go
	// test (testing.Testing) and off otherwise, unless
	// $TENSORBATCH_CHECK_RELEASED says "1" or "0"; CheckReleased true
	// turns it on whatever the environment says.
	CheckReleased bool

	// Backend picks where batches go: "auto" (HIP, then CUDA, else cpu),
	// "hip", "cuda" or "cpu", optionally with a device ordinal ("cuda:1";
	// without one, the launcher's local rank (see Rank), else 0). Empty means $TENSORBATCH_BACKEND,
	// else auto. With a GPU backend every batch is also copied to device
	// memory (Batch.DeviceTensor).
	Backend string
}

// EnvCheckReleased names the variable that turns Config.CheckReleased on
// ("1") or off ("0") when the Config leaves it false.
const EnvCheckReleased = "TENSORBATCH_CHECK_RELEASED"

// checkReleased reports whether the loader leases its batches' tensors:
// Config.CheckReleased, else EnvCheckReleased, else whether this is a
// test binary.
func (c Config) checkReleased() (bool, error) {
	switch v := os.Getenv(EnvCheckReleased); {
	case c.CheckReleased:
		return true, nil
	case v == "1":
		return true, nil
	case v == "0":
		return false, nil
	case v != "":
		return false, fmt.Errorf("engine: $%s is %q, want 1 or 0", EnvCheckReleased, v)
	}
	return testing.Testing(), nil
}

// WorkerIniter sets up a worker goroutine (Config.WorkerInit).
type WorkerIniter interface {
	InitWorker(ctx context.Context, worker int) error
}

// WorkerInitFunc adapts a function to WorkerIniter:
// Config{WorkerInit: engine.WorkerInitFunc(f)}.
type WorkerInitFunc func(ctx context.Context, worker int) error

// InitWorker calls f.
func (f WorkerInitFunc) InitWorker(ctx context.Context, worker int) error { return f(ctx, worker) }

// Bounds that keep a Config's arithmetic and allocations sane.
const (
	maxWorkers = 1 << 16
	maxWindow  = 1 << 20 // batches in flight
)

// validate checks c and returns the config with defaults filled in.
func (c Config) validate() (Config, error) {
	switch {
	case c.BatchSize < 0:
		return c, configError("BatchSize", "%d, want > 0 (or 0 for the default, 1)", c.BatchSize)
	case c.Workers < AutoWorkers:
		return c, configError("Workers", "%d, want >= 0, or AutoWorkers (-1) for one per CPU", c.Workers)
	case c.PrefetchFactor < AutoPrefetch:
		return c, configError("PrefetchFactor", "%d, want > 0, or 0 for the default (%d), or AutoPrefetch (-1)", c.PrefetchFactor, DefaultPrefetchFactor)
	case c.Timeout < 0:
		return c, configError("Timeout", "%v, want >= 0 (0 means none)", c.Timeout)
	case c.Workers > maxWorkers:
		return c, configError("Workers", "%d, more than %d", c.Workers, maxWorkers)
	case c.PrefetchFactor > maxWindow:
		return c, configError("PrefetchFactor", "%d, more than %d", c.PrefetchFactor, maxWindow)
	case c.Workers > 0 && c.PrefetchFactor > 0 && c.Workers*c.PrefetchFactor > maxWindow:
		return c, configError("PrefetchFactor", "%d × %d workers is %d batches in flight, more than %d", c.PrefetchFactor, c.Workers, c.Workers*c.PrefetchFactor, maxWindow)
	case c.MaxPinnedBytes < 0:
		return c, configError("MaxPinnedBytes", "%d, want >= 0 (0 means no cap)", c.MaxPinnedBytes)
	case c.LogEvery < 0:
		return c, configError("LogEvery", "%d, want >= 0 (0 means no progress lines)", c.LogEvery)
	case c.Sampler != nil && c.Shuffle:
		return c, configError("Sampler", "set together with Shuffle; a custom sampler gives its own order")
	case c.BatchSampler != nil && (c.BatchSize != 0 || c.DropLast || c.Shuffle || c.Sampler != nil):
		return c, configError("BatchSampler", "set together with BatchSize, DropLast, Shuffle or Sampler; the batch sampler decides those")
	}
	if err := c.OnError.validate(); err != nil {
		return c, err
	}
	for name, v := range map[string]any{"Sampler": c.Sampler, "BatchSampler": c.BatchSampler, "WorkerInit": c.WorkerInit} {
		if v != nil && isNil(v) {
			return c, configError(name, "a nil %T", v)
		}
		if v, ok := v.(Validator); ok {
			if err := v.Validate(); err != nil {
				return c, fmt.Errorf("engine: Config.%s: %w", name, err)
			}
		}
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1
	}
	if c.Workers == AutoWorkers {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.PrefetchFactor == 0 || c.PrefetchFactor == AutoPrefetch {
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

// LogValue makes a Config print as its effective settings with log/slog:
// slog.Info("loader", "config", l.Config()) shows what a run used, defaults
// filled in. Every field is logged under its name in snake_case (a test
// holds it to that): an interface as its dynamic type, nil ones and a nil
// Resume as null; window is the batches in flight that Workers and
// PrefetchFactor allow.
func (c Config) LogValue() slog.Value {
	resume := slog.Any("resume", nil)
	if st := c.Resume; st != nil {
		resume = slog.Group("resume", slog.String("source", st.Kind), slog.Int("epoch", st.Epoch),
			slog.Int("position", st.Position), slog.Int("batches", st.Batches), slog.Int("done", len(st.Done)))
	}
	return slog.GroupValue(
		slog.Int("batch_size", c.BatchSize),
		slog.Bool("shuffle", c.Shuffle),
		slog.Uint64("seed", c.Seed),
		slog.Bool("drop_last", c.DropLast),
		slog.Bool("drop_uneven", c.DropUneven),
		slog.Int("workers", c.Workers),
		slog.Int("prefetch_factor", c.PrefetchFactor),
		slog.Int("window", c.window()),
		slog.Bool("restart_workers", c.RestartWorkers),
		slog.Duration("timeout", c.Timeout),
		typeAttr("worker_init", c.WorkerInit),
		slog.Bool("out_of_order", c.OutOfOrder),
		slog.String("on_error", fmt.Sprintf("%+v", c.OnError)),
		resume,
		slog.Bool("resume_changed", c.ResumeChanged),
		slog.Int("log_every", c.LogEvery),
		typeAttr("sampler", c.Sampler),
		typeAttr("batch_sampler", c.BatchSampler),
		slog.Bool("skip_zeroing", c.SkipZeroing),
		slog.Int64("max_pinned_bytes", c.MaxPinnedBytes),
		slog.Int("rank", c.Rank),
		slog.Int("world_size", c.WorldSize),
		slog.Bool("write_combined", c.WriteCombined),
		slog.String("stream", fmt.Sprintf("%#x", c.Stream)),
		slog.Bool("check_released", c.CheckReleased),
		slog.String("backend", c.Backend),
	)
}

// typeAttr logs an interface field as its dynamic type, or null when nil.
func typeAttr(key string, v any) slog.Attr {
	if v == nil {
		return slog.Any(key, nil)
	}
	return slog.String(key, fmt.Sprintf("%T", v))
}
