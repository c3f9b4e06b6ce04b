package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/stat/distuv"
)

// lazyOf returns s's order computed per position.
func lazyOf(t testing.TB, s lazySampler, epoch int) lazyOrder {
	o, ok := s.lazy(epoch)
	require.True(t, ok)
	return o
}

// Every position of every small N maps to a distinct index below N.
func TestShuffledIsAPermutationOfEverySmallN(t *testing.T) {
	t.Parallel()
	seen, stamp := make([]int, 2001), 0
	for n := range 2001 {
		for _, seed := range []uint64{0, 0xdeadbeef} {
			for _, epoch := range []int{0, 1 << 40} {
				o := lazyOf(t, Shuffled{N: n, Seed: seed}, epoch)
				require.Equal(t, n, o.len())
				stamp++
				for i := range n {
					v := o.at(i)
					if v < 0 || v >= n || seen[v] == stamp {
						t.Fatalf("N %d, seed %d, epoch %d: position %d gives %d, out of range or seen before", n, seed, epoch, i, v)
					}
					seen[v] = stamp
				}
			}
		}
	}
}

// Large N, sampled: no two positions give the same index, all below N.
func TestShuffledIsAPermutationOfLargeN(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1e12 + 7, 1<<61 + 1, 1<<62 - 3, maxLazySamples} {
		o := lazyOf(t, Shuffled{N: n, Seed: 11}, 5)
		r := rand.New(rand.NewPCG(1, 2))
		got := make(map[int]int, 1e5)
		for k := range 100_000 {
			i := k // the first positions, then random ones
			if k >= 1000 {
				i = r.IntN(n)
			}
			if _, dup := got[i]; dup {
				continue
			}
			v := o.at(i)
			require.True(t, v >= 0 && v < n, "N %d: position %d gives %d", n, i, v)
			_, dup := got[v]
			require.False(t, dup, "N %d: index %d twice", n, v)
			got[v] = i
		}
	}
}

// shuffleAlpha is the significance at which TestShuffledIsUniform
// rejects a shuffle. The seeds are fixed, so each statistic is too: the
// test cannot flake, and a uniform shuffle passes all of its hundreds
// of statistics but with probability about 10⁻³.
const shuffleAlpha = 1e-6

// chiSquare returns the p-value of counts against equal expectations.
func chiSquare(counts []int) (chi2, p float64) {
	total := 0
	for _, c := range counts {
		total += c
	}
	want := float64(total) / float64(len(counts))
	for _, c := range counts {
		d := float64(c) - want
		chi2 += d * d / want
	}
	return chi2, distuv.ChiSquared{K: float64(len(counts) - 1)}.Survival(chi2)
}

// A shuffle is uniform at every N: over many seeds, the index at each of
// the first positions (N = 2…64), the ordered pair at positions 0 and 1
// (N = 2…17) and the whole permutation (N = 2…5) fall in each of their
// categories about equally often, by χ² at shuffleAlpha. So do the
// permutations of later draws (NumSamples past N) and of later epochs.
// Past smallShuffle the order is the Feistel network's, whose first
// positions are checked the same way at a few N.
func TestShuffledIsUniform(t *testing.T) {
	t.Parallel()
	type stat struct {
		name   string
		counts []int
		at     func(o lazyOrder) int // the category of an order
	}
	check := func(n int, order func(seed uint64) lazyOrder, stats []stat) {
		seeds := 20000
		for _, s := range stats {
			seeds = max(seeds, 40*len(s.counts))
		}
		for seed := range uint64(seeds) {
			o := order(seed)
			for _, s := range stats {
				s.counts[s.at(o)]++
			}
		}
		for _, s := range stats {
			chi2, p := chiSquare(s.counts)
			assert.Greater(t, p, shuffleAlpha, "N %d, %s: chi-square %.1f on %d degrees of freedom over %d seeds", n, s.name, chi2, len(s.counts)-1, seeds)
		}
	}
	position := func(n, i int) stat {
		return stat{fmt.Sprintf("the index at position %d", i), make([]int, n), func(o lazyOrder) int { return o.at(i) }}
	}
	for n := 2; n <= 64; n++ {
		stats := []stat{position(n, 0), position(n, 1), position(n, n-1)}
		if n <= 17 {
			pair := func(o lazyOrder) int { // the n(n-1) ordered pairs of distinct indices
				a, b := o.at(0), o.at(1)
				if b > a {
					b--
				}
				return a*(n-1) + b
			}
			stats = append(stats, stat{"the pair at positions 0 and 1", make([]int, n*(n-1)), pair})
		}
		if n <= 5 {
			stats = append(stats, stat{"the permutation", make([]int, int(math.Round(math.Gamma(float64(n+1))))), func(o lazyOrder) int { return permRank(materialize(o)) }})
		}
		check(n, func(seed uint64) lazyOrder { return lazyOf(t, Shuffled{N: n, Seed: seed}, 0) }, stats)
	}
	for _, n := range []int{2, 3, 6, 17, 64} { // later draws and epochs
		draw := func(o lazyOrder) int { return o.at(n + 1) }
		check(n, func(seed uint64) lazyOrder { return lazyOf(t, Shuffled{N: n, Seed: seed, NumSamples: 3 * n}, 0) },
			[]stat{{"the index at position 1 of draw 1", make([]int, n), draw}})
		check(n, func(seed uint64) lazyOrder { return lazyOf(t, Shuffled{N: n, Seed: 7}, int(seed)) },
			[]stat{position(n, 0), position(n, n-1)})
	}
	for _, n := range []int{smallShuffle + 1, 1000, 5000} { // the Feistel network's
		check(n, func(seed uint64) lazyOrder { return lazyOf(t, Shuffled{N: n, Seed: seed}, 0) }, []stat{position(n, 0), position(n, n/2)})
	}
}

// permRank numbers a permutation of 0..len(p)-1 in [0, len(p)!).
func permRank(p []int) int {
	rank := 0
	for i := range p {
		smaller := 0
		for _, v := range p[i+1:] {
			if v < p[i] {
				smaller++
			}
		}
		rank = rank*(len(p)-i) + smaller
	}
	return rank
}

// Epochs, seeds and draws give other permutations.
func TestShuffledKeysDiffer(t *testing.T) {
	t.Parallel()
	base := Shuffled{N: 1000, Seed: 1}.Order(0)
	assert.NotEqual(t, base, Shuffled{N: 1000, Seed: 2}.Order(0))
	assert.NotEqual(t, base, Shuffled{N: 1000, Seed: 1}.Order(1))
	long := Shuffled{N: 1000, Seed: 1, NumSamples: 2500}.Order(0)
	assert.Equal(t, base, long[:1000])
	assert.NotEqual(t, long[:1000], long[1000:2000])
	assert.ElementsMatch(t, base, long[1000:2000])
}

// The first position costs O(1) memory at any N: a few small allocations.
func TestShuffledFirstPositionTakesConstantMemory(t *testing.T) {
	for _, n := range []int{1e6, 1e8, 1e10, maxLazySamples} {
		s := Shuffled{N: n, Seed: 3}
		allocs := testing.AllocsPerRun(100, func() { lazyOf(t, s, 7).at(0) })
		assert.LessOrEqual(t, allocs, 2.0, "N %d", n)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100 {
			lazyOf(t, s, 7).at(0)
		}
		runtime.ReadMemStats(&after)
		assert.Less(t, (after.TotalAlloc-before.TotalAlloc)/100, uint64(1024), "N %d: bytes a first position", n)
	}
}

// The lazy orders are the materialized ones: Shuffled (with NumSamples)
// and the split across ranks, with padding, DropUneven and a resume's
// skip.
func TestLazyOrdersAreTheirOrders(t *testing.T) {
	t.Parallel()
	samplers := []lazySampler{Sequential{N: 0}, Sequential{N: 13}, Shuffled{N: 1}, Shuffled{N: 13, Seed: 4}, Shuffled{N: 7, Seed: 4, NumSamples: 23}, Shuffled{N: 50, Seed: 9, NumSamples: 3}}
	for _, s := range samplers {
		for epoch := range 3 {
			checkLazy(t, s.Order(epoch), lazyOf(t, s, epoch), s)
			for _, w := range []int{1, 2, 3, 5} {
				for rank := range w {
					for _, drop := range []bool{false, true} {
						for _, skip := range []int{0, 1, 4, 100} {
							d := rankSplit{s, RankInfo{Rank: rank, WorldSize: w}, drop, skip, lazyOf(t, s, epoch).span()}
							want := d.Order(epoch)
							got, ok := d.lazy(epoch)
							require.True(t, ok)
							checkLazy(t, want, got, d)
							b := Batched{Sampler: d, Size: 2, DropLast: drop}
							list, ok := b.lazyList(epoch)
							require.True(t, ok)
							batches := b.Batches(epoch)
							require.Equal(t, len(batches), list.count())
							n := 0
							for k, batch := range batches {
								assert.Equal(t, batch, list.batch(k, nil))
								assert.Equal(t, len(batch), list.size(k))
								n += len(batch)
							}
							assert.Equal(t, n, list.samples())
						}
					}
				}
			}
		}
	}
}

// checkLazy checks that o's len, at and fill give want, fill over every
// run of positions.
func checkLazy(t *testing.T, want []int, o lazyOrder, what any) {
	t.Helper()
	require.Equal(t, len(want), o.len(), "%#v", what)
	for i, index := range want {
		require.Equal(t, index, o.at(i), "%#v: position %d", what, i)
	}
	for from := range len(want) + 1 {
		for to := from; to <= len(want); to++ {
			got := make([]int, to-from)
			o.fill(got, from)
			require.Equal(t, want[from:to], got, "%#v: fill of [%d, %d)", what, from, to)
		}
	}
}

// BenchmarkShuffledBatch is the cost of a batch's 32 positions of a
// shuffled epoch's order, by fill (as the loader computes them) and by
// at, one after the other.
func BenchmarkShuffledBatch(b *testing.B) {
	for _, n := range []int{1e6, 3 << 20, 1e10} { // 3<<20: 2^b = 4/3 n, a third of the encryptions walk on
		for _, byFill := range []bool{true, false} {
			b.Run(fmt.Sprintf("N=%.0e/fill=%v", float64(n), byFill), func(b *testing.B) {
				o := lazyOf(b, Shuffled{N: n, Seed: 1}, 0)
				dst := make([]int, 32)
				from := 0
				for b.Loop() {
					if byFill {
						o.fill(dst, from)
					} else {
						for j := range dst {
							dst[j] = o.at(from + j)
						}
					}
					if from += 32; from+32 > n {
						from = 0
					}
				}
			})
		}
	}
}

// BenchmarkShuffledPosition is the cost of one position of a shuffled
// epoch's order, computed on its own (the loader's per-sample cost).
func BenchmarkShuffledPosition(b *testing.B) {
	for _, n := range []int{1e6, 1e8, 1e10} {
		b.Run(fmt.Sprintf("N=%.0e", float64(n)), func(b *testing.B) {
			o := lazyOf(b, Shuffled{N: n, Seed: 1}, 0)
			b.ReportAllocs()
			i, sum := 0, 0
			for b.Loop() {
				sum += o.at(i)
				if i++; i == n {
					i = 0
				}
			}
			_ = sum
		})
	}
}
