package engine

import (
	"context"
	"fmt"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/internal/ident"
)

// BatchFiller is implemented by datasets that fill a whole batch at once:
// one kernel call a batch instead of one Fill a sample. The loader then
// hands whole batches to its workers and calls FillBatch instead of Fill.
type BatchFiller interface {
	FillBatch(ctx context.Context, b *BatchSlot) error
}

// BatchSlot is a whole batch's place in the pinned buffer, handed to
// FillBatch; valid only during the call.
type BatchSlot struct {
	run     *run
	indices []int
	buf     []byte
}

// Indices returns the dataset indices of the batch, in order.
func (b *BatchSlot) Indices() []int { return b.indices }

// Seed returns the words that seed sample i's RNG (see SampleSeed and
// Slot.Seed), so a FillBatch draws what a Fill of that sample would.
func (b *BatchSlot) Seed(i int) (uint64, uint64) {
	return SampleSeed(b.run.l.cfg.Seed, b.run.epoch, b.indices[i])
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

// TensorsDataset is an in-memory dataset: row i of each tensor is sample i,
// as PyTorch's TensorDataset. Batches are filled by the gather kernel, one
// call a field a batch.
type TensorsDataset struct {
	names  []string
	data   []collate.Tensor
	schema collate.Schema
	n      int
}

// Tensors returns a dataset over tensors that share their first
// dimension; names[i] names tensors[i].
func Tensors(names []string, tensors ...collate.Tensor) (*TensorsDataset, error) {
	if len(names) != len(tensors) || len(tensors) == 0 {
		return nil, fmt.Errorf("engine: Tensors: %d names for %d tensors", len(names), len(tensors))
	}
	d := &TensorsDataset{names: names, data: tensors}
	for i, t := range tensors {
		if t.Rank() == 0 {
			return nil, fmt.Errorf("engine: Tensors: %q is a scalar; samples are rows of the first dimension", names[i])
		}
		if i == 0 {
			d.n = t.Dim(0)
		} else if t.Dim(0) != d.n {
			return nil, fmt.Errorf("engine: Tensors: %q has %d rows, %q has %d", names[i], t.Dim(0), names[0], d.n)
		}
		d.schema = append(d.schema, collate.Field{Name: names[i], DType: t.DType(), Shape: t.Shape()[1:]})
	}
	if err := d.schema.Validate(); err != nil {
		return nil, fmt.Errorf("engine: Tensors: %w", err)
	}
	return d, nil
}

// Len returns the number of rows.
func (d *TensorsDataset) Len() int { return d.n }

// Schema returns one field a tensor, shaped like a row.
func (d *TensorsDataset) Schema() collate.Schema { return d.schema }

// WritesEveryByte reports true: Fill and FillBatch copy whole rows
// (FullWriter).
func (d *TensorsDataset) WritesEveryByte() bool { return true }

// Fingerprint: each tensor's name, dtype, shape and sampled bytes.
func (d *TensorsDataset) Fingerprint() Fingerprint {
	f := Fingerprint{}
	for i, t := range d.data {
		f["tensors."+d.names[i]] = fmt.Sprintf("%s%v %s", t.DType(), t.Shape(), ident.Bytes(t.Bytes()))
	}
	return f
}

// Fill copies sample s.Index()'s rows (used when called outside a batch).
func (d *TensorsDataset) Fill(_ context.Context, s *Slot) error {
	if i := s.Index(); i < 0 || i >= d.n {
		return fmt.Errorf("engine: Tensors: index %d is out of range [0, %d)", i, d.n)
	}
	for i, t := range d.data {
		row := len(t.Bytes()) / d.n
		copy(s.Tensor(d.names[i]).Bytes(), t.Bytes()[s.Index()*row:(s.Index()+1)*row])
	}
	return nil
}

// FillBatch gathers the batch's rows of every tensor.
func (d *TensorsDataset) FillBatch(_ context.Context, b *BatchSlot) error {
	idx := make([]int64, len(b.indices))
	for i, v := range b.indices {
		idx[i] = int64(v)
	}
	gather := collate.Gather
	if b.WriteCombined() {
		gather = collate.GatherStreaming
	}
	for i, t := range d.data {
		dst := b.Tensor(d.names[i])
		if err := gather(dst, t, idx); err != nil {
			return err
		}
		b.Copied(len(dst.Bytes()))
	}
	return nil
}
