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

// An in-memory dataset, as PyTorch's TensorDataset: rows of tensors that
// share their first dimension, gathered into batches by one kernel call.
func ExampleTensors() {
	x, _ := collate.FromSlice([]float32{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}, 5, 2)
	y, _ := collate.FromSlice([]int64{10, 11, 12, 13, 14})
	ds, err := engine.Tensors([]string{"x", "y"}, x, y)
	if err != nil {
		panic(err)
	}
	l, err := engine.New(ds, engine.Config{BatchSize: 2, Shuffle: true, Seed: 1, Backend: "cpu"})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.Indices(), collate.As[float32](b.Tensor("x")), collate.As[int64](b.Tensor("y")))
	}
	// Output:
	// [0 2] [0 0 2 2] [10 12]
	// [4 1] [4 4 1 1] [14 11]
	// [3] [3 3] [13]
}

// A variable-length field: each sample writes its own number of rows with
// Slot.Sequence, and the batch is padded to its longest sample, with the
// lengths in "<name>_len".
func ExampleSlot_Sequence() {
	schema := collate.Schema{
		{Name: "tokens", DType: collate.Int32, Shape: []int{collate.Dynamic}, MaxLen: 8, Pad: -1},
	}
	ds := engine.DatasetFunc(3, schema, func(ctx context.Context, s *engine.Slot) error {
		toks := collate.As[int32](s.Sequence("tokens", s.Index()+1)) // 1, 2, 3 tokens
		for i := range toks {
			toks[i] = int32(10*s.Index() + i)
		}
		return nil
	})
	l, err := engine.New(ds, engine.Config{BatchSize: 3, Backend: "cpu"})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		t := b.Tensor("tokens")
		fmt.Println(t.Shape(), collate.As[int32](t), collate.As[int64](b.Tensor("tokens_len")))
	}
	// Output:
	// [3 3] [0 -1 -1 10 11 -1 20 21 22] [1 2 3]
}
