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

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/fashion"
)

// benchBatch is the batch size of every feed.
const benchBatch = 64

// A feed makes the training Dataset of a benchmark; cleanups go to b.
type feed struct {
	name string
	make func(b *testing.B, backend backends.Backend, set *fashion.Set) train.Dataset
}

// feeds are the same shuffled batches of 64 normalized images, without
// augmentation, fed three ways: tensorbatch through the adapter (uint8
// images converted to float32 as each sample is written), GoMLX's
// in-memory dataset (float32 images held by the backend, batches gathered
// by a graph), alone and under datasets.Parallel, and datasets.Parallel
// over a plain Go dataset doing tensorbatch's per-sample work (the GoMLX
// way to feed data that is not all in memory).
var feeds = []feed{
	{"tensorbatch", func(b *testing.B, backend backends.Backend, set *fashion.Set) train.Dataset {
		ds, l, err := loader(context.Background(), backend, set.Dataset(false), engine.Config{BatchSize: benchBatch,
			Shuffle: true, Seed: 1, DropLast: true, Workers: 2, Backend: "cpu"}, "tensorbatch", true)
		require.NoError(b, err)
		b.Cleanup(func() { ds.Close(); l.Close() })
		return ds
	}},
	{"gomlx-inmemory", func(b *testing.B, backend backends.Backend, set *fashion.Set) train.Dataset {
		return inMemory(b, backend, set)
	}},
	{"gomlx-parallel-inmemory", func(b *testing.B, backend backends.Backend, set *fashion.Set) train.Dataset {
		pd := datasets.Parallel(inMemory(b, backend, set))
		b.Cleanup(pd.Done)
		return pd
	}},
	{"gomlx-parallel-go", func(b *testing.B, _ backends.Backend, set *fashion.Set) train.Dataset {
		pd := datasets.Parallel(&goFeed{set: set, rng: rand.New(rand.NewPCG(1, 0))})
		b.Cleanup(pd.Done)
		return pd
	}},
}

// inMemory is GoMLX's in-memory dataset of set, images normalized to
// float32 up front.
func inMemory(b *testing.B, backend backends.Backend, set *fashion.Set) *datasets.InMemoryDataset {
	x := make([]float32, len(set.Images))
	for i, p := range set.Images {
		x[i] = float32(p) / 255
	}
	y := make([]int64, set.Len())
	for i, c := range set.Labels {
		y[i] = int64(c)
	}
	mds, err := datasets.InMemoryFromData(backend, "inmemory",
		[]any{tensors.FromFlatDataAndDimensions(x, set.Len(), fashion.Pixels)},
		[]any{tensors.FromFlatDataAndDimensions(y, set.Len(), 1)})
	require.NoError(b, err)
	b.Cleanup(mds.FinalizeAll)
	return mds.BatchSize(benchBatch, true).WithRand(mathrand.New(mathrand.NewSource(1))).Shuffle().Infinite(true)
}

// goFeed is a plain Go train.Dataset, safe for concurrent Yields: each
// converts its batch's images to float32 and makes tensors of them.
type goFeed struct {
	set  *fashion.Set
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
	x := make([]float32, len(idx)*fashion.Pixels)
	y := make([]int64, len(idx))
	for k, i := range idx {
		for j, p := range g.set.Images[i*fashion.Pixels : (i+1)*fashion.Pixels] {
			x[k*fashion.Pixels+j] = float32(p) / 255
		}
		y[k] = int64(g.set.Labels[i])
	}
	return nil, []*tensors.Tensor{tensors.FromFlatDataAndDimensions(x, len(idx), fashion.Pixels)},
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
	if err := fashion.Missing(fashion.DefaultDir); err != nil {
		b.Skipf("Fashion-MNIST is not installed (%v)", err)
	}
	set, err := fashion.Load(fashion.DefaultDir, "train", 0)
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

func benchFeed(b *testing.B, set *fashion.Set, hidden int, f feed) {
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
