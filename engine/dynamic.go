package engine

import (
	"fmt"

	"github.com/tensorbatch/tensorbatch/collate"
)

// lenSuffix names the int64 field that holds a Dynamic field's lengths.
const lenSuffix = "_len"

// dynField is a Dynamic field of the layout and its lengths field.
type dynField struct {
	field, lens int
	pad         []byte
}

// NewLayout returns the layout of a Loader's batches of up to batch
// samples of schema s: its fields, plus the int64 "<name>_len" field of
// each Dynamic field. Lay a buffer out with it for NewSlot, to run a Fill
// outside a Loader as the Loader would.
func NewLayout(s collate.Schema, batch int) (*collate.Layout, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("engine: NewLayout: %w", err)
	}
	full, _, err := withLengths(s)
	if err != nil {
		return nil, fmt.Errorf("engine: NewLayout: %w", err)
	}
	return collate.NewLayout(full, batch)
}

// withLengths returns the layout schema: s, a valid schema, plus an int64
// "<name>_len" field after it for each Dynamic field, and those fields'
// positions. A field of s already named like a lengths field is a schema
// error (wrapping collate.ErrSchema) that names both fields.
func withLengths(s collate.Schema) (collate.Schema, []dynField, error) {
	out := append(collate.Schema(nil), s...)
	var dyn []dynField
	for i, f := range s {
		if f.IsDynamic() {
			name := f.Name + lenSuffix
			if j := s.Index(name); j >= 0 {
				return nil, nil, fmt.Errorf("%w: field %d %q clashes with the lengths field %q of Dynamic field %d %q, which the loader adds; rename one",
					collate.ErrSchema, j, name, name, i, f.Name)
			}
			dyn = append(dyn, dynField{field: i, lens: len(out), pad: f.PadBytes()})
			out = append(out, collate.Field{Name: name, DType: collate.Int64})
		}
	}
	if err := out.Validate(); err != nil { // a backstop: s is valid and the names are new
		return nil, nil, err
	}
	return out, dyn, nil
}

// padBatch pads every Dynamic field of a filled batch of n samples to its
// longest sample, one kernel call a field, and returns the longest lengths
// and the bytes it moved (samples after the first move down unless every
// sample has MaxLen rows).
func padBatch(layout *collate.Layout, dyn []dynField, buf []byte, n int) (longest []int, moved int) {
	if len(dyn) == 0 {
		return nil, 0
	}
	longest = make([]int, len(dyn))
	for d, df := range dyn {
		lens := collate.As[int64](layout.Batch(buf, df.lens, n))
		for _, v := range lens {
			longest[d] = max(longest[d], int(v))
		}
		f := layout.Schema()[df.field]
		collate.PadStack(layout.FieldBytes(buf, df.field), lens, f.MaxLen, longest[d], f.RowBytes(), df.pad)
		if longest[d] < f.MaxLen {
			for _, v := range lens[1:] {
				moved += int(v) * f.RowBytes()
			}
		}
	}
	return longest, moved
}
