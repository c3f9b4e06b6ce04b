package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// perm must stay rand.Perm's permutation: the Shuffled and RandomSplit
// orders of earlier releases, which used rand.Perm, must not change.
func TestPermIsRandPerm(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 2, 3, 7, 1000, 1 << 17} {
		for seed := range uint64(3) {
			want := rand.New(rand.NewPCG(seed, 42)).Perm(n)
			require.Equal(t, want, perm(rand.NewPCG(seed, 42), make([]int, n)), "n %d, seed %d", n, seed)
		}
	}
	// Successive permutations from one generator, as NumSamples draws them.
	a, b := rand.New(rand.NewPCG(5, 6)), rand.NewPCG(5, 6)
	p := make([]int, 100)
	for range 3 {
		require.Equal(t, a.Perm(100), perm(b, p))
	}
}

// uint64n draws what rand's Uint64N draws from the same PCG, rejections
// included (large n that are not powers of two reject often).
func TestUint64nIsRandUint64N(t *testing.T) {
	t.Parallel()
	r, src := rand.New(rand.NewPCG(9, 10)), rand.NewPCG(9, 10)
	ns := []uint64{1, 2, 3, 7, 1 << 20, 1<<20 + 1, 1 << 63, 1<<63 + 1, 3 << 62, ^uint64(0)}
	for i := range 2000 {
		ns = append(ns, uint64(i+1)*0x9e3779b97f4a7c15)
	}
	for _, n := range ns {
		for range 50 {
			require.Equal(t, r.Uint64N(n), uint64n(src, n), "n %d", n)
		}
	}
}
