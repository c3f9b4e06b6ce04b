package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// short is the test's run: 2 epochs of the first 20000 images, a
// fifteenth of the samples of the full run (10 epochs of 60000).
var short = options{dir: DefaultDir, epochs: 2, workers: 2, batch: 64, hidden: 128, limit: 20000, lr: 0.02}

func TestTrainsOnFashionMNIST(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	err := run(context.Background(), []string{"-data", t.TempDir()}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "install Debian's dataset-fashion-mnist")
}

// TestDefaultRunMatchesTheREADME runs the example as `go run
// ./examples/fashion` does, every flag at its default (10 epochs of the
// 60,000 training images), and checks that the README states the test
// accuracy it gives. The run is deterministic: the loader's batches are
// the same for any Workers and the training loop is sequential. The
// figure is amd64's, where gonum's float32 kernels are assembly; another
// architecture may fuse multiply-adds and round differently.
func TestDefaultRunMatchesTheREADME(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the full training run: slow; go test without -short runs it")
	}
	if race {
		t.Skip("the full training run takes minutes under -race; TestTrainsOnFashionMNIST runs a short one")
	}
	if _, err := os.Stat(filepath.Join(DefaultDir, "train-images-idx3-ubyte.gz")); err != nil {
		t.Skipf("Fashion-MNIST is not installed (%v): apt-get install dataset-fashion-mnist, or run scripts/install-deps.sh", err)
	}
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), nil, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var acc float64
	_, err := fmt.Sscanf(lines[len(lines)-1], "test accuracy %f", &acc)
	require.NoError(t, err, "the run's last line: %q", lines[len(lines)-1])
	assert.GreaterOrEqual(t, acc, 0.85, "the full run")
	if runtime.GOARCH != "amd64" {
		t.Skipf("the README's figure is amd64's; this %s run gave %.4f", runtime.GOARCH, acc)
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	assert.Contains(t, string(readme), fmt.Sprintf("%.4f test accuracy", acc), "the README states the accuracy the default run gives")
}
