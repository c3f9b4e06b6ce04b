package corpus

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// The conformance suite passes on every dataset of the package, each
// made again in a new folder every time the suite asks (a resumed job's
// corpus copied elsewhere): Tokens, sequential and Random; Megatron; Pack
// over documents in memory and over a Megatron corpus; and a Blend of two
// Megatron datasets. Each Other has New's Len and Schema, so that only
// its fingerprint refuses New's state: a token file of other tokens, a
// Megatron corpus with another Seed or of other tokens, another PadToken,
// the Blend's weights swapped.
func TestDatasetsConform(t *testing.T) {
	tokens := func(delta int, cfg TokenConfig) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			path, _ := writeTokens(t, 3000, 2)
			if delta != 0 {
				path = writeShiftedTokens(t, path)
			}
			d, err := Tokens(path, cfg)
			require.NoError(t, err)
			return d
		}
	}
	megatron := func(t testing.TB, delta int64, cfg MegatronConfig) *MegatronDataset {
		d, err := Megatron(megatronDocs(t, collate.Uint16, shiftedDocs(fpDocs(0)[:60], delta)), cfg)
		require.NoError(t, err)
		return d
	}
	closed := func(t testing.TB, d *MegatronDataset) *MegatronDataset {
		t.Cleanup(func() { d.Close() })
		return d
	}
	megatronCase := func(seed uint64) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset { return megatron(t, 0, MegatronConfig{SeqLength: 32, Seed: seed}) }
	}
	packSlice := func(pad int64) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			p, err := Pack(zipfDocs(5, 150, 120), PackConfig{SeqLen: 64, AddEOD: true, EOD: -1, PadToken: pad})
			require.NoError(t, err)
			return p
		}
	}
	packMegatron := func(delta int64) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			p, err := Pack(closed(t, megatron(t, delta, MegatronConfig{SeqLength: 8})), PackConfig{SeqLen: 128})
			require.NoError(t, err)
			return p
		}
	}
	blend := func(w ...float64) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			a := closed(t, megatron(t, 0, MegatronConfig{SeqLength: 32, Seed: 1}))
			b := closed(t, megatron(t, 1, MegatronConfig{SeqLength: 32, Seed: 2}))
			ds, err := engine.Blend(engine.BlendConfig{Weights: w, Size: 50}, a, b)
			require.NoError(t, err)
			return ds
		}
	}
	for _, tc := range []struct {
		name       string
		new, other func(testing.TB) engine.Dataset
	}{
		{"Tokens", tokens(0, TokenConfig{Context: 32}), tokens(1, TokenConfig{Context: 32})},
		{"TokensRandom", tokens(0, TokenConfig{Context: 32, Random: true, Sequences: 60}), tokens(1, TokenConfig{Context: 32, Random: true, Sequences: 60})},
		{"Megatron", megatronCase(1), megatronCase(2)},
		{"PackDocumentSlice", packSlice(0), packSlice(-2)},
		{"PackMegatron", packMegatron(0), packMegatron(1)},
		{"BlendMegatron", blend(0.7, 0.3), blend(0.3, 0.7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enginetest.TestDataset(t, enginetest.Case{New: tc.new, Other: tc.other})
		})
	}
}
