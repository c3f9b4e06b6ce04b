package main

import (
	"context"
	"fmt"
	mathrand "math/rand"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/datasets"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"

	tbsets "github.com/tensorbatch/tensorbatch/datasets"
	"github.com/tensorbatch/tensorbatch/engine"
)

// benchBatch is the batch size of every feed.
const benchBatch = 64

// A feed makes the training Dataset of a benchmark; cleanups go to b.
type feed struct {
	name string
	make func(b *testing.B, backend backends.Backend, set *tbsets.Images) train.Dataset
}

// feeds are the same shuffled batches of 64 normalized images, without
// augmentation, fed three ways: tensorbatch through the adapter (uint8
// images converted to float32 as each sample is written), GoMLX's
// in-memory dataset (float32 images held by the backend, batches gathered
// by a graph), alone and under datasets.Parallel, and datasets.Parallel
// over a plain Go dataset doing tensorbatch's per-sample work (the GoMLX
// way to feed data that is not all in memory).
var feeds = []feed{
	{"tensorbatch", func(b *testing.B, backend backends.Backend, set *tbsets.Images) train.Dataset {
		ds, l, err := loader(context.Background(), backend, set.Dataset(tbsets.Config{Flat: true}), engine.Config{BatchSize: benchBatch,
			Shuffle: true, Seed: 1, DropLast: true, Workers: 2, Backend: "cpu"}, "tensorbatch", true)
		require.NoError(b, err)
		b.Cleanup(func() { ds.Close(); l.Close() })
		return ds
	}},
	{"gomlx-inmemory", func(b *testing.B, backend backends.Backend, set *tbsets.Images) train.Dataset {
		return inMemory(b, backend, set)
	}},
	{"gomlx-parallel-inmemory", func(b *testing.B, backend backends.Backend, set *tbsets.Images) train.Dataset {
		pd := datasets.Parallel(inMemory(b, backend, set))
		b.Cleanup(pd.Done)
		return pd
	}},
	{"gomlx-parallel-go", func(b *testing.B, _ backends.Backend, set *tbsets.Images) train.Dataset {
		pd := datasets.Parallel(&goFeed{set: set, rng: rand.New(rand.NewPCG(1, 0))})
		b.Cleanup(pd.Done)
		return pd
	}},
}

// inMemory is GoMLX's in-memory dataset of set, images normalized to
// float32 up front.
func inMemory(b *testing.B, backend backends.Backend, set *tbsets.Images) *datasets.InMemoryDataset {
	x := make([]float32, len(set.Pixels))
	for i, p := range set.Pixels {
		x[i] = float32(p) / 255
	}
	y := make([]int64, set.Len())
	for i, c := range set.Labels {
		y[i] = int64(c)
	}
	mds, err := datasets.InMemoryFromData(backend, "inmemory",
		[]any{tensors.FromFlatDataAndDimensions(x, set.Len(), pixels)},
		[]any{tensors.FromFlatDataAndDimensions(y, set.Len(), 1)})
	require.NoError(b, err)
	b.Cleanup(mds.FinalizeAll)
	return mds.BatchSize(benchBatch, true).WithRand(mathrand.New(mathrand.NewSource(1))).Shuffle().Infinite(true)
}

// goFeed is a plain Go train.Dataset, safe for concurrent Yields: each
// converts its batch's images to float32 and makes tensors of them.
type goFeed struct {
	set  *tbsets.Images
	rng  *rand.Rand
	mu   sync.Mutex
	perm []int
	next int
}

func (g *goFeed) Name() string { return "gofeed" }
func (g *goFeed) Reset()       {}

func (g *goFeed) Yield() (any, []*tensors.Tensor, []*tensors.Tensor, error) {
	g.mu.Lock()
	if g.perm == nil || g.next+benchBatch > len(g.perm) { // a new epoch: infinite
		g.perm, g.next = g.rng.Perm(g.set.Len()), 0
	}
	idx := g.perm[g.next : g.next+benchBatch]
	g.next += benchBatch
	g.mu.Unlock()
	x := make([]float32, len(idx)*pixels)
	y := make([]int64, len(idx))
	for k, i := range idx {
		for j, p := range g.set.Pixels[i*pixels : (i+1)*pixels] {
			x[k*pixels+j] = float32(p) / 255
		}
		y[k] = int64(g.set.Labels[i])
	}
	return nil, []*tensors.Tensor{tensors.FromFlatDataAndDimensions(x, len(idx), pixels)},
		[]*tensors.Tensor{tensors.FromFlatDataAndDimensions(y, len(idx), 1)}, nil
}

// BenchmarkFeed runs the same GoMLX training step (Trainer.TrainStep, Adam,
// simplego) fed by each feed, for a linear model (a fast step, where
// feeding shows) and the example's MLP. It reports steps/s, the fraction
// of the time the step waited for data (in Yield) and the median and 90th
// percentile of that wait:
//
//	go test -run XXX -bench Feed -benchtime 200x ./examples/fashion
func BenchmarkFeed(b *testing.B) {
	if err := missing(); err != nil {
		b.Skipf("Fashion-MNIST is not installed (%v)", err)
	}
	set, err := tbsets.MNIST(tbsets.FashionMNISTDir, "train", 0)
	require.NoError(b, err)
	for _, hidden := range []int{0, 128} {
		model := "linear"
		if hidden > 0 {
			model = fmt.Sprintf("mlp%d", hidden)
		}
		for _, f := range feeds {
			b.Run(model+"/"+f.name, func(b *testing.B) { benchFeed(b, set, hidden, f) })
		}
	}
}

func benchFeed(b *testing.B, set *tbsets.Images, hidden int, f feed) {
	backend, err := simplego.New("ops_sequential")
	require.NoError(b, err)
	defer backend.Finalize()
	ds := f.make(b, backend, set)
	trainer, err := newTrainer(backend, options{hidden: hidden, lr: 1e-3})
	require.NoError(b, err)
	step := func() time.Duration {
		t0 := time.Now()
		_, in, lab, err := ds.Yield()
		wait := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		m, err := trainer.TrainStep(nil, in, lab)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range slices.Concat(in, lab, m) {
			t.FinalizeAll()
		}
		return wait
	}
	for range 5 { // compiles the graphs and fills the pools
		step()
	}
	var waits []float64 // seconds
	for b.Loop() {
		waits = append(waits, step().Seconds())
	}
	elapsed := b.Elapsed().Seconds()
	b.ReportMetric(float64(len(waits))/elapsed, "steps/s")
	b.ReportMetric(floats.Sum(waits)/elapsed, "wait-frac")
	slices.Sort(waits)
	b.ReportMetric(stat.Quantile(0.5, stat.Empirical, waits, nil)*1e6, "p50-wait-µs")
	b.ReportMetric(stat.Quantile(0.9, stat.Empirical, waits, nil)*1e6, "p90-wait-µs")
}
