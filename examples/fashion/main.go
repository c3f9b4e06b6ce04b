// Command fashion trains a softmax-regression classifier on Fashion-MNIST
// with a tensorbatch Loader feeding the batches: a small Go training loop
// end to end. The data comes from Debian's dataset-fashion-mnist package.
//
//	go run ./examples/fashion -epochs 2 -workers 2
package main

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// DefaultDir is where Debian's dataset-fashion-mnist installs the data.
const DefaultDir = "/usr/share/datasets/fashion-mnist"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fashion:", err)
		os.Exit(1)
	}
}

// result is what a training run reports.
type result struct {
	Loss     []float64 // mean training loss of each epoch
	Accuracy float64   // on the test set
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fashion", flag.ContinueOnError)
	dir := fs.String("data", DefaultDir, "directory with the Fashion-MNIST idx .gz files")
	epochs := fs.Int("epochs", 2, "training epochs")
	workers := fs.Int("workers", 2, "loader workers")
	batch := fs.Int("batch", 64, "batch size")
	limit := fs.Int("limit", 0, "use only the first N training samples (0: all)")
	lr := fs.Float64("lr", 0.1, "learning rate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := train(ctx, *dir, *epochs, *workers, *batch, *limit, float32(*lr), out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "test accuracy %.4f\n", res.Accuracy)
	return nil
}

// images is Fashion-MNIST in memory: n images of 28×28 uint8 pixels.
type images struct {
	pixels []byte
	labels []byte
}

func (d *images) Len() int { return len(d.labels) }

func (d *images) Schema() collate.Schema {
	return collate.Schema{
		{Name: "image", DType: collate.Float32, Shape: []int{28 * 28}},
		{Name: "label", DType: collate.Int64},
	}
}

// Fill scales the pixels to [0, 1] and flips half the images left-right,
// drawing from the sample's own RNG (the same flips for any worker count).
func (d *images) Fill(_ context.Context, s *engine.Slot) error {
	i := s.Index()
	src := d.pixels[i*784 : (i+1)*784]
	dst := collate.As[float32](s.Tensor("image"))
	flip := s.Rand().IntN(2) == 1
	for y := range 28 {
		for x := range 28 {
			sx := x
			if flip {
				sx = 27 - x
			}
			dst[y*28+x] = float32(src[y*28+sx]) / 255
		}
	}
	collate.As[int64](s.Tensor("label"))[0] = int64(d.labels[i])
	return nil
}

func train(ctx context.Context, dir string, epochs, workers, batch, limit int, lr float32, out io.Writer) (result, error) {
	tr, err := load(dir, "train", limit)
	if err != nil {
		return result{}, err
	}
	te, err := load(dir, "t10k", 0)
	if err != nil {
		return result{}, err
	}
	l, err := engine.New(tr, engine.Config{BatchSize: batch, Shuffle: true, Seed: 1, Workers: workers})
	if err != nil {
		return result{}, err
	}
	defer l.Close()

	m := newModel()
	var res result
	for epoch := range epochs {
		total, n := 0.0, 0
		for b, err := range l.Epoch(ctx, epoch) {
			if err != nil {
				return res, err
			}
			x := collate.As[float32](b.Tensor("image"))
			y := collate.As[int64](b.Tensor("label"))
			total += m.step(x, y, lr) * float64(len(y))
			n += len(y)
		}
		res.Loss = append(res.Loss, total/float64(n))
		fmt.Fprintf(out, "epoch %d: loss %.4f (%d samples)\n", epoch, total/float64(n), n)
	}
	res.Accuracy = m.accuracy(te)
	return res, nil
}

// model is softmax regression: logits = x·W + b.
type model struct {
	w [784 * 10]float32
	b [10]float32
}

func newModel() *model { return &model{} }

func (m *model) logits(x []float32, z *[10]float32) {
	*z = m.b
	for i, v := range x {
		if v == 0 {
			continue
		}
		row := m.w[i*10 : i*10+10]
		for k := range z {
			z[k] += v * row[k]
		}
	}
}

// step does one SGD step on a batch and returns its mean loss.
func (m *model) step(x []float32, y []int64, lr float32) float64 {
	var gw [784 * 10]float32
	var gb [10]float32
	loss := 0.0
	for s := range y {
		xs := x[s*784 : (s+1)*784]
		var z [10]float32
		m.logits(xs, &z)
		p := softmax(&z)
		loss -= math.Log(max(float64(p[y[s]]), 1e-12))
		p[y[s]]--
		for i, v := range xs {
			if v == 0 {
				continue
			}
			for k := range p {
				gw[i*10+k] += v * p[k]
			}
		}
		for k := range p {
			gb[k] += p[k]
		}
	}
	scale := lr / float32(len(y))
	for i := range m.w {
		m.w[i] -= scale * gw[i]
	}
	for k := range m.b {
		m.b[k] -= scale * gb[k]
	}
	return loss / float64(len(y))
}

func softmax(z *[10]float32) [10]float32 {
	hi := z[0]
	for _, v := range z {
		hi = max(hi, v)
	}
	var p [10]float32
	sum := float32(0)
	for k, v := range z {
		p[k] = float32(math.Exp(float64(v - hi)))
		sum += p[k]
	}
	for k := range p {
		p[k] /= sum
	}
	return p
}

func (m *model) accuracy(d *images) float64 {
	x := make([]float32, 784)
	right := 0
	for i := range d.Len() {
		for j, v := range d.pixels[i*784 : (i+1)*784] {
			x[j] = float32(v) / 255
		}
		var z [10]float32
		m.logits(x, &z)
		best := 0
		for k := range z {
			if z[k] > z[best] {
				best = k
			}
		}
		if best == int(d.labels[i]) {
			right++
		}
	}
	return float64(right) / float64(d.Len())
}

// load reads split ("train" or "t10k") from dir, keeping the first limit
// samples when limit > 0.
func load(dir, split string, limit int) (*images, error) {
	pixels, err := readIDX(filepath.Join(dir, split+"-images-idx3-ubyte.gz"), 0x803)
	if err != nil {
		return nil, err
	}
	labels, err := readIDX(filepath.Join(dir, split+"-labels-idx1-ubyte.gz"), 0x801)
	if err != nil {
		return nil, err
	}
	if len(pixels) != len(labels)*784 {
		return nil, fmt.Errorf("%s: %d labels for %d bytes of images", split, len(labels), len(pixels))
	}
	if limit > 0 && limit < len(labels) {
		pixels, labels = pixels[:limit*784], labels[:limit]
	}
	return &images{pixels: pixels, labels: labels}, nil
}

// readIDX returns the payload of a gzipped IDX file with the given magic.
func readIDX(path string, magic uint32) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (install Debian's dataset-fashion-mnist, or pass -data)", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer z.Close()
	var hdr [2]uint32
	if err := binary.Read(z, binary.BigEndian, &hdr); err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	if hdr[0] != magic {
		return nil, fmt.Errorf("%s: magic %#x, want %#x", path, hdr[0], magic)
	}
	dims := int(magic&0xff) - 1 // dimensions after the first
	skip := make([]byte, 4*dims)
	if _, err := io.ReadFull(z, skip); err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	return io.ReadAll(z)
}
