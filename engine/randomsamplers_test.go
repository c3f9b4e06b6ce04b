package engine_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// counts returns how often each of 0..n-1 appears in orders.
func counts(n int, orders ...[]int) []int {
	c := make([]int, n)
	for _, o := range orders {
		for _, i := range o {
			c[i]++
		}
	}
	return c
}

// assertFrequencies checks that got[i]/total is p[i] within 5 standard
// deviations of a binomial count (and exactly 0 where p[i] is 0).
func assertFrequencies(t *testing.T, got []int, p []float64, what string) {
	t.Helper()
	total := 0
	for _, c := range got {
		total += c
	}
	for i := range got {
		if p[i] == 0 {
			assert.Zero(t, got[i], "%s: index %d has probability 0", what, i)
			continue
		}
		mean := float64(total) * p[i]
		sd := math.Sqrt(float64(total) * p[i] * (1 - p[i]))
		assert.InDelta(t, mean, float64(got[i]), 5*sd+1, "%s: index %d", what, i)
	}
}

func normalized(w []float64) []float64 {
	sum := 0.0
	for _, v := range w {
		sum += v
	}
	p := make([]float64, len(w))
	for i, v := range w {
		p[i] = v / sum
	}
	return p
}

func TestRandomWithReplacementIsUniformAndPure(t *testing.T) {
	t.Parallel()
	s := engine.RandomWithReplacement{N: 7, NumSamples: 70000, Seed: 1}
	o := s.Order(0)
	require.Len(t, o, 70000)
	assertFrequencies(t, counts(7, o), normalized([]float64{1, 1, 1, 1, 1, 1, 1}), "uniform")
	assert.Equal(t, o, s.Order(0), "a pure function of the epoch")
	assert.NotEqual(t, o, s.Order(1))
	assert.NotEqual(t, o, engine.RandomWithReplacement{N: 7, NumSamples: 70000, Seed: 2}.Order(0))
	assert.Len(t, engine.RandomWithReplacement{N: 9, Seed: 1}.Order(0), 9, "NumSamples 0 means N")
	assert.Less(t, len(slices.Compact(slices.Sorted(slices.Values(engine.RandomWithReplacement{N: 100, Seed: 1}.Order(0))))), 100,
		"with replacement, 100 draws of 100 repeat some (all distinct has probability 1e-42)")
	assert.Empty(t, engine.RandomWithReplacement{}.Order(0))
}

func TestShuffledNumSamplesDrawsSuccessivePermutations(t *testing.T) {
	t.Parallel()
	base := engine.Shuffled{N: 10, Seed: 3}
	assert.Equal(t, base.Order(2), engine.Shuffled{N: 10, Seed: 3, NumSamples: 10}.Order(2))
	long := engine.Shuffled{N: 10, Seed: 3, NumSamples: 25}.Order(2)
	require.Len(t, long, 25)
	assert.Equal(t, base.Order(2), long[:10], "the epoch's permutation first")
	assert.ElementsMatch(t, seq(10), long[10:20], "then another permutation")
	assert.NotEqual(t, long[:10], long[10:20])
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(long[20:]))), 5, "then part of a third, no repeats within it")
	assert.Equal(t, base.Order(2)[:4], engine.Shuffled{N: 10, Seed: 3, NumSamples: 4}.Order(2), "fewer: a prefix")
	assert.Equal(t, long, engine.Shuffled{N: 10, Seed: 3, NumSamples: 25}.Order(2))
	// Every index equally often over many epochs.
	s := engine.Shuffled{N: 6, Seed: 8, NumSamples: 4}
	var all [][]int
	for e := range 3000 {
		all = append(all, s.Order(e))
	}
	assertFrequencies(t, counts(6, all...), normalized([]float64{1, 1, 1, 1, 1, 1}), "shuffled prefix")
}

func TestWeightedRandomWithReplacementHonoursWeights(t *testing.T) {
	t.Parallel()
	w := []float64{1, 0, 2, 3, 0, 4}
	s := engine.WeightedRandom{Weights: w, NumSamples: 100000, Replacement: true, Seed: 7}
	o := s.Order(0)
	require.Len(t, o, 100000)
	assertFrequencies(t, counts(len(w), o), normalized(w), "with replacement")
	assert.Equal(t, o, s.Order(0))
	assert.NotEqual(t, o, s.Order(1))
	assert.NotEqual(t, o, engine.WeightedRandom{Weights: w, NumSamples: 100000, Replacement: true, Seed: 8}.Order(0))
	assert.Len(t, engine.WeightedRandom{Weights: w, Replacement: true}.Order(0), 6, "NumSamples 0 means len(Weights)")
	one := engine.WeightedRandom{Weights: []float64{0, 0, 5e-300, 0}, NumSamples: 50, Replacement: true}.Order(3)
	assert.Equal(t, slices.Repeat([]int{2}, 50), one, "the only positive weight, however small")
}

func TestWeightedRandomWithoutReplacementHasNoRepeats(t *testing.T) {
	t.Parallel()
	w := []float64{1, 0, 2, 3, 0, 4}
	p := normalized(w)
	var first, all [][]int
	for e := range 20000 {
		o := engine.WeightedRandom{Weights: w, NumSamples: 3, Seed: 7}.Order(e)
		require.Len(t, o, 3)
		require.Len(t, slices.Compact(slices.Sorted(slices.Values(o))), 3, "epoch %d repeats an index: %v", e, o)
		first = append(first, o[:1])
		all = append(all, o)
	}
	// The first draw follows the weights; later ones the weights of what
	// is left: P(second = j) = sum over i != j of p_i p_j / (1 - p_i).
	assertFrequencies(t, counts(len(w), first...), p, "first draw")
	second := make([]float64, len(w))
	for j := range w {
		for i := range w {
			if i != j && p[i] < 1 {
				second[j] += p[i] * p[j] / (1 - p[i])
			}
		}
	}
	var seconds [][]int
	for _, o := range all {
		seconds = append(seconds, o[1:2])
	}
	assertFrequencies(t, counts(len(w), seconds...), second, "second draw")
	full := engine.WeightedRandom{Weights: w, NumSamples: 4, Seed: 1}.Order(0)
	assert.ElementsMatch(t, []int{0, 2, 3, 5}, full, "every positive weight, once")
	assert.Equal(t, full, engine.WeightedRandom{Weights: w, NumSamples: 4, Seed: 1}.Order(0))
}

func TestSamplersValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    interface{ Validate() error }
		want string // "" means valid
	}{
		{engine.Shuffled{N: 3}, ""},
		{engine.Shuffled{N: 3, NumSamples: 7}, ""},
		{engine.Shuffled{}, ""},
		{engine.Shuffled{N: -1}, "engine: Shuffled: N is -1, want >= 0: invalid sampler"},
		{engine.Shuffled{N: 3, NumSamples: -2}, "engine: Shuffled: NumSamples is -2, want >= 0 (0 means N)"},
		{engine.Shuffled{NumSamples: 2}, "engine: Shuffled: NumSamples is 2 with N 0: nothing to draw from"},
		{engine.RandomWithReplacement{N: 2, NumSamples: 9}, ""},
		{engine.RandomWithReplacement{N: -3}, "engine: RandomWithReplacement: N is -3, want >= 0"},
		{engine.RandomWithReplacement{N: 3, NumSamples: -1}, "engine: RandomWithReplacement: NumSamples is -1"},
		{engine.RandomWithReplacement{NumSamples: 1}, "NumSamples is 1 with N 0: nothing to draw from"},
		{engine.WeightedRandom{Weights: []float64{0, 1}, NumSamples: 5, Replacement: true}, ""},
		{engine.WeightedRandom{}, "engine: WeightedRandom: no Weights"},
		{engine.WeightedRandom{Weights: []float64{1, -1}}, "engine: WeightedRandom: weight 1 is -1, want finite and >= 0"},
		{engine.WeightedRandom{Weights: []float64{math.NaN()}}, "weight 0 is NaN"},
		{engine.WeightedRandom{Weights: []float64{1, math.Inf(1)}}, "weight 1 is +Inf"},
		{engine.WeightedRandom{Weights: []float64{math.MaxFloat64, math.MaxFloat64}, Replacement: true}, "the weights sum to more than the largest float64"},
		{engine.WeightedRandom{Weights: []float64{0, 0}, Replacement: true}, "all 2 weights are 0"},
		{engine.WeightedRandom{Weights: []float64{1}, NumSamples: -1, Replacement: true}, "NumSamples is -1, want >= 0 (0 means len(Weights))"},
		{engine.WeightedRandom{Weights: []float64{1, 0, 2}}, "NumSamples is 3 without replacement, but only 2 of the 3 weights are positive"},
	} {
		err := tc.s.Validate()
		if tc.want == "" {
			assert.NoError(t, err, "%#v", tc.s)
			continue
		}
		assert.ErrorIs(t, err, engine.ErrSampler)
		assert.ErrorContains(t, err, tc.want)
		assert.PanicsWithError(t, err.Error(), func() { tc.s.(engine.Sampler).Order(0) }, "Order panics with Validate's error")
	}
}

// Through a Loader, an invalid sampler is an error of New naming
// Config.Sampler, and a valid one's order is what the loader visits.
func TestRandomSamplersThroughTheLoader(t *testing.T) {
	t.Parallel()
	_, err := engine.New(engine.DatasetFunc(4, indexSchema, fillIndex), engine.Config{Sampler: engine.WeightedRandom{Weights: []float64{1, -1, 1, 1}}})
	assert.ErrorIs(t, err, engine.ErrSampler)
	assert.ErrorContains(t, err, "engine: Config.Sampler: engine: WeightedRandom: weight 1 is -1")

	for _, s := range []engine.Sampler{
		engine.WeightedRandom{Weights: []float64{5, 1, 0, 1, 3, 2, 2, 1, 1, 1}, NumSamples: 25, Replacement: true, Seed: 2},
		engine.WeightedRandom{Weights: []float64{5, 1, 0, 1, 3, 2, 2, 1, 1, 1}, NumSamples: 7, Seed: 2},
		engine.RandomWithReplacement{N: 10, NumSamples: 33, Seed: 4},
		engine.Shuffled{N: 10, NumSamples: 23, Seed: 4},
	} {
		l := newLoader(t, engine.DatasetFunc(10, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: 2, Sampler: s})
		for epoch := range 2 {
			indices, fromMemory := collect(t, l, epoch)
			assert.Equal(t, s.Order(epoch), slices.Concat(indices...), "%T", s)
			assert.Equal(t, indices, fromMemory)
		}
	}
}

func ExampleWeightedRandom() {
	// Oversample the rare class 1: each sample of class 1 weighs 9 times
	// one of class 0, so the classes are drawn about equally often.
	labels := []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	weights := make([]float64, len(labels))
	for i, y := range labels {
		weights[i] = []float64{1, 9}[y]
	}
	s := engine.WeightedRandom{Weights: weights, NumSamples: 10000, Replacement: true, Seed: 1}
	if err := s.Validate(); err != nil {
		panic(err)
	}
	ones := 0
	for _, i := range s.Order(0) {
		ones += labels[i]
	}
	fmt.Println(ones > 4800 && ones < 5200)

	// Without replacement, an epoch has no repeats.
	o := engine.WeightedRandom{Weights: weights, NumSamples: 10, Seed: 1}.Order(0)
	fmt.Println(len(o), len(slices.Compact(slices.Sorted(slices.Values(o)))))
	fmt.Println(engine.WeightedRandom{Weights: []float64{1, 0}, NumSamples: 2}.Validate())
	// Output:
	// true
	// 10 10
	// engine: WeightedRandom: NumSamples is 2 without replacement, but only 1 of the 2 weights are positive: invalid sampler
}
