package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// The classic DataLoader workload of the seed guides: 1000 samples, each a
// float32 3×224×224 image drawn from a normal RNG and an int64 label,
// batch 32, drop last.
const (
	classicN     = 1000
	classicBatch = 32
)

var classicSchema = collate.Schema{
	{Name: "image", DType: collate.Float32, Shape: []int{3, 224, 224}},
	{Name: "label", DType: collate.Int64},
}

func classicFill(_ context.Context, s *engine.Slot) error {
	img := collate.As[float32](s.Tensor("image"))
	r := s.Rand()
	for i := range img {
		img[i] = float32(r.NormFloat64())
	}
	collate.As[int64](s.Tensor("label"))[0] = int64(s.Index() % 10)
	return nil
}

var benchWorkers = []int{0, 1, 2, 4, 8}

// BenchmarkClassicLoader runs whole epochs of the classic workload through
// the loader. SkipZero is set because classicFill writes every byte.
func BenchmarkClassicLoader(b *testing.B) {
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			ds := engine.DatasetFunc(classicN, classicSchema, classicFill)
			l, err := engine.New(ds, engine.Config{BatchSize: classicBatch, DropLast: true, Workers: w, SkipZero: true})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batches := 0
			epoch := 0
			for b.Loop() {
				for _, err := range l.Epoch(context.Background(), epoch) {
					if err != nil {
						b.Fatal(err)
					}
					batches++
				}
				epoch++
			}
			b.ReportMetric(float64(batches)/b.Elapsed().Seconds(), "batches/s")
			b.ReportMetric(float64(l.Stats().BytesCopied)/float64(batches), "copiedB/batch")
			b.SetBytes(int64(classicN / classicBatch * classicBatch * (3*224*224*4 + 8)))
		})
	}
}

// BenchmarkClassicPlainLoop does the same fills with no loader: one epoch's
// samples split over the same number of goroutines (the caller's alone for
// 0), written into one preallocated buffer per goroutine. Loader batches/s
// over these batches/s is the engine efficiency; its limit is 1.
func BenchmarkClassicPlainLoop(b *testing.B) {
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("goroutines=%d", w), func(b *testing.B) {
			g := max(w, 1)
			layout, err := collate.NewLayout(classicSchema, 1)
			if err != nil {
				b.Fatal(err)
			}
			n := classicN / classicBatch * classicBatch
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
			b.ReportMetric(float64(epoch*(n/classicBatch))/b.Elapsed().Seconds(), "batches/s")
		})
	}
}

// fillRange fills samples [lo, hi) of epoch with classicFill through a
// standalone slot.
func fillRange(layout *collate.Layout, epoch, lo, hi int) {
	buf := make([]byte, layout.Size())
	for i := lo; i < hi; i++ {
		s := engine.NewSlot(0, epoch, i, layout, buf, 0)
		if err := classicFill(context.Background(), s); err != nil {
			panic(err)
		}
	}
}
