package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// step is one delivered batch: its epoch, number, indices and bytes.
type step struct {
	Epoch, Number int
	Indices       []int
	Sum           [32]byte
}

func stepOf(b *engine.Batch) step {
	h := sha256.New()
	for _, f := range indexSchema {
		h.Write(b.Tensor(f.Name).Bytes())
	}
	var s step
	s.Epoch, s.Number, s.Indices = b.Epoch(), b.Number(), b.Indices()
	h.Sum(s.Sum[:0])
	return s
}

// run delivers the batches of epochs from..epochs-1, stopping after cut
// batches (cut < 0: never); it returns them and the State taken in the
// body of the last one.
func runSteps(t *testing.T, l *engine.Loader, from, epochs, cut int) ([]step, engine.State) {
	t.Helper()
	var steps []step
	var st engine.State
	for e := from; e < epochs; e++ {
		for b, err := range l.Epoch(context.Background(), e) {
			require.NoError(t, err)
			steps = append(steps, stepOf(b))
			st = l.State()
			if len(steps) == cut {
				return steps, st
			}
		}
	}
	return steps, l.State()
}

// roundTrip sends a State through JSON, as a checkpoint would.
func roundTrip(t *testing.T, st engine.State) *engine.State {
	t.Helper()
	data, err := json.Marshal(st)
	require.NoError(t, err)
	var back engine.State
	require.NoError(t, json.Unmarshal(data, &back))
	return &back
}

func TestResumeAtRandomCutsMatchesTheUninterruptedRun(t *testing.T) {
	const n, epochs = 53, 3
	ds := engine.DatasetFunc(n, indexSchema, fillIndex)
	for _, tc := range []struct {
		name string
		cfg  engine.Config
	}{
		{"shuffle", engine.Config{BatchSize: 4, Shuffle: true}},
		{"droplast", engine.Config{BatchSize: 5, Shuffle: true, DropLast: true}},
		{"sampler", engine.Config{BatchSize: 3, Sampler: engine.Shuffled{N: n, Seed: 9}}},
		{"batch sampler", engine.Config{BatchSampler: engine.Batched{Sampler: engine.Sequential{N: n}, Size: 6}}},
		{"restart workers", engine.Config{BatchSize: 4, Shuffle: true, RestartWorkers: true}},
		{"out of order", engine.Config{BatchSize: 4, Shuffle: true, OutOfOrder: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(3) {
				rng := rand.New(rand.NewPCG(seed, 11))
				cfg := tc.cfg
				cfg.Seed = seed
				want, _ := runSteps(t, newLoader(t, ds, cfg), 0, epochs, -1)
				if tc.cfg.OutOfOrder { // each batch is the same; the order may differ
					sortSteps(want)
				}
				for range 4 {
					cut := 1 + rng.IntN(len(want)-1)
					before, after := cfg, cfg
					before.Workers, before.PrefetchFactor = rng.IntN(5), rng.IntN(3)
					after.Workers, after.PrefetchFactor = rng.IntN(5), rng.IntN(3)
					first := newLoader(t, ds, before)
					got, st := runSteps(t, first, 0, epochs, cut)
					require.NoError(t, first.Close())
					after.Resume = roundTrip(t, st)
					second := newLoader(t, ds, after)
					assert.Equal(t, st, second.State(), "a resumed loader stands where the state was taken")
					rest, _ := runSteps(t, second, st.Epoch, epochs, -1)
					got = append(got, rest...)
					if tc.cfg.OutOfOrder {
						sortSteps(got)
					}
					require.Equal(t, want, got, "cut after %d batches, workers %d then %d, state %+v", cut, before.Workers, after.Workers, st)
				}
			}
		})
	}
}

func sortSteps(s []step) {
	slices.SortFunc(s, func(a, b step) int { return (a.Epoch-b.Epoch)*1000000 + a.Number - b.Number })
}

func TestStateAfterAnEpochIsTheNextEpoch(t *testing.T) {
	l := newLoader(t, engine.DatasetFunc(10, indexSchema, fillIndex), engine.Config{BatchSize: 4, Seed: 3})
	st := l.State()
	assert.Equal(t, 0, st.Epoch)
	assert.Zero(t, st.Position)
	runSteps(t, l, 0, 1, -1)
	st = l.State()
	assert.Equal(t, 1, st.Epoch)
	assert.Zero(t, st.Position)
	assert.Equal(t, 10, st.Len)
	assert.Equal(t, uint64(3), st.Seed)
	assert.Equal(t, 3, l.Len())
}

func TestResumeWithAnotherWorldSizeLosesNothing(t *testing.T) {
	clearLauncherEnv(t)
	const n = 61
	ds := engine.DatasetFunc(n, indexSchema, fillIndex)
	for _, tc := range []struct{ before, after, cut int }{{2, 3, 3}, {4, 1, 2}, {3, 2, 1}, {1, 4, 5}} {
		t.Run(fmt.Sprintf("%d to %d ranks after %d batches", tc.before, tc.after, tc.cut), func(t *testing.T) {
			cfg := engine.Config{BatchSize: 4, Shuffle: true, Seed: 8, ShardDropLast: true}
			seen := map[int]int{}
			var st engine.State
			for rank := range tc.before {
				c := cfg
				c.Rank, c.WorldSize = rank, tc.before
				steps, s := runSteps(t, newLoader(t, ds, c), 0, 1, tc.cut)
				for _, s := range steps {
					for _, i := range s.Indices {
						seen[i]++
					}
				}
				if rank == 0 {
					st = s
				} else {
					assert.Equal(t, st.Position, s.Position, "ranks in step save the same position")
				}
			}
			assert.Equal(t, tc.before*tc.cut*4, st.Position)
			for rank := range tc.after {
				c := cfg
				c.Rank, c.WorldSize, c.Resume = rank, tc.after, roundTrip(t, st)
				steps, _ := runSteps(t, newLoader(t, ds, c), 0, 1, -1)
				for _, s := range steps {
					for _, i := range s.Indices {
						seen[i]++
					}
				}
			}
			// ShardDropLast cuts the rest to a multiple of the new world size:
			// at most after-1 samples are left out, none is repeated.
			assert.GreaterOrEqual(t, len(seen), n-(tc.after-1))
			for i, c := range seen {
				assert.Equal(t, 1, c, "index %d loaded %d times", i, c)
			}
		})
	}
}

func TestResumeRefusesAnotherDatasetNamingTheMismatch(t *testing.T) {
	l := newLoader(t, engine.DatasetFunc(20, indexSchema, fillIndex), engine.Config{BatchSize: 4, Seed: 1})
	_, st := runSteps(t, l, 0, 1, 2)
	for _, tc := range []struct {
		ds   engine.Dataset
		cfg  engine.Config
		want string
	}{
		{engine.DatasetFunc(21, indexSchema, fillIndex), engine.Config{Seed: 1}, "engine: Config.Resume: Len: the state is of a dataset of 20 samples, this one has 21"},
		{engine.DatasetFunc(20, lenSchema, fillNothing), engine.Config{Seed: 1}, "engine: Config.Resume: Schema: the state is of a dataset of schema"},
		{engine.DatasetFunc(20, indexSchema, fillIndex), engine.Config{Seed: 2}, "engine: Config.Resume: Seed: the state was saved with Seed 1, this loader has 2"},
	} {
		tc.cfg.Resume = &st
		_, err := engine.New(tc.ds, tc.cfg)
		assert.ErrorContains(t, err, tc.want)
	}
}
