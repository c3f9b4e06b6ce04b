package gomlx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"sync"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/x448/float16"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// Config says which batch fields a Dataset yields and how it runs epochs.
type Config struct {
	// Name names the dataset in GoMLX's logs and metrics; empty means
	// "tensorbatch".
	Name string
	// Inputs and Labels name the batch fields yielded as GoMLX's inputs and
	// labels, in that order. Each becomes a tensor of shape [batch, field
	// shape...]. A name the batch lacks makes Yield panic, as
	// engine.Batch.Tensor does.
	Inputs, Labels []string
	// ScalarLabels yields each scalar label field (shape [batch]: vision's
	// and shards' int64 labels) as [batch, 1], the shape GoMLX's sparse
	// losses want, with no reshape in the model. Label fields of another
	// shape are yielded as they are.
	ScalarLabels bool
	// Epoch is the first epoch to load (to resume a run, say).
	Epoch int
	// Infinite runs epoch after epoch, so Yield never returns io.EOF: for
	// train.Loop.RunSteps. Without it an epoch ends with io.EOF, for
	// RunEpochs and Trainer.Eval.
	Infinite bool
	// Device is the backend device the tensors are placed on.
	Device backends.DeviceNum
}

// Dataset is a GoMLX train.Dataset over the batches of an engine.Loader.
// Yield copies each field named in Config once, from the pinned batch into
// a new buffer of the backend, and hands the tensors to the caller, which
// owns them (train.Loop finalizes them after each step, which gives
// simplego's buffers back to its pool). Its methods are safe for
// concurrent use; they run one at a time.
type Dataset struct {
	ctx     context.Context
	backend backends.Backend
	loader  *engine.Loader
	cfg     Config

	mu      sync.Mutex
	epoch   int // the epoch Yield loads
	batches int // batches yielded in this epoch
	next    func() (*engine.Batch, error, bool)
	stop    func()
	err     error // io.EOF or the error that ended the epoch, returned until Reset
}

var _ train.Dataset = (*Dataset)(nil)

// New returns a Dataset that yields the batches of l as tensors of backend.
// ctx bounds every epoch: once it is cancelled, Yield returns its cause.
// The caller keeps l and closes it after Close.
func New(ctx context.Context, backend backends.Backend, l *engine.Loader, cfg Config) (*Dataset, error) {
	switch {
	case backend == nil:
		return nil, errors.New("gomlx: New: nil backend")
	case l == nil:
		return nil, errors.New("gomlx: New: nil Loader")
	case len(cfg.Inputs) == 0:
		return nil, errors.New("gomlx: Config.Inputs: empty, want at least one batch field")
	case cfg.Epoch < 0:
		return nil, fmt.Errorf("gomlx: Config.Epoch: %d, want >= 0", cfg.Epoch)
	}
	names := slices.Concat(cfg.Inputs, cfg.Labels)
	if slices.Contains(names, "") {
		return nil, errors.New("gomlx: Config.Inputs, Labels: an empty field name")
	}
	if len(slices.Compact(slices.Sorted(slices.Values(names)))) != len(names) {
		return nil, fmt.Errorf("gomlx: Config.Inputs, Labels: a field named twice in %q", names)
	}
	if cfg.Name == "" {
		cfg.Name = "tensorbatch"
	}
	return &Dataset{ctx: ctx, backend: backend, loader: l, cfg: cfg, epoch: cfg.Epoch}, nil
}

// Name returns Config.Name. It implements train.Dataset.
func (d *Dataset) Name() string { return d.cfg.Name }

// Epoch returns the epoch that Yield loads.
func (d *Dataset) Epoch() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.epoch
}

// Reset ends the current epoch and moves to the next, if the current one
// was started: a Reset before any Yield (Trainer.Eval resets first) keeps
// the epoch. It implements train.Dataset.
func (d *Dataset) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.next != nil || d.err != nil {
		d.endEpoch()
		d.epoch++
	}
	d.err = nil
}

// Close ends the running epoch, if any, so that the Loader's workers leave
// it. The Loader stays open. Close is safe to call more than once; a later
// Yield starts the next epoch.
func (d *Dataset) Close() error {
	d.Reset()
	return nil
}

// endEpoch stops the Loader's epoch, which recycles its batches.
func (d *Dataset) endEpoch() {
	if d.stop != nil {
		d.stop()
	}
	d.next, d.stop, d.batches = nil, nil, 0
}

// Yield returns the next batch's fields as tensors: Config.Inputs as
// inputs, Config.Labels as labels, and a nil spec. At the end of an epoch
// it returns io.EOF (unless Config.Infinite) until Reset. A loader error
// (a *engine.SampleError, the cause of ctx's cancellation, engine.ErrClosed)
// is returned as is, also until Reset. It implements train.Dataset.
func (d *Dataset) Yield() (spec any, inputs, labels []*tensors.Tensor, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.err == nil {
		if d.next == nil {
			d.next, d.stop = iter.Pull2(d.loader.Epoch(d.ctx, d.epoch))
		}
		b, err, ok := d.next()
		switch {
		case !ok && d.cfg.Infinite && d.batches > 0:
			d.endEpoch()
			d.epoch++
		case !ok:
			d.endEpoch()
			d.err = io.EOF
		case err != nil:
			d.endEpoch()
			d.err = err
		default:
			// b stays valid until the next call of d.next or d.stop.
			d.batches++
			if inputs, err = d.tensors(b, d.cfg.Inputs, false); err != nil {
				return nil, nil, nil, err
			}
			if labels, err = d.tensors(b, d.cfg.Labels, d.cfg.ScalarLabels); err != nil {
				finalize(inputs)
				return nil, nil, nil, err
			}
			return nil, inputs, labels, nil
		}
	}
	return nil, nil, nil, d.err
}

// tensors copies the named fields of b into new backend buffers.
func (d *Dataset) tensors(b *engine.Batch, names []string, column bool) ([]*tensors.Tensor, error) {
	out := make([]*tensors.Tensor, 0, len(names))
	for _, name := range names {
		bt := b.Tensor(name)
		shape := bt.Shape()
		if column && len(shape) == 1 {
			shape = append(shape, 1)
		}
		t, err := d.tensor(bt, shape)
		if err != nil {
			finalize(out)
			return nil, fmt.Errorf("gomlx: batch %d of epoch %d, field %q: %w", b.IndexInEpoch(), b.Epoch(), name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// tensor makes a GoMLX tensor of t with one copy: BufferFromFlatData
// copies the pinned memory into a buffer the backend owns (simplego: a Go
// slice from its pool; XLA: the host-to-device transfer itself).
func (d *Dataset) tensor(t collate.Tensor, shape []int) (*tensors.Tensor, error) {
	dt, flat, err := view(t)
	if err != nil {
		return nil, err
	}
	buf, err := d.backend.BufferFromFlatData(d.cfg.Device, flat, shapes.Make(dt, shape...))
	if err != nil {
		return nil, err
	}
	tt, err := tensors.FromBuffer(d.backend, buf)
	if err != nil {
		return nil, errors.Join(err, d.backend.BufferFinalize(buf))
	}
	return tt, nil
}

// view returns t's GoMLX dtype and its elements as the Go slice GoMLX
// expects of that dtype, over t's memory (no copy).
func view(t collate.Tensor) (dtypes.DType, any, error) {
	switch t.DType() {
	case collate.Uint8:
		return dtypes.Uint8, collate.As[uint8](t), nil
	case collate.Int32:
		return dtypes.Int32, collate.As[int32](t), nil
	case collate.Int64:
		return dtypes.Int64, collate.As[int64](t), nil
	case collate.Float32:
		return dtypes.Float32, collate.As[float32](t), nil
	case collate.Float64:
		return dtypes.Float64, collate.As[float64](t), nil
	case collate.Int8:
		return dtypes.Int8, collate.As[int8](t), nil
	case collate.Int16:
		return dtypes.Int16, collate.As[int16](t), nil
	case collate.Uint16:
		return dtypes.Uint16, collate.As[uint16](t), nil
	case collate.Uint32:
		return dtypes.Uint32, collate.As[uint32](t), nil
	case collate.Bool:
		return dtypes.Bool, collate.As[bool](t), nil
	case collate.Float16:
		return dtypes.Float16, reinterpret[float16.Float16](collate.As[collate.F16](t)), nil
	case collate.BFloat16:
		return dtypes.BFloat16, reinterpret[bfloat16.BFloat16](collate.As[collate.BF16](t)), nil
	}
	return dtypes.InvalidDType, nil, fmt.Errorf("no GoMLX dtype for %v", t.DType())
}

// reinterpret views s as a slice of To, a type of the same size (the half
// types of collate and GoMLX are both uint16 bit patterns).
func reinterpret[To, From any](s []From) []To {
	return unsafe.Slice((*To)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

func finalize(ts []*tensors.Tensor) {
	for _, t := range ts {
		_ = t.FinalizeAll()
	}
}
