package engine_test

import (
	"context"
	"fmt"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// A dataset writes each sample straight into the pinned batch buffer; the
// loop receives whole batches, in order.
func ExampleLoader() {
	schema := collate.Schema{
		{Name: "x", DType: collate.Float32, Shape: []int{2}},
		{Name: "y", DType: collate.Int64},
	}
	ds := engine.DatasetFunc(10, schema, func(ctx context.Context, s *engine.Slot) error {
		x := collate.As[float32](s.Tensor("x"))
		x[0], x[1] = float32(s.Index()), float32(s.Index())/10
		collate.As[int64](s.Tensor("y"))[0] = int64(s.Index() % 2)
		return nil
	})
	l, err := engine.New(ds, engine.Config{BatchSize: 4, Workers: 2, DropLast: true})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for epoch := range 2 {
		for b, err := range l.Epoch(context.Background(), epoch) {
			if err != nil {
				panic(err)
			}
			x := b.Tensor("x")
			fmt.Println(epoch, b.Indices(), x.Shape(), collate.As[float32](x)[:2], collate.As[int64](b.Tensor("y")))
		}
	}
	// Output:
	// 0 [0 1 2 3] [4 2] [0 0] [0 1 0 1]
	// 0 [4 5 6 7] [4 2] [4 0.4] [0 1 0 1]
	// 1 [0 1 2 3] [4 2] [0 0] [0 1 0 1]
	// 1 [4 5 6 7] [4 2] [4 0.4] [0 1 0 1]
}
