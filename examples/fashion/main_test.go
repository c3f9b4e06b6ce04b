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

func TestTrainsOnFashionMNIST(t *testing.T) {
	if _, err := os.Stat(filepath.Join(DefaultDir, "train-images-idx3-ubyte.gz")); err != nil {
		t.Skipf("Fashion-MNIST is not installed (%v): apt-get install dataset-fashion-mnist, or run scripts/install-deps.sh", err)
	}
	var out bytes.Buffer
	res, err := train(context.Background(), DefaultDir, 2, 2, 64, 12000, 0.1, &out)
	require.NoError(t, err)
	t.Log(out.String())
	require.Len(t, res.Loss, 2)
	assert.Less(t, res.Loss[1], res.Loss[0], "the loss falls")
	assert.Less(t, res.Loss[0], 2.0, "better than chance (ln 10 = 2.30)")
	assert.Greater(t, res.Accuracy, 0.70, "softmax regression reaches about 0.8 on Fashion-MNIST")
}

func TestRunReportsAMissingDataset(t *testing.T) {
	err := run(context.Background(), []string{"-data", t.TempDir()}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "install Debian's dataset-fashion-mnist")
}
