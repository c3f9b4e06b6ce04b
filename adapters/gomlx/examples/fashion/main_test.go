package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	tbsets "github.com/tensorbatch/tensorbatch/datasets"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func needData(t *testing.T) {
	t.Helper()
	if err := missing(); err != nil {
		t.Skipf("Fashion-MNIST is not installed (%v): apt-get install dataset-fashion-mnist, or run scripts/install-deps.sh", err)
	}
}

// short is the short run: 300 steps of a 32-unit MLP, about 8 s on two
// cores.
var short = options{dir: tbsets.FashionMNISTDir, steps: 300, workers: 2, batch: 64, hidden: 32, lr: 3e-3,
	config: "ops_sequential"}

func TestTrainsOnFashionMNIST(t *testing.T) {
	needData(t)
	if race {
		t.Skip("the race detector slows simplego's kernels about 50×; make test-adapters runs this test without it (TestTrainsUnderTheRaceDetector covers the race run)")
	}
	var out bytes.Buffer
	res, err := trainMLP(context.Background(), short, &out)
	require.NoError(t, err)
	t.Logf("%d steps in %v: test accuracy %.4f", res.Steps, res.Took, res.Accuracy)
	assert.Equal(t, 300, res.Steps)
	assert.GreaterOrEqual(t, res.Accuracy, 0.80, "the short run reaches 0.82")
}

// TestTrainsUnderTheRaceDetector is a few steps of a tiny MLP: under -race
// it checks the loader, the adapter and GoMLX's loop together.
func TestTrainsUnderTheRaceDetector(t *testing.T) {
	needData(t)
	o := short
	o.steps, o.hidden, o.batch, o.limit, o.testLim = 5, 8, 16, 1000, 500
	res, err := trainMLP(context.Background(), o, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 5, res.Steps)
	assert.InDelta(t, 0.5, res.Accuracy, 0.5, "an accuracy")
}

func TestRunsWholeEpochs(t *testing.T) {
	needData(t)
	var out bytes.Buffer
	err := run(context.Background(), []string{"-epochs", "2", "-limit", "640", "-batch", "64", "-hidden", "8", "-test-limit", "500"}, &out)
	require.NoError(t, err)
	assert.Regexp(t, `(?s)epoch 0: 10 steps, loss [0-9.]+\nepoch 1: 20 steps, loss [0-9.]+\n20 steps in [0-9.]+ s; test accuracy 0\.[0-9]{4}\n$`, out.String())
}

func TestRunReportsAMissingDataset(t *testing.T) {
	err := run(context.Background(), []string{"-data", t.TempDir()}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "install Debian's dataset-fashion-mnist")
}
