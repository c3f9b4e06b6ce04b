package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
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
	s.Epoch, s.Number, s.Indices = b.Epoch(), b.IndexInEpoch(), b.Indices()
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
	t.Parallel()
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
		{"batch sampler out of order", engine.Config{BatchSampler: engine.Batched{Sampler: engine.Shuffled{N: n, Seed: 5}, Size: 6}, OutOfOrder: true}},
		{"materialized batch sampler out of order", engine.Config{BatchSampler: listedBatches{engine.Batched{Sampler: engine.Shuffled{N: n, Seed: 5}, Size: 6}}, OutOfOrder: true}},
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

// listedBatches is a BatchSampler that only lists its batches (the
// loader cannot compute them one at a time).
type listedBatches struct{ b engine.Batched }

func (l listedBatches) Batches(epoch int) [][]int { return l.b.Batches(epoch) }

func sortSteps(s []step) {
	slices.SortFunc(s, func(a, b step) int { return (a.Epoch-b.Epoch)*1000000 + a.Number - b.Number })
}

func TestStateAfterAnEpochIsTheNextEpoch(t *testing.T) {
	t.Parallel()
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
			cfg := engine.Config{BatchSize: 4, Shuffle: true, Seed: 8, DropUneven: true}
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
			// DropUneven cuts the rest to a multiple of the new world size:
			// at most after-1 samples are left out, none is repeated.
			assert.GreaterOrEqual(t, len(seen), n-(tc.after-1))
			for i, c := range seen {
				assert.Equal(t, 1, c, "index %d loaded %d times", i, c)
			}
		})
	}
}

func TestResumeRefusesAnotherDatasetNamingTheMismatch(t *testing.T) {
	t.Parallel()
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

// savedState returns the State of a loader of n samples (BatchSize 4,
// Seed 1) taken after batches batches of epoch 0.
func savedState(t *testing.T, n, batches int) engine.State {
	t.Helper()
	_, st := runSteps(t, newLoader(t, engine.DatasetFunc(n, indexSchema, fillIndex), engine.Config{BatchSize: 4, Seed: 1}), 0, 1, batches)
	return st
}

func TestResumeRefusesInconsistentStatesNamingTheField(t *testing.T) {
	t.Parallel()
	const n = 100
	ds := engine.DatasetFunc(n, indexSchema, fillIndex)
	saved := savedState(t, n, 2)
	require.Equal(t, 8, saved.Position)
	for _, tc := range []struct {
		name string
		edit func(st *engine.State)
		want string
	}{
		{"position past the end", func(st *engine.State) { st.Position = n + 1 }, "engine: Config.Resume: Position: 101 is at or past the end of epoch 0, whose order has 100"},
		{"position at the end", func(st *engine.State) { st.Position = n }, "engine: Config.Resume: Position: 100 is at or past the end"},
		{"position 2^40", func(st *engine.State) { st.Position = 1 << 40 }, "engine: Config.Resume: Position: 1099511627776 is at or past the end"},
		{"negative position", func(st *engine.State) { st.Position = -4 }, "engine: Config.Resume: Position: -4, want >= 0"},
		{"negative epoch", func(st *engine.State) { st.Epoch = -1 }, "engine: Config.Resume: Epoch: -1, want >= 0"},
		{"negative batches", func(st *engine.State) { st.Batches = -2 }, "engine: Config.Resume: Batches: -2, want >= 0"},
		{"negative skipped", func(st *engine.State) { st.Skipped = -1 }, "engine: Config.Resume: Skipped: -1, want 0 to the dataset's 100 samples"},
		{"skipped past the dataset", func(st *engine.State) { st.Skipped = math.MaxInt }, "engine: Config.Resume: Skipped: 9223372036854775807, want 0 to the dataset's 100 samples"},
		{"batch size 0", func(st *engine.State) { st.BatchSize = 0 }, "engine: Config.Resume: BatchSize: 0, want > 0"},
		{"world size -1", func(st *engine.State) { st.WorldSize = -1 }, "engine: Config.Resume: WorldSize: -1, want > 0"},
		{"unknown source", func(st *engine.State) { st.Kind = "mmap" }, `engine: Config.Resume: Kind: "mmap", want "map" or "iterable"`},
		{"duplicate done", func(st *engine.State) { st.Done = []int{5, 5} }, "engine: Config.Resume: Done: entry 1 is batch 5 after batch 5: want increasing batch numbers, each once"},
		{"unsorted done", func(st *engine.State) { st.Done = []int{7, 5} }, "engine: Config.Resume: Done: entry 1 is batch 5 after batch 7"},
		{"done past the end", func(st *engine.State) { st.Done = []int{4, 25} }, "engine: Config.Resume: Done: entry 1 is batch 25, want one after the first batch not delivered (2) and before the end of the epoch (25)"},
		{"done the first not delivered", func(st *engine.State) { st.Done = []int{2} }, "engine: Config.Resume: Done: entry 0 is batch 2"},
		{"done negative", func(st *engine.State) { st.Done = []int{-3} }, "engine: Config.Resume: Done: entry 0 is batch -3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := *roundTrip(t, saved)
			tc.edit(&st)
			_, err := engine.New(ds, engine.Config{BatchSize: 4, Seed: 1, Resume: &st})
			assert.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("a state without a source (saved by an older version) resumes as before", func(t *testing.T) {
		var st engine.State
		require.NoError(t, json.Unmarshal([]byte(`{"epoch":0,"position":8,"batches":2,"seed":1,"len":100,"schema":"`+saved.Schema+`","batch_size":4,"world_size":1}`), &st))
		l := newLoader(t, ds, engine.Config{BatchSize: 4, Seed: 1, Resume: &st})
		numbers, err := untilError(l, 0)
		require.NoError(t, err)
		assert.Len(t, numbers, 23, "batches 2 to 24")
		assert.Equal(t, 2, numbers[0])
	})
	t.Run("valid done", func(t *testing.T) {
		st := *roundTrip(t, saved)
		st.Done = []int{4, 24}
		l := newLoader(t, ds, engine.Config{BatchSize: 4, Seed: 1, Resume: &st})
		numbers, err := untilError(l, 0)
		require.NoError(t, err)
		assert.Equal(t, []int{2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}, numbers)
	})
}

func TestResumeRefusesAStateOfTheOtherKindOfSource(t *testing.T) {
	clearLauncherEnv(t)
	const n = 29 // memStream(10, 7, 12)
	stream := func() engine.Dataset { return streamDataset(t, newMemStream(10, 7, 12), engine.IterableConfig{}) }
	mapped := func() engine.Dataset { return engine.DatasetFunc(n, indexSchema, fillIndex) }
	for _, tc := range []struct {
		name     string
		from, to func() engine.Dataset
		want     string
	}{
		{"stream to map", stream, mapped, `engine: Config.Resume: Kind: the state was saved from a "iterable" dataset, this one is a "map" dataset`},
		{"map to stream", mapped, stream, `engine: Config.Resume: Kind: the state was saved from a "map" dataset, this one is a "iterable" dataset`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cut := range []int{1, 3, 5} {
				cfg := engine.Config{BatchSize: 3, Seed: 5}
				_, st := runSteps(t, newLoader(t, tc.from(), cfg), 0, 1, cut)
				cfg.Resume = roundTrip(t, st)
				_, err := engine.New(tc.to(), cfg)
				assert.ErrorContains(t, err, tc.want, "cut after %d", cut)
			}
		})
	}
}

func TestResumeWithALongDoneListResumesExactlyTheRest(t *testing.T) {
	t.Parallel()
	// 10^5 batches done out of order: an O(batches × Done) resume would take
	// 10^10 steps; a linear one, a blink.
	const n, done = 200_001, 100_000
	schema := collate.Schema{{Name: "index", DType: collate.Int64}}
	ds := engine.DatasetFunc(n, schema, func(_ context.Context, s *engine.Slot) error {
		collate.As[int64](s.Tensor("index"))[0] = int64(s.Index())
		return nil
	})
	probe := newLoader(t, ds, engine.Config{Seed: 3})
	st := probe.State()
	for k := 1; k <= 2*done; k += 2 { // batch 0 is the gap; every odd batch was delivered
		st.Done = append(st.Done, k)
	}
	l := newLoader(t, ds, engine.Config{Seed: 3, Resume: roundTrip(t, st), Workers: 2})
	next := 0
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		require.Equal(t, next, b.IndexInEpoch())
		require.Equal(t, int64(next), collate.As[int64](b.Tensor("index"))[0])
		if next < 2*done {
			next += 2
		} else {
			next++
		}
	}
	assert.Equal(t, n, next, "every batch not in Done, once")
	assert.Equal(t, 1, l.State().Epoch)
}

func TestResumeWithAMillionDoneStartsAtOnce(t *testing.T) {
	t.Parallel()
	// Starting the epoch matches 2×10^6 batches against 10^6 Done entries:
	// 10^12 steps if each looked the list through (the test would hang),
	// a few million with one merge. No clock is read.
	const n, done = 2_000_001, 1_000_000
	schema := collate.Schema{{Name: "index", DType: collate.Int64}}
	ds := engine.DatasetFunc(n, schema, func(_ context.Context, s *engine.Slot) error {
		collate.As[int64](s.Tensor("index"))[0] = int64(s.Index())
		return nil
	})
	st := newLoader(t, ds, engine.Config{}).State()
	for k := 1; k <= 2*done; k += 2 {
		st.Done = append(st.Done, k)
	}
	l := newLoader(t, ds, engine.Config{Resume: &st})
	var numbers []int
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		numbers = append(numbers, b.IndexInEpoch())
		if len(numbers) == 3 {
			break
		}
	}
	assert.Equal(t, []int{0, 2, 4}, numbers)
}

func TestResumedLoaderRefusesEarlierEpochs(t *testing.T) {
	t.Parallel()
	const n = 40
	ds := engine.DatasetFunc(n, indexSchema, fillIndex)
	cfg := engine.Config{BatchSize: 4, Seed: 2, Shuffle: true}
	want, _ := runSteps(t, newLoader(t, ds, cfg), 0, 4, -1) // 10 batches an epoch
	first := newLoader(t, ds, cfg)
	_, st := runSteps(t, first, 0, 4, 23) // epoch 2, after 3 batches
	require.NoError(t, first.Close())
	require.Equal(t, 2, st.Epoch)
	for _, workers := range []int{0, 3} {
		t.Run(fmt.Sprint("workers ", workers), func(t *testing.T) {
			c := cfg
			c.Workers, c.Resume = workers, roundTrip(t, st)
			l := newLoader(t, ds, c)
			var got []step
			for epoch := range 4 { // the naive loop
				for b, err := range l.Epoch(context.Background(), epoch) {
					if epoch < st.Epoch {
						require.Error(t, err, "epoch %d", epoch)
						assert.ErrorContains(t, err, fmt.Sprintf("Epoch(%d) before epoch 2 of Config.Resume", epoch))
						assert.Equal(t, st, l.State(), "a refused epoch leaves the saved position")
						break
					}
					require.NoError(t, err)
					got = append(got, stepOf(b))
				}
			}
			assert.Equal(t, want[23:], got, "the rest of epoch 2, then all of epoch 3")
		})
	}
	t.Run("a later epoch first starts fresh", func(t *testing.T) {
		c := cfg
		c.Resume = roundTrip(t, st)
		l := newLoader(t, ds, c)
		got, _ := runSteps(t, l, 3, 4, -1)
		assert.Equal(t, want[30:], got)
	})
}

// FuzzState hands arbitrary JSON to Config.Resume: New either refuses it
// with an error naming Config.Resume, or the first epoch delivers exactly
// the rest of the epoch the state names.
func FuzzState(f *testing.F) {
	const n, size = 23, 4
	ds := engine.DatasetFunc(n, indexSchema, fillIndex)
	cfg := engine.Config{BatchSize: size, Seed: 7}
	l, err := engine.New(ds, cfg)
	require.NoError(f, err)
	for epoch := range 2 {
		for range l.Epoch(context.Background(), epoch) {
			data, err := json.Marshal(l.State())
			require.NoError(f, err)
			f.Add(data)
		}
	}
	st := l.State()
	require.NoError(f, l.Close())
	st.Epoch, st.Position, st.Batches, st.Done = 0, 4, 1, []int{3, 5}
	data, _ := json.Marshal(st)
	f.Add(data)
	f.Add([]byte(`{"source":"map","epoch":0,"position":101,"seed":7,"len":23,"batch_size":4,"world_size":1}`))
	f.Add([]byte(`{"epoch":1,"position":-1,"done":[1,1,-1]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var st engine.State
		if json.Unmarshal(data, &st) != nil {
			return
		}
		c := cfg
		c.Resume = &st
		l, err := engine.New(ds, c)
		if err != nil {
			require.ErrorContains(t, err, "engine: Config.Resume: ")
			return
		}
		defer l.Close()
		done := map[int]bool{}
		for _, k := range st.Done {
			done[k] = true
		}
		var want [][]int
		for k, start := st.Position/size, st.Position; start < n; k, start = k+1, start+size {
			if !done[k] {
				want = append(want, seq(n)[start:min(start+size, n)])
			}
		}
		var got [][]int
		for b, err := range l.Epoch(context.Background(), st.Epoch) {
			require.NoError(t, err)
			got = append(got, b.Indices())
			for i, v := range collate.As[int64](b.Tensor("index")) {
				require.Equal(t, int64(b.Indices()[i]), v)
			}
		}
		require.Equal(t, want, got, "state %+v", st)
	})
}

// A state carries its dataset's and order's fingerprint: New refuses it
// for another dataset or order of the same length, schema and seed,
// naming what differs, and Config.ResumeChanged resumes it anyway with a
// warning. A state without one (saved before) resumes as it always did.
func TestResumeRefusesAnotherDatasetOrOrder(t *testing.T) {
	tensors := func(offset int64) engine.Dataset {
		idx := make([]int64, 40)
		for i := range idx {
			idx[i] = int64(i) + offset
		}
		tt, err := collate.FromSlice(idx)
		require.NoError(t, err)
		xs, err := collate.FromSlice(make([]float32, 40*60), 40, 3, 4, 5)
		require.NoError(t, err)
		ds, err := engine.Tensors([]string{"index", "x"}, tt, xs)
		require.NoError(t, err)
		return ds
	}
	a, b := tensors(0), tensors(100)
	concat := func(ds ...engine.Dataset) engine.Dataset {
		c, err := engine.Concat(ds...)
		require.NoError(t, err)
		return c
	}
	subset := func(ds engine.Dataset, idx ...int) engine.Dataset {
		s, err := engine.Subset(ds, idx)
		require.NoError(t, err)
		return s
	}
	shuffled := engine.Config{BatchSize: 4, Shuffle: true, Seed: 3}
	for _, tc := range []struct {
		name       string
		saved, now engine.Dataset
		cfg, cfg2  engine.Config
		differs    string
	}{
		{"tensors with other data", a, b, shuffled, shuffled, "dataset.tensors.index"},
		{"concat in another order", concat(a, b), concat(b, a), shuffled, shuffled, "dataset.concat.0.tensors.index"},
		{"subset of other indices", subset(a, 0, 1, 2, 3, 4, 5, 6, 7), subset(a, 7, 6, 5, 4, 3, 2, 1, 0), shuffled, shuffled, "dataset.subset.indices"},
		{"shuffled → sequential", a, a, shuffled, engine.Config{BatchSize: 4, Seed: 3}, `order: "shuffled v2" in the state, now "sequential"`},
		{"another sampler seed", a, a, engine.Config{BatchSize: 4, Sampler: engine.Shuffled{N: 40, Seed: 1}}, engine.Config{BatchSize: 4, Sampler: engine.Shuffled{N: 40, Seed: 2}}, "order.seed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoader(t, tc.saved, tc.cfg)
			_, st := runSteps(t, l, 0, 1, 3)
			require.NotEmpty(t, st.Dataset)
			cfg := tc.cfg2
			cfg.Resume = roundTrip(t, st)
			_, err := engine.New(tc.now, cfg)
			require.Error(t, err)
			assert.ErrorContains(t, err, "Config.Resume: Dataset")
			assert.ErrorContains(t, err, tc.differs)
			assert.ErrorContains(t, err, "Config.ResumeChanged")

			log := captureLog(t)
			cfg.ResumeChanged = true
			l2 := newLoader(t, tc.now, cfg)
			assert.Contains(t, log.String(), "Config.ResumeChanged")
			_, _ = runSteps(t, l2, st.Epoch, st.Epoch+1, -1)

			same := tc.cfg
			same.Resume = roundTrip(t, st)
			newLoader(t, tc.saved, same) // the same dataset resumes

			old := roundTrip(t, st)
			old.Dataset = nil // saved before fingerprints
			cfg.ResumeChanged, cfg.Resume = false, old
			_, err = engine.New(tc.now, cfg)
			if _, ok := cfg.Sampler.(engine.Shuffled); (cfg.Shuffle || ok) && old.Position > 0 { // a few samples shuffled: their permutations changed since
				assert.ErrorContains(t, err, "resume from the start of epoch")
			} else {
				assert.NoError(t, err)
				assert.Contains(t, log.String(), "Config.Resume has no dataset fingerprint", "resumed unchecked, and said so")
			}
		})
	}
}

// A state saved while State.Kind was named Source (JSON "source") reads
// as its Kind.
func TestStateReadsTheOldSourceKey(t *testing.T) {
	t.Parallel()
	var st engine.State
	require.NoError(t, json.Unmarshal([]byte(`{"source":"iterable","epoch":2,"position":8}`), &st))
	assert.Equal(t, engine.State{Kind: engine.KindIterable, Epoch: 2, Position: 8}, st)
	require.NoError(t, json.Unmarshal([]byte(`{"kind":"map","source":"iterable"}`), &st))
	assert.Equal(t, engine.KindMap, st.Kind)
	data, err := json.Marshal(engine.State{Kind: engine.KindMap})
	require.NoError(t, err)
	assert.Contains(t, string(data), `"kind":"map"`)
	assert.NotContains(t, string(data), `"source"`)
}

// A state resumes with another BatchSize (documented on State): the
// epoch goes on at the same sample of its order, in batches of the new
// size, nothing repeated or lost; the first batch's IndexInEpoch is the
// Position over the new unit, rounded down.
func TestResumeWithAnotherBatchSize(t *testing.T) {
	ds := engine.DatasetFunc(40, indexSchema, fillIndex)
	order := engine.Shuffled{N: 40, Seed: 3}.Order(0)
	for _, size := range []int{6, 5, 2} {
		l := newLoader(t, ds, engine.Config{BatchSize: 4, Shuffle: true, Seed: 3})
		_, st := runSteps(t, l, 0, 1, 3) // 12 samples
		require.Equal(t, 12, st.Position)
		l2 := newLoader(t, ds, engine.Config{BatchSize: size, Shuffle: true, Seed: 3, Resume: roundTrip(t, st)})
		var got []int
		first := -1
		for b, err := range l2.Epoch(context.Background(), 0) {
			require.NoError(t, err)
			if first < 0 {
				first = b.IndexInEpoch()
			}
			assert.LessOrEqual(t, b.Len(), size)
			got = append(got, b.Indices()...)
		}
		assert.Equal(t, order[12:], got, "BatchSize %d", size)
		assert.Equal(t, 12/size, first, "BatchSize %d", size)
	}
}

// A resumed epoch skips failing samples against the epoch's budget, as
// the uninterrupted one: the samples skipped before the state count
// (State.Skipped), and a SkipFraction is of the whole epoch, not of
// what is left of it.
func TestResumeKeepsTheSkipBudget(t *testing.T) {
	t.Parallel()
	const n = 10
	failing := func(bad ...int) engine.Dataset {
		return engine.DatasetFunc(n, indexSchema, func(ctx context.Context, s *engine.Slot) error {
			if slices.Contains(bad, s.Index()) {
				return fmt.Errorf("sample %d is bad", s.Index())
			}
			return fillIndex(ctx, s)
		})
	}
	// run delivers epoch 0 from st (nil: its start), stopping after cut
	// batches (-1: never); it returns the batches' indices, the state
	// after the last and the epoch's error.
	run := func(ds engine.Dataset, policy engine.ErrorPolicy, st *engine.State, cut int) (got [][]int, last engine.State, err error) {
		l, err := engine.New(ds, engine.Config{BatchSize: 2, Seed: 1, Backend: "cpu", OnError: policy, Resume: st})
		require.NoError(t, err)
		defer l.Close()
		for b, e := range l.Epoch(context.Background(), 0) {
			if e != nil {
				return got, last, e
			}
			got, last = append(got, b.Indices()), l.State()
			if len(got) == cut {
				break
			}
		}
		return got, last, nil
	}
	for _, tc := range []struct {
		name    string
		ds      engine.Dataset
		policy  engine.ErrorPolicy
		cut     int
		skipped int    // in the state at the cut
		fails   string // the uninterrupted epoch's error, "" for none
	}{
		{"Skip 1, a second failure after the cut", failing(2, 7), engine.ErrorPolicy{Skip: 1}, 2, 1, "more than 1 samples failed"},
		{"SkipFraction 0.2 of 10, a failure after the cut", failing(9), engine.ErrorPolicy{SkipFraction: 0.2}, 3, 0, ""},
		{"SkipFraction 0.2 of 10, one before and one after", failing(1, 9), engine.ErrorPolicy{SkipFraction: 0.2}, 3, 1, ""},
		{"SkipFraction 0.1 of 10, one before and one after", failing(1, 9), engine.ErrorPolicy{SkipFraction: 0.1}, 3, 1, "more than 1 samples failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole, _, werr := run(tc.ds, tc.policy, nil, -1)
			if tc.fails == "" {
				require.NoError(t, werr)
			} else {
				require.ErrorContains(t, werr, tc.fails)
			}
			head, st, err := run(tc.ds, tc.policy, nil, tc.cut)
			require.NoError(t, err)
			require.Len(t, head, tc.cut)
			assert.Equal(t, tc.skipped, st.Skipped, "State.Skipped at the cut")
			tail, _, rerr := run(tc.ds, tc.policy, roundTrip(t, st), -1)
			if tc.skipped > 0 && tc.fails == "" { // the ranks of a job save the same state: no rank's own count in it
				skipped := int64(0)
				for rank := range 2 {
					l, err := engine.New(tc.ds, engine.Config{BatchSize: 2, Seed: 1, Backend: "cpu", OnError: tc.policy, WorldSize: 2, Rank: rank})
					require.NoError(t, err)
					for _, err := range l.Epoch(context.Background(), 0) {
						if err != nil {
							break
						}
						assert.Zero(t, l.State().Skipped, "WorldSize 2")
						skipped += l.Stats().Skipped
					}
					l.Close()
				}
				assert.Positive(t, skipped, "a rank skipped a sample, which its state leaves out")
			}
			assert.Equal(t, whole, append(head, tail...), "the batches, cut and resumed, are the uninterrupted run's")
			if tc.fails == "" {
				assert.NoError(t, rerr)
			} else {
				assert.ErrorContains(t, rerr, tc.fails, "the resumed epoch fails where the uninterrupted one did")
			}
		})
	}
}
