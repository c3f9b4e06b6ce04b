package corpus

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// blendRows returns the bytes of every field of every batch of epoch.
func blendRows(t *testing.T, ds engine.Dataset, cfg engine.Config, epoch int) []byte {
	t.Helper()
	l, err := engine.New(ds, cfg)
	require.NoError(t, err)
	defer l.Close()
	var out []byte
	for b, err := range l.Epoch(context.Background(), epoch) {
		require.NoError(t, err)
		for _, f := range ds.Schema() {
			out = append(out, b.Tensor(f.Name).Bytes()...)
		}
	}
	return out
}
