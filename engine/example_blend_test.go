package engine_test

import (
	"context"
	"fmt"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// Three corpora blended 0.7, 0.2, 0.1 into 20 samples, as Megatron's
// BlendedDataset: each position takes the next sample of the corpus that
// lags its share the most. Corpus c's sample j has id 100c+j; the third
// corpus has one sample, so it repeats.
func ExampleBlend() {
	corpus := func(c, n int) engine.Dataset {
		return engine.DatasetFunc(n, collate.Schema{{Name: "id", DType: collate.Int64}},
			func(_ context.Context, s *engine.Slot) error {
				collate.As[int64](s.Tensor("id"))[0] = int64(100*c + s.Index())
				return nil
			})
	}
	ds, err := engine.Blend(engine.BlendConfig{Weights: []float64{0.7, 0.2, 0.1}, Size: 20},
		corpus(0, 1000), corpus(1, 1000), corpus(2, 1))
	if err != nil {
		panic(err)
	}
	l, err := engine.New(ds, engine.Config{BatchSize: 10, Backend: "cpu", WorldSize: 1})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(collate.As[int64](b.Tensor("id")))
	}
	// Output:
	// [0 1 100 2 3 200 4 5 101 6]
	// [7 8 102 9 10 200 11 12 103 13]
}
