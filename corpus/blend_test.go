package corpus

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// Megatron corpora blended: each sample is the one its dataset's loader
// gives at the same epoch, through a loader with workers, epoch by epoch.
func TestBlendMegatron(t *testing.T) {
	t.Parallel()
	open := func(dt collate.DType, docs [][]int64, seed uint64) *MegatronDataset {
		d, err := Megatron(megatronDocs(t, dt, docs), MegatronConfig{SeqLength: 4, Seed: seed, Out: collate.Int64})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	a := open(collate.Uint16, knownDocs(), 1)
	other := knownDocs()
	for _, doc := range other {
		for j := range doc {
			doc[j] += 20000
		}
	}
	c := open(collate.Int32, other, 2)
	b, err := engine.Blend(engine.BlendConfig{Weights: []float64{0.25, 0.75}, Size: 100}, a, c)
	require.NoError(t, err)
	for _, epoch := range []int{0, 1} {
		rowsA, _ := megatronRows(t, a, engine.Config{BatchSize: 4}, epoch)
		rowsC, _ := megatronRows(t, c, engine.Config{BatchSize: 4}, epoch)
		l, err := engine.New(b, engine.Config{BatchSize: 6, Workers: 3, WorldSize: 1, Backend: "cpu"})
		require.NoError(t, err)
		for batch, err := range l.Epoch(context.Background(), epoch) {
			require.NoError(t, err)
			tokens := collate.As[int64](batch.Tensor("tokens"))
			for r, i := range batch.Indices() {
				k, j := b.(interface{ Locate(int) (int, int) }).Locate(i)
				want := [][][]int64{rowsA, rowsC}[k][j]
				assert.Equal(t, want, tokens[r*5:(r+1)*5], "epoch %d, sample %d", epoch, i)
			}
		}
		require.NoError(t, l.Close())
	}
}
