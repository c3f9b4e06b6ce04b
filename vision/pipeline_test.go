package vision_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
	"github.com/tensorbatch/tensorbatch/vision"
)

// epochBytes loads epoch of ds and returns every batch's image and label
// bytes, and its indices.
func epochBytes(t testing.TB, ds engine.Dataset, cfg engine.Config, epoch int) (batches [][]byte, indices [][]int) {
	t.Helper()
	l, err := engine.New(ds, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	for b, err := range l.Epoch(context.Background(), epoch) {
		require.NoError(t, err)
		batches = append(batches, bytes.Clone(b.Tensor("image").Bytes()), bytes.Clone(b.Tensor("label").Bytes()))
		indices = append(indices, b.Indices())
	}
	return batches, indices
}

// allTransforms is a train and an eval transform for every Mode and
// Output.
func allTransforms() []vision.Transform {
	var ts []vision.Transform
	for _, mode := range []vision.Mode{vision.Exact, vision.Fast} {
		for out := vision.Float32CHW; out <= vision.Uint8CHW; out++ {
			ts = append(ts,
				vision.Transform{Train: true, Size: 40, Output: out, Mode: mode},
				vision.Transform{Size: 32, Output: out, Mode: mode})
		}
	}
	return ts
}

// Pipeline.Decode on a file's bytes, with the slot's RNG, writes the
// bits ImageFolder writes for the file: every Mode and Output, train and
// eval, through two loaders.
func TestPipelineMatchesImageFolder(t *testing.T) {
	root := folder(t)
	for _, tr := range allTransforms() {
		name := fmt.Sprintf("train=%v/%v/%v", tr.Train, tr.Mode, tr.Output)
		ds, err := vision.ImageFolder(root, tr)
		require.NoError(t, err)
		files := make([][]byte, ds.Len())
		for i, s := range ds.Samples() {
			files[i], err = os.ReadFile(s.Path)
			require.NoError(t, err)
		}
		p, err := vision.NewPipeline(tr)
		require.NoError(t, err)
		assert.Equal(t, ds.Schema(), p.Schema(), name)
		fromBytes := engine.DatasetFunc(ds.Len(), p.Schema(), func(ctx context.Context, s *engine.Slot) error {
			if err := p.Decode(files[s.Index()], s.Rand(), s.Tensor("image").Bytes()); err != nil {
				return err
			}
			collate.As[int64](s.Tensor("label"))[0] = int64(ds.Samples()[s.Index()].Label)
			return nil
		})
		cfg := engine.Config{BatchSize: 5, Shuffle: true, Seed: 11, Workers: 2}
		want, _ := epochBytes(t, ds, cfg, 3)
		got, _ := epochBytes(t, fromBytes, cfg, 3)
		require.Len(t, got, len(want), name)
		for i := range want {
			require.True(t, bytes.Equal(want[i], got[i]), "%s: batch %d, field %d differs", name, i/2, i%2)
		}
		assert.NotEqual(t, make([]byte, len(want[0])), want[0], "%s: the batch is not all zeros", name)

		// And one sample on its own: a standalone Slot's RNG is the loader's.
		layout, err := collate.NewLayout(p.Schema(), 1)
		require.NoError(t, err)
		slot := enginetest.NewSlot(11, 3, 4, layout, make([]byte, layout.Size()), 0)
		a := make([]byte, p.Schema()[0].Bytes())
		require.NoError(t, p.Decode(files[4], slot.Rand(), a))
		slot = enginetest.NewSlot(11, 3, 4, layout, make([]byte, layout.Size()), 0)
		require.NoError(t, ds.Fill(context.Background(), slot))
		assert.Equal(t, slot.Tensor("image").Bytes(), a, name)

		require.NoError(t, p.Close())
		require.NoError(t, ds.Close())
	}
}

// The libjpeg-turbo path of Decode allocates nothing per image once warm.
func TestPipelineDecodeNoAllocation(t *testing.T) {
	if !vision.JPEGDecoderInfo().Turbo() {
		t.Skip("libjpeg-turbo not loaded")
	}
	data, err := os.ReadFile(filepath.Join(testdata, "rgb420.jpg"))
	require.NoError(t, err)
	for _, tr := range []vision.Transform{{Train: true, Size: 64}, {Train: true, Size: 64, Mode: vision.Fast}, {Size: 64, Output: vision.Uint8HWC}} {
		p, err := vision.NewPipeline(tr)
		require.NoError(t, err)
		dst := make([]byte, p.Schema()[0].Bytes())
		rng := newRand(1)
		require.NoError(t, p.Decode(data, rng, dst))
		allocs := testing.AllocsPerRun(50, func() {
			if err := p.Decode(data, rng, dst); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%+v", tr)
		require.NoError(t, p.Close())
	}
}

func TestPipelineDecodeErrors(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(testdata, "rgb420.jpg"))
	require.NoError(t, err)
	p, err := vision.NewPipeline(vision.Eval(16), vision.MaxFileBytes(int64(len(good))), vision.MaxPixels(1<<20))
	require.NoError(t, err)
	dst := make([]byte, 3*16*16*4)
	require.NoError(t, p.Decode(good, nil, dst))

	err = p.Decode(good, nil, dst[:100])
	assert.ErrorContains(t, err, "100 bytes")
	assert.ErrorContains(t, err, fmt.Sprint(len(dst)))

	big := append(bytes.Clone(good), 0)
	assert.ErrorIs(t, p.Decode(big, nil, dst), vision.ErrFileTooLarge)
	assert.ErrorIs(t, p.Decode(good[:len(good)-40], nil, dst), vision.ErrCorrupt, "a JPEG is checked whole")
	assert.ErrorIs(t, p.Decode(nil, nil, dst), vision.ErrNotImage)
	assert.ErrorIs(t, p.Decode([]byte("not an image at all"), nil, dst), vision.ErrNotImage)
	assert.ErrorIs(t, p.Decode(jpegHeader(2000, 1000), nil, dst), vision.ErrTooManyPixels)
	assert.ErrorIs(t, p.Decode(pngHeader(2000, 1000), nil, dst), vision.ErrTooManyPixels)

	train, err := vision.NewPipeline(vision.Train(16))
	require.NoError(t, err)
	assert.ErrorContains(t, train.Decode(good, nil, dst), "rng", "no panic")
	require.NoError(t, train.Close())

	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "idempotent")
	err = p.Decode(good, nil, dst)
	assert.ErrorIs(t, err, fs.ErrClosed)
	assert.ErrorContains(t, err, "vision: the Pipeline is closed")
}

// A closed Dataset fails its Fills: it is its Pipeline.
func TestDatasetDecodeAfterClose(t *testing.T) {
	ds, err := vision.New(nil, nil, vision.Eval(16))
	require.NoError(t, err)
	require.NoError(t, ds.Close())
	err = ds.Decode(filepath.Join(testdata, "rgb.png"), nil, make([]byte, 3*16*16*4))
	assert.ErrorIs(t, err, fs.ErrClosed)
}

// Decodes from many goroutines at once give each its own bits, and a
// Close among them frees the decoders in use as they finish.
func TestPipelineConcurrent(t *testing.T) {
	var files [][]byte
	for _, f := range []string{"rgb420.jpg", "progressive.jpg", "rgb.png", "cmyk.jpg"} {
		b, err := os.ReadFile(filepath.Join(testdata, f))
		require.NoError(t, err)
		files = append(files, b)
	}
	p, err := vision.NewPipeline(vision.Transform{Train: true, Size: 24, Mode: vision.Fast})
	require.NoError(t, err)
	n := p.Schema()[0].Bytes()
	want := make([][]byte, 16)
	for i := range want {
		want[i] = make([]byte, n)
		require.NoError(t, p.Decode(files[i%len(files)], newRand(uint64(i)), want[i]))
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Go(func() {
			dst := make([]byte, n)
			for k := range 40 {
				i := (g + k) % len(want)
				if err := p.Decode(files[i%len(files)], newRand(uint64(i)), dst); err != nil {
					errs[g] = err
					return
				}
				if !bytes.Equal(dst, want[i]) {
					errs[g] = fmt.Errorf("goroutine %d: image %d differs", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	// Close while decodes run: each returns its bits or fs.ErrClosed.
	for g := range errs {
		errs[g] = nil
		wg.Go(func() {
			dst := make([]byte, n)
			for k := range 40 {
				err := p.Decode(files[k%len(files)], newRand(uint64(k)), dst)
				if errors.Is(err, fs.ErrClosed) {
					return
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	require.NoError(t, p.Close())
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}
