package shards

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// BlendConfig configures a blend of corpora (Blend).
type BlendConfig struct {
	// Weights is each dataset's share of the samples, in the order of
	// the datasets: finite, at least 0, not all 0. They need not sum to
	// 1; Blend divides them by their sum.
	Weights []float64
	// Size is the blend's Len, the samples of an epoch; 0 means the sum
	// of the datasets' lengths. At most 2^34 (on 64-bit machines), the
	// engine's bound on an order it materializes: the blend keeps 16
	// bytes a sample.
	Size int
}

// maxBlendSize bounds BlendConfig.Size: engine.Concat's bound on the
// samples of its datasets (2^34), and the 16 bytes a sample of the
// blend's tables (global and the engine.Subset's copy) within an int.
const maxBlendSize = min(1<<34, math.MaxInt/16)

// maxBlendDatasets bounds the datasets of a blend, so that the integers
// of blendOrder's rule fit in 64 bits: 2(n−1)×(Size+1) < 2^64.
const maxBlendDatasets = 1 << 28

// BlendedDataset is a map-style engine.Dataset that mixes datasets by
// weight, as Megatron's BlendedDataset does (Blend).
type BlendedDataset struct {
	sub     engine.Dataset // an engine.Subset of an engine.Concat of the datasets
	global  []int          // global[i]: the blend's sample i in the Concat
	ends    []int          // ends[k]: samples in datasets 0..k
	weights []float64
}

// Blend returns a dataset of cfg.Size samples that mixes datasets by
// cfg.Weights, as Megatron's BlendedDataset does: position i of the
// blend is the next sample of one dataset k, the dataset's count[k]-th,
// modulo its Len, so that a dataset shorter than its share repeats from
// its start. k is chosen by Tijdeman's rule for the chairman assignment
// problem: at position t (from 1), among the datasets whose lag
// share[k]×t − count[k] is at least 1/(2(n−1)), the one whose next
// deadline (count[k] + 1 − 1/(2(n−1)))/share[k] comes first (the first
// on a tie). After every prefix of t samples, each dataset's count is
// then within
//
//	1 − 1/(2(n−1))
//
// samples of its share, share[k]×t, where n is the datasets with a weight
// above 0 (0.5 for two, 0.75 for three, 0.875 for five, under 1 for any
// n; 0 for one). Tijdeman showed that no rule keeps a smaller bound for
// every weight vector. Megatron's helpers.cpp (build_blending_indices)
// takes the dataset that lags its share the most, which can leave a
// dataset more than one sample off from 5 datasets on; the two orders
// agree on many weights, not on all.
//
// The shares are the weights' ratios taken in integers: each weight
// scaled by the same power of 2 and rounded, the largest to 61 − L bits
// (L = bits.Len(len(Weights)): 55 bits for 32 datasets). That is exact
// for integer weights below 2^(61−L) and for weights whose binary
// exponents are within 8 − L of the largest's (0.7, 0.2 and 0.1 among
// them); otherwise each share is off by at most (len(Weights)+1)×2^(L−61),
// which adds that much a sample to the bound (under 2×10^-5 samples
// after 2^34 samples of 32 datasets). The order is a pure function of the weights and the lengths, in
// integer arithmetic: the same on every machine and for any Workers;
// shuffle the blend with the loader's Config.Shuffle, or let each dataset
// shuffle its own samples (a MegatronDataset does). The blend is
// map-style, so a loader resumes it from its State. The datasets must
// have the same schema; the error names the first field that differs.
//
// The index is built once, here, in O(Size × datasets) time and O(Size)
// memory: 8 bytes a sample kept by the blend and 8 by the engine.Subset
// it fills through, since engine offers no public way for a dataset
// outside it to re-point a Slot at another index; Fill runs the chosen
// dataset's Fill with the Slot's Index being that dataset's
// (engine.Concat and engine.Subset do the re-pointing), and Slot.Rand
// keyed by the blend's index.
func Blend(cfg BlendConfig, datasets ...engine.Dataset) (*BlendedDataset, error) {
	if len(datasets) == 0 {
		return nil, fmt.Errorf("shards: Blend: no datasets")
	}
	if len(datasets) > maxBlendDatasets {
		return nil, fmt.Errorf("shards: Blend: %d datasets, want at most %d", len(datasets), maxBlendDatasets)
	}
	if len(cfg.Weights) != len(datasets) {
		return nil, fmt.Errorf("shards: Blend: BlendConfig.Weights has %d weights for %d datasets", len(cfg.Weights), len(datasets))
	}
	if cfg.Size < 0 || cfg.Size > maxBlendSize {
		return nil, fmt.Errorf("shards: Blend: BlendConfig.Size is %d, want at most %d (16 bytes a sample) and >= 0", cfg.Size, maxBlendSize)
	}
	sum := 0.0
	for k, w := range cfg.Weights {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return nil, fmt.Errorf("shards: Blend: BlendConfig.Weights[%d] is %v, want a finite weight >= 0", k, w)
		}
		sum += w
	}
	if sum <= 0 || math.IsInf(sum, 0) {
		return nil, fmt.Errorf("shards: Blend: BlendConfig.Weights %v sum to %v, want a finite sum > 0", cfg.Weights, sum)
	}
	for k, d := range datasets {
		if d == nil {
			return nil, fmt.Errorf("shards: Blend: dataset %d is nil", k)
		}
	}
	cat, err := engine.Concat(datasets...) // checks each Len, and their sum against 2^34
	if err != nil {
		return nil, fmt.Errorf("shards: Blend: %w", err)
	}
	ends, lens := make([]int, len(datasets)), make([]int, len(datasets))
	n := 0
	for k, d := range datasets {
		lens[k] = d.Len()
		if lens[k] < 0 || lens[k] > maxBlendSize-n {
			return nil, fmt.Errorf("shards: Blend: dataset %d has Len %d, want 0 <= Len and %d samples in all at most", k, lens[k], maxBlendSize)
		}
		n += lens[k]
		ends[k] = n
		if cfg.Weights[k] > 0 && lens[k] == 0 {
			return nil, fmt.Errorf("shards: Blend: dataset %d is empty, and BlendConfig.Weights[%d] is %v, want 0", k, k, cfg.Weights[k])
		}
	}
	size := cfg.Size
	if size == 0 {
		size = n
	}
	weights := make([]float64, len(cfg.Weights))
	for k, w := range cfg.Weights {
		weights[k] = w / sum
	}
	global := make([]int, size)
	counts := make([]int, len(datasets))
	err = blendOrder(blendShares(cfg.Weights), size, func(i, k int) {
		global[i] = counts[k] % lens[k] // lens[k] > 0: weight k is above 0
		if k > 0 {
			global[i] += ends[k-1]
		}
		counts[k]++
	})
	if err != nil {
		return nil, fmt.Errorf("shards: Blend: %w", err)
	}
	sub, err := engine.Subset(cat, global)
	if err != nil {
		return nil, fmt.Errorf("shards: Blend: %w", err)
	}
	return &BlendedDataset{sub: sub, global: global, ends: ends, weights: weights}, nil
}

// blendShares returns the weights as integers q in one scale: each
// weight times the same power of 2, rounded to the nearest, the largest
// in [2^(K−1), 2^K] with K = 61 − bits.Len(len(weights)), so that their
// sum is below 2^61. The weights are finite, at least 0, not all 0.
// Ldexp scales exactly (down to subnormals, where it rounds) and Round
// is exact: the same integers on every machine.
func blendShares(weights []float64) []uint64 {
	_, e := math.Frexp(slices.Max(weights)) // largest = f×2^e, f in [0.5, 1)
	k := 61 - bits.Len(uint(len(weights)))
	q := make([]uint64, len(weights))
	for i, w := range weights {
		q[i] = uint64(math.Round(math.Ldexp(w, k-e)))
	}
	return q
}

// blendOrder calls take(i, k) for each position i in [0, size) in turn,
// k being the dataset whose sample position i is. The shares are q[k]/Q,
// Q = Σq < 2^61, and k is chosen by Tijdeman's rule ("The chairman
// assignment problem", Discrete Mathematics 32, 1980), which keeps every
// prefix of t samples within B = 1 − 1/(2(n−1)) of the shares:
// |count[k] − q[k]×t/Q| ≤ B for every k and t, n being the k with
// q[k] > 0 (B = 0 for n = 1: always that one).
//
// NOTE [tijdeman]. With the positions t counted from 1, dataset k's j-th
// sample may come at t only when j − share×t ≤ B, that is from
// t ≥ (j − B)/share, its release, and must come by the first t at which
// j − 1 − share×t < −B would hold without it, that is at
// t ≤ (j − 1 + B)/share + 1, its deadline: a unit job a sample, with a
// release time and a deadline, one job a position. At position t the
// rule takes, among the datasets whose next job is released
// (share×t − count[k] ≥ 1 − B: "eligible"), the one whose deadline comes
// first, the smallest (count[k] + B)/share (the first such k on a tie).
// Earliest-deadline-first meets every deadline whenever some order does,
// and Tijdeman proved that some order does for this B. An eligible
// dataset always exists: the lags share×t − count[k] sum to 1 over the
// n datasets, and n×(1 − B) = n/(2(n−1)) ≤ 1. (TestBlendBound checks
// the bound exhaustively on small weights and at random on large ones.)
//
// The arithmetic is exact, in integers, with D = 2(n−1):
//   - s[k] = q[k]×t − count[k]×Q is Q times k's lag; eligible is
//     D×s[k] ≥ Q, that is s[k] ≥ ⌈Q/D⌉. Through the bound, s[k] stays in
//     (−2Q, 2Q), within an int64.
//   - The deadline (count[k] + B)/share is (D×count[k] + D − 1)×Q /
//     (D×q[k]); its numerator key[k] = D×count[k] + D − 1 ≤ D×(size+1)
//     fits a uint64 (maxBlendDatasets, maxBlendSize), and two deadlines
//     compare as key[a]×q[b] < key[b]×q[a] in 128 bits.
//
// Each position costs O(n).
func blendOrder(q []uint64, size int, take func(i, k int)) error {
	var active []int // the k with q[k] > 0, in order
	var total uint64
	for k, v := range q {
		if v > 0 {
			active = append(active, k)
			total += v
		}
	}
	if len(active) == 1 {
		for i := range size {
			take(i, active[0])
		}
		return nil
	}
	d := uint64(2 * (len(active) - 1))
	thr := int64((total + d - 1) / d) // ⌈Q/D⌉
	s := make([]int64, len(q))
	key := make([]uint64, len(q))
	for _, k := range active {
		key[k] = d - 1
	}
	for i := range size {
		best := -1
		for _, k := range active {
			s[k] += int64(q[k])
			if s[k] < thr {
				continue
			}
			if best < 0 {
				best = k
				continue
			}
			// key[k]/q[k] < key[best]/q[best]?
			hk, lk := bits.Mul64(key[k], q[best])
			hb, lb := bits.Mul64(key[best], q[k])
			if hk < hb || hk == hb && lk < lb {
				best = k
			}
		}
		if best < 0 { // not reached (NOTE [tijdeman]): the lags sum to 1
			return fmt.Errorf("position %d: no dataset is eligible (shares %v): a bug", i, q)
		}
		s[best] -= int64(total)
		key[best] += d
		take(i, best)
	}
	return nil
}

// Len returns the samples of an epoch: BlendConfig.Size, or the sum of
// the datasets' lengths.
func (b *BlendedDataset) Len() int { return len(b.global) }

// Schema returns the datasets' schema.
func (b *BlendedDataset) Schema() collate.Schema { return b.sub.Schema() }

// Fill writes the blend's sample s.Index(): sample Source(s.Index()) of
// its dataset.
func (b *BlendedDataset) Fill(ctx context.Context, s *engine.Slot) error {
	if err := b.sub.Fill(ctx, s); err != nil {
		return fmt.Errorf("shards: Blend: %w", err)
	}
	return nil
}

// WritesEveryByte reports whether every dataset blended does
// (engine.FullWriter).
func (b *BlendedDataset) WritesEveryByte() bool {
	f, ok := b.sub.(engine.FullWriter)
	return ok && f.WritesEveryByte()
}

// Source returns the dataset and the sample within it that the blend's
// sample i is.
func (b *BlendedDataset) Source(i int) (dataset, sample int) {
	g := b.global[i]
	for dataset = 0; g >= b.ends[dataset]; dataset++ {
	}
	if dataset > 0 {
		g -= b.ends[dataset-1]
	}
	return dataset, g
}

// Weights returns the weights divided by their sum.
func (b *BlendedDataset) Weights() []float64 { return append([]float64(nil), b.weights...) }
