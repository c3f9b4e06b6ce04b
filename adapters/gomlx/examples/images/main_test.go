package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shortRun is the test's run over generated shards in dir: 80 steps of
// 32 images at 32×32, about 11 s on two cores.
func shortRun(t *testing.T) options {
	t.Helper()
	dir := t.TempDir()
	pattern, err := writeShards(dir, 2, 96)
	require.NoError(t, err)
	return options{shards: pattern, classes: numClasses, steps: 80, batch: 32, size: 32, workers: 2, lr: 3e-3, config: "ops_sequential"}
}

// TestLossFalls trains the CNN on generated WebDataset shards and checks
// that the training loss falls: the mean of the last 10 steps against the
// first 10 (chance is ln 3 ≈ 1.10).
func TestLossFalls(t *testing.T) {
	if race {
		t.Skip("the race detector slows simplego's kernels about 50×; TestTrainsUnderTheRaceDetector covers the race run")
	}
	o := shortRun(t)
	res, err := trainCNN(context.Background(), o, &bytes.Buffer{})
	require.NoError(t, err)
	require.Len(t, res.Loss, 80)
	first, last := mean(res.Loss[:10]), mean(res.Loss[70:])
	t.Logf("80 steps in %v: mean loss of the first 10 steps %.4f, of the last 10 %.4f", res.Took, first, last)
	assert.Less(t, last, 0.7*first, "the loss falls")
	assert.Less(t, last, 0.8, "below chance (ln 3 ≈ 1.10)")
}

// TestTrainsUnderTheRaceDetector is a few steps of small batches of
// 16×16 images: under -race it checks the shards, the vision Pipeline,
// the loader, the adapter and GoMLX's loop together.
func TestTrainsUnderTheRaceDetector(t *testing.T) {
	o := shortRun(t)
	o.steps, o.batch, o.size = 3, 8, 16
	res, err := trainCNN(context.Background(), o, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Len(t, res.Loss, 3)
}

func TestRunGeneratesShards(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-dir", t.TempDir(), "-per-shard", "16", "-steps", "4", "-batch", "8", "-size", "16", "-every", "2"}, &out)
	require.NoError(t, err)
	assert.Regexp(t, `(?s)^wrote 2 shards of 16 JPEGs to .*\nstep 2: mean loss [0-9.]+\nstep 4: mean loss [0-9.]+\n4 steps in [0-9.]+ s \([0-9.]+ steps/s\); mean loss of the first 2 steps [0-9.]+, of the last 2 [0-9.]+\n$`, out.String())
}

func TestRunReportsMissingShards(t *testing.T) {
	err := run(context.Background(), []string{"-shards", t.TempDir() + "/none-{0000..0001}.tar", "-steps", "2"}, &bytes.Buffer{})
	assert.Error(t, err)
}

// TestPatchConvIsAConvolution checks patchConv against GoMLX's own
// convolution (stride 2, padding 1), which simplego runs forward, on odd
// and even sizes.
func TestPatchConvIsAConvolution(t *testing.T) {
	backend, err := simplego.New("ops_sequential")
	require.NoError(t, err)
	defer backend.Finalize()
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(dims ...int) *tensors.Tensor {
		v := make([]float32, shapes.Make(dtypes.Float32, dims...).Size())
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return tensors.FromFlatDataAndDimensions(v, dims...)
	}
	x, k := random(2, 7, 6, 3), random(3, 3, 3, 4)
	got, err := graph.ExecOnce(backend, patchConv, x, k)
	require.NoError(t, err)
	want, err := graph.ExecOnce(backend, func(x, k *graph.Node) *graph.Node {
		return graph.Convolve(x, k).Strides(2).PaddingPerDim([][2]int{{1, 1}, {1, 1}}).Done()
	}, x, k)
	require.NoError(t, err)
	require.Equal(t, []int{2, 4, 3, 4}, got.Shape().Dimensions)
	require.Equal(t, want.Shape().Dimensions, got.Shape().Dimensions)
	assert.InDeltaSlice(t, tensors.MustCopyFlatData[float32](want), tensors.MustCopyFlatData[float32](got), 1e-4)
}
