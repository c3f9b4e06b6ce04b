package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// entrySchema: whether a sample's x was all zeros when its Fill began, and x.
var entrySchema = collate.Schema{
	{Name: "clean", DType: collate.Int64},
	{Name: "x", DType: collate.Uint8, Shape: []int{16}},
}

// entryDataset writes every byte of each sample, and in "clean" whether
// x held zeros before it did. full is what WritesEveryByte reports;
// batch makes it a BatchFiller.
type entryDataset struct {
	full, batch bool
}

func (d entryDataset) Len() int               { return 8 }
func (d entryDataset) Schema() collate.Schema { return entrySchema }
func (d entryDataset) WritesEveryByte() bool  { return d.full }
func (d entryDataset) Fill(_ context.Context, s *engine.Slot) error {
	fillEntry(s.Tensor("clean"), s.Tensor("x"), []int{s.Index()})
	return nil
}

// fillEntry writes the samples indices into clean and x.
func fillEntry(clean, x collate.Tensor, indices []int) {
	c := collate.As[int64](clean)
	row := len(x.Bytes()) / len(indices)
	for i, index := range indices {
		xi := x.Bytes()[i*row : (i+1)*row]
		c[i] = 0
		if !slices.ContainsFunc(xi, func(b byte) bool { return b != 0 }) {
			c[i] = 1
		}
		for j := range xi {
			xi[j] = byte(index + 1)
		}
	}
}

type entryBatches struct{ entryDataset }

func (d entryBatches) FillBatch(_ context.Context, b *engine.BatchSlot) error {
	fillEntry(b.Tensor("clean"), b.Tensor("x"), b.Indices())
	return nil
}

// A dataset that says it writes every byte (engine.FullWriter) gets its
// buffers as the last batch left them; any other is zeroed before each
// Fill or FillBatch unless Config.SkipZeroing says otherwise. Either way
// the batches hold what the dataset wrote.
func TestFullWriterIsNotZeroed(t *testing.T) {
	for _, batch := range []bool{false, true} {
		for _, full := range []bool{false, true} {
			for _, skip := range []bool{false, true} {
				for _, workers := range []int{0, 2} {
					t.Run(fmt.Sprintf("batch=%v/full=%v/skip=%v/workers=%d", batch, full, skip, workers), func(t *testing.T) {
						var ds engine.Dataset = entryDataset{full: full}
						if batch {
							ds = entryBatches{entryDataset{full: full}}
						}
						l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: workers, SkipZeroing: skip})
						dirty := 0
						for e := range 4 {
							for b, err := range l.Epoch(context.Background(), e) {
								require.NoError(t, err)
								for i, c := range collate.As[int64](b.Tensor("clean")) {
									dirty += int(1 - c)
									want := byte(b.Indices()[i] + 1)
									assert.Equal(t, bytes.Repeat([]byte{want}, 16), b.Tensor("x").Bytes()[16*i:16*(i+1)])
								}
							}
						}
						if full || skip {
							assert.Positive(t, dirty, "a reused buffer is not zeroed")
						} else {
							assert.Zero(t, dirty, "every Fill found zeros")
						}
					})
				}
			}
		}
	}
}

// Concat and Subset write every byte when all they wrap does.
func TestFullWriterThroughWrappers(t *testing.T) {
	t.Parallel()
	full, plain := entryDataset{full: true}, engine.DatasetFunc(8, entrySchema, func(context.Context, *engine.Slot) error { return nil })
	writes := func(ds engine.Dataset, err error) bool {
		require.NoError(t, err)
		f, ok := ds.(engine.FullWriter)
		return ok && f.WritesEveryByte()
	}
	assert.True(t, writes(engine.Concat(full, full)))
	assert.False(t, writes(engine.Concat(full, plain)))
	assert.False(t, writes(engine.Concat(full, entryDataset{})))
	assert.True(t, writes(engine.Subset(full, []int{1, 2})))
	assert.False(t, writes(engine.Subset(plain, []int{1, 2})))
	x, err := collate.FromSlice([]float32{1, 2, 3, 4}, 4)
	require.NoError(t, err)
	tensors, err := engine.Tensors([]string{"x"}, x)
	assert.True(t, writes(tensors, err))
}
