package engine_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// TestRealGPUSmoke runs the loader on a real CUDA or HIP device and checks
// every device byte against the host batch. It runs only when asked for
// (TB_REAL_GPU=cuda or hip, as scripts/gpu-run.sh does), in a process that
// has not selected the fake runtime.
func TestRealGPUSmoke(t *testing.T) {
	kind := os.Getenv("TB_REAL_GPU")
	if kind == "" {
		t.Skip("set TB_REAL_GPU=cuda or hip to run on a real GPU (scripts/gpu-run.sh)")
	}
	require.Empty(t, os.Getenv(pinned.EnvCUDALib), "a real-GPU run must not force a library")
	l, err := engine.New(engine.DatasetFunc(256, indexSchema, fillIndex), engine.Config{BatchSize: 32, Workers: 4, Backend: kind})
	require.NoError(t, err)
	defer l.Close()
	t.Logf("backend %s: %s", l.Backend().Backend.Name(), l.Backend().Reason)
	rt := l.Backend().Backend.(*pinned.GPU).Runtime()
	n := 0
	for epoch := range 2 {
		for b, err := range l.Epoch(context.Background(), epoch) {
			require.NoError(t, err)
			require.NoError(t, b.WaitDevice())
			for _, f := range indexSchema {
				dt := b.DeviceTensor(f.Name)
				back := make([]byte, dt.Bytes)
				require.NoError(t, rt.CopyToHost(back, csrc.DevicePtr(dt.Ptr)))
				assert.True(t, bytes.Equal(b.Tensor(f.Name).Bytes(), back), "batch %d field %s", b.IndexInEpoch(), f.Name)
			}
			n++
		}
	}
	assert.Equal(t, 16, n)
	st := l.Stats()
	t.Logf("bytes to device %d, host pool %+v, device pool %+v", st.BytesToDevice, st.Pool, st.DevicePool)
	require.NoError(t, l.Close())
	assert.Zero(t, l.Stats().Pool.Allocated)
	assert.Zero(t, l.Stats().DevicePool.Allocated)
}
