package shards

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

var blendSchema = collate.Schema{{Name: "id", DType: collate.Int64}, {Name: "noise", DType: collate.Float64}}

// corpus returns a dataset of n samples whose id is 1000×k + index.
func corpus(k, n int) engine.Dataset {
	return engine.DatasetFunc(n, blendSchema, func(_ context.Context, s *engine.Slot) error {
		collate.As[int64](s.Tensor("id"))[0] = int64(1000*k + s.Index())
		collate.As[float64](s.Tensor("noise"))[0] = s.Rand().Float64()
		return nil
	})
}

// At every prefix of the epoch each dataset's count is within one sample
// of its share, and its samples run 0, 1, 2, ... modulo its Len.
func TestBlendProportions(t *testing.T) {
	for _, tc := range []struct {
		weights []float64
		lens    []int
		size    int
	}{
		{[]float64{0.7, 0.2, 0.1}, []int{50, 30, 7}, 1000},
		{[]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, []int{10, 10, 10}, 999},
		{[]float64{0.5, 0.5}, []int{3, 4}, 0},
		{[]float64{3, 1}, []int{100, 100}, 401},
		{[]float64{0.999, 0.001}, []int{5, 5}, 5000},
		{[]float64{0.01, 0.02, 0.03, 0.04, 0.1, 0.2, 0.25, 0.35}, []int{1, 2, 3, 4, 5, 6, 7, 8}, 3000},
		{[]float64{1, 0, 2}, []int{9, 0, 9}, 100},
		{[]float64{0.6180339887, 0.3819660113}, []int{13, 21}, 2000},
	} {
		ds := make([]engine.Dataset, len(tc.lens))
		total := 0
		for k, n := range tc.lens {
			ds[k] = corpus(k, n)
			total += n
		}
		b, err := Blend(BlendConfig{Weights: tc.weights, Size: tc.size}, ds...)
		require.NoError(t, err, tc.weights)
		want := tc.size
		if want == 0 {
			want = total
		}
		require.Equal(t, want, b.Len())
		w := b.Weights()
		counts := make([]int, len(ds))
		worst := 0.0
		for i := range b.Len() {
			k, j := b.Source(i)
			require.Equal(t, counts[k]%tc.lens[k], j, "weights %v, sample %d", tc.weights, i)
			counts[k]++
			for k := range counts {
				dev := math.Abs(float64(counts[k]) - w[k]*float64(i+1))
				worst = max(worst, dev)
				require.Less(t, dev, 1.0, "weights %v, prefix %d, dataset %d: %d samples, share %v", tc.weights, i+1, k, counts[k], w[k]*float64(i+1))
			}
		}
		t.Logf("weights %v: largest deviation from the shares %.4f samples", tc.weights, worst)
	}
}

// Megatron's greedy: a worked order. The weights 0.7, 0.2, 0.1 sum to
// 0.9999999999999999 in float64 and are divided by that sum, as Megatron
// does (numpy), so position 1 is not a tie of datasets 0 and 1: dataset
// 0 lags by 0.40000000000000013, dataset 1 by 0.4.
func TestBlendOrder(t *testing.T) {
	b, err := Blend(BlendConfig{Weights: []float64{0.7, 0.2, 0.1}, Size: 10}, corpus(0, 100), corpus(1, 100), corpus(2, 100))
	require.NoError(t, err)
	var got []int
	for i := range b.Len() {
		k, _ := b.Source(i)
		got = append(got, k)
	}
	assert.Equal(t, []int{0, 0, 1, 0, 0, 2, 0, 0, 1, 0}, got)
}

func TestBlendErrors(t *testing.T) {
	a, c := corpus(0, 5), corpus(1, 5)
	other := engine.DatasetFunc(5, collate.Schema{{Name: "id", DType: collate.Int32}}, func(context.Context, *engine.Slot) error { return nil })
	for _, tc := range []struct {
		cfg  BlendConfig
		ds   []engine.Dataset
		want string
	}{
		{BlendConfig{Weights: []float64{1}}, []engine.Dataset{a, c}, "BlendConfig.Weights has 1 weights for 2 datasets"},
		{BlendConfig{Weights: []float64{1, math.NaN()}}, []engine.Dataset{a, c}, "BlendConfig.Weights[1] is NaN"},
		{BlendConfig{Weights: []float64{-1, 2}}, []engine.Dataset{a, c}, "BlendConfig.Weights[0] is -1"},
		{BlendConfig{Weights: []float64{math.Inf(1), 2}}, []engine.Dataset{a, c}, "BlendConfig.Weights[0] is +Inf"},
		{BlendConfig{Weights: []float64{0, 0}}, []engine.Dataset{a, c}, "sum to 0"},
		{BlendConfig{Weights: []float64{1, 1}, Size: -1}, []engine.Dataset{a, c}, "BlendConfig.Size is -1"},
		{BlendConfig{Weights: []float64{1, 1}}, []engine.Dataset{a, other}, "dataset 1's schema differs from dataset 0's: field 0 is id int32"},
		{BlendConfig{Weights: []float64{1, 1}}, []engine.Dataset{a, corpus(1, 0)}, "dataset 1 is empty"},
		{BlendConfig{Weights: []float64{1, 1}}, []engine.Dataset{a, nil}, "dataset 1 is nil"},
		{BlendConfig{}, nil, "no datasets"},
	} {
		_, err := Blend(tc.cfg, tc.ds...)
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), "shards: Blend: ")
	}
}

// blendRows runs an epoch of a loader over ds and returns the bytes of
// every batch.
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

func testBlend(t *testing.T) *BlendedDataset {
	b, err := Blend(BlendConfig{Weights: []float64{0.7, 0.2, 0.1}, Size: 300}, corpus(0, 40), corpus(1, 90), corpus(2, 3))
	require.NoError(t, err)
	return b
}

// The loader's samples are the blend's, the same bytes for Workers 0 and
// 3, shuffled or not.
func TestBlendDeterministic(t *testing.T) {
	b := testBlend(t)
	for _, shuffle := range []bool{false, true} {
		cfg := engine.Config{BatchSize: 7, Seed: 9, Shuffle: shuffle, WorldSize: 1, Backend: "cpu"}
		raw0 := blendRows(t, b, cfg, 1)
		cfg.Workers = 3
		raw3 := blendRows(t, testBlend(t), cfg, 1)
		assert.Equal(t, raw0, raw3, "shuffle %v", shuffle)
	}
	l, err := engine.New(b, engine.Config{BatchSize: 16, Workers: 2, WorldSize: 1, Backend: "cpu"})
	require.NoError(t, err)
	defer l.Close()
	for batch, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		ids := collate.As[int64](batch.Tensor("id"))
		for r, i := range batch.Indices() {
			k, j := b.Source(i)
			assert.Equal(t, int64(1000*k+j), ids[r], "sample %d", i)
		}
	}
}

// A loader saved mid-epoch (engine.State, through JSON) and resumed in a
// new loader over a new blend delivers exactly the rest of the epoch.
func TestBlendResume(t *testing.T) {
	cfg := engine.Config{BatchSize: 8, Workers: 2, Seed: 5, Shuffle: true, WorldSize: 1, Backend: "cpu"}
	full := blendRows(t, testBlend(t), cfg, 2)

	b := testBlend(t)
	l, err := engine.New(b, cfg)
	require.NoError(t, err)
	var head []byte
	n := 0
	for batch, err := range l.Epoch(context.Background(), 2) {
		require.NoError(t, err)
		for _, f := range b.Schema() {
			head = append(head, batch.Tensor(f.Name).Bytes()...)
		}
		if n++; n == 5 {
			break
		}
	}
	st := l.State()
	require.NoError(t, l.Close())
	js, err := json.Marshal(st)
	require.NoError(t, err)
	var back engine.State
	require.NoError(t, json.Unmarshal(js, &back))

	cfg.Resume = &back
	cfg.Workers = 3
	tail := blendRows(t, testBlend(t), cfg, 2)
	assert.Equal(t, full, append(head, tail...))
}

// Megatron corpora blended: each sample is the one its dataset's loader
// gives at the same epoch, through a loader with workers, epoch by epoch.
func TestBlendMegatron(t *testing.T) {
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
	b, err := Blend(BlendConfig{Weights: []float64{0.25, 0.75}, Size: 100}, a, c)
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
				k, j := b.Source(i)
				want := [][][]int64{rowsA, rowsC}[k][j]
				assert.Equal(t, want, tokens[r*5:(r+1)*5], "epoch %d, sample %d", epoch, i)
			}
		}
		require.NoError(t, l.Close())
	}
}
