package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
	"github.com/tensorbatch/tensorbatch/internal/classic"
)

var benchWorkers = []int{0, 1, 2, 4, 8}

// BenchmarkClassicLoader runs whole epochs of the classic workload through
// the loader. SkipZeroing is set because classic.FillMath writes every byte.
func BenchmarkClassicLoader(b *testing.B) {
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			ds := engine.DatasetFunc(classic.Samples, classic.Schema, classic.FillMath)
			l, err := engine.New(ds, engine.Config{BatchSize: classic.Batch, DropLast: true, Workers: w, SkipZeroing: true})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batches := loopEpochs(b, l)
			b.ReportMetric(float64(batches)/b.Elapsed().Seconds(), "batches/s")
			b.ReportMetric(float64(l.Stats().BytesCopied)/float64(batches), "copiedB/batch")
			b.SetBytes(int64(classic.Samples / classic.Batch * classic.Batch * classic.SampleBytes))
		})
	}
}

// loopEpochs runs one whole epoch per b.Loop iteration and returns the
// batches delivered.
func loopEpochs(b *testing.B, l *engine.Loader) int {
	batches := 0
	for epoch := 0; b.Loop(); epoch++ {
		for _, err := range l.Epoch(context.Background(), epoch) {
			if err != nil {
				b.Fatal(err)
			}
			batches++
		}
	}
	return batches
}

// BenchmarkClassicPlainLoop does the same fills with no loader: one epoch's
// samples split over the same number of goroutines (the caller's alone for
// 0), written into one preallocated buffer per goroutine. Loader batches/s
// over these batches/s is the engine efficiency; its limit is 1.
func BenchmarkClassicPlainLoop(b *testing.B) {
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("goroutines=%d", w), func(b *testing.B) {
			g := max(w, 1)
			layout, err := collate.NewLayout(classic.Schema, 1)
			if err != nil {
				b.Fatal(err)
			}
			n := classic.Samples / classic.Batch * classic.Batch
			epoch := 0
			for b.Loop() {
				var wg sync.WaitGroup
				for part := range g {
					wg.Go(func() {
						fillRange(layout, epoch, part*n/g, (part+1)*n/g)
					})
				}
				wg.Wait()
				epoch++
			}
			b.ReportMetric(float64(epoch*(n/classic.Batch))/b.Elapsed().Seconds(), "batches/s")
		})
	}
}

// fillRange fills samples [lo, hi) of epoch with classic.FillMath through a
// standalone slot.
func fillRange(layout *collate.Layout, epoch, lo, hi int) {
	buf := make([]byte, layout.Size())
	for i := lo; i < hi; i++ {
		s := enginetest.NewSlot(0, epoch, i, layout, buf, 0)
		if err := classic.FillMath(context.Background(), s); err != nil {
			panic(err)
		}
	}
}

// emptyBatches is a BatchFiller that writes nothing: loading it measures
// the loader's own cost a batch.
type emptyBatches struct{ n int }

func (d emptyBatches) Len() int { return d.n }
func (d emptyBatches) Schema() collate.Schema {
	return collate.Schema{{Name: "tokens", DType: collate.Uint16, Shape: []int{1025}}}
}
func (d emptyBatches) Fill(context.Context, *engine.Slot) error           { return nil }
func (d emptyBatches) FillBatch(context.Context, *engine.BatchSlot) error { return nil }

// BenchmarkBatchOverhead runs batches of 32 token windows that FillBatch
// leaves as they are: the time a batch is the loader's overhead (compare
// BenchmarkTokens in shards, where the copy is most of it). The shuffled
// order computes each index (NOTE [feistel]); the sequential one, which
// corpus.Megatron runs under (it shuffles itself), leaves the engine's
// own delivery path.
func BenchmarkBatchOverhead(b *testing.B) {
	for _, w := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) { batchOverhead(b, w, true) })
	}
	for _, w := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("sequential/workers=%d", w), func(b *testing.B) { batchOverhead(b, w, false) })
	}
}

func batchOverhead(b *testing.B, w int, shuffle bool) {
	l, err := engine.New(emptyBatches{1 << 14}, engine.Config{BatchSize: 32, Shuffle: shuffle, Seed: 1, Workers: w, SkipZeroing: true, WorldSize: 1, Backend: "cpu"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	n := 0
	for e := 0; n < b.N; e++ {
		for _, err := range l.Epoch(context.Background(), e) {
			if err != nil {
				b.Fatal(err)
			}
			if n++; n == b.N {
				break
			}
		}
	}
}

// BenchmarkShuffledOrder draws an ImageNet-sized epoch order, which the
// loader does at every epoch's start.
func BenchmarkShuffledOrder(b *testing.B) {
	s := engine.Shuffled{N: 1281167, Seed: 1}
	for b.Loop() {
		_ = s.Order(1)
	}
}
