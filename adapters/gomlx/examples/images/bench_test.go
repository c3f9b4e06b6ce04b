package main

import (
	"archive/tar"
	"bytes"
	"context"
	"image"
	"image/jpeg"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/datasets"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
	"github.com/stretchr/testify/require"
	"golang.org/x/image/draw"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"

	tbgomlx "github.com/tensorbatch/tensorbatch/adapters/gomlx"
	"github.com/tensorbatch/tensorbatch/vision"
)

// The benchmark's batch size and image size.
const (
	benchBatch = 32
	benchSize  = 32
)

// A feed makes the training Dataset of a benchmark over the shards of
// pattern; cleanups go to b.
type feed struct {
	name string
	make func(b *testing.B, backend backends.Backend, pattern string) train.Dataset
}

// feeds are the same shuffled JPEGs, cropped at random (RandomResizedCrop
// with the area in [0.5, 1]), flipped at random, resized to 32×32 and
// normalized to float32 CHW, in batches of 32, fed two ways: tensorbatch's
// vision through the adapter (shards.New over the tars, libjpeg-turbo where
// it loads), and what a GoMLX user writes today: datasets.Parallel over a
// plain Go dataset that decodes each JPEG with image/jpeg and resizes it
// with golang.org/x/image/draw's BiLinear (the JPEGs read from the same
// tars into memory up front, which spares it the reading).
var feeds = []feed{
	{"tensorbatch", func(b *testing.B, backend backends.Backend, pattern string) train.Dataset {
		p, err := vision.NewPipeline(trainTransform(benchSize))
		require.NoError(b, err)
		l, err := newLoader(context.Background(), p, pattern, benchBatch, 2)
		require.NoError(b, err)
		ds, err := tbgomlx.New(context.Background(), backend, l, tbgomlx.Config{Inputs: []string{"image"}, Labels: []string{"label"}, Infinite: true})
		require.NoError(b, err)
		b.Cleanup(func() { ds.Close(); l.Close(); p.Close() })
		return ds
	}},
	{"gomlx-parallel-xdraw", func(b *testing.B, _ backends.Backend, pattern string) train.Dataset {
		pd := datasets.Parallel(&goFeed{samples: readShards(b, pattern), rng: rand.New(rand.NewPCG(1, 0))})
		b.Cleanup(pd.Done)
		return pd
	}},
}

// jpegSample is a sample of goFeed: the JPEG and its class.
type jpegSample struct {
	data  []byte
	label int64
}

// readShards reads the .jpg and .cls members of the tars of pattern
// (the generated shards, by their glob).
func readShards(b *testing.B, pattern string) []jpegSample {
	paths, err := filepath.Glob(filepath.Join(filepath.Dir(pattern), "train-*.tar"))
	require.NoError(b, err)
	var out []jpegSample
	for _, path := range paths {
		f, err := os.Open(path)
		require.NoError(b, err)
		r := tar.NewReader(f)
		for {
			h, err := r.Next()
			if err == io.EOF {
				break
			}
			require.NoError(b, err)
			data, err := io.ReadAll(r)
			require.NoError(b, err)
			switch filepath.Ext(h.Name) {
			case ".jpg":
				out = append(out, jpegSample{data: data})
			case ".cls":
				y, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
				require.NoError(b, err)
				out[len(out)-1].label = y
			}
		}
		f.Close()
	}
	return out
}

// goFeed is a plain Go train.Dataset, safe for concurrent Yields (as
// datasets.Parallel needs): each decodes, crops, flips, resizes and
// normalizes its batch's images and makes tensors of them.
type goFeed struct {
	samples []jpegSample
	rng     *rand.Rand
	mu      sync.Mutex
	perm    []int
	next    int
	seq     uint64
}

func (g *goFeed) Name() string { return "gofeed" }
func (g *goFeed) Reset()       {}

func (g *goFeed) Yield() (any, []*tensors.Tensor, []*tensors.Tensor, error) {
	g.mu.Lock()
	if g.perm == nil || g.next+benchBatch > len(g.perm) { // a new epoch: infinite
		g.perm, g.next = g.rng.Perm(len(g.samples)), 0
	}
	idx := g.perm[g.next : g.next+benchBatch]
	g.next += benchBatch
	g.seq++
	rng := rand.New(rand.NewPCG(g.seq, 7))
	g.mu.Unlock()
	const pixels = benchSize * benchSize
	x := make([]float32, len(idx)*3*pixels)
	y := make([]int64, len(idx))
	dst := image.NewRGBA(image.Rect(0, 0, benchSize, benchSize))
	for k, i := range idx {
		src, err := jpeg.Decode(bytes.NewReader(g.samples[i].data))
		if err != nil {
			return nil, nil, nil, err
		}
		draw.BiLinear.Scale(dst, dst.Bounds(), src, randomCrop(src.Bounds(), rng), draw.Src, nil)
		flip := rng.IntN(2) == 1
		out := x[k*3*pixels : (k+1)*3*pixels]
		for py := range benchSize {
			for px := range benchSize {
				sx := px
				if flip {
					sx = benchSize - 1 - px
				}
				o := dst.PixOffset(sx, py)
				for c := range 3 {
					out[c*pixels+py*benchSize+px] = (float32(dst.Pix[o+c])/255 - vision.ImageNetMean[c]) / vision.ImageNetStd[c]
				}
			}
		}
		y[k] = g.samples[i].label
	}
	return nil, []*tensors.Tensor{tensors.FromFlatDataAndDimensions(x, len(idx), 3, benchSize, benchSize)},
		[]*tensors.Tensor{tensors.FromFlatDataAndDimensions(y, len(idx))}, nil
}

// randomCrop draws torchvision's RandomResizedCrop box in r: the area a
// fraction in [0.5, 1] of r's, the aspect ratio log-uniform in [3/4, 4/3]
// (ten tries, then the whole image).
func randomCrop(r image.Rectangle, rng *rand.Rand) image.Rectangle {
	w, h := r.Dx(), r.Dy()
	for range 10 {
		area := float64(w*h) * (0.5 + 0.5*rng.Float64())
		ratio := math.Exp(math.Log(3.0/4) + rng.Float64()*(math.Log(4.0/3)-math.Log(3.0/4)))
		cw, ch := int(math.Round(math.Sqrt(area*ratio))), int(math.Round(math.Sqrt(area/ratio)))
		if 0 < cw && cw <= w && 0 < ch && ch <= h {
			x0, y0 := r.Min.X+rng.IntN(w-cw+1), r.Min.Y+rng.IntN(h-ch+1)
			return image.Rect(x0, y0, x0+cw, y0+ch)
		}
	}
	return r
}

// linear is softmax regression on the pixels: a step cheap enough that
// the feed is the limit.
func linear(classes int) train.ModelFn {
	return func(ctx *mlctx.Context, _ any, inputs []*graph.Node) []*graph.Node {
		x := graph.Reshape(inputs[0], inputs[0].Shape().Dimensions[0], -1)
		return []*graph.Node{layers.DenseWithBias(ctx.In("logits"), x, classes)}
	}
}

// BenchmarkFeed runs the same GoMLX training step (Trainer.TrainStep,
// Adam, simplego) over the same generated JPEGs, fed by each feed, for the
// example's CNN and for softmax regression (a fast step, where the feed
// is the limit). It reports steps/s, the fraction of the time the step
// waited for data (in Yield) and the median and 90th percentile of that
// wait:
//
//	go test -run XXX -bench Feed -benchtime 60x ./examples/images
func BenchmarkFeed(b *testing.B) {
	dir := b.TempDir()
	pattern, err := writeShards(dir, 4, 256)
	require.NoError(b, err)
	for _, m := range []struct {
		name string
		fn   train.ModelFn
	}{{"cnn", model(numClasses)}, {"linear", linear(numClasses)}} {
		for _, f := range feeds {
			b.Run(m.name+"/"+f.name, func(b *testing.B) { benchFeed(b, pattern, m.fn, f) })
		}
	}
}

func benchFeed(b *testing.B, pattern string, fn train.ModelFn, f feed) {
	backend, err := simplego.New("ops_sequential")
	require.NoError(b, err)
	defer backend.Finalize()
	ds := f.make(b, backend, pattern)
	ctx := mlctx.New()
	require.NoError(b, ctx.SetRNGStateFromSeed(1))
	trainer := train.NewTrainer(backend, ctx, fn, loss, optimizers.Adam().LearningRate(3e-3).Done(), nil, nil)
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
