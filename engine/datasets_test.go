package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// wrapSchema records, for each sample, which dataset filled it, the index
// that dataset saw, and two draws of the sample's RNG.
var wrapSchema = collate.Schema{
	{Name: "source", DType: collate.Int64},
	{Name: "inner", DType: collate.Int64},
	{Name: "rand", DType: collate.Int64, Shape: []int{2}},
}

// source returns a dataset of n samples that writes id, the index it is
// given, and draws of Rand and Seed.
func source(id, n int) engine.Dataset {
	return engine.DatasetFunc(n, wrapSchema, func(_ context.Context, s *engine.Slot) error {
		collate.As[int64](s.Tensor("source"))[0] = int64(id)
		collate.As[int64](s.Tensor("inner"))[0] = int64(s.Index())
		key, stream := s.Seed()
		r := collate.As[int64](s.Tensor("rand"))
		r[0], r[1] = int64(s.Rand().Uint64()), int64(key^stream)
		return nil
	})
}

// sampleRecord is one sample of a wrapSchema batch.
type sampleRecord struct {
	outer, source, inner int
	rand                 [2]int64
}

func records(t *testing.T, l *engine.Loader, epoch int) []sampleRecord {
	t.Helper()
	var out []sampleRecord
	for b, err := range l.Epoch(context.Background(), epoch) {
		require.NoError(t, err)
		src, inner, r := collate.As[int64](b.Tensor("source")), collate.As[int64](b.Tensor("inner")), collate.As[int64](b.Tensor("rand"))
		for k, i := range b.Indices() {
			out = append(out, sampleRecord{i, int(src[k]), int(inner[k]), [2]int64{r[2*k], r[2*k+1]}})
		}
	}
	return out
}

// randOf returns the draws a plain dataset makes for each outer index:
// what the wrappers must keep.
func randOf(t *testing.T, n int, cfg engine.Config, epoch int) map[int][2]int64 {
	t.Helper()
	cfg.Shuffle, cfg.Sampler = false, nil
	out := map[int][2]int64{}
	for _, r := range records(t, newLoader(t, source(9, n), cfg), epoch) {
		out[r.outer] = r.rand
	}
	return out
}

func TestConcatFillsEachDatasetAtItsOwnIndex(t *testing.T) {
	t.Parallel()
	ds, err := engine.Concat(source(0, 3), source(1, 0), source(2, 5), source(3, 2))
	require.NoError(t, err)
	assert.Equal(t, 10, ds.Len())
	cfg := engine.Config{BatchSize: 3, Shuffle: true, Seed: 11, Workers: 2}
	want := randOf(t, 10, cfg, 4)
	got := records(t, newLoader(t, ds, cfg), 4)
	require.Len(t, got, 10)
	where := [][2]int{{0, 0}, {0, 1}, {0, 2}, {2, 0}, {2, 1}, {2, 2}, {2, 3}, {2, 4}, {3, 0}, {3, 1}}
	for _, r := range got {
		assert.Equal(t, where[r.outer], [2]int{r.source, r.inner}, "outer index %d", r.outer)
		assert.Equal(t, want[r.outer], r.rand, "Rand and Seed stay keyed by the outer index %d", r.outer)
	}
}

func TestConcatSchemaMismatchNamesTheField(t *testing.T) {
	t.Parallel()
	other := func(s collate.Schema) engine.Dataset { return engine.DatasetFunc(1, s, fillNothing) }
	changed := func(f func(s collate.Schema)) collate.Schema {
		s := slices.Clone(wrapSchema)
		f(s)
		return s
	}
	for _, tc := range []struct {
		ds   engine.Dataset
		want string
	}{
		{other(changed(func(s collate.Schema) { s[1].DType = collate.Int32 })),
			`engine: Concat: dataset 2's schema differs from dataset 0's: field 1 is inner int32[], want inner int64[]`},
		{other(changed(func(s collate.Schema) { s[2].Shape = []int{3} })), `field 2 is rand int64[3], want rand int64[2]`},
		{other(changed(func(s collate.Schema) { s[0].Name = "src" })), `field 0 is src int64[], want source int64[]`},
		{other(wrapSchema[:2]), `dataset 2's schema differs from dataset 0's: 2 fields, want 3 (["source" "inner" "rand"])`},
		{other(append(slices.Clone(wrapSchema), collate.Field{Name: "extra", DType: collate.Bool})), "4 fields, want 3"},
		{nil, "engine: Concat: dataset 2 is nil"},
	} {
		_, err := engine.Concat(source(0, 1), source(1, 1), tc.ds)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := engine.Concat()
	assert.ErrorContains(t, err, "engine: Concat: no datasets")
	seq := func(pad float64) engine.Dataset {
		return other(collate.Schema{{Name: "s", DType: collate.Int8, Shape: []int{collate.Dynamic}, MaxLen: 4, Pad: pad}})
	}
	_, err = engine.Concat(seq(0), seq(-1))
	assert.ErrorContains(t, err, `field 0 is s int8[-1] MaxLen 4 Pad -1, want s int8[-1] MaxLen 4 Pad 0`)
}

func TestSubsetChecksIndicesAndMaps(t *testing.T) {
	t.Parallel()
	_, err := engine.Subset(source(0, 5), []int{0, 4, 5})
	assert.ErrorContains(t, err, "engine: Subset: index 5 at position 2 is out of range [0, 5)")
	_, err = engine.Subset(source(0, 5), []int{-1})
	assert.ErrorContains(t, err, "index -1 at position 0")
	_, err = engine.Subset(nil, nil)
	assert.ErrorContains(t, err, "nil dataset")

	idx := []int{4, 1, 1, 3}
	ds, err := engine.Subset(source(0, 5), idx)
	require.NoError(t, err)
	idx[0] = 0 // the indices were copied
	empty, err := engine.Subset(source(0, 5), nil)
	require.NoError(t, err)
	assert.Zero(t, empty.Len())
	cfg := engine.Config{BatchSize: 2, Workers: 1, Seed: 3}
	want := randOf(t, 4, cfg, 0)
	got := records(t, newLoader(t, ds, cfg), 0)
	require.Len(t, got, 4)
	for k, r := range got {
		assert.Equal(t, k, r.outer)
		assert.Equal(t, []int{4, 1, 1, 3}[k], r.inner)
		assert.Equal(t, want[k], r.rand)
	}
	assert.NotEqual(t, got[1].rand, got[2].rand, "a sample visited twice is drawn for twice, independently")
}

// Errors and panics of the inner Fill name the outer index (the loader's)
// and the inner one; the slot's index is restored for the next sample.
func TestWrappedFillErrorsNameBothIndices(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	inner := engine.DatasetFunc(6, wrapSchema, func(ctx context.Context, s *engine.Slot) error {
		switch s.Index() {
		case 2:
			return boom
		case 4:
			panic("bad sample")
		}
		return nil
	})
	sub, err := engine.Subset(inner, []int{0, 2, 1, 4, 5})
	require.NoError(t, err)
	ds, err := engine.Concat(source(7, 2), sub)
	require.NoError(t, err)
	l := newLoader(t, ds, engine.Config{BatchSize: 1})
	_, err = untilError(l, 0)
	var se *engine.SampleError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 3, se.Index)
	assert.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, "dataset 1, sample 1: subset sample 2: boom")

	layout, err := collate.NewLayout(wrapSchema, 1)
	require.NoError(t, err)
	s := enginetest.NewSlot(1, 0, 5, layout, make([]byte, layout.Size()), 0)
	assert.Panics(t, func() { _ = ds.Fill(context.Background(), s) })
	assert.Equal(t, 5, s.Index(), "restored after a panic")
	require.NoError(t, ds.Fill(context.Background(), enginetest.NewSlot(1, 0, 1, layout, make([]byte, layout.Size()), 0)))
}

func TestRandomSplitFractionsAndCounts(t *testing.T) {
	t.Parallel()
	lens := func(parts []engine.Dataset) []int {
		var n []int
		for _, p := range parts {
			n = append(n, p.Len())
		}
		return n
	}
	for _, tc := range []struct {
		n     int
		sizes []float64
		want  []int
	}{
		// torch.utils.data.random_split(range(11), [0.5, 0.3, 0.2]): floors
		// 5, 3, 2 and the one left over to the first part.
		{11, []float64{0.5, 0.3, 0.2}, []int{6, 3, 2}},
		{10, []float64{0.25, 0.25, 0.25, 0.25}, []int{3, 3, 2, 2}},
		{7, []float64{0.1, 0.2, 0.7}, []int{1, 2, 4}},
		{3, []float64{0.5, 0.5, 0, 0}, []int{2, 1, 0, 0}},
		{10, []float64{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{10, []float64{0.5 + 5e-10, 0.5}, []int{5, 5}}, // a sum just above 1 is still fractions
		{11, []float64{3, 8}, []int{3, 8}},
		{11, []float64{0, 11, 0}, []int{0, 11, 0}},
		{1, []float64{1}, []int{1}},
		{0, []float64{0, 0}, []int{0, 0}},
		{0, []float64{0.5, 0.5}, []int{0, 0}},
	} {
		parts, err := engine.RandomSplit(source(0, tc.n), 42, tc.sizes...)
		require.NoError(t, err, "%v", tc.sizes)
		assert.Equal(t, tc.want, lens(parts), "%d samples split %v", tc.n, tc.sizes)
	}
	for _, tc := range []struct {
		sizes []float64
		want  string
	}{
		{nil, "engine: RandomSplit: no sizes"},
		{[]float64{0.5, 0.4}, "sizes [0.5 0.4] are neither fractions that sum to 1 nor counts that sum to Len 10: size 0 is 0.5"},
		{[]float64{3, 8}, "counts [3 8] sum to 11, not to Len 10"},
		{[]float64{12, -2}, "size 1 is -2, want a fraction in [0, 1] or a count >= 0"},
		{[]float64{11, 0}, "size 0 is 11"},
	} {
		_, err := engine.RandomSplit(source(0, 10), 1, tc.sizes...)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := engine.RandomSplit(nil, 1, 1)
	assert.ErrorContains(t, err, "nil dataset")
}

// The parts are disjoint and cover the dataset, each part's Fill sees the
// inner index, and the split is a pure function of the seed.
func TestRandomSplitIsDisjointAndDeterministic(t *testing.T) {
	t.Parallel()
	split := func(seed uint64) [][]int {
		parts, err := engine.RandomSplit(source(0, 50), seed, 0.6, 0.3, 0.1)
		require.NoError(t, err)
		var out [][]int
		for _, p := range parts {
			var inner []int
			for _, r := range records(t, newLoader(t, p, engine.Config{BatchSize: 7, Workers: 2}), 0) {
				inner = append(inner, r.inner)
			}
			out = append(out, inner)
		}
		return out
	}
	a := split(5)
	assert.Equal(t, a, split(5))
	assert.NotEqual(t, a, split(6))
	all := slices.Concat(a...)
	slices.Sort(all)
	assert.Equal(t, seq(50), all, "disjoint, covering")
	assert.NotEqual(t, seq(30), a[0], "shuffled")
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// A wrapped BatchFiller is a BatchFiller: its batches have the bytes of
// the same samples loaded from the dataset itself, whether a batch falls
// within one dataset of a Concat (FillBatchAt) or spans two (sample by
// sample).
func TestWrappedTensorsDatasetFillsWholeBatches(t *testing.T) {
	t.Parallel()
	ds := tensorsDataset(t, 40)
	sub, err := engine.Subset(ds, []int{39, 0, 7, 7, 12})
	require.NoError(t, err)
	both, err := engine.Concat(sub, ds)
	require.NoError(t, err)
	_, isBatch := both.(engine.BatchFiller)
	assert.True(t, isBatch)
	order := append([]int{39, 0, 7, 7, 12}, seq(40)...)
	var got [][]byte
	for b, err := range newLoader(t, both, engine.Config{BatchSize: 6, Workers: 2}).Epoch(context.Background(), 0) {
		require.NoError(t, err)
		for _, f := range ds.Schema() {
			bt := b.Tensor(f.Name).Bytes()
			row := len(bt) / b.Len()
			for k := range b.Len() {
				got = append(got, bytes.Clone(bt[k*row:(k+1)*row])) // the batch is recycled after the body
			}
		}
	}
	var want [][]byte
	for b, err := range newLoader(t, ds, engine.Config{BatchSize: 6, Sampler: sliceSampler(order)}).Epoch(context.Background(), 0) {
		require.NoError(t, err)
		for _, f := range ds.Schema() {
			bt := b.Tensor(f.Name).Bytes()
			row := len(bt) / b.Len()
			for k := range b.Len() {
				want = append(want, bytes.Clone(bt[k*row:(k+1)*row]))
			}
		}
	}
	assert.Equal(t, want, got)
}

// Wrapped datasets keep batches bit-identical for any worker count.
func TestWrappedDatasetsBitIdenticalAcrossWorkers(t *testing.T) {
	t.Parallel()
	parts, err := engine.RandomSplit(engine.DatasetFunc(60, indexSchema, fillIndex), 3, 0.5, 0.5)
	require.NoError(t, err)
	ds, err := engine.Concat(parts[1], engine.DatasetFunc(10, indexSchema, fillIndex), parts[0])
	require.NoError(t, err)
	var first [][32]byte
	for _, workers := range []int{0, 1, 4} {
		got := digest(t, newLoader(t, ds, engine.Config{BatchSize: 8, Shuffle: true, Seed: 9, Workers: workers}), 2)
		if first == nil {
			first = got
			continue
		}
		assert.Equal(t, first, got, "workers=%d", workers)
	}
}

func ExampleConcat() {
	schema := collate.Schema{{Name: "x", DType: collate.Int64}}
	numbers := func(base, n int) engine.Dataset {
		return engine.DatasetFunc(n, schema, func(_ context.Context, s *engine.Slot) error {
			collate.As[int64](s.Tensor("x"))[0] = int64(base + s.Index()) // s.Index() is this dataset's own index
			return nil
		})
	}
	ds, err := engine.Concat(numbers(100, 3), numbers(200, 2))
	if err != nil {
		panic(err)
	}
	l, err := engine.New(ds, engine.Config{BatchSize: 5})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.Indices(), collate.As[int64](b.Tensor("x")))
	}
	// Output:
	// [0 1 2 3 4] [100 101 102 200 201]
}

func ExampleSubset() {
	schema := collate.Schema{{Name: "x", DType: collate.Int64}}
	squares := engine.DatasetFunc(10, schema, func(_ context.Context, s *engine.Slot) error {
		collate.As[int64](s.Tensor("x"))[0] = int64(s.Index() * s.Index())
		return nil
	})
	ds, err := engine.Subset(squares, []int{9, 3, 3, 0})
	if err != nil {
		panic(err)
	}
	l, err := engine.New(ds, engine.Config{BatchSize: 4})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.Indices(), collate.As[int64](b.Tensor("x")))
	}
	_, err = engine.Subset(squares, []int{10})
	fmt.Println(err)
	// Output:
	// [0 1 2 3] [81 9 9 0]
	// engine: Subset: index 10 at position 0 is out of range [0, 10)
}

func ExampleRandomSplit() {
	schema := collate.Schema{{Name: "x", DType: collate.Int64}}
	ds := engine.DatasetFunc(10, schema, func(context.Context, *engine.Slot) error { return nil })
	parts, err := engine.RandomSplit(ds, 42, 0.8, 0.2) // or counts: 8, 2
	if err != nil {
		panic(err)
	}
	fmt.Println(parts[0].Len(), parts[1].Len())
	_, err = engine.RandomSplit(ds, 42, 8, 3)
	fmt.Println(err)
	// Output:
	// 8 2
	// engine: RandomSplit: counts [8 3] sum to 11, not to Len 10
}
