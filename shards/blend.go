package shards

import (
	"context"
	"fmt"
	"math"

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
	// of the datasets' lengths.
	Size int
}

// BlendedDataset is a map-style engine.Dataset that mixes datasets by
// weight, as Megatron's BlendedDataset does (Blend).
type BlendedDataset struct {
	sub     engine.Dataset // an engine.Subset of an engine.Concat of the datasets
	global  []int          // global[i]: the blend's sample i in the Concat
	ends    []int          // ends[k]: samples in datasets 0..k
	weights []float64
}

// Blend returns a dataset of cfg.Size samples that mixes datasets by
// cfg.Weights, as Megatron's BlendedDataset: for each position i in
// turn, the blend takes the next sample of the dataset whose count lags
// its target share the most, the k with the largest
// weight[k]×(i+1) − count[k] (Megatron's helpers.cpp
// build_blending_indices; the first such k on a tie), and that sample is
// the dataset's count[k]-th, modulo its Len, so a dataset shorter than
// its share repeats from its start. (Megatron's helpers.cpp takes the
// target at max(i, 1) rather than i+1; i+1 is the count after the
// sample, which keeps every prefix within one sample of its shares.)
//
// The order is a pure function of the weights and the lengths: the same
// on every machine and for any Workers; shuffle the blend with the
// loader's Config.Shuffle, or let each dataset shuffle its own samples
// (a MegatronDataset does). The blend is map-style, so a loader resumes
// it from its State. The datasets must have the same schema; the error
// names the first field that differs.
//
// The index is built once, here, in O(Size) time and memory: 8 bytes a
// sample kept by the blend and 8 by the engine.Subset it fills through,
// since engine offers no public way for a dataset outside it to re-point
// a Slot at another index; Fill runs the chosen dataset's Fill with the
// Slot's Index being that dataset's (engine.Concat and engine.Subset do
// the re-pointing), and Slot.Rand keyed by the blend's index.
func Blend(cfg BlendConfig, datasets ...engine.Dataset) (*BlendedDataset, error) {
	if len(datasets) == 0 {
		return nil, fmt.Errorf("shards: Blend: no datasets")
	}
	if len(cfg.Weights) != len(datasets) {
		return nil, fmt.Errorf("shards: Blend: BlendConfig.Weights has %d weights for %d datasets", len(cfg.Weights), len(datasets))
	}
	if cfg.Size < 0 {
		return nil, fmt.Errorf("shards: Blend: BlendConfig.Size is %d, want >= 0", cfg.Size)
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
	cat, err := engine.Concat(datasets...)
	if err != nil {
		return nil, fmt.Errorf("shards: Blend: %w", err)
	}
	ends := make([]int, len(datasets))
	n := 0
	for k, d := range datasets {
		n += d.Len()
		ends[k] = n
		if cfg.Weights[k] > 0 && d.Len() == 0 {
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
	for i := range global {
		best, lag := 0, math.Inf(-1)
		for k, w := range weights {
			if e := w*float64(i+1) - float64(counts[k]); e > lag {
				best, lag = k, e
			}
		}
		inner := counts[best] % datasets[best].Len()
		if best > 0 {
			inner += ends[best-1]
		}
		global[i] = inner
		counts[best]++
	}
	sub, err := engine.Subset(cat, global)
	if err != nil {
		return nil, fmt.Errorf("shards: Blend: %w", err)
	}
	return &BlendedDataset{sub: sub, global: global, ends: ends, weights: weights}, nil
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
