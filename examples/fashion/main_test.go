package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// short is the test's run: 2 epochs of the first 20000 images, a few
// seconds (about 20 under -race) on two cores.
var short = options{dir: DefaultDir, epochs: 2, workers: 2, batch: 64, hidden: 128, limit: 20000, lr: 0.02}

func TestTrainsOnFashionMNIST(t *testing.T) {
	if _, err := os.Stat(filepath.Join(DefaultDir, "train-images-idx3-ubyte.gz")); err != nil {
		t.Skipf("Fashion-MNIST is not installed (%v): apt-get install dataset-fashion-mnist, or run scripts/install-deps.sh", err)
	}
	var out bytes.Buffer
	res, err := train(context.Background(), short, &out)
	require.NoError(t, err)
	t.Log(out.String())
	require.Len(t, res.Loss, 2)
	assert.Less(t, res.Loss[1], res.Loss[0], "the loss falls")
	assert.Less(t, res.Loss[0], 2.0, "better than chance (ln 10 = 2.30)")
	assert.GreaterOrEqual(t, res.Accuracy, 0.80, "the short run reaches 0.83 (the full run, 0.87)")
}

func TestRunReportsAMissingDataset(t *testing.T) {
	err := run(context.Background(), []string{"-data", t.TempDir()}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "install Debian's dataset-fashion-mnist")
}
