package main

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A short run from the shards: the loss falls epoch by epoch from about
// chance (ln 3), and the held-out shard is classified far above chance.
func TestTrainsFromShards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	res, err := train(context.Background(), options{dir: dir, shards: 3, perShard: 40, size: 12, epochs: 4, workers: 2, batch: 16, lr: 0.01}, &out)
	require.NoError(t, err)
	t.Log(out.String())
	shards, _ := filepath.Glob(filepath.Join(dir, "shard-*.tar"))
	assert.Len(t, shards, 4, "3 training shards and a validation one")
	require.Len(t, res.Loss, 4)
	assert.Less(t, res.Loss[0], math.Log(3)+0.2, "the first epoch starts near chance")
	for e := 1; e < len(res.Loss); e++ {
		assert.Less(t, res.Loss[e], res.Loss[e-1], "the loss falls every epoch")
	}
	assert.Less(t, res.Loss[3], 0.8)
	t.Logf("validation accuracy %.3f", res.Accuracy)
	assert.GreaterOrEqual(t, res.Accuracy, 0.8, "chance is 1/3")
}

func TestRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-epochs", "1", "-shards", "1", "-per-shard", "8"}, &out))
	assert.Contains(t, out.String(), "epoch 0: loss")
	assert.Contains(t, out.String(), "validation accuracy")
	assert.Error(t, run(context.Background(), []string{"-epochs", "0"}, &out))
}
