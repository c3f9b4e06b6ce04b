// Command fashion trains a one-hidden-layer MLP on Fashion-MNIST with
// gonum's float32 BLAS, a tensorbatch Loader feeding the batches: a small Go
// training loop end to end. Gemm reads each batch straight from its pinned
// buffer (a blas32.General over the batch's float32 slice, no copy). The
// data comes from Debian's dataset-fashion-mnist.
//
//	go run ./examples/fashion -epochs 10
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/datasets"
	"github.com/tensorbatch/tensorbatch/engine"
)

// DefaultDir is where Debian's dataset-fashion-mnist installs the data.
const DefaultDir = datasets.FashionMNISTDir

// The sizes of a Fashion-MNIST sample.
const (
	pixels  = 28 * 28
	classes = 10
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fashion:", err)
		os.Exit(1)
	}
}

// options are a training run's settings.
type options struct {
	dir     string
	epochs  int
	workers int
	batch   int
	hidden  int
	limit   int // train on the first limit images (0: all)
	lr      float32
}

// result is what a training run reports.
type result struct {
	Loss     []float64 // mean training loss of each epoch
	Accuracy float64   // on the test set
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fashion", flag.ContinueOnError)
	o := options{}
	fs.StringVar(&o.dir, "data", DefaultDir, "directory with the Fashion-MNIST idx .gz files")
	fs.IntVar(&o.epochs, "epochs", 10, "training epochs")
	fs.IntVar(&o.workers, "workers", 2, "loader workers")
	fs.IntVar(&o.batch, "batch", 64, "batch size")
	fs.IntVar(&o.hidden, "hidden", 128, "hidden units")
	fs.IntVar(&o.limit, "limit", 0, "use only the first N training samples (0: all)")
	lr := fs.Float64("lr", 0.02, "learning rate (SGD with momentum 0.9)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.lr = float32(*lr)
	res, err := train(ctx, o, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "test accuracy %.4f\n", res.Accuracy)
	return nil
}

func train(ctx context.Context, o options, out io.Writer) (result, error) {
	tr, err := load(o.dir, "train", o.limit)
	if err != nil {
		return result{}, err
	}
	te, err := load(o.dir, "t10k", 0)
	if err != nil {
		return result{}, err
	}
	// The math runs on the host: the cpu backend (no device copy).
	l, err := engine.New(tr.Dataset(datasets.Config{Flat: true, Flip: true}), engine.Config{BatchSize: o.batch, Shuffle: true, Seed: 1, Workers: o.workers, Backend: "cpu"})
	if err != nil {
		return result{}, err
	}
	defer l.Close()

	m := newMLP(o.hidden, rand.New(rand.NewPCG(1, 2)))
	var res result
	for epoch := range o.epochs {
		var losses, sizes []float64
		for b, err := range l.Epoch(ctx, epoch) {
			if err != nil {
				return res, err
			}
			x, y := batch(b)
			losses = append(losses, m.step(x, y, o.lr))
			sizes = append(sizes, float64(len(y)))
		}
		loss := stat.Mean(losses, sizes)
		res.Loss = append(res.Loss, loss)
		fmt.Fprintf(out, "epoch %d: loss %.4f (%d samples)\n", epoch, loss, int(floats.Sum(sizes)))
	}
	res.Accuracy, err = m.accuracy(ctx, te, o.workers)
	return res, err
}

// batch returns a batch's images as a matrix over its pinned memory (no
// copy) and its labels.
func batch(b *engine.Batch) (blas32.General, []int64) {
	x := collate.As[float32](b.Tensor("image"))
	return blas32.General{Rows: b.Len(), Cols: pixels, Stride: pixels, Data: x}, collate.As[int64](b.Tensor("label"))
}

// mlp is logits = relu(x·W1 + b1)·W2 + b2, trained by SGD with momentum on
// the softmax cross-entropy. Rows are samples.
type mlp struct {
	w1, w2 blas32.General // [Pixels, hidden], [hidden, Classes]
	b1, b2 blas32.Vector
	v      velocity

	// Per-batch scratch, grown to the largest batch.
	h, z, dh blas32.General // hidden activations, logits, their gradients
	ones     blas32.Vector  // n ones: sums over the batch and bias broadcasts
	row      []float64      // one row of logits, for gonum's float64 helpers
}

// newMLP initializes the weights with He's normal scaling from rng.
func newMLP(hidden int, rng *rand.Rand) *mlp {
	m := &mlp{
		w1:  general(pixels, hidden),
		w2:  general(hidden, classes),
		b1:  vector(hidden),
		b2:  vector(classes),
		row: make([]float64, classes),
		v: velocity{
			w1: general(pixels, hidden),
			w2: general(hidden, classes),
			b1: vector(hidden),
			b2: vector(classes),
		},
	}
	for _, w := range []blas32.General{m.w1, m.w2} {
		scale := math.Sqrt(2 / float64(w.Rows))
		for i := range w.Data {
			w.Data[i] = float32(rng.NormFloat64() * scale)
		}
	}
	return m
}

// velocity is the momentum of each parameter.
type velocity struct {
	w1, w2 blas32.General
	b1, b2 blas32.Vector
}

// momentum is the fraction of the last update kept in the next.
const momentum = 0.9

func general(r, c int) blas32.General {
	return blas32.General{Rows: r, Cols: c, Stride: c, Data: make([]float32, r*c)}
}

func vector(n int) blas32.Vector { return blas32.Vector{N: n, Inc: 1, Data: make([]float32, n)} }

// flat views g's elements as a vector.
func flat(g blas32.General) blas32.Vector { return blas32.Vector{N: len(g.Data), Inc: 1, Data: g.Data} }

// rows returns the first n rows of g.
func rows(g blas32.General, n int) blas32.General {
	g.Rows = n
	g.Data = g.Data[:n*g.Stride]
	return g
}

// forward computes the hidden activations and logits of x's rows into the
// scratch matrices and returns them.
func (m *mlp) forward(x blas32.General) (h, z blas32.General) {
	n := x.Rows
	if m.h.Rows < n {
		m.h, m.z, m.dh = general(n, m.w1.Cols), general(n, classes), general(n, m.w1.Cols)
		m.ones = blas32.Vector{N: n, Inc: 1, Data: make([]float32, n)}
		for i := range m.ones.Data {
			m.ones.Data[i] = 1
		}
	}
	h, z = rows(m.h, n), rows(m.z, n)
	ones := blas32.Vector{N: n, Inc: 1, Data: m.ones.Data[:n]}

	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, x, m.w1, 0, h) // h = x·W1
	blas32.Ger(1, ones, m.b1, h)                              // + b1 on every row
	for i, v := range h.Data {
		h.Data[i] = max(v, 0)
	}
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, h, m.w2, 0, z) // z = h·W2
	blas32.Ger(1, ones, m.b2, z)                              // + b2
	return h, z
}

// step does one SGD step on a batch and returns its mean loss.
func (m *mlp) step(x blas32.General, y []int64, lr float32) float64 {
	n := x.Rows
	h, z := m.forward(x)
	ones := blas32.Vector{N: n, Inc: 1, Data: m.ones.Data[:n]}

	// z becomes dLoss/dz: (softmax(z) - onehot(y)) / n.
	loss := 0.0
	for s := range n {
		zs := z.Data[s*z.Stride : s*z.Stride+classes]
		for k, v := range zs {
			m.row[k] = float64(v)
		}
		lse := floats.LogSumExp(m.row)
		loss += lse - m.row[y[s]]
		for k, v := range m.row {
			zs[k] = float32(math.Exp(v-lse)) / float32(n)
		}
		zs[y[s]] -= 1 / float32(n)
	}
	dz := z

	// dh = dz·W2ᵀ, through the ReLU; then the updates, in place.
	dh := rows(m.dh, n)
	blas32.Gemm(blas.NoTrans, blas.Trans, 1, dz, m.w2, 0, dh)
	for i, v := range h.Data {
		if v <= 0 {
			dh.Data[i] = 0
		}
	}
	// v = momentum·v - lr·gradient, then w += v.
	v := &m.v
	blas32.Gemm(blas.Trans, blas.NoTrans, -lr, h, dz, momentum, v.w2) // dW2 = hᵀ·dz
	blas32.Gemv(blas.Trans, -lr, dz, ones, momentum, v.b2)            // db2 = Σ rows of dz
	blas32.Gemm(blas.Trans, blas.NoTrans, -lr, x, dh, momentum, v.w1) // dW1 = xᵀ·dh, x read in place
	blas32.Gemv(blas.Trans, -lr, dh, ones, momentum, v.b1)
	blas32.Axpy(1, flat(v.w1), flat(m.w1))
	blas32.Axpy(1, v.b1, m.b1)
	blas32.Axpy(1, flat(v.w2), flat(m.w2))
	blas32.Axpy(1, v.b2, m.b2)
	return loss / float64(n)
}

// accuracy is the fraction of set's images whose largest logit is their
// class, fed by a loader in order.
func (m *mlp) accuracy(ctx context.Context, set *datasets.Images, workers int) (float64, error) {
	l, err := engine.New(set.Dataset(datasets.Config{Flat: true}), engine.Config{BatchSize: 1000, Workers: workers, Backend: "cpu"})
	if err != nil {
		return 0, err
	}
	defer l.Close()
	right := 0
	for b, err := range l.Epoch(ctx, 0) {
		if err != nil {
			return 0, err
		}
		x, y := batch(b)
		_, z := m.forward(x)
		for s := range x.Rows {
			for k, v := range z.Data[s*z.Stride : s*z.Stride+classes] {
				m.row[k] = float64(v)
			}
			if floats.MaxIdx(m.row) == int(y[s]) {
				right++
			}
		}
	}
	return float64(right) / float64(set.Len()), nil
}

// load reads a split of Fashion-MNIST from dir.
func load(dir, split string, limit int) (*datasets.Images, error) {
	s, err := datasets.MNIST(dir, split, limit)
	if err != nil {
		return nil, fmt.Errorf("%w (install Debian's dataset-fashion-mnist, or pass -data)", err)
	}
	return s, nil
}
