package engine

import (
	"context"
	"errors"

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

func (d funcDataset) Len() int { return d.n }

func (d funcDataset) Schema() collate.Schema { return d.schema }

func (d funcDataset) Fill(ctx context.Context, s *Slot) error { return d.fill(ctx, s) }

// check refuses a nil fill; New and the wrappers call it, since
// DatasetFunc has no error to return. A negative n is refused as any
// dataset's negative Len is.
func (d funcDataset) check() error {
	if d.fill == nil {
		return errors.New("DatasetFunc: fill is nil")
	}
	return nil
}
