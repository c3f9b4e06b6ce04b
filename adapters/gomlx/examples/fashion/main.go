// Command fashion trains a GoMLX MLP on Fashion-MNIST on GoMLX's pure-Go
// simplego backend, fed by a tensorbatch Loader through the adapter: no C++
// and no GPU library needed. The data comes from Debian's
// dataset-fashion-mnist.
//
//	cd adapters/gomlx && go run ./examples/fashion -epochs 5
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gomlx/pkg/ml/train/metrics"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	tbgomlx "github.com/tensorbatch/tensorbatch/adapters/gomlx"
	tbsets "github.com/tensorbatch/tensorbatch/datasets"
	"github.com/tensorbatch/tensorbatch/engine"
)

// The sizes of a Fashion-MNIST sample.
const (
	pixels  = 28 * 28
	classes = 10
)

// missing reports why Fashion-MNIST cannot be read from its Debian path, or nil.
func missing() error {
	_, err := os.Stat(tbsets.FashionMNISTDir)
	return err
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fashion:", err)
		os.Exit(1)
	}
}

// options are a training run's settings.
type options struct {
	dir     string
	epochs  int // with steps 0
	steps   int // train this many steps instead of whole epochs
	workers int
	batch   int
	hidden  int
	lr      float64
	flip    bool   // mirror half the training images, drawn per sample
	limit   int    // train on the first limit training images (0: all)
	testLim int    // test on the first testLim test images (0: all)
	config  string // simplego's configuration (simplego.New)
}

// result is what a training run reports.
type result struct {
	Steps    int
	Accuracy float64 // on the test set
	Took     time.Duration
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fashion", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.dir, "data", tbsets.FashionMNISTDir, "directory with the Fashion-MNIST idx .gz files")
	fs.IntVar(&o.epochs, "epochs", 5, "training epochs")
	fs.IntVar(&o.steps, "steps", 0, "train this many steps instead of -epochs")
	fs.IntVar(&o.workers, "workers", 2, "loader workers")
	fs.IntVar(&o.batch, "batch", 64, "batch size")
	fs.IntVar(&o.hidden, "hidden", 128, "hidden units (0: softmax regression)")
	fs.Float64Var(&o.lr, "lr", 1e-3, "Adam's learning rate")
	fs.BoolVar(&o.flip, "flip", true, "mirror half the training images left-right")
	fs.IntVar(&o.limit, "limit", 0, "train on the first N training images (0: all)")
	fs.IntVar(&o.testLim, "test-limit", 0, "test on the first N test images (0: all)")
	fs.StringVar(&o.config, "simplego", "ops_sequential", "simplego's configuration: ops_sequential runs a graph's ops one at a time\n(faster on few cores, and free of simplego's data race in parallel mode)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := trainMLP(ctx, o, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d steps in %.1f s; test accuracy %.4f\n", res.Steps, res.Took.Seconds(), res.Accuracy)
	return nil
}

// model is an MLP: one hidden layer of ReLUs, then the logits; with no
// hidden units, softmax regression.
func model(hidden int) train.ModelFn {
	return func(ctx *mlctx.Context, _ any, inputs []*graph.Node) []*graph.Node {
		x := inputs[0]
		if hidden > 0 {
			x = activations.Relu(layers.DenseWithBias(ctx.In("hidden"), x, hidden))
		}
		return []*graph.Node{layers.DenseWithBias(ctx.In("logits"), x, classes)}
	}
}

// newTrainer returns a trainer of the model with Adam, evaluating accuracy.
func newTrainer(backend backends.Backend, o options) (*train.Trainer, error) {
	ctx := mlctx.New()
	if err := ctx.SetRNGStateFromSeed(1); err != nil { // the same initial weights every run
		return nil, err
	}
	acc := metrics.NewSparseCategoricalAccuracy("accuracy", "acc")
	return train.NewTrainer(backend, ctx, model(o.hidden), losses.SparseCategoricalCrossEntropyLogits,
		optimizers.Adam().LearningRate(o.lr).Done(), nil, []metrics.Interface{acc}), nil
}

// loader returns a GoMLX Dataset over src, through a tensorbatch Loader.
func loader(ctx context.Context, backend backends.Backend, src engine.Dataset, cfg engine.Config, name string, infinite bool) (*tbgomlx.Dataset, *engine.Loader, error) {
	l, err := engine.New(src, cfg)
	if err != nil {
		return nil, nil, err
	}
	ds, err := tbgomlx.New(ctx, backend, l, tbgomlx.Config{Name: name, Inputs: []string{"image"}, Labels: []string{"label"}, Infinite: infinite})
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return ds, l, nil
}

func trainMLP(ctx context.Context, o options, out io.Writer) (result, error) {
	tr, err := tbsets.MNIST(o.dir, "train", o.limit)
	if err != nil {
		return result{}, fmt.Errorf("%w (install Debian's dataset-fashion-mnist, or pass -data)", err)
	}
	te, err := tbsets.MNIST(o.dir, "t10k", o.testLim)
	if err != nil {
		return result{}, err
	}
	backend, err := simplego.New(o.config)
	if err != nil {
		return result{}, err
	}
	defer backend.Finalize()

	// Training batches: shuffled, random flips, one shape (drop last). The
	// GoMLX step runs on the host: tensorbatch's cpu backend (no device copy
	// that nothing would read).
	trainDS, trainL, err := loader(ctx, backend, tr.Dataset(tbsets.Config{Flat: true, Flip: o.flip}), engine.Config{BatchSize: o.batch, Shuffle: true, Seed: 1,
		DropLast: true, Workers: o.workers, Backend: "cpu"}, "train", o.steps > 0)
	if err != nil {
		return result{}, err
	}
	defer trainL.Close()
	defer trainDS.Close()
	testDS, testL, err := loader(ctx, backend, te.Dataset(tbsets.Config{Flat: true}), engine.Config{BatchSize: min(1000, te.Len()), Workers: o.workers, Backend: "cpu"}, "test", false)
	if err != nil {
		return result{}, err
	}
	defer testL.Close()
	defer testDS.Close()

	trainer, err := newTrainer(backend, o)
	if err != nil {
		return result{}, err
	}
	loop := train.NewLoop(trainer)
	t0 := time.Now()
	if o.steps > 0 {
		_, err = loop.RunSteps(trainDS, o.steps)
	} else {
		train.EveryNSteps(loop, trainL.Len(), "report", 0, func(loop *train.Loop, m []*tensors.Tensor) error {
			// m: the batch's loss, then its moving average.
			fmt.Fprintf(out, "epoch %d: %d steps, loss %.4f\n", loop.Epoch, loop.LoopStep+1, m[1].Value())
			return nil
		})
		_, err = loop.RunEpochs(trainDS, o.epochs)
	}
	if err != nil {
		return result{}, err
	}
	res := result{Steps: loop.LoopStep, Took: time.Since(t0)}
	m, err := trainer.Eval(testDS)
	if err != nil {
		return res, err
	}
	defer func() {
		for _, t := range m {
			t.FinalizeAll()
		}
	}()
	res.Accuracy = float64(tensors.ToScalar[float32](m[len(m)-1])) // after the mean losses
	return res, nil
}
