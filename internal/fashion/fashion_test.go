package fashion_test

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/fashion"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeIDX writes a gzipped IDX file: magic, dims, payload.
func writeIDX(t *testing.T, path string, magic uint32, dims []uint32, payload []byte) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	z := gzip.NewWriter(f)
	require.NoError(t, binary.Write(z, binary.BigEndian, append([]uint32{magic}, dims...)))
	_, err = z.Write(payload)
	require.NoError(t, err)
	require.NoError(t, z.Close())
	require.NoError(t, f.Close())
}

// tiny writes a split of n images whose pixel (y, x) of image i is i+x and
// whose label is i mod 10.
func tiny(t *testing.T, n int) string {
	dir := t.TempDir()
	var images, labels []byte
	for i := range n {
		for range fashion.Side {
			for x := range fashion.Side {
				images = append(images, byte(i+x))
			}
		}
		labels = append(labels, byte(i%10))
	}
	writeIDX(t, filepath.Join(dir, "train-images-idx3-ubyte.gz"), 0x803, []uint32{uint32(n), 28, 28}, images)
	writeIDX(t, filepath.Join(dir, "train-labels-idx1-ubyte.gz"), 0x801, []uint32{uint32(n)}, labels)
	return dir
}

func TestLoadReadsAndLimits(t *testing.T) {
	dir := tiny(t, 5)
	assert.NoError(t, fashion.Missing(dir))
	s, err := fashion.Load(dir, "train", 0)
	require.NoError(t, err)
	assert.Equal(t, 5, s.Len())
	assert.Len(t, s.Images, 5*fashion.Pixels)
	s, err = fashion.Load(dir, "train", 3)
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 2}, s.Labels)
	assert.Len(t, s.Images, 3*fashion.Pixels)
}

func TestLoadReportsBadFiles(t *testing.T) {
	empty := t.TempDir()
	assert.Error(t, fashion.Missing(empty))
	_, err := fashion.Load(empty, "train", 0)
	assert.ErrorContains(t, err, "install Debian's dataset-fashion-mnist")

	dir := tiny(t, 2)
	writeIDX(t, filepath.Join(dir, "train-labels-idx1-ubyte.gz"), 0x801, []uint32{3}, []byte{0, 1, 2})
	_, err = fashion.Load(dir, "train", 0)
	assert.ErrorContains(t, err, "3 labels for 1568 bytes of images")
	writeIDX(t, filepath.Join(dir, "train-labels-idx1-ubyte.gz"), 0x803, []uint32{2}, []byte{0, 1})
	_, err = fashion.Load(dir, "train", 0)
	assert.ErrorContains(t, err, "magic 0x803, want 0x801")
}

// images loads every sample of ds through a loader with workers.
func images(t *testing.T, ds engine.Dataset, workers int) ([]float32, []int64) {
	t.Helper()
	l, err := engine.New(ds, engine.Config{BatchSize: 2, Seed: 3, Workers: workers, Backend: "cpu"})
	require.NoError(t, err)
	defer l.Close()
	var x []float32
	var y []int64
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		x = append(x, collate.As[float32](b.Tensor("image"))...)
		y = append(y, collate.As[int64](b.Tensor("label"))...)
	}
	return x, y
}

func TestDatasetScalesAndFlips(t *testing.T) {
	s, err := fashion.Load(tiny(t, 8), "train", 0)
	require.NoError(t, err)
	x, y := images(t, s.Dataset(false), 0)
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7}, y)
	for i := range 8 {
		for p := range fashion.Pixels {
			require.Equal(t, float32(i+p%fashion.Side)/255, x[i*fashion.Pixels+p])
		}
	}

	flipped, _ := images(t, s.Dataset(true), 2)
	again, _ := images(t, s.Dataset(true), 0)
	assert.Equal(t, flipped, again, "the same flips for any worker count")
	mirrored := 0
	for i := range 8 {
		img := flipped[i*fashion.Pixels : (i+1)*fashion.Pixels]
		row := img[:fashion.Side]
		if !slices.Equal(row, x[i*fashion.Pixels:i*fashion.Pixels+fashion.Side]) {
			mirrored++
			slices.Reverse(row)
			assert.Equal(t, x[i*fashion.Pixels:i*fashion.Pixels+fashion.Side], row, "image %d is mirrored", i)
		}
	}
	assert.NotZero(t, mirrored)
	assert.NotEqual(t, 8, mirrored)
}
