package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/tensorbatch/tensorbatch/collate"
)

// Dataset is a map-style dataset: Len samples, each with the fields of
// Schema, written in place by Fill.
type Dataset interface {
	Len() int
	Schema() collate.Schema
	// Fill writes sample s.Index() into the views of s. It runs on a worker
	// goroutine, concurrently with other Fills, and should return when ctx
	// is done.
	Fill(ctx context.Context, s *Slot) error
}

// FullWriter is implemented by a dataset whose Fill (and FillBatch, where
// it has one) writes every byte of every field of every sample it fills
// without error. The loader then leaves batch buffers as the last batch
// left them instead of zeroing them first, as Config.SkipZeroing says from
// the caller's side: a zeroing pass is a memset of the whole batch, which
// for token windows costs a fifth of the copy that then overwrites it.
// Concat and Subset write every byte when what they wrap does.
type FullWriter interface {
	WritesEveryByte() bool
}

// writesEveryByte reports whether ds is a FullWriter that says it writes
// every byte.
func writesEveryByte(ds Dataset) bool {
	f, ok := ds.(FullWriter)
	return ok && f.WritesEveryByte()
}

// DatasetFunc returns a Dataset of n samples of schema filled by fill.
func DatasetFunc(n int, schema collate.Schema, fill func(ctx context.Context, s *Slot) error) Dataset {
	return funcDataset{n: n, schema: schema, fill: fill}
}

type funcDataset struct {
	n      int
	schema collate.Schema
	fill   func(ctx context.Context, s *Slot) error
}

func (d funcDataset) Len() int               { return d.n }
func (d funcDataset) Schema() collate.Schema { return d.schema }

// Fill runs fill, for an index in [0, n) only: a Slot made by hand
// (NewSlot) may name any.
func (d funcDataset) Fill(ctx context.Context, s *Slot) error {
	if i := s.Index(); i < 0 || i >= d.n {
		return fmt.Errorf("engine: DatasetFunc: index %d is out of range [0, %d)", i, d.n)
	}
	return d.fill(ctx, s)
}

// check refuses a nil fill; New and the wrappers call it, since
// DatasetFunc has no error to return. A negative n is refused as any
// dataset's negative Len is.
func (d funcDataset) check() error {
	if d.fill == nil {
		return errors.New("DatasetFunc: fill is nil")
	}
	return nil
}

// Slot is one sample's place in a batch buffer, handed to Fill. A Slot is
// valid only during the Fill call it was given to.
type Slot struct {
	index, epoch int
	worker       int // the worker filling it; -1 for the consumer's goroutine
	seedIndex    int // the index Rand and Seed are keyed by: the loader's, even while a wrapper (Concat, Subset) re-points index
	pos          int // position in the batch
	seed         uint64
	layout       *collate.Layout
	buf          []byte
	pcg          rand.PCG
	reader       epochReader // the run's source.begin, for the source's Fill (IterableDataset's); nil outside a run
	rng          *rand.Rand
}

// NewSlot returns a standalone slot: sample index of epoch under seed, at
// position pos of buf, which is laid out by layout. It is how a Fill is
// tested or run outside a Loader; the sample's RNG is the one the Loader
// would give it.
func NewSlot(seed uint64, epoch, index int, layout *collate.Layout, buf []byte, pos int) *Slot {
	s := newSlot(seed)
	s.worker = -1
	s.reset(epoch, index, pos, layout, buf)
	return s
}

func newSlot(seed uint64) *Slot {
	s := &Slot{seed: seed}
	s.rng = rand.New(&s.pcg)
	return s
}

// reset points the slot at sample index, position pos of the batch in buf.
func (s *Slot) reset(epoch, index, pos int, layout *collate.Layout, buf []byte) {
	s.epoch, s.index, s.seedIndex, s.pos, s.layout, s.buf = epoch, index, index, pos, layout, buf
	s.pcg.Seed(SampleSeed(s.seed, epoch, index))
}

// Index returns the dataset index of the sample.
func (s *Slot) Index() int { return s.index }

// Epoch returns the epoch the sample is loaded in.
func (s *Slot) Epoch() int { return s.epoch }

// Worker returns the id of the worker goroutine filling the sample, from 0
// to Workers-1 (PyTorch's get_worker_info().id), or -1 for the consumer's
// goroutine (Workers 0) and for a NewSlot. Use it to index per-worker state
// set up by Config.WorkerInit; never to vary the sample, which must be the
// same whichever worker fills it.
func (s *Slot) Worker() int { return s.worker }

// Rand returns the sample's RNG: a PCG seeded from (Seed, Epoch, Index), so
// the sample's random draws are the same whichever worker fills it. Inside
// a wrapped dataset (Concat, Subset, RandomSplit) Index is the inner
// dataset's, but Rand and Seed stay keyed by the loader's index.
func (s *Slot) Rand() *rand.Rand { return s.rng }

// Seed returns the words that seed Rand (see SampleSeed), for code that
// keys its own generator by the sample.
func (s *Slot) Seed() (uint64, uint64) { return SampleSeed(s.seed, s.epoch, s.seedIndex) }

// Tensor returns the view of field name for this sample: its place in the
// pinned batch buffer. It panics, listing the schema's fields, when there
// is no such field; the panic becomes the sample's SampleError.
func (s *Slot) Tensor(name string) collate.Tensor {
	i := s.layout.Schema().Index(name)
	if i < 0 {
		panic(fmt.Sprintf("engine: Slot.Tensor(%q): no such field; the schema has %q", name, s.layout.Schema().Names()))
	}
	return s.layout.Sample(s.buf, i, s.pos)
}

// Sequence returns the first n rows of the Dynamic field name for this
// sample and records n as its length: write the sample's rows into it.
// The batch pads every sample to its longest with the field's Pad, and
// the batch field "<name>_len" holds the lengths. It panics, naming the
// field, when the field is not Dynamic or n exceeds its MaxLen; the panic
// becomes the sample's SampleError, which names the index.
func (s *Slot) Sequence(name string, n int) collate.Tensor {
	schema := s.layout.Schema()
	i := schema.Index(name)
	switch {
	case i < 0:
		panic(fmt.Sprintf("engine: Slot.Sequence(%q): no such field; the schema has %q", name, schema.Names()))
	case !schema[i].IsDynamic():
		panic(fmt.Sprintf("engine: Slot.Sequence(%q): the field's first dimension is not Dynamic", name))
	case n < 0 || n > schema[i].MaxLen:
		panic(fmt.Sprintf("engine: field %q: a sequence of %d rows, its MaxLen is %d", name, n, schema[i].MaxLen))
	}
	collate.As[int64](s.Tensor(name + lenSuffix))[0] = int64(n)
	return s.layout.Rows(s.buf, i, s.pos, n)
}

// TensorAt returns the view of the i-th field of the schema for this sample.
func (s *Slot) TensorAt(i int) collate.Tensor { return s.layout.Sample(s.buf, i, s.pos) }
