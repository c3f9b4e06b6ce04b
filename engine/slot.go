package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/tensorbatch/tensorbatch/collate"
)

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
	reader       epochReader // the run's access.begin, for the Fill of an access's dataset (IterableDataset's); nil outside a run
	rng          *rand.Rand
}

// NewSlot returns a standalone slot: sample index of epoch under seed, at
// position pos of buf, which is laid out by layout.
//
// Deprecated: it lives in the test-support package now, beside the
// conformance suite: use enginetest.NewSlot.
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

// BatchSlot is a whole batch's place in the pinned buffer, handed to
// FillBatch; valid only during the call.
type BatchSlot struct {
	run     *run
	indices []int // the dataset's indices: the loader's, or re-pointed (FillBatchAt)
	outer   []int // the loader's indices, which key the samples' RNGs
	buf     []byte
	slot    *Slot // the worker's, for Slot
}

// Indices returns the dataset indices of the batch, in order.
func (b *BatchSlot) Indices() []int { return b.indices }

// Seed returns the words that seed sample i's RNG (see SampleSeed and
// Slot.Seed), so a FillBatch draws what a Fill of that sample would. They
// stay keyed by the loader's index while a wrapper re-points the batch
// (FillBatchAt), as a Slot's do (FillAt).
func (b *BatchSlot) Seed(i int) (uint64, uint64) {
	return SampleSeed(b.run.l.cfg.Seed, b.run.epoch, b.outer[i])
}

// Slot returns sample i of the batch as a Slot, to fill it with a Fill: a
// wrapper whose batch mixes datasets fills the samples it cannot hand to
// one FillBatch so. The Slot is valid until the next call of Slot or the
// end of FillBatch.
func (b *BatchSlot) Slot(i int) *Slot {
	s := b.slot
	s.reset(b.run.epoch, b.indices[i], i, b.run.layout, b.buf)
	s.seedIndex, s.reader = b.outer[i], b.run.reader
	s.pcg.Seed(b.Seed(i))
	if !b.run.l.zero {
		for _, df := range b.run.l.dyn {
			clear(s.TensorAt(df.lens).Bytes()) // a length left from an earlier batch would be wrong
		}
	}
	return s
}

// FillBatchAt runs bf's FillBatch on b re-pointed at indices of bf, one
// for each sample of b, in order: Indices is indices during the call,
// Seed stays keyed by the loader's indices, and the tensors are the same
// batch's. A *SampleError it returns names the loader's index. A dataset
// that wraps BatchFillers forwards its FillBatch through it, as its Fill
// through FillAt.
func FillBatchAt(ctx context.Context, bf BatchFiller, b *BatchSlot, indices []int) error {
	if len(indices) != len(b.indices) {
		return fmt.Errorf("engine: FillBatchAt: %d indices for a batch of %d", len(indices), len(b.indices))
	}
	saved := b.indices
	b.indices = indices
	defer func() { b.indices = saved }()
	err := bf.FillBatch(ctx, b)
	if se, ok := err.(*SampleError); ok {
		if j := slices.Index(indices, se.Index); j >= 0 {
			c := *se
			c.Index = b.outer[j]
			return &c
		}
	}
	return err
}

// Epoch returns the epoch being loaded.
func (b *BatchSlot) Epoch() int { return b.run.epoch }

// Tensor returns field name of the batch, shape [len(Indices()), field
// shape...]. It panics when there is no such field.
func (b *BatchSlot) Tensor(name string) collate.Tensor {
	layout := b.run.layout
	i := layout.Schema().Index(name)
	if i < 0 {
		panic(fmt.Sprintf("engine: BatchSlot.Tensor(%q): no such field; the schema has %q", name, layout.Schema().Names()))
	}
	return layout.Batch(b.buf, i, len(b.indices))
}

// WriteCombined reports whether the batch buffer is write-combined memory
// (Config.WriteCombined on a GPU backend): write it with streaming stores,
// never read it.
func (b *BatchSlot) WriteCombined() bool { return b.run.l.cfg.WriteCombined && b.run.l.gpu != nil }

// Copied counts bytes the dataset copied into the batch, for Stats.
func (b *BatchSlot) Copied(n int) { b.run.l.copied.Add(int64(n)) }
