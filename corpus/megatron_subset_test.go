package corpus

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// countedMegatron counts the calls of a MegatronDataset's Fill and
// FillBatch.
type countedMegatron struct {
	*MegatronDataset
	fills, batches atomic.Int64
}

func (c *countedMegatron) Fill(ctx context.Context, s *engine.Slot) error {
	c.fills.Add(1)
	return c.MegatronDataset.Fill(ctx, s)
}

func (c *countedMegatron) FillBatch(ctx context.Context, b *engine.BatchSlot) error {
	c.batches.Add(1)
	return c.MegatronDataset.FillBatch(ctx, b)
}

// A Subset of a Megatron dataset (the even indices; a RandomSplit part)
// fills whole batches through Megatron's FillBatch (engine.Subset
// forwards it with FillBatchAt), never a sample at a time, and each of
// its samples is the Megatron dataset's sample of the index it names.
func TestMegatronSubsetFillsBatches(t *testing.T) {
	prefix := megatronDocs(t, collate.Uint16, fpDocs(0))
	d := openMegatron(t, prefix, MegatronConfig{SeqLength: 16, Seed: 4, Out: collate.Int64})
	rows, _ := megatronRows(t, d, engine.Config{BatchSize: 8}, 1)
	var evens []int
	for i := 0; i < d.Len(); i += 2 {
		evens = append(evens, i)
	}
	c := &countedMegatron{MegatronDataset: d}
	even, err := engine.Subset(c, evens)
	require.NoError(t, err)
	parts, err := engine.RandomSplit(c, 5, 0.5, 0.5)
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		ds    engine.Dataset
		index func(int) int // the Megatron index of the subset's i
	}{
		"evens":        {even, func(i int) int { return evens[i] }},
		"random-split": {parts[0], nil},
	} {
		_, ok := tc.ds.(engine.BatchFiller)
		require.True(t, ok, "%s: a Subset of a BatchFiller is one", name)
		c.fills.Store(0)
		c.batches.Store(0)
		l, err := engine.New(tc.ds, engine.Config{BatchSize: 8, Shuffle: true, Seed: 2, Workers: 2, WorldSize: 1, Backend: "cpu"})
		require.NoError(t, err)
		n := 0
		for b, err := range l.Epoch(context.Background(), 1) {
			require.NoError(t, err)
			tokens := collate.As[int64](b.Tensor("tokens"))
			for r, i := range b.Indices() {
				if tc.index != nil {
					assert.Equal(t, rows[tc.index(i)], tokens[r*17:(r+1)*17], "%s: sample %d", name, i)
				}
			}
			n++
		}
		require.NoError(t, l.Close())
		require.Positive(t, n)
		assert.Zero(t, c.fills.Load(), "%s: no sample filled alone", name)
		assert.EqualValues(t, n, c.batches.Load(), "%s: one FillBatch a batch", name)
	}
}

// BenchmarkMegatronSubset loads the same number of batches (SeqLength
// 1024, batch 32, Workers 0) from a Megatron dataset and from a Subset of
// another one over the same files, in the same run: the even indices, or
// half of a RandomSplit. Epoch 0 runs both sides untimed first (warmUp);
// then, epoch by epoch, each side loads the batches a Subset's epoch has
// (half the Megatron dataset's), the side that goes first alternating.
// The metrics are each side's time a batch and x-megatron, the Subset's
// throughput over the Megatron dataset's (1 is Megatron's own speed).
// The Subset's samples are not consecutive indices of the Megatron
// dataset, so its FillBatch copies them a sample at a time, where a batch
// of Megatron's own consecutive indices is one sweep of its runs.
func BenchmarkMegatronSubset(b *testing.B) {
	var docs [][]int64
	for ntok, i := 0, 0; ntok < 1<<23; i++ { // BenchmarkMegatronSequences' corpus
		doc := make([]int64, 50+(i*7919)%1950)
		for j := range doc {
			doc[j] = int64((ntok + j) % 65521)
		}
		ntok += len(doc)
		docs = append(docs, doc)
	}
	prefix := megatronDocs(b, collate.Uint16, docs)
	for _, name := range []string{"evens", "random-split"} {
		b.Run(name, func(b *testing.B) { megatronSubset(b, prefix, name) })
	}
}

// megatronSubset is BenchmarkMegatronSubset on the corpus at prefix, with
// the Subset that name names.
func megatronSubset(b *testing.B, prefix, name string) {
	const seq, batch = 1024, 32
	cfg := MegatronConfig{SeqLength: seq, Seed: 1}
	d := openMegatron(b, prefix, cfg)
	inner := openMegatron(b, prefix, cfg)
	var sub engine.Dataset
	var err error
	if name == "evens" {
		var evens []int
		for i := 0; i < inner.Len(); i += 2 {
			evens = append(evens, i)
		}
		sub, err = engine.Subset(inner, evens)
	} else {
		var parts []engine.Dataset
		parts, err = engine.RandomSplit(inner, 1, 0.5, 0.5)
		if err == nil {
			sub = parts[0]
		}
	}
	require.NoError(b, err)
	lc := engine.Config{BatchSize: batch, WorldSize: 1, Backend: "cpu"}
	ld, err := engine.New(d, lc)
	require.NoError(b, err)
	defer ld.Close()
	ls, err := engine.New(sub, lc)
	require.NoError(b, err)
	defer ls.Close()
	per := sub.Len() / batch // batches an epoch of each side loads
	require.Positive(b, per)
	loadBatches(b, ld, 0, per)
	loadBatches(b, ls, 0, per)
	var times [2]time.Duration // Megatron, Subset
	b.ResetTimer()
	for n, e := 0, 1; n < b.N; n, e = n+per, e+1 {
		m := min(b.N-n, per)
		for j := range 2 {
			side := (e + j) % 2
			start := time.Now()
			loadBatches(b, [2]*engine.Loader{ld, ls}[side], e, m)
			times[side] += time.Since(start)
		}
	}
	b.ReportMetric(float64(times[0].Nanoseconds())/float64(b.N), "megatron-ns/batch")
	b.ReportMetric(float64(times[1].Nanoseconds())/float64(b.N), "subset-ns/batch")
	b.ReportMetric(times[0].Seconds()/times[1].Seconds(), "x-megatron")
	b.ReportMetric(0, "ns/op")
}
