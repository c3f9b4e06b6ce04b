package datasets_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/datasets"
	"github.com/tensorbatch/tensorbatch/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// idx returns an IDX file of unsigned bytes: magic, dims, payload.
func idx(dims []uint32, payload []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 8, byte(len(dims))})
	binary.Write(&b, binary.BigEndian, dims)
	b.Write(payload)
	return b.Bytes()
}

// write writes data to dir/name, gzipped where name ends in .gz.
func write(t testing.TB, dir, name string, data []byte) {
	t.Helper()
	if filepath.Ext(name) == ".gz" {
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		_, err := z.Write(data)
		require.NoError(t, err)
		require.NoError(t, z.Close())
		data = b.Bytes()
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
}

// tiny writes a split of n 28×28 images whose pixel (y, x) of image i is
// i+x and whose label is i mod 10, gzipped or not.
func tiny(t testing.TB, n int, gz bool) string { return tinyFrom(t, 0, n, gz) }

// tinyFrom is tiny of images first to first+n-1.
func tinyFrom(t testing.TB, first, n int, gz bool) string {
	dir := t.TempDir()
	var images, labels []byte
	for i := first; i < first+n; i++ {
		for range 28 {
			for x := range 28 {
				images = append(images, byte(i+x))
			}
		}
		labels = append(labels, byte(i%10))
	}
	ext := ""
	if gz {
		ext = ".gz"
	}
	write(t, dir, "train-images-idx3-ubyte"+ext, idx([]uint32{uint32(n), 28, 28}, images))
	write(t, dir, "train-labels-idx1-ubyte"+ext, idx([]uint32{uint32(n)}, labels))
	return dir
}

func TestMNISTReadsAndLimits(t *testing.T) {
	t.Parallel()
	for _, gz := range []bool{false, true} {
		dir := tiny(t, 5, gz)
		s, err := datasets.MNIST(dir, "train", 0)
		require.NoError(t, err)
		assert.Equal(t, 5, s.Len())
		assert.Equal(t, 784, s.Size())
		assert.Equal(t, 10, s.Classes)
		assert.Len(t, s.Pixels, 5*784)
		s, err = datasets.MNIST(dir, "train", 3)
		require.NoError(t, err)
		assert.Equal(t, []byte{0, 1, 2}, s.Labels)
		assert.Len(t, s.Pixels, 3*784)
	}
}

func TestMNISTReportsBadFiles(t *testing.T) {
	t.Parallel()
	_, err := datasets.MNIST(t.TempDir(), "train", 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	dir := tiny(t, 2, true)
	write(t, dir, "train-labels-idx1-ubyte.gz", idx([]uint32{3}, []byte{0, 1, 2}))
	_, err = datasets.MNIST(dir, "train", 0)
	assert.ErrorContains(t, err, "2 images and 3 labels")

	write(t, dir, "train-labels-idx1-ubyte.gz", append([]byte{0, 0, 0x0d, 1}, 0, 0, 0, 2, 0, 1))
	_, err = datasets.MNIST(dir, "train", 0)
	assert.ErrorContains(t, err, "not an IDX file of unsigned bytes")
	assert.ErrorContains(t, err, "train-labels-idx1-ubyte.gz")
}

func TestReadIDXAllocatesOnlyWhatExists(t *testing.T) {
	t.Parallel()
	// A 20-byte file that declares 4 G × 64 K × 64 K bytes, then 4 G × 1 K.
	for _, dims := range [][]uint32{{1 << 31, 1 << 16, 1 << 16}, {1<<32 - 1, 1 << 10}} {
		_, err := datasets.ReadIDX(bytes.NewReader(idx(dims, []byte{1, 2, 3})), 0)
		require.Error(t, err, "dims %v", dims)
	}
	_, err := datasets.ReadIDX(bytes.NewReader(idx([]uint32{1<<32 - 1, 1 << 10}, []byte{1, 2, 3})), 0)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	got, err := datasets.ReadIDX(bytes.NewReader(idx([]uint32{2, 2}, []byte{1, 2, 3, 4, 5})), 0)
	require.NoError(t, err)
	assert.Equal(t, datasets.IDX{Dims: []int{2, 2}, Data: []byte{1, 2, 3, 4}}, got)
	_, err = datasets.ReadIDX(bytes.NewReader([]byte{0, 0, 8}), 0)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// load loads every sample of ds through a loader with workers.
func load(t *testing.T, ds engine.Dataset, workers int) ([]float32, []int64) {
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

func TestDatasetScalesShapesAndFlips(t *testing.T) {
	t.Parallel()
	s, err := datasets.MNIST(tiny(t, 8, false), "train", 0)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 28, 28}, s.Schema(datasets.Config{})[0].Shape)
	assert.Equal(t, []int{784}, s.Schema(datasets.Config{Flat: true})[0].Shape)
	x, y := load(t, s.Dataset(datasets.Config{}), 0)
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7}, y)
	for i := range 8 {
		for p := range 784 {
			require.Equal(t, float32(i+p%28)/255, x[i*784+p])
		}
	}

	flipped, _ := load(t, s.Dataset(datasets.Config{Flip: true, Flat: true}), 2)
	again, _ := load(t, s.Dataset(datasets.Config{Flip: true, Flat: true}), 0)
	assert.Equal(t, flipped, again, "the same flips for any worker count")
	mirrored := 0
	for i := range 8 {
		row := flipped[i*784 : i*784+28]
		if !slices.Equal(row, x[i*784:i*784+28]) {
			mirrored++
			slices.Reverse(row)
			assert.Equal(t, x[i*784:i*784+28], row, "image %d is mirrored", i)
		}
	}
	assert.NotZero(t, mirrored)
	assert.NotEqual(t, 8, mirrored)
}

// cifar writes a CIFAR-10 batch file of n records: label i mod 10, channel
// c of pixel p of image i is i+c+p.
func cifar(t testing.TB, dir, name string, first, n int) {
	var b []byte
	for i := first; i < first+n; i++ {
		b = append(b, byte(i%10))
		for c := range 3 {
			for p := range 1024 {
				b = append(b, byte(i+c+p))
			}
		}
	}
	write(t, dir, name, b)
}

func TestCIFAR10(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cifar(t, dir, "test_batch.bin", 0, 4)
	for k := range 5 {
		cifar(t, dir, "data_batch_"+string(rune('1'+k))+".bin", 3*k, 3)
	}
	s, err := datasets.CIFAR10(dir, false, 0)
	require.NoError(t, err)
	assert.Equal(t, 4, s.Len())
	assert.Equal(t, []int{3, 32, 32}, s.Schema(datasets.Config{})[0].Shape)
	s, err = datasets.CIFAR10(dir, true, 0)
	require.NoError(t, err)
	assert.Equal(t, 15, s.Len(), "five batch files in order")
	x, y := load(t, s.Dataset(datasets.Config{}), 2)
	for i := range 15 {
		assert.Equal(t, int64(i%10), y[i])
		assert.Equal(t, float32(byte(i+2+5))/255, x[i*3072+2*1024+5], "image %d, channel 2, pixel 5", i)
	}
	s, err = datasets.CIFAR10(dir, true, 7)
	require.NoError(t, err)
	assert.Equal(t, 7, s.Len())

	require.NoError(t, os.WriteFile(filepath.Join(dir, "test_batch.bin"), make([]byte, 3072), 0o644))
	_, err = datasets.CIFAR10(dir, false, 0)
	assert.ErrorContains(t, err, "not a whole number of 3073-byte records")
	_, err = datasets.CIFAR10(t.TempDir(), true, 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestFashionMNIST reads the real dataset where Debian's
// dataset-fashion-mnist is installed.
func TestFashionMNIST(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(datasets.FashionMNISTDir); err != nil {
		t.Skipf("Fashion-MNIST is not installed (%v): apt-get install dataset-fashion-mnist", err)
	}
	for split, n := range map[string]int{"train": 60000, "t10k": 10000} {
		s, err := datasets.MNIST(datasets.FashionMNISTDir, split, 0)
		require.NoError(t, err)
		assert.Equal(t, n, s.Len())
		assert.Equal(t, 10, s.Classes)
		counts := make([]int, 10)
		for _, l := range s.Labels {
			counts[l]++
		}
		for c := range counts {
			assert.Equal(t, n/10, counts[c], "Fashion-MNIST is balanced: class %d", c)
		}
	}
}

// An IDX file's header must agree with the file's size, or a .gz's with
// the size its trailer gives, before the data are allocated: a small
// file cannot make MNIST allocate the GBs its header declares.
func TestIDXFileDeclaresItsOwnSize(t *testing.T) {
	t.Parallel()
	for _, gz := range []bool{false, true} {
		dir := tiny(t, 2, gz)
		ext := map[bool]string{false: "", true: ".gz"}[gz]
		images := make([]byte, 1<<20) // 1 MiB of zeros: a few KB gzipped
		write(t, dir, "train-images-idx3-ubyte"+ext, idx([]uint32{1 << 21, 28, 28}, images))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := datasets.MNIST(dir, "train", 0)
		runtime.ReadMemStats(&after)
		require.Error(t, err, "gz %v", gz)
		assert.ErrorContains(t, err, "dimensions [2097152 28 28]: declare 1644167184 bytes")
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "gz %v: allocated by the header", gz)
	}
}

// What the size check lets through: a file with bytes after its data,
// and a gzip file of several members (as cat a.gz b.gz makes), read as
// before.
func TestIDXFileSizeCheckAcceptsValidFiles(t *testing.T) {
	t.Parallel()
	dir := tiny(t, 2, false)
	data, err := os.ReadFile(filepath.Join(dir, "train-labels-idx1-ubyte"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "train-labels-idx1-ubyte"), append(data, 0), 0o644))
	_, err = datasets.MNIST(dir, "train", 0)
	assert.NoError(t, err, "a byte after the data")

	gz := tiny(t, 2, true)
	path := filepath.Join(gz, "train-images-idx3-ubyte.gz")
	whole, err := os.ReadFile(path)
	require.NoError(t, err)
	var empty bytes.Buffer
	z := gzip.NewWriter(&empty)
	require.NoError(t, z.Close())
	require.NoError(t, os.WriteFile(path, append(whole, empty.Bytes()...), 0o644))
	want, err := datasets.MNIST(tiny(t, 2, true), "train", 0)
	require.NoError(t, err)
	got, err := datasets.MNIST(gz, "train", 0)
	require.NoError(t, err, "a gzip file of two members")
	assert.Equal(t, want.Len(), got.Len())
}
