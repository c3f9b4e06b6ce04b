package engine_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// syncBuffer is a bytes.Buffer safe for the goroutines that log.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// captureLog sends slog's default logger to a buffer until the test ends.
func captureLog(t *testing.T) *syncBuffer {
	t.Helper()
	var buf syncBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}

// lenDataset is a Dataset whose Len is whatever it is told.
type lenDataset struct{ n int }

func (d lenDataset) Len() int                                     { return d.n }
func (lenDataset) Schema() collate.Schema                         { return indexSchema }
func (lenDataset) Fill(ctx context.Context, s *engine.Slot) error { return fillIndex(ctx, s) }

// nilDataset is a pointer type implementing Dataset, as *vision.Dataset.
type nilDataset struct{ n int }

func (d *nilDataset) Len() int                                     { return d.n }
func (*nilDataset) Schema() collate.Schema                         { return indexSchema }
func (*nilDataset) Fill(ctx context.Context, s *engine.Slot) error { return fillIndex(ctx, s) }

func TestConstructorsRefuseBadInput(t *testing.T) {
	t.Parallel()
	var nilStream *engine.IterableDataset
	var nilPtr *nilDataset
	good := engine.DatasetFunc(10, indexSchema, fillIndex)
	newErr := func(ds engine.Dataset, cfg engine.Config) error {
		l, err := engine.New(ds, cfg)
		if err == nil {
			l.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"New typed-nil IterableDataset", func() error { return newErr(nilStream, engine.Config{}) }, "engine: New: dataset is a nil *engine.IterableDataset"},
		{"New typed-nil pointer dataset", func() error { return newErr(nilPtr, engine.Config{}) }, "engine: New: dataset is a nil *engine_test.nilDataset"},
		{"New nil fill", func() error { return newErr(engine.DatasetFunc(3, indexSchema, nil), engine.Config{}) }, "engine: New: dataset: DatasetFunc: fill is nil"},
		{"New nil Sampler", func() error { return newErr(good, engine.Config{Sampler: (*engine.Shuffled)(nil)}) }, "engine: Config.Sampler: a nil *engine.Shuffled"},
		{"New nil BatchSampler", func() error { return newErr(good, engine.Config{BatchSampler: (*engine.Batched)(nil)}) }, "engine: Config.BatchSampler: a nil *engine.Batched"},
		{"New nil WorkerInit", func() error { return newErr(good, engine.Config{WorkerInit: engine.WorkerInitFunc(nil)}) }, "engine: Config.WorkerInit: a nil engine.WorkerInitFunc"},
		{"New negative Sequential", func() error { return newErr(good, engine.Config{Sampler: engine.Sequential{N: -1}}) }, "engine: Config.Sampler: engine: Sequential: N is -1"},
		{"New Batched size 0", func() error {
			return newErr(good, engine.Config{BatchSampler: engine.Batched{Sampler: engine.Sequential{N: 10}}})
		}, "engine: Config.BatchSampler: engine: Batched: Size is 0, want > 0"},
		{"New Batched nil sampler", func() error { return newErr(good, engine.Config{BatchSampler: engine.Batched{Size: 2}}) }, "engine: Config.BatchSampler: engine: Batched: Sampler is nil"},
		{"RandomSplit Len -1", func() error { _, err := engine.RandomSplit(lenDataset{-1}, 1, 0.5, 0.5); return err }, "engine: RandomSplit: engine: Dataset.Len is -1, want >= 0"},
		{"RandomSplit typed nil", func() error { _, err := engine.RandomSplit(nilPtr, 1, 1); return err }, "engine: RandomSplit: dataset is a nil *engine_test.nilDataset"},
		{"RandomSplit NaN", func() error { _, err := engine.RandomSplit(good, 1, math.NaN(), 1); return err }, "size 0 is NaN"},
		{"RandomSplit -Inf", func() error { _, err := engine.RandomSplit(good, 1, math.Inf(-1)); return err }, "size 0 is -Inf"},
		{"Subset Len -1", func() error { _, err := engine.Subset(lenDataset{-1}, nil); return err }, "engine: Subset: engine: Dataset.Len is -1"},
		{"Subset typed nil", func() error { _, err := engine.Subset(nilStream, []int{0}); return err }, "engine: Subset: dataset is a nil *engine.IterableDataset"},
		{"Subset nil fill", func() error { _, err := engine.Subset(engine.DatasetFunc(3, indexSchema, nil), []int{0}); return err }, "engine: Subset: dataset: DatasetFunc: fill is nil"},
		{"Concat typed nil", func() error { _, err := engine.Concat(good, nilPtr); return err }, "engine: Concat: dataset 1: dataset is a nil *engine_test.nilDataset"},
		{"Concat Len -1", func() error { _, err := engine.Concat(good, lenDataset{-1}); return err }, "engine: Concat: dataset 1: engine: Dataset.Len is -1"},
		{"FromIterable typed nil", func() error {
			_, err := engine.FromIterable(context.Background(), (*memStream)(nil), engine.IterableConfig{})
			return err
		}, "engine: FromIterable: the Iterable is nil (*engine_test.memStream)"},
		{"WeightedRandom NaN", func() error {
			return newErr(good, engine.Config{Sampler: engine.WeightedRandom{Weights: []float64{1, math.NaN()}}})
		}, "weight 1 is NaN"},
		{"WeightedRandom negative", func() error {
			return newErr(good, engine.Config{Sampler: engine.WeightedRandom{Weights: []float64{1, -1}}})
		}, "weight 1 is -1"},
		{"WeightedRandom Inf", func() error {
			return newErr(good, engine.Config{Sampler: engine.WeightedRandom{Weights: []float64{math.Inf(1)}}})
		}, "weight 0 is +Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.err() })
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSchemaErrorsAreSchemaErrors(t *testing.T) {
	t.Parallel()
	tok := collate.Field{Name: "tok", DType: collate.Int32, Shape: []int{collate.Dynamic}, MaxLen: 16}
	for _, tc := range []struct {
		name   string
		schema collate.Schema
		cfg    engine.Config
		want   string
	}{
		{"tok_len after tok", collate.Schema{tok, {Name: "tok_len", DType: collate.Int64}}, engine.Config{BatchSize: 4},
			`field 1 "tok_len" clashes with the lengths field "tok_len" of Dynamic field 0 "tok"`},
		{"tok_len before tok", collate.Schema{{Name: "tok_len", DType: collate.Float32}, tok}, engine.Config{BatchSize: 1 << 20},
			`field 0 "tok_len" clashes with the lengths field "tok_len" of Dynamic field 1 "tok"`},
		{"a Dynamic tok_len", collate.Schema{tok, {Name: "tok_len", DType: collate.Int32, Shape: []int{collate.Dynamic}, MaxLen: 2}}, engine.Config{},
			`"tok_len" clashes with the lengths field "tok_len" of Dynamic field 0 "tok"`},
		{"duplicate names", collate.Schema{{Name: "a", DType: collate.Int64}, {Name: "a", DType: collate.Int64}}, engine.Config{BatchSize: 8},
			`fields 0 and 1 are both named "a"`},
		{"bad dimension", collate.Schema{{Name: "a", DType: collate.Int64, Shape: []int{2, -3}}}, engine.Config{BatchSize: 8},
			`field "a": dimension 1 is -3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := engine.New(engine.DatasetFunc(4, tc.schema, fillNothing), tc.cfg)
			require.ErrorIs(t, err, collate.ErrSchema)
			assert.ErrorContains(t, err, "engine: Dataset.Schema: ")
			assert.ErrorContains(t, err, tc.want)
			assert.NotContains(t, err.Error(), "Config.")
		})
	}
}

func TestDropLastEpochWithoutABatchWarnsOnce(t *testing.T) {
	clearLauncherEnv(t)
	for _, tc := range []struct {
		name         string
		n            int
		cfg          engine.Config
		samples, bsz string
	}{
		{"one rank", 7, engine.Config{BatchSize: 8, DropLast: true}, "7 samples", "BatchSize 8"},
		{"four ranks", 20, engine.Config{BatchSize: 6, DropLast: true, Rank: 1, WorldSize: 4}, "5 samples", "BatchSize 6"},
		{"shuffled", 3, engine.Config{BatchSize: 100, DropLast: true, Shuffle: true, Workers: 2}, "3 samples", "BatchSize 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureLog(t)
			l := newLoader(t, engine.DatasetFunc(tc.n, indexSchema, fillIndex), tc.cfg)
			for epoch := range 3 {
				numbers, err := untilError(l, epoch)
				require.NoError(t, err)
				assert.Empty(t, numbers)
			}
			assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
			assert.Contains(t, logs.String(), "DropLast")
			assert.Contains(t, logs.String(), tc.samples)
			assert.Contains(t, logs.String(), tc.bsz)
		})
	}
	t.Run("no warning when a batch is delivered", func(t *testing.T) {
		logs := captureLog(t)
		l := newLoader(t, engine.DatasetFunc(9, indexSchema, fillIndex), engine.Config{BatchSize: 8, DropLast: true})
		numbers, err := untilError(l, 0)
		require.NoError(t, err)
		assert.Len(t, numbers, 1)
		assert.NotContains(t, logs.String(), "DropLast")
	})
}

// TestSamplerBeyondTheDataset: a Sampler whose N exceeds the dataset's Len
// is an error naming Config.Sampler, for the lazy orders as for the
// materialized ones, before any Fill sees an index out of range.
func TestSamplerBeyondTheDataset(t *testing.T) {
	t.Parallel()
	for _, s := range []engine.Sampler{
		engine.Shuffled{N: 9, Seed: 1},
		engine.Sequential{N: 9},
		engine.Shuffled{N: 9, Seed: 1, NumSamples: 3},
		listSampler{0, 8, 1},
	} {
		for _, world := range []int{1, 2} {
			var filled []int
			var mu sync.Mutex
			ds := engine.DatasetFunc(5, indexSchema, func(ctx context.Context, s *engine.Slot) error {
				mu.Lock()
				filled = append(filled, s.Index())
				mu.Unlock()
				return fillIndex(ctx, s)
			})
			l, err := engine.New(ds, engine.Config{BatchSize: 2, Sampler: s, WorldSize: world})
			require.NoError(t, err)
			var got error
			for _, err := range l.Epoch(context.Background(), 0) {
				if err != nil {
					got = err
				}
			}
			require.Error(t, got, "%#v", s)
			assert.Contains(t, got.Error(), "Sampler", "%#v", s)
			assert.Contains(t, got.Error(), "5 samples", "%#v", s)
			assert.Empty(t, filled, "%#v: Fill ran", s)
			assert.Zero(t, l.Len(), "%#v", s)
			require.NoError(t, l.Close())
		}
	}
}

// listSampler is a materialized order.
type listSampler []int

func (s listSampler) Order(int) []int { return slices.Clone(s) }
