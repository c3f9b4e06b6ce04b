package gomlx_test

import (
	"context"
	"fmt"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	tbgomlx "github.com/tensorbatch/tensorbatch/adapters/gomlx"
	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// GoMLX's training loop runs three epochs of a tensorbatch Loader.
func Example() {
	ctx := context.Background()
	schema := collate.Schema{
		{Name: "x", DType: collate.Float32, Shape: []int{4}},
		{Name: "y", DType: collate.Int64, Shape: []int{1}}, // [batch, 1]: GoMLX's sparse labels
	}
	src := engine.DatasetFunc(256, schema, func(_ context.Context, s *engine.Slot) error {
		class := s.Index() % 2
		x := collate.As[float32](s.Tensor("x")) // this sample's place in the pinned batch
		for i := range x {
			x[i] = float32(class) + float32(s.Rand().NormFloat64())/4
		}
		collate.As[int64](s.Tensor("y"))[0] = int64(class)
		return nil
	})
	l, err := engine.New(src, engine.Config{BatchSize: 32, Shuffle: true, DropLast: true, Workers: 2, Backend: "cpu"})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	backend, err := simplego.New("ops_sequential") // see README: simplego's parallel mode races
	if err != nil {
		panic(err)
	}
	defer backend.Finalize()
	ds, err := tbgomlx.New(ctx, backend, l, tbgomlx.Config{Inputs: []string{"x"}, Labels: []string{"y"}})
	if err != nil {
		panic(err)
	}
	defer ds.Close()

	model := func(ctx *mlctx.Context, _ any, in []*graph.Node) []*graph.Node {
		return []*graph.Node{layers.DenseWithBias(ctx, in[0], 2)}
	}
	trainer := train.NewTrainer(backend, mlctx.New(), model, losses.SparseCategoricalCrossEntropyLogits,
		optimizers.Adam().Done(), nil, nil)
	loop := train.NewLoop(trainer)
	_, err = loop.RunEpochs(ds, 3)
	fmt.Println(loop.LoopStep, "steps, then epoch", ds.Epoch(), err)
	// Output: 24 steps, then epoch 3 <nil>
}
