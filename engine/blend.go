package engine

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/tensorbatch/tensorbatch/collate"
)

// BlendConfig configures a blend of corpora (Blend).
type BlendConfig struct {
	// Weights is each dataset's share of the samples, in the order of
	// the datasets: finite, at least 0, not all 0. They need not sum to
	// 1; Blend divides them by their sum.
	Weights []float64
	// Size is the blend's Len, the samples of an epoch; 0 means the sum
	// of the datasets' lengths. At most 2^34 (on 64-bit machines), the
	// loader's bound on an order it materializes: the blend keeps 8 bytes
	// a sample.
	Size int
}

// maxBlendSize bounds BlendConfig.Size: Concat's bound on the samples of
// its datasets (maxSamples, 2^34), with the blend's table (8 bytes a
// sample) within an int.
const maxBlendSize = min(maxSamples, math.MaxInt/16)

// maxBlendDatasets bounds the datasets of a blend, so that the integers
// of blendOrder's rule fit in 64 bits: 2(n−1)×(Size+1) < 2^64.
const maxBlendDatasets = 1 << 28

// blended is the Dataset of Blend.
type blended struct {
	cat    *concatDataset // the datasets, one after another
	global []int          // global[i]: the blend's sample i in cat
	cfg    BlendConfig    // Size filled in
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
// memory, 8 bytes a sample. Fill runs the chosen dataset's Fill through
// FillAt, with Slot.Index that dataset's and Slot.Rand keyed by the
// blend's index. The blend has every capability of its datasets (see
// Concat): when they are all BatchFillers it is one, and a batch whose
// samples are all of one dataset goes to that dataset's FillBatch. Its
// Locate(i) method says which dataset and sample position i is.
func Blend(cfg BlendConfig, datasets ...Dataset) (Dataset, error) {
	if len(datasets) == 0 {
		return nil, fmt.Errorf("engine: Blend: no datasets")
	}
	if len(datasets) > maxBlendDatasets {
		return nil, fmt.Errorf("engine: Blend: %d datasets, want at most %d", len(datasets), maxBlendDatasets)
	}
	if len(cfg.Weights) != len(datasets) {
		return nil, fmt.Errorf("engine: Blend: BlendConfig.Weights has %d weights for %d datasets", len(cfg.Weights), len(datasets))
	}
	if cfg.Size < 0 || cfg.Size > maxBlendSize {
		return nil, fmt.Errorf("engine: Blend: BlendConfig.Size is %d, want at most %d (8 bytes a sample) and >= 0", cfg.Size, maxBlendSize)
	}
	sum := 0.0
	for k, w := range cfg.Weights {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return nil, fmt.Errorf("engine: Blend: BlendConfig.Weights[%d] is %v, want a finite weight >= 0", k, w)
		}
		sum += w
	}
	if sum <= 0 || math.IsInf(sum, 0) {
		return nil, fmt.Errorf("engine: Blend: BlendConfig.Weights %v sum to %v, want a finite sum > 0", cfg.Weights, sum)
	}
	for k, d := range datasets {
		if d == nil {
			return nil, fmt.Errorf("engine: Blend: dataset %d is nil", k)
		}
	}
	c, err := Concat(datasets...) // checks each Len, and their sum against 2^34
	if err != nil {
		return nil, fmt.Errorf("engine: Blend: %w", err)
	}
	cat := concatOf(c)
	lens := make([]int, len(datasets))
	for k := range datasets {
		if lens[k] = cat.ends[k]; k > 0 {
			lens[k] -= cat.ends[k-1]
		}
		if cfg.Weights[k] > 0 && lens[k] == 0 {
			return nil, fmt.Errorf("engine: Blend: dataset %d is empty, and BlendConfig.Weights[%d] is %v, want 0", k, k, cfg.Weights[k])
		}
	}
	size := cfg.Size
	if size == 0 {
		size = cat.Len()
	}
	if size > maxBlendSize {
		return nil, fmt.Errorf("engine: Blend: BlendConfig.Size is 0 and the datasets have %d samples, want at most %d", size, maxBlendSize)
	}
	global := make([]int, size)
	counts := make([]int, len(datasets))
	err = blendOrder(blendShares(cfg.Weights), size, func(i, k int) {
		global[i] = counts[k] % lens[k] // lens[k] > 0: weight k is above 0
		if k > 0 {
			global[i] += cat.ends[k-1]
		}
		counts[k]++
	})
	if err != nil {
		return nil, fmt.Errorf("engine: Blend: %w", err)
	}
	b := &blended{cat: cat, global: global, cfg: BlendConfig{Weights: slices.Clone(cfg.Weights), Size: size}}
	if _, ok := c.(BatchFiller); ok {
		return blendedBatches{b}, nil
	}
	return b, nil
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
func (b *blended) Len() int { return len(b.global) }

// Schema returns the datasets' schema.
func (b *blended) Schema() collate.Schema { return b.cat.Schema() }

// Fill writes the blend's sample s.Index(): sample Locate(s.Index()) of
// its dataset.
func (b *blended) Fill(ctx context.Context, s *Slot) error {
	i := s.Index()
	if i < 0 || i >= len(b.global) {
		return fmt.Errorf("engine: Blend: index %d is out of range [0, %d)", i, len(b.global))
	}
	if err := FillAt(ctx, b.cat, s, b.global[i]); err != nil {
		return fmt.Errorf("engine: Blend: %w", err)
	}
	return nil
}

// WritesEveryByte reports whether every dataset blended does.
func (b *blended) WritesEveryByte() bool { return b.cat.WritesEveryByte() }

// Fingerprint: the weights, the size and the datasets' parts.
func (b *blended) Fingerprint() Fingerprint {
	w := make([]string, len(b.cfg.Weights))
	for k, x := range b.cfg.Weights {
		w[k] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	f := Fingerprint{"blend.weights": strings.Join(w, ","), "blend.size": strconv.Itoa(b.cfg.Size)}
	return f.Nest("blend", b.cat.Fingerprint())
}

// Report adds up the datasets' counts.
func (b *blended) Report() map[string]int64 { return b.cat.Report() }

// Locate returns the dataset and the sample within it that the blend's
// sample i is.
func (b *blended) Locate(i int) (dataset, sample int) {
	k, inner, _ := b.cat.locate(b.global[i])
	return k, inner
}

// blendedBatches is a Blend of BatchFillers.
type blendedBatches struct{ *blended }

// FillBatch fills the batch through its dataset's FillBatch when its
// samples are all of one dataset, else sample by sample (concatBatches).
func (b blendedBatches) FillBatch(ctx context.Context, s *BatchSlot) error {
	idx := s.Indices()
	global := make([]int, len(idx))
	for j, i := range idx {
		if i < 0 || i >= len(b.global) {
			return fmt.Errorf("engine: Blend: index %d is out of range [0, %d)", i, len(b.global))
		}
		global[j] = b.global[i]
	}
	return FillBatchAt(ctx, concatBatches{b.cat}, s, global)
}
