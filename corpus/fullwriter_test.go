package corpus

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/filltest"
)

// Each dataset here says it writes every byte of a sample
// (engine.FullWriter, so the loader does not zero its buffers), and does:
// a sample filled over 0xA5 bytes is the same sample filled over zeros.
// The loader's own tests check that such a dataset's buffers are not
// zeroed; the other tests of each dataset compare whole epochs, in reused
// buffers, with what they should hold.
func TestDatasetsWriteEveryByte(t *testing.T) {
	t.Parallel()
	docs := make([][]int64, 60)
	for i := range docs {
		docs[i] = make([]int64, 1+(i*37)%150)
		for j := range docs[i] {
			docs[i][j] = int64(1 + i*1000 + j)
		}
	}
	prefix := megatronDocs(t, collate.Uint16, docs)
	megatron := func(cfg MegatronConfig) engine.Dataset {
		d, err := Megatron(prefix, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	path, _ := writeTokens(t, 5000, 2)
	tokens := func(cfg TokenConfig) engine.Dataset {
		d, err := Tokens(path, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	pack := func(cfg PackConfig) engine.Dataset {
		p, err := Pack(DocumentSlice(docs), cfg)
		require.NoError(t, err)
		return p
	}
	blend, err := engine.Blend(engine.BlendConfig{Weights: []float64{0.6, 0.4}, Size: 80},
		megatron(MegatronConfig{SeqLength: 33, Seed: 1}), megatron(MegatronConfig{SeqLength: 33, Seed: 2}))
	require.NoError(t, err)
	for name, ds := range map[string]engine.Dataset{
		"Megatron":                megatron(MegatronConfig{SeqLength: 33, Seed: 1}),
		"Megatron Out Int64":      megatron(MegatronConfig{SeqLength: 33, Seed: 1, Out: collate.Int64}),
		"Tokens":                  tokens(TokenConfig{Context: 33, DType: collate.Uint16}),
		"Tokens Random Out Int32": tokens(TokenConfig{Context: 33, DType: collate.Uint16, Out: collate.Int32, Random: true}),
		"Pack":                    pack(PackConfig{SeqLen: 64, PadToken: -1}),
		"Pack AddEOD DropLong":    pack(PackConfig{SeqLen: 64, AddEOD: true, EOD: 7, Long: DropLong}),
		"Blend":                   blend,
	} {
		for _, i := range []int{0, ds.Len() / 2, ds.Len() - 1} {
			assert.NoError(t, filltest.EveryByte(ds, 1, 2, i), name)
		}
	}
	plain, err := engine.Blend(engine.BlendConfig{Weights: []float64{1, 1}, Size: 10}, zeroFill(4), zeroFill(4))
	require.NoError(t, err)
	assert.False(t, plain.(engine.FullWriter).WritesEveryByte(), "a blend of datasets that may not")
}

// zeroFill is a dataset of n samples of the Megatron schema that writes
// nothing, and does not say it writes every byte.
func zeroFill(n int) engine.Dataset {
	return engine.DatasetFunc(n, collate.Schema{{Name: "tokens", DType: collate.Int32, Shape: []int{34}}}, func(context.Context, *engine.Slot) error { return nil })
}
