package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Random samplers with replacement and weights, as PyTorch's
// RandomSampler(replacement=True, num_samples) and WeightedRandomSampler.
// Each is a struct literal, as Sequential and Shuffled are, and a pure
// function of (Seed, epoch). Invalid fields are reported one way: Validate
// returns an error wrapping ErrSampler, and Order panics with that error,
// which the Loader turns into the epoch's error ("engine: the sampler of
// epoch E over N samples: panic: engine: WeightedRandom: ..."). Call
// Validate to check a sampler before loading.

// ErrSampler is wrapped by the errors of the built-in samplers' Validate.
var ErrSampler = errors.New("engine: invalid sampler")

func samplerError(sampler, format string, args ...any) error {
	return &invalidSampler{fmt.Sprintf("engine: %s: %s", sampler, fmt.Sprintf(format, args...))}
}

// invalidSampler is the error of samplerError: its message, then
// "invalid sampler", and it matches ErrSampler.
type invalidSampler struct{ msg string }

func (e *invalidSampler) Error() string        { return e.msg + ": invalid sampler" }
func (e *invalidSampler) Is(target error) bool { return target == ErrSampler }

// mustValidate panics with err, for Order, which has no error to return.
func mustValidate(err error) {
	if err != nil {
		panic(err)
	}
}

// RandomWithReplacement draws NumSamples indices uniformly from 0..N-1
// with replacement, as PyTorch's RandomSampler(replacement=True,
// num_samples=NumSamples). NumSamples 0 means N.
type RandomWithReplacement struct {
	N, NumSamples int
	Seed          uint64
}

// Validate reports an invalid N or NumSamples; the error wraps ErrSampler.
func (s RandomWithReplacement) Validate() error {
	return validateDraws("RandomWithReplacement", s.N, s.NumSamples)
}

// Order returns the epoch's draws.
func (s RandomWithReplacement) Order(epoch int) []int {
	mustValidate(s.Validate())
	r := rand.New(rand.NewPCG(s.Seed, mix(uint64(epoch)^0x5245504c41434521))) // "REPLACE!"
	n := cmp.Or(s.NumSamples, s.N)
	out := make([]int, n)
	for i := range out {
		out[i] = r.IntN(s.N)
	}
	return out
}

// WeightedRandom draws NumSamples indices of 0..len(Weights)-1, index i
// with probability proportional to Weights[i], as PyTorch's
// WeightedRandomSampler (torch.multinomial): independently with
// Replacement, else without (successive draws from the weights of the
// indices not yet drawn, so an epoch has no repeats, and an index of
// weight 0 is never drawn). The weights need not sum to 1. NumSamples 0
// means len(Weights). The Weights slice is read at every Order: do not
// modify it while a Loader uses the sampler.
type WeightedRandom struct {
	Weights     []float64
	NumSamples  int
	Replacement bool
	Seed        uint64
}

// Validate reports weights that are negative, not finite, or all 0, and a
// NumSamples that is negative or, without replacement, more than the
// weights that are positive. The error wraps ErrSampler.
func (s WeightedRandom) Validate() error {
	if len(s.Weights) == 0 {
		return samplerError("WeightedRandom", "no Weights")
	}
	sum, positive := 0.0, 0
	for i, w := range s.Weights {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return samplerError("WeightedRandom", "weight %d is %v, want finite and >= 0", i, w)
		}
		sum += w
		if w > 0 {
			positive++
		}
	}
	n := cmp.Or(s.NumSamples, len(s.Weights))
	switch {
	case positive == 0:
		return samplerError("WeightedRandom", "all %d weights are 0", len(s.Weights))
	case math.IsInf(sum, 0):
		return samplerError("WeightedRandom", "the weights sum to more than the largest float64")
	case s.NumSamples < 0:
		return samplerError("WeightedRandom", "NumSamples is %d, want >= 0 (0 means len(Weights))", s.NumSamples)
	case !s.Replacement && n > positive:
		return samplerError("WeightedRandom", "NumSamples is %d without replacement, but only %d of the %d weights are positive", n, positive, len(s.Weights))
	}
	return nil
}

// Order returns the epoch's draws.
func (s WeightedRandom) Order(epoch int) []int {
	mustValidate(s.Validate())
	r := rand.New(rand.NewPCG(s.Seed, mix(uint64(epoch)^0x5745494748544544))) // "WEIGHTED"
	n := cmp.Or(s.NumSamples, len(s.Weights))
	if s.Replacement {
		return drawWithReplacement(r, s.Weights, n)
	}
	return drawWithoutReplacement(r, s.Weights, n)
}

// drawWithReplacement draws n indices from the cumulative weights: the
// first index whose running sum exceeds u·sum, for u uniform in [0, 1).
// An index of weight 0 adds nothing to the sum, so it is never the first
// to exceed.
func drawWithReplacement(r *rand.Rand, weights []float64, n int) []int {
	cum := make([]float64, len(weights))
	sum, last := 0.0, 0
	for i, w := range weights {
		sum += w
		cum[i] = sum
		if w > 0 {
			last = i
		}
	}
	out := make([]int, n)
	for k := range out {
		u := r.Float64() * sum
		i := sort.Search(len(cum), func(i int) bool { return cum[i] > u })
		if i == len(cum) { // u rounded up to sum: the last positive weight takes it
			i = last
		}
		out[k] = i
	}
	return out
}

// drawWithoutReplacement draws n distinct indices by Efraimidis and
// Spirakis's exponential keys: index i gets E_i/w_i with E_i exponential,
// and the n smallest keys, in order, are distributed as n successive draws
// without replacement from the weights (the method torch.multinomial
// uses). Indices of weight 0 take no part.
func drawWithoutReplacement(r *rand.Rand, weights []float64, n int) []int {
	type keyed struct {
		key float64
		i   int
	}
	keys := make([]keyed, 0, len(weights))
	for i, w := range weights {
		e := r.ExpFloat64() // drawn for every index, so index i's draw does not depend on the other weights
		if w > 0 {
			keys = append(keys, keyed{e / w, i})
		}
	}
	slices.SortFunc(keys, func(a, b keyed) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.i, b.i)) })
	out := make([]int, n)
	for k := range out {
		out[k] = keys[k].i
	}
	return out
}
