package engine

import (
	"math/bits"
	"math/rand/v2"
)

// Sampler gives the order in which an epoch visits the dataset. Order must
// be a pure function of the epoch (and the sampler's own fields), so every
// run and every worker count sees the same order.
type Sampler interface {
	Order(epoch int) []int
}

// BatchSampler groups an epoch's indices into batches. Custom code can
// replace the built-in Batched (bucketing by length, say). Every batch must
// be non-empty; Batches must be a pure function of the epoch.
type BatchSampler interface {
	Batches(epoch int) [][]int
}

// Sequential visits 0, 1, ..., N-1 every epoch.
type Sequential struct{ N int }

// Validate reports a negative N; the error wraps ErrSampler.
func (s Sequential) Validate() error { return validateDraws("Sequential", s.N, 0) }

// Order returns 0..N-1.
func (s Sequential) Order(int) []int {
	mustValidate(s.Validate())
	idx := make([]int, s.N)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func (s Sequential) lazy(int) (lazyOrder, bool) {
	mustValidate(s.Validate())
	return seqOrder(s.N), true
}

// lazySampler is a Sampler whose order can be computed per position: the
// loader reads it so and never materializes an epoch (NOTE [feistel]).
type lazySampler interface {
	Sampler
	// lazy returns the epoch's order, the same as Order(epoch), or false
	// when it has none computed per position. It panics as Order does.
	lazy(epoch int) (lazyOrder, bool)
}

// lazyOrder is an epoch's order computed per position.
type lazyOrder interface {
	len() int
	// span bounds the indices: every at(i) is in [0, span()). The loader
	// compares it with the dataset's Len before an epoch starts, as it
	// checks a materialized order's every index (checkIndices).
	span() int
	at(i int) int // the index at position i, 0 <= i < len()
	// fill sets dst[j] to at(from+j), from+len(dst) <= len(): a batch's
	// indices in one call, not one through the interface each.
	fill(dst []int, from int)
}

// seqOrder is Sequential's order of n samples.
type seqOrder int

func (o seqOrder) len() int     { return int(o) }
func (o seqOrder) span() int    { return int(o) }
func (o seqOrder) at(i int) int { return i }

func (o seqOrder) fill(dst []int, from int) {
	for j := range dst {
		dst[j] = from + j
	}
}

// materialize returns the whole order.
func materialize(o lazyOrder) []int {
	out := make([]int, o.len())
	o.fill(out, 0)
	return out
}

// Shuffled visits a permutation of 0..N-1 that depends only on Seed and the
// epoch: a keyed Feistel permutation computed per position, so the loader
// never materializes it (O(1) memory, the first batch in under a
// millisecond at any N; see NOTE [feistel]). Order still returns the
// whole permutation, for callers who ask.
//
// NumSamples, when not 0, makes an epoch that many samples long, without
// replacement, as PyTorch's RandomSampler(num_samples=...): the epoch's
// permutation, then further permutations keyed by (Seed, epoch, draw), the
// last one cut short (so fewer than N is a prefix of the permutation). 0
// means N: one permutation, the same order as without NumSamples.
//
// An invalid Shuffled (see Validate) makes Order panic with Validate's
// error, which the Loader reports as the epoch's error.
type Shuffled struct {
	N          int
	Seed       uint64
	NumSamples int
}

// Validate reports an invalid N or NumSamples; the error wraps ErrSampler.
func (s Shuffled) Validate() error { return validateDraws("Shuffled", s.N, s.NumSamples) }

// validateDraws checks the N and NumSamples of sampler name, which draws
// NumSamples (0: N) indices from 0..N-1.
func validateDraws(name string, n, numSamples int) error {
	switch {
	case n < 0:
		return samplerError(name, "N is %d, want >= 0", n)
	case numSamples < 0:
		return samplerError(name, "NumSamples is %d, want >= 0 (0 means N)", numSamples)
	case n == 0 && numSamples > 0:
		return samplerError(name, "NumSamples is %d with N 0: nothing to draw from", numSamples)
	}
	return nil
}

// Order returns the epoch's permutation, or NumSamples samples of
// successive permutations.
func (s Shuffled) Order(epoch int) []int {
	o, _ := s.lazy(epoch)
	return materialize(o)
}

func (s Shuffled) lazy(epoch int) (lazyOrder, bool) {
	mustValidate(s.Validate())
	o := shuffledOrder{n: s.N, total: s.N, seed: s.Seed, epoch: epoch}
	if s.N <= smallShuffle {
		o.small = make([]int, s.N)
		o.draw(0, o.small)
	} else {
		o.first = newFeistel(s.N, shuffleKey(s.Seed, epoch, 0))
	}
	if s.NumSamples > 0 {
		o.total = s.NumSamples
	}
	return o, true
}

// smallShuffle is the largest N whose permutations are drawn by
// Fisher-Yates rather than computed per position: a Feistel network
// over a domain of a few bits reaches only some of the permutations
// (each of its rounds permutes the domain evenly), and unevenly, which
// shows at small N (N = 6: the first index χ² 59 on 5 degrees of
// freedom over 20,000 seeds; TestShuffledIsUniform). Up to
// smallShuffle a draw costs under a microsecond and 2 KiB.
const smallShuffle = 256

// shuffledOrder is Shuffled's order: total positions, successive
// permutations of 0..n-1 (draws) keyed by (seed, epoch, draw). Draw 0 is
// small, when n <= smallShuffle, else first's.
type shuffledOrder struct {
	n, total int
	seed     uint64
	epoch    int
	first    feistel // draw 0, past smallShuffle
	small    []int   // draw 0, up to smallShuffle
}

func (o shuffledOrder) len() int  { return o.total }
func (o shuffledOrder) span() int { return o.n }

// draw fills p (len n <= smallShuffle) with permutation d: Fisher-Yates
// from a PCG keyed by (seed, epoch, d).
func (o shuffledOrder) draw(d int, p []int) {
	perm(rand.NewPCG(shuffleKey(o.seed, o.epoch, d), 0x46495348), p) // "FISH"
}

func (o shuffledOrder) at(i int) int {
	switch {
	case i < o.n && o.small != nil:
		return o.small[i]
	case i < o.n:
		return o.first.at(i)
	case o.n <= smallShuffle:
		var p [smallShuffle]int
		o.draw(i/o.n, p[:o.n])
		return p[i%o.n]
	}
	f := newFeistel(o.n, shuffleKey(o.seed, o.epoch, i/o.n))
	return f.at(i % o.n)
}

func (o shuffledOrder) fill(dst []int, from int) {
	first := dst[:max(0, min(len(dst), o.n-from))]
	if o.small != nil {
		copy(first, o.small[min(from, o.n):])
	} else {
		o.first.fill(first, from)
	}
	rest := dst[len(first):]
	if o.n > smallShuffle {
		for j := range rest {
			rest[j] = o.at(from + len(first) + j)
		}
		return
	}
	var p [smallShuffle]int // one draw for each draw the rest spans
	for j, d := 0, -1; j < len(rest); j++ {
		i := from + len(first) + j
		if i/o.n != d {
			d = i / o.n
			o.draw(d, p[:o.n])
		}
		rest[j] = p[i%o.n]
	}
}

// perm fills p with a permutation of 0..len(p)-1 drawn from src and
// returns it: the same permutation as rand.New(src).Perm(len(p))
// (Fisher-Yates from the end, TestPermIsRandPerm), with no swap callback,
// no allocation and no call through rand.Source. RandomSplit uses it.
func perm(src *rand.PCG, p []int) []int {
	for i := range p {
		p[i] = i
	}
	for i := len(p) - 1; i > 0; i-- {
		j := int(uint64n(src, uint64(i+1)))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// uint64n is math/rand/v2's Rand.Uint64N(n) on src, n > 0, called on the
// PCG itself (inlined) instead of through the Source interface: the same
// draws, Lemire's multiply-shift rejecting the low products below
// 2⁶⁴ mod n. (rand's 32-bit platforms give the same sequence by design.)
func uint64n(src *rand.PCG, n uint64) uint64 {
	if n&(n-1) == 0 {
		return src.Uint64() & (n - 1)
	}
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// Batched cuts a Sampler's order into batches of Size; the last one is
// shorter unless DropLast drops it.
type Batched struct {
	Sampler  Sampler
	Size     int
	DropLast bool
}

// Validate reports a nil or invalid Sampler or a Size below 1; the error
// wraps ErrSampler.
func (b Batched) Validate() error {
	switch {
	case isNil(b.Sampler):
		return samplerError("Batched", "Sampler is nil")
	case b.Size < 1:
		return samplerError("Batched", "Size is %d, want > 0", b.Size)
	}
	if v, ok := b.Sampler.(Validator); ok {
		return v.Validate()
	}
	return nil
}

// Batches returns the epoch's batches; they share one backing array.
// An invalid Batched (see Validate) makes it panic with Validate's error.
func (b Batched) Batches(epoch int) [][]int {
	mustValidate(b.Validate())
	order := b.Sampler.Order(epoch)
	out := make([][]int, b.count(len(order)))
	for i := range out {
		out[i] = order[i*b.Size : min((i+1)*b.Size, len(order))]
	}
	return out
}

// count returns the batches of an order of n samples.
func (b Batched) count(n int) int {
	if b.DropLast {
		return n / b.Size
	}
	return ceilDiv(n, b.Size)
}

// ceilDiv returns ⌈n/d⌉ for n >= 0, d > 0, without overflow.
func ceilDiv(n, d int) int {
	q := n / d
	if n%d != 0 {
		q++
	}
	return q
}

// lazyList returns the epoch's batches computed per batch from the
// sampler's lazy order, or false when it has none: the loader reads
// them so, and never materializes the epoch.
func (b Batched) lazyList(epoch int) (lazyBatches, bool) {
	mustValidate(b.Validate())
	if ls, ok := b.Sampler.(lazySampler); ok {
		if o, ok := ls.lazy(epoch); ok {
			return lazyBatches{o: o, per: b.Size, n: b.count(o.len())}, true
		}
	}
	return lazyBatches{}, false
}

// batchList is an epoch's batches on one rank, as the loader reads them.
type batchList interface {
	count() int
	size(k int) int
	// batch returns batch k's indices: a materialized list's own slice,
	// or, for a lazy list, dst (len size(k); nil: a new slice) filled.
	// The delivered Batch keeps what it returns.
	batch(k int, dst []int) []int
	samples() int // the sum of the sizes
}

// sliceBatches is a materialized batchList: a BatchSampler's.
type sliceBatches [][]int

func (s sliceBatches) count() int                 { return len(s) }
func (s sliceBatches) size(k int) int             { return len(s[k]) }
func (s sliceBatches) batch(k int, _ []int) []int { return s[k] }
func (s sliceBatches) samples() int {
	n := 0
	for _, b := range s {
		n += len(b)
	}
	return n
}

// lazyBatches cuts a lazy order into n batches of size, the last one
// shorter unless cut off (Batched).
type lazyBatches struct {
	o   lazyOrder
	per int // samples a batch
	n   int // batches
}

func (l lazyBatches) count() int     { return l.n }
func (l lazyBatches) size(k int) int { return min(l.per, l.o.len()-k*l.per) }
func (l lazyBatches) samples() int   { return min(l.n*l.per, l.o.len()) }

func (l lazyBatches) batch(k int, dst []int) []int {
	if dst == nil {
		dst = make([]int, l.size(k))
	}
	l.o.fill(dst, k*l.per)
	return dst
}

// pickedBatches is the batches of a list whose numbers are listed, in
// that order (an out-of-order resume skips the ones delivered).
type pickedBatches struct {
	all    batchList
	picked []int
}

func (p pickedBatches) count() int                   { return len(p.picked) }
func (p pickedBatches) size(k int) int               { return p.all.size(p.picked[k]) }
func (p pickedBatches) batch(k int, dst []int) []int { return p.all.batch(p.picked[k], dst) }
func (p pickedBatches) samples() int {
	n := 0
	for k := range p.picked {
		n += p.size(k)
	}
	return n
}

// checkIndices panics with an orderError, naming the Config field the
// order came from, unless every index of batch k (-1: of an order) is in
// [0, n). rankSplit and rankBatches check the global order with it,
// before the split across ranks, so that every rank refuses the same
// epoch; a lazy order is checked by its span instead (epochBatches).
func checkIndices(idx []int, n int, field string, k int) {
	if k >= 0 && len(idx) == 0 {
		panic(orderError{configError(field, "the batch sampler gave an empty batch %d", k)})
	}
	for j, i := range idx {
		switch {
		case i >= 0 && i < n:
		case k >= 0:
			panic(orderError{configError(field, "the batch sampler gave index %d at batch %d, position %d; the dataset has %d samples", i, k, j, n)})
		default:
			panic(orderError{configError(field, "the sampler gave index %d at position %d; the dataset has %d samples", i, j, n)})
		}
	}
}

// orderError is the panic of checkIndices: epochBatches returns its
// error as it is.
type orderError struct{ error }

// mix is SplitMix64's finalizer: a bijective 64-bit hash.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// SampleSeed returns the two words that seed the RNG of sample index in
// epoch under seed. Slot.Rand is a PCG seeded with them; kernels that need
// their own counter-based stream key it with the same words.
func SampleSeed(seed uint64, epoch, index int) (uint64, uint64) {
	hi := mix(seed ^ mix(uint64(epoch)))
	return hi, mix(hi ^ uint64(index))
}
