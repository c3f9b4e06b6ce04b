package engine_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// capable has every optional capability of capabilities.go: it writes
// every byte, fills whole batches (counting them), fingerprints and
// reports.
type capable struct {
	n, base int
	batches atomic.Int64
}

func (c *capable) Len() int               { return c.n }
func (c *capable) Schema() collate.Schema { return indexSchema }
func (c *capable) Fill(ctx context.Context, s *engine.Slot) error {
	collate.As[int64](s.Tensor("index"))[0] = int64(c.base + s.Index())
	x := collate.As[float32](s.Tensor("x"))
	for i := range x {
		x[i] = float32(s.Rand().NormFloat64())
	}
	return nil
}
func (c *capable) WritesEveryByte() bool { return true }
func (c *capable) FillBatch(ctx context.Context, b *engine.BatchSlot) error {
	c.batches.Add(1)
	idx := collate.As[int64](b.Tensor("index"))
	x := collate.As[float32](b.Tensor("x"))
	per := len(x) / len(idx)
	for j, i := range b.Indices() {
		idx[j] = int64(c.base + i)
		r := rand.New(rand.NewPCG(b.Seed(j))) // the RNG the sample's Slot would have
		for k := range per {
			x[j*per+k] = float32(r.NormFloat64())
		}
	}
	return nil
}
func (c *capable) Fingerprint() engine.Fingerprint {
	return engine.Fingerprint{"capable.base": string(rune('0' + c.base/100))}
}
func (c *capable) Report() map[string]int64 { return map[string]int64{"batches": c.batches.Load()} }

// Concat, Subset and RandomSplit forward every capability of what they
// wrap: a Subset of a BatchFiller fills whole batches through it, with
// the samples a per-sample Fill would give; a Concat of BatchFillers does
// for a batch within one dataset and fills a mixed one sample by sample.
func TestWrappersForwardEveryCapability(t *testing.T) {
	t.Parallel()
	a, b := &capable{n: 20}, &capable{n: 20, base: 100}
	cat, err := engine.Concat(a, b)
	require.NoError(t, err)
	sub, err := engine.Subset(a, []int{5, 3, 5, 19, 0, 7, 7, 2})
	require.NoError(t, err)
	parts, err := engine.RandomSplit(b, 3, 0.5, 0.5)
	require.NoError(t, err)
	counts := map[string]func() int64{
		"Concat":      func() int64 { return a.batches.Load() + b.batches.Load() },
		"Subset":      a.batches.Load,
		"RandomSplit": b.batches.Load,
	}
	for name, ds := range map[string]engine.Dataset{"Concat": cat, "Subset": sub, "RandomSplit": parts[0]} {
		_, batches := ds.(engine.BatchFiller)
		assert.True(t, batches, "%s: BatchFiller", name)
		fw, ok := ds.(engine.FullWriter)
		assert.True(t, ok && fw.WritesEveryByte(), "%s: FullWriter", name)
		assert.NotEmpty(t, engine.FingerprintOf(ds), "%s: Fingerprinter", name)
		_, reports := ds.(engine.Reporter)
		assert.True(t, reports, "%s: Reporter", name)

		before := a.batches.Load() + b.batches.Load()
		l := newLoader(t, ds, engine.Config{BatchSize: 4, Shuffle: true, Seed: 9, Workers: 2})
		got, _ := runSteps(t, l, 0, 1, -1)
		assert.Greater(t, a.batches.Load()+b.batches.Load(), before, "%s: FillBatch of the wrapped dataset", name)
		assert.Equal(t, map[string]int64{"batches": counts[name]()}, l.Stats().Dataset, "%s: Stats.Dataset", name)

		// The same batches as sample by sample (a wrapper of the bare Fill).
		plain := engine.DatasetFunc(ds.Len(), indexSchema, func(ctx context.Context, s *engine.Slot) error { return ds.Fill(ctx, s) })
		want, _ := runSteps(t, newLoader(t, plain, engine.Config{BatchSize: 4, Shuffle: true, Seed: 9, Workers: 2}), 0, 1, -1)
		assert.Equal(t, want, got, name)
	}
}
