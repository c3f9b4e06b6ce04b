package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"

	"github.com/tensorbatch/tensorbatch/collate"
)

// Datasets built from datasets, as torch.utils.data's ConcatDataset, Subset
// and random_split.
//
// A wrapper's Fill runs the inner dataset's Fill with the slot re-pointed
// at the inner index (FillAt): Slot.Index is the inner dataset's, the views
// are the same sample's place in the batch. Slot.Rand and Slot.Seed stay
// keyed by the loader's (outer) index, (Seed, Epoch, outer Index). Either
// choice keeps a batch bit-identical for any Workers, since the inner index
// is a function of the outer one; the outer one also gives every sample of
// an epoch its own draws where the inner one would repeat them: a sample
// that Concat(ds, ds) or a Subset with repeated indices visits twice is
// augmented twice, independently, as PyTorch's global RNG would. The
// wrappers snapshot the inner lengths when they are made (as PyTorch does);
// an inner dataset must not change its length afterwards.
//
// A wrapper has every capability of what it wraps (capabilities.go): it
// writes every byte when they all do (FullWriter), fills whole batches
// when they all do (BatchFiller, through FillBatchAt: a batch that mixes
// datasets is filled sample by sample, BatchSlot.Slot), fingerprints them
// (Fingerprinter) and adds up their counts (Reporter).

// FillAt runs ds.Fill with s re-pointed at sample index of ds, restoring
// s's index afterwards, even on a panic (which the loader turns into the
// sample's SampleError). s's RNG is left as it is: keyed by the loader's
// index. A dataset that wraps others (Concat, Subset, Blend, or one of
// yours) fills through it.
func FillAt(ctx context.Context, ds Dataset, s *Slot, index int) error {
	outer := s.index
	s.index = index
	defer func() { s.index = outer }()
	return ds.Fill(ctx, s)
}

// Concat returns the datasets one after another, as PyTorch's
// ConcatDataset: sample i of dataset k is sample offset(k)+i of the result.
// The datasets must have the same schema; the error names the first field
// that differs.
func Concat(ds ...Dataset) (Dataset, error) {
	if len(ds) == 0 {
		return nil, fmt.Errorf("engine: Concat: no datasets")
	}
	c := &concatDataset{ds: slices.Clone(ds), ends: make([]int, len(ds))}
	n := 0
	for k, d := range ds {
		if d == nil {
			return nil, fmt.Errorf("engine: Concat: dataset %d is nil", k)
		}
		if err := checkDataset(fmt.Sprintf("Concat: dataset %d", k), d); err != nil {
			return nil, err
		}
	}
	for k, d := range ds {
		if err := sameSchema(ds[0].Schema(), d.Schema()); err != nil {
			return nil, fmt.Errorf("engine: Concat: dataset %d's schema differs from dataset 0's: %w", k, err)
		}
		m, err := datasetLen(d)
		if err != nil {
			return nil, fmt.Errorf("engine: Concat: dataset %d: %w", k, err)
		}
		if m > maxSamples-n {
			return nil, fmt.Errorf("engine: Concat: dataset %d has Len %d, want 0 <= Len and %d samples in all at most", k, m, maxSamples)
		}
		n += m
		c.ends[k] = n
	}
	for _, d := range ds {
		if _, ok := d.(BatchFiller); !ok {
			return c, nil
		}
	}
	return concatBatches{c}, nil
}

// sameSchema returns an error naming the first difference of got from want.
func sameSchema(want, got collate.Schema) error {
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if w.Name != g.Name || w.DType != g.DType || !slices.Equal(w.Shape, g.Shape) || w.MaxLen != g.MaxLen ||
			math.Float64bits(w.Pad) != math.Float64bits(g.Pad) {
			return fmt.Errorf("field %d is %s, want %s", i, fieldString(g), fieldString(w))
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d fields, want %d (%q)", len(got), len(want), want.Names())
	}
	return nil
}

func fieldString(f collate.Field) string {
	if f.IsDynamic() {
		return fmt.Sprintf("%v MaxLen %d Pad %v", f, f.MaxLen, f.Pad)
	}
	return f.String()
}

type concatDataset struct {
	ds   []Dataset
	ends []int // ends[k]: samples in ds[0..k]
}

func (c *concatDataset) Len() int               { return c.ends[len(c.ends)-1] }
func (c *concatDataset) Schema() collate.Schema { return c.ds[0].Schema() }

// WritesEveryByte reports whether every dataset concatenated does.
func (c *concatDataset) WritesEveryByte() bool {
	for _, d := range c.ds {
		if !writesEveryByte(d) {
			return false
		}
	}
	return true
}

// Fingerprint: each dataset's length and parts, by position.
func (c *concatDataset) Fingerprint() Fingerprint {
	f := Fingerprint{"concat": strconv.Itoa(len(c.ds))}
	start := 0
	for k, d := range c.ds {
		p := "concat." + strconv.Itoa(k)
		f[p+".len"] = strconv.Itoa(c.ends[k] - start)
		f.Nest(p, FingerprintOf(d))
		start = c.ends[k]
	}
	return f
}

func (c *concatDataset) Fill(ctx context.Context, s *Slot) error {
	k, inner, ok := c.locate(s.Index())
	if !ok {
		return fmt.Errorf("engine: Concat: index %d is out of range [0, %d)", s.Index(), c.Len())
	}
	if err := FillAt(ctx, c.ds[k], s, inner); err != nil {
		return fmt.Errorf("dataset %d, sample %d: %w", k, inner, err)
	}
	return nil
}

// concatOf returns the concatDataset of a Dataset Concat made.
func concatOf(d Dataset) *concatDataset {
	if c, ok := d.(concatBatches); ok {
		return c.concatDataset
	}
	return d.(*concatDataset)
}

// locate returns the dataset of sample i and its index there.
func (c *concatDataset) locate(i int) (k, inner int, ok bool) {
	k = sort.SearchInts(c.ends, i+1) // the first dataset that ends after i
	if i < 0 || k == len(c.ends) {
		return 0, 0, false
	}
	inner = i
	if k > 0 {
		inner -= c.ends[k-1]
	}
	return k, inner, true
}

// Report adds up the datasets' counts.
func (c *concatDataset) Report() map[string]int64 { return addReports(c.ds...) }

// concatBatches is a Concat of BatchFillers.
type concatBatches struct{ *concatDataset }

// FillBatch hands the batch to its dataset's FillBatch when its samples
// are all of one dataset, else fills them one by one.
func (c concatBatches) FillBatch(ctx context.Context, b *BatchSlot) error {
	idx := b.Indices()
	inner := make([]int, len(idx))
	first := -1
	for j, i := range idx {
		k, in, ok := c.locate(i)
		switch {
		case !ok:
			return fmt.Errorf("engine: Concat: index %d is out of range [0, %d)", i, c.Len())
		case first < 0:
			first = k
		case k != first:
			return c.fillEach(ctx, b)
		}
		inner[j] = in
	}
	return FillBatchAt(ctx, c.ds[first].(BatchFiller), b, inner)
}

// fillEach fills the samples of b one by one, Fill by Fill.
func (c concatBatches) fillEach(ctx context.Context, b *BatchSlot) error {
	for j := range b.Indices() {
		s := b.Slot(j)
		if err := c.Fill(ctx, s); err != nil {
			return &SampleError{Index: b.outer[j], Epoch: b.Epoch(), Worker: s.Worker(), Err: err}
		}
	}
	return nil
}

// Subset returns the samples indices of ds, in that order, as PyTorch's
// Subset: sample i of the result is sample indices[i] of ds. An index may
// appear more than once. Every index must be in [0, ds.Len()); the error
// names the first that is not, with its position. The indices are copied.
func Subset(ds Dataset, indices []int) (Dataset, error) {
	n, err := innerLen("Subset", ds)
	if err != nil {
		return nil, err
	}
	for pos, i := range indices {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("engine: Subset: index %d at position %d is out of range [0, %d)", i, pos, n)
		}
	}
	return newSubset(ds, slices.Clone(indices)), nil
}

// newSubset returns the subset idx of ds: a BatchFiller when ds is one.
func newSubset(ds Dataset, idx []int) Dataset {
	d := &subsetDataset{ds: ds, idx: idx}
	if _, ok := ds.(BatchFiller); ok {
		return subsetBatches{d}
	}
	return d
}

type subsetDataset struct {
	ds  Dataset
	idx []int
}

func (d *subsetDataset) Len() int               { return len(d.idx) }
func (d *subsetDataset) Schema() collate.Schema { return d.ds.Schema() }

// WritesEveryByte reports whether the dataset it is a subset of does.
func (d *subsetDataset) WritesEveryByte() bool { return writesEveryByte(d.ds) }

// Fingerprint: the indices (hashed), the length and parts of the dataset
// they index.
func (d *subsetDataset) Fingerprint() Fingerprint {
	f := Fingerprint{"subset.indices": fingerprintInts(d.idx)}
	if n, err := datasetLen(d.ds); err == nil {
		f["subset.of.len"] = strconv.Itoa(n)
	}
	return f.Nest("subset.of", FingerprintOf(d.ds))
}

func (d *subsetDataset) Fill(ctx context.Context, s *Slot) error {
	i := s.Index()
	if i < 0 || i >= len(d.idx) {
		return fmt.Errorf("engine: Subset: index %d is out of range [0, %d)", i, len(d.idx))
	}
	if err := FillAt(ctx, d.ds, s, d.idx[i]); err != nil {
		return fmt.Errorf("subset sample %d: %w", d.idx[i], err)
	}
	return nil
}

// RandomSplit splits ds into len(sizes) disjoint Subsets that cover it, as
// PyTorch's random_split: a permutation of ds's indices, a pure function of
// seed (math/rand/v2's PCG), is cut into consecutive parts. sizes are
// either fractions of ds.Len() that sum to 1 (each part gets the floor of
// its fraction, and the samples left over go one each to the parts in
// turn, from the first, as PyTorch does), or counts that sum to ds.Len().
// Like PyTorch, sizes that sum to 1 (within 1e-9) are fractions.
func RandomSplit(ds Dataset, seed uint64, sizes ...float64) ([]Dataset, error) {
	n, err := innerLen("RandomSplit", ds)
	if err != nil {
		return nil, err
	}
	counts, err := splitCounts(n, sizes)
	if err != nil {
		return nil, fmt.Errorf("engine: RandomSplit: %w", err)
	}
	order := perm(rand.NewPCG(seed, 0x53504c4954), make([]int, n)) // "SPLIT"
	out := make([]Dataset, len(counts))
	for k, c := range counts {
		out[k] = newSubset(ds, order[:c:c])
		order = order[c:]
	}
	return out, nil
}

// innerLen checks the dataset given to wrapper fn and returns its length.
func innerLen(fn string, ds Dataset) (int, error) {
	if err := checkDataset(fn, ds); err != nil {
		return 0, err
	}
	n, err := datasetLen(ds)
	if err != nil {
		return 0, fmt.Errorf("engine: %s: %w", fn, err)
	}
	return n, nil
}

// splitCounts turns RandomSplit's sizes into counts that sum to n.
func splitCounts(n int, sizes []float64) ([]int, error) {
	if len(sizes) == 0 {
		return nil, fmt.Errorf("no sizes")
	}
	sum := 0.0
	for k, f := range sizes {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("size %d is %v, want a fraction in [0, 1] or a count >= 0", k, f)
		}
		sum += f
	}
	counts := make([]int, len(sizes))
	// Python's math.isclose(sum, 1), relative tolerance 1e-9. (PyTorch also
	// wants sum <= 1, which refuses fractions whose float sum rounds just
	// above 1, as 0.1, 0.2, 0.7 may.)
	if math.Abs(sum-1) <= 1e-9 {
		left := n
		for k, f := range sizes {
			counts[k] = int(math.Floor(float64(n) * f))
			left -= counts[k]
		}
		for i := 0; left > 0; i++ {
			counts[i%len(counts)]++
			left--
		}
		for i := len(counts) - 1; left < 0; i = (i + len(counts) - 1) % len(counts) { // a sum just above 1 took too many
			if counts[i] > 0 {
				counts[i]--
				left++
			}
		}
		return counts, nil
	}
	total := 0
	for k, f := range sizes {
		if f != math.Trunc(f) || f > float64(n) {
			return nil, fmt.Errorf("sizes %v are neither fractions that sum to 1 nor counts that sum to Len %d: size %d is %v", sizes, n, k, f)
		}
		counts[k] = int(f)
		total += counts[k]
	}
	if total != n {
		return nil, fmt.Errorf("counts %v sum to %d, not to Len %d", sizes, total, n)
	}
	return counts, nil
}

// Report is the counts of the dataset it is a subset of.
func (d *subsetDataset) Report() map[string]int64 { return addReports(d.ds) }

// subsetBatches is a Subset of a BatchFiller.
type subsetBatches struct{ *subsetDataset }

// FillBatch hands the batch to the dataset's FillBatch, re-pointed.
func (d subsetBatches) FillBatch(ctx context.Context, b *BatchSlot) error {
	idx := b.Indices()
	inner := make([]int, len(idx))
	for j, i := range idx {
		if i < 0 || i >= len(d.idx) {
			return fmt.Errorf("engine: Subset: index %d is out of range [0, %d)", i, len(d.idx))
		}
		inner[j] = d.idx[i]
	}
	return FillBatchAt(ctx, d.ds.(BatchFiller), b, inner)
}
