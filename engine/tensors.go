package engine

import (
	"context"
	"fmt"

	"github.com/tensorbatch/tensorbatch/collate"
)

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
		f["tensors."+d.names[i]] = fmt.Sprintf("%s%v %s", t.DType(), t.Shape(), FingerprintBytes(t.Bytes()))
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
