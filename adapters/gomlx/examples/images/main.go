// Command images trains a small GoMLX CNN (two convolutions, then a dense
// layer) on GoMLX's pure-Go simplego backend over ImageNet-like WebDataset
// shards (a .jpg and a .cls per sample), fed by tensorbatch's vision:
// Pipeline.Record decodes each record (RandomResizedCrop, flip, normalized
// float32 CHW), shards.New streams the tars, engine.FromIterable and
// engine.New batch them, and the adapter hands the batches to GoMLX's
// training loop. Where the step is cheap, the data is the limit.
//
// By default it writes shards of generated JPEGs (three classes of
// patterns) to a temporary folder; -shards points it at real ones:
//
//	cd adapters/gomlx && go run ./examples/images -steps 200
//	go run ./examples/images -shards '/data/train-{0000..0099}.tar' -classes 1000
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	tbgomlx "github.com/tensorbatch/tensorbatch/adapters/gomlx"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/shards"
	"github.com/tensorbatch/tensorbatch/vision"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

// options are a training run's settings.
type options struct {
	shards   string // the shards' pattern; "" generates them into dir
	dir      string // where generated shards go; "" means a temporary folder
	classes  int
	nShards  int // generated shards
	perShard int // generated samples per shard
	steps    int
	batch    int
	size     int // the transform's output height and width
	workers  int
	lr       float64
	config   string // simplego's configuration
	every    int    // print the mean loss every this many steps (0: never)
}

// result is what a training run reports.
type result struct {
	Loss []float64 // each step's training loss (of the batch, before the step)
	Took time.Duration
}

// numClasses is the number of generated classes.
const numClasses = 3

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.shards, "shards", "", "WebDataset shards to train on, a brace pattern of local paths or URLs\n(samples: a .jpg or other image member and a .cls or .json label);\ndefault: generated shards of synthetic images")
	fs.StringVar(&o.dir, "dir", "", "folder for the generated shards (default: a temporary folder, removed at the end)")
	fs.IntVar(&o.classes, "classes", numClasses, "number of classes (labels 0..N-1) of -shards")
	fs.IntVar(&o.nShards, "gen-shards", 2, "generated shards")
	fs.IntVar(&o.perShard, "per-shard", 128, "generated samples per shard")
	fs.IntVar(&o.steps, "steps", 200, "training steps")
	fs.IntVar(&o.batch, "batch", 32, "batch size")
	fs.IntVar(&o.size, "size", 32, "height and width the transform outputs")
	fs.IntVar(&o.workers, "workers", 2, "loader workers")
	fs.Float64Var(&o.lr, "lr", 3e-3, "Adam's learning rate")
	fs.StringVar(&o.config, "simplego", "ops_sequential", "simplego's configuration")
	fs.IntVar(&o.every, "every", 20, "print the mean loss every N steps")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.shards == "" {
		o.classes = numClasses
		if o.dir == "" {
			dir, err := os.MkdirTemp("", "images")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			o.dir = dir
		}
		pattern, err := writeShards(o.dir, o.nShards, o.perShard)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %d shards of %d JPEGs to %s\n", o.nShards, o.perShard, o.dir)
		o.shards = pattern
	}
	res, err := trainCNN(ctx, o, out)
	if err != nil {
		return err
	}
	k := min(20, len(res.Loss)/2)
	fmt.Fprintf(out, "%d steps in %.1f s (%.2f steps/s); mean loss of the first %d steps %.4f, of the last %d %.4f\n",
		len(res.Loss), res.Took.Seconds(), float64(len(res.Loss))/res.Took.Seconds(),
		k, mean(res.Loss[:k]), k, mean(res.Loss[len(res.Loss)-k:]))
	return nil
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// model is a small CNN over [batch, 3, size, size] float32 images: two
// 3×3 convolutions of stride 2 (8 and 16 channels), each with a ReLU,
// then a dense layer to the logits. The strides downsample, instead of
// a max pool; see conv3x3 for why it is not layers.Convolution.
func model(classes int) train.ModelFn {
	return func(ctx *mlctx.Context, _ any, inputs []*graph.Node) []*graph.Node {
		x := graph.TransposeAllDims(inputs[0], 0, 2, 3, 1) // CHW → HWC, GoMLX's default layout
		batch := x.Shape().Dimensions[0]
		x = activations.Relu(conv3x3(ctx.In("conv1"), x, 8))
		x = activations.Relu(conv3x3(ctx.In("conv2"), x, 16))
		x = graph.Reshape(x, batch, -1)
		return []*graph.Node{layers.DenseWithBias(ctx.In("logits"), x, classes)}
	}
}

// conv3x3 is a 3×3 convolution of stride 2 and padding 1 (PyTorch's
// Conv2d(c, channels, 3, stride=2, padding=1)) with a bias, of x [batch,
// h, w, c] into [batch, (h+1)/2, (w+1)/2, channels]; its weights are
// variables of ctx. simplego v0.26.0 runs layers.Convolution forward but
// cannot train it (the gradient of ConvGeneral uses Reverse, which it
// lacks), nor take the gradient of Slice (Pad) or MaxPool
// (SelectAndScatterMax), so the convolution is spelled as patchConv.
func conv3x3(ctx *mlctx.Context, x *graph.Node, channels int) *graph.Node {
	g, c := x.Graph(), x.Shape().Dimensions[3]
	kernel := ctx.VariableWithShape("weights", shapes.Make(x.DType(), 3, 3, c, channels)).ValueGraph(g)
	bias := ctx.VariableWithShape("biases", shapes.Make(x.DType(), channels)).ValueGraph(g)
	return graph.Add(patchConv(x, kernel), graph.ExpandLeftToRank(bias, 4))
}

// patchConv is the convolution of conv3x3 without the bias, kernel [3, 3,
// c, channels]: the 3×3 patches gathered (Gather, whose gradient is
// ScatterSum), then one Einsum (DotGeneral).
func patchConv(x, kernel *graph.Node) *graph.Node {
	g := x.Graph()
	dims := x.Shape().Dimensions
	batch, h, w, c := dims[0], dims[1], dims[2], dims[3]
	channels := kernel.Shape().Dimensions[3]
	oh, ow := (h+1)/2, (w+1)/2
	// Rows: the h·w pixels, then a zero row for the padding.
	rows := graph.Reshape(graph.TransposeAllDims(x, 1, 2, 0, 3), h*w, batch, c)
	rows = graph.Concatenate([]*graph.Node{rows, graph.Zeros(g, shapes.Make(x.DType(), 1, batch, c))}, 0)
	idx := make([]int32, 0, oh*ow*9)
	for i := range oh {
		for j := range ow {
			for di := -1; di <= 1; di++ {
				for dj := -1; dj <= 1; dj++ {
					py, px := 2*i+di, 2*j+dj
					if py < 0 || py >= h || px < 0 || px >= w {
						idx = append(idx, int32(h*w))
					} else {
						idx = append(idx, int32(py*w+px))
					}
				}
			}
		}
	}
	indices := graph.Const(g, tensors.FromFlatDataAndDimensions(idx, oh*ow, 9, 1))
	patches := graph.Gather(rows, indices) // [oh·ow, 9, batch, c]
	y := graph.Einsum("pkbc,kcd->bpd", patches, graph.Reshape(kernel, 9, c, channels))
	return graph.Reshape(y, batch, oh, ow, channels)
}

// loss is the sparse softmax cross-entropy of the logits: the vision
// Pipeline's label is a scalar, which the dataset yields as [batch, 1]
// (Config.ScalarLabels), as GoMLX's sparse loss wants it.
func loss(labels, logits []*graph.Node) *graph.Node {
	return losses.SparseCategoricalCrossEntropyLogits(labels, logits)
}

// newTrainer returns a trainer of the model with Adam.
func newTrainer(backend backends.Backend, classes int, lr float64) (*train.Trainer, error) {
	ctx := mlctx.New()
	if err := ctx.SetRNGStateFromSeed(1); err != nil { // the same initial weights every run
		return nil, err
	}
	return train.NewTrainer(backend, ctx, model(classes), loss, optimizers.Adam().LearningRate(lr).Done(), nil, nil), nil
}

// newLoader returns a Loader over the shards of pattern, each record
// decoded by p: shards visited in a shuffled order, records through a
// shuffle buffer, full batches only (one shape, one graph).
func newLoader(ctx context.Context, p *vision.Pipeline, pattern string, batch, workers int) (*engine.Loader, error) {
	src, err := shards.New(context.Background(), pattern, p.Schema(), p.Record("jpg", "cls"))
	if err != nil {
		return nil, err
	}
	ds, err := engine.FromIterable(ctx, src, engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 256})
	if err != nil {
		return nil, err
	}
	// GoMLX copies the batch itself: the cpu backend.
	return engine.New(ds, engine.Config{BatchSize: batch, Seed: 1, DropLast: true, Workers: workers, SkipZeroing: true, Backend: "cpu"})
}

// trainTransform is the training transform: RandomResizedCrop (at least
// half the image's area) and flip, normalized float32 CHW.
func trainTransform(size int) vision.Transform {
	return vision.Transform{Train: true, Size: size, Scale: [2]float64{0.5, 1}}
}

func trainCNN(ctx context.Context, o options, out io.Writer) (result, error) {
	if o.steps < 1 || o.batch < 1 || o.classes < 2 {
		return result{}, fmt.Errorf("want at least one step and sample and two classes: %+v", o)
	}
	p, err := vision.NewPipeline(trainTransform(o.size))
	if err != nil {
		return result{}, err
	}
	defer p.Close()
	l, err := newLoader(ctx, p, o.shards, o.batch, o.workers)
	if err != nil {
		return result{}, err
	}
	defer l.Close()
	backend, err := simplego.New(o.config)
	if err != nil {
		return result{}, err
	}
	defer backend.Finalize()
	ds, err := tbgomlx.New(ctx, backend, l, tbgomlx.Config{Name: "train", Inputs: []string{"image"}, Labels: []string{"label"}, ScalarLabels: true, Infinite: true})
	if err != nil {
		return result{}, err
	}
	defer ds.Close()

	trainer, err := newTrainer(backend, o.classes, o.lr)
	if err != nil {
		return result{}, err
	}
	loop := train.NewLoop(trainer)
	var res result
	train.EveryNSteps(loop, 1, "loss", 0, func(loop *train.Loop, m []*tensors.Tensor) error {
		// m: the batch's loss, then its moving average.
		res.Loss = append(res.Loss, float64(tensors.ToScalar[float32](m[0])))
		if n := len(res.Loss); o.every > 0 && n%o.every == 0 {
			fmt.Fprintf(out, "step %d: mean loss %.4f\n", n, mean(res.Loss[n-o.every:]))
		}
		return nil
	})
	t0 := time.Now()
	if _, err := loop.RunSteps(ds, o.steps); err != nil {
		return res, err
	}
	res.Took = time.Since(t0)
	return res, nil
}

// writeShards writes n shards of per generated samples into dir and
// returns their pattern.
func writeShards(dir string, n, per int) (string, error) {
	for s := range n {
		if err := writeShard(filepath.Join(dir, fmt.Sprintf("train-%04d.tar", s)), s*per, per); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, fmt.Sprintf("train-{0000..%04d}.tar", n-1)), nil
}

// writeShard writes samples first..first+n-1 as a WebDataset tar: each a
// JPEG (.jpg) and its class (.cls).
func writeShard(path string, first, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := tar.NewWriter(f)
	add := func(name string, data []byte) error {
		if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := w.Write(data)
		return err
	}
	for id := first; id < first+n; id++ {
		label, data, err := sample(id)
		if err == nil {
			key := fmt.Sprintf("sample%06d", id)
			if err = add(key+".jpg", data); err == nil {
				err = add(key+".cls", fmt.Appendf(nil, "%d", label))
			}
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sample returns generated sample id: its class and its JPEG.
func sample(id int) (int, []byte, error) {
	rng := rand.New(rand.NewPCG(uint64(id), 23))
	label := rng.IntN(numClasses)
	var buf bytes.Buffer
	err := jpeg.Encode(&buf, drawImage(label, rng), &jpeg.Options{Quality: 90})
	return label, buf.Bytes(), err
}

// drawImage draws an image of class label, 96 to 160 pixels a side:
// horizontal stripes (0), vertical stripes (1) or rings (2), of a random
// period, phase and pair of colours, under pixel noise.
func drawImage(label int, rng *rand.Rand) image.Image {
	w, h := 96+rng.IntN(65), 96+rng.IntN(65)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	period := 16 + rng.Float64()*16
	phase := rng.Float64() * 2 * math.Pi
	cx, cy := rng.Float64()*float64(w), rng.Float64()*float64(h)
	var a, b [3]float64
	for k := range 3 {
		a[k], b[k] = rng.Float64()*255, rng.Float64()*255
	}
	for y := range h {
		for x := range w {
			var t float64
			switch label {
			case 0:
				t = float64(y)
			case 1:
				t = float64(x)
			default:
				t = math.Hypot(float64(x)-cx, float64(y)-cy)
			}
			s := 0.5 + 0.5*math.Sin(2*math.Pi*t/period+phase)
			var c [3]uint8
			for k := range 3 {
				c[k] = uint8(min(max(a[k]*s+b[k]*(1-s)+rng.Float64()*60-30, 0), 255))
			}
			img.Set(x, y, color.RGBA{c[0], c[1], c[2], 255})
		}
	}
	return img
}
