package vision_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/filltest"
	"github.com/tensorbatch/tensorbatch/vision"
)

// An image folder says it writes every byte of a sample
// (engine.FullWriter, so the loader does not zero its buffers), and does,
// for every output, in both modes, and where a CenterCrop larger than the
// resized image pads: a sample filled over 0xA5 bytes is the same sample
// filled over zeros.
func TestDatasetWritesEveryByte(t *testing.T) {
	t.Parallel()
	root := folder(t)
	for _, tr := range []vision.Transform{
		vision.Train(40),
		{Train: true, Size: 40, Output: vision.BFloat16CHW, Mode: vision.Fast},
		vision.Eval(40),
		{Size: 40, ResizeSize: 24, Output: vision.Uint8HWC}, // padded on every side
		{Size: 40, ResizeSize: 32, Output: vision.Float16CHW, Mode: vision.Fast},
		{Size: 40, ResizeSize: 36, Output: vision.Uint8CHW},
	} {
		ds, err := vision.ImageFolder(root, tr)
		require.NoError(t, err)
		for i := range ds.Len() {
			assert.NoError(t, filltest.EveryByte(ds, 3, 1, i), "%+v", tr)
		}
		require.NoError(t, ds.Close())
	}
}
