package vision_test

import (
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/vision"
)

// The Fashion-MNIST PNG folder made by scripts/make_fashion_png.py reads
// back through ImageFolder as the dataset's own pixels and labels.
func TestFashionPNGFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("scripts/make_fashion_png.py: slow; go test without -short runs it")
	}
	t.Parallel()
	const src = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
	if _, err := os.Stat(src); err != nil {
		t.Skip("dataset-fashion-mnist is not installed")
	}
	out := t.TempDir()
	script := filepath.Join("..", "scripts", "make_fashion_png.py")
	if b, err := exec.Command(pythonPeer, script, out, "--limit", "40").CombinedOutput(); err != nil {
		t.Skipf("%s: %v: %s", script, err, b)
	}
	ds, err := vision.ImageFolder(filepath.Join(out, "train"), vision.Transform{Size: 28, ResizeSize: 28, Output: vision.Uint8CHW})
	require.NoError(t, err)
	defer ds.Close()
	assert.Equal(t, []string{"Ankle boot", "Bag", "Coat", "Dress", "Pullover", "Sandal", "Shirt", "Sneaker", "T-shirt_top", "Trouser"}, ds.Classes())
	require.Equal(t, 40, ds.Len())

	f, err := os.Open(src)
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	raw, err := io.ReadAll(z)
	require.NoError(t, err)
	dst := make([]byte, 3*28*28)
	for _, s := range ds.Samples() {
		i, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(s.Path), ".png"))
		require.NoError(t, err)
		require.NoError(t, ds.Decode(s.Path, nil, dst))
		want := raw[16+i*784 : 16+(i+1)*784]
		assert.Equal(t, want, dst[:784], s.Path)
		assert.Equal(t, want, dst[2*784:], s.Path)
	}
}
