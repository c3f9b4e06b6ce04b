// Command webdataset trains a small classifier from WebDataset tar shards:
// it writes shards of generated images (JPEG and PNG, one colour theme per
// class, noise and shapes over it) to a folder, streams them back through
// shards.New with a vision.Pipeline's Record, and fits a softmax
// regression on the normalized pixels, in plain Go. The same code reads
// shards from https:// or s3:// URLs: only the pattern changes, and the
// s3:// store is linked by importing its package, as below.
//
//	go run ./examples/webdataset -epochs 5
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
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/shards"
	_ "github.com/tensorbatch/tensorbatch/shards/s3" // s3:// URLs
	"github.com/tensorbatch/tensorbatch/vision"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "webdataset:", err)
		os.Exit(1)
	}
}

// options are a run's settings.
type options struct {
	dir      string // where the shards are written; "" means a temporary folder
	shards   int    // training shards (one more holds the validation set)
	perShard int    // samples per shard
	size     int    // the transform's output size
	epochs   int
	workers  int
	batch    int
	lr       float64
}

// result is what a run reports.
type result struct {
	Loss     []float64 // mean training loss of each epoch
	Accuracy float64   // on the validation shard, with the evaluation transform
}

// classes are the generated images' classes: a colour theme each.
var classes = []string{"red", "green", "blue"}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("webdataset", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.dir, "dir", "", "folder for the shards (default: a temporary folder, removed at the end)")
	fs.IntVar(&o.shards, "shards", 4, "training shards")
	fs.IntVar(&o.perShard, "per-shard", 48, "samples per shard")
	fs.IntVar(&o.size, "size", 16, "image size the transform outputs")
	fs.IntVar(&o.epochs, "epochs", 5, "training epochs")
	fs.IntVar(&o.workers, "workers", 2, "loader workers")
	fs.IntVar(&o.batch, "batch", 16, "batch size")
	fs.Float64Var(&o.lr, "lr", 0.01, "learning rate (plain SGD)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := train(ctx, o, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "validation accuracy %.3f (chance %.3f)\n", res.Accuracy, 1/float64(len(classes)))
	return nil
}

func train(ctx context.Context, o options, out io.Writer) (result, error) {
	if o.shards < 1 || o.perShard < 1 || o.epochs < 1 || o.batch < 1 {
		return result{}, fmt.Errorf("want at least one shard, sample, epoch and batch: %+v", o)
	}
	if o.dir == "" {
		dir, err := os.MkdirTemp("", "webdataset")
		if err != nil {
			return result{}, err
		}
		defer os.RemoveAll(dir)
		o.dir = dir
	}
	for s := range o.shards + 1 {
		if err := writeShard(filepath.Join(o.dir, fmt.Sprintf("shard-%04d.tar", s)), s*o.perShard, o.perShard); err != nil {
			return result{}, err
		}
	}
	trainPattern := filepath.Join(o.dir, fmt.Sprintf("shard-{0000..%04d}.tar", o.shards-1))
	valPattern := filepath.Join(o.dir, fmt.Sprintf("shard-%04d.tar", o.shards))
	fmt.Fprintf(out, "wrote %d shards of %d samples to %s\n", o.shards+1, o.perShard, o.dir)

	// RandomResizedCrop (the crop's area at least half the image) and flip,
	// normalized float32 CHW: one Pipeline for every shard.
	p, err := vision.NewPipeline(vision.Transform{Train: true, Size: o.size, Scale: [2]float64{0.5, 1}})
	if err != nil {
		return result{}, err
	}
	defer p.Close()
	l, err := loader(ctx, p, trainPattern, o, engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 64})
	if err != nil {
		return result{}, err
	}
	defer l.Close()

	m := newModel(3*o.size*o.size, len(classes))
	var res result
	for epoch := range o.epochs {
		var sum float64
		var n int
		for b, err := range l.Epoch(ctx, epoch) {
			if err != nil {
				return res, err
			}
			x, y := collate.As[float32](b.Tensor("image")), collate.As[int64](b.Tensor("label"))
			sum += m.step(x, y, o.lr) * float64(len(y))
			n += len(y)
		}
		res.Loss = append(res.Loss, sum/float64(n))
		fmt.Fprintf(out, "epoch %d: loss %.4f (%d samples)\n", epoch, sum/float64(n), n)
	}

	// Evaluation: Resize and CenterCrop, on the held-out shard.
	ev, err := vision.NewPipeline(vision.Transform{Size: o.size, ResizeSize: o.size})
	if err != nil {
		return res, err
	}
	defer ev.Close()
	vl, err := loader(ctx, ev, valPattern, o, engine.IterableConfig{})
	if err != nil {
		return res, err
	}
	defer vl.Close()
	var right, n int
	for b, err := range vl.Epoch(ctx, 0) {
		if err != nil {
			return res, err
		}
		x, y := collate.As[float32](b.Tensor("image")), collate.As[int64](b.Tensor("label"))
		for i, label := range y {
			if m.predict(x[i*m.d:(i+1)*m.d]) == int(label) {
				right++
			}
		}
		n += len(y)
	}
	res.Accuracy = float64(right) / float64(n)
	return res, nil
}

// loader streams the shards of pattern through p: the .jpg or .png member
// is the image, .cls or .json the label.
func loader(ctx context.Context, p *vision.Pipeline, pattern string, o options, ic engine.IterableConfig) (*engine.Loader, error) {
	src, err := shards.New(ctx, pattern, p.Schema(), p.Record("jpg", "cls"))
	if err != nil {
		return nil, err
	}
	ds, err := engine.FromIterable(ctx, src, ic)
	if err != nil {
		return nil, err
	}
	// The math runs on the host: the cpu backend (no device copy).
	return engine.New(ds, engine.Config{BatchSize: o.batch, Seed: 1, Workers: o.workers, SkipZeroing: true, Backend: "cpu"})
}

// writeShard writes samples first..first+n-1 as a WebDataset tar: each an
// image (.jpg for even ids, .png for odd) and its class (.cls, or .json
// for every third).
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
		rng := rand.New(rand.NewPCG(uint64(id), 42))
		label := rng.IntN(len(classes))
		img := drawImage(label, rng)
		var buf bytes.Buffer
		ext := "jpg"
		if id%2 == 0 {
			err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
		} else {
			ext, err = "png", png.Encode(&buf, img)
		}
		if err != nil {
			return err
		}
		key := fmt.Sprintf("sample%06d", id)
		labelName, labelData := key+".cls", fmt.Appendf(nil, "%d", label)
		if id%3 == 0 {
			labelName, labelData = key+".json", fmt.Appendf(nil, `{"label": %d, "class": %q}`, label, classes[label])
		}
		if err := add(key+"."+ext, buf.Bytes()); err != nil {
			return err
		}
		if err := add(labelName, labelData); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// drawImage draws an image of class label: its theme colour over noise,
// with a few shapes of random colours on top; sizes vary.
func drawImage(label int, rng *rand.Rand) image.Image {
	w, h := 24+rng.IntN(24), 24+rng.IntN(24)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	theme := [3]int{100, 100, 100}
	theme[label] += 16 // faint, under noise of ±60 a pixel
	for y := range h {
		for x := range w {
			var c [3]uint8
			for k := range 3 {
				c[k] = uint8(min(max(theme[k]+rng.IntN(121)-60, 0), 255))
			}
			img.Set(x, y, color.RGBA{c[0], c[1], c[2], 255})
		}
	}
	for range 2 {
		x0, y0 := rng.IntN(w), rng.IntN(h)
		c := color.RGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255}
		for y := y0; y < min(y0+h/4, h); y++ {
			for x := x0; x < min(x0+w/4, w); x++ {
				img.Set(x, y, c)
			}
		}
	}
	return img
}

// model is softmax regression: logits = W·x + b, trained by SGD on the
// mean cross-entropy of each batch.
type model struct {
	d, k   int
	w      []float64 // [k][d]
	b      []float64
	logits []float64
}

func newModel(d, k int) *model {
	return &model{d: d, k: k, w: make([]float64, k*d), b: make([]float64, k), logits: make([]float64, k)}
}

// probs sets m.logits to the softmax of x's logits.
func (m *model) probs(x []float32) []float64 {
	top := math.Inf(-1)
	for c := range m.k {
		z := m.b[c]
		for j, v := range x {
			z += m.w[c*m.d+j] * float64(v)
		}
		m.logits[c] = z
		top = max(top, z)
	}
	var sum float64
	for c := range m.k {
		m.logits[c] = math.Exp(m.logits[c] - top)
		sum += m.logits[c]
	}
	for c := range m.k {
		m.logits[c] /= sum
	}
	return m.logits
}

// step takes one SGD step on the batch (rows of x, labels y) and returns
// its mean loss before the step.
func (m *model) step(x []float32, y []int64, lr float64) float64 {
	gw, gb := make([]float64, len(m.w)), make([]float64, len(m.b))
	var loss float64
	for i, label := range y {
		xi := x[i*m.d : (i+1)*m.d]
		p := m.probs(xi)
		loss -= math.Log(max(p[label], 1e-12))
		for c := range m.k {
			g := p[c]
			if c == int(label) {
				g--
			}
			gb[c] += g
			for j, v := range xi {
				gw[c*m.d+j] += g * float64(v)
			}
		}
	}
	n := float64(len(y))
	for i := range m.w {
		m.w[i] -= lr * gw[i] / n
	}
	for c := range m.b {
		m.b[c] -= lr * gb[c] / n
	}
	return loss / n
}

// predict returns the most likely class of x.
func (m *model) predict(x []float32) int {
	p := m.probs(x)
	best := 0
	for c := range m.k {
		if p[c] > p[best] {
			best = c
		}
	}
	return best
}
